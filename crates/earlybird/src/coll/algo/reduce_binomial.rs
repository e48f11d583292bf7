//! Binomial-tree reduce, in the canonical association (see the module doc of `coll`): rank
//! `r` combines, for k = 0, 1, ..., the result of ranks `[r + 2^k, r + 2^(k+1))` into its own
//! until bit k of `r` is set, then sends its result to `r - 2^k`. The tree is rooted at rank 0
//! whatever the root, so every root gets the same bits; rank 0 then hands the result to the
//! root (one more message when the root is not 0). Any number of ranks, any operation.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::{msg, own_contribution, Alternate};
use crate::coll::sched::Block;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Reduce,
    name: "binomial",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let at_root = a.rank == a.root;
    let result = to_rank0(a, s, at_root && a.root == 0);
    if a.root != 0 {
        if a.rank == 0 {
            s.send(a.root, msg(a, &result));
        } else if at_root {
            s.recv(0, a.rblock(0, a.count));
        }
        s.wait();
    }
}

/// Reduce everyone's contribution to rank 0 in the canonical association. Returns the
/// buffer holding this rank's partial result when it is done (rank 0: the whole result,
/// in the receive buffer if `into_recv`).
pub(in super::super) fn to_rank0(a: &Args, s: &mut dyn Sink, into_recv: bool) -> Block {
    let (r, n) = (a.rank, a.size);
    let bytes = a.count * a.elem.size;
    // How many partial results this rank receives and folds in.
    let mut steps = 0;
    let mut k = 1;
    while k < n && r & k == 0 {
        if r + k < n {
            steps += 1;
        }
        k <<= 1;
    }
    let mut acc = own_contribution(a, s);
    let last = if into_recv {
        a.elem.run(&a.recv, 0, a.count)
    } else if steps > 0 {
        s.scratch(bytes)
    } else {
        acc.clone()
    };
    let other = if steps > 1 {
        s.scratch(bytes)
    } else {
        last.clone()
    };
    let mut bufs = Alternate::new(last, other, steps);
    let mut k = 1;
    while k < n {
        if r & k != 0 {
            s.send(r - k, msg(a, &acc));
            s.wait();
            return acc;
        }
        if r + k < n {
            let t = bufs.next();
            s.recv(r + k, msg(a, &t));
            s.wait();
            // t = acc op t: ours covers the lower ranks.
            s.reduce(acc, t.clone());
            acc = t;
        }
        k <<= 1;
    }
    if into_recv && steps == 0 {
        // One rank: the result is our own contribution.
        s.copy(msg(a, &acc), a.rblock(0, a.count));
    }
    acc
}
