//! Allreduce as the canonical binomial reduce to rank 0 followed by a binomial broadcast
//! from it. Any number of ranks, any operation; 2 log2 n rounds.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::reduce_binomial::to_rank0;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allreduce,
    name: "reduce_bcast",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    to_rank0(a, s, a.rank == 0);
    let b = Args {
        root: 0,
        ..a.clone()
    };
    (super::bcast_binomial::ALGO.run)(&b, s);
}
