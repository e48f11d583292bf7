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

use crate::abi::MPI_SUCCESS;
use crate::*;
use crate::{collectives::*, datatypes::*, pt2pt::*};
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
