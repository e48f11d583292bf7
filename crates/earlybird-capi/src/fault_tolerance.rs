//! Fault tolerance's calls as MPICH exports them (ULFM's `MPIX_Comm_agree`, `_iagree`,
//! `_shrink`, and the failure queries), over the Rust API's `Comm::agree`, `iagree` and
//! `shrink`. In earlybird a process that fails ends the job, so no running process ever
//! sees a failed peer: the failed groups are empty and there is nothing to acknowledge.
//! `MPIX_Comm_revoke` is not implemented (it returns MPI_ERR_UNSUPPORTED_OPERATION).

use crate::abi::{self, Handle};
use crate::state::{self, ok_or_code, with_comm, write};
use earlybird::{Error, ErrorClass};
use std::ffi::c_int;

mpi! {
    fn MPIX_Comm_agree / PMPIX_Comm_agree(comm: Handle, flag: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            if flag.is_null() {
                return Err(Error::new(ErrorClass::Arg, "MPIX_Comm_agree: a null flag"));
            }
            // SAFETY: an int to read and write, checked for null.
            let mut f = unsafe { flag.read() } as u32;
            c.agree(&mut f)?;
            // SAFETY: as above.
            unsafe { flag.write(f as c_int) };
            Ok(())
        }))
    }

    fn MPIX_Comm_iagree / PMPIX_Comm_iagree(comm: Handle, flag: *mut c_int, req: *mut Handle) {
        let r = with_comm(comm, |c| {
            if flag.is_null() {
                return Err(Error::new(ErrorClass::Arg, "MPIX_Comm_iagree: a null flag"));
            }
            // SAFETY: an int to read, checked for null; MPI's contract leaves it to the call
            // until the request completes, when the agreed value is written into it.
            let f = unsafe { flag.read() } as u32;
            let (q, agreed) = c.iagree(state::scope()?, f)?;
            let at = flag as usize;
            let mut p = state::pending(q, comm, state::Kept::Slice);
            p.then(Box::new(move || {
                if let Some(v) = agreed.flag() {
                    // SAFETY: the program's flag, which MPI leaves to the call until now.
                    unsafe { (at as *mut c_int).write(v as c_int) };
                }
            }));
            Ok(p)
        });
        // SAFETY: a request handle to write (MPI's contract).
        unsafe { state::request_out(req, r) }
    }

    fn MPIX_Comm_shrink / PMPIX_Comm_shrink(comm: Handle, out: *mut Handle) {
        let r = with_comm(comm, |c| c.shrink()).map(state::add_comm);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    fn MPIX_Comm_failure_ack / PMPIX_Comm_failure_ack(comm: Handle) {
        // No failure to acknowledge; the communicator must still be one.
        ok_or_code(with_comm(comm, |_| Ok(())))
    }

    fn MPIX_Comm_failure_get_acked / PMPIX_Comm_failure_get_acked(comm: Handle, failed: *mut Handle) {
        // SAFETY: a group handle to write, checked for null.
        ok_or_code(with_comm(comm, |_| Ok(())).map(|()| unsafe { write(failed, abi::GROUP_EMPTY) }))
    }

    fn MPIX_Comm_get_failed / PMPIX_Comm_get_failed(comm: Handle, failed: *mut Handle) {
        // SAFETY: a group handle to write, checked for null.
        ok_or_code(with_comm(comm, |_| Ok(())).map(|()| unsafe { write(failed, abi::GROUP_EMPTY) }))
    }

    fn MPIX_Comm_ack_failed / PMPIX_Comm_ack_failed(comm: Handle, _num_to_ack: c_int, num_acked: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        ok_or_code(with_comm(comm, |_| Ok(())).map(|()| unsafe { write(num_acked, 0) }))
    }
}
