//! Recursive-doubling allgather: in round k every rank swaps the 2^k blocks it has (those of
//! its aligned group of 2^k ranks, contiguous in the receive buffer) with rank `r xor 2^k`.
//! log2 n rounds and the ring's volume; powers of two only.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::pow2;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allgather,
    name: "recursive_doubling",
    restrictions: "power-of-two number of ranks",
    fits: |a| pow2(a.size),
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n, c) = (a.rank, a.size, a.count);
    if a.send.is_some() {
        s.copy(a.sblock(0, c), a.rblock_of(r));
    }
    let mut k = 1;
    while k < n {
        let partner = r ^ k;
        let (mine, theirs) = ((r & !(k - 1)) as usize, (partner & !(k - 1)) as usize);
        let blocks = k as usize * c;
        s.send(partner, a.rblock(mine * c, blocks));
        s.recv(partner, a.rblock(theirs * c, blocks));
        s.wait();
        k <<= 1;
    }
}
