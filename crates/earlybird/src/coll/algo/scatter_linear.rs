//! Linear scatter: the root sends every rank its block at once. One round; any number of
//! ranks and any size. Also scatterv's.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Scatter,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// Scatter or scatterv (through [`Args::sblock_of`]). At the root an empty receive buffer
/// means in place: its block stays in the send buffer.
pub(super) fn run(a: &Args, s: &mut dyn Sink) {
    if a.rank != a.root {
        s.recv(a.root, a.rblock(0, a.count));
    } else {
        for i in (0..a.size).filter(|&i| i != a.root) {
            s.send(i, a.sblock_of(i));
        }
        if !a.recv.is_empty() {
            s.copy(a.sblock_of(a.root), a.rblock(0, a.count));
        }
    }
    s.wait();
}
