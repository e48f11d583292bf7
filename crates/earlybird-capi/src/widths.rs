//! Integers of the C interface in either width: `int` (or `MPI_Aint`) in `MPI_X`, the
//! 64-bit `MPI_Count` in the large-count `MPI_X_c`. The calls that exist in both forms
//! (datatype constructors, pack and unpack, the v- and w-collectives) are generic over
//! [`Width`] and convert their counts, displacements and arrays here, once.

use earlybird::{Error, ErrorClass};
use std::ffi::c_int;

/// An integer of the C interface: `int`, or the 64-bit `MPI_Count` and `MPI_Aint` of the
/// large-count (`_c`) forms, which share one conversion (datatype constructors, pack and
/// unpack, the v- and w-collectives).
pub(crate) trait Width: Copy + std::fmt::Display + TryFrom<i64> {
    fn wide(self) -> i64;

    /// `n` in this width, if it fits.
    fn narrowed(n: i64) -> Option<Self> {
        Self::try_from(n).ok()
    }
}

impl Width for c_int {
    fn wide(self) -> i64 {
        i64::from(self)
    }
}

impl Width for i64 {
    fn wide(self) -> i64 {
        self
    }
}

impl Width for usize {
    fn wide(self) -> i64 {
        self as i64
    }
}

impl Width for isize {
    fn wide(self) -> i64 {
        self as i64
    }
}

/// A count or block length as a length (MPI_ERR_COUNT if negative).
pub(crate) fn count<W: Width>(n: W) -> earlybird::Result<usize> {
    usize::try_from(n.wide()).map_err(|_| {
        Error::new(
            ErrorClass::Count,
            format!("count or block length {n} is negative"),
        )
    })
}

/// A displacement or stride (in elements or bytes) as an address difference.
pub(crate) fn disp<W: Width>(n: W) -> earlybird::Result<isize> {
    isize::try_from(n.wide()).map_err(|_| {
        Error::new(
            ErrorClass::Arg,
            format!("displacement {n} does not fit an address"),
        )
    })
}

/// Counts or block lengths as lengths (MPI_ERR_COUNT for a negative one).
pub(crate) fn counts<W: Width>(v: &[W]) -> earlybird::Result<Vec<usize>> {
    v.iter().map(|&n| count(n)).collect()
}

/// Displacements as address differences.
pub(crate) fn disps<W: Width>(v: &[W]) -> earlybird::Result<Vec<isize>> {
    v.iter().map(|&n| disp(n)).collect()
}

/// The `n` entries at `p`, `n` given in either width (MPI_ERR_COUNT if negative,
/// MPI_ERR_ARG if `p` is null where `n` is not 0).
///
/// # Safety
/// `p` points to `n` initialised `T`s that outlive the borrow (or `n` is 0).
pub(crate) unsafe fn entries<'a, T, W: Width>(p: *const T, n: W) -> earlybird::Result<&'a [T]> {
    let n = count(n)?;
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("a null array of {n} entries"),
        ));
    }
    // SAFETY: the function's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}
