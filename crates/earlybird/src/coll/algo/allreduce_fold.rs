//! Allreduce on a number of ranks that is not a power of two, in the fewest rounds: with `p`
//! the largest power of two below `n` and `rem = n - p`, the first `2 rem` ranks fold in
//! pairs (each odd rank's contribution into the even rank below it), the `p` ranks left run
//! recursive doubling, and the even ranks of the pairs hand the result back: `log2 p + 2`
//! rounds where reduce-then-bcast takes `2 ceil(log2 n)`. Every round moves the whole
//! vector, so it is the default for small vectors only.
//!
//! Operands stay in rank order (every combination is lower ranks' part op higher ranks'),
//! so any operation MPI allows is right; but for some `n` (5, say) the association is not the
//! canonical one of the `coll` module doc, so the bits of a floating-point sum may differ in
//! the last places from the other algorithms'. It is therefore the default only where the
//! communicator asserts seed 002's NO_REDUCE_CONSTRAINT (and fits nowhere else, so forcing it
//! without the assertion falls back to the default). The same call on the same ranks still
//! gives the same bits every time.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::{combine, msg, own_contribution, pow2};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allreduce,
    name: "fold",
    restrictions: "a number of ranks that is not a power of two, on a communicator that asserts NO_REDUCE_CONSTRAINT",
    fits: |a| !pow2(a.size) && a.unordered,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let p = 1i32 << (31 - n.leading_zeros());
    let rem = n - p;
    let bytes = a.count * a.elem.size;
    let result = a.rblock(0, a.count);
    let mut acc = own_contribution(a, s);
    // Two buffers the running result alternates between (never the send buffer).
    let bufs = [s.scratch(bytes), s.scratch(bytes)];
    let mut next = 0;
    let v = if r < 2 * rem {
        if r % 2 == 1 {
            // Folded: give the contribution to the even rank below, take the result back.
            s.send(r - 1, msg(a, &acc));
            s.recv(r - 1, result);
            s.wait();
            return;
        }
        let t = bufs[next].clone();
        next ^= 1;
        s.recv(r + 1, msg(a, &t));
        s.wait();
        // t = mine op the odd rank's (lower first).
        s.reduce(acc, t.clone());
        acc = t;
        r / 2
    } else {
        r - rem
    };
    // The real rank of virtual rank u.
    let real = |u: i32| if u < rem { 2 * u } else { u + rem };
    let mut k = 1;
    while k < p {
        let pv = v ^ k;
        let partner = real(pv);
        let t = bufs[next].clone();
        next ^= 1;
        s.send(partner, msg(a, &acc));
        s.recv(partner, msg(a, &t));
        s.wait();
        combine(a, s, acc, &t, pv > v);
        acc = t;
        k <<= 1;
    }
    s.copy(msg(a, &acc), result.clone());
    if r < 2 * rem {
        s.send(r + 1, result);
        s.wait();
    }
}
