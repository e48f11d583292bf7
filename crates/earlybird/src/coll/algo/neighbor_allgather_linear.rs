//! Linear neighbor_allgather: the exchange of
//! [`neighbor_alltoall_linear`](super::neighbor_alltoall_linear) (every message posted at
//! once, one wait, Cartesian pairs matched as MPI 4.1 §8.6 requires).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::NeighborAllgather,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run: super::neighbor_alltoall_linear::run,
};
