//! MPI's calls that earlybird does not implement: MPI-IO (`MPI_File_*`,
//! `MPI_Register_datarep`), dynamic processes (spawn, ports, names, join) and sessions. They
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
            $how(stringify!($name), $what)
        }

        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            $pname()
        }
    )*};
}

unsupported! { file_call("MPI-IO"):
    MPI_File_call_errhandler / PMPI_File_call_errhandler,
    MPI_File_close / PMPI_File_close,
    MPI_File_create_errhandler / PMPI_File_create_errhandler,
    MPI_File_delete / PMPI_File_delete,
    MPI_File_get_amode / PMPI_File_get_amode,
    MPI_File_get_atomicity / PMPI_File_get_atomicity,
    MPI_File_get_byte_offset / PMPI_File_get_byte_offset,
    MPI_File_get_errhandler / PMPI_File_get_errhandler,
    MPI_File_get_group / PMPI_File_get_group,
    MPI_File_get_info / PMPI_File_get_info,
    MPI_File_get_position / PMPI_File_get_position,
    MPI_File_get_position_shared / PMPI_File_get_position_shared,
    MPI_File_get_size / PMPI_File_get_size,
    MPI_File_get_type_extent / PMPI_File_get_type_extent,
    MPI_File_get_type_extent_c / PMPI_File_get_type_extent_c,
    MPI_File_get_view / PMPI_File_get_view,
    MPI_File_iread / PMPI_File_iread,
    MPI_File_iread_all / PMPI_File_iread_all,
    MPI_File_iread_all_c / PMPI_File_iread_all_c,
    MPI_File_iread_at / PMPI_File_iread_at,
    MPI_File_iread_at_all / PMPI_File_iread_at_all,
    MPI_File_iread_at_all_c / PMPI_File_iread_at_all_c,
    MPI_File_iread_at_c / PMPI_File_iread_at_c,
    MPI_File_iread_c / PMPI_File_iread_c,
    MPI_File_iread_shared / PMPI_File_iread_shared,
    MPI_File_iread_shared_c / PMPI_File_iread_shared_c,
    MPI_File_iwrite / PMPI_File_iwrite,
    MPI_File_iwrite_all / PMPI_File_iwrite_all,
    MPI_File_iwrite_all_c / PMPI_File_iwrite_all_c,
    MPI_File_iwrite_at / PMPI_File_iwrite_at,
    MPI_File_iwrite_at_all / PMPI_File_iwrite_at_all,
    MPI_File_iwrite_at_all_c / PMPI_File_iwrite_at_all_c,
    MPI_File_iwrite_at_c / PMPI_File_iwrite_at_c,
    MPI_File_iwrite_c / PMPI_File_iwrite_c,
    MPI_File_iwrite_shared / PMPI_File_iwrite_shared,
    MPI_File_iwrite_shared_c / PMPI_File_iwrite_shared_c,
    MPI_File_open / PMPI_File_open,
    MPI_File_preallocate / PMPI_File_preallocate,
    MPI_File_read / PMPI_File_read,
    MPI_File_read_all / PMPI_File_read_all,
    MPI_File_read_all_begin / PMPI_File_read_all_begin,
    MPI_File_read_all_begin_c / PMPI_File_read_all_begin_c,
    MPI_File_read_all_c / PMPI_File_read_all_c,
    MPI_File_read_all_end / PMPI_File_read_all_end,
    MPI_File_read_at / PMPI_File_read_at,
    MPI_File_read_at_all / PMPI_File_read_at_all,
    MPI_File_read_at_all_begin / PMPI_File_read_at_all_begin,
    MPI_File_read_at_all_begin_c / PMPI_File_read_at_all_begin_c,
    MPI_File_read_at_all_c / PMPI_File_read_at_all_c,
    MPI_File_read_at_all_end / PMPI_File_read_at_all_end,
    MPI_File_read_at_c / PMPI_File_read_at_c,
    MPI_File_read_c / PMPI_File_read_c,
    MPI_File_read_ordered / PMPI_File_read_ordered,
    MPI_File_read_ordered_begin / PMPI_File_read_ordered_begin,
    MPI_File_read_ordered_begin_c / PMPI_File_read_ordered_begin_c,
    MPI_File_read_ordered_c / PMPI_File_read_ordered_c,
    MPI_File_read_ordered_end / PMPI_File_read_ordered_end,
    MPI_File_read_shared / PMPI_File_read_shared,
    MPI_File_read_shared_c / PMPI_File_read_shared_c,
    MPI_File_seek / PMPI_File_seek,
    MPI_File_seek_shared / PMPI_File_seek_shared,
    MPI_File_set_atomicity / PMPI_File_set_atomicity,
    MPI_File_set_errhandler / PMPI_File_set_errhandler,
    MPI_File_set_info / PMPI_File_set_info,
    MPI_File_set_size / PMPI_File_set_size,
    MPI_File_set_view / PMPI_File_set_view,
    MPI_File_sync / PMPI_File_sync,
    MPI_File_write / PMPI_File_write,
    MPI_File_write_all / PMPI_File_write_all,
    MPI_File_write_all_begin / PMPI_File_write_all_begin,
    MPI_File_write_all_begin_c / PMPI_File_write_all_begin_c,
    MPI_File_write_all_c / PMPI_File_write_all_c,
    MPI_File_write_all_end / PMPI_File_write_all_end,
    MPI_File_write_at / PMPI_File_write_at,
    MPI_File_write_at_all / PMPI_File_write_at_all,
    MPI_File_write_at_all_begin / PMPI_File_write_at_all_begin,
    MPI_File_write_at_all_begin_c / PMPI_File_write_at_all_begin_c,
    MPI_File_write_at_all_c / PMPI_File_write_at_all_c,
    MPI_File_write_at_all_end / PMPI_File_write_at_all_end,
    MPI_File_write_at_c / PMPI_File_write_at_c,
    MPI_File_write_c / PMPI_File_write_c,
    MPI_File_write_ordered / PMPI_File_write_ordered,
    MPI_File_write_ordered_begin / PMPI_File_write_ordered_begin,
    MPI_File_write_ordered_begin_c / PMPI_File_write_ordered_begin_c,
    MPI_File_write_ordered_c / PMPI_File_write_ordered_c,
    MPI_File_write_ordered_end / PMPI_File_write_ordered_end,
    MPI_File_write_shared / PMPI_File_write_shared,
    MPI_File_write_shared_c / PMPI_File_write_shared_c,
    MPI_Register_datarep / PMPI_Register_datarep,
    MPI_Register_datarep_c / PMPI_Register_datarep_c,
}

unsupported! { raised("dynamic process management"):
    MPI_Close_port / PMPI_Close_port,
    MPI_Comm_accept / PMPI_Comm_accept,
    MPI_Comm_connect / PMPI_Comm_connect,
    MPI_Comm_join / PMPI_Comm_join,
    MPI_Comm_spawn / PMPI_Comm_spawn,
    MPI_Comm_spawn_multiple / PMPI_Comm_spawn_multiple,
    MPI_Lookup_name / PMPI_Lookup_name,
    MPI_Open_port / PMPI_Open_port,
    MPI_Publish_name / PMPI_Publish_name,
    MPI_Unpublish_name / PMPI_Unpublish_name,
}

unsupported! { raised("the sessions model"):
    MPI_Comm_create_from_group / PMPI_Comm_create_from_group,
    MPI_Group_from_session_pset / PMPI_Group_from_session_pset,
    MPI_Session_call_errhandler / PMPI_Session_call_errhandler,
    MPI_Session_create_errhandler / PMPI_Session_create_errhandler,
    MPI_Session_finalize / PMPI_Session_finalize,
    MPI_Session_get_errhandler / PMPI_Session_get_errhandler,
    MPI_Session_get_info / PMPI_Session_get_info,
    MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset,
    MPI_Session_get_num_psets / PMPI_Session_get_num_psets,
    MPI_Session_get_pset_info / PMPI_Session_get_pset_info,
    MPI_Session_init / PMPI_Session_init,
    MPI_Session_set_errhandler / PMPI_Session_set_errhandler,
}
