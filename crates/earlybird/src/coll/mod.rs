//! coll — collective operations as schedules (DESIGN.md layer 8).
//!
//! Every collective is written once per algorithm, as steps emitted into a `Sink` (`sched.rs`):
//! a blocking call runs them as they come, a nonblocking call (`i*`) records them and the
//! request layer advances the record from test and wait, and a persistent call (`*_init`)
//! records them once, with peers, buffers and scratch, and replays the record at every
//! start.
//!
//! Algorithms live one per file under `algo/`; the registry (`registry.rs`) lists them with their
//! restrictions, picks one by message size and rank count, and lets the environment
//! (`EARLYBIRD_COLL_<COLLECTIVE>=<algorithm>`) or a communicator info hint
//! (`earlybird_coll_<collective>`) force one.
//!
//! # Buffers
//!
//! Collectives take slices of an [`crate::Equivalence`] type ([`Src`], [`Dst`]), or views of
//! slices through derived datatypes ([`crate::Typed`], [`crate::TypedMut`]): MPI's
//! (address, count, datatype). Counts come from the buffers: a gather's count is the send
//! buffer's, and the root's receive buffer holds `size` such blocks. A buffer significant
//! only at the root may be empty elsewhere (an empty slice of any type). [`IN_PLACE`] stands
//! for MPI_IN_PLACE where MPI allows it.
//!
//! Slices of one type count in elements. With a typed view (or slices of two types) a call
//! counts in bytes of the packed message, so that the send and receive datatypes may differ
//! with one type signature, as MPI allows; `buffers.rs` says how, and `algo::run` how a
//! reduction of typed buffers runs (on packed copies, in elements of the one predefined type
//! the datatype is made of). A broadcast counts in bytes everywhere, so that every rank cuts
//! a large message into the same pieces whatever its buffer.
//!
//! # Intercommunicators
//!
//! Barrier, bcast, gather(v), scatter(v), allgather(v), alltoall(v/w), reduce, allreduce and
//! reduce_scatter(_block) run on intercommunicators too, in all three forms, with
//! [`ROOT`](crate::ROOT) and [`PROC_NULL`](crate::PROC_NULL) as the root arguments of the
//! rooted ones (`api_inter.rs` says which buffers count where, `algo/inter_linear.rs` how
//! they run: every member talks to the remote group directly). Scan, exscan and the
//! neighbourhood collectives are intracommunicator-only (MPI_ERR_COMM).
//!
//! # Reductions are reproducible
//!
//! Every reduction algorithm on an intracommunicator combines contributions in one association, whatever the
//! algorithm and message size: the binomial tree over rank order, in which the result over
//! ranks `[lo, hi)` (with `lo` a multiple of the power of two `2^k >= hi - lo`) is
//! `[lo, lo + 2^(k-1)) op [lo + 2^(k-1), hi)`. With the same ranks and inputs, every call
//! gives the same bits on every rank, as MPI 4.1 §6.9.1 advises. Scans (MPI_Scan,
//! MPI_Exscan) have one association of their own, given in `algo/scan_recursive_doubling.rs`.
//! The one exception is chosen only where the program lifted the constraint (seed 002's
//! NO_REDUCE_CONSTRAINT): allreduce on a number of ranks that is not a power of two folds
//! pairs first (`algo/allreduce_fold.rs`), in fewer rounds but another association.
//!
//! # Standard section(s)
//! MPI 4.1 chapter 6 (collective communication), §6.12 (nonblocking), §6.13 (persistent),
//! §8.6 (neighbourhood collectives).
#![forbid(unsafe_code)]

pub mod op;
pub(crate) mod registry;
pub(crate) mod sched;
pub(crate) mod shm;

mod algo;
mod api;
mod api_alltoall;
mod api_gather;
mod api_inter;
mod api_neighbor;
mod api_reduce_scatter;
mod buffers;
mod shm_blocking;
mod shm_nonblocking;

use crate::datatype::{Datatype, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::layout::Layout;
use sched::Block;
use std::rc::Rc;

pub(crate) use api::RepeatSlot;
pub use api::{InPlace, INIT_EFFORT, IN_PLACE};
pub use api_alltoall::WSpec;
pub use buffers::{Dst, DstOrInPlace, Src};
pub use registry::{algorithms, last_algorithm, AlgorithmInfo};

/// The collectives, as the registry and the forcing variables name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coll {
    Barrier,
    Bcast,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    Alltoallw,
    Reduce,
    Allreduce,
    ReduceScatter,
    ReduceScatterBlock,
    Scan,
    Exscan,
    NeighborAllgather,
    NeighborAllgatherv,
    NeighborAlltoall,
    NeighborAlltoallv,
    NeighborAlltoallw,
}

impl Coll {
    pub const ALL: [Coll; 22] = [
        Coll::Barrier,
        Coll::Bcast,
        Coll::Gather,
        Coll::Gatherv,
        Coll::Scatter,
        Coll::Scatterv,
        Coll::Allgather,
        Coll::Allgatherv,
        Coll::Alltoall,
        Coll::Alltoallv,
        Coll::Alltoallw,
        Coll::Reduce,
        Coll::Allreduce,
        Coll::ReduceScatter,
        Coll::ReduceScatterBlock,
        Coll::Scan,
        Coll::Exscan,
        Coll::NeighborAllgather,
        Coll::NeighborAllgatherv,
        Coll::NeighborAlltoall,
        Coll::NeighborAlltoallv,
        Coll::NeighborAlltoallw,
    ];

    /// Lower-case name: `allreduce`, `reduce_scatter_block`, `neighbor_alltoallv`, ...
    pub fn name(self) -> &'static str {
        use Coll::*;
        match self {
            Barrier => "barrier",
            Bcast => "bcast",
            Gather => "gather",
            Gatherv => "gatherv",
            Scatter => "scatter",
            Scatterv => "scatterv",
            Allgather => "allgather",
            Allgatherv => "allgatherv",
            Alltoall => "alltoall",
            Alltoallv => "alltoallv",
            Alltoallw => "alltoallw",
            Reduce => "reduce",
            Allreduce => "allreduce",
            ReduceScatter => "reduce_scatter",
            ReduceScatterBlock => "reduce_scatter_block",
            Scan => "scan",
            Exscan => "exscan",
            NeighborAllgather => "neighbor_allgather",
            NeighborAllgatherv => "neighbor_allgatherv",
            NeighborAlltoall => "neighbor_alltoall",
            NeighborAlltoallv => "neighbor_alltoallv",
            NeighborAlltoallw => "neighbor_alltoallw",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// How the elements of one of a collective's buffers are laid out: their size in a message,
/// where they sit in the buffer, and their signature.
#[derive(Clone, Debug)]
pub(crate) struct Elem {
    /// Bytes of one element in a message (for a slice of a type with padding, the type's
    /// size in memory, padding included: its stride).
    pub(crate) size: usize,
    laid: Laid,
    pub(crate) sig: crate::datatype::Sig,
}

#[derive(Clone, Debug)]
enum Laid {
    /// Element `i` is bytes `i * size ..` of the buffer.
    Plain,
    /// A slice of a type with padding: element `i` is bytes `i * size ..`, moved through the
    /// type's own datatype, which skips the padding.
    Padded(Datatype),
    /// Counted in bytes (`size` 1): "element" `i` is byte `i` of the message this layout
    /// makes of the buffer (a typed view, or a slice beside one; see `buffers.rs`).
    Bytes(Rc<Layout>),
}

impl Elem {
    pub(crate) fn of<T: Equivalence>() -> Result<Elem> {
        Ok(Elem {
            size: std::mem::size_of::<T>(),
            laid: if T::GAPLESS {
                Laid::Plain
            } else {
                Laid::Padded(crate::datatype::buffer::own_datatype::<T>()?)
            },
            sig: T::SIG,
        })
    }

    /// Elements of `size` bytes, each its bytes in order.
    #[inline]
    pub(crate) fn plain(size: usize, sig: crate::datatype::Sig) -> Elem {
        Elem {
            size,
            laid: Laid::Plain,
            sig,
        }
    }

    /// A slice of a type with padding, moved through `dt` (its own datatype).
    pub(crate) fn padded(size: usize, dt: Datatype, sig: crate::datatype::Sig) -> Elem {
        Elem {
            size,
            laid: Laid::Padded(dt),
            sig,
        }
    }

    /// The bytes of the message `layout` makes of a buffer, counted one by one.
    pub(crate) fn bytes_of(layout: Rc<Layout>, sig: crate::datatype::Sig) -> Elem {
        Elem {
            size: 1,
            laid: Laid::Bytes(layout),
            sig,
        }
    }

    /// Whether both are elements of the same size and signature that move as their bytes.
    #[inline(always)]
    pub(crate) fn same_plain(&self, other: &Elem) -> bool {
        matches!((&self.laid, &other.laid), (Laid::Plain, Laid::Plain))
            && self.size == other.size
            && self.sig == other.sig
    }

    /// Whether elements move as their bytes (no padding, no layout).
    #[inline]
    pub(crate) fn is_gapless(&self) -> bool {
        matches!(self.laid, Laid::Plain)
    }

    /// Bytes of one element in a message.
    #[inline(always)]
    pub(crate) fn packed_size(&self) -> usize {
        match &self.laid {
            Laid::Padded(d) => d.size(),
            _ => self.size,
        }
    }

    /// The same elements packed (a scratch buffer's): their message bytes in order.
    #[inline]
    pub(crate) fn packed(&self) -> Elem {
        Elem::plain(self.packed_size(), self.sig)
    }

    /// The layout of the first `n` elements, if they are counted in bytes (for cutting a
    /// buffer to the part a call uses).
    #[inline]
    pub(crate) fn first_bytes(&self, n: usize) -> Option<Elem> {
        match &self.laid {
            Laid::Bytes(l) => Some(Elem::bytes_of(Rc::new(l.bytes(0, n)), self.sig)),
            _ => None,
        }
    }

    /// Elements `first..first + n` of the buffer `raw` (all of its bytes, padding included),
    /// as a message: their bytes, or through the padded type's datatype or the layout.
    #[inline]
    pub(crate) fn block(&self, raw: &Block, first: usize, n: usize) -> Block {
        match &self.laid {
            Laid::Plain => raw.sub(first * self.size, n * self.size, None),
            Laid::Padded(d) => {
                let len = n * self.size;
                let l = d
                    .layout(n, 0, len)
                    .expect("a padded type's layout fits its elements");
                raw.sub(first * self.size, len, Some(l))
            }
            Laid::Bytes(l) => raw.sub(0, raw.len(), Some(l.bytes(first, n))),
        }
        .with_sig(self.sig)
    }

    /// Elements `first..first + n` of `raw` as one run of bytes, for a reduction kernel (which
    /// sees them as `[T]`). Reductions of buffers counted in bytes run on packed copies
    /// (see `algo::run`), never here.
    pub(crate) fn run(&self, raw: &Block, first: usize, n: usize) -> Block {
        debug_assert!(!matches!(self.laid, Laid::Bytes(_)), "a reduction on bytes");
        raw.sub(first * self.size, n * self.size, None)
    }
}

/// Where a message counted in bytes may be cut: a multiple of every basic type's size (the
/// largest is 16), so that no piece ends inside an element a receive checks, whichever
/// buffer type a rank gives (bytes take anything).
pub(crate) const GRAIN: usize = 16;

/// A reduction whose buffers are counted in bytes (typed views): it runs on packed copies of
/// them, in elements of the reduction's type (see `algo::run`).
#[derive(Clone, Debug)]
pub(crate) struct Stage {
    /// Bytes of one element of the reduction's type in a message.
    pub(crate) unit: usize,
    /// Those elements as the kernel sees them in the scratch copies.
    pub(crate) elem: Elem,
    /// Bytes of the send and receive buffers the call uses.
    pub(crate) send_len: usize,
    pub(crate) recv_len: usize,
}

/// neighbor_alltoallw's messages: one block per destination, one per source.
pub(crate) type NeighborBlocks = (Rc<[Block]>, Rc<[Block]>);

/// Everything an algorithm needs to know about one collective call. Counts and
/// displacements are in elements; ranks are the communicator's.
#[derive(Clone, Debug)]
pub(crate) struct Args {
    pub(crate) coll: Coll,
    pub(crate) rank: i32,
    pub(crate) size: i32,
    /// The root of a rooted collective (0 otherwise).
    pub(crate) root: i32,
    /// The receive buffer's elements (and the send buffer's when in place).
    pub(crate) elem: Elem,
    /// The send buffer's elements: the receive buffer's unless the call counts in bytes.
    pub(crate) selem: Elem,
    /// The send buffer, whole (`None`: MPI_IN_PLACE, or not significant here).
    pub(crate) send: Option<Block>,
    /// The receive buffer, whole (the buffer of a bcast; empty where not significant).
    pub(crate) recv: Block,
    /// Elements per rank of a regular collective; all of them for bcast, reduce, allreduce
    /// and the scans.
    pub(crate) count: usize,
    /// Per-rank receive counts and displacements of the v forms (and reduce_scatter's counts).
    pub(crate) rcounts: Option<Rc<[usize]>>,
    pub(crate) rdispls: Option<Rc<[usize]>>,
    /// Per-rank send counts and displacements (alltoallv, scatterv, neighbor_alltoallv).
    pub(crate) scounts: Option<Rc<[usize]>>,
    pub(crate) sdispls: Option<Rc<[usize]>>,
    /// Per-peer messages of alltoallw: (what is sent to rank i, what is received from it).
    pub(crate) wblocks: Option<Rc<[(Block, Block)]>>,
    /// Per-neighbour messages of neighbor_alltoallw: what goes to each destination, what
    /// comes from each source (the two lists may differ in length).
    pub(crate) nwblocks: Option<NeighborBlocks>,
    /// Neighbourhood collectives: ranks received from and sent to, in MPI's order.
    pub(crate) sources: Option<Rc<[i32]>>,
    pub(crate) dests: Option<Rc<[i32]>>,
    /// Whether the operation of a reduction is commutative.
    pub(crate) commutative: bool,
    /// The communicator lifts the reduction order constraint (seed 002's
    /// NO_REDUCE_CONSTRAINT): algorithms outside the canonical association may be chosen.
    pub(crate) unordered: bool,
    /// Bytes per rank (what algorithm choice looks at).
    pub(crate) bytes: usize,
    /// On an intercommunicator: the remote group's size (`rank` and `size` are the local
    /// group's; the ranks steps address, and `root` unless it is ROOT or PROC_NULL, are
    /// remote ranks).
    pub(crate) remote: Option<i32>,
    /// Neighbourhood collectives: the source list comes in (-1, +1) pairs, one per
    /// dimension of a Cartesian grid (a graph's lists do not).
    pub(crate) cart_pairs: bool,
    /// A reduction of typed buffers: run on packed copies.
    pub(crate) stage: Option<Rc<Stage>>,
    /// Elements of the receive buffer the call uses (bytes, when it counts in bytes).
    pub(crate) recv_len: usize,
    /// The call has a run of the communicator's collective region: the shared-memory
    /// algorithms may run it (`shm.rs`).
    pub(crate) shm: bool,
}

impl Args {
    #[inline(always)]
    pub(crate) fn new(coll: Coll, rank: i32, size: i32, elem: Elem) -> Args {
        Args {
            coll,
            rank,
            size,
            root: 0,
            selem: elem.clone(),
            elem,
            send: None,
            recv: Block::EMPTY,
            count: 0,
            rcounts: None,
            rdispls: None,
            scounts: None,
            sdispls: None,
            wblocks: None,
            nwblocks: None,
            sources: None,
            dests: None,
            commutative: true,
            unordered: false,
            bytes: 0,
            remote: None,
            cart_pairs: false,
            stage: None,
            recv_len: 0,
            shm: false,
        }
    }

    /// Elements `first..first + n` of the receive buffer, as a message.
    pub(crate) fn rblock(&self, first: usize, n: usize) -> Block {
        self.elem.block(&self.recv, first, n)
    }

    /// Elements `first..first + n` of the send buffer (the receive buffer when in place).
    pub(crate) fn sblock(&self, first: usize, n: usize) -> Block {
        match &self.send {
            Some(sb) => self.selem.block(sb, first, n),
            None => self.elem.block(&self.recv, first, n),
        }
    }

    /// The fewest elements an algorithm may cut a message into: 1 when the call counts in
    /// elements; when it counts in bytes, [`GRAIN`] bytes, whatever the buffer, so that every
    /// rank cuts the same pieces (a broadcast counts in bytes everywhere).
    pub(crate) fn grain(&self) -> usize {
        if self.elem.size == 1 {
            GRAIN
        } else {
            1
        }
    }

    /// Rank `i`'s receive block: `count` elements at `i * count`, or the v form's.
    pub(crate) fn rblock_of(&self, i: i32) -> Block {
        let i = i as usize;
        match (&self.rcounts, &self.rdispls) {
            (Some(c), Some(d)) => self.rblock(d[i], c[i]),
            _ => self.rblock(i * self.count, self.count),
        }
    }

    /// Rank `i`'s send block (a scatter's or alltoall's): as [`rblock_of`](Self::rblock_of).
    pub(crate) fn sblock_of(&self, i: i32) -> Block {
        let i = i as usize;
        match (&self.scounts, &self.sdispls) {
            (Some(c), Some(d)) => self.sblock(d[i], c[i]),
            _ => self.sblock(i * self.count, self.count),
        }
    }

    /// Elements in rank `i`'s receive block.
    pub(crate) fn rcount_of(&self, i: i32) -> usize {
        match &self.rcounts {
            Some(c) => c[i as usize],
            None => self.count,
        }
    }
}

/// MPI_ERR_ROOT unless `root` is a rank of a communicator of `size`.
pub(crate) fn check_root(what: &str, root: i32, size: i32) -> Result<()> {
    if (0..size).contains(&root) {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::Root,
        format!("{what}: root {root} is not a rank of this communicator of {size}"),
    ))
}

/// MPI_ERR_COUNT unless `have >= need` (elements of a buffer).
pub(crate) fn check_len(what: &str, which: &str, have: usize, need: usize) -> Result<()> {
    if have >= need {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::Count,
        format!("{what}: {which} holds {have} elements, {need} needed"),
    ))
}
