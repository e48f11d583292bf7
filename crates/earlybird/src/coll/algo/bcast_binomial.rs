//! Binomial-tree broadcast: a rank receives from its parent (its rank relative to the root
//! with the lowest set bit cleared), then sends to its children, farthest first. ceil(log2 n)
//! rounds; any number of ranks and any size (the whole message moves on each edge).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Bcast,
    name: "binomial",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let n = a.size;
    let vr = (a.rank - a.root + n) % n;
    let buf = a.rblock(0, a.count);
    // The parent is vr with its lowest set bit cleared; the children are vr + 2^k for the
    // bits k below it.
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            s.recv((vr - mask + a.root) % n, buf.clone());
            s.wait();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            s.send((vr + mask + a.root) % n, buf.clone());
        }
        mask >>= 1;
    }
    s.wait();
}
