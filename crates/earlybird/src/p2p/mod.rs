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

pub use crate::status::{Status, ANY_SOURCE, ANY_TAG, PROC_NULL};
/// Largest tag a program may use (the MPI_TAG_UB attribute).
pub const TAG_UB: i32 = i32::MAX;
/// Bytes of bookkeeping each buffered send takes from the attached buffer (MPI_BSEND_OVERHEAD).
pub const BSEND_OVERHEAD: usize = 96;
