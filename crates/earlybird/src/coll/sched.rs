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
//!   schedule, with its peers, buffers and scratch, from init to free; a start replays it
//!   from the first step without allocating.
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
use crate::comm::RankMap;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::{Blocked, Engine, OpId, SendMode, Started};
use crate::p2p::matching::Pattern;
use crate::p2p::Status;
use crate::request::Steps;
use crate::sys::lend::Lent;
use std::rc::Rc;

/// Where an algorithm's steps go.
pub(crate) trait Sink {
    /// Send `buf` to communicator rank `to`.
    fn send(&mut self, to: i32, buf: Lent);
    /// Receive from communicator rank `from` into `buf`: the message must fill it exactly.
    fn recv(&mut self, from: i32, buf: Lent);
    /// Everything posted so far completes before any later step.
    fn wait(&mut self);
    /// `dst = src op dst` with the collective's operation (contiguous runs of elements).
    fn reduce(&mut self, src: Lent, dst: Lent);
    /// Copy the message in `src` into `dst`.
    fn copy(&mut self, src: Lent, dst: Lent);
    /// A zeroed scratch buffer of `bytes` bytes, aligned for any element type, owned by the
    /// collective for as long as it runs (for a persistent one, until it is freed).
    fn scratch(&mut self, bytes: usize) -> Lent;
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

    fn blocked(&self) -> Blocked {
        crate::comm::agree::blocked(self.ctx, self.tag)
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

    fn reduce(&self, src: &Lent, dst: &Lent) {
        self.reducer
            .as_ref()
            .expect("a reduction step in a collective with an operation")
            .reduce(src, dst);
    }
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
    for r in (0..wire.size).filter(|&r| r != wire.me) {
        if let Ok(Started::Op(op)) = e.send_start(
            wire.ep(r),
            wire.ctx,
            wire.notice_tag,
            Lent::of(&msg),
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
fn notice(e: &mut Engine, wire: &Wire) -> Option<Error> {
    let pat = Pattern {
        ctx: wire.ctx,
        src: None,
        tag: Some(wire.notice_tag),
    };
    let (env, _) = e.iprobe(&pat)?;
    let mut buf = [0u8; NOTICE_BYTES];
    let op = e.recv_start(
        Pattern {
            src: Some(env.src),
            ..pat
        },
        Lent::of_mut(&mut buf),
    );
    let st = e.wait_blocking(op, wire.blocked()).ok()?;
    let n = st.bytes.min(NOTICE_BYTES);
    let code = i32::from_le_bytes(buf[..4].try_into().ok()?);
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
            String::from_utf8_lossy(&buf[4..n])
        ),
    ))
}

/// How many polls of a wait pass between two looks for an error notice.
const NOTICE_EVERY: u32 = 4096;

/// A zeroed, 16-byte aligned buffer, and the lent view of its first `bytes` bytes.
fn new_scratch(bytes: usize) -> (Vec<u128>, Lent) {
    let mut v = vec![0u128; bytes.div_ceil(16)];
    let l = Lent::of_mut(&mut bytemuck::cast_slice_mut::<u128, u8>(&mut v)[..bytes]);
    // Moving the vector keeps its heap buffer where it is, so `l` stays valid while the
    // vector lives.
    (v, l)
}

/// Operations in flight: (operation, bytes a receive must bring or `usize::MAX`). Eight fit
/// inline, so the blocking collectives of small communicators never allocate for them.
#[derive(Debug, Default)]
struct InFlight {
    inline: [(OpId, usize); 8],
    n: usize,
    more: Vec<(OpId, usize)>,
}

impl InFlight {
    #[inline(always)]
    fn push(&mut self, op: OpId, expect: usize) {
        if self.n < self.inline.len() {
            self.inline[self.n] = (op, expect);
            self.n += 1;
        } else {
            self.more.push((op, expect));
        }
    }

    fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn iter(&self) -> impl Iterator<Item = &(OpId, usize)> {
        self.inline[..self.n].iter().chain(self.more.iter())
    }

    fn all_done(&self, e: &Engine) -> bool {
        self.iter().all(|(op, _)| e.is_done(*op))
    }

    /// Collect every (completed) operation; the first error goes to `err` if empty.
    fn collect(&mut self, e: &mut Engine, wire: &Wire, err: &mut Option<Error>) {
        for &(op, expect) in self.inline[..self.n].iter().chain(self.more.iter()) {
            let r = wire.check(e.take(op), expect);
            if let (Err(x), None) = (r, &err) {
                *err = Some(x);
            }
        }
        self.n = 0;
        self.more.clear();
    }

    /// The job is ending: withdraw what can be withdrawn.
    fn abandon(&mut self, e: &mut Engine) {
        for &(op, _) in self.inline[..self.n].iter().chain(self.more.iter()) {
            if !e.is_done(op) {
                e.abandon(op);
            }
            if e.is_done(op) {
                let _ = e.take(op);
            }
        }
        self.n = 0;
        self.more.clear();
    }
}

#[inline(always)]
fn post_send(
    e: &mut Engine,
    wire: &Wire,
    to: i32,
    buf: Lent,
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
fn post_recv(e: &mut Engine, wire: &Wire, from: i32, buf: Lent, fl: &mut InFlight) -> OpId {
    let expect = buf.packed_len();
    let op = e.recv_start(wire.pattern(from), buf);
    fl.push(op, expect);
    op
}

/// Runs an algorithm's steps as they come: a blocking collective.
pub(crate) struct Now<'a> {
    e: &'a mut Engine,
    wire: &'a Wire,
    fl: InFlight,
    err: Option<Error>,
    /// The job is ending: stop doing anything.
    dead: bool,
    scratch: Vec<Vec<u128>>,
}

impl<'a> Now<'a> {
    pub(crate) fn new(e: &'a mut Engine, wire: &'a Wire) -> Now<'a> {
        Now {
            e,
            wire,
            fl: InFlight::default(),
            err: None,
            dead: false,
            scratch: Vec::new(),
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
    fn send(&mut self, to: i32, buf: Lent) {
        if !self.dead {
            post_send(self.e, self.wire, to, buf, &mut self.fl, &mut self.err);
        }
    }

    #[inline(always)]
    fn recv(&mut self, from: i32, buf: Lent) {
        if !self.dead {
            post_recv(self.e, self.wire, from, buf, &mut self.fl);
        }
    }

    fn wait(&mut self) {
        if self.fl.is_empty() {
            return;
        }
        let (fl, wire) = (&self.fl, self.wire);
        let mut polls = 0u32;
        let r = self.e.wait_for(wire.blocked(), |e| {
            if fl.all_done(e) {
                return Some(None);
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(NOTICE_EVERY) {
                return notice(e, wire).map(Some);
            }
            None
        });
        match r {
            Ok(None) => self.fl.collect(self.e, self.wire, &mut self.err),
            Ok(Some(x)) | Err(x) => {
                self.fl.abandon(self.e);
                self.dead = true;
                self.err.get_or_insert(x);
            }
        }
    }

    fn reduce(&mut self, src: Lent, dst: Lent) {
        if !self.dead {
            self.wire.reduce(&src, &dst);
        }
    }

    fn copy(&mut self, src: Lent, dst: Lent) {
        if !self.dead {
            src.copy_to(&dst);
        }
    }

    fn scratch(&mut self, bytes: usize) -> Lent {
        let (v, l) = new_scratch(bytes);
        self.scratch.push(v);
        l
    }
}

#[derive(Debug)]
enum Step {
    Send { to: i32, buf: Lent },
    Recv { from: i32, buf: Lent },
    Wait,
    Reduce { src: Lent, dst: Lent },
    Copy { src: Lent, dst: Lent },
}

/// A recorded collective: its steps, its scratch, and where a run of it has got to.
#[derive(Debug)]
pub(crate) struct Schedule {
    wire: Wire,
    steps: Vec<Step>,
    scratch: Vec<Vec<u128>>,
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
                scratch: Vec::new(),
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
    fn send(&mut self, to: i32, buf: Lent) {
        self.s.steps.push(Step::Send { to, buf });
    }
    fn recv(&mut self, from: i32, buf: Lent) {
        self.s.steps.push(Step::Recv { from, buf });
    }
    fn wait(&mut self) {
        if !matches!(self.s.steps.last(), Some(Step::Wait) | None) {
            self.s.steps.push(Step::Wait);
        }
    }
    fn reduce(&mut self, src: Lent, dst: Lent) {
        self.s.steps.push(Step::Reduce { src, dst });
    }
    fn copy(&mut self, src: Lent, dst: Lent) {
        self.s.steps.push(Step::Copy { src, dst });
    }
    fn scratch(&mut self, bytes: usize) -> Lent {
        let (v, l) = new_scratch(bytes);
        self.s.scratch.push(v);
        l
    }
}

impl Schedule {
    /// Run again as call `wire` (a blocking call that repeats an earlier one: same steps and
    /// buffers, the new call's tags).
    pub(crate) fn reuse_for(&mut self, wire: &Wire) {
        self.wire.tag = wire.tag;
        self.wire.notice_tag = wire.notice_tag;
        if wire.reducer.is_some() {
            self.wire.reducer.clone_from(&wire.reducer);
        }
        self.rewind();
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
}

impl Schedule {
    /// The schedule is waiting for its operations: now and then, look for an error notice.
    fn waiting(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(NOTICE_EVERY) {
            if let Some(x) = notice(e, &self.wire) {
                self.abandon(e);
                return Some(Err(x));
            }
        }
        None
    }
}

impl Steps for Schedule {
    fn advance(&mut self, e: &mut Engine) -> Option<Result<Status>> {
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
                        let op =
                            post_send(e, &self.wire, *to, buf.clone(), &mut self.fl, &mut self.err);
                        if let (Some(op), true) = (op, self.scope != 0) {
                            e.set_scope(op, self.scope);
                        }
                    }
                    Step::Recv { from, buf } => {
                        let op = post_recv(e, &self.wire, *from, buf.clone(), &mut self.fl);
                        if self.scope != 0 {
                            e.set_scope(op, self.scope);
                        }
                    }
                    Step::Wait => {
                        if !self.fl.is_empty() {
                            break;
                        }
                    }
                    Step::Reduce { src, dst } => self.wire.reduce(src, dst),
                    Step::Copy { src, dst } => src.copy_to(dst),
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

    fn blocked(&self) -> Blocked {
        self.wire.blocked()
    }

    fn abandon(&mut self, e: &mut Engine) {
        self.fl.abandon(e);
        self.pc = self.steps.len();
    }
}
