//! MPI_Type_create_f90_real, _complex and _integer (MPI 4.1 §19.1.9): the datatype of the
//! Fortran kind that `SELECTED_REAL_KIND(p, r)` or `SELECTED_INT_KIND(r)` names, for the
//! kinds a C compiler has (REAL*4 and REAL*8, COMPLEX*8 and COMPLEX*16, INTEGER*1 to
//! INTEGER*8; a request beyond them is MPI_ERR_ARG, as a Fortran compiler without the kind
//! returns a negative one).
//!
//! The handle returned is predefined in MPI's sense: it cannot be freed, and the same
//! arguments give the same handle. Its data is that of the fixed-size type (MPI_REAL8,
//! ...); the decoders say what made it: combiner MPI_COMBINER_F90_REAL (or _COMPLEX,
//! _INTEGER) with the arguments as its integers, and no datatypes.

#![forbid(unsafe_code)]

use crate::abi::{c, Handle};
use crate::state;
use earlybird::{Error, ErrorClass};
use std::collections::HashMap;
use std::ffi::c_int;

/// What made a parameterized type: its combiner and the arguments of the call.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Made {
    combiner: c_int,
    p: c_int,
    r: c_int,
}

/// The parameterized types a state made, both ways: by arguments and by handle (kept in
/// the MPI state, whose handles they are).
#[derive(Default)]
pub(crate) struct Registry {
    by_made: HashMap<Made, Handle>,
    by_handle: HashMap<Handle, Made>,
}

/// A precision or range argument: MPI_UNDEFINED asks nothing of it.
fn asked(x: c_int) -> c_int {
    if x == c::MPI_UNDEFINED {
        0
    } else {
        x
    }
}

/// The fixed-size type for `made`: the smallest kind whose decimal precision and exponent
/// range reach the ones asked (IEEE single: 6 and 37, double: 15 and 307; integers: 2, 4, 9
/// and 18 decimal digits).
fn fixed(made: Made) -> earlybird::Result<Handle> {
    let (p, r) = (asked(made.p), asked(made.r));
    let none = |what: &str| {
        Err(Error::new(
            ErrorClass::Arg,
            format!("{what}: no kind of this library has {}", describe(made)),
        ))
    };
    let real = |single: Handle, double: Handle, what: &str| match (p, r) {
        (p, r) if p < 0 || r < 0 => none(what),
        (0..=6, 0..=37) => Ok(single),
        (0..=15, 0..=307) => Ok(double),
        _ => none(what),
    };
    match made.combiner {
        c::MPI_COMBINER_F90_REAL => real(c::MPI_REAL4, c::MPI_REAL8, "MPI_Type_create_f90_real"),
        c::MPI_COMBINER_F90_COMPLEX => real(
            c::MPI_COMPLEX8,
            c::MPI_COMPLEX16,
            "MPI_Type_create_f90_complex",
        ),
        _ => match r {
            0..=2 => Ok(c::MPI_INTEGER1),
            3..=4 => Ok(c::MPI_INTEGER2),
            5..=9 => Ok(c::MPI_INTEGER4),
            10..=18 => Ok(c::MPI_INTEGER8),
            _ => none("MPI_Type_create_f90_integer"),
        },
    }
}

fn describe(made: Made) -> String {
    if made.combiner == c::MPI_COMBINER_F90_INTEGER {
        format!("a decimal range of {}", made.r)
    } else {
        format!("precision {} and range {}", made.p, made.r)
    }
}

/// The handle of the parameterized type `made`, made on first use.
fn handle(made: Made) -> earlybird::Result<Handle> {
    if let Some(h) = state::read_f90(|r| r.by_made.get(&made).copied()).flatten() {
        return Ok(h);
    }
    let base = state::type_of(fixed(made)?)?;
    let h = state::add_type(base.dup()?)?;
    state::write_f90(|r| {
        r.by_made.insert(made, h);
        r.by_handle.insert(h, made);
    });
    Ok(h)
}

/// MPI_Type_create_f90_real.
pub(crate) fn real(p: c_int, r: c_int) -> earlybird::Result<Handle> {
    handle(Made {
        combiner: c::MPI_COMBINER_F90_REAL,
        p,
        r,
    })
}

/// MPI_Type_create_f90_complex.
pub(crate) fn complex(p: c_int, r: c_int) -> earlybird::Result<Handle> {
    handle(Made {
        combiner: c::MPI_COMBINER_F90_COMPLEX,
        p,
        r,
    })
}

/// MPI_Type_create_f90_integer.
pub(crate) fn integer(r: c_int) -> earlybird::Result<Handle> {
    handle(Made {
        combiner: c::MPI_COMBINER_F90_INTEGER,
        p: 0,
        r,
    })
}

/// The combiner and integers of `h` if a create_f90 call made it (its decoders' answer).
pub(crate) fn envelope(h: Handle) -> Option<(c_int, Vec<c_int>)> {
    let made = state::read_f90(|r| r.by_handle.get(&h).copied()).flatten()?;
    let ints = if made.combiner == c::MPI_COMBINER_F90_INTEGER {
        vec![made.r]
    } else {
        vec![made.p, made.r]
    };
    Some((made.combiner, ints))
}
