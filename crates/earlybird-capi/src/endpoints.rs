//! Seed 003 in C (`mpi-ext.h`): endpoint communicators, under the MPIX_ prefix. The
//! semantics are the Rust API's (`earlybird::Comm::create_endpoints` and the module doc of
//! `earlybird::comm::endpoints`); what the C forms add:
//!
//! - `MPIX_Comm_create_endpoints(parent, my_num_ep, info, out_comm_handles[])` writes
//!   `my_num_ep` handles, as the seed does. A handle is not driven by any thread yet: the
//!   first thread that calls MPI with it (`MPI_Comm_rank`, a send, `MPI_Comm_free`, ...)
//!   becomes the thread that drives that endpoint, and only that thread may use it after
//!   (another thread gets MPI_ERR_COMM naming the handle). So each thread of an OpenMP team
//!   takes its own handle, as in the seed's example.
//! - A thread that did not call MPI_Init and drives endpoints has handle tables of its own:
//!   it sees the predefined datatypes, operations and info, and the objects it makes itself
//!   (derived datatypes made by another thread are not visible in it). MPI_COMM_WORLD and
//!   the calls on the whole process (MPI_Buffer_attach, MPI_Finalize) are the MPI_Init
//!   thread's.
//! - `MPI_Comm_free` of an endpoint handle is collective over the endpoint communicator (see
//!   the Rust doc); once its last endpoint is freed a thread's tables go.
//! - `MPIX_Comm_num_endpoints`, `MPIX_Comm_has_sharing`, `MPIX_Group_has_sharing`,
//!   `MPIX_Win_has_sharing`, `MPIX_COMM_TYPE_ENDPOINTS` for `MPI_Comm_split_type`,
//!   `MPIX_ALIASED` from `MPI_Comm_compare`, and the class `MPIX_ERR_ENDPOINTS` (112).

use crate::abi::{self, Handle};
use crate::state::{self, fail, ok_or_code, with_comm, with_win, write};
use earlybird::{Endpoint, Error, ErrorClass};
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

/// Endpoint handles: `ENDPOINT_BASE + n`, apart from the handles of each thread's table.
const ENDPOINT_BASE: Handle = abi::COMM_USER.wrapping_add(0x0040_0000);
const ENDPOINT_SPAN: u32 = 0x0040_0000;

/// Endpoints made and not yet taken by a thread, by handle.
static PENDING: Mutex<Vec<(Handle, Endpoint)>> = Mutex::new(Vec::new());
static NEXT: AtomicI32 = AtomicI32::new(0);

/// Whether `h` is an endpoint's handle.
#[inline]
pub(crate) fn is_endpoint_handle(h: Handle) -> bool {
    (h.wrapping_sub(ENDPOINT_BASE) as u32) < ENDPOINT_SPAN
}

/// The error for an endpoint handle this thread does not drive.
pub(crate) fn driven_elsewhere(h: Handle) -> Error {
    Error::new(
        ErrorClass::Comm,
        format!("endpoint handle {h:#x} is driven by another thread (the first that used it), or was freed"),
    )
}

/// If `h` is an endpoint no thread drives yet, this thread takes it (not from inside
/// another call's use of this thread's state: a call on two communicators takes both first).
#[inline]
pub(crate) fn attach_pending(h: Handle) {
    if is_endpoint_handle(h) {
        attach_endpoint(h);
    }
}

/// [`attach_pending`] of an endpoint handle (out of line: every call on a communicator
/// makes the check, few name an endpoint).
#[cold]
fn attach_endpoint(h: Handle) {
    if state::state_in_use() {
        return;
    }
    let ep = {
        let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        p.iter()
            .position(|(x, _)| *x == h)
            .map(|i| p.swap_remove(i).1)
    };
    let Some(ep) = ep else { return };
    match ep.attach() {
        Ok(c) => state::add_endpoint(h, c),
        // The handle then names nothing here, and the call reports that.
        Err(e) => eprintln!("earlybird: endpoint {h:#x}: {e}"),
    }
}

/// MPI_Comm_free of endpoint `h`, by the thread that drives it (or takes it now).
pub(crate) fn free(h: Handle) -> Result<(), c_int> {
    attach_pending(h);
    let Some(c) = state::take_endpoint(h) else {
        return Err(fail(abi::COMM_WORLD, "MPI_Comm_free", driven_elsewhere(h)));
    };
    let r = c.free();
    state::forget_if_idle();
    r.map_err(|e| e.code())
}

mpi! {
    fn MPIX_Comm_create_endpoints / PMPIX_Comm_create_endpoints(
        parent: Handle,
        my_num_ep: c_int,
        info: Handle,
        out: *mut Handle,
    ) {
        if my_num_ep > 0 && out.is_null() {
            let e = Error::new(ErrorClass::Arg, "MPIX_Comm_create_endpoints: out_comm_handles is NULL");
            return fail(parent, "MPIX_Comm_create_endpoints", e);
        }
        let hints = crate::comms::info_of(info);
        let r = hints.and_then(|h| with_comm(parent, |c| c.create_endpoints(my_num_ep, &h)));
        ok_or_code(r.map(|eps| {
            let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
            for (i, ep) in eps.into_iter().enumerate() {
                let n = NEXT.fetch_add(1, Ordering::Relaxed) as u32 % ENDPOINT_SPAN;
                let h = ENDPOINT_BASE.wrapping_add(n as i32);
                p.push((h, ep));
                // SAFETY: `out` has room for `my_num_ep` handles (MPI's contract), checked for
                // null above; `i < my_num_ep`.
                unsafe { write(out.add(i), h) };
            }
        }))
    }

    fn MPIX_Comm_num_endpoints / PMPIX_Comm_num_endpoints(comm: Handle, num_ep: *mut c_int, ep_id: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let (n, i) = c.num_endpoints();
            // SAFETY: ints to write, checked for null.
            unsafe {
                write(num_ep, n);
                write(ep_id, i);
            }
            Ok(())
        }))
    }

    fn MPIX_Comm_has_sharing / PMPIX_Comm_has_sharing(comm: Handle, flag: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, c_int::from(c.has_sharing())) };
            Ok(())
        }))
    }

    fn MPIX_Group_has_sharing / PMPIX_Group_has_sharing(group: Handle, flag: *mut c_int) {
        let r = state::group_of(group);
        // SAFETY: an int to write, checked for null.
        ok_or_code(r.map(|g| unsafe { write(flag, c_int::from(g.has_sharing())) }))
    }

    fn MPIX_Win_has_sharing / PMPIX_Win_has_sharing(win: Handle, flag: *mut c_int) {
        ok_or_code(with_win(win, "MPIX_Win_has_sharing", |w| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, c_int::from(w.win.has_sharing())) };
            Ok(())
        }))
    }
}
