//! Linear alltoallw: the exchange of [`alltoall_linear`](super::alltoall_linear) over the
//! per-rank blocks of MPI_Alltoallw. Any number of ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Alltoallw,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run: super::alltoall_linear::run,
};
