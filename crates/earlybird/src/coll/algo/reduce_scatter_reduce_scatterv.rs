//! Reduce-scatter as the canonical binomial reduce of the whole vector to rank 0 followed by
//! a linear scatter of the blocks from it (MPI_Reduce_scatter with any counts; the
//! `reduce_scatter` algorithm of MPI_Reduce_scatter_block is this one). Any number of ranks,
//! any operation; the bits are those of the binomial reduce. Best for small vectors.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::reduce_binomial::to_rank0;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::ReduceScatter,
    name: "reduce_scatterv",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// Where rank `i`'s block starts in the whole vector (elements).
pub(super) fn displ(a: &Args, i: i32) -> usize {
    match &a.rdispls {
        Some(d) => d[i as usize],
        None => i as usize * a.count,
    }
}

/// Elements in the whole vector of a reduce-scatter.
pub(super) fn total(a: &Args) -> usize {
    displ(a, a.size - 1) + a.rcount_of(a.size - 1)
}

pub(super) fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    // The whole vector, reduced as a reduce to rank 0 would (in place, the receive buffer
    // holds the whole vector and is the contribution).
    let whole = Args {
        coll: Coll::Reduce,
        root: 0,
        count: total(a),
        rcounts: None,
        rdispls: None,
        ..a.clone()
    };
    let result = to_rank0(&whole, s, false);
    if r == 0 {
        for i in 1..n {
            s.send(i, a.elem.block(&result, displ(a, i), a.rcount_of(i)));
        }
        s.copy(
            a.elem.block(&result, displ(a, 0), a.rcount_of(0)),
            a.rblock(0, a.rcount_of(0)),
        );
    } else {
        s.recv(0, a.rblock(0, a.rcount_of(r)));
    }
    s.wait();
}
