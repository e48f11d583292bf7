//! Bruck allgather: blocks gather in a scratch buffer in order from the rank's own; in round
//! k every rank sends the first min(2^k, n - 2^k) blocks it has to rank `r - 2^k` and
//! receives as many from rank `r + 2^k` after them. After ceil(log2 n) rounds the scratch
//! holds the blocks of ranks r, r + 1, ... (mod n), copied then into place. Any number of
//! ranks; best for small messages (the extra copies cost little there).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allgather,
    name: "bruck",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n, c) = (a.rank, a.size, a.count);
    let p = a.elem.packed();
    let buf = s.scratch(n as usize * c * p.size);
    let blocks = |first: i32, k: i32| p.block(&buf, first as usize * c, k as usize * c);
    let own = match a.send {
        Some(_) => a.sblock(0, c),
        None => a.rblock_of(r),
    };
    s.copy(own.clone(), blocks(0, 1));
    let mut d = 1;
    while d < n {
        let k = d.min(n - d);
        s.send((r - d).rem_euclid(n), blocks(0, k));
        s.recv((r + d) % n, blocks(d, k));
        s.wait();
        d <<= 1;
    }
    // Scratch block j is rank (r + j) mod n's.
    let tail = (n - r - 1) as usize;
    s.copy(
        blocks(1, n - r - 1),
        a.rblock((r as usize + 1) * c, tail * c),
    );
    s.copy(blocks(n - r, r), a.rblock(0, r as usize * c));
    if a.send.is_some() {
        s.copy(own, a.rblock_of(r));
    }
}
