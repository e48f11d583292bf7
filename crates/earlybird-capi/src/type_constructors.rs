//! The datatype constructors in both widths. `MPI_Type_X` takes `int` counts (and
//! `MPI_Aint` byte displacements); MPI 4's `MPI_Type_X_c` takes `MPI_Count` for all of them.
//! Each pair is one function generic over [`Width`], so a datatype of more than `INT_MAX`
//! elements or bytes (a contiguous run of 5 GB, say) is built from either entry point
//! that can express it.

use crate::abi::Handle;
use crate::datatypes::{distribution, order};
use crate::made;
use crate::state;
use crate::widths::{count, counts, disp, disps, entries, Width};
use earlybird::Datatype;
use std::ffi::c_int;

/// MPI_Type_contiguous(_c).
///
/// # Safety
/// As MPI defines the call.
unsafe fn contiguous<W: Width>(n: W, old: Handle, new: *mut Handle) -> c_int {
    let r = (|| Datatype::contiguous(count(n)?, &state::type_of(old)?))();
    // SAFETY: the function's contract.
    unsafe { made(new, r) }
}

/// MPI_Type_vector(_c) (`make` is `Datatype::vector`, the stride in elements of `old`) and
/// MPI_Type_create_hvector(_c) (`Datatype::hvector`, in bytes).
///
/// # Safety
/// As MPI defines the call.
unsafe fn vector<W: Width, A: Width>(
    make: fn(usize, usize, isize, &Datatype) -> earlybird::Result<Datatype>,
    n: W,
    blocklen: W,
    stride: A,
    old: Handle,
    new: *mut Handle,
) -> c_int {
    let r = (|| {
        make(
            count(n)?,
            count(blocklen)?,
            disp(stride)?,
            &state::type_of(old)?,
        )
    })();
    // SAFETY: the function's contract.
    unsafe { made(new, r) }
}

/// MPI_Type_indexed(_c) (`make` is `Datatype::indexed`, displacements in elements of
/// `old`) and MPI_Type_create_hindexed(_c) (`Datatype::hindexed`, in bytes).
///
/// # Safety
/// `blocklens` and `ds` point to `n` entries each (MPI's contract).
unsafe fn indexed<W: Width, A: Width>(
    make: fn(&[usize], &[isize], &Datatype) -> earlybird::Result<Datatype>,
    n: W,
    blocklens: *const W,
    ds: *const A,
    old: Handle,
    new: *mut Handle,
) -> c_int {
    // SAFETY: the function's contract.
    let r = unsafe {
        (|| {
            let b = counts(entries(blocklens, n)?)?;
            make(&b, &disps(entries(ds, n)?)?, &state::type_of(old)?)
        })()
    };
    // SAFETY: as above.
    unsafe { made(new, r) }
}

/// MPI_Type_create_indexed_block(_c) (`make` is `Datatype::indexed_block`, displacements in
/// elements of `old`) and MPI_Type_create_hindexed_block(_c) (`Datatype::hindexed_block`, in
/// bytes).
///
/// # Safety
/// `ds` points to `n` entries (MPI's contract).
unsafe fn indexed_block<W: Width, A: Width>(
    make: fn(usize, &[isize], &Datatype) -> earlybird::Result<Datatype>,
    n: W,
    blocklen: W,
    ds: *const A,
    old: Handle,
    new: *mut Handle,
) -> c_int {
    // SAFETY: the function's contract.
    let r = unsafe {
        (|| {
            let d = disps(entries(ds, n)?)?;
            make(count(blocklen)?, &d, &state::type_of(old)?)
        })()
    };
    // SAFETY: as above.
    unsafe { made(new, r) }
}

/// MPI_Type_create_struct(_c).
///
/// # Safety
/// `blocklens`, `ds` and `types` point to `n` entries each (MPI's contract).
unsafe fn create_struct<W: Width, A: Width>(
    n: W,
    blocklens: *const W,
    ds: *const A,
    types: *const Handle,
    new: *mut Handle,
) -> c_int {
    // SAFETY: the function's contract.
    let r = unsafe {
        (|| {
            let ts = entries(types, n)?
                .iter()
                .map(|&t| state::type_of(t))
                .collect::<earlybird::Result<Vec<_>>>()?;
            let b = counts(entries(blocklens, n)?)?;
            Datatype::create_struct(&b, &disps(entries(ds, n)?)?, &ts)
        })()
    };
    // SAFETY: as above.
    unsafe { made(new, r) }
}

/// MPI_Type_create_subarray(_c).
///
/// # Safety
/// `sizes`, `subsizes` and `starts` point to `ndims` entries each (MPI's contract).
unsafe fn subarray<W: Width>(
    ndims: c_int,
    sizes: *const W,
    subsizes: *const W,
    starts: *const W,
    ord: c_int,
    old: Handle,
    new: *mut Handle,
) -> c_int {
    // SAFETY: the function's contract.
    let r = unsafe {
        (|| {
            let (a, b) = (
                counts(entries(sizes, ndims)?)?,
                counts(entries(subsizes, ndims)?)?,
            );
            let s = counts(entries(starts, ndims)?)?;
            Datatype::create_subarray(&a, &b, &s, order(ord)?, &state::type_of(old)?)
        })()
    };
    // SAFETY: as above.
    unsafe { made(new, r) }
}

/// MPI_Type_create_darray(_c): only the global sizes differ in width.
///
/// # Safety
/// The four arrays point to `ndims` entries each (MPI's contract).
#[allow(clippy::too_many_arguments)]
unsafe fn darray<W: Width>(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const W,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    ord: c_int,
    old: Handle,
    new: *mut Handle,
) -> c_int {
    // SAFETY: the function's contract.
    let r = unsafe {
        (|| {
            let g = counts(entries(gsizes, ndims)?)?;
            let (d, a) = (entries(distribs, ndims)?, entries(dargs, ndims)?);
            let p = counts(entries(psizes, ndims)?)?;
            let ds = d
                .iter()
                .zip(a)
                .map(|(&d, &a)| distribution(d, a))
                .collect::<earlybird::Result<Vec<_>>>()?;
            Datatype::create_darray(
                count(size)?,
                count(rank)?,
                &g,
                &ds,
                &p,
                order(ord)?,
                &state::type_of(old)?,
            )
        })()
    };
    // SAFETY: as above.
    unsafe { made(new, r) }
}

/// MPI_Type_create_resized(_c).
///
/// # Safety
/// As MPI defines the call.
unsafe fn resized<A: Width>(old: Handle, lb: A, extent: A, new: *mut Handle) -> c_int {
    let r = (|| Datatype::create_resized(&state::type_of(old)?, disp(lb)?, disp(extent)?))();
    // SAFETY: the function's contract.
    unsafe { made(new, r) }
}

mpi! {
    fn MPI_Type_contiguous / PMPI_Type_contiguous(n: c_int, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { contiguous(n, old, new) }
    }

    fn MPI_Type_contiguous_c / PMPI_Type_contiguous_c(n: i64, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { contiguous(n, old, new) }
    }

    fn MPI_Type_vector / PMPI_Type_vector(n: c_int, blocklen: c_int, stride: c_int, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { vector(Datatype::vector, n, blocklen, stride, old, new) }
    }

    fn MPI_Type_vector_c / PMPI_Type_vector_c(n: i64, blocklen: i64, stride: i64, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { vector(Datatype::vector, n, blocklen, stride, old, new) }
    }

    fn MPI_Type_create_hvector / PMPI_Type_create_hvector(n: c_int, blocklen: c_int, stride: isize, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { vector(Datatype::hvector, n, blocklen, stride, old, new) }
    }

    fn MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(n: i64, blocklen: i64, stride: i64, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { vector(Datatype::hvector, n, blocklen, stride, old, new) }
    }

    fn MPI_Type_indexed / PMPI_Type_indexed(n: c_int, blocklens: *const c_int, ds: *const c_int, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed(Datatype::indexed, n, blocklens, ds, old, new) }
    }

    fn MPI_Type_indexed_c / PMPI_Type_indexed_c(n: i64, blocklens: *const i64, ds: *const i64, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed(Datatype::indexed, n, blocklens, ds, old, new) }
    }

    fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(n: c_int, blocklens: *const c_int, ds: *const isize, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed(Datatype::hindexed, n, blocklens, ds, old, new) }
    }

    fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(n: i64, blocklens: *const i64, ds: *const i64, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed(Datatype::hindexed, n, blocklens, ds, old, new) }
    }

    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(n: c_int, blocklen: c_int, ds: *const c_int, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed_block(Datatype::indexed_block, n, blocklen, ds, old, new) }
    }

    fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(n: i64, blocklen: i64, ds: *const i64, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed_block(Datatype::indexed_block, n, blocklen, ds, old, new) }
    }

    fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(n: c_int, blocklen: c_int, ds: *const isize, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed_block(Datatype::hindexed_block, n, blocklen, ds, old, new) }
    }

    fn MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(n: i64, blocklen: i64, ds: *const i64, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { indexed_block(Datatype::hindexed_block, n, blocklen, ds, old, new) }
    }

    fn MPI_Type_create_struct / PMPI_Type_create_struct(n: c_int, blocklens: *const c_int, ds: *const isize, types: *const Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { create_struct(n, blocklens, ds, types, new) }
    }

    fn MPI_Type_create_struct_c / PMPI_Type_create_struct_c(n: i64, blocklens: *const i64, ds: *const i64, types: *const Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { create_struct(n, blocklens, ds, types, new) }
    }

    fn MPI_Type_create_subarray / PMPI_Type_create_subarray(ndims: c_int, sizes: *const c_int, subsizes: *const c_int, starts: *const c_int, ord: c_int, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { subarray(ndims, sizes, subsizes, starts, ord, old, new) }
    }

    fn MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(ndims: c_int, sizes: *const i64, subsizes: *const i64, starts: *const i64, ord: c_int, old: Handle, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { subarray(ndims, sizes, subsizes, starts, ord, old, new) }
    }

    fn MPI_Type_create_darray / PMPI_Type_create_darray(
        size: c_int, rank: c_int, ndims: c_int, gsizes: *const c_int, distribs: *const c_int,
        dargs: *const c_int, psizes: *const c_int, ord: c_int, old: Handle, new: *mut Handle,
    ) {
        // SAFETY: the caller's contract.
        unsafe { darray(size, rank, ndims, gsizes, distribs, dargs, psizes, ord, old, new) }
    }

    fn MPI_Type_create_darray_c / PMPI_Type_create_darray_c(
        size: c_int, rank: c_int, ndims: c_int, gsizes: *const i64, distribs: *const c_int,
        dargs: *const c_int, psizes: *const c_int, ord: c_int, old: Handle, new: *mut Handle,
    ) {
        // SAFETY: the caller's contract.
        unsafe { darray(size, rank, ndims, gsizes, distribs, dargs, psizes, ord, old, new) }
    }

    fn MPI_Type_create_resized / PMPI_Type_create_resized(old: Handle, lb: isize, extent: isize, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { resized(old, lb, extent, new) }
    }

    fn MPI_Type_create_resized_c / PMPI_Type_create_resized_c(old: Handle, lb: i64, extent: i64, new: *mut Handle) {
        // SAFETY: the caller's contract.
        unsafe { resized(old, lb, extent, new) }
    }
}
