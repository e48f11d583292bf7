//! Waiting: what a long wait reports ([`Blocked`]), how it backs off ([`Waiter`]: spin, then
//! yield the core, checking now and then that the job is alive), and the engine's waits,
//! all one loop ([`Engine::wait_for`]).
#![forbid(unsafe_code)]

use super::engine::Engine;
use super::matching::Pattern;
use super::ops::OpId;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::{BlockedIn, JobSegment, RankState};
use crate::status::Status;

/// What a wait reports to the launcher once it becomes long: the kind of call, and the
/// peer, tag and context it waits on when there is one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Blocked {
    what: BlockedIn,
    /// The peer (endpoint or rank, ANY_SOURCE for a wildcard receive); `None` when the
    /// wait is not on one peer (a wait on several requests, finalize, ...).
    peer: Option<i32>,
    tag: i32,
    ctx: u32,
}

impl Blocked {
    /// A wait in a send to `peer`.
    pub(crate) const fn send(peer: i32, tag: i32, ctx: u32) -> Blocked {
        Blocked::on(BlockedIn::Send, peer, tag, ctx)
    }

    /// A wait in a receive from `peer` (ANY_SOURCE and ANY_TAG allowed).
    pub(crate) const fn recv(peer: i32, tag: i32, ctx: u32) -> Blocked {
        Blocked::on(BlockedIn::Recv, peer, tag, ctx)
    }

    /// A wait in a receive matching `pat` (endpoints; wildcards as ANY_SOURCE / ANY_TAG).
    pub(crate) fn recv_matching(pat: &Pattern) -> Blocked {
        Blocked::recv(
            pat.src.map_or(crate::status::ANY_SOURCE, |s| s as i32),
            pat.tag.unwrap_or(crate::status::ANY_TAG),
            pat.ctx,
        )
    }

    /// A wait in `what` on `peer`, `tag`, `ctx`.
    pub(crate) const fn on(what: BlockedIn, peer: i32, tag: i32, ctx: u32) -> Blocked {
        Blocked {
            what,
            peer: Some(peer),
            tag,
            ctx,
        }
    }

    /// A wait in `what` on no particular peer (finalize, buffer detach, a wait on several
    /// requests).
    pub(crate) const fn in_call(what: BlockedIn) -> Blocked {
        Blocked {
            what,
            peer: None,
            tag: 0,
            ctx: 0,
        }
    }

    /// A wait on a collective operation's messages on `ctx` with `tag`, from whichever
    /// peer comes next.
    pub(crate) const fn collective(tag: i32, ctx: u32) -> Blocked {
        Blocked {
            what: BlockedIn::Wait,
            peer: None,
            tag,
            ctx,
        }
    }

    /// A wait on requests with nothing more to say.
    pub(crate) const fn wait() -> Blocked {
        Blocked::in_call(BlockedIn::Wait)
    }

    /// The same peer, tag and context, reported as a wait on a request.
    pub(crate) const fn as_wait(self) -> Blocked {
        Blocked {
            what: BlockedIn::Wait,
            ..self
        }
    }

    /// The same wait, on `peer`.
    pub(crate) const fn with_peer(self, peer: i32) -> Blocked {
        Blocked {
            peer: Some(peer),
            ..self
        }
    }

    /// What kind of call waits.
    pub(crate) const fn what(&self) -> BlockedIn {
        self.what
    }
}

/// What [`waits_aside`] calls between the polls of a wait.
pub type Pause = fn() -> Result<()>;

std::thread_local! {
    static ASIDE: std::cell::Cell<Option<Pause>> = const { std::cell::Cell::new(None) };
}

/// Run `f`, a blocking call on a rank that a layer above shares between threads behind a
/// lock of its own (the C ABI under MPI_THREAD_MULTIPLE), with `pause` called between the
/// polls of those of its waits that may let the lock go: the exchanges that make a shared
/// region (a communicator's collective region, see
/// [`Comm::prepare_blocking_collective`](crate::Comm::prepare_blocking_collective)), and
/// the context agreements of the intracommunicator constructors (dup, split, split_type,
/// create, create_group, the topologies and intercommunicators; they reserve the pairs they
/// offer, see `comm::agree`), the waits of window synchronization (`Win::wait_rma`), and
/// blocking collectives, which run as their nonblocking form tested between pauses (those
/// that window creation and free make, for one). Those polls hold nothing of the rank
/// across `pause`; `pause` lets the layer's lock go and takes it back, and its error (the
/// job aborted meanwhile) ends the wait. The layer must hold nothing of the rank across `f`
/// either (no borrow of its own tables). Other waits in `f` keep the lock (a blocking
/// point-to-point call's, a channel bind's).
pub fn waits_aside<R>(pause: Pause, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Pause>);
    impl Drop for Reset {
        fn drop(&mut self) {
            ASIDE.with(|a| a.set(self.0));
        }
    }
    let _reset = Reset(ASIDE.with(|a| a.replace(Some(pause))));
    f()
}

/// The pause of the [`waits_aside`] the calling thread runs under, if any.
pub(crate) fn aside() -> Option<Pause> {
    ASIDE.with(std::cell::Cell::get)
}

/// Backoff for waits: spin first (latency), then yield the core (8 ranks on 2 cores must
/// progress), checking the job's abort flag now and then.
pub(crate) struct Waiter {
    spins: u32,
    spin_budget: u32,
    blocked: Blocked,
    published: bool,
    /// When the wait left its spin phase (then it is "blocked" for the launcher's report).
    slow_since: Option<std::time::Instant>,
    last_launcher_check: Option<std::time::Instant>,
}

/// Idle polls before a wait starts yielding its core: long when every rank has a core of its
/// own (a yield costs a syscall and the partner answers within microseconds), none to speak
/// of when ranks outnumber cores (the partners may need this core to answer at all: every
/// poll past the first only delays them). Decided when the endpoint is made, from the CPUs
/// the process may then use: a program that pins itself to one core afterwards (benchmarks
/// do) must not turn its waits into yields.
///
/// Measured on 2 cores (2026-11-27, `earlybird-bench coll` and `halo2d`, launches
/// interleaved): 50 polls before the first yield against 1 took a barrier of 4 ranks from
/// 2.0 to 3.9 us and of 8 ranks from 5.3 to 12.9 us, an allreduce of 8 B at 8 ranks from
/// 8.1 to 16 us; halo2d at 4 ranks was no slower with 1 (41 against 43 us).
pub(crate) fn spin_budget(nranks: u32) -> u32 {
    if nranks as usize <= crate::sys::process::allowed_cpus() {
        50_000
    } else {
        1
    }
}

/// Idle polls before yielding while this thread's core is contended (see [`CONTENDED`]).
const CONTENDED_SPINS: u32 = 50;
/// A yield that returns later than this ran someone else: the core is contended.
const CONTENDED_YIELD: std::time::Duration = std::time::Duration::from_micros(20);
/// Yields that return at once before a contended thread spins long again.
const CONTENDED_FOR: u32 = 256;

std::thread_local! {
    /// Whether other threads (ranks of another job on the host, say) want this thread's
    /// core: set when a yield came back late, counted down by yields that came back at once.
    /// While set, waits spin [`CONTENDED_SPINS`] polls instead of the endpoint's budget,
    /// since a long spin then only delays the partner this core may be needed for: two jobs
    /// of two ranks on two cores otherwise pay up to a time slice for every hand-off.
    static CONTENDED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// A wait this long is reported as "blocked in ..." to the launcher.
const PUBLISH_AFTER: std::time::Duration = std::time::Duration::from_millis(10);
/// How often a long wait checks that the launcher is still alive.
const LAUNCHER_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// A rank of `job` other than `me` that is running by its slot but whose process is gone.
/// Under ebrun the launcher finds these; under Hydra, Slurm or mpirun the ranks look
/// themselves (a launcher may leave the others running when one dies).
fn dead_peer(job: &JobSegment, me: u32) -> Option<(u32, u32)> {
    (0..job.nranks()).find_map(|r| {
        let pid = job.pid(r);
        (r != me
            && pid != 0
            && job.state(r) == RankState::Running
            && !crate::sys::process::alive(pid))
        .then_some((r, pid))
    })
}

impl Waiter {
    pub(crate) fn new(spin_budget: u32, blocked: Blocked) -> Waiter {
        let contended = CONTENDED.with(std::cell::Cell::get) > 0;
        Waiter {
            spins: 0,
            spin_budget: if contended {
                spin_budget.min(CONTENDED_SPINS)
            } else {
                spin_budget
            },
            blocked,
            published: false,
            slow_since: None,
            last_launcher_check: None,
        }
    }

    #[inline]
    pub(crate) fn idle(&mut self, job: &JobSegment, me: u32) -> Result<()> {
        self.spins = self.spins.wrapping_add(1);
        if self.spins < self.spin_budget {
            // One PAUSE between polls: a reader that hammers the slot the writer is filling
            // steals the line mid-write. More than one makes a caught-up reader the bottleneck.
            std::hint::spin_loop();
            return Ok(());
        }
        if self.spins.is_multiple_of(64) {
            self.slow_checks(job, me)?;
        }
        let t = std::time::Instant::now();
        std::thread::yield_now();
        let late = t.elapsed() >= CONTENDED_YIELD;
        CONTENDED.with(|c| {
            c.set(if late {
                CONTENDED_FOR
            } else {
                c.get().saturating_sub(1)
            })
        });
        Ok(())
    }

    /// The checks of a long wait: abort flag, launcher alive, "blocked in" report.
    #[cold]
    fn slow_checks(&mut self, job: &JobSegment, me: u32) -> Result<()> {
        if let Some((rank, code)) = job.aborted() {
            self.finish(job, me);
            let who = if rank < 0 {
                "the launcher".to_string()
            } else {
                format!("rank {rank}")
            };
            return Err(Error::new(
                ErrorClass::ProcFailed,
                format!("the job was aborted by {who} (code {code}) while this rank waited"),
            ));
        }
        let now = std::time::Instant::now();
        let since = *self.slow_since.get_or_insert(now);
        if !self.published && now - since >= PUBLISH_AFTER {
            let b = self.blocked;
            job.set_blocked(me, b.what, b.peer, b.tag, b.ctx);
            self.published = true;
        }
        let launcher = job.launcher_pid();
        if launcher != 0
            && self
                .last_launcher_check
                .is_none_or(|t| now - t >= LAUNCHER_CHECK_EVERY)
        {
            self.last_launcher_check = Some(now);
            if !crate::sys::process::alive(launcher) {
                self.finish(job, me);
                return Err(Error::new(
                    ErrorClass::ProcFailed,
                    format!("the launcher (pid {launcher}) is gone"),
                ));
            }
            if crate::bootstrap::watch_peers() {
                if let Some((rank, pid)) = dead_peer(job, me) {
                    self.finish(job, me);
                    return Err(Error::new(
                        ErrorClass::ProcFailed,
                        format!(
                            "rank {rank} (pid {pid}) ended without finalize while this rank waited"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn finish(&mut self, job: &JobSegment, me: u32) {
        if self.published {
            job.set_blocked(me, BlockedIn::Nothing, None, 0, 0);
            self.published = false;
        }
    }
}

impl Engine {
    /// Drive progress until `f` finds what it waits for; `blocked` says what to report to
    /// the launcher if this turns into a long wait. `Err` (MPIX_ERR_PROC_FAILED) when the
    /// job is aborted or the launcher is gone meanwhile.
    #[inline(always)]
    pub(crate) fn wait_for<T>(
        &mut self,
        blocked: Blocked,
        mut f: impl FnMut(&mut Engine) -> Option<T>,
    ) -> Result<T> {
        if let Some(t) = f(self) {
            return Ok(t);
        }
        let mut w = Waiter::new(self.spin_budget(), blocked);
        loop {
            if !self.progress() {
                w.idle(self.job(), self.rank())?;
            }
            if let Some(t) = f(self) {
                w.finish(self.job(), self.rank());
                return Ok(t);
            }
        }
    }

    /// Drive progress until `op` completes, and take its result (its slot is freed).
    #[inline(always)]
    pub(crate) fn wait(&mut self, op: OpId, blocked: Blocked) -> Result<Status> {
        self.wait_for(blocked, |e| e.is_done(op).then_some(()))?;
        self.take(op)
    }

    /// Like [`wait`](Self::wait) for a bound receive: its slot stays bound.
    #[inline(always)]
    pub(crate) fn wait_bound(&mut self, op: OpId, blocked: Blocked) -> Result<Status> {
        self.wait_for(blocked, |e| e.is_done(op).then_some(()))?;
        self.collect(op)
    }

    /// [`wait`](Self::wait) for a blocking call whose buffer is released when it returns:
    /// if the wait fails before `op` completes, the operation is abandoned first.
    pub(crate) fn wait_blocking(&mut self, op: OpId, blocked: Blocked) -> Result<Status> {
        let r = self.wait(op, blocked);
        if r.is_err() && !self.is_done(op) {
            self.abandon(op);
            // A withdrawn receive (or self-send) is complete now and nobody will collect it.
            if self.is_done(op) {
                let _ = self.take(op);
            }
        }
        r
    }
}
