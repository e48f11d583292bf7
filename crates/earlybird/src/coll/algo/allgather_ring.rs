//! Ring allgather: in round k every rank passes the block it received in round k - 1 (its
//! own in round 0) to its right neighbour and receives the next from its left. n - 1 rounds,
//! each rank sending and receiving n - 1 blocks: bandwidth-optimal for large messages, any
//! number of ranks. Also allgatherv's.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allgather,
    name: "ring",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// Allgather or allgatherv (through [`Args::rblock_of`]).
pub(super) fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    if a.send.is_some() {
        s.copy(a.sblock(0, a.count), a.rblock_of(r));
    }
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    for k in 0..n - 1 {
        s.send(right, a.rblock_of((r - k).rem_euclid(n)));
        s.recv(left, a.rblock_of((r - k - 1).rem_euclid(n)));
        s.wait();
    }
}
