//! Linear neighbourhood exchange: every send and receive posted at once, one wait. Sends go
//! out in destination order; receives in source order, except that on a Cartesian grid the
//! receives of each dimension's pair of sources are posted +1 first, so that when both neighbours are one rank (a periodic dimension of extent 1 or
//! 2) its message towards -1, sent first, lands in our +1 block, as MPI 4.1 §8.6 requires.
//! [`PROC_NULL`] neighbours are skipped. The other neighbourhood collectives share it.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use crate::p2p::PROC_NULL;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::NeighborAlltoall,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run,
};

/// The exchange of every neighbourhood collective: block `k` of the send buffer (the whole
/// send buffer for the allgathers) to destination `k`, block `k` of the receive buffer from
/// source `k`.
pub(super) fn run(a: &Args, s: &mut dyn Sink) {
    let sources = a.sources.as_deref().unwrap_or_default();
    let dests = a.dests.as_deref().unwrap_or_default();
    let gather = matches!(a.coll, Coll::NeighborAllgather | Coll::NeighborAllgatherv);
    for (k, &d) in dests.iter().enumerate() {
        if d != PROC_NULL {
            let out = match (&a.nwblocks, gather) {
                (Some((to, _)), _) => to[k].clone(),
                (None, true) => a.sblock(0, a.count),
                (None, false) => a.sblock_of(k as i32),
            };
            s.send(d, out);
        }
    }
    // Cartesian lists come in (-1, +1) pairs, one per dimension; a graph's are taken in
    // order (between two ranks, the k-th send meets the k-th receive).
    let pairs = a.cart_pairs;
    for k in (0..sources.len()).map(|k| if pairs { k ^ 1 } else { k }) {
        let from = sources[k];
        if from != PROC_NULL {
            let into = match &a.nwblocks {
                Some((_, from_each)) => from_each[k].clone(),
                None => a.rblock_of(k as i32),
            };
            s.recv(from, into);
        }
    }
    s.wait();
}
