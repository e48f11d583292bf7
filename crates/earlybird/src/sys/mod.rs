//! sys — the operating system beneath the fabric: shared segments, cross-memory copy, process
//! facts, and the raw views of user buffers that the protocols read and write.
//!
//! This layer and `fabric` are the only places with `unsafe`; each block says why it holds.

pub(crate) mod cma;
pub(crate) mod confined;
pub(crate) mod copy;
pub(crate) mod exposed;
pub(crate) mod layout;
pub(crate) mod lend;
pub(crate) mod ofi;
pub(crate) mod overlap;
pub(crate) mod plain;
pub(crate) mod pmem_io;
pub(crate) mod pmix;
pub(crate) mod process;
pub(crate) mod segment;
pub(crate) mod sig;
pub(crate) mod socket;
