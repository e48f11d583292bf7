//! Allgatherv as a linear gatherv to rank 0, into a scratch buffer holding the blocks packed
//! in rank order, then a binomial broadcast of that buffer, unpacked by every rank into its
//! displacements (gaps in the receive buffer stay untouched). log2 n rounds after the
//! gather; for small messages on many ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allgatherv,
    name: "gatherv_bcast",
    restrictions: "none",
    fits: |a| a.rcounts.is_some(),
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let counts = a.rcounts.as_ref().expect("allgatherv's counts");
    let mut offs = Vec::with_capacity(n as usize + 1);
    offs.push(0usize);
    for &c in counts.iter() {
        offs.push(offs.last().copied().unwrap_or(0) + c);
    }
    let all = offs[n as usize];
    let p = a.elem.packed();
    let buf = s.scratch(all * p.size);
    let block = |i: i32| p.block(&buf, offs[i as usize], a.rcount_of(i));
    let own = match a.send {
        Some(_) => a.sblock(0, a.count),
        None => a.rblock_of(r),
    };
    if r == 0 {
        s.copy(own, block(0));
        for i in 1..n {
            s.recv(i, block(i));
        }
    } else {
        s.send(0, own);
    }
    s.wait();
    let b = Args {
        coll: Coll::Bcast,
        root: 0,
        send: None,
        recv: buf.clone(),
        elem: p.clone(),
        selem: p.clone(),
        count: all,
        rcounts: None,
        rdispls: None,
        ..a.clone()
    };
    (super::bcast_binomial::ALGO.run)(&b, s);
    for i in (0..n).filter(|&i| i != r || a.send.is_some()) {
        s.copy(block(i), a.rblock_of(i));
    }
}
