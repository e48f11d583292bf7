//! Pairwise-exchange alltoall: in round i (1 <= i < n) every rank sends its block for rank
//! `r + i` there and receives the block of rank `r - i` (mod n), one exchange in flight at a
//! time. n - 1 rounds; any number of ranks; best for large blocks (no contention, no
//! scratch beyond in place). The v and w forms share it.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::exchange::{incoming, keep_own, outgoing};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Alltoall,
    name: "pairwise",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// The exchange of alltoall, alltoallv and alltoallw.
pub(super) fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let out = outgoing(a, s, n as usize);
    keep_own(a, s, &out);
    for i in 1..n {
        let (to, from) = ((r + i) % n, (r - i + n) % n);
        s.send(to, out[to as usize].clone());
        s.recv(from, incoming(a, from as usize));
        s.wait();
    }
}
