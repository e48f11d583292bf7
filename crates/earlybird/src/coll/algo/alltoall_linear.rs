//! Linear alltoall: every receive and every send posted at once (peers in the order
//! `r + 1, r + 2, ...` so that not everyone starts with rank 0), one wait. One round; any
//! number of ranks; best for small and medium blocks on few ranks. The v and w forms share
//! it.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::exchange::{incoming, keep_own, outgoing};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Alltoall,
    name: "linear",
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
        let from = (r - i + n) % n;
        s.recv(from, incoming(a, from as usize));
    }
    for i in 1..n {
        let to = (r + i) % n;
        s.send(to, out[to as usize].clone());
    }
    s.wait();
}
