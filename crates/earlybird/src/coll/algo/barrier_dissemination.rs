//! Dissemination barrier (Hensgen, Finkel and Manber): in round k every rank signals rank
//! `r + 2^k` and waits for rank `r - 2^k` (mod n); after ceil(log2 n) rounds every rank
//! has heard, directly or not, from every other. Any number of ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use crate::coll::sched::Block;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Barrier,
    name: "dissemination",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let mut d = 1;
    while d < n {
        s.send((r + d) % n, Block::EMPTY);
        s.recv((r - d + n) % n, Block::EMPTY);
        s.wait();
        d *= 2;
    }
}
