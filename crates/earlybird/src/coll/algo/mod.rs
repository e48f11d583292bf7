//! The collective algorithms, one per file, each a `static ALGO` with its restrictions
//! (see [`registry`](super::registry)), and the default preference by size and rank count.
#![forbid(unsafe_code)]

use super::registry::Algorithm;
use super::sched::Sink;
use super::{Args, Coll};
use crate::coll::sched::Block;

mod allgather_bruck;
mod allgather_recursive_doubling;
mod allgather_ring;
mod allgatherv_gatherv_bcast;
mod allgatherv_ring;
mod allreduce_fold;
mod allreduce_rabenseifner;
mod allreduce_recursive_doubling;
mod allreduce_reduce_bcast;
mod allreduce_shm;
mod alltoall_bruck;
mod alltoall_linear;
mod alltoall_pairwise;
mod alltoallv_linear;
mod alltoallv_pairwise;
mod alltoallw_linear;
mod alltoallw_pairwise;
mod barrier_dissemination;
mod barrier_shm;
mod bcast_binomial;
mod bcast_pipeline;
mod bcast_scatter_allgather;
mod bcast_shm;
mod exchange;
mod exscan_recursive_doubling;
mod gather_binomial;
mod gather_linear;
mod gatherv_linear;
mod inter_linear;
mod neighbor_allgather_linear;
mod neighbor_allgatherv_linear;
mod neighbor_alltoall_linear;
mod neighbor_alltoallv_linear;
mod neighbor_alltoallw_linear;
mod reduce_binomial;
mod reduce_rabenseifner;
mod reduce_scatter_block_recursive_halving;
mod reduce_scatter_block_reduce_scatter;
mod reduce_scatter_recursive_halving;
mod reduce_scatter_reduce_scatterv;
mod reduce_shm;
pub(super) use reduce_shm::{fold_with, Folder};
mod scan_recursive_doubling;
mod scatter_binomial;
mod scatter_linear;
mod scatterv_linear;

/// Every algorithm. Per collective, the first listed is the default of last resort.
pub(super) static ALL: &[&Algorithm] = &[
    &barrier_dissemination::ALGO,
    &bcast_binomial::ALGO,
    &reduce_binomial::ALGO,
    &allreduce_recursive_doubling::ALGO,
    &allreduce_reduce_bcast::ALGO,
    &bcast_scatter_allgather::ALGO,
    &bcast_pipeline::ALGO,
    &reduce_rabenseifner::ALGO,
    &allreduce_rabenseifner::ALGO,
    &allreduce_fold::ALGO,
    &reduce_scatter_block_reduce_scatter::ALGO,
    &reduce_scatter_block_recursive_halving::ALGO,
    &reduce_scatter_reduce_scatterv::ALGO,
    &reduce_scatter_recursive_halving::ALGO,
    &scan_recursive_doubling::ALGO,
    &exscan_recursive_doubling::ALGO,
    &gather_linear::ALGO,
    &gather_binomial::ALGO,
    &gatherv_linear::ALGO,
    &scatter_linear::ALGO,
    &scatter_binomial::ALGO,
    &scatterv_linear::ALGO,
    &allgather_ring::ALGO,
    &allgather_recursive_doubling::ALGO,
    &allgather_bruck::ALGO,
    &allgatherv_ring::ALGO,
    &allgatherv_gatherv_bcast::ALGO,
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
    &neighbor_alltoallw_linear::ALGO,
    &barrier_shm::ALGO,
    &bcast_shm::ALGO,
    &reduce_shm::ALGO,
    &allreduce_shm::ALGO,
];

/// Whether the call may run in the communicator's collective region (`coll/shm.rs`): it
/// has a run of it (the communicator has a region: ranks of one host, an
/// intracommunicator of at most `shm::MAX_RANKS`).
pub(super) fn shm_fits(a: &Args) -> bool {
    a.shm && a.remote.is_none() && a.size >= 2
}

/// What the shared-memory reductions require, in words.
pub(super) const SHM_REDUCTION_RESTRICTIONS: &str = "ranks of one host sharing the communicator's collective region; up to 1008 bytes of a type without gaps";

/// [`shm_fits`], for a reduction whose contributions fit a slot and are runs of elements
/// (no gaps, not counted in bytes): the size is the send buffer's, which every rank has.
pub(super) fn shm_reduction_fits(a: &Args) -> bool {
    shm_fits(a) && reduction_fits_slot(a)
}

/// [`shm_reduction_fits`] but for the region: contributions that fit a slot, runs of
/// elements.
pub(super) fn reduction_fits_slot(a: &Args) -> bool {
    a.stage.is_none()
        && a.elem.is_gapless()
        && a.selem.is_gapless()
        && a.count * a.selem.packed_size() <= crate::coll::shm::PAYLOAD
}

/// The intercommunicator algorithms (see [`inter_linear`]).
pub(super) static INTER: &[&Algorithm] = &[
    &inter_linear::BARRIER,
    &inter_linear::BCAST,
    &inter_linear::GATHER,
    &inter_linear::GATHERV,
    &inter_linear::SCATTER,
    &inter_linear::SCATTERV,
    &inter_linear::ALLGATHER,
    &inter_linear::ALLGATHERV,
    &inter_linear::ALLTOALL,
    &inter_linear::ALLTOALLV,
    &inter_linear::ALLTOALLW,
    &inter_linear::REDUCE,
    &inter_linear::ALLREDUCE,
    &inter_linear::REDUCE_SCATTER,
    &inter_linear::REDUCE_SCATTER_BLOCK,
];

/// Run `alg` for `a`. A reduction of typed buffers (`a.stage`) runs on packed copies: the
/// send buffer is packed into scratch first, the receive buffer too (so that what the
/// algorithm leaves alone stays as it was), the algorithm runs on them in elements of the
/// reduction's type, and the result is unpacked into the receive buffer at the end.
pub(super) fn run(alg: &Algorithm, a: &Args, s: &mut dyn Sink) {
    let Some(st) = a.stage.as_deref() else {
        return (alg.run)(a, s);
    };
    let (u, e) = (st.unit, &st.elem);
    let (sn, rn) = (st.send_len / u, st.recv_len / u);
    let send = a.send.as_ref().map(|_| {
        let b = s.scratch(sn * e.size);
        s.copy(a.sblock(0, st.send_len), e.block(&b, 0, sn));
        b
    });
    let recv = (st.recv_len > 0).then(|| {
        let b = s.scratch(rn * e.size);
        s.copy(a.rblock(0, st.recv_len), e.block(&b, 0, rn));
        b
    });
    let per = |v: &Option<std::rc::Rc<[usize]>>| {
        v.as_ref()
            .map(|x| x.iter().map(|&n| n / u).collect::<std::rc::Rc<[usize]>>())
    };
    let inner = Args {
        elem: e.clone(),
        selem: e.clone(),
        send,
        recv: recv.clone().unwrap_or(Block::EMPTY),
        count: a.count / u,
        rcounts: per(&a.rcounts),
        rdispls: per(&a.rdispls),
        scounts: per(&a.scounts),
        sdispls: per(&a.sdispls),
        stage: None,
        ..a.clone()
    };
    (alg.run)(&inner, s);
    if let Some(r) = recv {
        s.wait();
        s.copy(e.block(&r, 0, rn), a.rblock(0, st.recv_len));
    }
}

/// Messages up to this many bytes per rank count as small.
pub(super) const SMALL: usize = 2048;

/// Messages from this many bytes per rank on count as large: reductions of powers of two
/// switch to Rabenseifner's algorithms, and broadcasts over more than two ranks to scatter
/// and allgather.
pub(super) const LARGE: usize = 64 << 10;

/// Broadcasts from this many bytes over more than two ranks are pipelined down a chain.
pub(super) const HUGE: usize = 2 << 20;

/// The algorithms to try first for a call, best first (the registry takes the first that
/// fits, then any that fits).
pub(super) fn preference(a: &Args) -> &'static [&'static str] {
    match a.coll {
        // Shared memory where it fits (one host) and was measured to win: the barrier at
        // any size; the persistent allreduce from four ranks (on two, one exchange of
        // messages is as quick). The persistent bcast and reduce, and the nonblocking
        // reduce, in shared memory are slower in back-to-back loops than by messages, so
        // they run there only when forced. A barrier, and a bcast or allreduce that fits a
        // slot, blocking or nonblocking, run in shared memory without a schedule
        // (`shm_blocking.rs`, `shm_nonblocking.rs`, which pass this list by), unless
        // another algorithm is forced. README "Collectives through shared memory" has the
        // figures.
        Coll::Barrier => &["shm", "dissemination"],
        Coll::Allreduce if a.size >= 4 && shm_reduction_fits(a) => &["shm"],
        Coll::Allreduce if a.bytes >= LARGE && pow2(a.size) => {
            &["rabenseifner", "recursive_doubling", "reduce_bcast"]
        }
        // Folding moves the whole vector every round: for small ones only.
        Coll::Allreduce if a.unordered && a.bytes < LARGE => {
            &["recursive_doubling", "fold", "reduce_bcast"]
        }
        Coll::Allreduce => &["recursive_doubling", "reduce_bcast"],
        Coll::Reduce if a.bytes >= LARGE && pow2(a.size) => &["rabenseifner", "binomial"],
        Coll::Reduce => &["binomial"],
        // Ranks that outnumber their host's cores: the tree's few hand-offs beat the
        // scatter's and allgather's many, each of which may wait for a time slice (1 MiB
        // at 3 / 4 / 8 ranks on 2 cores: 135 / 243 / 450 us against 180 / 290 / 650).
        Coll::Bcast if a.size > 2 && a.bytes >= LARGE && crowded(a) => &["binomial"],
        Coll::Bcast if a.size > 2 && a.bytes >= HUGE => &["pipeline", "binomial"],
        Coll::Bcast if a.size > 2 && a.bytes >= LARGE => &["scatter_allgather", "binomial"],
        Coll::Bcast => &["binomial"],
        Coll::ReduceScatterBlock => &["recursive_halving", "reduce_scatter"],
        Coll::ReduceScatter => &["recursive_halving", "reduce_scatterv"],
        Coll::Gather | Coll::Scatter if a.bytes <= SMALL => &["binomial", "linear"],
        Coll::Allgather if a.bytes <= SMALL => &["recursive_doubling", "bruck", "ring"],
        Coll::Allgather => &["recursive_doubling", "ring"],
        Coll::Allgatherv if a.bytes <= SMALL => &["gatherv_bcast", "ring"],
        // Bruck's fewer, larger messages pay off for tiny blocks on many ranks; posting
        // everything at once for small ones; one exchange at a time for large ones.
        Coll::Alltoall if a.bytes <= 256 && a.size > 8 => &["bruck"],
        Coll::Alltoall | Coll::Alltoallv | Coll::Alltoallw if a.bytes <= SMALL => &["linear"],
        Coll::Alltoall | Coll::Alltoallv | Coll::Alltoallw => &["pairwise"],
        _ => &[],
    }
}

/// Whether the call's ranks outnumber the cores of the host they share. Only a
/// communicator with a collective region is known to be on one host; every rank of it
/// computes the same (its size, the host's online CPUs, not the process's own mask, which
/// may differ between ranks), so all choose alike.
pub(super) fn crowded(a: &Args) -> bool {
    // Read once: the count comes from a file under /sys (3 us a read).
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    a.shm && a.size as usize > *CPUS.get_or_init(crate::sys::process::cpus)
}

/// Whether `n` is a power of two (1 included).
pub(super) fn pow2(n: i32) -> bool {
    n > 0 && n & (n - 1) == 0
}

/// Buffers a reduction accumulates in: the running result moves between two writable
/// buffers, arranged so that after `steps` reductions it is in `last`.
pub(super) struct Alternate {
    pub(super) last: Block,
    pub(super) other: Block,
    steps: usize,
    done: usize,
}

impl Alternate {
    pub(super) fn new(last: Block, other: Block, steps: usize) -> Alternate {
        Alternate {
            last,
            other,
            steps,
            done: 0,
        }
    }

    /// The buffer the next reduction writes.
    pub(super) fn next(&mut self) -> Block {
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
pub(super) fn own_contribution(a: &Args, s: &mut dyn Sink) -> Block {
    match &a.send {
        Some(sb) => a.selem.run(sb, 0, a.count),
        None => {
            let c = s.scratch(a.count * a.elem.size);
            s.copy(a.rblock(0, a.count), a.elem.block(&c, 0, a.count));
            c
        }
    }
}

/// One combining step of a reduction between this rank's running result `acc` and the
/// partner's `t`, into `t`: `acc op t` when this rank's part is the lower one
/// (`mine_lower`) or the operation commutes (then the operands' order changes no bits, only
/// the association does); else `t op acc`, the partner's lower part first, through a
/// scratch copy.
pub(super) fn combine(a: &Args, s: &mut dyn Sink, acc: Block, t: &Block, mine_lower: bool) {
    if mine_lower || a.commutative {
        s.reduce(acc, t.clone());
    } else {
        let u = s.scratch(a.count * a.elem.size);
        s.copy(msg(a, &acc), msg(a, &u));
        s.reduce(t.clone(), u.clone());
        s.copy(msg(a, &u), msg(a, t));
    }
}

/// A message view of the whole run `raw` of the call's `count` elements.
pub(super) fn msg(a: &Args, raw: &Block) -> Block {
    a.elem.block(raw, 0, a.count)
}
