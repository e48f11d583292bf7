//! MPI's calls that earlybird does not implement (`api/mpi.api` marks them, with why):
//! MPI-IO (`MPI_File_*`, `MPI_Register_datarep`), dynamic processes (spawn, ports, names,
//! join), sessions, and the calls not implemented yet (the README lists them). They
//! exist so that a binary that names them loads (a Python extension module is loaded with
//! every symbol bound at once), and each returns MPI_ERR_UNSUPPORTED_OPERATION with an error
//! code of its own, whose MPI_Error_string names the call and what is missing.
//!
//! The file calls return the code: a file's error handler is MPI_ERRORS_RETURN by default
//! (MPI 4.1 §9.3), and there is no file for a handler to be set on. The others raise it on
//! MPI_COMM_SELF, as MPI says for errors tied to no communicator (fatal unless the program
//! set MPI_ERRORS_RETURN there).
//!
//! The functions take no parameters: C callers pass their arguments in registers and on a
//! stack they clean up themselves (the System V calling convention), so a function that
//! reads none of them may be called with any.

use crate::abi::Handle;
use earlybird::{Error, ErrorClass};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;

thread_local! {
    static CODES: RefCell<HashMap<&'static str, c_int>> = RefCell::new(HashMap::new());
}

/// The error code of `name` (made at its first use: MPI_ERR_UNSUPPORTED_OPERATION, with a
/// string naming the call).
fn code_of(name: &'static str, what: &str) -> c_int {
    let made = CODES.with(|c| c.borrow().get(name).copied());
    if let Some(code) = made {
        return code;
    }
    let text = format!("{name}: {what} is not implemented by earlybird");
    let code = earlybird::add_error_code(ErrorClass::UnsupportedOperation)
        .and_then(|c| earlybird::add_error_string(c.code(), &text).map(|()| c.code()))
        .unwrap_or(ErrorClass::UnsupportedOperation.code());
    CODES.with(|c| c.borrow_mut().insert(name, code));
    code
}

fn file_call(name: &'static str, what: &str) -> c_int {
    code_of(name, what)
}

fn raised(name: &'static str, what: &str) -> c_int {
    let code = code_of(name, what);
    let e = Error::new(
        ErrorClass::UnsupportedOperation,
        format!("{name}: {what} is not implemented by earlybird"),
    );
    match crate::state::with_comm(crate::abi::COMM_SELF as Handle, |_| Err::<(), _>(e)) {
        Ok(()) => 0,
        Err(_) => code,
    }
}

macro_rules! unsupported {
    ($how:ident($what:literal): $($name:ident / $pname:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $pname() -> c_int {
            let _entry = crate::state::enter();
            $how(stringify!($name), $what)
        }

        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            $pname()
        }
    )*};
}

// The calls `api/mpi.api` marks as missing, with why (build.rs writes the list).
include!(concat!(env!("OUT_DIR"), "/stubs.rs"));
