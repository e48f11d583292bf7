//! The MPI 4 large-count calls (`MPI_X_c`) that differ from `MPI_X` only in taking
//! `MPI_Count` where `MPI_X` takes an `int` (or an `MPI_Aint`, the same width here), or in
//! giving one back through an `MPI_Count *`. build.rs writes them from `api/mpi.api`, where
//! they are marked `narrow`: each converts its counts and calls `PMPI_X`. A count beyond
//! `INT_MAX` is MPI_ERR_COUNT naming the call and the value: earlybird's C interface moves at
//! most `INT_MAX` elements per buffer argument for now. The `_c` calls whose arrays are of
//! `MPI_Count` (the v- and w-collectives, the indexed and struct constructors) are not among
//! them yet; `api/mpi.api` marks them `later`.

// The wrappers are generated alike, a `let` of the result included where nothing follows it.
#![allow(clippy::let_and_return)]

use crate::abi::{Handle, MPI_SUCCESS};
use crate::state;
use crate::*;
use crate::{collectives::*, datatypes::*, pt2pt::*, windows::*};
use std::ffi::{c_int, c_void};

/// MPI_ERR_COUNT for a count of `n` elements passed to `name` (raised on MPI_COMM_SELF, as
/// for errors this layer finds before it knows a communicator).
fn large_count(name: &str, n: i64) -> c_int {
    self_ok(Err::<(), _>(Error::new(
        ErrorClass::Count,
        format!("{name}: count {n} is beyond INT_MAX, the most earlybird's C interface moves per buffer argument"),
    )))
}

include!(concat!(env!("OUT_DIR"), "/narrow.rs"));

/// `n` counts at `p` as `int`s (MPI_ERR_COUNT for one beyond INT_MAX). Null stays empty (the
/// call without `_c` reports a null array that should hold entries).
///
/// # Safety
/// `p` is null or points to `n` `MPI_Count`s.
unsafe fn narrow_all(what: &str, p: *const i64, n: c_int) -> earlybird::Result<Vec<c_int>> {
    if p.is_null() || n <= 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the function's contract.
    let v = unsafe { std::slice::from_raw_parts(p, n as usize) };
    v.iter()
        .map(|&x| {
            c_int::try_from(x).map_err(|_| {
                Error::new(ErrorClass::Count, format!("{what}: count {x} is beyond INT_MAX, the most earlybird's C interface takes"))
            })
        })
        .collect()
}

/// A scalar count as an `int`, for `what`.
fn narrow(what: &str, n: i64) -> earlybird::Result<c_int> {
    c_int::try_from(n).map_err(|_| {
        Error::new(
            ErrorClass::Count,
            format!("{what}: count {n} is beyond INT_MAX, the most earlybird's C interface takes"),
        )
    })
}

/// The pointer to hand on for converted entries: the caller's null if it gave null.
fn ptr_of(orig: *const i64, v: &[c_int]) -> *const c_int {
    if orig.is_null() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

mpi! {
    fn MPI_Type_indexed_c / PMPI_Type_indexed_c(count: i64, blocklens: *const i64, disps: *const i64, old: Handle, new: *mut Handle) {
        let what = "MPI_Type_indexed_c";
        // SAFETY: `count` entries in each array (MPI's contract).
        let r = narrow(what, count).and_then(|n| Ok((n, unsafe { narrow_all(what, blocklens, n) }?, unsafe { narrow_all(what, disps, n) }?)));
        match r {
            // SAFETY: the converted arrays, and the caller's handles.
            Ok((n, b, d)) => unsafe { PMPI_Type_indexed(n, ptr_of(blocklens, &b), ptr_of(disps, &d), old, new) },
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(count: i64, blocklens: *const i64, disps: *const i64, old: Handle, new: *mut Handle) {
        let what = "MPI_Type_create_hindexed_c";
        // SAFETY: `count` block lengths (MPI's contract).
        let r = narrow(what, count).and_then(|n| Ok((n, unsafe { narrow_all(what, blocklens, n) }?)));
        match r {
            // SAFETY: the converted lengths; the byte displacements are MPI_Aints already.
            Ok((n, b)) => unsafe { PMPI_Type_create_hindexed(n, ptr_of(blocklens, &b), disps.cast(), old, new) },
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Type_create_struct_c / PMPI_Type_create_struct_c(count: i64, blocklens: *const i64, disps: *const i64, types: *const Handle, new: *mut Handle) {
        let what = "MPI_Type_create_struct_c";
        // SAFETY: `count` block lengths (MPI's contract).
        let r = narrow(what, count).and_then(|n| Ok((n, unsafe { narrow_all(what, blocklens, n) }?)));
        match r {
            // SAFETY: as for MPI_Type_create_hindexed_c.
            Ok((n, b)) => unsafe { PMPI_Type_create_struct(n, ptr_of(blocklens, &b), disps.cast(), types, new) },
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(count: i64, blocklen: i64, disps: *const i64, old: Handle, new: *mut Handle) {
        let what = "MPI_Type_create_indexed_block_c";
        // SAFETY: `count` displacements (MPI's contract).
        let r = narrow(what, count).and_then(|n| Ok((n, narrow(what, blocklen)?, unsafe { narrow_all(what, disps, n) }?)));
        match r {
            // SAFETY: the converted displacements.
            Ok((n, b, d)) => unsafe { PMPI_Type_create_indexed_block(n, b, ptr_of(disps, &d), old, new) },
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(ndims: c_int, sizes: *const i64, subsizes: *const i64, starts: *const i64, order: c_int, old: Handle, new: *mut Handle) {
        let what = "MPI_Type_create_subarray_c";
        // SAFETY: `ndims` entries in each array (MPI's contract).
        let r = unsafe { (|| Ok((narrow_all(what, sizes, ndims)?, narrow_all(what, subsizes, ndims)?, narrow_all(what, starts, ndims)?)))() };
        match r {
            // SAFETY: the converted arrays.
            Ok((a, b, s)) => unsafe { crate::datatypes::PMPI_Type_create_subarray(ndims, ptr_of(sizes, &a), ptr_of(subsizes, &b), ptr_of(starts, &s), order, old, new) },
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Type_create_darray_c / PMPI_Type_create_darray_c(size: c_int, rank: c_int, ndims: c_int, gsizes: *const i64, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order: c_int, old: Handle, new: *mut Handle) {
        // SAFETY: `ndims` global sizes (MPI's contract).
        match unsafe { narrow_all("MPI_Type_create_darray_c", gsizes, ndims) } {
            // SAFETY: the converted sizes, and the caller's arrays.
            Ok(g) => unsafe { crate::datatypes::PMPI_Type_create_darray(size, rank, ndims, ptr_of(gsizes, &g), distribs, dargs, psizes, order, old, new) },
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(dt: Handle, ni: *mut i64, na: *mut i64, nc: *mut i64, nd: *mut i64, comb: *mut c_int) {
        let (mut i, mut a, mut d) = (0, 0, 0);
        // SAFETY: ints of ours, and the caller's combiner to write.
        let rc = unsafe { crate::datatypes::PMPI_Type_get_envelope(dt, &mut i, &mut a, &mut d, comb) };
        if rc == MPI_SUCCESS {
            // SAFETY: MPI_Counts to write, checked for null. earlybird's types keep their
            // counts among the integers (none needs a large count).
            unsafe {
                state::write(ni, i64::from(i));
                state::write(na, i64::from(a));
                state::write(nc, 0);
                state::write(nd, i64::from(d));
            }
        }
        rc
    }

    fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(dt: Handle, maxi: i64, maxa: i64, _maxc: i64, maxd: i64, ints: *mut c_int, addrs: *mut isize, _counts: *mut i64, types: *mut Handle) {
        let clamp = |n: i64| c_int::try_from(n.max(0)).unwrap_or(c_int::MAX);
        // SAFETY: the caller's arrays, of the sizes it gives (MPI's contract); no large
        // counts are ever returned (see MPI_Type_get_envelope_c).
        unsafe { crate::datatypes::PMPI_Type_get_contents(dt, clamp(maxi), clamp(maxa), clamp(maxd), ints, addrs, types) }
    }
}
