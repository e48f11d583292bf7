//! MPI_Reduce_scatter by recursive halving, in the canonical association: see
//! `reduce_scatter_block_recursive_halving`. Powers of two only; any counts.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;
use super::pow2;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::ReduceScatter,
    name: "recursive_halving",
    restrictions: "power-of-two number of ranks",
    fits: |a| pow2(a.size),
    run: super::reduce_scatter_block_recursive_halving::run,
};
