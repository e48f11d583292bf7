//! sys — the operating system beneath the fabric: shared segments, cross-memory copy, process
//! facts, and the raw views of user buffers that the protocols read and write.
//!
//! This layer and `fabric` are the only places with `unsafe`; each block says why it holds.

pub mod cma;
pub(crate) mod copy;
pub mod layout;
pub mod lend;
pub(crate) mod overlap;
pub mod plain;
pub mod process;
pub mod segment;
pub mod sig;
