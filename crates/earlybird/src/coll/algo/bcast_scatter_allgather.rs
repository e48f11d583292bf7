//! Broadcast for large messages (van de Geijn): the root's message is cut into n near-equal
//! pieces, piece j going to the rank j places after the root; a binomial scatter hands every
//! rank its piece (and those of the ranks below it in the tree), then a ring allgather gives
//! everyone every piece. Each rank receives about 2 (n-1)/n of the message instead of
//! moving it whole down a tree. Any number of ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::allreduce_rabenseifner::pieces;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Bcast,
    name: "scatter_allgather",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let n = a.size;
    let vr = (a.rank - a.root + n) % n;
    let real = |v: i32| (v + a.root) % n;
    // Pieces of whole basic elements, so that every rank cuts the same ones.
    let g = a.grain();
    let mut off: Vec<usize> = pieces(a.count / g, n).into_iter().map(|x| x * g).collect();
    if let Some(last) = off.last_mut() {
        *last = a.count;
    }
    // Pieces [lo, hi), clipped to n, as one message.
    let span = |lo: i32, hi: i32| {
        let (lo, hi) = (lo as usize, hi.min(n) as usize);
        a.rblock(off[lo], off[hi] - off[lo])
    };
    // Scatter: the parent (vr with its lowest set bit cleared) sends the pieces of vr's
    // subtree, [vr, vr + lowest bit); vr then passes on its children's, farthest first.
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            s.recv(real(vr - mask), span(vr, vr + mask));
            s.wait();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            s.send(real(vr + mask), span(vr + mask, vr + 2 * mask));
        }
        mask >>= 1;
    }
    s.wait();
    // Ring allgather: in step t, pass on piece vr - t and receive piece vr - t - 1.
    let (right, left) = (real(vr + 1), real(vr + n - 1));
    for t in 0..n - 1 {
        let out = (vr - t + n) % n;
        let inc = (vr - t - 1 + 2 * n) % n;
        s.send(right, span(out, out + 1));
        s.recv(left, span(inc, inc + 1));
        s.wait();
    }
}
