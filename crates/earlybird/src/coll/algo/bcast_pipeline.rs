//! Pipelined chain broadcast for very large messages: the ranks form a chain from the root
//! in rank order (relative to the root), and the message travels down it in segments of
//! 64 KiB, each rank passing a segment on while it receives the next. Time about (segments
//! + n - 2) segment transfers. Any number of ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Bcast,
    name: "pipeline",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// Bytes per segment.
const SEGMENT: usize = 64 << 10;

fn run(a: &Args, s: &mut dyn Sink) {
    let n = a.size;
    let vr = (a.rank - a.root + n) % n;
    let g = a.grain();
    let seg = (SEGMENT / a.elem.size.max(1) / g).max(1) * g;
    let (prev, next) = ((a.rank + n - 1) % n, (a.rank + 1) % n);
    let mut first = 0;
    while first < a.count {
        let b = a.rblock(first, seg.min(a.count - first));
        if vr > 0 {
            s.recv(prev, b.clone());
            s.wait();
        }
        if vr + 1 < n {
            s.send(next, b);
        }
        first += seg;
    }
    s.wait();
}
