//! comm — communicators (DESIGN.md layer 7): the handle and what its clones share (this
//! file), point-to-point on it (`pt2pt`), nonblocking send-receive as a request kind of its own (`sendrecv`), partitioned communication, another (`partitioned`), context ids (`context`), agreeing on them
//! (`agree`), making and freeing communicators (`create`), intercommunicators
//! (`intercomm`), groups, attributes, Cartesian topologies and error handlers.
//!
//! Every method checks its arguments and returns the MPI error class with a message naming
//! the bad value, through the communicator's error handler ([`errhandler`]).
//!
//! # Standard section(s)
//! MPI 4.1 §3 (point-to-point communication), §7 (groups, contexts, communicators), §9.3
//! (error handlers).
#![forbid(unsafe_code)]

pub(crate) mod agree;
pub mod attr;
pub mod buffered;
pub mod cart;
pub(crate) mod context;
mod create;
pub(crate) mod driven;
pub mod endpoints;
pub mod errhandler;
pub mod fault_tolerance;
pub mod graph;
pub mod group;
mod intercomm;
mod partitioned;
mod pt2pt;
pub(crate) mod region;
mod sendrecv;

pub use create::{PendingComm, SplitType};
pub use partitioned::PARTITION_UNIT_KEY;
pub use pt2pt::{Message, SendBuf};

use crate::assertions::Assertions;
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::p2p::ranks::RankMap;
use crate::request::completion::{ErrorSink, Origin};
use crate::request::EngineRef;
use context::ContextId;
use errhandler::ErrHandler;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A communicator: a group of ranks and a context in which their messages match.
///
/// Clones are handles on the same communicator (they share its name, info, error handler
/// and freed state). Point-to-point traffic uses context `2p` of the communicator's context
/// pair `p`; `2p + 1` carries the library's own messages (communicator creation, later
/// collectives).
///
/// An intercommunicator (see [`Comm::intercomm_create`]) has a local group, to which `rank`
/// and `size` refer, and a remote group, which point-to-point addresses.
#[derive(Clone)]
pub struct Comm {
    pub(crate) eng: EngineRef,
    /// The point-to-point context (the library's own is its `internal()`).
    pub(crate) ctx: ContextId,
    pub(crate) rank: i32,
    pub(crate) size: i32,
    /// Size of the group point-to-point addresses: `size`, or the remote group's size.
    peers: i32,
    /// Rank <-> endpoint translation of the group point-to-point addresses (the remote group
    /// of an intercommunicator); `None` when ranks are the job's (WORLD).
    pub(crate) map: Option<Rc<RankMap>>,
    pub(crate) shared: Rc<CommShared>,
}

/// What all handles on one communicator share, and the requests made on it too (so that
/// they apply its error handler, and a user handler can be given the communicator). A
/// [`Comm`] copies the immutable part for quick access.
pub(crate) struct CommShared {
    eng: EngineRef,
    pair: u32,
    rank: i32,
    size: i32,
    /// Size of the group point-to-point addresses (the remote group's for an
    /// intercommunicator).
    peers: i32,
    map: Option<Rc<RankMap>>,
    freed: Cell<bool>,
    /// Whether the context pair has been given back.
    released: Cell<bool>,
    /// Nonblocking operations (a pending idup) still using the internal context: the pair
    /// is given back only after they end, even if the communicator is freed meanwhile.
    holds: Cell<u32>,
    name: RefCell<String>,
    /// Cached attributes (attr.rs).
    attrs: RefCell<attr::Attrs>,
    /// The topology, set once when the communicator is made (cart.rs).
    topo: std::cell::OnceCell<cart::Topo>,
    errh: RefCell<ErrHandler>,
    /// Info hints set on the communicator (MPI_Comm_set_info, dup_with_info).
    pub(crate) info: RefCell<Info>,
    /// The assertions in force on it: the init-time ones and its `mpi_assert_*` keys.
    pub(crate) asserts: Cell<Assertions>,
    /// Collective calls made on the communicator so far: every member makes them in the
    /// same order, so the count tells one call's internal messages from the next's.
    seq: Cell<u32>,
    /// Fault tolerance's agreements made on it so far, counted apart from `seq`
    /// (fault_tolerance.rs).
    agree_seq: Cell<u32>,
    /// The local group of an intercommunicator (endpoints, in rank order); `None` for an
    /// intracommunicator.
    local: Option<Rc<[u32]>>,
    /// Collective algorithms forced for this communicator (info hints and the environment),
    /// worked out at the first collective after the hints last changed (coll/registry.rs).
    pub(crate) coll_forced: RefCell<Option<Rc<crate::coll::registry::Forced>>>,
    /// Steps of repeated blocking collectives, by kind (coll/api.rs, `blocking_repeat`).
    pub(crate) coll_repeat: RefCell<[crate::coll::RepeatSlot; crate::coll::Coll::ALL.len()]>,
    /// The shared memory its collectives run through, once made (coll/shm.rs).
    pub(crate) coll_shm: RefCell<CollShmState>,
}

/// Whether a communicator has a collective region (coll/shm.rs says when it is made).
#[derive(Debug, Default)]
pub(crate) enum CollShmState {
    /// Not tried yet: made at the first blocking collective.
    #[default]
    Untried,
    /// It has none, and will not.
    None,
    Made(Rc<crate::coll::shm::CollShm>),
}

impl CommShared {
    /// Give the context pair back, once (its context without assertions until the next
    /// communicator on it sets its own).
    fn release(&self, e: &mut crate::p2p::engine::Engine) {
        if !self.released.replace(true) {
            e.set_ctx_assertions(ContextId::of_pair(self.pair).raw(), Assertions::empty());
            e.buffer_forget(ContextId::of_pair(self.pair).raw());
            context::release(e, self.pair);
        }
    }

    /// A nonblocking operation that held the communicator (see `holds`) has ended, on the
    /// endpoint `e`, borrowed: give the pair back if the communicator was freed meanwhile or
    /// the caller's handle is the last (its drop could not borrow the endpoint).
    fn unhold(self: &Rc<Self>, e: &mut crate::p2p::engine::Engine) {
        self.holds.set(self.holds.get() - 1);
        if self.holds.get() == 0 && (self.freed.get() || Rc::strong_count(self) == 1) {
            self.release(e);
        }
    }
}

impl Drop for CommShared {
    fn drop(&mut self) {
        // The last handle is gone: give the context pair back (free() already did if called).
        if !self.released.get() {
            if let Ok(mut e) = self.eng.try_borrow_mut() {
                self.release(&mut e);
            }
        }
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("ctx", &self.ctx)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl ErrorSink for CommShared {
    fn raise(self: Rc<Self>, what: &str, e: Error) -> Error {
        errhandler::raise(&self, what, e)
    }
}

impl Comm {
    pub(crate) fn world(eng: EngineRef) -> Comm {
        let (rank, size) = {
            let e = eng.borrow();
            (e.rank() as i32, e.size() as i32)
        };
        Comm::predefined_comm(eng, ContextId::WORLD, rank, size, None, "MPI_COMM_WORLD")
    }

    /// The communicator of a job of endpoints (seed 003) as its rank `eng` sees it: the
    /// job's whole group on its first pair, as MPI_COMM_WORLD is of the first job.
    pub(crate) fn endpoints_comm(eng: EngineRef) -> Comm {
        let (rank, size) = {
            let e = eng.borrow();
            (e.rank() as i32, e.size() as i32)
        };
        Comm::predefined_comm(eng, ContextId::WORLD, rank, size, None, "")
    }

    /// MPI_COMM_SELF of endpoint `eng`: its one rank, on the reserved pair every endpoint
    /// has for it.
    pub(crate) fn self_comm(eng: EngineRef) -> Comm {
        let (me, n) = {
            let e = eng.borrow();
            (e.rank(), e.size())
        };
        let map = Rc::new(RankMap::new(vec![me], n));
        Comm::predefined_comm(eng, ContextId::SELF, 0, 1, Some(map), "MPI_COMM_SELF")
    }

    fn predefined_comm(
        eng: EngineRef,
        ctx: ContextId,
        rank: i32,
        size: i32,
        map: Option<Rc<RankMap>>,
        name: &str,
    ) -> Comm {
        let asserts = {
            let mut e = eng.borrow_mut();
            let a = e.assertions();
            e.set_ctx_assertions(ctx.raw(), a);
            a
        };
        Comm::from_shared(Rc::new(CommShared {
            eng,
            pair: ctx.pair(),
            rank,
            size,
            peers: size,
            map,
            freed: Cell::new(false),
            released: Cell::new(false),
            holds: Cell::new(0),
            name: RefCell::new(name.into()),
            attrs: Default::default(),
            topo: Default::default(),
            errh: RefCell::new(ErrHandler::Fatal),
            info: RefCell::new(Info::new()),
            asserts: Cell::new(asserts),
            seq: Cell::new(0),
            agree_seq: Cell::new(0),
            local: None,
            coll_forced: Default::default(),
            coll_repeat: Default::default(),
            coll_shm: Default::default(),
        }))
    }

    /// The assertions in force on this communicator (seed 002, and MPI 4's `mpi_assert_*`
    /// info keys): those made at init and those of its info hints.
    pub fn assertions(&self) -> Assertions {
        self.shared.asserts.get()
    }

    /// A broken promise: MPIX_ERR_ASSERTION if this communicator asserts `a`.
    #[inline(always)]
    pub(crate) fn check_assertion(&self, call: &str, a: Assertions, what: &str) -> Result<()> {
        if self.shared.asserts.get().intersects(a) {
            return Err(crate::assertions::broken(call, a, what));
        }
        Ok(())
    }

    /// Work out the communicator's assertions again from its info hints.
    pub(crate) fn refresh_assertions(&self, e: &mut crate::p2p::engine::Engine) {
        let a = e.assertions() | Assertions::from_info(&self.shared.info.borrow());
        self.shared.asserts.set(a);
        e.set_ctx_assertions(self.ctx.raw(), a);
    }

    /// Whether this is a predefined communicator (WORLD or SELF), which cannot be freed.
    pub(crate) fn is_predefined(&self) -> bool {
        self.shared.pair <= ContextId::SELF.pair()
    }

    /// MPI_Finalize's part for MPI_COMM_SELF: delete its attributes, newest first (MPI 4.1
    /// §11.2.4), so that their delete callbacks run while MPI is still usable.
    pub(crate) fn finalize_self(&self) -> Result<()> {
        let r = self.delete_all_attrs();
        self.ret("finalize", r)
    }

    /// A handle on the communicator `shared` describes (point-to-point on context `2p` of
    /// its pair `p`).
    pub(crate) fn from_shared(shared: Rc<CommShared>) -> Comm {
        Comm {
            eng: shared.eng.clone(),
            ctx: ContextId::of_pair(shared.pair),
            rank: shared.rank,
            size: shared.size,
            peers: shared.peers,
            map: shared.map.clone(),
            shared,
        }
    }

    /// MPI_Comm_group: the group of the communicator's processes, in rank order (the local
    /// group of an intercommunicator).
    pub fn group(&self) -> group::Group {
        self.group_of(self.local_members())
    }

    /// The group of the endpoints (job ranks) `members`, as this process sees it.
    pub(crate) fn group_of(&self, members: Vec<u32>) -> group::Group {
        let e = self.eng.borrow();
        group::Group::new(members, e.rank(), e.ids.clone())
    }

    /// Endpoints of the local group, in rank order.
    fn local_members(&self) -> Vec<u32> {
        if let Some(l) = &self.shared.local {
            return l.to_vec();
        }
        match &self.map {
            None => (0..self.size as u32).collect(),
            Some(m) => m.members.clone(),
        }
    }

    /// The endpoint of communicator rank `r` (PROC_NULL and wildcards pass through).
    #[inline(always)]
    fn ep(&self, r: i32) -> i32 {
        match &self.map {
            Some(m) if r >= 0 => m.members[r as usize] as i32,
            _ => r,
        }
    }

    /// This process's rank in the communicator (MPI_Comm_rank).
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// Number of ranks (MPI_Comm_size).
    pub fn size(&self) -> i32 {
        self.size
    }

    /// Pass a call's result through this communicator's error handler (one branch on
    /// success).
    #[inline(always)]
    pub(crate) fn ret<T>(&self, what: &str, r: Result<T>) -> Result<T> {
        errhandler::apply(&self.shared, what, r)
    }

    #[inline(always)]
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.shared.freed.get() {
            return Err(Error::new(
                ErrorClass::Comm,
                "communicator used after comm_free",
            ));
        }
        if self.eng.borrow().finalized() {
            return Err(Error::new(
                ErrorClass::Comm,
                "communicator used after finalize",
            ));
        }
        Ok(())
    }

    /// What a request made on this communicator keeps of it: its error handler and rank
    /// translation.
    #[inline(always)]
    pub(crate) fn origin(&self) -> Origin {
        Origin::new(self.shared.clone(), self.map.clone())
    }

    #[doc(hidden)]
    /// The job's floor probe (see [`JobSegment::floor_pingpong`](crate::fabric::shm::JobSegment::floor_pingpong)):
    /// ranks 0 and 1 of the job hand one cache line back and forth; seconds taken here.
    pub fn floor_pingpong(&self, round: u64, iters: u64) -> f64 {
        let e = self.eng.borrow();
        e.job().floor_pingpong(e.rank(), round, iters)
    }
}
