//! The point-to-point engine of one endpoint: its state, and progress.
//!
//! The protocol is in [`wire`](super::wire) (what travels), [`send`](super::send),
//! [`bsend`](super::bsend) and [`recv`](super::recv) (what each side does), and
//! [`wait`](super::wait) (how calls wait). A message goes eager when it is at most the eager
//! limit (`EARLYBIRD_EAGER_LIMIT`, default 16 KiB, at most half a ring's data area) **and**
//! the sender's eager bytes not yet delivered into a receive buffer stay within the flow
//! limit (`EARLYBIRD_FLOW_LIMIT`, default 1 MiB per ordered pair). Otherwise it goes by
//! rendezvous, which holds only an envelope at the receiver until matched: so a flood of
//! unexpected messages to a rank that never receives costs that rank at most the flow limit
//! per sender, and the senders wait. Under NO_EAGER_THROTTLE (seed 002) messages of at most
//! 4 KiB go eager whatever the flow limit says (the program paces itself).
//!
//! # Invariants
//!
//! * Frames from one endpoint to another are handled in the order they were sent (the
//!   fabric keeps them in order, queued frames included).
//! * Every operation that still references a user buffer (a posted receive, a rendezvous send
//!   before its `FIN`) is in the operation table, not done, and holds its buffer's
//!   [`Loan`]; the request layer's scope does not end while one is in flight.
//! * Nothing on the eager path of a small message allocates, locks, or makes a syscall.
#![forbid(unsafe_code)]

use super::matching::{Envelope, Keying, Matcher, Pattern};
use super::ops::{OpId, OpKind, Ops};
use super::recv::Held;
use super::wait::{spin_budget, Blocked};
use crate::assertions::Assertions;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::{BlockedIn, JobSegment};
use crate::fabric::{Fabric, Transport};
use crate::status::Status;

/// Frames a progress call takes from one peer at most, so that one busy peer does not
/// starve the others.
const FRAMES_PER_PEER: usize = 64;

/// Send modes (MPI 4.1 §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendMode {
    Standard,
    /// Completes only once a matching receive has started.
    Synchronous,
    /// The program promises the receive is already posted; sent as standard.
    Ready,
    /// Copied into the attached buffer; completes locally.
    Buffered,
}

/// What a send start produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Started {
    /// Complete already (eager standard send, PROC_NULL, buffered).
    Done,
    /// In progress: wait for this operation.
    Op(OpId),
}

/// Tunables read once per endpoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) eager_limit_bytes: usize,
    /// The eager limit towards ranks on other hosts, where a rendezvous costs two more trips
    /// over the network instead of saving copies.
    pub(crate) far_eager_limit_bytes: usize,
    pub(crate) flow_limit_bytes: u64,
    /// The flow limit towards a rank on another host (`EARLYBIRD_FAR_FLOW_LIMIT`, default 4
    /// MiB): a window of 64 KiB messages across the network needs more in flight than one
    /// on a host (64 KiB bandwidth between namespace hosts 2.0 GB/s with 1 MiB, 3.2-3.6
    /// with 4 MiB).
    pub(crate) far_flow_limit_bytes: u64,
}

impl Limits {
    /// From `EARLYBIRD_EAGER_LIMIT`, `EARLYBIRD_FAR_EAGER_LIMIT` (read only when the job
    /// `spans_hosts`) and `EARLYBIRD_FLOW_LIMIT` (bytes), with defaults.
    pub(crate) fn from_env(max_payload: usize, spans_hosts: bool) -> Limits {
        let get = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let eager = get("EARLYBIRD_EAGER_LIMIT").unwrap_or(16 * 1024) as usize;
        let flow = get("EARLYBIRD_FLOW_LIMIT").unwrap_or(1 << 20);
        let eager = eager.min(max_payload);
        let far = match spans_hosts {
            true => {
                (get("EARLYBIRD_FAR_EAGER_LIMIT").unwrap_or(64 * 1024) as usize).min(max_payload)
            }
            false => eager,
        };
        let far_flow = match spans_hosts {
            true => get("EARLYBIRD_FAR_FLOW_LIMIT").unwrap_or(4 << 20),
            false => flow,
        };
        Limits {
            eager_limit_bytes: eager,
            far_eager_limit_bytes: far,
            flow_limit_bytes: flow.max(eager.max(far) as u64),
            far_flow_limit_bytes: far_flow.max(far as u64),
        }
    }
}

/// Flow control towards one peer.
#[derive(Debug, Default)]
pub(crate) struct Flow {
    /// Eager payload bytes that may be undelivered at this peer: the flow limit, or the one
    /// towards another host.
    pub(crate) limit: u64,
    /// Eager payload bytes ever sent to this peer (compared with what it reports delivered).
    pub(crate) eager_sent: u64,
    /// The peer's delivered count as last read; re-read only when it would stop a send.
    pub(crate) seen_delivered: u64,
}

/// Everything but the fabric, so that a frame's payload borrowed from the fabric can be
/// handled while the rest of the endpoint is mutated.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) me: u32,
    pub(crate) matcher: Matcher<OpId, Held>,
    pub(crate) ops: Ops,
    pub(crate) flow: Vec<Flow>,
    pub(crate) limits: Limits,
    pub(crate) bsend: super::bsend::Bsends,
    /// Eager bytes delivered per source, not yet reported to it.
    pub(crate) credit: Vec<u64>,
    /// The sources whose `credit` is not zero, each once.
    pub(crate) owed: Vec<u32>,
    /// The assertions made at init (seed 002), which hold on every communicator.
    pub(crate) asserts: Assertions,
    /// The assertions in force on each point-to-point context (index: the context), set when
    /// its communicator is made or its info changes; other contexts (the library's own:
    /// collectives, communicator creation, channel binds) have none, and neither have the
    /// library's messages on a communicator's context (intercomm_create's, whose tags are
    /// negative).
    ctx_asserts: Vec<Assertions>,
    /// Whether any context asserts EXACT_LENGTH (a short message then leaves the receive's
    /// fast path to be checked).
    pub(super) strict_len: bool,
    /// Whether a receive must look further than its fast path: `strict_len` or
    /// `persistent_only` (one test on the path of everything else).
    pub(super) checked_recv: bool,
    /// NO_EAGER_THROTTLE: small messages skip flow control (see `send::UNTHROTTLED_MAX`).
    pub(super) unthrottled: bool,
    /// PERSISTENT_ONLY: a receive checks that a persistent send is matched by a persistent
    /// receive and the reverse.
    pub(super) persistent_only: bool,
}

/// Where an endpoint's finalize stands (see [`Engine::finalize_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Finalizing {
    /// Frames that found a ring full still wait to leave.
    #[default]
    Flushing,
    /// Counted in; waiting for every rank.
    Gathering,
    /// Every rank is in: answering what peers sent before.
    Draining,
    Done,
}

/// State an upper layer keeps per endpoint, one value per type (the channel layer's pending
/// binds, say), reached by its type.
#[derive(Default)]
pub(crate) struct Extensions {
    slots: Vec<Box<dyn std::any::Any>>,
}

impl Extensions {
    /// The value of type `T`, made with `T::default()` the first time.
    pub(crate) fn get<T: Default + 'static>(&mut self) -> &mut T {
        let i = match self.slots.iter().position(|s| s.is::<T>()) {
            Some(i) => i,
            None => {
                self.slots.push(Box::new(T::default()));
                self.slots.len() - 1
            }
        };
        self.slots[i]
            .downcast_mut::<T>()
            .expect("found by its type")
    }
}

/// One endpoint's point-to-point state. Driven by one thread at a time.
pub(crate) struct Engine {
    pub(crate) fabric: Fabric,
    pub(crate) core: Core,
    finalized: bool,
    /// Whether the job's ranks are threads of this process (a thread job) rather than
    /// processes (launched by ebrun, or a singleton): the one place this fact is kept.
    ranks_are_threads: bool,
    /// Idle polls before a wait yields its core (fixed at init, see `spin_budget`).
    spin_budget: u32,
    /// Upper layers' state per endpoint.
    pub(crate) ext: Extensions,
    /// Operations made of steps that every progress call advances.
    pub(crate) background: super::background::BackgroundList,
    /// The peers a progress call polls, in a job with doorbells (kept for its capacity).
    ready: Vec<u32>,
    /// Who the job's ranks are (endpoint communicators, seed 003).
    pub(crate) ids: std::sync::Arc<crate::bootstrap::Identities>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("me", &self.core.me).finish()
    }
}

impl Engine {
    /// The engine of endpoint `me` of `job`, whose ranks are threads of this process when
    /// `ranks_are_threads`. `Err` if the endpoint was taken already.
    pub(crate) fn new(job: JobSegment, me: u32, ranks_are_threads: bool) -> Result<Engine> {
        let n = job.nranks();
        let mut fabric = Fabric::new(job, me).map_err(|e| Error::new(ErrorClass::Other, e))?;
        let limits = Limits::from_env(fabric.max_payload(), fabric.spans_hosts());
        fabric.set_flow_limit(limits.far_flow_limit_bytes);
        let flow = (0..n)
            .map(|p| Flow {
                limit: match fabric.shares_memory_with(p as u32) {
                    true => limits.flow_limit_bytes,
                    false => limits.far_flow_limit_bytes,
                },
                ..Flow::default()
            })
            .collect();
        Ok(Engine {
            core: Core {
                me,
                matcher: Matcher::default(),
                ops: Ops::default(),
                flow,
                limits,
                bsend: Default::default(),
                credit: vec![0; n as usize],
                owed: Vec::new(),
                asserts: Assertions::empty(),
                ctx_asserts: vec![],
                strict_len: false,
                checked_recv: false,
                unthrottled: false,
                persistent_only: false,
            },
            fabric,
            finalized: false,
            ranks_are_threads,
            spin_budget: spin_budget(n),
            ext: Extensions::default(),
            background: Default::default(),
            ready: Vec::new(),
            ids: std::sync::Arc::new(crate::bootstrap::Identities::first(n, ranks_are_threads)),
        })
    }

    pub(crate) fn rank(&self) -> u32 {
        self.core.me
    }

    pub(crate) fn size(&self) -> u32 {
        self.fabric.nranks()
    }

    pub(crate) fn job(&self) -> &JobSegment {
        self.fabric.job()
    }

    pub(crate) fn spin_budget(&self) -> u32 {
        self.spin_budget
    }

    /// Whether the job's ranks are threads of this process (a thread job).
    pub(crate) fn ranks_are_threads(&self) -> bool {
        self.ranks_are_threads
    }

    /// Whether finalize has run.
    pub(crate) fn finalized(&self) -> bool {
        self.finalized
    }

    pub(crate) fn limits(&self) -> Limits {
        self.core.limits
    }

    /// The assertions made at init (seed 002).
    pub(crate) fn assertions(&self) -> Assertions {
        self.core.asserts
    }

    /// Make the init-time assertions `a` (before any communicator exists).
    pub(crate) fn set_assertions(&mut self, a: Assertions) {
        self.core.asserts = a;
        self.core.unthrottled = a.contains(Assertions::NO_EAGER_THROTTLE);
        self.core.persistent_only = a.contains(Assertions::PERSISTENT_ONLY);
        self.core.checked_recv = self.core.strict_len || self.core.persistent_only;
    }

    /// The assertions in force on point-to-point context `ctx` from now on (its
    /// communicator's): matching keys the context by what its receives promise to name, and
    /// receives check what they must.
    pub(crate) fn set_ctx_assertions(&mut self, ctx: u32, a: Assertions) {
        let c = &mut self.core;
        if c.ctx_asserts.len() <= ctx as usize {
            c.ctx_asserts.resize(ctx as usize + 1, Assertions::empty());
        }
        c.ctx_asserts[ctx as usize] = a;
        c.strict_len |= a.contains(Assertions::EXACT_LENGTH);
        c.checked_recv = c.strict_len || c.persistent_only;
        c.matcher.set_keying(
            ctx,
            Keying {
                src: a.contains(Assertions::NO_ANY_SOURCE),
                tag: a.contains(Assertions::NO_ANY_TAG),
            },
        );
    }

    /// Match context `ctx` by source and tag in buckets: a context of the library's own
    /// whose receives always name both (partitioned communication's, whose many receives at a
    /// time would make the general queues' scans quadratic).
    pub(crate) fn key_exactly(&mut self, ctx: u32) {
        self.core.matcher.set_keying(
            ctx,
            Keying {
                src: true,
                tag: true,
            },
        );
    }

    // ---- completion ----------------------------------------------------------------------

    #[inline]
    pub(crate) fn is_done(&self, op: OpId) -> bool {
        self.core.ops.is_done(op)
    }

    /// Take the result of a completed operation and free its slot.
    pub(crate) fn take(&mut self, op: OpId) -> Result<Status> {
        self.core.ops.take(op)
    }

    /// Mark `op` as touching buffers of the request layer's scope `scope` (see
    /// [`settle_scope`](Self::settle_scope)).
    #[inline]
    pub(crate) fn set_scope(&mut self, op: OpId, scope: u32) {
        if let Some(s) = self.core.ops.get_mut(op) {
            s.scope = scope;
        }
    }

    /// Nobody will collect `op`'s result (MPI_Request_free): free it now if complete, else
    /// when it completes.
    pub(crate) fn detach(&mut self, op: OpId) {
        match self.core.ops.get_mut(op) {
            Some(s) if s.done => {
                let _ = self.core.ops.take(op);
            }
            Some(s) => s.detached = true,
            None => {}
        }
    }

    /// A scope ends: every operation of it still in flight must finish before its buffers
    /// are released. Receives nobody matched are cancelled; sends are waited for. Results
    /// of completed operations stay for their requests to collect (a request that was
    /// forgotten with `mem::forget` leaves its slot behind, like any leak).
    pub(crate) fn settle_scope(&mut self, scope: u32) {
        for op in self.core.ops.in_flight_of(scope) {
            let recv = matches!(
                self.core.ops.get(op).map(|s| &s.kind),
                Some(OpKind::Recv { .. })
            );
            if recv {
                self.cancel(op);
            }
            if self
                .wait_for(Blocked::wait(), |e| e.is_done(op).then_some(()))
                .is_err()
            {
                // The job was aborted: the peer may never answer.
                self.abandon(op);
            }
            // A detached operation that completed was freed by `complete`; one abandoned in
            // flight stays detached and is freed when (if) it completes.
            if self.core.ops.get(op).is_some_and(|s| s.detached && s.done) {
                let _ = self.core.ops.take(op);
            }
        }
    }

    /// Give up on `op` after its wait failed (the job was aborted) while it may still
    /// reference a user buffer that is about to be released.
    ///
    /// * A receive is withdrawn (it is posted, or it completed: matching and the copy into
    ///   the buffer happen within one progress call, never across calls).
    /// * An eager send references no buffer (its data is in the ring): it is detached.
    /// * A rendezvous send to this endpoint itself is withdrawn from its own queues.
    /// * A rendezvous send to another process may still be read, but only through the kernel,
    ///   which cannot harm this process: it is detached.
    /// * A rendezvous send to another thread of this process could be read from freed
    ///   memory: the only sound way out is to end the process, which is what the aborted job
    ///   is about to do anyway.
    pub(crate) fn abandon(&mut self, op: OpId) {
        let (peer, rndv) = match self.core.ops.get(op).map(|s| (&s.kind, s.done)) {
            None | Some((_, true)) | Some((OpKind::Free, _)) => return,
            Some((OpKind::Recv { .. }, _)) => {
                self.cancel(op);
                return;
            }
            Some((OpKind::Send { peer, rndv, .. }, _)) => (*peer, rndv.is_some()),
        };
        if rndv && peer == self.core.me {
            self.core.withdraw_self_rts(&mut self.fabric, op);
            return;
        }
        if rndv && self.fabric.same_process(peer) {
            use std::io::Write;
            let line = format!(
                "earlybird: rank {}: the job was aborted while rank {peer}, a thread of this process, may still read a send buffer; ending the process\n",
                self.core.me
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            std::process::abort();
        }
        if let Some(s) = self.core.ops.get_mut(op) {
            s.detached = true;
        }
    }

    // ---- progress ------------------------------------------------------------------------

    /// Move every frame that can move: queued frames out, arrived frames in (at most 64 from
    /// each peer per call, from every peer or, in a job with doorbells, from those that rang);
    /// then advance the operations on the background list (see
    /// [`background`](super::background)). Returns true if a frame moved.
    #[inline]
    pub(crate) fn progress(&mut self) -> bool {
        let did = self.progress_frames();
        if !self.background.is_idle() {
            self.advance_background();
        }
        did
    }

    #[inline(always)]
    fn progress_frames(&mut self) -> bool {
        let Engine {
            fabric,
            core,
            ready,
            ..
        } = self;
        let mut did = fabric.flush();
        if fabric.polls_all() {
            for peer in 0..fabric.nranks() {
                did |= Self::take_frames(fabric, core, peer) > 0;
            }
        } else {
            fabric.rung(ready);
            for &peer in ready.iter() {
                let k = Self::take_frames(fabric, core, peer);
                did |= k > 0;
                fabric.polled(peer, k, k == FRAMES_PER_PEER);
            }
        }
        if !core.owed.is_empty() {
            for peer in core.owed.drain(..) {
                let c = std::mem::take(&mut core.credit[peer as usize]);
                fabric.report_delivered(peer, c);
            }
        }
        did
    }

    /// Take up to [`FRAMES_PER_PEER`] arrived frames from `peer`; how many.
    #[inline(always)]
    fn take_frames(fabric: &mut Fabric, core: &mut Core, peer: u32) -> usize {
        let mut k = 0;
        while let Some(f) = fabric.peek(peer) {
            let reply = {
                let payload = fabric.payload(peer, &f);
                core.receive(fabric, peer, &f, payload)
            };
            fabric.consume(peer, &f);
            if let Some(r) = reply {
                fabric.send(peer, &r, &[]);
            }
            k += 1;
            if k == FRAMES_PER_PEER {
                break;
            }
        }
        k
    }

    /// MPI_Finalize's part in p2p: let buffered sends and queued frames leave, then wait
    /// (serving peers meanwhile) until every rank has entered finalize.
    pub(crate) fn finalize(&mut self) -> Result<()> {
        self.buffers_drain()?;
        let blocked = Blocked::in_call(BlockedIn::Finalize);
        let mut phase = Finalizing::Flushing;
        self.wait_for(blocked, |e| e.finalize_step(&mut phase).then_some(()))
    }

    /// One step of finalize, without waiting: `true` once this endpoint is finalized. Every
    /// rank's queued frames leave, it counts itself in, it waits for every rank to be in, and
    /// it answers what peers sent before they entered, until nothing is left to answer. A
    /// thread finalizing several endpoints (endpoint communicators, seed 003) steps them in
    /// turn so that none waits for another.
    pub(crate) fn finalize_step(&mut self, phase: &mut Finalizing) -> bool {
        let did = self.progress();
        match *phase {
            Finalizing::Flushing => {
                if self.fabric.queued_frames() == 0 {
                    self.fabric.enter_finalize();
                    *phase = Finalizing::Gathering;
                }
                false
            }
            Finalizing::Gathering => {
                if self.fabric.finalizing() >= self.size() {
                    *phase = Finalizing::Draining;
                }
                false
            }
            Finalizing::Draining => {
                if did || self.fabric.queued_frames() != 0 || !self.fabric.quiet() {
                    return false;
                }
                self.job().set_finalized(self.core.me);
                self.finalized = true;
                *phase = Finalizing::Done;
                true
            }
            Finalizing::Done => true,
        }
    }

    /// Operations still in the table (tests: everything completed is freed).
    #[cfg(test)]
    pub(crate) fn live_ops(&self) -> usize {
        self.core.ops.live()
    }
}

impl Core {
    /// The assertions in force on context `ctx`.
    #[inline]
    pub(crate) fn ctx_assertions(&self, ctx: u32) -> Assertions {
        self.ctx_asserts
            .get(ctx as usize)
            .copied()
            .unwrap_or(self.asserts)
    }

    /// Complete receive `op` of a `len`-byte message from `env` into a buffer taking `cap`
    /// bytes: truncation, a broken EXACT_LENGTH or PERSISTENT_ONLY, then a type mismatch
    /// (the message's and the buffer's signatures), are errors. `sent`: the message's
    /// signature, and whether a persistent send sent it.
    pub(crate) fn finish_recv(
        &mut self,
        op: OpId,
        env: Envelope,
        len: usize,
        cap: usize,
        sent: (crate::sys::sig::Sig, bool),
        want: crate::sys::sig::Sig,
    ) {
        let (sent, sent_persistent) = sent;
        let recv_persistent = self.ops.get(op).is_some_and(|s| s.persistent);
        let mut st = Status {
            source: env.src as i32,
            tag: env.tag,
            bytes: len.min(cap),
            cancelled: false,
            error: ErrorClass::Success,
        };
        let err = if len > cap {
            Some(Error::new(
                ErrorClass::Truncate,
                format!("message of {len} bytes from rank {} (tag {}) truncated to the receive buffer of {cap} bytes", env.src, env.tag),
            ))
        } else if len < cap
            && env.tag >= 0
            && self
                .ctx_assertions(env.ctx)
                .contains(Assertions::EXACT_LENGTH)
        {
            Some(crate::assertions::broken(
                "receive",
                Assertions::EXACT_LENGTH,
                &format!(
                    "a message of {len} bytes from rank {} (tag {}) fills {len} of the {cap} bytes of its receive buffer",
                    env.src, env.tag
                ),
            ))
        } else if sent_persistent != recv_persistent
            && self
                .ctx_assertions(env.ctx)
                .contains(Assertions::PERSISTENT_ONLY)
        {
            let (s, r) = if sent_persistent {
                ("persistent", "nonpersistent")
            } else {
                ("nonpersistent", "persistent")
            };
            Some(crate::assertions::broken(
                "receive",
                Assertions::PERSISTENT_ONLY,
                &format!(
                    "a message of a {s} send from rank {} (tag {}) matched a {r} receive",
                    env.src, env.tag
                ),
            ))
        } else {
            sent.mismatch(want, len).map(|why| {
                Error::new(
                    ErrorClass::Type,
                    format!(
                        "message of {len} bytes from rank {} (tag {}): {why}",
                        env.src, env.tag
                    ),
                )
            })
        };
        if let Some(e) = &err {
            st.error = e.class();
        }
        self.ops.complete(op, st, err);
    }

    /// A pattern's matching queue entry for this endpoint's own receives.
    #[inline(always)]
    pub(crate) fn post_or_match(&mut self, fabric: &mut Fabric, op: OpId, pat: Pattern) {
        if let Some((env, held)) = self.matcher.take_unexpected_or_post(pat, op) {
            if let Some(r) = self.deliver_held(fabric, op, env, held) {
                fabric.send(env.src, &r, &[]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::job::JobSegment;
    use crate::sys::lend::Loan;

    fn pair() -> (Engine, Engine) {
        let job = JobSegment::anonymous(2).unwrap();
        (
            Engine::new(job.clone(), 0, true).unwrap(),
            Engine::new(job, 1, true).unwrap(),
        )
    }

    fn pat(src: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern { ctx: 0, src, tag }
    }

    fn drive(a: &mut Engine, b: &mut Engine) {
        for _ in 0..8 {
            a.progress();
            b.progress();
        }
    }

    #[test]
    fn an_endpoint_is_taken_once() {
        let job = JobSegment::anonymous(2).unwrap();
        let _a = Engine::new(job.clone(), 0, true).unwrap();
        let e = Engine::new(job, 0, true).unwrap_err();
        assert!(e.to_string().contains("already started"), "{e}");
    }

    #[test]
    fn eager_and_rendezvous_deliver_in_order_in_memory() {
        let (mut a, mut b) = pair();
        let small = Loan::copied(&[7u8; 8]);
        let big_bytes: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let big = Loan::copied(&big_bytes);
        assert_eq!(
            a.send_start(1, 0, 5, &small, SendMode::Standard).unwrap(),
            Started::Done
        );
        let Started::Op(big_op) = a.send_start(1, 0, 5, &big, SendMode::Standard).unwrap() else {
            panic!("large send must go rendezvous")
        };
        let (r1, r2) = (Loan::zeroed(8), Loan::zeroed(100_000));
        let o1 = b.recv_start(pat(Some(0), Some(5)), r1.clone());
        let o2 = b.recv_start(pat(None, None), r2.clone());
        drive(&mut a, &mut b);
        assert!(b.is_done(o1) && b.is_done(o2) && a.is_done(big_op));
        assert_eq!(b.take(o1).unwrap().bytes(), 8);
        let st = b.take(o2).unwrap();
        assert_eq!((st.source(), st.tag(), st.bytes()), (0, 5, 100_000));
        a.take(big_op).unwrap();
        assert_eq!(r1.to_packed().unwrap(), vec![7u8; 8]);
        assert_eq!(r2.to_packed().unwrap(), big_bytes);
        assert_eq!(a.live_ops() + b.live_ops(), 0);
    }

    #[test]
    fn truncation_reports_status_and_class() {
        let (mut a, mut b) = pair();
        a.send_start(1, 0, 1, &Loan::copied(&[1u8; 16]), SendMode::Standard)
            .unwrap();
        let r = Loan::zeroed(4);
        let o = b.recv_start(pat(Some(0), Some(1)), r.clone());
        drive(&mut a, &mut b);
        let e = b.take(o).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Truncate);
        assert_eq!(e.status().unwrap().bytes(), 4);
        assert_eq!(r.to_packed().unwrap(), vec![1u8; 4]);
    }

    #[test]
    fn flood_of_unexpected_messages_is_bounded_by_flow_limit() {
        let (mut a, mut b) = pair();
        let limit = a.limits().flow_limit_bytes as usize;
        let msg = Loan::copied(&[3u8; 1024]);
        let mut waiting = 0;
        for _ in 0..(limit / 1024) * 3 {
            if let Started::Op(_) = a.send_start(1, 0, 0, &msg, SendMode::Standard).unwrap() {
                waiting += 1;
            }
            drive(&mut a, &mut b);
        }
        // The receiver holds at most the flow limit of eager data; the rest are rendezvous
        // envelopes whose data stays with the (waiting) sender.
        let held: usize = b.core.matcher.unexpected_len();
        assert!(waiting > 0, "some sends must have waited");
        assert!(held * 1024 > limit);
        let eager_held: usize = (0..held)
            .filter_map(|_| b.improbe(&pat(None, None)))
            .filter(|m| !matches!(m.held(), Held::Rndv { .. }))
            .map(|m| m.len())
            .sum();
        assert!(
            eager_held <= limit,
            "eager bytes held {eager_held} exceed the flow limit {limit}"
        );
    }

    #[test]
    fn cancel_of_unmatched_rendezvous_send() {
        let (mut a, mut b) = pair();
        let big = Loan::copied(&vec![1u8; 1 << 20]);
        let Started::Op(op) = a.send_start(1, 0, 9, &big, SendMode::Standard).unwrap() else {
            panic!()
        };
        drive(&mut a, &mut b);
        a.cancel(op);
        drive(&mut a, &mut b);
        assert!(a.take(op).unwrap().is_cancelled());
        assert!(b.iprobe(&pat(None, None)).is_none());
    }

    #[test]
    fn a_receive_into_a_revoked_loan_fails_instead_of_writing() {
        let (mut a, mut b) = pair();
        let mut buf = [0u8; 8];
        let op = crate::sys::lend::lending((), |l| {
            let loan = Loan::new(crate::sys::lend::View::write(&mut buf[..]), l);
            // The receive is left posted when the region ends: its loan dies.
            b.recv_start(pat(Some(0), Some(3)), loan)
        });
        a.send_start(1, 0, 3, &Loan::copied(&[9u8; 8]), SendMode::Standard)
            .unwrap();
        drive(&mut a, &mut b);
        let e = b.take(op).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Intern, "{e}");
        assert_eq!(buf, [0u8; 8], "nothing was written after the region ended");
    }
}
