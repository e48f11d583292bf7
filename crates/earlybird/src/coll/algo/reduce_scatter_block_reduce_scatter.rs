//! MPI_Reduce_scatter_block as the canonical binomial reduce of the whole vector to rank 0
//! followed by a scatter of the blocks (see `reduce_scatter_reduce_scatterv`). Any number of
//! ranks, any operation.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::ReduceScatterBlock,
    name: "reduce_scatter",
    restrictions: "none",
    fits: |_| true,
    run: super::reduce_scatter_reduce_scatterv::run,
};
