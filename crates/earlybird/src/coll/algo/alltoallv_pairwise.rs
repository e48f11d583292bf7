//! Pairwise alltoallv: the exchange of [`alltoall_pairwise`](super::alltoall_pairwise) over the
//! per-rank blocks of MPI_Alltoallv. Any number of ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Alltoallv,
    name: "pairwise",
    restrictions: "none",
    fits: |_| true,
    run: super::alltoall_pairwise::run,
};
