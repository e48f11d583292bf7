//! Binomial-tree gather: ranks are numbered relative to the root (`vr = r - root mod n`);
//! rank `vr` collects the blocks of its subtree `[vr, vr + 2^j)` (2^j its lowest set bit,
//! cut at n) from its children `vr + 2^i`, i < j, in a scratch buffer in relative order
//! after its own, and sends them to its parent `vr - 2^j` in one message. The root receives
//! straight into its receive buffer when it is rank 0, else into scratch it then copies in
//! two pieces (relative order wraps around the end of the ranks). ceil(log2 n) rounds, each
//! block copied once per level: for small messages.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll, Elem};
use crate::coll::sched::Block;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Gather,
    name: "binomial",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// The binomial tree of `n` ranks relative to a root, seen from relative rank `vr`: the
/// lowest set bit of `vr` (the power of two at or above `n` for the root), and the ranks in
/// its subtree.
pub(super) fn subtree(vr: i32, n: i32) -> (i32, i32) {
    let low = if vr == 0 {
        (n as u32).next_power_of_two() as i32
    } else {
        vr & -vr
    };
    (low, low.min(n - vr))
}

/// The children of `vr` (relative), each with the ranks in its subtree, farthest first.
pub(super) fn children(vr: i32, n: i32) -> impl Iterator<Item = (i32, i32)> {
    let (low, _) = subtree(vr, n);
    (0..low.trailing_zeros())
        .rev()
        .map(move |i| (vr + (1 << i), 1 << i))
        .filter(move |&(c, _)| c < n)
        .map(move |(c, m)| (c, m.min(n - c)))
}

/// `k` blocks of `count` elements of `raw` (whose elements are `e`), from block `first`.
pub(super) fn blocks(a: &Args, e: &Elem, raw: &Block, first: i32, k: i32) -> Block {
    e.block(raw, first as usize * a.count, k as usize * a.count)
}

/// Where this rank sits in the tree rooted at the root.
pub(super) struct Node {
    /// Its rank relative to the root.
    pub(super) vr: i32,
    /// Its parent's (communicator) rank; meaningless at the root.
    pub(super) parent: i32,
    /// The ranks in its subtree, itself included.
    pub(super) sub: i32,
}

impl Node {
    pub(super) fn of(a: &Args) -> Node {
        let vr = (a.rank - a.root).rem_euclid(a.size);
        let (low, sub) = subtree(vr, a.size);
        Node {
            vr,
            parent: actual(a, vr - low),
            sub,
        }
    }

    /// A rank other than the root without children.
    pub(super) fn leaf(&self) -> bool {
        self.vr != 0 && self.sub == 1
    }
}

/// The communicator rank of relative rank `v`.
pub(super) fn actual(a: &Args, v: i32) -> i32 {
    (v + a.root) % a.size
}

/// The root's blocks in relative order 1.. are those of ranks root + 1, ..., n - 1, then
/// 0, ..., root - 1: the two pieces, each as (blocks of the whole-communicator buffer `raw`,
/// blocks of the relative-order buffer `rel`).
pub(super) fn wrapped(a: &Args, (raw, e): (&Block, &Elem), rel: &Block) -> [(Block, Block); 2] {
    let (n, root) = (a.size, a.root);
    let p = &e.packed();
    [
        (
            blocks(a, e, raw, root + 1, n - root - 1),
            blocks(a, p, rel, 1, n - root - 1),
        ),
        (
            blocks(a, e, raw, 0, root),
            blocks(a, p, rel, n - root, root),
        ),
    ]
}

fn run(a: &Args, s: &mut dyn Sink) {
    let me = Node::of(a);
    if me.leaf() {
        s.send(me.parent, a.sblock(0, a.count));
        s.wait();
        return;
    }
    // The root 0 gathers straight into its receive buffer; the others into packed scratch
    // (a non-root's elements are its send buffer's, whose packed size is the same per block).
    let (buf, e) = if me.vr == 0 && a.root == 0 {
        (a.recv.clone(), a.elem.clone())
    } else {
        let e = if me.vr == 0 { &a.elem } else { &a.selem };
        let p = e.packed();
        (s.scratch(me.sub as usize * a.count * p.size), p)
    };
    if me.vr != 0 {
        s.copy(a.sblock(0, a.count), blocks(a, &e, &buf, 0, 1));
    } else if a.send.is_some() {
        s.copy(a.sblock(0, a.count), a.rblock_of(a.root));
    }
    for (child, k) in children(me.vr, a.size) {
        s.recv(actual(a, child), blocks(a, &e, &buf, child - me.vr, k));
    }
    s.wait();
    if me.vr != 0 {
        s.send(me.parent, blocks(a, &e, &buf, 0, me.sub));
        s.wait();
    } else if a.root != 0 {
        for (user, rel) in wrapped(a, (&a.recv, &a.elem), &buf) {
            s.copy(rel, user);
        }
    }
}
