//! Error handlers on communicators (MPI 4.1 §9.3): how an error raised by a call on a
//! communicator, or on a request made on it, reaches the program.
//!
//! The handler lives in the communicator's shared state, which every handle on the
//! communicator (its clones) and every request made on it holds: a change through any of them
//! applies to all, pending requests included. Applying it costs nothing on success: the call
//! returns through `apply`, which branches on `Err` and does everything else out of line.
//!
//! | handler | what an error does |
//! |---|---|
//! | [`ErrHandler::Fatal`] (the default, MPI_ERRORS_ARE_FATAL) | prints `earlybird: rank R: fatal error in CALL: CLASS: detail` on stderr, marks the job aborted and exits the process with status 1; under ebrun the other ranks are ended within a second |
//! | [`ErrHandler::Return`] (MPI_ERRORS_RETURN) | the call returns the error |
//! | [`ErrHandler::Abort`] (MPI_ERRORS_ABORT) | as [`Comm::abort`] with the error's code: prints `earlybird: rank R: error in CALL on communicator NAME (rank r of n): CLASS: detail; MPI_ERRORS_ABORT ends the job with code C`, marks the job aborted with code C and exits with status C (its low 8 bits; 1 if those are 0). MPI 4 asks only for the processes of the communicator's group to be aborted; on one host earlybird ends the whole job, as MPI_Abort does |
//! | a user handler ([`Comm::create_errhandler`]) | the closure is called with the communicator and the error; when it returns, the call returns the error |
//!
//! In a thread job, "exit the process" becomes "unwind the rank's thread" with the printed
//! line as the panic message: [`threads::Job::run`](crate::threads::Job::run) then aborts the
//! job and re-raises that panic, since the job is those threads, not the hosting process.
#![forbid(unsafe_code)]

use super::{Comm, CommShared};
use crate::error::{Error, ErrorClass, Result};
use crate::request::EngineRef;
use std::rc::Rc;

/// How errors on a communicator reach the program (MPI_Errhandler).
///
/// The predefined handlers are values; a user handler is made by
/// [`Comm::create_errhandler`]. A clone is another reference to the same handler (what
/// MPI_Comm_get_errhandler hands out); handlers compare equal when they are the same handler.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum ErrHandler {
    /// Print the error and end the job (MPI_ERRORS_ARE_FATAL, the default).
    #[default]
    Fatal,
    /// Return the error to the caller (MPI_ERRORS_RETURN).
    Return,
    /// End the job as MPI_Abort on the communicator would, with the error's code as the
    /// exit status (MPI_ERRORS_ABORT, MPI 4.0).
    Abort,
    /// A handler made by [`Comm::create_errhandler`].
    User(UserErrHandler),
}

/// The function a user error handler runs (MPI_Comm_errhandler_function).
type HandlerFn = dyn Fn(&Comm, &Error);

/// The closure of a user error handler (see [`Comm::create_errhandler`]).
#[derive(Clone)]
pub struct UserErrHandler(Rc<HandlerFn>);

impl PartialEq for UserErrHandler {
    fn eq(&self, other: &Self) -> bool {
        // The same allocation is the same handler (compare data addresses only: vtable
        // addresses of one closure type may differ between codegen units).
        std::ptr::addr_eq(Rc::as_ptr(&self.0), Rc::as_ptr(&other.0))
    }
}

impl Eq for UserErrHandler {}

impl std::fmt::Debug for ErrHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mpi_name())
    }
}

impl ErrHandler {
    /// The MPI name of a predefined handler, `"user error handler"` otherwise.
    pub fn mpi_name(&self) -> &'static str {
        match self {
            ErrHandler::Fatal => "MPI_ERRORS_ARE_FATAL",
            ErrHandler::Return => "MPI_ERRORS_RETURN",
            ErrHandler::Abort => "MPI_ERRORS_ABORT",
            ErrHandler::User(_) => "user error handler",
        }
    }

    /// Whether this is one of the predefined handlers.
    pub fn is_predefined(&self) -> bool {
        !matches!(self, ErrHandler::User(_))
    }

    /// MPI_Errhandler_free: give up this reference to the handler. Communicators that use the
    /// handler keep it until they are freed or get another handler (MPI frees it when the
    /// last reference is gone, as dropping the value does here). Freeing a predefined handler
    /// is `MPI_ERR_ERRHANDLER`. The error is returned, not passed to a handler (there is no
    /// communicator in the call).
    pub fn free(self) -> Result<()> {
        if self.is_predefined() {
            return Err(Error::new(
                ErrorClass::Errhandler,
                format!(
                    "errhandler_free of {}, a predefined error handler",
                    self.mpi_name()
                ),
            ));
        }
        Ok(())
    }
}

/// Apply the communicator's error handler to a call's result: a success passes through at
/// the cost of one branch; an error goes to [`raise`].
#[inline(always)]
pub(crate) fn apply<T>(c: &Rc<CommShared>, what: &str, r: Result<T>) -> Result<T> {
    match r {
        Err(e) => Err(raise(c, what, e)),
        ok => ok,
    }
}

/// Run the communicator's handler on `e`, raised by call `what`. Returns the error for the
/// handlers after which the call returns (`Return`, user handlers).
#[cold]
#[inline(never)]
pub(crate) fn raise(c: &Rc<CommShared>, what: &str, e: Error) -> Error {
    // Clone out of the cell: a user handler may set another handler on this communicator.
    let h = c.errh.borrow().clone();
    match h {
        ErrHandler::Return => e,
        ErrHandler::Fatal => {
            let text = |rank| format!("earlybird: rank {rank}: fatal error in {what}: {e}");
            end_job(&c.eng, Some(e.class()), &text, e.class().code(), 1)
        }
        ErrHandler::Abort => {
            let code = e.code();
            let text = |rank| {
                format!(
                    "earlybird: rank {rank}: error in {what} on {}: {e}; MPI_ERRORS_ABORT ends the job with code {code}",
                    describe(c)
                )
            };
            end_job(&c.eng, Some(e.class()), &text, code, exit_status(code))
        }
        ErrHandler::User(f) => {
            let comm = Comm::from_shared(c.clone());
            (f.0)(&comm, &e);
            e
        }
    }
}

/// `communicator "NAME" (rank r of n)`, for messages.
fn describe(c: &CommShared) -> String {
    let name = c.name.borrow();
    let name = if name.is_empty() {
        "an unnamed communicator".to_string()
    } else {
        format!("communicator {name:?}")
    };
    format!("{name} (rank {} of {})", c.rank, c.size)
}

/// The process exit status for an abort with `code`: its low 8 bits, or 1 if those are 0
/// (an aborted job never reads as a success).
pub(crate) fn exit_status(code: i32) -> i32 {
    match code & 0xff {
        0 => 1,
        s => s,
    }
}

/// End the job from this rank: print `text(rank)` (unless the job was already ended
/// elsewhere and this is its consequence), record the abort with `code` in the job, and exit
/// with `status` (unwind the rank's thread in a thread job).
#[cold]
#[inline(never)]
pub(crate) fn end_job(
    eng: &EngineRef,
    class: Option<ErrorClass>,
    text: &dyn Fn(i32) -> String,
    code: i32,
    status: i32,
) -> ! {
    use std::io::Write;
    // The endpoint is never borrowed here (calls drop their borrow before applying the
    // handler); if it were, a process exit is the safe reading of an unknown job.
    let (rank, job, threads) = match eng.try_borrow() {
        Ok(e) => (
            e.rank() as i32,
            Some(e.job().clone()),
            e.ranks_are_threads(),
        ),
        Err(_) => (-1, None, false),
    };
    let line = text(rank);
    // When another rank or the launcher ended the job, it has said why; leave quietly.
    let ended_elsewhere =
        class == Some(ErrorClass::ProcFailed) && job.as_ref().and_then(|j| j.aborted()).is_some();
    if !ended_elsewhere {
        // One write, so the line is not interleaved with the launcher's or other ranks'.
        let _ = std::io::stderr()
            .lock()
            .write_all(format!("{line}\n").as_bytes());
    }
    if let Some(job) = job {
        job.abort(rank, code);
    }
    if !threads {
        if ended_elsewhere {
            crate::bootstrap::await_launcher_end();
        } else {
            // Started by Hydra, Slurm or mpirun: the launcher ends the other ranks (PMI-1 and
            // PMIx carry this status to it; PMI-2's abort carries none, and srun reports the
            // rank's own exit status).
            crate::bootstrap::launcher_abort(status, &line);
        }
    }
    if threads {
        // The job is this process's rank threads, not the process: unwind this rank
        // (Job::run aborts the job and re-raises the panic to its caller).
        std::panic::panic_any(line);
    }
    std::process::exit(status);
}

impl Comm {
    /// MPI_Comm_create_errhandler: a handler that calls `f` with the communicator and the
    /// error (class, code and message) when a call on a communicator that uses it fails;
    /// when `f` returns, the call returns the error. `f` may use the communicator (its rank,
    /// name, even communication) and may set another handler on it. Set it with
    /// [`set_errhandler`](Self::set_errhandler).
    pub fn create_errhandler(f: impl Fn(&Comm, &Error) + 'static) -> ErrHandler {
        ErrHandler::User(UserErrHandler(Rc::new(f)))
    }

    /// MPI_Comm_set_errhandler: choose how errors on this communicator reach the program.
    /// Every handle on the communicator (clones) and every request made on it, pending ones
    /// included, sees the change. Communicators made from this one later inherit it.
    pub fn set_errhandler(&self, h: ErrHandler) {
        *self.shared.errh.borrow_mut() = h;
    }

    /// MPI_Comm_get_errhandler: the handler in force (another reference to it).
    pub fn errhandler(&self) -> ErrHandler {
        self.shared.errh.borrow().clone()
    }

    /// MPI_Comm_call_errhandler: raise `e` on this communicator as if a call on it had
    /// failed: its handler runs (a fatal or abort handler ends the job) and, when it returns,
    /// so does `e`, as the `Err` of this call. The extensions report their errors this way.
    pub fn call_errhandler<T>(&self, e: Error) -> Result<T> {
        Err(raise(&self.shared, "comm_call_errhandler", e))
    }

    /// MPI_Abort: end the job with `errorcode`. Prints `earlybird: rank R: MPI_Abort on
    /// communicator NAME (rank r of n) with error code C`, marks the job aborted (every rank
    /// still waiting sees `MPIX_ERR_PROC_FAILED`; ebrun ends the others within a second and
    /// exits with this status, as do Hydra and mpirun told through PMI-1 or PMIx; Slurm ends
    /// the step) and exits with status C (its low 8 bits; 1 if those are 0).
    /// MPI asks for the processes of the communicator's group; on one host earlybird ends
    /// the whole job, as MPI implementations do. In a thread job the rank's thread unwinds
    /// with that line and [`Job::run`](crate::threads::Job::run) re-raises it.
    pub fn abort(&self, errorcode: i32) -> ! {
        let text = |rank| {
            format!(
                "earlybird: rank {rank}: MPI_Abort on {} with error code {errorcode}",
                describe(&self.shared)
            )
        };
        end_job(&self.eng, None, &text, errorcode, exit_status(errorcode))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_never_reads_as_success() {
        assert_eq!(exit_status(6), 6);
        assert_eq!(exit_status(256), 1);
        assert_eq!(exit_status(0), 1);
        assert_eq!(exit_status(0x4000_0001), 1);
        assert_eq!(exit_status(0x4000_0002), 2);
    }

    #[test]
    fn handlers_compare_by_identity() {
        let a = Comm::create_errhandler(|_, _| {});
        let b = Comm::create_errhandler(|_, _| {});
        assert_eq!(a, a.clone());
        assert_ne!(a, b);
        assert_ne!(a, ErrHandler::Return);
        assert_eq!(ErrHandler::default(), ErrHandler::Fatal);
        assert_eq!(
            ErrHandler::Abort.free().unwrap_err().class(),
            ErrorClass::Errhandler
        );
        assert!(a.free().is_ok());
    }
}
