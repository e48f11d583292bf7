//! Partitioned communication in C (MPI 4.1 §4): MPI_Psend_init, MPI_Precv_init, MPI_Pready,
//! MPI_Pready_range, MPI_Pready_list and MPI_Parrived. The semantics are the Rust API's
//! (`earlybird::Comm::psend_init` and the module doc of `comm/partitioned.rs`); the requests
//! are persistent requests like any other: MPI_Start, MPI_Startall, the wait and test family
//! and MPI_Request_free take them. What the C forms add: a negative partition count or
//! partition is MPI_ERR_ARG, a count that overflows with the partitions MPI_ERR_COUNT, and
//! MPI_Parrived of MPI_REQUEST_NULL says `flag = true` (MPI 4.1 §4.2.4).

use crate::abi::{self, Handle};
use crate::comms::info_of;
use crate::state::{self, buf_in, buf_out, with_comm, write};
use crate::{self_ok, widths};
use earlybird::{Error, ErrorClass, Request, Result};
use std::ffi::{c_int, c_void};

/// A partition count or partition number as an index (MPI_ERR_ARG if negative).
fn index(what: &str, n: c_int) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::new(ErrorClass::Arg, format!("{what} {n} is negative")))
}

/// Elements of the whole buffer: `partitions` of `count` each.
fn whole(partitions: usize, count: i64) -> Result<i64> {
    if count < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    count.checked_mul(partitions as i64).ok_or_else(|| {
        Error::new(
            ErrorClass::Count,
            format!("{partitions} partitions of {count} elements overflow a count"),
        )
    })
}

/// `f` on the request `h` names.
fn on_request<R>(h: Handle, f: impl FnOnce(&mut Request<'static>) -> Result<R>) -> Result<R> {
    let mut p = state::take_request(h)?;
    let r = match p.request_mut() {
        Some(q) => f(q),
        None => Err(Error::new(
            ErrorClass::Request,
            format!("request {h:#x} is not a partitioned request"),
        )),
    };
    state::put_back(h, p);
    r
}

mpi! {
    fn MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: i64, dt: Handle, dest: c_int, tag: c_int, comm: Handle, info: Handle, req: *mut Handle) {
        let r = with_comm(comm, |c| {
            let parts = index("partitions", partitions)?;
            let n = whole(parts, count)?;
            let info = info_of(info)?;
            // SAFETY: `buf` holds `partitions` x `count` elements of `dt`, which the program
            // leaves alone while the request lives, but for partitions not yet marked ready
            // (MPI's contract).
            let b = unsafe { buf_in(buf, n, dt) }?;
            let (kept, b) = state::kept_send(b);
            let q = c.psend_init(state::scope()?, b, parts, abi::rank_in(dest), tag, &info)?;
            Ok(state::pending(q, comm, kept))
        });
        // SAFETY: a handle to write (MPI's contract).
        unsafe { state::request_out(req, r) }
    }

    fn MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: i64, dt: Handle, src: c_int, tag: c_int, comm: Handle, info: Handle, req: *mut Handle) {
        let r = with_comm(comm, |c| {
            let parts = index("partitions", partitions)?;
            let n = whole(parts, count)?;
            let info = info_of(info)?;
            // SAFETY: `buf` has room for `partitions` x `count` elements of `dt`, which only
            // the request writes while it lives (MPI's contract).
            let b = unsafe { buf_out(buf, n, dt) }?;
            let (kept, b) = state::kept_recv(b);
            let q = c.precv_init(state::scope()?, b, parts, abi::rank_in(src), tag, &info)?;
            Ok(state::pending(q, comm, kept))
        });
        // SAFETY: a handle to write (MPI's contract).
        unsafe { state::request_out(req, r) }
    }

    fn MPI_Pready / PMPI_Pready(partition: c_int, req: Handle) {
        self_ok(index("partition", partition).and_then(|p| on_request(req, |q| q.pready(p))))
    }

    fn MPI_Pready_range / PMPI_Pready_range(low: c_int, high: c_int, req: Handle) {
        self_ok((|| {
            let (lo, hi) = (index("partition_low", low)?, index("partition_high", high)?);
            on_request(req, |q| q.pready_range(lo, hi))
        })())
    }

    fn MPI_Pready_list / PMPI_Pready_list(n: c_int, list: *const c_int, req: Handle) {
        self_ok((|| {
            // SAFETY: `list` points to `n` ints (MPI's contract).
            let ps = unsafe { widths::entries(list, n) }?
                .iter()
                .map(|&p| index("partition", p))
                .collect::<Result<Vec<usize>>>()?;
            on_request(req, |q| q.pready_list(&ps))
        })())
    }

    fn MPI_Parrived / PMPI_Parrived(req: Handle, partition: c_int, flag: *mut c_int) {
        self_ok((|| {
            let p = index("partition", partition)?;
            let arrived = if req == abi::REQUEST_NULL {
                true
            } else {
                on_request(req, |q| q.parrived(p))?
            };
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, c_int::from(arrived)) };
            Ok(())
        })())
    }
}
