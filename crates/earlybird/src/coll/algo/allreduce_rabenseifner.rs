//! Rabenseifner's allreduce for large vectors: a recursive-halving reduce-scatter (partner
//! `r xor 1`, then `r xor 2`, `r xor 4`, ..., each round halving the part of the vector a
//! rank works on; see `reduce_scatter_block_recursive_halving`), which leaves every rank one
//! n-th of the result in the canonical association, then a recursive-doubling allgather of
//! the pieces in the opposite order. Each rank sends and receives about 2 (n-1)/n of the
//! vector instead of log2 n vectors. Powers of two only; any operation.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::{Block, Sink};
use super::super::{Args, Coll};
use super::pow2;
use super::reduce_scatter_block_recursive_halving::{halve, sibling};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allreduce,
    name: "rabenseifner",
    restrictions: "power-of-two number of ranks",
    fits: |a| pow2(a.size),
    run,
};

/// Where piece p of `n` near-equal pieces of `count` elements starts, for p in 0..=n.
pub(super) fn pieces(count: usize, n: i32) -> Vec<usize> {
    let n = n as usize;
    (0..=n)
        .map(|p| p * (count / n) + p.min(count % n))
        .collect()
}

/// Where this rank's contribution is for [`halve`] to start from, `w` being the vector it
/// works in: the send buffer itself when its elements are the receive buffer's, else (in
/// place: already there) none, after a copy into `w` when they differ.
pub(super) fn contribution<'a>(a: &'a Args, s: &mut dyn Sink, w: &Block) -> Option<&'a Block> {
    let sb = a.send.as_ref()?;
    if a.selem.same_plain(&a.elem) {
        return Some(sb);
    }
    s.copy(a.sblock(0, a.count), a.elem.block(w, 0, a.count));
    None
}

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let off = pieces(a.count, n);
    let from = contribution(a, s, &a.recv);
    let held = halve(a, s, &a.recv, &off, from);
    // Round k of the allgather undoes round k of the halving: the partner holds the other
    // half of what both held before it.
    let e = &a.elem;
    let block = |(lo, hi): (usize, usize)| e.block(&a.recv, off[lo], off[hi] - off[lo]);
    let mut k = held.len() - 1;
    while k > 0 {
        let d = 1 << (k - 1);
        let (mine, parent) = (held[k], held[k - 1]);
        let theirs = sibling(mine, parent);
        s.send(r ^ d, block(mine));
        s.recv(r ^ d, block(theirs));
        s.wait();
        k -= 1;
    }
}
