//! Linear neighbor_alltoallw: the exchange of
//! [`neighbor_alltoall_linear`](super::neighbor_alltoall_linear) over each neighbour's own
//! datatype and byte displacement.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::NeighborAlltoallw,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run: super::neighbor_alltoall_linear::run,
};
