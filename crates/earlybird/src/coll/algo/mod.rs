//! The collective algorithms, one per file, each a `static ALGO` with its restrictions
//! (see [`registry`](super::registry)), and the default preference by size and rank count.
#![forbid(unsafe_code)]

use super::registry::Algorithm;
use super::sched::Sink;
use super::{Args, Coll};
use crate::sys::lend::Lent;

mod allreduce_recursive_doubling;
mod allreduce_reduce_bcast;
mod alltoall_bruck;
mod alltoall_linear;
mod alltoall_pairwise;
mod alltoallv_linear;
mod alltoallv_pairwise;
mod alltoallw_linear;
mod alltoallw_pairwise;
mod barrier_dissemination;
mod bcast_binomial;
mod exchange;
mod neighbor_allgather_linear;
mod neighbor_allgatherv_linear;
mod neighbor_alltoall_linear;
mod neighbor_alltoallv_linear;
mod reduce_binomial;

/// Every algorithm. Per collective, the first listed is the default of last resort.
pub(super) static ALL: &[&Algorithm] = &[
    &barrier_dissemination::ALGO,
    &bcast_binomial::ALGO,
    &reduce_binomial::ALGO,
    &allreduce_recursive_doubling::ALGO,
    &allreduce_reduce_bcast::ALGO,
    &alltoall_pairwise::ALGO,
    &alltoall_linear::ALGO,
    &alltoall_bruck::ALGO,
    &alltoallv_pairwise::ALGO,
    &alltoallv_linear::ALGO,
    &alltoallw_linear::ALGO,
    &alltoallw_pairwise::ALGO,
    &neighbor_allgather_linear::ALGO,
    &neighbor_allgatherv_linear::ALGO,
    &neighbor_alltoall_linear::ALGO,
    &neighbor_alltoallv_linear::ALGO,
];

/// Messages up to this many bytes per rank count as small.
pub(super) const SMALL: usize = 2048;

/// The algorithms to try first for a call, best first (the registry takes the first that
/// fits, then any that fits).
pub(super) fn preference(a: &Args) -> &'static [&'static str] {
    match a.coll {
        Coll::Allreduce => &["recursive_doubling", "reduce_bcast"],
        // Bruck's fewer, larger messages pay off for tiny blocks on many ranks; posting
        // everything at once for small ones; one exchange at a time for large ones.
        Coll::Alltoall if a.bytes <= 256 && a.size > 8 => &["bruck"],
        Coll::Alltoall | Coll::Alltoallv | Coll::Alltoallw if a.bytes <= SMALL => &["linear"],
        Coll::Alltoall | Coll::Alltoallv | Coll::Alltoallw => &["pairwise"],
        _ => &[],
    }
}

/// Whether `n` is a power of two (1 included).
pub(super) fn pow2(n: i32) -> bool {
    n > 0 && n & (n - 1) == 0
}

/// Buffers a reduction accumulates in: the running result moves between two writable
/// buffers, arranged so that after `steps` reductions it is in `last`.
pub(super) struct Alternate {
    pub(super) last: Lent,
    pub(super) other: Lent,
    steps: usize,
    done: usize,
}

impl Alternate {
    pub(super) fn new(last: Lent, other: Lent, steps: usize) -> Alternate {
        Alternate {
            last,
            other,
            steps,
            done: 0,
        }
    }

    /// The buffer the next reduction writes.
    pub(super) fn next(&mut self) -> Lent {
        let left = self.steps - self.done;
        self.done += 1;
        if left % 2 == 1 {
            self.last.clone()
        } else {
            self.other.clone()
        }
    }
}

/// The running result of a reduction at the start: the send buffer, or (in place) a scratch
/// copy of the receive buffer, so that the receive buffer is free to be written.
pub(super) fn own_contribution(a: &Args, s: &mut dyn Sink) -> Lent {
    match &a.send {
        Some(sb) => a.elem.run(sb, 0, a.count),
        None => {
            let c = s.scratch(a.count * a.elem.size);
            s.copy(a.rblock(0, a.count), a.elem.block(&c, 0, a.count));
            c
        }
    }
}

/// A message view of the whole run `raw` of the call's `count` elements.
pub(super) fn msg(a: &Args, raw: &Lent) -> Lent {
    a.elem.block(raw, 0, a.count)
}
