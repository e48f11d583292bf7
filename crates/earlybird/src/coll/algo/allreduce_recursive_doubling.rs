//! Recursive-doubling allreduce: in round k every rank swaps its partial result with rank
//! `r xor 2^k` and combines the two, lower ranks' first. After log2 n rounds every rank holds
//! the result, combined in the canonical association (aligned blocks of 2^k ranks), so the
//! bits equal those of the binomial reduce. Powers of two only; best for small messages
//! (every round moves the whole vector).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::{combine, msg, own_contribution, pow2, Alternate};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allreduce,
    name: "recursive_doubling",
    restrictions: "power-of-two number of ranks",
    fits: |a| pow2(a.size),
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let steps = n.trailing_zeros() as usize;
    let mut acc = own_contribution(a, s);
    let last = a.elem.run(&a.recv, 0, a.count);
    if steps == 0 {
        s.copy(msg(a, &acc), a.rblock(0, a.count));
        return;
    }
    let other = if steps > 1 || a.send.is_none() {
        s.scratch(a.count * a.elem.size)
    } else {
        last.clone()
    };
    let mut bufs = Alternate::new(last, other, steps);
    let mut k = 1;
    while k < n {
        let partner = r ^ k;
        let t = bufs.next();
        s.send(partner, msg(a, &acc));
        s.recv(partner, msg(a, &t));
        s.wait();
        combine(a, s, acc, &t, partner > r);
        acc = t;
        k <<= 1;
    }
}
