//! fabric — moves frames between endpoints.
//!
//! Shared memory on one host, the same code whether the peers are threads of one process or
//! separate processes: per ordered pair of endpoints one `ring` for eager frames and
//! protocol messages, and single-copy bulk transfer for large payloads
//! (`Lent::pull`: `memcpy` inside a process,
//! `process_vm_readv` between processes). Later transports (TCP) come in beside `shm`.

pub mod channel;
pub(crate) mod ring;
pub mod shm;
pub(crate) mod sync;
