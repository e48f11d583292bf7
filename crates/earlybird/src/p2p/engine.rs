//! The point-to-point engine of one endpoint: protocols, operations and progress.
//!
//! # Protocols
//!
//! | frame | carries | answer |
//! |---|---|---|
//! | `EAGER` | envelope + payload (inline up to 24 B, else in the ring's data area) | `ACK` when flagged synchronous, once matched |
//! | `RTS` | envelope + sender's buffer address and length | `FIN` once the receiver has pulled the data (one copy: `memcpy` between threads, `process_vm_readv` between processes) |
//! | `CANCEL` | a sender's operation id | `CANCEL_REPLY` saying whether the message was still unmatched (and is now withdrawn) |
//!
//! A message goes eager when it is at most the eager limit (`EARLYBIRD_EAGER_LIMIT`, default
//! 16 KiB, at most half a ring's data area) **and** the sender's eager bytes not yet
//! delivered into a receive buffer stay within the flow limit (`EARLYBIRD_FLOW_LIMIT`, default
//! 1 MiB per ordered pair). Otherwise it goes by rendezvous, which holds only an envelope at
//! the receiver until matched: so a flood of unexpected messages to a rank that never receives
//! costs that rank at most the flow limit per sender, and the senders wait.
//!
//! # Invariants
//!
//! * Frames from one endpoint to another are handled in the order they were sent (one ring
//!   per ordered pair; frames that found the ring full wait in `pending`, in order, and any
//!   new frame queues behind them).
//! * Every operation that still references a user buffer (a posted receive, a rendezvous send
//!   before its `FIN`) is in `ops` and not done; the request layer keeps its buffer alive.
//! * Nothing on the eager path of a small message allocates, locks, or makes a syscall.
#![forbid(unsafe_code)]

use super::matching::{Envelope, Matcher, Pattern};
use super::{Status, BSEND_OVERHEAD, PROC_NULL};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::ring::{Consumer, Frame, Producer, INLINE_BYTES};
use crate::fabric::shm::{BlockedIn, JobSegment};
use crate::sys::layout::Segment;
use crate::sys::lend::{Lent, Remote};
use crate::sys::sig::Sig;
use std::collections::VecDeque;

const K_EAGER: u8 = 1;
const K_RTS: u8 = 2;
const K_ACK: u8 = 3;
const K_FIN: u8 = 4;
const K_CANCEL: u8 = 5;
const K_CANCEL_REPLY: u8 = 6;
const F_SYNC: u8 = 1;
/// An RTS whose sender's bytes are a segment table (`b`: table address, `inline[8..16]`:
/// entries), not one run at `b`.
const F_SEGS: u8 = 2;

/// Names one operation in an engine: slot index in the low 32 bits, generation above.
pub type OpId = u64;

/// Send modes (MPI 4.1 §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    Standard,
    /// Completes only once a matching receive has started.
    Synchronous,
    /// The program promises the receive is already posted; sent as standard.
    Ready,
    /// Copied into the attached buffer; completes locally.
    Buffered,
}

#[derive(Debug)]
enum OpKind {
    Free,
    /// `rndv`: the receiver will read the sender's buffer (rendezvous); an eager send's data
    /// is already in the ring and the operation only waits for an acknowledgement.
    Send {
        peer: u32,
        cancel_sent: bool,
        rndv: bool,
        /// A non-contiguous rendezvous send's segment table, which the receiver reads out of
        /// this memory: held here, unread, until the FIN.
        #[allow(dead_code)]
        table: Option<Box<[Segment]>>,
    },
    Recv {
        buf: Lent,
    },
}

#[derive(Debug)]
struct OpSlot {
    gen: u32,
    kind: OpKind,
    done: bool,
    /// The request layer's scope whose buffers this operation may touch (0: none).
    scope: u32,
    /// Nobody will collect the result (a freed request): free the slot on completion.
    detached: bool,
    status: Status,
    error: Option<Error>,
}

#[derive(Debug)]
enum Held {
    /// A small eager payload kept without a heap allocation.
    Inline {
        data: [u8; INLINE_BYTES],
        len: u8,
        sync_op: Option<u64>,
        sig: Sig,
    },
    Eager {
        data: Vec<u8>,
        sync_op: Option<u64>,
        sig: Sig,
    },
    Rndv {
        sender_op: u64,
        remote: Remote,
        len: usize,
        sig: Sig,
    },
}

impl Held {
    fn len(&self) -> usize {
        match self {
            Held::Inline { len, .. } => *len as usize,
            Held::Eager { data, .. } => data.len(),
            Held::Rndv { len, .. } => *len,
        }
    }
}

/// A message taken out of matching by a matched probe (MPI_Mprobe), waiting for `mrecv`.
#[derive(Debug)]
pub struct Matched {
    env: Envelope,
    held: Held,
}

impl Matched {
    pub fn envelope(&self) -> Envelope {
        self.env
    }
    pub fn len(&self) -> usize {
        self.held.len()
    }
}

struct Out {
    producer: Option<Producer>,
    pending: VecDeque<(Frame, Vec<u8>)>,
    /// Eager payload bytes ever sent to this peer (compared with what it reports delivered).
    eager_sent: u64,
    /// The peer's delivered count as last read; re-read only when it would stop a send.
    seen_delivered: u64,
}

struct Bsend {
    reserved: usize,
    op: Option<OpId>,
    _data: Vec<u8>,
}

/// Tunables read once per endpoint.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub eager_limit_bytes: usize,
    pub flow_limit_bytes: u64,
}

impl Limits {
    /// From `EARLYBIRD_EAGER_LIMIT` and `EARLYBIRD_FLOW_LIMIT` (bytes), with defaults.
    pub fn from_env(max_payload: usize) -> Limits {
        let get = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let eager = get("EARLYBIRD_EAGER_LIMIT").unwrap_or(16 * 1024) as usize;
        let flow = get("EARLYBIRD_FLOW_LIMIT").unwrap_or(1 << 20);
        let eager = eager.min(max_payload);
        Limits {
            eager_limit_bytes: eager,
            flow_limit_bytes: flow.max(eager as u64),
        }
    }
}

/// Everything but the input rings, so that a frame borrowed from an input ring can be handled
/// while the rest of the endpoint is mutated.
struct Core {
    me: u32,
    my_pid: u32,
    job: JobSegment,
    outs: Vec<Out>,
    pending_frames: usize,
    loopback: VecDeque<(Frame, Vec<u8>)>,
    matcher: Matcher<OpId, Held>,
    ops: Vec<OpSlot>,
    free_ops: Vec<u32>,
    /// Eager bytes delivered per input peer, not yet reported on its ring.
    credit: Vec<u64>,
    peer_pid: Vec<u32>,
    limits: Limits,
    /// Idle polls before a wait yields its core (fixed at init, see `spin_budget`).
    spin_budget: u32,
    bsend_capacity: Option<usize>,
    bsend_in_use: usize,
    bsends: Vec<Bsend>,
}

/// One endpoint's point-to-point state. Driven by one thread at a time.
pub struct Engine {
    inputs: Vec<Option<Consumer>>,
    core: Core,
    finalized: bool,
    /// Whether the job's ranks are threads of this process (a thread job) rather than
    /// processes (launched by ebrun, or a singleton): the one place this fact is kept.
    ranks_are_threads: bool,
    /// Context pairs in use by communicators of this endpoint: bit p set = pair p (contexts
    /// 2p and 2p+1) taken. Pair 0 is WORLD's.
    ctx_used: [u64; CTX_WORDS],
    /// State an upper layer keeps per endpoint: the channel layer's bind offers and pending
    /// binds (seed 000), which any bind's wait must progress.
    pub(crate) ext_binds: Option<Box<dyn std::any::Any>>,
}

/// Words of the context-pair bitmap: 64 x 64 = 4096 pairs per endpoint.
pub const CTX_WORDS: usize = 64;

/// What a send start produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// Complete already (eager standard send, PROC_NULL, buffered).
    Done,
    /// In progress: wait for this operation.
    Op(OpId),
}

impl Engine {
    /// The engine of endpoint `me` of `job`, whose ranks are threads of this process when
    /// `ranks_are_threads`.
    pub fn new(job: JobSegment, me: u32, ranks_are_threads: bool) -> Engine {
        let n = job.nranks();
        let mut inputs = Vec::with_capacity(n as usize);
        let mut outs = Vec::with_capacity(n as usize);
        let mut max_payload = usize::MAX;
        for p in 0..n {
            if p == me {
                inputs.push(None);
                outs.push(Out {
                    producer: None,
                    pending: VecDeque::new(),
                    eager_sent: 0,
                    seen_delivered: 0,
                });
            } else {
                inputs.push(Some(Consumer::new(job.ring(p, me))));
                let producer = Producer::new(job.ring(me, p));
                max_payload = max_payload.min(producer.max_payload());
                outs.push(Out {
                    producer: Some(producer),
                    pending: VecDeque::new(),
                    eager_sent: 0,
                    seen_delivered: 0,
                });
            }
        }
        if n == 1 {
            max_payload = 64 * 1024;
        }
        let my_pid = crate::sys::process::pid();
        job.set_running(me, my_pid);
        Engine {
            inputs,
            core: Core {
                me,
                my_pid,
                job,
                outs,
                pending_frames: 0,
                loopback: VecDeque::new(),
                matcher: Matcher::default(),
                ops: Vec::with_capacity(64),
                free_ops: Vec::with_capacity(64),
                credit: vec![0; n as usize],
                peer_pid: vec![0; n as usize],
                limits: Limits::from_env(max_payload),
                spin_budget: spin_budget(n),
                bsend_capacity: None,
                bsend_in_use: 0,
                bsends: Vec::new(),
            },
            finalized: false,
            ranks_are_threads,
            ctx_used: {
                let mut m = [0u64; CTX_WORDS];
                m[0] = 1;
                m
            },
            ext_binds: None,
        }
    }

    pub fn rank(&self) -> u32 {
        self.core.me
    }

    pub fn size(&self) -> u32 {
        self.core.job.nranks()
    }

    pub fn job(&self) -> &JobSegment {
        &self.core.job
    }

    /// Whether the job's ranks are threads of this process (a thread job).
    pub fn ranks_are_threads(&self) -> bool {
        self.ranks_are_threads
    }

    /// The context pairs this endpoint has free (bit set = free), for agreeing on a new
    /// communicator's pair with the other members.
    pub fn ctx_free_mask(&self) -> [u64; CTX_WORDS] {
        self.ctx_used.map(|w| !w)
    }

    /// Take context pair `pair` for a new communicator.
    pub fn ctx_claim(&mut self, pair: u32) {
        self.ctx_used[pair as usize / 64] |= 1 << (pair % 64);
    }

    /// Give context pair `pair` back (its communicator was freed).
    pub fn ctx_release(&mut self, pair: u32) {
        if pair != 0 {
            self.ctx_used[pair as usize / 64] &= !(1 << (pair % 64));
        }
    }

    /// Whether finalize has run.
    pub fn finalized(&self) -> bool {
        self.finalized
    }

    pub fn limits(&self) -> Limits {
        self.core.limits
    }

    // ---- starting operations -----------------------------------------------------------

    /// Start a send of `buf` to endpoint `peer` (or PROC_NULL). Arguments are checked by the
    /// caller. Buffered mode copies into the attached buffer first.
    #[inline(always)]
    pub fn send_start(
        &mut self,
        peer: i32,
        ctx: u32,
        tag: i32,
        buf: Lent,
        mode: SendMode,
    ) -> Result<Started> {
        if peer == PROC_NULL {
            return Ok(Started::Done);
        }
        let peer = peer as u32;
        match mode {
            SendMode::Buffered => {
                // Space held by earlier buffered sends is released by their FIN, which may be
                // sitting in a ring: look before saying it does not fit.
                let need = buf.packed_len() + BSEND_OVERHEAD;
                if self.core.bsend_in_use + need > self.core.bsend_capacity.unwrap_or(0) {
                    self.progress();
                }
                self.core.bsend(peer, ctx, tag, buf)
            }
            SendMode::Synchronous => Ok(self.core.send(peer, ctx, tag, buf, true)),
            SendMode::Standard | SendMode::Ready => Ok(self.core.send(peer, ctx, tag, buf, false)),
        }
    }

    /// Start a receive into `buf`; `src`/`tag` as in the pattern (None = wildcard).
    #[inline(always)]
    pub fn recv_start(&mut self, pat: Pattern, buf: Lent) -> OpId {
        let op = self.core.alloc(OpKind::Recv { buf });
        if let Some((env, held)) = self.core.matcher.take_unexpected(&pat) {
            self.core.deliver_held(op, env, held);
        } else {
            self.core.matcher.post(pat, op);
        }
        op
    }

    /// A receive bound to `buf` for a persistent request: its operation slot is kept from
    /// init to free, so a start only re-arms it (no allocation, no lookup of a new slot).
    /// Inactive (done) until the first [`recv_rearm`](Self::recv_rearm).
    pub fn recv_bind(&mut self, buf: Lent) -> OpId {
        let op = self.core.alloc(OpKind::Recv { buf });
        self.core.complete(op, Status::empty(), None);
        op
    }

    /// Start a bound receive again. The caller guarantees it is inactive (collected).
    #[inline(always)]
    pub fn recv_rearm(&mut self, op: OpId, pat: Pattern) {
        if let Some(s) = self.core.slot_mut(op) {
            s.done = false;
            s.error = None;
        }
        if let Some((env, held)) = self.core.matcher.take_unexpected(&pat) {
            self.core.deliver_held(op, env, held);
        } else {
            self.core.matcher.post(pat, op);
        }
    }

    /// The result of a completed bound receive, leaving the slot bound (inactive).
    #[inline(always)]
    pub fn collect(&mut self, op: OpId) -> Result<Status> {
        let Some(s) = self.core.slot_mut(op) else {
            return Err(Error::new(
                ErrorClass::Request,
                format!("operation {op:#x} is not known to this endpoint"),
            ));
        };
        let status = s.status;
        match s.error.take() {
            None => Ok(status),
            Some(e) => Err(e.with_status(status)),
        }
    }

    /// Release a bound receive's slot (its request is gone). It must be inactive.
    pub fn unbind(&mut self, op: OpId) {
        if self.is_done(op) {
            let _ = self.core.take(op);
        }
    }

    /// Like [`wait`](Self::wait) for a bound receive: the slot stays bound.
    #[inline(always)]
    pub fn wait_bound(&mut self, op: OpId, blocked: Blocked) -> Result<Status> {
        if !self.is_done(op) {
            let mut w = Waiter::new(self.core.spin_budget, blocked);
            while !self.is_done(op) {
                if !self.progress() {
                    w.idle(&self.core.job, self.core.me)?;
                }
            }
            w.finish(&self.core.job, self.core.me);
        }
        self.collect(op)
    }

    // ---- completion ----------------------------------------------------------------------

    #[inline]
    pub fn is_done(&self, op: OpId) -> bool {
        self.core.slot(op).is_none_or(|s| s.done)
    }

    /// Take the result of a completed operation and free its slot.
    pub fn take(&mut self, op: OpId) -> Result<Status> {
        self.core.take(op)
    }

    /// Drive progress until `op` completes; `blocked` says what to report to the launcher
    /// if this turns into a long wait.
    #[inline(always)]
    pub fn wait(&mut self, op: OpId, blocked: Blocked) -> Result<Status> {
        let mut w = Waiter::new(self.core.spin_budget, blocked);
        while !self.is_done(op) {
            if !self.progress() {
                w.idle(&self.core.job, self.core.me)?;
            }
        }
        w.finish(&self.core.job, self.core.me);
        self.take(op)
    }

    /// [`wait`](Self::wait) for a blocking call whose buffer is released when it returns:
    /// if the wait fails before `op` completes, the operation is abandoned first.
    pub fn wait_blocking(&mut self, op: OpId, blocked: Blocked) -> Result<Status> {
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

    /// Mark `op` as touching buffers of the request layer's scope `scope` (see
    /// [`settle_scope`](Self::settle_scope)).
    #[inline]
    pub fn set_scope(&mut self, op: OpId, scope: u32) {
        if let Some(s) = self.core.slot_mut(op) {
            s.scope = scope;
        }
    }

    /// Nobody will collect `op`'s result (MPI_Request_free): free it now if complete, else
    /// when it completes.
    pub fn detach(&mut self, op: OpId) {
        match self.core.slot_mut(op) {
            Some(s) if s.done => {
                let _ = self.core.take(op);
            }
            Some(s) => s.detached = true,
            None => {}
        }
    }

    /// A scope ends: every operation of it still in flight must finish before its buffers
    /// are released. Receives nobody matched are cancelled; sends are waited for. Results
    /// of completed operations stay for their requests to collect (a request that was
    /// forgotten with `mem::forget` leaves its slot behind, like any leak).
    pub fn settle_scope(&mut self, scope: u32) {
        let live: Vec<OpId> = self
            .core
            .ops
            .iter()
            .enumerate()
            .filter(|(_, s)| s.scope == scope && !s.done && !matches!(s.kind, OpKind::Free))
            .map(|(i, s)| ((s.gen as u64) << 32) | i as u64)
            .collect();
        for op in live {
            let recv = matches!(
                self.core.slot(op).map(|s| &s.kind),
                Some(OpKind::Recv { .. })
            );
            if recv {
                self.core.cancel(op);
            }
            let blocked = Blocked::wait();
            let mut w = Waiter::new(self.core.spin_budget, blocked);
            while !self.is_done(op) {
                if !self.progress() && w.idle(&self.core.job, self.core.me).is_err() {
                    // The job was aborted: the peer may never answer.
                    self.abandon(op);
                    break;
                }
            }
            w.finish(&self.core.job, self.core.me);
            // A detached operation that completed was freed by `complete`; one abandoned in
            // flight stays detached and is freed when (if) it completes.
            if self.core.slot(op).is_some_and(|s| s.detached && s.done) {
                let _ = self.core.take(op);
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
    pub fn abandon(&mut self, op: OpId) {
        let (peer, rndv) = match self.core.slot(op).map(|s| (&s.kind, s.done)) {
            None | Some((_, true)) | Some((OpKind::Free, _)) => return,
            Some((OpKind::Recv { .. }, _)) => {
                self.core.cancel(op);
                return;
            }
            Some((OpKind::Send { peer, rndv, .. }, _)) => (*peer, *rndv),
        };
        if rndv && peer == self.core.me {
            self.core.withdraw_self_rts(op);
            return;
        }
        // A job without a launcher (thread job) has all its ranks in this process, started
        // or not; otherwise compare pids.
        let same_process =
            self.core.job.launcher_pid() == 0 || self.core.pid_of(peer) == self.core.my_pid;
        if rndv && same_process {
            use std::io::Write;
            let line = format!(
                "earlybird: rank {}: the job was aborted while rank {peer}, a thread of this process, may still read a send buffer; ending the process\n",
                self.core.me
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            std::process::abort();
        }
        if let Some(s) = self.core.slot_mut(op) {
            s.detached = true;
        }
    }

    /// Cancel `op` (MPI_Cancel): a posted receive is withdrawn at once; a send still waiting
    /// for its match asks the receiver to withdraw it. Completion follows through wait/test.
    pub fn cancel(&mut self, op: OpId) {
        self.core.cancel(op)
    }

    // ---- probe ---------------------------------------------------------------------------

    /// MPI_Iprobe: the envelope and byte length of the first message `pat` would receive.
    pub fn iprobe(&mut self, pat: &Pattern) -> Option<(Envelope, usize)> {
        self.progress();
        self.core
            .matcher
            .peek_unexpected(pat)
            .map(|(e, h)| (*e, h.len()))
    }

    /// MPI_Improbe: take the message out of matching.
    pub fn improbe(&mut self, pat: &Pattern) -> Option<Matched> {
        self.progress();
        self.core
            .matcher
            .take_unexpected(pat)
            .map(|(env, held)| Matched { env, held })
    }

    /// MPI_Imrecv: receive a message taken by `improbe`. Completes at once.
    pub fn mrecv_start(&mut self, m: Matched, buf: Lent) -> OpId {
        let op = self.core.alloc(OpKind::Recv { buf });
        self.core.deliver_held(op, m.env, m.held);
        op
    }

    /// Blocking probe helper: wait until `f` finds something.
    pub fn wait_for<T>(
        &mut self,
        blocked: Blocked,
        mut f: impl FnMut(&mut Engine) -> Option<T>,
    ) -> Result<T> {
        let mut w = Waiter::new(self.core.spin_budget, blocked);
        loop {
            if let Some(t) = f(self) {
                w.finish(&self.core.job, self.core.me);
                return Ok(t);
            }
            if !self.progress() {
                w.idle(&self.core.job, self.core.me)?;
            }
        }
    }

    // ---- buffered mode -------------------------------------------------------------------

    /// MPI_Buffer_attach: make `capacity` bytes available to buffered sends.
    pub fn buffer_attach(&mut self, capacity: usize) -> Result<()> {
        if let Some(c) = self.core.bsend_capacity {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("a buffer of {c} bytes is already attached; detach it before attaching one of {capacity} bytes"),
            ));
        }
        self.core.bsend_capacity = Some(capacity);
        Ok(())
    }

    /// MPI_Buffer_detach: wait until every buffered send has left, then detach.
    /// Returns the capacity that was attached.
    pub fn buffer_detach(&mut self) -> Result<usize> {
        let Some(cap) = self.core.bsend_capacity else {
            return Err(Error::new(
                ErrorClass::Buffer,
                "buffer_detach with no buffer attached",
            ));
        };
        let mut w = Waiter::new(
            self.core.spin_budget,
            Blocked::in_call(BlockedIn::BufferDetach),
        );
        loop {
            self.core.reap_bsends();
            if self.core.bsends.is_empty() {
                break;
            }
            if !self.progress() {
                w.idle(&self.core.job, self.core.me)?;
            }
        }
        w.finish(&self.core.job, self.core.me);
        self.core.bsend_capacity = None;
        Ok(cap)
    }

    // ---- progress ------------------------------------------------------------------------

    /// Move every frame that can move: flush queued output, run loopback, drain input rings.
    /// Returns true if anything happened.
    #[inline]
    pub fn progress(&mut self) -> bool {
        let Engine { inputs, core, .. } = self;
        let mut did = false;
        if core.pending_frames > 0 {
            did |= core.flush_pending();
        }
        while let Some((f, p)) = core.loopback.pop_front() {
            core.handle(core.me, &f, &p);
            did = true;
        }
        for (peer, input) in inputs.iter_mut().enumerate() {
            let Some(c) = input else { continue };
            let mut k = 0;
            while let Some(f) = c.peek() {
                core.handle(peer as u32, &f, c.payload(&f));
                c.pop(&f);
                did = true;
                k += 1;
                if k == 64 {
                    break;
                }
            }
            let cr = std::mem::take(&mut core.credit[peer]);
            c.add_delivered(cr);
        }
        did
    }

    /// MPI_Finalize's part in p2p: let buffered sends and queued frames leave, then wait
    /// (serving peers meanwhile) until every rank has entered finalize.
    pub fn finalize(&mut self) -> Result<()> {
        if self.core.bsend_capacity.is_some() {
            self.buffer_detach()?;
        }
        let n = self.size();
        let me = self.core.me;
        let mut w = Waiter::new(self.core.spin_budget, Blocked::in_call(BlockedIn::Finalize));
        while self.core.pending_frames > 0 {
            if !self.progress() {
                w.idle(&self.core.job, me)?;
            }
        }
        self.core.job.enter_finalize();
        while self.core.job.finalizing() < n {
            if !self.progress() {
                w.idle(&self.core.job, me)?;
            }
        }
        // Peers may still need answers to frames they sent before entering finalize.
        loop {
            let did = self.progress();
            if !did && self.core.pending_frames == 0 {
                break;
            }
            if !did {
                w.idle(&self.core.job, me)?;
            }
        }
        w.finish(&self.core.job, me);
        self.core.job.set_finalized(me);
        self.finalized = true;
        Ok(())
    }

    /// Operations still in the table (tests: everything completed is freed).
    #[cfg(test)]
    pub fn live_ops(&self) -> usize {
        self.core
            .ops
            .iter()
            .filter(|s| !matches!(s.kind, OpKind::Free))
            .count()
    }
}

impl Core {
    // ---- operation slots -------------------------------------------------------------------

    #[inline(always)]
    fn alloc(&mut self, kind: OpKind) -> OpId {
        let idx = match self.free_ops.pop() {
            Some(i) => i,
            None => {
                self.ops.push(OpSlot {
                    gen: 0,
                    kind: OpKind::Free,
                    done: false,
                    scope: 0,
                    detached: false,
                    status: Status::empty(),
                    error: None,
                });
                (self.ops.len() - 1) as u32
            }
        };
        let s = &mut self.ops[idx as usize];
        s.kind = kind;
        s.done = false;
        s.scope = 0;
        s.detached = false;
        s.status = Status::empty();
        s.error = None;
        ((s.gen as u64) << 32) | idx as u64
    }

    #[inline]
    fn slot(&self, op: OpId) -> Option<&OpSlot> {
        let s = self.ops.get((op & 0xffff_ffff) as usize)?;
        (s.gen == (op >> 32) as u32 && !matches!(s.kind, OpKind::Free)).then_some(s)
    }

    #[inline]
    fn slot_mut(&mut self, op: OpId) -> Option<&mut OpSlot> {
        let s = self.ops.get_mut((op & 0xffff_ffff) as usize)?;
        (s.gen == (op >> 32) as u32 && !matches!(s.kind, OpKind::Free)).then_some(s)
    }

    #[inline]
    fn complete(&mut self, op: OpId, status: Status, error: Option<Error>) {
        let detached = match self.slot_mut(op) {
            Some(s) => {
                s.done = true;
                s.status = status;
                s.error = error;
                s.detached
            }
            None => false,
        };
        if detached {
            let _ = self.take(op);
        }
    }

    fn take(&mut self, op: OpId) -> Result<Status> {
        let idx = (op & 0xffff_ffff) as u32;
        let Some(s) = self.slot_mut(op) else {
            return Err(Error::new(
                ErrorClass::Request,
                format!("operation {op:#x} is not known to this endpoint"),
            ));
        };
        debug_assert!(s.done);
        let status = s.status;
        let error = s.error.take();
        s.kind = OpKind::Free;
        s.gen = s.gen.wrapping_add(1);
        self.free_ops.push(idx);
        match error {
            None => Ok(status),
            Some(e) => Err(e.with_status(status)),
        }
    }

    // ---- sending -----------------------------------------------------------------------------

    #[inline(always)]
    fn send(&mut self, peer: u32, ctx: u32, tag: i32, buf: Lent, sync: bool) -> Started {
        let len = buf.packed_len();
        let eager = len <= self.limits.eager_limit_bytes
            && (peer == self.me || self.flow_allows(peer, len));
        if eager {
            let mut f = Frame {
                kind: K_EAGER,
                ctx,
                tag,
                reserved: buf.sig().to_wire(),
                ..Frame::default()
            };
            let started = if sync {
                let op = self.alloc(OpKind::Send {
                    peer,
                    cancel_sent: false,
                    rndv: false,
                    table: None,
                });
                f.flags = F_SYNC;
                f.a = op;
                Started::Op(op)
            } else {
                Started::Done
            };
            self.outs[peer as usize].eager_sent += flow_cost(len);
            self.emit_lent(peer, &f, &buf);
            started
        } else {
            let table: Option<Box<[Segment]>> =
                (!buf.is_contiguous()).then(|| buf.segments(len).into_boxed_slice());
            let mut f = Frame {
                kind: K_RTS,
                ctx,
                tag,
                reserved: buf.sig().to_wire(),
                b: buf.addr(),
                ..Frame::default()
            };
            if let Some(t) = &table {
                f.flags = F_SEGS;
                f.b = t.as_ptr() as u64;
                f.inline[8..16].copy_from_slice(&(t.len() as u64).to_le_bytes());
            }
            f.inline[..8].copy_from_slice(&(len as u64).to_le_bytes());
            let op = self.alloc(OpKind::Send {
                peer,
                cancel_sent: false,
                rndv: true,
                table,
            });
            f.a = op;
            self.emit(peer, &f, &[]);
            Started::Op(op)
        }
    }

    /// Whether `len` more eager bytes to `peer` stay within the flow limit. Reads the peer's
    /// delivered count (a line the peer writes) only when the cached one says no.
    #[inline(always)]
    fn flow_allows(&mut self, peer: u32, len: usize) -> bool {
        let limit = self.limits.flow_limit_bytes;
        let out = &mut self.outs[peer as usize];
        if out.eager_sent - out.seen_delivered + flow_cost(len) <= limit {
            return true;
        }
        out.seen_delivered = out.producer.as_ref().map_or(0, |p| p.delivered_bytes());
        out.eager_sent - out.seen_delivered + flow_cost(len) <= limit
    }

    fn bsend(&mut self, peer: u32, ctx: u32, tag: i32, buf: Lent) -> Result<Started> {
        let Some(cap) = self.bsend_capacity else {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!(
                    "buffered send of {} bytes with no buffer attached (call buffer_attach first)",
                    buf.packed_len()
                ),
            ));
        };
        self.reap_bsends();
        let need = buf.packed_len() + BSEND_OVERHEAD;
        if self.bsend_in_use + need > cap {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!(
                    "buffered send of {} bytes (+{BSEND_OVERHEAD} overhead) does not fit: attached buffer {cap} bytes, {} in use",
                    buf.packed_len(),
                    self.bsend_in_use
                ),
            ));
        }
        let data = buf.to_packed();
        let started = self.send(peer, ctx, tag, Lent::of(&data).with_sig(buf.sig()), false);
        match started {
            Started::Done => {}
            Started::Op(op) => {
                self.bsend_in_use += need;
                self.bsends.push(Bsend {
                    reserved: need,
                    op: Some(op),
                    _data: data,
                });
            }
        }
        Ok(Started::Done)
    }

    fn reap_bsends(&mut self) {
        let mut i = 0;
        while i < self.bsends.len() {
            let done = self.bsends[i]
                .op
                .is_none_or(|op| self.slot(op).is_none_or(|s| s.done));
            if done {
                let b = self.bsends.swap_remove(i);
                if let Some(op) = b.op {
                    let _ = self.take(op);
                }
                self.bsend_in_use -= b.reserved;
            } else {
                i += 1;
            }
        }
    }

    /// Put a frame on its way to `peer`: straight into the ring when nothing is queued before
    /// it and there is room, else into the queue (with a copy of its payload).
    #[inline(always)]
    fn emit(&mut self, peer: u32, f: &Frame, payload: &[u8]) {
        if peer != self.me {
            let out = &mut self.outs[peer as usize];
            if out.pending.is_empty()
                && out
                    .producer
                    .as_mut()
                    .expect("ring to peer")
                    .try_push(f, payload)
            {
                return;
            }
        }
        self.enqueue(peer, f, payload.to_vec());
    }

    /// Queue a frame whose payload could not go into the ring now (or goes to this endpoint
    /// itself), taking the payload's bytes.
    fn enqueue(&mut self, peer: u32, f: &Frame, payload: Vec<u8>) {
        if peer == self.me {
            self.loopback.push_back((*f, payload));
            return;
        }
        self.outs[peer as usize].pending.push_back((*f, payload));
        self.pending_frames += 1;
    }

    /// [`emit`](Self::emit) of a frame whose payload is a lent buffer's message, packed
    /// straight into the ring slot when it goes there at once.
    #[inline(always)]
    fn emit_lent(&mut self, peer: u32, f: &Frame, buf: &Lent) {
        if peer != self.me {
            let out = &mut self.outs[peer as usize];
            if out.pending.is_empty()
                && out.producer.as_mut().expect("ring to peer").try_push_with(
                    f,
                    buf.packed_len(),
                    |dst| buf.pack_into(dst),
                )
            {
                return;
            }
        }
        self.enqueue(peer, f, buf.to_packed());
    }

    fn flush_pending(&mut self) -> bool {
        let mut did = false;
        for out in self.outs.iter_mut() {
            while let Some((f, p)) = out.pending.front() {
                if !out.producer.as_mut().expect("ring to peer").try_push(f, p) {
                    break;
                }
                out.pending.pop_front();
                self.pending_frames -= 1;
                did = true;
            }
        }
        did
    }

    /// Take a rendezvous send to this endpoint itself back out of the loopback queue or the
    /// unexpected queue (where its RTS waits), completing it as cancelled. If a receive has
    /// already matched it, the copy is done and it is complete already.
    fn withdraw_self_rts(&mut self, op: OpId) {
        let before = self.loopback.len();
        self.loopback
            .retain(|(f, _)| !(f.kind == K_RTS && f.a == op));
        let me = self.me;
        let removed = self.loopback.len() < before
            || self
                .matcher
                .remove_unexpected(|e, h| {
                    e.src == me && matches!(h, Held::Rndv { sender_op, .. } if *sender_op == op)
                })
                .is_some();
        if removed {
            let st = Status {
                cancelled: true,
                ..Status::empty()
            };
            self.complete(op, st, None);
        }
    }

    fn cancel(&mut self, op: OpId) {
        let Some(s) = self.slot_mut(op) else { return };
        if s.done {
            return;
        }
        match s.kind {
            OpKind::Recv { .. } => {
                if self.matcher.remove_posted(|&id| id == op).is_some() {
                    let st = Status {
                        cancelled: true,
                        ..Status::empty()
                    };
                    self.complete(op, st, None);
                }
            }
            OpKind::Send {
                peer,
                ref mut cancel_sent,
                ..
            } => {
                if !*cancel_sent {
                    *cancel_sent = true;
                    let f = Frame {
                        kind: K_CANCEL,
                        a: op,
                        ..Frame::default()
                    };
                    self.emit(peer, &f, &[]);
                }
            }
            OpKind::Free => {}
        }
    }

    // ---- receiving ---------------------------------------------------------------------------

    /// Handle one frame from `src`.
    #[inline(always)]
    fn handle(&mut self, src: u32, f: &Frame, payload: &[u8]) {
        match f.kind {
            K_EAGER => {
                let env = Envelope {
                    ctx: f.ctx,
                    src,
                    tag: f.tag,
                };
                let sync_op = (f.flags & F_SYNC != 0).then_some(f.a);
                let sig = Sig::from_wire(f.reserved);
                if let Some(op) = self.matcher.take_posted(&env) {
                    self.deliver_eager(op, env, payload, sync_op, sig);
                } else {
                    let held = if payload.len() <= INLINE_BYTES {
                        let mut data = [0u8; INLINE_BYTES];
                        data[..payload.len()].copy_from_slice(payload);
                        Held::Inline {
                            data,
                            len: payload.len() as u8,
                            sync_op,
                            sig,
                        }
                    } else {
                        Held::Eager {
                            data: payload.to_vec(),
                            sync_op,
                            sig,
                        }
                    };
                    self.matcher.push_unexpected(env, held);
                }
            }
            K_RTS => {
                let env = Envelope {
                    ctx: f.ctx,
                    src,
                    tag: f.tag,
                };
                let len = u64::from_le_bytes(f.inline[..8].try_into().expect("8 bytes")) as usize;
                let remote = if f.flags & F_SEGS != 0 {
                    Remote::Segments {
                        table: f.b,
                        entries: u64::from_le_bytes(f.inline[8..16].try_into().expect("8 bytes"))
                            as usize,
                    }
                } else {
                    Remote::Contiguous(f.b)
                };
                let held = Held::Rndv {
                    sender_op: f.a,
                    remote,
                    len,
                    sig: Sig::from_wire(f.reserved),
                };
                if let Some(op) = self.matcher.take_posted(&env) {
                    self.deliver_held(op, env, held);
                } else {
                    self.matcher.push_unexpected(env, held);
                }
            }
            K_ACK | K_FIN => {
                let st = Status::empty();
                self.complete(f.a, st, None);
            }
            K_CANCEL => {
                let removed = self.matcher.remove_unexpected(|e, h| {
                    e.src == src
                        && match h {
                            Held::Eager { sync_op, .. } | Held::Inline { sync_op, .. } => {
                                *sync_op == Some(f.a)
                            }
                            Held::Rndv { sender_op, .. } => *sender_op == f.a,
                        }
                });
                if let Some((_, h @ (Held::Eager { .. } | Held::Inline { .. }))) = &removed {
                    self.credit[src as usize] += flow_cost(h.len());
                }
                let mut r = Frame {
                    kind: K_CANCEL_REPLY,
                    a: f.a,
                    ..Frame::default()
                };
                r.inline[0] = removed.is_some() as u8;
                self.emit(src, &r, &[]);
            }
            K_CANCEL_REPLY => {
                if f.inline[0] == 1 {
                    let st = Status {
                        cancelled: true,
                        ..Status::empty()
                    };
                    self.complete(f.a, st, None);
                }
            }
            k => {
                // A frame kind we do not know means a corrupted segment or mixed versions.
                let e = Error::new(
                    ErrorClass::Intern,
                    format!("unknown frame kind {k} from endpoint {src}"),
                );
                eprintln!("earlybird: {e}");
                self.job.abort(self.me as i32, ErrorClass::Intern.code());
            }
        }
    }

    fn recv_buf(&self, op: OpId) -> Lent {
        match self.slot(op).map(|s| &s.kind) {
            Some(OpKind::Recv { buf }) => buf.clone(),
            _ => Lent::EMPTY,
        }
    }

    /// Copy an eager payload into the receive `op`, answer a synchronous sender, complete.
    #[inline]
    fn deliver_eager(
        &mut self,
        op: OpId,
        env: Envelope,
        payload: &[u8],
        sync_op: Option<u64>,
        sig: Sig,
    ) {
        if env.src != self.me {
            self.credit[env.src as usize] += flow_cost(payload.len());
        }
        if let Some(sop) = sync_op {
            let f = Frame {
                kind: K_ACK,
                a: sop,
                ..Frame::default()
            };
            self.emit(env.src, &f, &[]);
        }
        // One lookup of the slot: copy into its buffer and complete it in place.
        let Some(s) = self.slot_mut(op) else { return };
        let OpKind::Recv { ref buf } = s.kind else {
            return;
        };
        let len = payload.len();
        let cap = buf.packed_len();
        buf.unpack_from(&payload[..len.min(cap)]);
        if len <= cap && (sig == buf.sig() || buf.sig().is_mixed()) {
            s.done = true;
            s.status = Status {
                source: env.src as i32,
                tag: env.tag,
                bytes: len,
                cancelled: false,
                error: ErrorClass::Success,
            };
            s.error = None;
            if s.detached {
                let _ = self.take(op);
            }
        } else {
            let want = buf.sig();
            self.finish_recv(op, env, len, cap, sig, want);
        }
    }

    /// Deliver a message that was held (unexpected or matched-probed) into receive `op`.
    fn deliver_held(&mut self, op: OpId, env: Envelope, held: Held) {
        match held {
            Held::Inline {
                data,
                len,
                sync_op,
                sig,
            } => self.deliver_eager(op, env, &data[..len as usize], sync_op, sig),
            Held::Eager { data, sync_op, sig } => self.deliver_eager(op, env, &data, sync_op, sig),
            Held::Rndv {
                sender_op,
                remote,
                len,
                sig,
            } => {
                let buf = self.recv_buf(op);
                let cap = buf.packed_len();
                let n = len.min(cap);
                let pid = self.pid_of(env.src);
                let same = pid == self.my_pid;
                let res = buf.pull(same, pid, remote, n);
                let f = Frame {
                    kind: K_FIN,
                    a: sender_op,
                    ..Frame::default()
                };
                self.emit(env.src, &f, &[]);
                match res {
                    Ok(()) => self.finish_recv(op, env, len, cap, sig, buf.sig()),
                    Err(e) => {
                        let st = Status {
                            source: env.src as i32,
                            tag: env.tag,
                            bytes: 0,
                            cancelled: false,
                            error: ErrorClass::Other,
                        };
                        let err = Error::new(
                            ErrorClass::Other,
                            format!("single-copy read of {n} bytes from rank {} (pid {pid}) failed: {e}", env.src),
                        );
                        self.complete(op, st, Some(err));
                    }
                }
            }
        }
    }

    /// Complete receive `op` of a `len`-byte message into a buffer taking `cap` bytes:
    /// truncation, then a type mismatch (`sent` and `want` are the signature codes of the
    /// message and of the receive buffer, see [`Sig::mismatch`]), are errors.
    fn finish_recv(
        &mut self,
        op: OpId,
        env: Envelope,
        len: usize,
        cap: usize,
        sent: Sig,
        want: Sig,
    ) {
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
        self.complete(op, st, err);
    }

    fn pid_of(&mut self, peer: u32) -> u32 {
        let p = &mut self.peer_pid[peer as usize];
        if *p == 0 {
            *p = self.job.pid(peer);
        }
        *p
    }
}

/// What one eager message counts against the flow limit: its payload, and at least a frame's
/// worth, so that a flood of empty messages is bounded too (each costs the receiver an entry
/// in its unexpected queue).
#[inline]
fn flow_cost(len: usize) -> u64 {
    len.max(64) as u64
}

/// What a wait reports to the launcher once it becomes long: the kind of call, and the
/// peer, tag and context it waits on when there is one.
#[derive(Clone, Copy, Debug)]
pub struct Blocked {
    what: BlockedIn,
    /// The peer (endpoint or rank, ANY_SOURCE for a wildcard receive); `None` when the
    /// wait is not on one peer (a wait on several requests, finalize, ...).
    peer: Option<i32>,
    tag: i32,
    ctx: u32,
}

impl Blocked {
    /// A wait in a send to `peer`.
    pub const fn send(peer: i32, tag: i32, ctx: u32) -> Blocked {
        Blocked::on(BlockedIn::Send, peer, tag, ctx)
    }

    /// A wait in a receive from `peer` (ANY_SOURCE and ANY_TAG allowed).
    pub const fn recv(peer: i32, tag: i32, ctx: u32) -> Blocked {
        Blocked::on(BlockedIn::Recv, peer, tag, ctx)
    }

    /// A wait in a receive matching `pat` (endpoints; wildcards as ANY_SOURCE / ANY_TAG).
    pub fn recv_matching(pat: &Pattern) -> Blocked {
        Blocked::recv(
            pat.src.map_or(crate::ANY_SOURCE, |s| s as i32),
            pat.tag.unwrap_or(crate::ANY_TAG),
            pat.ctx,
        )
    }

    /// A wait in `what` on `peer`, `tag`, `ctx`.
    pub const fn on(what: BlockedIn, peer: i32, tag: i32, ctx: u32) -> Blocked {
        Blocked {
            what,
            peer: Some(peer),
            tag,
            ctx,
        }
    }

    /// A wait in `what` on no particular peer (finalize, buffer detach, a wait on several
    /// requests).
    pub const fn in_call(what: BlockedIn) -> Blocked {
        Blocked {
            what,
            peer: None,
            tag: 0,
            ctx: 0,
        }
    }

    /// A wait on a collective operation's messages on `ctx` with `tag`, from whichever
    /// peer comes next.
    pub const fn collective(tag: i32, ctx: u32) -> Blocked {
        Blocked {
            what: BlockedIn::Wait,
            peer: None,
            tag,
            ctx,
        }
    }

    /// A wait on requests with nothing more to say.
    pub const fn wait() -> Blocked {
        Blocked::in_call(BlockedIn::Wait)
    }

    /// The same peer, tag and context, reported as a wait on a request.
    pub const fn as_wait(self) -> Blocked {
        Blocked {
            what: BlockedIn::Wait,
            ..self
        }
    }

    /// The same wait, on `peer`.
    pub const fn with_peer(self, peer: i32) -> Blocked {
        Blocked {
            peer: Some(peer),
            ..self
        }
    }

    /// What kind of call waits.
    pub const fn what(&self) -> BlockedIn {
        self.what
    }
}

/// Backoff for waits: spin first (latency), then yield the core (8 ranks on 2 cores must
/// progress), checking the job's abort flag now and then.
struct Waiter {
    spins: u32,
    spin_budget: u32,
    blocked: Blocked,
    published: bool,
    /// When the wait left its spin phase (then it is "blocked" for the launcher's report).
    slow_since: Option<std::time::Instant>,
    last_launcher_check: Option<std::time::Instant>,
}

/// Idle polls before a wait starts yielding its core: long when every rank has a core of its
/// own (a yield costs a syscall and the partner answers within microseconds), short when
/// ranks outnumber cores (the partner may need this core to answer at all). Decided when the
/// endpoint is made, from the CPUs the process may then use: a program that pins itself to
/// one core afterwards (benchmarks do) must not turn its waits into yields.
fn spin_budget(nranks: u32) -> u32 {
    if nranks as usize <= crate::sys::process::cpus() {
        50_000
    } else {
        50
    }
}

/// A wait this long is reported as "blocked in ..." to the launcher.
const PUBLISH_AFTER: std::time::Duration = std::time::Duration::from_millis(10);
/// How often a long wait checks that the launcher is still alive.
const LAUNCHER_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

impl Waiter {
    fn new(spin_budget: u32, blocked: Blocked) -> Waiter {
        Waiter {
            spins: 0,
            spin_budget,
            blocked,
            published: false,
            slow_since: None,
            last_launcher_check: None,
        }
    }

    #[inline]
    fn idle(&mut self, job: &JobSegment, me: u32) -> Result<()> {
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
        std::thread::yield_now();
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
                    format!("the launcher (ebrun, pid {launcher}) is gone"),
                ));
            }
        }
        Ok(())
    }

    #[inline]
    fn finish(&mut self, job: &JobSegment, me: u32) {
        if self.published {
            job.set_blocked(me, BlockedIn::Nothing, None, 0, 0);
            self.published = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::anonymous_job;

    fn pair() -> (Engine, Engine) {
        let job = anonymous_job(2).unwrap();
        (Engine::new(job.clone(), 0, true), Engine::new(job, 1, true))
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
    fn eager_and_rendezvous_deliver_in_order_in_memory() {
        let (mut a, mut b) = pair();
        let small = [7u8; 8];
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        assert_eq!(
            a.send_start(1, 0, 5, Lent::of(&small), SendMode::Standard)
                .unwrap(),
            Started::Done
        );
        let Started::Op(big_op) = a
            .send_start(1, 0, 5, Lent::of(&big), SendMode::Standard)
            .unwrap()
        else {
            panic!("large send must go rendezvous")
        };
        let mut r1 = [0u8; 8];
        let mut r2 = vec![0u8; 100_000];
        let o1 = b.recv_start(pat(Some(0), Some(5)), Lent::of_mut(&mut r1));
        let o2 = b.recv_start(pat(None, None), Lent::of_mut(&mut r2));
        drive(&mut a, &mut b);
        assert!(b.is_done(o1) && b.is_done(o2) && a.is_done(big_op));
        assert_eq!(b.take(o1).unwrap().bytes(), 8);
        let st = b.take(o2).unwrap();
        assert_eq!((st.source(), st.tag(), st.bytes()), (0, 5, 100_000));
        a.take(big_op).unwrap();
        assert_eq!(r1, small);
        assert_eq!(r2, big);
        assert_eq!(a.live_ops() + b.live_ops(), 0);
    }

    #[test]
    fn truncation_reports_status_and_class() {
        let (mut a, mut b) = pair();
        a.send_start(1, 0, 1, Lent::of(&[1u8; 16]), SendMode::Standard)
            .unwrap();
        let mut r = [0u8; 4];
        let o = b.recv_start(pat(Some(0), Some(1)), Lent::of_mut(&mut r));
        drive(&mut a, &mut b);
        let e = b.take(o).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Truncate);
        assert_eq!(e.status().unwrap().bytes(), 4);
        assert_eq!(r, [1u8; 4]);
    }

    #[test]
    fn flood_of_unexpected_messages_is_bounded_by_flow_limit() {
        let (mut a, mut b) = pair();
        let limit = a.limits().flow_limit_bytes as usize;
        let msg = [3u8; 1024];
        let mut waiting = 0;
        for _ in 0..(limit / 1024) * 3 {
            if let Started::Op(_) = a
                .send_start(1, 0, 0, Lent::of(&msg), SendMode::Standard)
                .unwrap()
            {
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
            .filter(|m| matches!(m.held, Held::Eager { .. } | Held::Inline { .. }))
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
        let big = vec![1u8; 1 << 20];
        let Started::Op(op) = a
            .send_start(1, 0, 9, Lent::of(&big), SendMode::Standard)
            .unwrap()
        else {
            panic!()
        };
        drive(&mut a, &mut b);
        a.cancel(op);
        drive(&mut a, &mut b);
        assert!(a.take(op).unwrap().is_cancelled());
        assert!(b.iprobe(&pat(None, None)).is_none());
    }
}
