//! The sessions model in C (MPI 4.1 §11.3): MPI_Session_init and MPI_Session_finalize, the
//! process sets a session offers and their groups, a session's info and error handler.
//!
//! # What a session is here
//!
//! The process's rank is made once: by MPI_Init, or by the first MPI_Session_init, at the
//! thread level its info asks for (`thread_level`, as MPI 4.1 §11.3.1 names it; SINGLE if
//! it asks none). Every later session, and MPI_Init after a session, joins that rank at
//! the level it provides, which MPI_Session_get_info reports. The library stays up while
//! the world model is initialized and not finalized, or a session is open: MPI_Finalize
//! with a session open ends the world model only (MPI_Finalized says so), and the last
//! MPI_Session_finalize then ends the library; without the world model, the last
//! MPI_Session_finalize ends it. Once ended it does not start again (a new MPI_Session_init
//! is MPI_ERR_OTHER, saying so).
//!
//! # Process sets
//!
//! Two, as MPI 4.1 §11.3.2 requires: `mpi://WORLD` (every process of the job) and
//! `mpi://SELF` (this process), their names compared without regard to case. A set's info
//! holds `mpi_size`. MPI_Group_from_session_pset gives their groups, and
//! MPI_Comm_create_from_group makes a communicator over one (`comms.rs`).
//!
//! # Errors
//!
//! An error of a session call goes to the session's handler: MPI_ERRORS_RETURN returns its
//! code, MPI_ERRORS_ARE_FATAL and MPI_ERRORS_ABORT end the job with it (the session holds
//! every process's rank, so the two are alike here), and a handler that
//! MPI_Session_create_errhandler made is called with the session's handle and the code,
//! then the code is returned. An error of MPI_Session_init goes to the handler it was
//! given. An invalid session handle is MPI_ERR_SESSION.
//!
//! # A session's buffer
//!
//! The process has one rank, which the world model and every session share, and one
//! buffer for the buffered sends of communicators without a buffer of their own: the one
//! MPI_Buffer_attach attaches, or the one a session attaches (MPI_Session_attach_buffer).
//! So a session's buffer serves the buffered sends of its communicators, and of any other
//! communicator without its own (where MPI 4.1 §3.6 would have the world model's or none);
//! attaching one while the process has one is MPI_ERR_BUFFER, and a session detaches only
//! the buffer it attached. The flushes wait for the process buffer's sends.

use crate::abi::{self, Handle, MPI_SUCCESS};
use crate::comms::info_of;
use crate::state::{self, with_comm, write};
use earlybird::{Error, ErrorClass, Result};
use std::cell::Cell;
use std::ffi::{c_char, c_int};
use std::rc::Rc;

/// An open session: its error handler, and whether it attached the buffer.
#[derive(Debug)]
pub(crate) struct CSession {
    errh: Cell<Handle>,
    attached: Cell<bool>,
}

/// The process sets every session offers, in the order MPI_Session_get_nth_pset numbers
/// them.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// The process set `name` names (see the module doc), as its index in [`PSETS`].
fn pset(name: &str) -> Result<usize> {
    PSETS
        .iter()
        .position(|p| p.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                format!("no process set is named \"{name}\" (earlybird offers mpi://WORLD and mpi://SELF)"),
            )
        })
}

/// The communicator whose group process set `i` is.
fn pset_comm(i: usize) -> Handle {
    if i == 0 {
        abi::COMM_WORLD
    } else {
        abi::COMM_SELF
    }
}

/// Whether `h` is an error handler a session may have.
fn session_handler(h: Handle) -> bool {
    matches!(
        h,
        abi::ERRORS_RETURN | abi::ERRORS_ARE_FATAL | abi::ERRORS_ABORT
    ) || state::session_errhandler_of(h).is_some()
}

/// The error `e` of call `what` on session `session`, through the handler `errh`: the code
/// to return (see the module doc).
fn raise(session: Handle, errh: Handle, what: &str, e: Error) -> c_int {
    let e = Error::new(e.class(), format!("{what}: {e}"));
    let code = e.code();
    match errh {
        abi::ERRORS_RETURN => code,
        abi::ERRORS_ARE_FATAL | abi::ERRORS_ABORT => {
            eprintln!("earlybird: fatal error on session {session:#x}: {e}");
            match with_comm(abi::COMM_SELF, |c| Ok(c.clone())) {
                Ok(c) => c.abort(code),
                Err(_) => std::process::exit(1),
            }
        }
        h => {
            if let Some(f) = state::session_errhandler_of(h) {
                let (mut s, mut c) = (session, code);
                // SAFETY: the program's handler, called as MPI's C binding says (a pointer
                // to the session's handle and one to the error code).
                unsafe { f(&mut s, &mut c) };
            }
            code
        }
    }
}

/// `f` on the session `h` names; its error through the session's handler (an invalid
/// handle is MPI_ERR_SESSION, returned).
fn on_session(h: Handle, what: &str, f: impl FnOnce(&CSession) -> Result<()>) -> c_int {
    let s = match state::session_of(h) {
        Ok(s) => s,
        Err(e) => {
            return Error::new(ErrorClass::Session, format!("{what}: {e}")).code();
        }
    };
    match f(&s) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(h, s.errh.get(), what, e),
    }
}

/// The thread level a session's info asks for (`thread_level`; SINGLE without it).
fn asked_level(info: Handle) -> Result<earlybird::ThreadLevel> {
    use earlybird::ThreadLevel::*;
    let info = info_of(info)?;
    let Some(v) = info.get("thread_level")? else {
        return Ok(Single);
    };
    Ok(match v.trim().to_ascii_uppercase().as_str() {
        "MPI_THREAD_SINGLE" => Single,
        "MPI_THREAD_FUNNELED" => Funneled,
        "MPI_THREAD_SERIALIZED" => Serialized,
        "MPI_THREAD_MULTIPLE" => Multiple,
        _ => {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("info key thread_level is \"{v}\", not one of MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE"),
            ))
        }
    })
}

/// The name MPI 4.1 gives a thread level in a session's info.
fn level_name(l: earlybird::ThreadLevel) -> &'static str {
    use earlybird::ThreadLevel::*;
    match l {
        Single => "MPI_THREAD_SINGLE",
        Funneled => "MPI_THREAD_FUNNELED",
        Serialized => "MPI_THREAD_SERIALIZED",
        Multiple => "MPI_THREAD_MULTIPLE",
    }
}

/// Write `name` (with its terminating NUL) into the program's `out` of `*len` chars, and
/// its length with the NUL into `*len`; with `*len` 0 only the length (MPI 4.1 §11.3.2).
///
/// # Safety
/// `len` is an int to read and write; `out` holds `*len` chars unless `*len` is 0.
unsafe fn write_name(name: &str, out: *mut c_char, len: *mut c_int) -> Result<()> {
    if len.is_null() {
        return Err(Error::new(ErrorClass::Arg, "pset_len is a null pointer"));
    }
    // SAFETY: the function's contract.
    let room = unsafe { len.read() };
    if room > 0 {
        if out.is_null() {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("pset_name is a null pointer where pset_len says {room} chars"),
            ));
        }
        let n = name.len().min(room as usize - 1);
        // SAFETY: `room` chars at `out` (the function's contract), and `n + 1 <= room`.
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), out.cast::<u8>(), n);
            out.add(n).write(0);
        }
    }
    // SAFETY: the function's contract.
    unsafe { len.write(name.len() as c_int + 1) };
    Ok(())
}

mpi! {
    fn MPI_Session_init / PMPI_Session_init(info: Handle, errh: Handle, out: *mut Handle) {
        const WHAT: &str = "MPI_Session_init";
        if !session_handler(errh) {
            let e = Error::new(ErrorClass::Arg, format!("{WHAT}: error handler {errh:#x} is not one for sessions (MPI_ERRORS_RETURN, MPI_ERRORS_ARE_FATAL, MPI_ERRORS_ABORT, or one MPI_Session_create_errhandler made)"));
            return e.code();
        }
        if out.is_null() {
            return raise(abi::SESSION_NULL, errh, WHAT, Error::new(ErrorClass::Arg, "the session argument is a null pointer"));
        }
        let r = asked_level(info)
            .and_then(state::session_start)
            .and_then(|()| state::add_session(Rc::new(CSession { errh: Cell::new(errh), attached: Cell::new(false) })));
        match r {
            // SAFETY: a handle to write (MPI's contract), checked for null above.
            Ok(h) => unsafe { out.write(h) },
            Err(e) => return raise(abi::SESSION_NULL, errh, WHAT, e),
        }
        MPI_SUCCESS
    }

    fn MPI_Session_finalize / PMPI_Session_finalize(session: *mut Handle) {
        if session.is_null() {
            return Error::new(ErrorClass::Arg, "MPI_Session_finalize: the session argument is a null pointer").code();
        }
        // SAFETY: a handle to read and write (MPI's contract), checked for null.
        let h = unsafe { session.read() };
        if let Err(e) = state::take_session(h) {
            return Error::new(ErrorClass::Session, format!("MPI_Session_finalize: {e}")).code();
        }
        // SAFETY: as above.
        unsafe { session.write(abi::SESSION_NULL) };
        state::session_end()
    }

    fn MPI_Session_get_info / PMPI_Session_get_info(session: Handle, out: *mut Handle) {
        on_session(session, "MPI_Session_get_info", |_| {
            let mut info = earlybird::Info::new();
            info.set("thread_level", level_name(state::thread_level()))?;
            let h = state::add_info(info)?;
            // SAFETY: a handle to write (MPI's contract), checked for null.
            unsafe { write(out, h) };
            Ok(())
        })
    }

    fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(session: Handle, _info: Handle, n: *mut c_int) {
        on_session(session, "MPI_Session_get_num_psets", |_| {
            // SAFETY: an int to write (MPI's contract), checked for null.
            unsafe { write(n, PSETS.len() as c_int) };
            Ok(())
        })
    }

    fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(session: Handle, _info: Handle, n: c_int, len: *mut c_int, name: *mut c_char) {
        on_session(session, "MPI_Session_get_nth_pset", |_| {
            let p = usize::try_from(n).ok().and_then(|i| PSETS.get(i)).ok_or_else(|| {
                Error::new(ErrorClass::Arg, format!("process set {n} of {} (they are numbered from 0)", PSETS.len()))
            })?;
            // SAFETY: MPI's contract for these arguments (see `write_name`).
            unsafe { write_name(p, name, len) }
        })
    }

    fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(session: Handle, name: *const c_char, out: *mut Handle) {
        on_session(session, "MPI_Session_get_pset_info", |_| {
            // SAFETY: a C string (MPI's contract), checked for null.
            let i = pset(&unsafe { crate::c_str(name) }?)?;
            let size = with_comm(pset_comm(i), |c| Ok(c.size()))?;
            let mut info = earlybird::Info::new();
            info.set("mpi_size", &size.to_string())?;
            let h = state::add_info(info)?;
            // SAFETY: a handle to write (MPI's contract), checked for null.
            unsafe { write(out, h) };
            Ok(())
        })
    }

    fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(session: Handle, name: *const c_char, out: *mut Handle) {
        on_session(session, "MPI_Group_from_session_pset", |_| {
            // SAFETY: a C string (MPI's contract), checked for null.
            let i = pset(&unsafe { crate::c_str(name) }?)?;
            let g = with_comm(pset_comm(i), |c| Ok(c.group()))?;
            let h = state::add_group(g)?;
            // SAFETY: a handle to write (MPI's contract), checked for null.
            unsafe { write(out, h) };
            Ok(())
        })
    }

    fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(f: Option<crate::ErrhandlerFunction>, out: *mut Handle) {
        let Some(f) = f else {
            return crate::self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Session_create_errhandler: a null function")));
        };
        // SAFETY: a handle to write (MPI's contract), checked for null.
        crate::self_ok(state::add_session_errhandler(f).map(|h| unsafe { write(out, h) }))
    }

    fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(session: Handle, errh: Handle) {
        on_session(session, "MPI_Session_set_errhandler", |s| {
            if !session_handler(errh) {
                return Err(Error::new(ErrorClass::Arg, format!("error handler {errh:#x} is not one for sessions (MPI_ERRORS_RETURN, MPI_ERRORS_ARE_FATAL, MPI_ERRORS_ABORT, or one MPI_Session_create_errhandler made)")));
            }
            s.errh.set(errh);
            Ok(())
        })
    }

    fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(session: Handle, out: *mut Handle) {
        on_session(session, "MPI_Session_get_errhandler", |s| {
            // SAFETY: a handle to write (MPI's contract), checked for null.
            unsafe { write(out, s.errh.get()) };
            Ok(())
        })
    }

    fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(session: Handle, code: c_int) {
        let s = match state::session_of(session) {
            Ok(s) => s,
            Err(e) => return Error::new(ErrorClass::Session, format!("MPI_Session_call_errhandler: {e}")).code(),
        };
        let e = Error::new(earlybird::error_class(code).unwrap_or(ErrorClass::Other), format!("error code {code} raised by the program"));
        // The handler ran: the call itself succeeded (as MPI_Comm_call_errhandler).
        raise(session, s.errh.get(), "MPI_Session_call_errhandler", e);
        MPI_SUCCESS
    }

    fn MPI_Session_attach_buffer / PMPI_Session_attach_buffer(session: Handle, buf: *mut std::ffi::c_void, size: c_int) {
        on_session(session, "MPI_Session_attach_buffer", |s| {
            if s.attached.get() {
                return Err(Error::new(ErrorClass::Buffer, "the session has a buffer attached already (detach it first)"));
            }
            state::buffer_attach(None, buf, size.into())?;
            s.attached.set(true);
            Ok(())
        })
    }

    fn MPI_Session_detach_buffer / PMPI_Session_detach_buffer(session: Handle, buf: *mut std::ffi::c_void, size: *mut c_int) {
        on_session(session, "MPI_Session_detach_buffer", |s| {
            if !s.attached.get() {
                return Err(Error::new(ErrorClass::Buffer, "the session has no buffer attached (a buffer MPI_Buffer_attach attached is detached by MPI_Buffer_detach)"));
            }
            let d = state::buffer_detach(None)?;
            s.attached.set(false);
            // SAFETY: MPI's C binding (see `detached`).
            unsafe { crate::detached(d, buf, size) };
            Ok(())
        })
    }

    fn MPI_Session_flush_buffer / PMPI_Session_flush_buffer(session: Handle) {
        on_session(session, "MPI_Session_flush_buffer", |_| state::buffer_flush(None))
    }

    fn MPI_Session_iflush_buffer / PMPI_Session_iflush_buffer(session: Handle, req: *mut Handle) {
        on_session(session, "MPI_Session_iflush_buffer", |_| {
            let h = state::buffer_iflush(None)?;
            // SAFETY: a handle to write (MPI's contract), checked for null.
            unsafe { write(req, h) };
            Ok(())
        })
    }
}
