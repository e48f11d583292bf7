//! Schedules: a collective algorithm written once as a sequence of sends, receives, waits
//! and local steps, run three ways.
//!
//! An algorithm (one file under `algo/`) emits its steps into a [`Sink`]:
//!
//! * [`Now`] carries them out as they come (blocking collectives): sends and receives are
//!   posted at once, a wait waits, a local step runs. Nothing is recorded, so a small
//!   blocking collective allocates nothing beyond what the engine does for a message.
//! * [`Record`] writes them down as a [`Schedule`] (nonblocking and persistent collectives),
//!   which the request layer advances from test and wait. A persistent collective keeps its
//!   schedule, with its peers and scratch, from init to free; a start replays it from the
//!   first step without allocating.
//!
//! # Blocks
//!
//! Steps name their buffers by [`Block`]: a part of the call's send buffer, receive buffer or
//! one of its scratch buffers, with the layout and signature of its message. A block becomes
//! a [`Loan`] only when its step runs, resolved against the buffers the run was given
//! ([`Bound`]). So a recorded schedule holds no copy of the program's buffers between runs (a
//! persistent collective can hand them out, `Request::buffer_mut`), and a blocking call that
//! replays the steps of an earlier one gives them its own buffers.
//!
//! # Order
//!
//! Steps between two waits are in flight together; a local step (a reduction or a copy) runs
//! only after the wait before it, when the messages it reads have arrived. Every message of a
//! collective call carries the same internal tag on the communicator's internal context;
//! between two ranks, messages of one call are received in the order they were sent
//! (non-overtaking), which is how an algorithm pairs its sends with its receives.
//!
//! When a step fails (a message of the wrong length: counts or types that differ between
//! ranks), the schedule carries on, so that no peer waits for a message that never comes,
//! and reports the first error at the end.
#![forbid(unsafe_code)]

use super::op::Reducer;
use super::shm::ShmRun;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::{Engine, SendMode, Started};
use crate::p2p::matching::Pattern;
use crate::p2p::ops::OpId;
use crate::p2p::ranks::RankMap;
use crate::p2p::wait::Blocked;
use crate::request::completion::Completion;
use crate::request::steps::{Run, SharedRun, Steps};
use crate::status::Status;
use crate::sys::layout::Layout;
use crate::sys::lend::{Loan, Unusable};
use crate::sys::sig::Sig;
use std::rc::Rc;

/// Which of a collective call's buffers a block is part of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Buf {
    Send,
    Recv,
    Scratch(u32),
    /// A rank's payload in the run's slot of the communicator's collective region
    /// (`shm.rs`).
    Shm(i32),
    /// No bytes (a message of length zero).
    Nothing,
}

/// A part of one of a collective call's buffers, as a message: bytes `off .. off + len` of
/// the buffer, all of them or through a layout, made of the basic type `sig`.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    buf: Buf,
    off: usize,
    len: usize,
    layout: Option<Rc<Layout>>,
    sig: Sig,
}

impl Block {
    /// Whether this block is all of `base` as it is (its bytes, no layout over them).
    #[inline(always)]
    pub(crate) fn is_all_of(&self, base: &Loan) -> bool {
        self.off == 0 && self.layout.is_none() && self.len == base.len()
    }

    /// This block of `base`, the buffer it is in.
    #[inline(always)]
    pub(crate) fn within(&self, base: &Loan) -> Loan {
        base.sub(self.off, self.len, self.layout.clone())
            .expect("a block inside its buffer")
            .with_sig(self.sig)
    }

    /// No bytes.
    pub(crate) const EMPTY: Block = Block {
        buf: Buf::Nothing,
        off: 0,
        len: 0,
        layout: None,
        sig: Sig::MIXED,
    };

    /// The whole of buffer `buf`, of `len` bytes.
    pub(crate) fn whole(buf: Buf, len: usize) -> Block {
        Block {
            buf,
            len,
            ..Block::EMPTY
        }
    }

    /// Bytes `off .. off + len` of this contiguous block, or with `layout` a layout placed
    /// over them. Panics if the range or the layout leaves the block: the collective layer
    /// cuts blocks from counts it has checked.
    pub(crate) fn sub(&self, off: usize, len: usize, layout: Option<Layout>) -> Block {
        assert!(
            self.layout.is_none() && off.checked_add(len).is_some_and(|e| e <= self.len),
            "block: bytes {off}+{len} of a block of {} bytes",
            self.len
        );
        if let Some(l) = &layout {
            assert!(l.end() <= len, "block: a layout past its bytes");
        }
        Block {
            buf: self.buf,
            off: self.off + off,
            len,
            layout: layout.map(Rc::new),
            sig: self.sig,
        }
    }

    /// The same block, its message made of the basic type `sig`.
    pub(crate) fn with_sig(mut self, sig: Sig) -> Block {
        self.sig = sig;
        self
    }

    /// Bytes of the buffer part the block spans (its message's extent in memory).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the message.
    pub(crate) fn packed_len(&self) -> usize {
        match &self.layout {
            None => self.len,
            Some(l) => l.packed_len(),
        }
    }

    pub(crate) fn sig(&self) -> Sig {
        self.sig
    }

    /// Whether the block has no bytes (a buffer not significant on this rank).
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A run's buffers, lent: what its blocks are parts of.
#[derive(Debug, Default)]
pub(crate) struct Bound {
    pub(crate) send: Option<Loan>,
    pub(crate) recv: Option<Loan>,
    pub(crate) scratch: Vec<Loan>,
    /// The run of the collective region the steps' shared-memory blocks are in.
    pub(crate) shm: Option<ShmRun>,
}

impl Bound {
    /// The loan of block `b`.
    #[inline(always)]
    fn resolve(&self, b: &Block) -> Loan {
        let shm;
        let base = match b.buf {
            Buf::Nothing => return Loan::EMPTY,
            Buf::Send => self.send.as_ref(),
            Buf::Recv => self.recv.as_ref(),
            Buf::Scratch(i) => self.scratch.get(i as usize),
            Buf::Shm(r) => {
                shm = self.shm.as_ref().map(|run| run.payload(r));
                shm.as_ref()
            }
        };
        b.within(base.expect("a block's buffer is lent to its run"))
    }

    /// A new scratch buffer of `bytes` zeroed bytes, as a block.
    fn scratch(&mut self, bytes: usize) -> Block {
        self.scratch.push(Loan::zeroed(bytes));
        Block::whole(Buf::Scratch(self.scratch.len() as u32 - 1), bytes)
    }
}

/// Where an algorithm's steps go.
pub(crate) trait Sink {
    /// Send block `b` to communicator rank `to`.
    fn send(&mut self, to: i32, b: Block);
    /// Receive from communicator rank `from` into `b`: the message must fill it exactly.
    fn recv(&mut self, from: i32, b: Block);
    /// Everything posted so far completes before any later step.
    fn wait(&mut self);
    /// `dst = src op dst` with the collective's operation (contiguous runs of elements).
    fn reduce(&mut self, src: Block, dst: Block);
    /// Copy the message in `src` into `dst`.
    fn copy(&mut self, src: Block, dst: Block);
    /// A zeroed scratch buffer of `bytes` bytes, aligned for any element type, owned by the
    /// collective for as long as it runs (for a persistent one, until it is freed).
    fn scratch(&mut self, bytes: usize) -> Block;
    /// A step in the communicator's collective region (an algorithm that runs in shared
    /// memory, `algo/*_shm.rs`; the call has a run of the region).
    fn shm(&mut self, step: ShmStep);
}

/// A step of a collective that runs in shared memory (see `shm.rs` and
/// `fabric::coll_region` for the protocol).
#[derive(Clone, Debug)]
pub(crate) enum ShmStep {
    /// Once this rank's slot of the run is free, copy the message in the block into it (a
    /// block of no bytes: nothing) and publish it.
    Put(Block),
    /// Wait until the rank (`None`: every other rank) has published its part.
    Await(Option<i32>),
    /// This rank has finished reading the run's slots.
    Done,
}

impl ShmStep {
    /// Whether the step may run now: its slot is free, or the parts it waits for are there.
    #[inline(always)]
    fn ready(&self, run: &ShmRun) -> bool {
        match self {
            ShmStep::Put(_) => run.slot_free(),
            ShmStep::Await(from) => run.arrived(*from),
            ShmStep::Done => true,
        }
    }
}

/// A block of `len` bytes of `rank`'s payload in the run's slot.
pub(crate) fn shm_block(rank: i32, len: usize) -> Block {
    Block::whole(Buf::Shm(rank), len)
}

/// What every step of one collective call shares.
#[derive(Clone, Debug)]
pub(crate) struct Wire {
    /// The communicator's internal context.
    pub(crate) ctx: u32,
    /// The call's tag (see `coll_tag`).
    pub(crate) tag: i32,
    /// Communicator rank -> endpoint (`None`: the identity).
    pub(crate) map: Option<Rc<RankMap>>,
    /// The operation of a reduction.
    pub(crate) reducer: Option<Reducer>,
    /// The call's MPI name, for messages.
    pub(crate) what: &'static str,
    /// The tag of error notices for this call (see [`notify_error`]).
    pub(crate) notice_tag: i32,
    /// This rank and the communicator's size (error notices go to everyone).
    pub(crate) me: i32,
    pub(crate) size: i32,
    /// The call's run of the communicator's collective region, once it runs there.
    pub(crate) shm: Option<ShmRun>,
    /// The call's number on the region's lane, until its algorithm is chosen (see
    /// `api::settle`).
    pub(crate) ticket: Option<(Rc<super::shm::CollShm>, u64)>,
}

impl Wire {
    #[inline(always)]
    fn ep(&self, rank: i32) -> i32 {
        match &self.map {
            Some(m) => m.endpoint(rank) as i32,
            None => rank,
        }
    }

    #[inline(always)]
    fn pattern(&self, from: i32) -> Pattern {
        Pattern {
            ctx: self.ctx,
            src: Some(self.ep(from) as u32),
            tag: Some(self.tag),
        }
    }

    pub(super) fn blocked(&self) -> Blocked {
        Blocked::collective(self.tag, self.ctx)
    }

    /// The result of a completed operation: a receive must have filled its buffer exactly.
    fn check(&self, r: Result<Status>, expect: usize) -> Result<()> {
        let st = r?;
        if expect != usize::MAX && st.bytes != expect {
            return Err(Error::new(
                ErrorClass::Truncate,
                format!(
                    "{}: a message of {} bytes arrived where {expect} were expected (counts or datatypes differ between ranks)",
                    self.what, st.bytes
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn reduce(&self, src: &Loan, dst: &Loan) -> std::result::Result<(), Unusable> {
        self.reducer
            .as_ref()
            .expect("a reduction step in a collective with an operation")
            .reduce(src, dst)
    }
}

/// A local step that found its buffer no longer lent (the call's scope or region ended).
pub(super) fn unusable(what: &str, u: Unusable) -> Error {
    Error::new(ErrorClass::Intern, format!("{what}: {u}"))
}

/// Tell every other rank of the call that this one returned `err` instead of taking part,
/// so that none of them waits for it forever: a small message with the error's code and
/// text on the call's notice tag, which their waits look for (see [`notice`]).
pub(crate) fn notify_error(e: &mut Engine, wire: &Wire, err: &Error) {
    let mut msg = err.code().to_le_bytes().to_vec();
    let text = err.to_string();
    let mut cut = text.len().min(NOTICE_BYTES - 4);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    msg.extend_from_slice(&text.as_bytes()[..cut]);
    let msg = Loan::copied(&msg);
    for r in (0..wire.size).filter(|&r| r != wire.me) {
        if let Ok(Started::Op(op)) = e.send_start(
            wire.ep(r),
            wire.ctx,
            wire.notice_tag,
            &msg,
            SendMode::Standard,
        ) {
            let _ = e.wait_blocking(op, wire.blocked());
        }
    }
}

/// Longest error notice.
const NOTICE_BYTES: usize = 512;

/// An error notice for this call from another rank, if one has arrived: taken, and turned
/// into the error this rank returns.
pub(super) fn notice(e: &mut Engine, wire: &Wire) -> Option<Error> {
    let pat = Pattern {
        ctx: wire.ctx,
        src: None,
        tag: Some(wire.notice_tag),
    };
    let (env, _) = e.iprobe(&pat)?;
    let buf = Loan::zeroed(NOTICE_BYTES);
    let op = e.recv_start(
        Pattern {
            src: Some(env.src),
            ..pat
        },
        buf.clone(),
    );
    let st = e.wait_blocking(op, wire.blocked()).ok()?;
    let bytes = buf.to_packed().ok()?;
    let n = st.bytes.min(NOTICE_BYTES);
    let code = i32::from_le_bytes(bytes[..4].try_into().ok()?);
    let class = crate::error::error_class(code).unwrap_or(ErrorClass::Other);
    let rank = match &wire.map {
        Some(m) => m.rank_of(env.src as i32),
        None => env.src as i32,
    };
    Some(Error::new(
        class,
        format!(
            "{}: rank {rank} returned an error instead of taking part ({})",
            wire.what,
            String::from_utf8_lossy(&bytes[4..n])
        ),
    ))
}

/// How many polls of a wait pass between two looks for an error notice.
pub(super) const NOTICE_EVERY: u32 = 4096;

/// Operations in flight: (operation, bytes a receive must bring or `usize::MAX`). Eight fit
/// inline, so the blocking collectives of small communicators never allocate for them.
#[derive(Debug, Default)]
struct InFlight {
    inline: [Option<(OpId, usize)>; 8],
    n: usize,
    more: Vec<(OpId, usize)>,
}

impl InFlight {
    #[inline(always)]
    fn push(&mut self, op: OpId, expect: usize) {
        if self.n < self.inline.len() {
            self.inline[self.n] = Some((op, expect));
            self.n += 1;
        } else {
            self.more.push((op, expect));
        }
    }

    fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn iter(&self) -> impl Iterator<Item = (OpId, usize)> + '_ {
        self.inline[..self.n]
            .iter()
            .flatten()
            .copied()
            .chain(self.more.iter().copied())
    }

    fn all_done(&self, e: &Engine) -> bool {
        self.iter().all(|(op, _)| e.is_done(op))
    }

    fn clear(&mut self) {
        self.n = 0;
        self.more.clear();
    }

    /// Collect every (completed) operation; the first error goes to `err` if empty.
    fn collect(&mut self, e: &mut Engine, wire: &Wire, err: &mut Option<Error>) {
        for (op, expect) in self.iter() {
            let r = wire.check(e.take(op), expect);
            if let (Err(x), None) = (r, &err) {
                *err = Some(x);
            }
        }
        self.clear();
    }

    /// The job is ending: withdraw what can be withdrawn.
    fn abandon(&mut self, e: &mut Engine) {
        for (op, _) in self.iter() {
            if !e.is_done(op) {
                e.abandon(op);
            }
            if e.is_done(op) {
                let _ = e.take(op);
            }
        }
        self.clear();
    }
}

#[inline(always)]
fn post_send(
    e: &mut Engine,
    wire: &Wire,
    to: i32,
    buf: &Loan,
    fl: &mut InFlight,
    err: &mut Option<Error>,
) -> Option<OpId> {
    match e.send_start(wire.ep(to), wire.ctx, wire.tag, buf, SendMode::Standard) {
        Ok(Started::Done) => None,
        Ok(Started::Op(op)) => {
            fl.push(op, usize::MAX);
            Some(op)
        }
        Err(x) => {
            err.get_or_insert(x);
            None
        }
    }
}

#[inline(always)]
fn post_recv(e: &mut Engine, wire: &Wire, from: i32, buf: Loan, fl: &mut InFlight) -> OpId {
    let expect = buf.packed_len();
    let op = e.recv_start(wire.pattern(from), buf);
    fl.push(op, expect);
    op
}

/// Run a local step; a failure becomes the call's error.
fn local(r: std::result::Result<(), Unusable>, wire: &Wire, err: &mut Option<Error>) {
    if let Err(u) = r {
        err.get_or_insert(unusable(wire.what, u));
    }
}

/// Runs an algorithm's steps as they come: a blocking collective.
pub(crate) struct Now<'a> {
    e: &'a mut Engine,
    wire: &'a Wire,
    bound: Bound,
    fl: InFlight,
    err: Option<Error>,
    /// The job is ending: stop doing anything.
    dead: bool,
}

impl<'a> Now<'a> {
    /// A blocking run on `e` of the call `wire` with the buffers `bound`.
    pub(crate) fn new(e: &'a mut Engine, wire: &'a Wire, mut bound: Bound) -> Now<'a> {
        bound.shm.clone_from(&wire.shm);
        Now {
            e,
            wire,
            bound,
            fl: InFlight::default(),
            err: None,
            dead: false,
        }
    }

    /// Wait for what is still in flight and return the call's result.
    pub(crate) fn finish(mut self) -> Result<()> {
        self.wait();
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Sink for Now<'_> {
    #[inline(always)]
    fn send(&mut self, to: i32, b: Block) {
        if !self.dead {
            let buf = self.bound.resolve(&b);
            post_send(self.e, self.wire, to, &buf, &mut self.fl, &mut self.err);
        }
    }

    #[inline(always)]
    fn recv(&mut self, from: i32, b: Block) {
        if !self.dead {
            let buf = self.bound.resolve(&b);
            post_recv(self.e, self.wire, from, buf, &mut self.fl);
        }
    }

    fn wait(&mut self) {
        if self.fl.is_empty() {
            return;
        }
        let fl = &self.fl;
        match wait_until(self.e, self.wire, |e| fl.all_done(e)) {
            Ok(()) => self.fl.collect(self.e, self.wire, &mut self.err),
            Err(x) => {
                self.fl.abandon(self.e);
                self.dead = true;
                self.err.get_or_insert(x);
            }
        }
    }

    fn reduce(&mut self, src: Block, dst: Block) {
        if !self.dead {
            let (s, d) = (self.bound.resolve(&src), self.bound.resolve(&dst));
            local(self.wire.reduce(&s, &d), self.wire, &mut self.err);
        }
    }

    fn copy(&mut self, src: Block, dst: Block) {
        if !self.dead {
            let (s, d) = (self.bound.resolve(&src), self.bound.resolve(&dst));
            local(s.copy_to(&d), self.wire, &mut self.err);
        }
    }

    fn scratch(&mut self, bytes: usize) -> Block {
        self.bound.scratch(bytes)
    }

    fn shm(&mut self, step: ShmStep) {
        if self.dead {
            return;
        }
        let run = self
            .bound
            .shm
            .clone()
            .expect("a shared-memory step in a call with a run");
        if let Err(x) = wait_until(self.e, self.wire, |_| step.ready(&run)) {
            run.close();
            self.dead = true;
            self.err.get_or_insert(x);
            return;
        }
        shm_act(&step, &run, &self.bound, self.wire, &mut self.err);
    }
}

/// Wait, driving progress, until `ready` holds (a shared-memory step's condition, the
/// call's operations done), or another rank's error notice for the call arrives (its
/// error), or the wait fails.
#[inline]
pub(super) fn wait_until(
    e: &mut Engine,
    wire: &Wire,
    mut ready: impl FnMut(&mut Engine) -> bool,
) -> Result<()> {
    let mut polls = 0u32;
    let r = e.wait_for(wire.blocked(), |e| {
        if ready(e) {
            return Some(None);
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(NOTICE_EVERY) {
            return notice(e, wire).map(Some);
        }
        None
    });
    match r {
        Ok(None) => Ok(()),
        Ok(Some(x)) | Err(x) => Err(x),
    }
}

/// Carry out a shared-memory step whose wait is over.
#[inline(always)]
fn shm_act(step: &ShmStep, run: &ShmRun, bound: &Bound, wire: &Wire, err: &mut Option<Error>) {
    match step {
        ShmStep::Put(b) => {
            local(run.put(&bound.resolve(b)), wire, err);
            run.publish();
            run.claim_next();
        }
        ShmStep::Await(_) => {}
        ShmStep::Done => run.close(),
    }
}

#[derive(Debug)]
enum Step {
    Send { to: i32, buf: Block },
    Recv { from: i32, buf: Block },
    Wait,
    Reduce { src: Block, dst: Block },
    Copy { src: Block, dst: Block },
    Shm(ShmStep),
}

/// A recorded collective: its steps, its scratch, and where a run of it has got to.
#[derive(Debug)]
pub(crate) struct Schedule {
    wire: Wire,
    steps: Vec<Step>,
    /// The buffers of the current run (scratch: the schedule's own, for all runs).
    bound: Bound,
    /// Next step to run.
    pc: usize,
    fl: InFlight,
    err: Option<Error>,
    /// The request-layer scope whose buffers the steps touch (0: none).
    scope: u32,
    /// Advances that found the schedule waiting (to look for error notices now and then).
    polls: u32,
}

/// Writes an algorithm's steps down as a [`Schedule`].
pub(crate) struct Record {
    s: Schedule,
}

impl Record {
    pub(crate) fn new(wire: Wire) -> Record {
        Record {
            s: Schedule {
                wire,
                steps: Vec::new(),
                bound: Bound::default(),
                pc: 0,
                fl: InFlight::default(),
                err: None,
                scope: 0,
                polls: 0,
            },
        }
    }

    /// The schedule, its operations to be tagged with request-layer scope `scope`.
    pub(crate) fn finish(mut self, scope: u32) -> Schedule {
        self.s.scope = scope;
        self.s.steps.shrink_to_fit();
        self.s
    }
}

impl Sink for Record {
    fn send(&mut self, to: i32, buf: Block) {
        self.s.steps.push(Step::Send { to, buf });
    }
    fn recv(&mut self, from: i32, buf: Block) {
        self.s.steps.push(Step::Recv { from, buf });
    }
    fn wait(&mut self) {
        if !matches!(self.s.steps.last(), Some(Step::Wait) | None) {
            self.s.steps.push(Step::Wait);
        }
    }
    fn reduce(&mut self, src: Block, dst: Block) {
        self.s.steps.push(Step::Reduce { src, dst });
    }
    fn copy(&mut self, src: Block, dst: Block) {
        self.s.steps.push(Step::Copy { src, dst });
    }
    fn scratch(&mut self, bytes: usize) -> Block {
        self.s.bound.scratch(bytes)
    }
    fn shm(&mut self, step: ShmStep) {
        self.s.steps.push(Step::Shm(step));
    }
}

impl Schedule {
    /// Give the next run its send and receive buffers.
    pub(crate) fn lend(&mut self, send: Option<Loan>, recv: Option<Loan>) {
        self.bound.send = send;
        self.bound.recv = recv;
        self.bound.shm.clone_from(&self.wire.shm);
    }

    /// Take the run's send and receive buffers back (the run has completed, or is
    /// abandoned): the schedule holds no copy of them between runs.
    pub(crate) fn unlend(&mut self) {
        self.bound.send = None;
        self.bound.recv = None;
        if let Some(run) = self.bound.shm.take() {
            run.close();
        }
    }

    /// The run of the collective region the next run of the steps uses.
    pub(crate) fn set_shm(&mut self, run: Option<ShmRun>) {
        self.wire.shm = run;
    }

    /// Run again as call `wire` (a blocking call that repeats an earlier one: same steps, the
    /// new call's tags).
    pub(crate) fn reuse_for(&mut self, wire: &Wire) {
        self.wire.tag = wire.tag;
        self.wire.notice_tag = wire.notice_tag;
        self.wire.shm.clone_from(&wire.shm);
        if wire.reducer.is_some() {
            self.wire.reducer.clone_from(&wire.reducer);
        }
        self.rewind();
    }

    /// Tag the operations of the next run with request-layer scope `scope` (a nonblocking
    /// call's run started again in another scope).
    pub(crate) fn set_scope(&mut self, scope: u32) {
        self.scope = scope;
    }

    /// Go back to the first step, for the next start of a persistent collective (the
    /// previous run has completed).
    pub(crate) fn rewind(&mut self) {
        debug_assert!(self.fl.is_empty());
        self.pc = 0;
        self.err = None;
    }

    /// Whether nothing is in flight and no step is left (the run completed).
    pub(crate) fn at_rest(&self) -> bool {
        self.fl.is_empty() && self.pc == self.steps.len()
    }

    /// The schedule is waiting for its operations: now and then, look for an error notice.
    fn waiting(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(NOTICE_EVERY) {
            if let Some(x) = notice(e, &self.wire) {
                Steps::abandon(self, e);
                return Some(Err(x));
            }
        }
        None
    }
}

impl Steps for Schedule {
    /// Advance the run; once it is over, its buffers are taken back (`unlend`).
    fn advance(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        let r = self.step(e);
        if r.is_some() {
            self.unlend();
        }
        r
    }

    fn blocked(&self) -> Blocked {
        self.wire.blocked()
    }

    fn abandon(&mut self, e: &mut Engine) {
        self.fl.abandon(e);
        self.pc = self.steps.len();
        self.unlend();
    }

    fn posts_more(&self) -> bool {
        self.steps[self.pc..]
            .iter()
            .any(|s| matches!(s, Step::Send { .. } | Step::Recv { .. } | Step::Shm(_)))
    }
}

impl Schedule {
    /// Post what can be posted, run the local steps whose messages have arrived; the result
    /// once every step is done.
    fn step(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        loop {
            if !self.fl.is_empty() {
                if !self.fl.all_done(e) {
                    return self.waiting(e);
                }
                self.fl.collect(e, &self.wire, &mut self.err);
            }
            // Post everything up to the next wait (or run the local steps there).
            while self.pc < self.steps.len() {
                let step = &self.steps[self.pc];
                self.pc += 1;
                match step {
                    Step::Send { to, buf } => {
                        let buf = self.bound.resolve(buf);
                        let op = post_send(e, &self.wire, *to, &buf, &mut self.fl, &mut self.err);
                        if let (Some(op), true) = (op, self.scope != 0) {
                            e.set_scope(op, self.scope);
                        }
                    }
                    Step::Recv { from, buf } => {
                        let buf = self.bound.resolve(buf);
                        let op = post_recv(e, &self.wire, *from, buf, &mut self.fl);
                        if self.scope != 0 {
                            e.set_scope(op, self.scope);
                        }
                    }
                    Step::Wait => {
                        if !self.fl.is_empty() {
                            break;
                        }
                    }
                    Step::Reduce { src, dst } => {
                        let (s, d) = (self.bound.resolve(src), self.bound.resolve(dst));
                        local(self.wire.reduce(&s, &d), &self.wire, &mut self.err);
                    }
                    Step::Copy { src, dst } => {
                        let (s, d) = (self.bound.resolve(src), self.bound.resolve(dst));
                        local(s.copy_to(&d), &self.wire, &mut self.err);
                    }
                    Step::Shm(step) => {
                        let run = self.bound.shm.as_ref().expect("a run of the region");
                        if !step.ready(run) {
                            self.pc -= 1;
                            return self.waiting(e);
                        }
                        shm_act(step, run, &self.bound, &self.wire, &mut self.err);
                    }
                }
            }
            if self.fl.is_empty() && self.pc == self.steps.len() {
                return Some(match self.err.take() {
                    Some(x) => Err(x),
                    None => Ok(Status::empty()),
                });
            }
            if !self.fl.all_done(e) {
                return self.waiting(e);
            }
        }
    }
}

/// A persistent collective: its schedule, replayed at each start (a [`Run`], advanced by
/// every progress call while active), and its buffers, lent to the schedule for a run and
/// handed back between runs (`Request::buffer_mut`).
pub(crate) struct Persistent {
    run: SharedRun<Schedule>,
    /// The send buffer (`None`: in place), and whether it may be handed out.
    send: Option<Loan>,
    recv: Loan,
    /// The communicator's collective region and the lane of it this collective's runs
    /// take, if it runs in shared memory.
    lane: Option<(Rc<super::shm::CollShm>, usize)>,
}

impl std::fmt::Debug for Persistent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistent")
            .field("active", &self.is_active())
            .finish()
    }
}

impl Persistent {
    pub(crate) fn new(
        sched: Schedule,
        send: Option<Loan>,
        recv: Loan,
        lane: Option<(Rc<super::shm::CollShm>, usize)>,
    ) -> Persistent {
        Persistent {
            run: Run::new(sched),
            send,
            recv,
            lane,
        }
    }
}

impl Completion for Persistent {
    fn kind(&self) -> &'static str {
        "collective"
    }

    fn start(&mut self, eng: &mut Engine) -> Result<Option<Result<Status>>> {
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "start of an active persistent request (wait for it or test it to completion first)",
            ));
        }
        {
            let mut r = self.run.borrow_mut();
            let sched = r.steps_mut();
            if let Some((shm, lane)) = &self.lane {
                sched.set_shm(Some(shm.open(*lane)));
            }
            sched.lend(self.send.clone(), Some(self.recv.clone()));
            sched.rewind();
        }
        Run::begin(&self.run, eng);
        Ok(None)
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        self.run.borrow_mut().poll(eng)
    }

    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        Run::wait(&self.run, eng)
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        self.run.borrow_mut().peek(eng)
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        Err(Error::new(
            ErrorClass::Request,
            "cancel of a request of a collective operation (MPI does not allow it)",
        ))
    }

    fn blocked_in(&self) -> Blocked {
        self.run.borrow().steps().blocked()
    }

    fn abandon(&mut self, eng: &mut Engine) {
        self.run.borrow_mut().abandon(eng);
    }

    fn is_active(&self) -> bool {
        self.run.borrow().is_active()
    }

    fn is_persistent(&self) -> bool {
        true
    }

    fn buffer(&mut self, send: bool) -> Result<&mut [u8]> {
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                if send {
                    "send_buffer_mut on an active persistent collective (wait for it first)"
                } else {
                    "buffer_mut on an active persistent request (wait for it first)"
                },
            ));
        }
        let loan = if send {
            self.send.as_mut().ok_or_else(|| {
                Error::new(ErrorClass::Buffer, "send_buffer_mut on a persistent collective whose send buffer was given as IN_PLACE (use buffer_mut)")
            })?
        } else {
            &mut self.recv
        };
        let writable = loan.is_writable();
        loan.bytes_mut().ok_or_else(|| {
            if !writable {
                Error::new(ErrorClass::Buffer, "send_buffer_mut on a persistent collective whose send buffer was lent read-only (&[T]); lend it as &mut [T]")
            } else {
                Error::new(ErrorClass::Buffer, "buffer_mut on a buffer that cannot be handed out whole (its element type has padding)")
            }
        })
    }
}
