//! The compile-time check that each call this library implements has the parameters
//! `api/mpi.api` and `api/mpi-ext.api` describe. build.rs writes, for every implemented call,
//! `const _: () = check::<_, (Ptr, Int, ...), Int>(PMPI_Send as unsafe extern "C" fn(_, ...) -> _);`
//! which compiles only if the function takes as many parameters as the description lists and
//! each has the description's class: a C `int` or handle is an `i32`, an `MPI_Aint`,
//! `MPI_Count` or `MPI_Offset` a 64-bit integer, anything with a `*` or `[]` a pointer (or an
//! optional function pointer), a `double` an `f64`. Those classes are what the calling
//! convention passes differently; a mistake among them is a wrong ABI.

#![forbid(unsafe_code)]
#![allow(dead_code)]

use crate::ErrhandlerFunction;

pub(crate) struct Int;
pub(crate) struct Long;
pub(crate) struct Ptr;
pub(crate) struct Double;
/// A 16-byte value of integers, passed in two integer registers (MPIX_Sync).
pub(crate) struct Pair;

/// A Rust type that C passes as the class `C`.
pub(crate) trait Class<C> {}
impl Class<Int> for i32 {}
impl Class<Long> for i64 {}
impl Class<Long> for isize {}
impl Class<Double> for f64 {}
impl Class<Pair> for earlybird::SyncCounter {}
impl<T: ?Sized> Class<Ptr> for *const T {}
impl<T: ?Sized> Class<Ptr> for *mut T {}
impl Class<Ptr> for Option<ErrhandlerFunction> {}

/// C function pointers (a callback argument, null allowed), of any parameters.
macro_rules! function_pointers {
    ($(($($p:ident),*))*) => {$(
        impl<Res, $($p),*> Class<Ptr> for Option<unsafe extern "C" fn($($p),*) -> Res> {}
    )*};
}

function_pointers! {
    ()
    (A0)
    (A0, A1)
    (A0, A1, A2)
    (A0, A1, A2, A3)
    (A0, A1, A2, A3, A4)
    (A0, A1, A2, A3, A4, A5)
}

/// A function whose parameters have the classes of the tuple `A` and whose result the class
/// `R`.
pub(crate) trait Signature<A, R> {}

macro_rules! signatures {
    ($(($($p:ident $c:ident),*))*) => {$(
        impl<Res, ResC, $($p, $c),*> Signature<($($c,)*), ResC> for unsafe extern "C" fn($($p),*) -> Res
        where
            Res: Class<ResC>,
            $($p: Class<$c>),*
        {}
    )*};
}

signatures! {
    ()
    (A0 C0)
    (A0 C0, A1 C1)
    (A0 C0, A1 C1, A2 C2)
    (A0 C0, A1 C1, A2 C2, A3 C3)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6, A7 C7)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6, A7 C7, A8 C8)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6, A7 C7, A8 C8, A9 C9)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6, A7 C7, A8 C8, A9 C9, A10 C10)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6, A7 C7, A8 C8, A9 C9, A10 C10, A11 C11)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6, A7 C7, A8 C8, A9 C9, A10 C10, A11 C11, A12 C12)
    (A0 C0, A1 C1, A2 C2, A3 C3, A4 C4, A5 C5, A6 C6, A7 C7, A8 C8, A9 C9, A10 C10, A11 C11, A12 C12, A13 C13)
}

/// Compiles only if `F` has the signature `(A) -> R` in classes.
pub(crate) const fn check<F: Signature<A, R> + Copy, A, R>(f: F) {
    let _ = f;
}

use crate::*;
use crate::{
    assertions::*, channels::*, collectives::*, comms::*, datatypes::*, endpoints::*,
    fault_tolerance::*, large_count::*, partitioned::*, pmem::*, pt2pt::*, sessions::*,
    sync_counters::*, type_attributes::*, type_constructors::*, windows::*,
};
include!(concat!(env!("OUT_DIR"), "/checks.rs"));
