//! Linear gather: every rank sends its block straight to the root, which receives them all
//! at once into their places. One round; any number of ranks and any size. Also gatherv's.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Gather,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// Gather or gatherv (through [`Args::rblock_of`]); the root's own block is copied unless
/// the call is in place.
pub(super) fn run(a: &Args, s: &mut dyn Sink) {
    if a.rank != a.root {
        s.send(a.root, a.sblock(0, a.count));
    } else {
        for i in (0..a.size).filter(|&i| i != a.root) {
            s.recv(i, a.rblock_of(i));
        }
        if a.send.is_some() {
            s.copy(a.sblock(0, a.count), a.rblock_of(a.root));
        }
    }
    s.wait();
}
