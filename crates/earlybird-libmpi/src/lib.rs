//! `libmpi.so`: the shared library of earlybird's C ABI. Every `MPI_` and `PMPI_` function is
//! defined (`#[no_mangle]`) in crate `earlybird-capi`; this crate links it into a `cdylib`,
//! which exports them.
#![forbid(unsafe_code)]

pub use earlybird_capi;
