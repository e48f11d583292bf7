//! p2p — point-to-point messaging with MPI 4.1 semantics on the fabric (DESIGN.md layer 5).
//!
//! One idea per file: [`matching`] is the I/O-free matching engine (posted receives against
//! arriving envelopes, MPI's order); `wire` the protocol's messages and their frame
//! encoding; `ops` the table of operations in flight; `send`, `bsend` and `recv` the two
//! sides of the protocols (eager frames, payload in the ring, one copy on each side;
//! rendezvous for large payloads, the receiver pulls with a single copy and answers FIN;
//! synchronous-mode acknowledgements; send cancellation; flow control that bounds what a
//! receiver buffers for messages nobody has asked for yet); `wait` how calls wait; `engine`
//! the endpoint's state and progress; `background` the operations made of steps (collective
//! schedules) that every progress call advances, and the progress design; `ranks` the
//! translation between a communicator's ranks and endpoints.
#![forbid(unsafe_code)]

pub(crate) mod background;
pub(crate) mod bsend;
pub(crate) mod engine;
pub mod matching;
pub(crate) mod ops;
pub(crate) mod ranks;
mod recv;
mod send;
pub(crate) mod wait;
pub(crate) mod wire;

pub use crate::status::{Status, ANY_SOURCE, ANY_TAG, PROC_NULL, ROOT};
pub(crate) use recv::Matched;

/// Largest tag a program may use (the MPI_TAG_UB attribute).
pub const TAG_UB: i32 = i32::MAX;
/// Bytes of bookkeeping each buffered send takes from the attached buffer (MPI_BSEND_OVERHEAD).
pub const BSEND_OVERHEAD: usize = 96;
