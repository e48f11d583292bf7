//! Recursive-halving reduce-scatter: in round k (k = 0, 1, ...) every rank swaps half of
//! what it still holds with rank `r xor 2^k` and combines the half it keeps, lower ranks'
//! part first. After round k a rank's partial result covers the aligned block of `2^(k+1)`
//! ranks around it, so after log2 n rounds the association is the canonical binomial one
//! (see the module doc of `coll`), commutative operation or not.
//!
//! Round k splits by bit k of the rank, so the blocks are first laid out in a scratch vector
//! in bit-reversed rank order: every half a rank keeps is then one contiguous run, and rank
//! r ends with block r. Powers of two only; any counts (MPI_Reduce_scatter_block, and
//! MPI_Reduce_scatter as `reduce_scatter_recursive_halving`).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::pow2;
use super::reduce_scatter_reduce_scatterv::{displ, total};
use crate::coll::sched::Block;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::ReduceScatterBlock,
    name: "recursive_halving",
    restrictions: "power-of-two number of ranks",
    fits: |a| pow2(a.size),
    run,
};

/// `i` with its low `bits` bits in reverse order.
fn reverse(i: i32, bits: u32) -> i32 {
    if bits == 0 {
        0
    } else {
        ((i as u32).reverse_bits() >> (32 - bits)) as i32
    }
}

pub(super) fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let bits = n.trailing_zeros();
    // off[p]: where the block at position p (rank reverse(p)'s) starts in the scratch.
    let mut off = Vec::with_capacity(n as usize + 1);
    off.push(0);
    for p in 0..n {
        let i = reverse(p, bits);
        off.push(off[p as usize] + a.rcount_of(i));
    }
    let w = s.scratch(total(a) * a.elem.size);
    for i in 0..n {
        let p = reverse(i, bits) as usize;
        s.copy(
            a.sblock(displ(a, i), a.rcount_of(i)),
            a.elem.block(&w, off[p], a.rcount_of(i)),
        );
    }
    halve(a, s, &w, &off, None);
    let p = reverse(r, bits) as usize;
    s.copy(
        a.elem.block(&w, off[p], a.rcount_of(r)),
        a.rblock(0, a.rcount_of(r)),
    );
}

/// The reduce-scatter rounds over `w`, a vector cut into `n` pieces, piece p being elements
/// `off[p]..off[p + 1]`, which holds this rank's contribution. Round k keeps the lower half
/// of the pieces still held if bit k of the rank is clear, the upper half otherwise, and
/// leaves in it the partial result over the aligned block of `2^(k+1)` ranks. Returns the
/// pieces held before each round and at the end (`[0, n)` first, one piece last).
///
/// `from`: where the contribution is instead, laid out as `w` (the send buffer), when `w`
/// does not hold it yet. The first round then sends its half straight from there and
/// receives the partner's half straight into `w`, combining its own into it, so the
/// contribution is never copied whole into `w` first (a copy of the whole vector, a quarter
/// of an allreduce of 1 MiB at 2 ranks); only a non-commutative operation whose partner's
/// part comes first still copies the half kept.
pub(super) fn halve(
    a: &Args,
    s: &mut dyn Sink,
    w: &Block,
    off: &[usize],
    from: Option<&Block>,
) -> Vec<(usize, usize)> {
    let (r, n) = (a.rank, a.size);
    let e = &a.elem;
    let mut held = vec![(0, n as usize)];
    let (mut lo, mut hi) = (0usize, n as usize);
    // Every half kept later lies in one of the first round's halves.
    let tmp = if n > 1 {
        let h = n as usize / 2;
        s.scratch((off[h] - off[0]).max(off[2 * h] - off[h]) * e.size)
    } else {
        Block::EMPTY
    };
    let mut from = from;
    let mut d = 1;
    while d < n {
        let partner = r ^ d;
        let mid = (lo + hi) / 2;
        let (keep, give) = if r & d == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        let kn = off[keep.1] - off[keep.0];
        let src = from.unwrap_or(w);
        s.send(
            partner,
            e.block(src, off[give.0], off[give.1] - off[give.0]),
        );
        let mine = e.run(w, off[keep.0], kn);
        let theirs = e.run(&tmp, 0, kn);
        match from.take() {
            Some(f) if partner > r || a.commutative => {
                // The partner's half lands where the result goes: mine op theirs there
                // (ours the lower ranks' part, or an operation whose operands' order changes
                // no bits).
                s.recv(partner, e.block(w, off[keep.0], kn));
                s.wait();
                s.reduce(e.run(f, off[keep.0], kn), mine);
            }
            Some(f) => {
                // theirs op mine, theirs first: ours copied to where the result goes.
                s.recv(partner, e.block(&tmp, 0, kn));
                s.wait();
                s.copy(e.block(f, off[keep.0], kn), e.block(w, off[keep.0], kn));
                s.reduce(theirs, mine);
            }
            None => {
                s.recv(partner, e.block(&tmp, 0, kn));
                s.wait();
                if partner < r || a.commutative {
                    // mine = theirs op mine (for a commutative operation, only the
                    // association matters for the bits).
                    s.reduce(theirs, mine);
                } else {
                    // mine op theirs, ours being the lower ranks' part.
                    s.reduce(mine, theirs);
                    s.copy(e.block(&tmp, 0, kn), e.block(w, off[keep.0], kn));
                }
            }
        }
        (lo, hi) = keep;
        held.push(keep);
        d <<= 1;
    }
    if let Some(f) = from {
        // No round (one rank): the contribution is the result.
        s.copy(
            e.block(f, 0, off[n as usize]),
            e.block(w, 0, off[n as usize]),
        );
    }
    held
}

/// The other half of `parent` than `half` (pieces `[lo, hi)`).
pub(super) fn sibling(half: (usize, usize), parent: (usize, usize)) -> (usize, usize) {
    if half.0 == parent.0 {
        (half.1, parent.1)
    } else {
        (parent.0, half.0)
    }
}
