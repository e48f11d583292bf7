//! Sync counters: flexible RMA synchronisation (seed 001, "Flexible RMA Synchronization for
//! MPI-3").
//!
//! A rank allocates counters on a window ([`Win::alloc_sync_objects`]) and hands them to the
//! ranks that will signal it, as MPIX_HANDLE_SYNC data ([`SyncCounter`] is an
//! [`Equivalence`](crate::Equivalence) type that point-to-point and the collectives that do
//! not reduce carry). An origin makes a persistent request per target
//! ([`Win::sync_ops_init`]); while it is active, the RMA calls of its modes to that target
//! need no other epoch, and its completion decrements the target's counter. The target
//! waits with its own persistent request ([`Win::sync_object_init`]), which completes when
//! the counter has been decremented `count` times since its start.
//!
//! # Design
//!
//! Each counter is one cache line of the owner's control block in the window's segment
//! (`fabric::window`), which counts the signals it has received: a signal is one atomic
//! increment by the origin, and the owner only reads the line, so that the line moves once
//! per signal. (The counter's generation, which every signal checks, lives on lines that
//! change only when counters are allocated or freed.) Every
//! RMA call of earlybird is complete (locally and at the target) when it returns, so a sync
//! ops request has nothing left to wait for when a wait or test looks at it: it completes
//! there, and the decrement is a release read-modify-write (a locked instruction on x86-64),
//! ordered after every put, get and accumulate the origin made before it. The seed's
//! counter value is, in these terms, what the owner's runs have waited for (which the owner
//! keeps) less the signals received.
//!
//! **The count.** The seed says a start "resets the counter to count". Literally, a signal
//! that arrives before the owner's start (a neighbour one iteration ahead, which the seed's
//! third example allows) would be lost and both sides would wait forever. So the counter
//! keeps the signals that arrive early: a start *adds* `count` to the value, a signal
//! subtracts one, and the run completes when the value is at most zero; signals beyond the
//! run's `count` count towards the next start. The value a start leaves below zero (more
//! signals arrived than that run and the early ones of the next could need) is the seed's
//! negative counter: the run completes with MPIX_ERR_WIN_COUNTER.
//!
//! **Choices the seed leaves open** (also in the README):
//! - MODE_WIN_ACCUMULATE covers every atomic call: accumulate, get_accumulate, fetch_and_op
//!   and compare_and_swap. A mode of 0 signals without permitting any call (the seed's
//!   "simply notify").
//! - A sync ops request to MPI_PROC_NULL completes at once and signals nothing.
//! - Requests of either kind cannot be cancelled (the seed asks not to). Freeing an active
//!   one is MPI_ERR_REQUEST (complete it first) unless it restarts by itself; dropping an
//!   active ops request completes it (it signals, as a wait would); an object request
//!   dropped active, or a restarting request freed or dropped, has its run withdrawn (an
//!   object request takes its `count` back, an ops request does not signal).
//! - The `restart` info key (`true`): a wait or test that completes a run starts the next at
//!   once, so the request stays active and a loop needs no start. A start of such a request
//!   that is already running does nothing, so it may sit in a bundle or a startall.
//! - Counters are local objects: allocating and freeing them is not collective. A rank holds
//!   at most [`SYNC_COUNTERS`] on a window at once.
#![forbid(unsafe_code)]

use super::sync::Access;
use super::{err, Win, WinInner};
use crate::coll::op::Op;
use crate::datatype::buffer::{Buffer, BufferMut};
use crate::datatype::Equivalence;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::BlockedIn;
use crate::fabric::window::SYNC_COUNTERS;
use crate::info::Info;
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::request::completion::{Completion, ErrorSink, Origin};
use crate::request::Request;
use crate::status::{Status, PROC_NULL};
pub use crate::sys::plain::SyncCounter;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// MPI_MODE_WIN_PUT (seed 001): the request covers puts to its target.
pub const MODE_WIN_PUT: u32 = 1;
/// MPI_MODE_WIN_GET: the request covers gets from its target.
pub const MODE_WIN_GET: u32 = 2;
/// MPI_MODE_WIN_ACCUMULATE: the request covers accumulates (and the other atomic calls:
/// get_accumulate, fetch_and_op, compare_and_swap) to its target.
pub const MODE_WIN_ACCUMULATE: u32 = 4;
const MODES: [(u32, Access); 3] = [
    (MODE_WIN_PUT, Access::Put),
    (MODE_WIN_GET, Access::Get),
    (MODE_WIN_ACCUMULATE, Access::Acc),
];

impl SyncCounter {
    /// MPI_SYNC_NULL: what [`Win::free_sync_objects`] leaves in the handles it frees.
    pub const NULL: SyncCounter = SyncCounter {
        win: 0,
        owner: 0,
        index: 0,
        generation: 0,
    };

    /// Whether it is [`SyncCounter::NULL`].
    pub fn is_null(&self) -> bool {
        *self == Self::NULL
    }

    /// The owner's member id on its window: the window rank it had when the window was
    /// made (ranks that join with [`Comm::win_join`](crate::Comm::win_join) get new ones), so
    /// that counters outlive [`Win::change_comm`].
    pub fn owner(&self) -> i32 {
        self.owner as i32
    }
}

/// This rank's own counters on one window.
#[derive(Debug)]
pub(crate) struct Counters {
    /// Per counter: its generation while allocated, `None` while free.
    allocated: Vec<Option<u16>>,
    /// Per counter: whether a sync object request on it is running.
    waited: Vec<bool>,
    /// Generations handed out (each allocation or free moves the counter's on).
    next_generation: Vec<u16>,
    /// Per counter: the signals its runs have waited for since it was allocated (the sum of
    /// their counts); the counter's value is this less the signals received.
    armed: Vec<u64>,
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            allocated: vec![None; SYNC_COUNTERS],
            waited: vec![false; SYNC_COUNTERS],
            next_generation: vec![0; SYNC_COUNTERS],
            armed: vec![0; SYNC_COUNTERS],
        }
    }

    /// Whether a sync object request of this rank is running (a window with one cannot be
    /// freed).
    pub(crate) fn any_waited(&self) -> bool {
        self.waited.iter().any(|&w| w)
    }
}

/// A window's errors reach its error handler (requests made on a window report there).
impl ErrorSink for WinInner {
    fn raise(self: Rc<Self>, what: &str, e: Error) -> Error {
        Win { inner: self }.raise(what, e)
    }
}

fn bad_info(key: &str, v: &str) -> Error {
    err(
        ErrorClass::InfoValue,
        format!("sync request info {key}={v:?}: expected true or false"),
    )
}

/// The `restart` info key of the two request calls.
fn restart(info: &Info) -> Result<bool> {
    match info.get("restart")? {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(v) => Err(bad_info("restart", v)),
    }
}

impl Win {
    fn origin_for_requests(&self) -> Origin {
        Origin::new(self.inner.clone(), None)
    }

    /// The (value, generation) words of counter `c`, checked to be of this window and in
    /// range.
    fn counter_words(&self, what: &str, c: &SyncCounter) -> Result<(&AtomicU64, &AtomicU64)> {
        if c.is_null() {
            return Err(err(ErrorClass::Arg, format!("{what}: MPI_SYNC_NULL")));
        }
        if c.win != self.inner.serial {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "{what}: counter {} of rank {} belongs to another window",
                    c.index, c.owner
                ),
            ));
        }
        let i = c.index as usize;
        let Some(o) = self.owner_rank(c).filter(|_| i < SYNC_COUNTERS) else {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "{what}: counter {i} of member {} is not on this window (malformed, or its owner left it)",
                    c.owner
                ),
            ));
        };
        Ok(self.inner.seg.sync_counter(o, i))
    }

    /// The window rank of counter `c`'s owner, if it is a member of the window.
    fn owner_rank(&self, c: &SyncCounter) -> Option<usize> {
        self.inner.ids.iter().position(|&id| id == c.owner)
    }

    /// Counter `c` checked to be allocated now, as generation `c.generation`.
    fn check_generation(&self, what: &str, c: &SyncCounter, generation: &AtomicU64) -> Result<()> {
        if generation.load(Ordering::Acquire) != u64::from(c.generation) {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "{what}: counter {} of rank {} has been freed (win_free_sync_objects)",
                    c.index, c.owner
                ),
            ));
        }
        Ok(())
    }

    /// MPI_Win_alloc_sync_objects: `n` counters of this rank on the window, each at zero,
    /// for this rank to wait on ([`sync_object_init`](Self::sync_object_init)) and to send
    /// (as MPIX_HANDLE_SYNC) to the ranks that will signal it. Local, not collective.
    /// MPI_ERR_NO_MEM beyond [`SYNC_COUNTERS`] counters at once.
    pub fn alloc_sync_objects(&self, n: usize, info: &Info) -> Result<Vec<SyncCounter>> {
        let r = (|| {
            self.check_live()?;
            let _ = info;
            let me = self.inner.rank;
            let mut cs = self.inner.counters.borrow_mut();
            let free: Vec<usize> = (0..SYNC_COUNTERS)
                .filter(|&i| cs.allocated[i].is_none())
                .take(n)
                .collect();
            if free.len() < n {
                return Err(err(
                    ErrorClass::NoMem,
                    format!(
                        "win_alloc_sync_objects({n}): only {} of the {SYNC_COUNTERS} counters a rank may hold on a window are free",
                        free.len()
                    ),
                ));
            }
            let mut out = Vec::with_capacity(n);
            for i in free {
                let g = cs.next_generation[i].wrapping_add(1).max(1);
                cs.next_generation[i] = g;
                cs.allocated[i] = Some(g);
                cs.armed[i] = 0;
                let (signals, generation) = self.inner.seg.sync_counter(me, i);
                signals.store(0, Ordering::Relaxed);
                generation.store(u64::from(g), Ordering::Release);
                out.push(SyncCounter {
                    win: self.inner.serial,
                    owner: self.inner.ids[me],
                    index: i as u16,
                    generation: g,
                });
            }
            Ok(out)
        })();
        self.ret("win_alloc_sync_objects", r)
    }

    /// MPI_Win_free_sync_objects: free this rank's `counters` and set each to
    /// [`SyncCounter::NULL`]. All or none: MPI_ERR_ARG for a counter that is not one of this
    /// rank's live ones, MPI_ERR_RMA_SYNC for one with a running request.
    pub fn free_sync_objects(&self, counters: &mut [SyncCounter]) -> Result<()> {
        const WHAT: &str = "win_free_sync_objects";
        let r = (|| {
            self.check_live()?;
            let me = self.inner.rank;
            let mut cs = self.inner.counters.borrow_mut();
            for c in counters.iter() {
                let (_, generation) = self.counter_words(WHAT, c)?;
                if c.owner != self.inner.ids[me] {
                    return Err(err(
                        ErrorClass::Arg,
                        format!(
                            "{WHAT}: counter {} belongs to rank {} (only its owner frees it)",
                            c.index,
                            self.owner_rank(c).unwrap_or(usize::MAX)
                        ),
                    ));
                }
                self.check_generation(WHAT, c, generation)?;
                if cs.waited[c.index as usize] {
                    return Err(err(
                        ErrorClass::RmaSync,
                        format!(
                            "{WHAT}: counter {} has an active sync object request (complete it first)",
                            c.index
                        ),
                    ));
                }
            }
            for c in counters.iter_mut() {
                let i = c.index as usize;
                if cs.allocated[i].take().is_none() {
                    // The same counter twice in the array: freed by its first entry.
                    *c = SyncCounter::NULL;
                    continue;
                }
                let g = cs.next_generation[i].wrapping_add(1).max(1);
                cs.next_generation[i] = g;
                self.inner
                    .seg
                    .sync_counter(me, i)
                    .1
                    .store(u64::from(g), Ordering::Release);
                *c = SyncCounter::NULL;
            }
            Ok(())
        })();
        self.ret(WHAT, r)
    }

    /// MPI_Win_sync_ops_init: a persistent request that signals `target`'s `counter`
    /// (received from it as MPIX_HANDLE_SYNC, or this rank's own when `target` is this rank).
    /// While it is active (started, not yet completed) the RMA calls of `mode` (an OR of
    /// [`MODE_WIN_PUT`], [`MODE_WIN_GET`], [`MODE_WIN_ACCUMULATE`], or 0) to `target` need no
    /// other epoch. A wait or test completes it once every such call since the last
    /// completed sync request to `target` has completed (earlybird's complete when they
    /// return), and its completion decrements the counter. Info key `restart` (see the
    /// module doc).
    pub fn sync_ops_init(
        &self,
        target: i32,
        mode: u32,
        counter: SyncCounter,
        info: &Info,
    ) -> Result<Request<'static>> {
        const WHAT: &str = "win_sync_ops_init";
        let r = (|| {
            self.check_live()?;
            let restart = restart(info)?;
            if mode & !(MODE_WIN_PUT | MODE_WIN_GET | MODE_WIN_ACCUMULATE) != 0 {
                return Err(err(
                    ErrorClass::Arg,
                    format!("{WHAT}: mode {mode:#x} has bits that are none of MODE_WIN_PUT, MODE_WIN_GET, MODE_WIN_ACCUMULATE"),
                ));
            }
            let target = if target == PROC_NULL {
                None
            } else {
                Some(self.target_counter(WHAT, target, &counter)?)
            };
            let ops = Ops {
                win: self.inner.clone(),
                target,
                modes: MODES
                    .iter()
                    .filter(|(m, _)| mode & m != 0)
                    .map(|&(_, a)| a)
                    .collect(),
                counter,
            };
            let run = SyncRequest::new(ops, restart);
            let eng = &self.inner.comm.eng;
            Ok(Request::ext(eng, self.origin_for_requests(), Box::new(run)))
        })();
        self.ret(WHAT, r)
    }

    /// `target`'s window rank, with `counter` checked to be a live counter of `target`'s on
    /// this window (what signalling it needs).
    fn target_counter(&self, what: &str, target: i32, counter: &SyncCounter) -> Result<usize> {
        let t = self.check_rank(target)?;
        let (_, generation) = self.counter_words(what, counter)?;
        let me = self.inner.rank;
        let owner = self.owner_rank(counter).unwrap_or(usize::MAX);
        if owner != t {
            let why = if owner == me {
                format!(
                    "counter {} is this rank's own; signalling rank {t} needs a counter of rank {t}, received from it as MPIX_HANDLE_SYNC",
                    counter.index
                )
            } else {
                format!(
                    "counter {} lives on rank {owner}, not on the target {t}",
                    counter.index
                )
            };
            return Err(err(ErrorClass::Arg, format!("{what}: {why}")));
        }
        self.check_generation(what, counter, generation)?;
        Ok(t)
    }

    /// One RMA call `op` of kind `what` to `target` that signals `target`'s `counter` once it
    /// is complete (beyond the seed, as `shmem_put_signal` and Intel MPI's
    /// `MPIX_Put_notify`): the call needs no epoch, and the owner that sees the signal sees
    /// the call's effect, as with a sync ops request completed right after it.
    fn with_signal(
        &self,
        name: &str,
        target: i32,
        counter: &SyncCounter,
        what: Access,
        op: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let r = (|| {
            self.check_live()?;
            if target == PROC_NULL {
                return Ok(());
            }
            let t = self.target_counter(name, target, counter)?;
            let (signals, _) = self.inner.seg.sync_counter(t, counter.index as usize);
            self.inner.epochs.borrow_mut().covered[t][what as usize] += 1;
            let r = op();
            self.inner.epochs.borrow_mut().covered[t][what as usize] -= 1;
            r?;
            // As a sync ops request's completion: a release increment, a full fence here.
            signals.fetch_add(1, Ordering::Release);
            self.inner.stores.set(false);
            Ok(())
        })();
        self.ret(name, r)
    }

    /// [`put`](Self::put) that then signals `counter`, a counter of `target` (beyond the
    /// seed: one call carries data and signal). Needs no epoch.
    pub fn put_signal<B: Buffer + ?Sized>(
        &self,
        origin: &B,
        target: i32,
        disp: isize,
        counter: SyncCounter,
    ) -> Result<()> {
        self.with_signal("win_put_signal", target, &counter, Access::Put, || {
            self.put_inner(origin, target, disp, None)
        })
    }

    /// [`get`](Self::get) that then signals `counter`, a counter of `target`: the target
    /// learns that the data has been read. Needs no epoch.
    pub fn get_signal<B: BufferMut + ?Sized>(
        &self,
        result: &mut B,
        target: i32,
        disp: isize,
        counter: SyncCounter,
    ) -> Result<()> {
        self.with_signal("win_get_signal", target, &counter, Access::Get, || {
            self.get_inner(result, target, disp, None)
        })
    }

    /// [`accumulate`](Self::accumulate) that then signals `counter`, a counter of `target`.
    /// Needs no epoch.
    pub fn accumulate_signal<T: Equivalence>(
        &self,
        origin: &[T],
        target: i32,
        disp: isize,
        op: &Op,
        counter: SyncCounter,
    ) -> Result<()> {
        self.with_signal(
            "win_accumulate_signal",
            target,
            &counter,
            Access::Acc,
            || self.accumulate_inner(origin, target, disp, op),
        )
    }

    /// MPI_Win_sync_object_init: a persistent request on this rank's `counter` that
    /// completes when the counter has been signalled `count` times since its start (signals
    /// that arrive before a start count towards it; see the module doc). A run that finds
    /// more signals than it can use completes with MPIX_ERR_WIN_COUNTER. Info key `restart`.
    pub fn sync_object_init(
        &self,
        counter: SyncCounter,
        count: i64,
        info: &Info,
    ) -> Result<Request<'static>> {
        const WHAT: &str = "win_sync_object_init";
        let r = (|| {
            self.check_live()?;
            let restart = restart(info)?;
            let (_, generation) = self.counter_words(WHAT, &counter)?;
            if counter.owner != self.inner.ids[self.inner.rank] {
                return Err(err(
                    ErrorClass::Arg,
                    format!(
                        "{WHAT}: counter {} belongs to rank {}: only the rank that allocated a counter waits on it",
                        counter.index,
                        self.owner_rank(&counter).unwrap_or(usize::MAX)
                    ),
                ));
            }
            self.check_generation(WHAT, &counter, generation)?;
            if count < 0 {
                return Err(err(
                    ErrorClass::Count,
                    format!("{WHAT}: count {count} (a counter waits for zero or more signals)"),
                ));
            }
            let object = Object {
                win: self.inner.clone(),
                counter,
                count,
                failed: None,
            };
            let run = SyncRequest::new(object, restart);
            let eng = &self.inner.comm.eng;
            Ok(Request::ext(eng, self.origin_for_requests(), Box::new(run)))
        })();
        self.ret(WHAT, r)
    }
}

fn freed_window(what: &str) -> Error {
    err(ErrorClass::Win, format!("{what}: the window was freed"))
}

/// What the two kinds of sync request do at each step of a run; [`SyncRequest`] keeps the
/// run's state (active, restarting) for both.
trait Kind {
    /// How errors name it.
    const WHAT: &'static str;
    /// Whether a run still going when the request is dropped completes (and does what its
    /// completion does) rather than being withdrawn.
    const COMPLETE_ON_DROP: bool;
    /// Begin a run (after the checks that may refuse it).
    fn begin(&mut self) -> Result<()>;
    /// The run's result once it has completed; it is collected (the run is over).
    fn complete(&mut self) -> Option<Result<Status>>;
    /// The run's result once it has completed, without collecting it.
    fn peek(&mut self) -> Option<Result<Status>>;
    /// A restarting request's completed run is followed by the next.
    fn again(&mut self);
    /// The run is over: completed and collected (`withdrawn` false), or withdrawn.
    fn end(&mut self, withdrawn: bool);
    fn blocked_in(&self) -> Blocked;
}

/// A persistent sync request of either kind: its runs, and the `restart` key.
struct SyncRequest<K> {
    kind: K,
    restart: bool,
    active: bool,
}

impl<K: Kind> SyncRequest<K> {
    fn new(kind: K, restart: bool) -> SyncRequest<K> {
        SyncRequest {
            kind,
            restart,
            active: false,
        }
    }

    fn withdraw(&mut self) {
        if self.active {
            self.active = false;
            self.kind.end(true);
        }
    }
}

impl<K: Kind + 'static> Completion for SyncRequest<K> {
    fn kind(&self) -> &'static str {
        "sync counter"
    }

    fn start(&mut self, _eng: &mut Engine) -> Result<Option<Result<Status>>> {
        if self.active {
            if self.restart {
                // Running already, and restarting by itself: nothing to do (so that it may
                // sit in a bundle or a startall).
                return Ok(None);
            }
            return Err(err(
                ErrorClass::Request,
                format!("start of a {}: already active", K::WHAT),
            ));
        }
        self.kind.begin()?;
        self.active = true;
        Ok(None)
    }

    fn poll(&mut self, _eng: &mut Engine) -> Option<Result<Status>> {
        if !self.active {
            return Some(Ok(Status::empty()));
        }
        let r = self.kind.complete()?;
        if r.is_ok() && self.restart {
            self.kind.again();
        } else {
            self.active = false;
            self.kind.end(false);
        }
        Some(r)
    }

    fn peek(&mut self, _eng: &mut Engine) -> Option<Result<Status>> {
        if !self.active {
            return Some(Ok(Status::empty()));
        }
        self.kind.peek()
    }

    /// What a run waits for is a peer's store to a counter line, which needs no progress
    /// from this rank: when every rank has a core, the line alone is polled for a short
    /// while first (as `Win::wait_rma` does), so that the signal is seen a cache-line
    /// transfer after it is made rather than after a round of the progress engine.
    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        if eng.spin_budget() >= super::PRE_SPIN {
            for _ in 0..super::PRE_SPIN {
                if let Some(r) = self.poll(eng) {
                    return r;
                }
                std::hint::spin_loop();
            }
        }
        let blocked = self.blocked_in();
        eng.wait_for(blocked, |e| self.poll(e))?
    }

    fn cancel(&mut self, _eng: &mut Engine) -> Result<()> {
        Err(err(
            ErrorClass::Request,
            format!(
                "cancel of a {} (seed 001: sync requests cannot be cancelled; free it instead)",
                K::WHAT
            ),
        ))
    }

    fn blocked_in(&self) -> Blocked {
        self.kind.blocked_in()
    }

    fn abandon(&mut self, _eng: &mut Engine) {
        self.withdraw();
    }

    fn is_active(&self) -> bool {
        self.active
    }

    fn is_persistent(&self) -> bool {
        true
    }

    fn can_start(&self) -> bool {
        !self.active || self.restart
    }

    /// Dropped while active: a run of a plain ops request completes (it signals, as a wait
    /// would); any other is withdrawn (an object request's wait could last forever).
    fn settle(&mut self, eng: &mut Engine) {
        if self.active && K::COMPLETE_ON_DROP && !self.restart {
            let _ = self.poll(eng);
        }
        self.withdraw();
    }

    fn free(&mut self, _eng: &mut Engine) -> Result<()> {
        if self.active && !self.restart {
            return Err(err(
                ErrorClass::Request,
                format!(
                    "request_free of an active {} (complete it with wait or test first)",
                    K::WHAT
                ),
            ));
        }
        self.withdraw();
        Ok(())
    }
}

/// The origin's side: signal the target's counter.
struct Ops {
    win: Rc<WinInner>,
    /// `None` for MPI_PROC_NULL.
    target: Option<usize>,
    modes: Vec<Access>,
    counter: SyncCounter,
}

impl Ops {
    fn win(&self) -> Win {
        Win {
            inner: self.win.clone(),
        }
    }

    /// Permit (or stop permitting) the calls of the request's modes to its target.
    fn cover(&self, on: bool) {
        let mut e = self.win.epochs.borrow_mut();
        let step = |c: &mut u32| *c = if on { *c + 1 } else { c.saturating_sub(1) };
        let mut active = e.sync_ops_active as u32;
        step(&mut active);
        e.sync_ops_active = active as usize;
        if let Some(t) = self.target {
            for &a in &self.modes {
                step(&mut e.covered[t][a as usize]);
            }
        }
    }

    /// The target's counter, checked to be still the one the request was made with.
    fn counter(&self, what: &str, t: usize) -> Result<&AtomicU64> {
        let (value, generation) = self.win.seg.sync_counter(t, self.counter.index as usize);
        self.win()
            .check_generation(what, &self.counter, generation)?;
        Ok(value)
    }
}

impl Kind for Ops {
    const WHAT: &'static str = "sync ops request";
    const COMPLETE_ON_DROP: bool = true;

    fn begin(&mut self) -> Result<()> {
        const WHAT: &str = "start of a sync ops request";
        self.win().check_live().map_err(|_| freed_window(WHAT))?;
        if let Some(t) = self.target {
            self.counter(WHAT, t)?;
        }
        self.cover(true);
        Ok(())
    }

    /// Every call the run covers is done (they complete when they return): signal the
    /// counter, ordered after them.
    fn complete(&mut self) -> Option<Result<Status>> {
        let w = self.win();
        if w.check_live().is_err() {
            return Some(Err(freed_window(Self::WHAT)));
        }
        if let Some(t) = self.target {
            let value = match self.counter(Self::WHAT, t) {
                Ok(v) => v,
                Err(e) => return Some(Err(e)),
            };
            // Release: the puts' stores and the gets' loads of this rank happen before the
            // owner sees the signal (on x86-64 a locked instruction, a full fence, so
            // nothing is left for a flush to publish either).
            value.fetch_add(1, Ordering::Release);
            w.inner.stores.set(false);
        }
        Some(Ok(Status::empty()))
    }

    fn peek(&mut self) -> Option<Result<Status>> {
        Some(Ok(Status::empty()))
    }

    fn again(&mut self) {}

    fn end(&mut self, _withdrawn: bool) {
        self.cover(false);
    }

    fn blocked_in(&self) -> Blocked {
        let peer = self.target.map_or(PROC_NULL, |t| t as i32);
        Blocked::on(BlockedIn::Rma, peer, 0, 0)
    }
}

/// The owner's side: wait until the counter has had its signals.
struct Object {
    win: Rc<WinInner>,
    counter: SyncCounter,
    count: i64,
    /// The error a start found (a counter below zero), for the completion to report.
    failed: Option<Error>,
}

impl Object {
    /// The signals the counter has received since it was allocated.
    fn signals(&self) -> u64 {
        self.win
            .seg
            .sync_counter(self.win.rank, self.counter.index as usize)
            .0
            .load(Ordering::Acquire)
    }

    /// Wait for `count` more signals; a counter left below zero (more signals than that run
    /// and one more could use) is the seed's negative counter.
    fn arm(&mut self) {
        let armed = {
            let mut cs = self.win.counters.borrow_mut();
            let a = &mut cs.armed[self.counter.index as usize];
            *a += self.count as u64;
            *a
        };
        let v = armed.wrapping_sub(self.signals()) as i64;
        if v < 0 {
            self.failed = Some(err(
                ErrorClass::WinCounter,
                format!(
                    "sync counter {} driven below zero: {v} after a start with count {} (it was signalled {} more times than its runs wait for)",
                    self.counter.index,
                    self.count,
                    -v
                ),
            ));
        }
    }

    fn set_waited(&self, on: bool) {
        self.win.counters.borrow_mut().waited[self.counter.index as usize] = on;
    }
}

impl Kind for Object {
    const WHAT: &'static str = "sync object request";
    const COMPLETE_ON_DROP: bool = false;

    fn begin(&mut self) -> Result<()> {
        const WHAT: &str = "start of a sync object request";
        Win {
            inner: self.win.clone(),
        }
        .check_live()
        .map_err(|_| freed_window(WHAT))?;
        let i = self.counter.index as usize;
        {
            let cs = self.win.counters.borrow();
            if cs.allocated[i] != Some(self.counter.generation) {
                return Err(err(
                    ErrorClass::Arg,
                    format!("{WHAT}: counter {i} has been freed (win_free_sync_objects)"),
                ));
            }
            if cs.waited[i] {
                return Err(err(
                    ErrorClass::Request,
                    format!("{WHAT}: another request on counter {i} is running"),
                ));
            }
        }
        self.set_waited(true);
        self.arm();
        Ok(())
    }

    fn complete(&mut self) -> Option<Result<Status>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        self.peek()
    }

    fn peek(&mut self) -> Option<Result<Status>> {
        if let Some(e) = &self.failed {
            return Some(Err(e.clone()));
        }
        let armed = self.win.counters.borrow().armed[self.counter.index as usize];
        (self.signals() >= armed).then(|| Ok(Status::empty()))
    }

    fn again(&mut self) {
        self.arm();
    }

    /// A withdrawn run takes its count back (signals that arrived for it count towards the
    /// next start).
    fn end(&mut self, withdrawn: bool) {
        let mut cs = self.win.counters.borrow_mut();
        let i = self.counter.index as usize;
        if withdrawn {
            cs.armed[i] -= self.count as u64;
            self.failed = None;
        }
        cs.waited[i] = false;
    }

    fn blocked_in(&self) -> Blocked {
        Blocked::on(BlockedIn::Rma, self.win.rank as i32, 0, 0)
    }
}
