//! MPI_THREAD_SERIALIZED and MPI_THREAD_MULTIPLE: one rank used by several threads.
//!
//! A [`Universe`] and its communicators are neither `Send` nor `Sync`: a rank's state is
//! made for one owner, with no lock on the critical path. [`Universe::share`] turns a
//! universe, right after init, into a [`Shared`] rank whose communicator handles
//! ([`SharedComm`]) are `Send + Sync` and `Clone`: any thread may call on them at any time,
//! with MPI's semantics.
//!
//! - **How.** The rank's state sits behind one lock. A call takes it, starts its operation
//!   (the nonblocking form of the call), and tests it; between tests it lets the lock go and
//!   yields, so other threads start and complete theirs meanwhile. Every test drives the
//!   rank's progress, whoever's operation it is, so nothing waits for a particular thread to
//!   call in, and there is no sleeping wait to miss a wake-up: a thread sees its operation
//!   complete at its next test. Between tests a wait looks now and then, as every wait of
//!   the engine does, whether the job was aborted or the launcher is gone
//!   (MPIX_ERR_PROC_FAILED), and says what it is blocked in for the launcher's report.
//! - **Order.** Operations are started in the order each thread calls: messages one thread
//!   sends to a rank on one communicator do not overtake each other. Across threads the order
//!   is the order in which they took the lock, as MPI allows. Collectives on one
//!   communicator must not be called by two threads at once (MPI 4.1 §11.6.2): give each
//!   thread its own [`dup`](SharedComm::dup).
//! - **What.** Blocking point-to-point (standard and synchronous send, receive with
//!   wildcards), probe and iprobe, barrier, bcast, allreduce, dup and free. Nonblocking
//!   calls, persistent requests, channels and windows stay with a [`Universe`] driven by one
//!   thread (or, for threads with traffic of their own, with endpoints:
//!   [`Comm::create_endpoints`](crate::Comm::create_endpoints), which scale where a shared
//!   rank serialises).
//! - **Cost.** One lock per call and per test: threads that share a rank take turns. That is
//!   the price endpoints exist to avoid (`earlybird-bench endpoints`).
#![forbid(unsafe_code)]

use crate::coll::{Dst, Src};
use crate::datatype::{Buffer, BufferMut};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::{BlockedIn, JobSegment};
use crate::p2p::wait::{Blocked, Waiter};
use crate::request::Request;
use crate::status::Status;
use crate::sys::confined::Confined;
use crate::{Comm, Op, ThreadLevel, Universe};
use std::sync::Arc;

/// The rank's state: the universe and the communicators the threads made, by handle.
struct State {
    uni: Option<Universe>,
    comms: Vec<Option<Comm>>,
}

type Guard<'a> = crate::sys::confined::Guard<'a, State>;

/// What every handle of a shared rank holds: the rank's state behind its lock, and what a
/// wait needs without the lock.
struct Inner {
    rank: Confined<State>,
    watch: Watch,
}

impl Inner {
    fn lock(&self) -> Guard<'_> {
        self.rank.lock()
    }
}

/// What a wait needs while the lock of a rank shared by threads is let go: the job, to see
/// an abort or the launcher gone and to say what the rank is blocked in, and the rank's
/// number there. `Send + Sync`: made from a [`Universe`] under its owner's lock, used by any
/// thread with the lock let go. For layers that share a rank behind a lock of their own (the
/// C ABI's MPI_THREAD_MULTIPLE) as [`Shared`] does behind its.
#[derive(Clone)]
pub struct Watch {
    job: JobSegment,
    me: u32,
    /// The rank's spin budget (see [`Watch::idle_alone`]).
    spin: u32,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("rank", &self.me).finish()
    }
}

impl Universe {
    /// The [`Watch`] of this rank, for waits that let a lock of their own go between tries.
    pub fn watch(&self) -> Watch {
        Watch {
            job: self.job_segment(),
            me: self.world().rank() as u32,
            spin: self.eng().borrow().spin_budget(),
        }
    }
}

impl Watch {
    /// A wait that lets its lock go between tries: call [`Idle::pause`] between them. It
    /// yields the core at every pause, since another thread waits for the lock.
    pub fn idle(&self) -> Idle<'_> {
        Idle {
            watch: self,
            spin: 0,
            waiter: None,
        }
    }

    /// A wait that keeps its lock between tries, no other thread wanting it: it spins as
    /// the rank's own waits do (long when the rank has a core of its own) before it yields.
    pub fn idle_alone(&self) -> Idle<'_> {
        Idle {
            watch: self,
            spin: self.spin,
            waiter: None,
        }
    }
}

/// One wait of a thread sharing a rank (see [`Watch::idle`]). Dropped when the wait is
/// over, it takes back what it said to the launcher's report.
pub struct Idle<'w> {
    watch: &'w Watch,
    spin: u32,
    waiter: Option<Waiter>,
}

impl Idle<'_> {
    /// Between two tries of a wait on requests: spin or yield the core (an [`Watch::idle`]
    /// wait, whose lock is let go meanwhile, always yields; an [`Watch::idle_alone`] one
    /// spins first), and every so often look whether the job was aborted or the launcher is
    /// gone (MPIX_ERR_PROC_FAILED then).
    pub fn pause(&mut self) -> Result<()> {
        self.pause_in(Blocked::wait())
    }

    /// As [`pause`](Self::pause), the wait reported as `blocked` once it is long.
    fn pause_in(&mut self, blocked: Blocked) -> Result<()> {
        let Watch { job, me, .. } = self.watch;
        let spin = self.spin;
        self.waiter
            .get_or_insert_with(|| Waiter::new(spin, blocked))
            .idle(job, *me)
    }
}

impl Drop for Idle<'_> {
    fn drop(&mut self) {
        if let Some(mut w) = self.waiter.take() {
            w.finish(&self.watch.job, self.watch.me);
        }
    }
}

/// A rank shared by threads (see the module doc). Made by [`Universe::share`].
pub struct Shared {
    inner: Arc<Inner>,
    main: std::thread::ThreadId,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

/// A communicator of a [`Shared`] rank: `Send + Sync`, cheap to clone.
#[derive(Clone)]
pub struct SharedComm {
    inner: Arc<Inner>,
    id: usize,
    rank: i32,
    size: i32,
}

impl std::fmt::Debug for SharedComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

/// [`Universe::share`] refused: the universe, given back, and why.
pub struct ShareError {
    pub universe: Universe,
    pub error: Error,
}

impl std::fmt::Debug for ShareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::fmt::Display for ShareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl From<ShareError> for Error {
    /// The error alone (the universe is dropped, which finalizes it).
    fn from(e: ShareError) -> Error {
        e.error
    }
}

impl Universe {
    /// MPI_THREAD_MULTIPLE for this rank: a [`Shared`] rank whose communicators any thread
    /// may call at any time (see [`shared`](crate::shared)). Call it right after init: it is
    /// refused (MPI_ERR_OTHER, the universe given back in the [`ShareError`]) if a
    /// communicator handle, request or scope made from this universe still lives, or if its
    /// world or MPI_COMM_SELF has a user error handler or attributes (the shared rank could
    /// not keep them to one thread at a time). From then on [`Shared::query_thread`] is
    /// [`ThreadLevel::Multiple`], whatever init asked.
    // The refusal carries the universe back; share is called once, so its size costs nothing.
    #[allow(clippy::result_large_err)]
    pub fn share(self) -> std::result::Result<Shared, ShareError> {
        if let Err(error) = self.check_alone() {
            return Err(ShareError {
                universe: self,
                error,
            });
        }
        let world = self.world().clone();
        let me = self.comm_self().clone();
        let watch = self.watch();
        let inner = Arc::new(Inner {
            rank: Confined::new(State {
                uni: Some(self),
                comms: vec![Some(world), Some(me)],
            }),
            watch,
        });
        Ok(Shared {
            inner,
            main: std::thread::current().id(),
        })
    }
}

impl Shared {
    fn comm_at(&self, id: usize) -> SharedComm {
        let g = self.inner.lock();
        let c = g.comms[id].as_ref().expect("predefined");
        let (rank, size) = (c.rank(), c.size());
        drop(g);
        SharedComm {
            inner: self.inner.clone(),
            id,
            rank,
            size,
        }
    }

    /// MPI_COMM_WORLD.
    pub fn world(&self) -> SharedComm {
        self.comm_at(0)
    }

    /// MPI_COMM_SELF.
    pub fn comm_self(&self) -> SharedComm {
        self.comm_at(1)
    }

    /// MPI_Query_thread: [`ThreadLevel::Multiple`].
    pub fn query_thread(&self) -> ThreadLevel {
        ThreadLevel::Multiple
    }

    /// MPI_Is_thread_main: whether the calling thread is the one that initialised (and
    /// shared) the rank.
    pub fn is_thread_main(&self) -> bool {
        std::thread::current().id() == self.main
    }

    /// MPI_Finalize, by one thread once the others are done: waits for every rank, as
    /// [`Universe::finalize`]. Calls on the rank's communicators after it are MPI_ERR_COMM.
    /// Dropping the last handle of the rank finalizes it too.
    pub fn finalize(self) -> Result<()> {
        let mut g = self.inner.lock();
        g.comms.clear();
        match g.uni.take() {
            Some(u) => u.finalize(),
            None => Err(Error::new(ErrorClass::Other, "finalize called twice")),
        }
    }
}

impl SharedComm {
    /// MPI_Comm_rank.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// MPI_Comm_size.
    pub fn size(&self) -> i32 {
        self.size
    }

    /// The communicator, cloned under the lock (dropped under it too).
    fn comm(&self, g: &Guard<'_>) -> Result<Comm> {
        g.comms.get(self.id).and_then(Option::clone).ok_or_else(|| {
            Error::new(
                ErrorClass::Comm,
                "shared communicator used after comm_free or finalize",
            )
        })
    }

    /// Test `r` until it completes, taking the lock for each test and letting it go (and
    /// yielding) between them; returns with the lock held, also with an error (the job
    /// aborted meanwhile, say).
    fn finish<'g>(&'g self, g: &mut Option<Guard<'g>>, r: &mut Request<'_>) -> Result<Status> {
        let mut idle = self.inner.watch.idle();
        loop {
            if let Some(st) = r.test()? {
                return Ok(st);
            }
            let blocked = r.blocked_in().unwrap_or(Blocked::wait());
            *g = None;
            let paused = idle.pause_in(blocked);
            *g = Some(self.inner.lock());
            paused?;
        }
    }

    /// Run an operation `start` begins, to completion (see the module doc).
    fn run<'env, R>(
        &self,
        start: impl for<'s> FnOnce(&Comm, &'s crate::Scope<'s, 'env>) -> Result<(Request<'s>, R)>,
    ) -> Result<(Status, R)> {
        let mut g = Some(self.inner.lock());
        let c = self.comm(g.as_ref().expect("locked"))?;
        let r = crate::scope(|s| -> Result<(Status, R)> {
            let (mut req, extra) = start(&c, s)?;
            let st = self.finish(&mut g, &mut req)?;
            Ok((st, extra))
        });
        drop(c);
        drop(g);
        r
    }

    /// MPI_Send.
    pub fn send<B: Buffer + ?Sized>(&self, buf: &B, dest: i32, tag: i32) -> Result<()> {
        self.run(|c, s| Ok((c.isend(s, buf, dest, tag)?, ())))
            .map(drop)
    }

    /// MPI_Ssend: returns once the matching receive has started.
    pub fn ssend<B: Buffer + ?Sized>(&self, buf: &B, dest: i32, tag: i32) -> Result<()> {
        self.run(|c, s| Ok((c.issend(s, buf, dest, tag)?, ())))
            .map(drop)
    }

    /// MPI_Recv (`src` may be ANY_SOURCE, `tag` ANY_TAG).
    pub fn recv<B: BufferMut + ?Sized>(&self, buf: &mut B, src: i32, tag: i32) -> Result<Status> {
        self.run(|c, s| Ok((c.irecv(s, buf, src, tag)?, ())))
            .map(|(st, ())| st)
    }

    /// MPI_Iprobe.
    pub fn iprobe(&self, src: i32, tag: i32) -> Result<Option<Status>> {
        let g = self.inner.lock();
        let c = self.comm(&g)?;
        let r = c.iprobe(src, tag);
        drop(c);
        drop(g);
        r
    }

    /// MPI_Probe: iprobe until a message matches, letting the lock go between tries.
    pub fn probe(&self, src: i32, tag: i32) -> Result<Status> {
        let mut idle = self.inner.watch.idle();
        loop {
            if let Some(st) = self.iprobe(src, tag)? {
                return Ok(st);
            }
            idle.pause_in(Blocked::in_call(BlockedIn::Probe).with_peer(src))?;
        }
    }

    /// MPI_Barrier.
    pub fn barrier(&self) -> Result<()> {
        self.run(|c, s| Ok((c.ibarrier(s)?, ()))).map(drop)
    }

    /// MPI_Bcast from `root`.
    pub fn bcast<'b>(&self, buf: impl Into<Dst<'b>>, root: i32) -> Result<()> {
        let buf = buf.into();
        self.run(|c, s| Ok((c.ibcast(s, buf, root)?, ()))).map(drop)
    }

    /// MPI_Allreduce.
    pub fn allreduce<'b>(
        &self,
        send: impl Into<Src<'b>>,
        recv: impl Into<Dst<'b>>,
        op: &Op,
    ) -> Result<()> {
        let (send, recv) = (send.into(), recv.into());
        self.run(|c, s| Ok((c.iallreduce(s, send, recv, op)?, ())))
            .map(drop)
    }

    /// MPI_Comm_dup (collective: one thread per rank calls it).
    pub fn dup(&self) -> Result<SharedComm> {
        let (_, pending) = self.run(|c, s| c.idup(s))?;
        let mut g = self.inner.lock();
        let made = pending.comm();
        drop(pending);
        let c = match made {
            Ok(c) => c,
            Err(e) => {
                drop(g);
                return Err(e);
            }
        };
        let (rank, size) = (c.rank(), c.size());
        g.comms.push(Some(c));
        let id = g.comms.len() - 1;
        drop(g);
        Ok(SharedComm {
            inner: self.inner.clone(),
            id,
            rank,
            size,
        })
    }

    /// MPI_Comm_free of a communicator made by [`dup`](Self::dup) (every clone of this
    /// handle goes with it). WORLD and SELF cannot be freed.
    pub fn free(self) -> Result<()> {
        if self.id < 2 {
            return Err(Error::new(
                ErrorClass::Comm,
                "comm_free of MPI_COMM_WORLD or MPI_COMM_SELF, predefined communicators",
            ));
        }
        let mut g = self.inner.lock();
        let c = g
            .comms
            .get_mut(self.id)
            .and_then(Option::take)
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Comm,
                    "comm_free of a shared communicator already freed",
                )
            })?;
        let r = c.free();
        drop(g);
        r
    }
}
