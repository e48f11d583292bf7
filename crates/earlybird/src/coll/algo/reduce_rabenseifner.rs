//! Rabenseifner's reduce for large vectors: the recursive-halving reduce-scatter of
//! `allreduce_rabenseifner` (canonical association), then a binomial gather of the pieces to
//! rank 0 that undoes the halving rounds in the opposite order, and rank 0 hands the result
//! to the root. Powers of two only; any operation.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::allreduce_rabenseifner::{contribution, pieces};
use super::pow2;
use super::reduce_scatter_block_recursive_halving::{halve, sibling};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Reduce,
    name: "rabenseifner",
    restrictions: "power-of-two number of ranks",
    fits: |a| pow2(a.size),
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let e = &a.elem;
    // The vector this rank works in: the receive buffer at the root, scratch elsewhere.
    let w = if r == a.root {
        a.elem.run(&a.recv, 0, a.count)
    } else {
        s.scratch(a.count * e.size)
    };
    let off = pieces(a.count, n);
    let from = contribution(a, s, &w);
    let held = halve(a, s, &w, &off, from);
    let block = |(lo, hi): (usize, usize)| e.block(&w, off[lo], off[hi] - off[lo]);
    // Gather round k (k = log2 n - 1 down to 0): ranks below 2^(k+1) whose bit k is set send
    // what they hold to the rank 2^k below, which then holds what both held before halving
    // round k.
    let mut k = held.len() - 1;
    while k > 0 {
        let d = 1 << (k - 1);
        if r < 2 * d {
            let (mine, parent) = (held[k], held[k - 1]);
            if r & d != 0 {
                s.send(r - d, block(mine));
                s.wait();
                break;
            }
            let theirs = sibling(mine, parent);
            s.recv(r + d, block(theirs));
            s.wait();
        }
        k -= 1;
    }
    if a.root != 0 {
        if r == 0 {
            s.send(a.root, block((0, n as usize)));
        } else if r == a.root {
            s.recv(0, a.rblock(0, a.count));
        }
        s.wait();
    }
}
