//! The MPI 4 large-count calls (`MPI_X_c`) that differ from `MPI_X` only in taking
//! `MPI_Count` where `MPI_X` takes an `int` (or an `MPI_Aint`, the same width here), or in
//! giving one back through an `MPI_Count *`. build.rs writes them from `api/mpi.api`, where
//! they are marked `narrow`: each converts its counts and calls `PMPI_X`.
//!
//! A buffer's count beyond `INT_MAX` (an `MPI_Count` followed by the buffer's datatype)
//! becomes one element of a contiguous datatype of that many elements, made for the call
//! ([`widened`]): the same bytes in the same order, and a status counts bytes, so
//! MPI_Get_count with the caller's datatype gives the caller's count. Any other count
//! beyond `INT_MAX` (an attached buffer's size, a pack buffer's) is MPI_ERR_COUNT naming the
//! call and the value. The datatype constructors and queries take and give `MPI_Count` in
//! full (`type_constructors.rs`, `datatypes.rs`), as do the v- and w-collectives, whose
//! count arrays are of `MPI_Count` (`collectives.rs`).

// The wrappers are generated alike, a `let` of the result included where nothing follows it.
#![allow(clippy::let_and_return)]

use crate::abi::{Handle, MPI_SUCCESS};
use crate::state;
use crate::*;
use crate::{collectives::*, datatypes::*, pt2pt::*, sessions::*, windows::*};
use std::ffi::{c_int, c_void};

/// MPI_ERR_COUNT for a count `n` passed to `name` that the call cannot take (raised on
/// MPI_COMM_SELF, as for errors this layer finds before it knows a communicator).
fn large_count(name: &str, n: i64) -> c_int {
    let why = if n < 0 {
        "negative"
    } else {
        "beyond INT_MAX, the most earlybird's C interface takes here"
    };
    self_ok(Err::<(), _>(Error::new(
        ErrorClass::Count,
        format!("{name}: count {n} is {why}"),
    )))
}

include!(concat!(env!("OUT_DIR"), "/narrow.rs"));

/// A buffer's count and datatype as the call without `_c` takes them.
pub(crate) struct Widened {
    pub(crate) count: c_int,
    pub(crate) dt: Handle,
    /// Whether `dt` was made for the call (and is freed when it returns; an operation the
    /// call started keeps what it needs of it, as after MPI_Type_free).
    made: bool,
}

impl Drop for Widened {
    fn drop(&mut self) {
        if self.made {
            let _ = state::take_type(self.dt).and_then(|d| d.free());
        }
    }
}

/// `count` elements of `dt` for `name`'s call without `_c`: as they are when the count fits
/// an `int`, else one element of a contiguous datatype of `count` elements of `dt`. Err is
/// the call's return code (MPI_ERR_COUNT for a negative count, or the datatype's error).
pub(crate) fn widened(name: &str, count: i64, dt: Handle) -> Result<Widened, c_int> {
    if let Ok(n) = c_int::try_from(count) {
        return Ok(Widened {
            count: n,
            dt,
            made: false,
        });
    }
    if count < 0 {
        return Err(large_count(name, count));
    }
    let made = (|| {
        let d = earlybird::Datatype::contiguous(count as usize, &state::type_of(dt)?)?;
        d.commit()?;
        state::add_type(d)
    })();
    match made {
        Ok(h) => Ok(Widened {
            count: 1,
            dt: h,
            made: true,
        }),
        Err(e) => Err(self_ok(Err::<(), _>(Error::new(
            e.class(),
            format!("{name}: {e}"),
        )))),
    }
}

mpi! {
    fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(dt: Handle, ni: *mut i64, na: *mut i64, nc: *mut i64, nd: *mut i64, comb: *mut c_int) {
        crate::self_ok(crate::datatypes::decode("MPI_Type_get_envelope_c", dt, true).map(|d| {
            let [i, a, c, t] = d.lengths();
            // SAFETY: MPI_Counts and an int to write, checked for null.
            unsafe {
                state::write(ni, i as i64);
                state::write(na, a as i64);
                state::write(nc, c as i64);
                state::write(nd, t as i64);
                state::write(comb, d.combiner());
            }
        }))
    }

    fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(dt: Handle, maxi: i64, maxa: i64, maxc: i64, maxd: i64, ints: *mut c_int, addrs: *mut isize, counts: *mut i64, types: *mut Handle) {
        const WHAT: &str = "MPI_Type_get_contents_c";
        // SAFETY: the caller's arrays, of the sizes it gives (MPI's contract).
        crate::self_ok(crate::datatypes::decode(WHAT, dt, true).and_then(|d| unsafe {
            d.write_out(WHAT, dt, [maxi, maxa, maxc, maxd], ints, addrs, counts, types)
        }))
    }
}
