//! Seed 001 in C (`mpi-ext.h`): sync counters on windows, under the MPIX_ prefix. The
//! semantics are the Rust API's (`earlybird::Win::alloc_sync_objects` and the rest, module
//! doc of `earlybird::rma::counter`); what the C forms add:
//!
//! - **MPIX_Sync** is a 16-byte value, not a handle into a table: the seed lets programs keep
//!   sync objects in any memory (arrays, malloc'd) and send them as MPIX_HANDLE_SYNC, and a
//!   value needs no translation on the way. MPIX_SYNC_NULL is all zeros, which
//!   MPIX_SYNC_IS_NULL tests (C cannot compare structs with `==`).
//! - **The requests** are persistent requests like any other: MPI_Start, MPI_Startall, the
//!   wait and test family, MPIX_Bundle_init and MPI_Request_free take them. Their errors
//!   (MPIX_ERR_WIN_COUNTER among them) go to the window's error handler and then, as for
//!   MPI_Rput's requests, through MPI_COMM_WORLD's.
//! - The seed's Fortran conversions (MPI_SYNC_COUNTER_F2C/C2F) are not here: earlybird has
//!   no Fortran binding.

use crate::abi::{self, Handle};
use crate::comms::info_of;
use crate::state::{self, ok_or_code, with_win, write};
use earlybird::{Error, ErrorClass, Result, SyncCounter};
use std::ffi::c_int;

/// `n` counters at `p` (checked: a non-negative count, a pointer unless `n` is 0).
fn counters_arg(what: &str, n: c_int, p: *const SyncCounter) -> Result<usize> {
    if n < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!("{what}: n_sync {n} (a count of counters is not negative)"),
        ));
    }
    if n > 0 && p.is_null() {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("{what}: a null array of {n} sync counters"),
        ));
    }
    Ok(n as usize)
}

/// A new request's handle into `*req` (checked for null first).
fn request_made(
    what: &str,
    req: *mut Handle,
    make: impl FnOnce() -> Result<earlybird::Request<'static>>,
) -> Result<()> {
    if req.is_null() {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("{what}: a null pointer for the request's handle"),
        ));
    }
    let r = make()?;
    let h = state::add_request(state::pending(r, abi::COMM_WORLD, state::Kept::Slice));
    // SAFETY: a handle to write (the call's contract), checked for null above.
    unsafe { write(req, h) };
    Ok(())
}

mpi! {
    fn MPIX_Win_alloc_sync_objects / PMPIX_Win_alloc_sync_objects(n: c_int, out: *mut SyncCounter, win: Handle, info: Handle) {
        const WHAT: &str = "MPIX_Win_alloc_sync_objects";
        ok_or_code(with_win(win, WHAT, |w| {
            let n = counters_arg(WHAT, n, out)?;
            let cs = w.win.alloc_sync_objects(n, &info_of(info)?)?;
            for (i, c) in cs.into_iter().enumerate() {
                // SAFETY: `out` holds `n` counters to write (the call's contract), checked
                // for null; C aligns MPIX_Sync (four ints) to 4 bytes only, hence unaligned.
                unsafe { out.add(i).write_unaligned(c) };
            }
            Ok(())
        }))
    }

    fn MPIX_Win_free_sync_objects / PMPIX_Win_free_sync_objects(n: c_int, cs: *mut SyncCounter, win: Handle) {
        const WHAT: &str = "MPIX_Win_free_sync_objects";
        ok_or_code(with_win(win, WHAT, |w| {
            let n = counters_arg(WHAT, n, cs)?;
            if n == 0 {
                return Ok(());
            }
            // SAFETY: `cs` holds `n` counters, read and written (the call's contract), checked
            // for null; MPIX_Sync is SyncCounter's layout (16 bytes of integers) with C's
            // 4-byte alignment, hence unaligned copies in and out.
            let mut v: Vec<SyncCounter> = (0..n).map(|i| unsafe { cs.add(i).read_unaligned() }).collect();
            let r = w.win.free_sync_objects(&mut v);
            for (i, c) in v.into_iter().enumerate() {
                // SAFETY: as above.
                unsafe { cs.add(i).write_unaligned(c) };
            }
            r
        }))
    }

    fn MPIX_Win_sync_ops_init / PMPIX_Win_sync_ops_init(target: c_int, mode: c_int, counter: SyncCounter, win: Handle, info: Handle, req: *mut Handle) {
        const WHAT: &str = "MPIX_Win_sync_ops_init";
        ok_or_code(with_win(win, WHAT, |w| {
            let i = info_of(info)?;
            request_made(WHAT, req, || {
                w.win.sync_ops_init(abi::rank_in(target), mode as u32, counter, &i)
            })
        }))
    }

    fn MPIX_Win_change_comm / PMPIX_Win_change_comm(new_comm: Handle, peer: c_int, win: *mut Handle) {
        // SAFETY: `win` points to a window handle to read and write (the call's contract).
        unsafe { crate::windows::change_comm(new_comm, peer, win) }
    }

    fn MPIX_Win_sync_object_init / PMPIX_Win_sync_object_init(counter: SyncCounter, count: c_int, win: Handle, info: Handle, req: *mut Handle) {
        const WHAT: &str = "MPIX_Win_sync_object_init";
        ok_or_code(with_win(win, WHAT, |w| {
            let i = info_of(info)?;
            request_made(WHAT, req, || w.win.sync_object_init(counter, i64::from(count), &i))
        }))
    }
}
