//! p2p — point-to-point messaging with MPI 4.1 semantics on the fabric.
//!
//! [`matching`] is the I/O-free matching engine; `engine` runs the protocols over the
//! fabric's rings: eager frames (payload in the ring, one copy on each side), rendezvous for
//! large payloads (the receiver pulls with a single copy and answers FIN), synchronous-mode
//! acknowledgements, send cancellation, and flow control that bounds what a receiver buffers
//! for messages nobody has asked for yet.
#![forbid(unsafe_code)]

pub(crate) mod engine;
pub mod matching;
mod status;

pub use status::Status;

/// Wildcard source of a receive or probe (MPI_ANY_SOURCE).
pub const ANY_SOURCE: i32 = -1;
/// Wildcard tag of a receive or probe (MPI_ANY_TAG).
pub const ANY_TAG: i32 = -1;
/// The null process: sends to it and receives from it complete at once (MPI_PROC_NULL).
pub const PROC_NULL: i32 = -2;
/// Largest tag a program may use (the MPI_TAG_UB attribute).
pub const TAG_UB: i32 = i32::MAX;
/// Bytes of bookkeeping each buffered send takes from the attached buffer (MPI_BSEND_OVERHEAD).
pub const BSEND_OVERHEAD: usize = 96;
