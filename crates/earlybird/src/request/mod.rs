//! request — one model for everything that completes.
//!
//! A [`Request`] is a nonblocking operation (complete once, then consumed) or a persistent
//! one (started and completed many times, inactive in between). The wait/test family works
//! on mixed arrays of both. Bound channels, collective schedules, RMA sync counters and
//! generalized requests join as further `Plan`s, or, when one operation takes several
//! engine operations and local work (MPI_Comm_idup now, collective schedules later), as
//! `Steps` advanced by test and wait.
//!
//! # Buffer safety
//!
//! Requests borrow their buffers for the lifetime `'s` of a [`Scope`] (the pattern of
//! `std::thread::scope`): every operation that may touch a borrowed buffer is registered in
//! the scope, and the scope does not end until each of them has completed. Dropping an active
//! request cancels a pending receive and waits for a send; forgetting one (`mem::forget`)
//! leaves it to the scope. So no safe code can free or reuse a buffer the library still reads
//! or writes.
//!
//! # Standard section(s)
//! MPI 4.1 §3.7 (nonblocking communication), §3.9 (persistent requests), §3.7.3-3.7.5
//! (wait/test and their any/all/some forms, request_free, request_get_status), §3.8 (cancel).
#![forbid(unsafe_code)]

use crate::channel::flow::ChannelEnd;
use crate::coll::sched::Schedule;
pub use crate::comm::errhandler::ErrHandler;
use crate::comm::errhandler::{apply, ErrSlot};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::shm::BlockedIn;
use crate::p2p::engine::{Blocked, Engine, OpId, SendMode, Started};
use crate::p2p::matching::Pattern;
use crate::p2p::Status;
use crate::sys::lend::Lent;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::rc::Rc;

pub(crate) type EngineRef = Rc<RefCell<Engine>>;

/// What a persistent request does at each start.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    Send {
        peer: i32,
        ctx: u32,
        tag: i32,
        buf: Lent,
        mode: SendMode,
    },
    Recv {
        pat: Option<Pattern>,
        buf: Lent,
    },
    /// A persistent collective: its schedule, replayed at each start, and the buffers it
    /// hands back between starts (the receive buffer, and the send buffer if lent mutably).
    Coll {
        sched: Rc<RefCell<Schedule>>,
        recv: Lent,
        send: Option<Lent>,
    },
    /// One end of a bound channel (seed 000): its starts and waits run on the channel's own
    /// memory, outside the engine's matching.
    Channel(Rc<RefCell<ChannelEnd>>),
    /// A bundle: its members (kept in the request) start and complete as one.
    Bundle,
}

impl Plan {
    fn blocked(&self) -> Blocked {
        match *self {
            Plan::Send { peer, ctx, tag, .. } => Blocked::send(peer, tag, ctx),
            Plan::Recv { pat, .. } => match pat {
                Some(p) => Blocked::recv_matching(&p),
                None => Blocked::recv(crate::PROC_NULL, crate::ANY_TAG, 0),
            },
            Plan::Coll { ref sched, .. } => sched.borrow().blocked(),
            Plan::Channel(ref c) => c.borrow().blocked,
            Plan::Bundle => Blocked::wait(),
        }
    }

    /// Start the operation on the engine.
    #[inline(always)]
    pub(crate) fn start(&self, eng: &mut Engine, bound: Option<OpId>) -> Result<State> {
        Ok(match self {
            &Plan::Send {
                peer,
                ctx,
                tag,
                ref buf,
                mode,
            } => match eng.send_start(peer, ctx, tag, buf.clone(), mode)? {
                Started::Done => State::Done(Ok(Status::empty())),
                Started::Op(op) => State::Op(op, self.blocked()),
            },
            Plan::Recv { pat: None, .. } => State::Done(Ok(Status::proc_null())),
            Plan::Channel(_) | Plan::Bundle => unreachable!("started by the request itself"),
            Plan::Coll { sched, .. } => {
                let mut s = sched.borrow_mut();
                s.rewind();
                match s.advance(eng) {
                    Some(r) => State::Done(r),
                    None => State::Coll,
                }
            }
            &Plan::Recv {
                pat: Some(p),
                ref buf,
            } => match bound {
                // A persistent receive re-arms the slot it was bound to at init.
                Some(op) => {
                    eng.recv_rearm(op, p);
                    if eng.is_done(op) {
                        State::Done(eng.collect(op))
                    } else {
                        State::Op(op, self.blocked())
                    }
                }
                None => {
                    let op = eng.recv_start(p, buf.clone());
                    if eng.is_done(op) {
                        // Matched a message that had already arrived: nothing left in flight.
                        State::Done(eng.take(op))
                    } else {
                        State::Op(op, self.blocked())
                    }
                }
            },
        })
    }
}

/// An operation made of several engine operations and some local work, advanced by the
/// request layer from test and wait (and their any/all/some forms): a communicator-creation
/// agreement now (`MPI_Comm_idup`), a collective schedule later. It owns every buffer its
/// engine operations use, so it needs nothing from a [`Scope`]; if it is leaked while
/// operations are in flight it leaks their buffers with it.
pub(crate) trait Steps: std::fmt::Debug {
    /// Advance without blocking: post what can be posted, collect what has completed.
    /// `Some` with the request's result once everything is done (then never called again).
    fn advance(&mut self, eng: &mut Engine) -> Option<Result<Status>>;
    /// What a long wait on it reports to the launcher.
    fn blocked(&self) -> Blocked;
    /// Its wait failed (the job is ending) and the request is going away: withdraw what
    /// can be withdrawn.
    fn abandon(&mut self, eng: &mut Engine);
}

#[derive(Debug)]
pub(crate) enum State {
    /// Persistent, not started (or completed and waited).
    Inactive,
    /// Complete, result not yet collected by wait/test.
    Done(Result<Status>),
    /// In progress in the engine.
    Op(OpId, Blocked),
    /// In progress as a sequence of steps, advanced by test and wait.
    Steps(Box<dyn Steps>),
    /// A persistent collective in progress: its plan's schedule is running.
    Coll,
    /// A bound channel with starts outstanding.
    Chan,
    /// A bundle whose members were started.
    Bundle,
    /// Nonblocking, completed and collected: any further use is an error.
    Consumed,
}

/// A communication request (MPI_Request): nonblocking or persistent.
///
/// `'s` is the [`Scope`] its buffers are borrowed for.
#[must_use = "a request must be waited on or tested to completion"]
pub struct Request<'s> {
    eng: EngineRef,
    state: State,
    plan: Option<Plan>,
    scope: &'s ScopeOps,
    errh: ErrSlot,
    /// Whether the buffer was lent mutably (so `buffer_mut` may hand it out).
    writable: bool,
    /// A persistent receive's operation slot, bound at init and re-armed at each start.
    bound: Option<OpId>,
    /// The communicator's rank translation (statuses carry endpoints until returned).
    map: Option<Rc<crate::comm::RankMap>>,
    /// Channels bound from this request: while any exists it cannot start (they share its
    /// buffer).
    chan_lock: Option<Rc<Cell<u32>>>,
    /// A bundle's members.
    #[allow(clippy::box_collection)] // one word in every request; the Vec only in bundles
    members: Option<Box<Vec<Request<'s>>>>,
    _buffers: PhantomData<&'s mut [u8]>,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("state", &self.state)
            .field("persistent", &self.plan.is_some())
            .finish()
    }
}

impl<'s> Request<'s> {
    #[inline(always)]
    fn with(
        eng: &EngineRef,
        scope: &'s ScopeOps,
        state: State,
        plan: Option<Plan>,
        bound: Option<OpId>,
        errh: &ErrSlot,
    ) -> Request<'s> {
        Request {
            eng: eng.clone(),
            state,
            plan,
            scope,
            errh: errh.clone(),
            writable: false,
            bound,
            map: None,
            chan_lock: None,
            members: None,
            _buffers: PhantomData,
        }
    }

    /// Report statuses in the ranks of the communicator behind `map`.
    pub(crate) fn with_map(mut self, map: &Option<Rc<crate::comm::RankMap>>) -> Self {
        self.map = map.clone();
        self
    }

    #[inline(always)]
    fn fix(&self, r: Result<Status>) -> Result<Status> {
        crate::comm::fix_status(&self.map, r)
    }

    /// A started nonblocking operation.
    #[inline(always)]
    pub(crate) fn nonblocking(
        eng: &EngineRef,
        scope: &'s ScopeOps,
        plan: Plan,
        errh: &ErrSlot,
    ) -> Result<Request<'s>> {
        let state = {
            let mut e = eng.borrow_mut();
            let state = plan.start(&mut e, None)?;
            if let State::Op(op, _) = state {
                scope.register(eng, &mut e, op);
            }
            state
        };
        Ok(Request::with(eng, scope, state, None, None, errh))
    }

    /// A nonblocking request that completed when it was made (matched receive).
    pub(crate) fn from_op(
        eng: &EngineRef,
        scope: &'s ScopeOps,
        op: OpId,
        blocked: Blocked,
        errh: &ErrSlot,
    ) -> Request<'s> {
        scope.register(eng, &mut eng.borrow_mut(), op);
        Request::with(eng, scope, State::Op(op, blocked), None, None, errh)
    }

    /// A nonblocking request carried out as [`Steps`] (advanced once here, so its first
    /// messages leave at once).
    pub(crate) fn steps(
        eng: &EngineRef,
        scope: &'s ScopeOps,
        mut steps: Box<dyn Steps>,
        errh: &ErrSlot,
    ) -> Request<'s> {
        scope.note_engine(eng);
        let state = match steps.advance(&mut eng.borrow_mut()) {
            Some(r) => State::Done(r),
            None => State::Steps(steps),
        };
        Request::with(eng, scope, state, None, None, errh)
    }

    /// An inactive persistent request.
    pub(crate) fn persistent(
        eng: &EngineRef,
        scope: &'s ScopeOps,
        plan: Plan,
        errh: &ErrSlot,
    ) -> Request<'s> {
        scope.note_engine(eng);
        let bound = match plan {
            Plan::Recv {
                pat: Some(_),
                ref buf,
            } => {
                let mut e = eng.borrow_mut();
                let op = e.recv_bind(buf.clone());
                e.set_scope(op, scope.id);
                Some(op)
            }
            _ => None,
        };
        Request::with(eng, scope, State::Inactive, Some(plan), bound, errh)
    }

    /// An inactive persistent collective running `sched` at each start; `recv` (and `send`,
    /// when lent mutably) are handed back between starts by the `*buffer_mut` calls.
    pub(crate) fn coll_persistent(
        eng: &EngineRef,
        scope: &'s ScopeOps,
        sched: Schedule,
        recv: Lent,
        send: Option<Lent>,
        errh: &ErrSlot,
    ) -> Request<'s> {
        scope.note_engine(eng);
        let plan = Plan::Coll {
            sched: Rc::new(RefCell::new(sched)),
            recv,
            send,
        };
        Request::with(eng, scope, State::Inactive, Some(plan), None, errh).writable(true)
    }

    /// The send buffer of an inactive persistent collective whose send buffer was lent as
    /// `&mut`, to change the data the next start sends. `MPI_ERR_REQUEST` while active or for
    /// another kind of request, `MPI_ERR_BUFFER` if the send buffer was lent read-only (or
    /// the call was in place: use [`buffer_mut`](Self::buffer_mut)).
    pub fn send_buffer_mut<T: crate::Equivalence>(&mut self) -> Result<&mut [T]> {
        let lent = match &self.plan {
            Some(Plan::Coll { .. }) if self.is_active() => {
                return Err(Error::new(ErrorClass::Request, "send_buffer_mut on an active persistent collective (wait for it first)"))
            }
            Some(Plan::Coll { send: Some(b), .. }) => b.clone(),
            Some(Plan::Coll { send: None, .. }) => {
                return Err(Error::new(ErrorClass::Buffer, "send_buffer_mut on a persistent collective whose send buffer was lent read-only (&[T]) or given as IN_PLACE"))
            }
            _ => return Err(Error::new(ErrorClass::Request, "send_buffer_mut on a request that is not a persistent collective")),
        };
        self.view_as(lent)
    }

    pub(crate) fn writable(mut self, w: bool) -> Self {
        self.writable = w;
        self
    }

    /// Whether this is a persistent request.
    pub fn is_persistent(&self) -> bool {
        self.plan.is_some()
    }

    /// Whether the request is active (started and not yet completed by wait/test).
    pub fn is_active(&self) -> bool {
        matches!(
            self.state,
            State::Op(..)
                | State::Done(_)
                | State::Steps(_)
                | State::Coll
                | State::Chan
                | State::Bundle
        )
    }

    /// Whether this nonblocking request has been completed by wait or test already
    /// (the Rust counterpart of a handle set to MPI_REQUEST_NULL).
    pub fn is_null(&self) -> bool {
        matches!(self.state, State::Consumed)
    }

    /// The buffer of an inactive persistent request, to read what the last receive brought
    /// or to write what the next send will carry. `MPI_ERR_REQUEST` while the request is
    /// active or for a nonblocking request; `MPI_ERR_TYPE` if the bytes are not a whole,
    /// aligned number of `T`.
    pub fn buffer_mut<T: crate::Equivalence>(&mut self) -> Result<&mut [T]> {
        let lent = match &self.plan {
            None => return Err(Error::new(ErrorClass::Request, "buffer_mut on a nonpersistent request")),
            // A channel touches its buffer only inside calls on the request itself (a start
            // or flush reads a send's window, a wait writes a receive's), so the buffer may be
            // handed out between those calls even with starts outstanding: the circular
            // buffer's model, where window j+1 is filled while j is in flight.
            Some(Plan::Channel(c)) if self.writable => c.borrow().buf.clone(),
            Some(_) if self.is_active() => {
                return Err(Error::new(ErrorClass::Request, "buffer_mut on an active persistent request (wait for it first)"))
            }
            Some(Plan::Send { buf, .. }) if self.writable => buf.clone(),
            Some(Plan::Recv { buf, .. }) => buf.clone(),
            Some(Plan::Coll { recv, .. }) => recv.clone(),
            Some(Plan::Bundle) => {
                return Err(Error::new(ErrorClass::Request, "buffer_mut on a bundle (use bundle_member_mut to reach a member)"))
            }
            Some(Plan::Send { .. } | Plan::Channel(_)) => {
                return Err(Error::new(ErrorClass::Buffer, "buffer_mut on a persistent send whose buffer was lent read-only (&[T]); lend it as &mut [T]"))
            }
        };
        self.view_as(lent)
    }

    /// The bytes of `lent` (a buffer of this inactive persistent request) as `[T]`.
    fn view_as<T: crate::Equivalence>(&mut self, lent: Lent) -> Result<&mut [T]> {
        let Some(bytes) = lent.bytes_mut_while(self) else {
            return Err(Error::new(
                ErrorClass::Buffer,
                "buffer_mut on a buffer that cannot be handed out whole (its element type has padding, or it is a non-contiguous view from split_views)",
            ));
        };
        let n = bytes.len();
        if n == 0 {
            // An empty buffer is an empty [T] whatever its (dangling) address.
            return Ok(&mut []);
        }
        crate::sys::plain::cast_bytes_mut(bytes).ok_or_else(|| {
            Error::new(
                ErrorClass::Type,
                format!(
                    "buffer of {n} bytes cannot be viewed as [{}] (padded type, size or alignment)",
                    std::any::type_name::<T>()
                ),
            )
        })
    }

    /// MPI_Start: start an inactive persistent request.
    #[inline(always)]
    pub fn start(&mut self) -> Result<()> {
        let r = self.start_inner();
        apply(&self.errh, "start", r)
    }

    #[inline(always)]
    fn start_inner(&mut self) -> Result<()> {
        let Some(plan) = &self.plan else {
            return Err(Error::new(
                ErrorClass::Request,
                "start of a nonpersistent request (only *_init requests can be started)",
            ));
        };
        if let Plan::Channel(_) = plan {
            // A channel may have up to K starts outstanding: it keeps its own count.
            chan_of(&mut self.plan, "start")?.start(false)?;
            self.state = State::Chan;
            return Ok(());
        }
        if let Some(l) = &self.chan_lock {
            if l.get() > 0 {
                return Err(Error::new(ErrorClass::Request, format!("start of a persistent request bound to {} channel(s): use the channel, or unbind it first", l.get())));
            }
        }
        if self.is_active() {
            return Err(Error::new(ErrorClass::Request, "start of an active persistent request (wait for it or test it to completion first)"));
        }
        if let Plan::Bundle = plan {
            return self.start_bundle();
        }
        let mut e = self.eng.borrow_mut();
        let state = plan.start(&mut e, self.bound)?;
        if let (State::Op(op, _), None) = (&state, self.bound) {
            // The scope noted this engine when the request was made (and tagged a bound
            // slot then).
            e.set_scope(*op, self.scope.id);
        }
        drop(e);
        self.state = state;
        Ok(())
    }

    /// Collect the result if complete (without progress): `None` while in progress.
    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let r = match &mut self.state {
            State::Inactive => return Some(Ok(Status::empty())),
            State::Consumed => {
                return Some(Err(Error::new(
                    ErrorClass::Request,
                    "wait or test on a request that has already completed (a nonblocking request is consumed by its completion)",
                )))
            }
            State::Done(_) => match std::mem::replace(&mut self.state, State::Inactive) {
                State::Done(r) => r,
                _ => unreachable!(),
            },
            State::Steps(s) => s.advance(eng)?,
            State::Coll => coll_sched(&self.plan).borrow_mut().advance(eng)?,
            State::Chan => {
                let c = chan(&mut self.plan);
                if !c.ready_now() {
                    return None;
                }
                let st = c.complete(false);
                if c.outstanding() == 0 {
                    self.state = State::Inactive;
                }
                return Some(Ok(st));
            }
            State::Bundle => {
                let members = self.members.as_mut().expect("bundle members");
                if !members.iter_mut().all(|m| m.ready(eng) || settled(m)) {
                    return None;
                }
                bundle_result(members.iter_mut().map(|m| m.poll(eng)))
            }
            State::Op(op, _) => {
                if !eng.is_done(*op) {
                    return None;
                }
                if self.bound == Some(*op) {
                    eng.collect(*op)
                } else {
                    eng.take(*op)
                }
            }
        };
        self.state = if self.plan.is_some() {
            State::Inactive
        } else {
            State::Consumed
        };
        Some(self.fix(r))
    }

    /// MPI_Wait: block until the request completes. A persistent request becomes inactive;
    /// a nonblocking one is consumed (a second wait is an MPI_ERR_REQUEST error). Waiting
    /// on an inactive persistent request returns the empty status at once.
    #[inline(always)]
    pub fn wait(&mut self) -> Result<Status> {
        let r = self.wait_inner();
        let r = self.fix(r);
        apply(&self.errh, "wait", r)
    }

    #[inline(always)]
    fn wait_inner(&mut self) -> Result<Status> {
        let after = if self.plan.is_some() {
            State::Inactive
        } else {
            State::Consumed
        };
        match std::mem::replace(&mut self.state, after) {
            // Completed at start (eager send, matched receive): no engine call at all.
            State::Done(r) => r,
            State::Op(op, blocked) => {
                let mut e = self.eng.borrow_mut();
                let r = if self.bound == Some(op) { e.wait_bound(op, blocked) } else { e.wait(op, blocked) };
                if r.is_err() && !e.is_done(op) {
                    // The wait failed before the operation completed (the job was aborted):
                    // it is still active and still owns its buffer.
                    self.state = State::Op(op, blocked);
                }
                r
            }
            State::Steps(mut s) => {
                let mut e = self.eng.borrow_mut();
                match e.wait_for(s.blocked(), |e| s.advance(e)) {
                    Ok(r) => r,
                    Err(err) => {
                        // The job is ending: the request stays active (its steps own their
                        // buffers).
                        self.state = State::Steps(s);
                        Err(err)
                    }
                }
            }
            State::Coll => {
                let sched = coll_sched(&self.plan);
                let mut e = self.eng.borrow_mut();
                let blocked = sched.borrow().blocked();
                match e.wait_for(blocked, |e| sched.borrow_mut().advance(e)) {
                    Ok(r) => r,
                    Err(err) => {
                        self.state = State::Coll;
                        Err(err)
                    }
                }
            }
            State::Chan => {
                let c = chan(&mut self.plan);
                let r = c.wait(&mut self.eng.borrow_mut(), false);
                if c.outstanding() > 0 {
                    self.state = State::Chan;
                }
                r
            }
            State::Bundle => {
                let members = self.members.as_mut().expect("bundle members");
                let r = wait_all(members);
                if members.iter().any(|m| m.is_active()) {
                    self.state = State::Bundle;
                }
                r.map(|_| Status::empty())
            }
            State::Inactive => {
                self.state = State::Inactive;
                Ok(Status::empty())
            }
            State::Consumed => Err(Error::new(
                ErrorClass::Request,
                "wait on a request that has already completed (a nonblocking request is consumed by its completion)",
            )),
        }
    }

    /// MPI_Test: `Some(status)` if the request completed (with the same state changes as
    /// [`wait`](Self::wait)), `None` if still in progress.
    pub fn test(&mut self) -> Result<Option<Status>> {
        let eng_rc = self.eng.clone();
        let mut eng = eng_rc.borrow_mut();
        eng.progress();
        let r = self.poll(&mut eng).transpose();
        drop(eng);
        apply(&self.errh, "test", r)
    }

    /// MPI_Request_get_status: whether the request is complete, and its status if so,
    /// without collecting it (a later wait or test still returns the same status).
    pub fn get_status(&mut self) -> Result<Option<Status>> {
        let eng_rc = self.eng.clone();
        let mut eng = eng_rc.borrow_mut();
        eng.progress();
        if let State::Op(op, _) = self.state {
            if eng.is_done(op) {
                // Move the result out of the engine (freeing its slot unless it is bound) and
                // keep it here.
                let r = if self.bound == Some(op) {
                    eng.collect(op)
                } else {
                    eng.take(op)
                };
                self.state = State::Done(r);
            }
        }
        if let State::Steps(s) = &mut self.state {
            if let Some(r) = s.advance(&mut eng) {
                self.state = State::Done(r);
            }
        }
        if let State::Coll = self.state {
            if let Some(r) = coll_sched(&self.plan).borrow_mut().advance(&mut eng) {
                self.state = State::Done(r);
            }
        }
        let r = match &self.state {
            State::Inactive => Ok(Some(Status::empty())),
            State::Consumed => Err(Error::new(
                ErrorClass::Request,
                "request_get_status on a consumed request",
            )),
            State::Done(r) => r.clone().map(Some),
            State::Chan => {
                let c = chan(&mut self.plan);
                Ok(c.ready_now().then_some(c.status))
            }
            State::Bundle => {
                let members = self.members.as_mut().expect("bundle members");
                Ok(members
                    .iter_mut()
                    .all(|m| m.ready(&mut eng) || settled(m))
                    .then(Status::empty))
            }
            State::Op(..) | State::Steps(_) | State::Coll => Ok(None),
        };
        drop(eng);
        let r = r.and_then(|o| o.map(|st| self.fix(Ok(st))).transpose());
        apply(&self.errh, "request_get_status", r)
    }

    /// MPI_Cancel: withdraw a pending receive, or a send not yet matched. Complete the request
    /// with wait or test afterwards; `Status::is_cancelled` says whether it took effect.
    pub fn cancel(&mut self) -> Result<()> {
        match self.state {
            State::Op(op, _) => {
                self.eng.borrow_mut().cancel(op);
                Ok(())
            }
            State::Done(_) => Ok(()),
            State::Chan | State::Bundle => apply(
                &self.errh,
                "cancel",
                Err(Error::new(
                    ErrorClass::Request,
                    "cancel of a bound channel or a bundle (a channel's starts complete in order; unbind it instead)",
                )),
            ),
            State::Steps(_) | State::Coll => apply(
                &self.errh,
                "cancel",
                Err(Error::new(
                    ErrorClass::Request,
                    "cancel of a request of a collective operation (MPI does not allow it)",
                )),
            ),
            State::Inactive => apply(
                &self.errh,
                "cancel",
                Err(Error::new(
                    ErrorClass::Request,
                    "cancel of an inactive persistent request",
                )),
            ),
            State::Consumed => apply(
                &self.errh,
                "cancel",
                Err(Error::new(
                    ErrorClass::Request,
                    "cancel of a request that has already completed",
                )),
            ),
        }
    }

    /// MPI_Request_free. Freeing an active persistent request is an error (MPI_ERR_REQUEST),
    /// and so is freeing the active request of a collective operation (MPI_Comm_idup), which
    /// is then completed as when dropped.
    /// Freeing is local: an active nonblocking operation goes on and completes on its own (a
    /// send is delivered, a receive fills its buffer); its buffer stays lent until then, and
    /// at the latest until the scope ends, which waits for a freed send and cancels a freed
    /// receive still unmatched.
    pub fn free(mut self) -> Result<()> {
        if let Some(Plan::Channel(_)) = self.plan {
            let e = Error::new(ErrorClass::Request, "request_free on a bound channel is erroneous: channels end with unbind_channel (collective over the pair); this end is dropped as if unbound without one, and its partner's calls will say so");
            return apply(&self.errh, "request_free", Err(e));
        }
        if self.plan.is_some() && self.is_active() {
            let e = Error::new(ErrorClass::Request, "request_free of an active persistent request (complete it with wait or test first)");
            return apply(&self.errh, "request_free", Err(e));
        }
        if matches!(self.state, State::Steps(_)) {
            let e = Error::new(ErrorClass::Request, "request_free of an active request of a collective operation (complete it with wait or test)");
            return apply(&self.errh, "request_free", Err(e));
        }
        if let State::Op(op, _) = self.state {
            // The operation stays tagged with its scope, which settles it at the latest.
            self.eng.borrow_mut().detach(op);
            self.state = State::Consumed;
            return Ok(());
        }
        self.settle();
        Ok(())
    }

    /// Complete an active request for its drop: cancel a receive still posted, wait for
    /// anything else.
    fn settle(&mut self) {
        if let State::Steps(s) = &mut self.state {
            let Ok(mut eng) = self.eng.try_borrow_mut() else {
                eprintln!("earlybird: request dropped while its endpoint is in use; aborting");
                std::process::abort();
            };
            if eng.wait_for(s.blocked(), |e| s.advance(e)).is_err() {
                s.abandon(&mut eng);
            }
        }
        if let State::Coll = self.state {
            let Ok(mut eng) = self.eng.try_borrow_mut() else {
                eprintln!("earlybird: request dropped while its endpoint is in use; aborting");
                std::process::abort();
            };
            let sched = coll_sched(&self.plan);
            let blocked = sched.borrow().blocked();
            if eng
                .wait_for(blocked, |e| sched.borrow_mut().advance(e))
                .is_err()
            {
                sched.borrow_mut().abandon(&mut eng);
            }
        }
        if let State::Op(op, blocked) = self.state {
            let Ok(mut eng) = self.eng.try_borrow_mut() else {
                // Only reachable while unwinding out of the engine itself: the buffer may still
                // be referenced, and continuing could let it be freed under the library.
                eprintln!("earlybird: request dropped while its endpoint is in use; aborting");
                std::process::abort();
            };
            if matches!(blocked.what(), BlockedIn::Recv) {
                eng.cancel(op);
            }
            let r = if self.bound == Some(op) {
                eng.wait_bound(op, blocked)
            } else {
                eng.wait(op, blocked)
            };
            if r.is_err() && !eng.is_done(op) {
                eng.abandon(op);
            }
        }
        self.state = if self.plan.is_some() {
            State::Inactive
        } else {
            State::Consumed
        };
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if let Some(Plan::Channel(c)) = &self.plan {
            // Nothing in flight touches the user's buffer (a channel copies inside start and
            // wait): tell the partner this end is gone and let the other end see it.
            let mut c = c.borrow_mut();
            if !c.unbound {
                c.leave(2);
            }
            return;
        }
        self.settle();
        if let Some(op) = self.bound.take() {
            if let Ok(mut e) = self.eng.try_borrow_mut() {
                e.unbind(op);
            }
        }
    }
}

/// What binding a channel takes from the persistent request it is bound from.
pub(crate) struct ChannelSource<'s> {
    pub eng: EngineRef,
    pub scope: &'s ScopeOps,
    pub errh: ErrSlot,
    pub map: Option<Rc<crate::comm::RankMap>>,
    pub plan: Plan,
    pub lock: Rc<Cell<u32>>,
    pub writable: bool,
}

impl<'s> Request<'s> {
    /// What a channel bound from this request needs: MPI_ERR_REQUEST unless it is an
    /// inactive persistent point-to-point send or receive.
    pub(crate) fn channel_source(&mut self, what: &str) -> Result<ChannelSource<'s>> {
        let plan = match &self.plan {
            Some(p @ (Plan::Send { .. } | Plan::Recv { .. })) => p.clone(),
            Some(Plan::Channel(_)) => {
                return Err(Error::new(ErrorClass::Request, format!("{what}: the request is a bound channel already (bind the persistent request it came from)")))
            }
            _ => {
                return Err(Error::new(ErrorClass::Request, format!("{what}: only a persistent point-to-point send or receive (send_init, ..., recv_init) can be bound into a channel")))
            }
        };
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                format!("{what}: the request is active (complete it before binding it)"),
            ));
        }
        let lock = self
            .chan_lock
            .get_or_insert_with(|| Rc::new(Cell::new(0)))
            .clone();
        Ok(ChannelSource {
            eng: self.eng.clone(),
            scope: self.scope,
            errh: self.errh.clone(),
            map: self.map.clone(),
            writable: self.writable || matches!(plan, Plan::Recv { .. }),
            plan,
            lock,
        })
    }

    /// The request of a bound channel end.
    pub(crate) fn from_channel(src: &ChannelSource<'s>, end: ChannelEnd) -> Request<'s> {
        src.lock.set(src.lock.get() + 1);
        let plan = Plan::Channel(Rc::new(RefCell::new(end)));
        Request::with(
            &src.eng,
            src.scope,
            State::Inactive,
            Some(plan),
            None,
            &src.errh,
        )
        .writable(src.writable)
    }

    /// The channel end behind this request, if it is a bound channel.
    pub(crate) fn channel_end(&self) -> Option<Rc<RefCell<ChannelEnd>>> {
        match &self.plan {
            Some(Plan::Channel(c)) => Some(c.clone()),
            _ => None,
        }
    }

    /// The engine and error slot (for the channel layer's waits and errors).
    pub(crate) fn engine(&self) -> &EngineRef {
        &self.eng
    }

    pub(crate) fn err_slot(&self) -> &ErrSlot {
        &self.errh
    }

    /// Turn an unbound channel request into a null one (its end has left).
    pub(crate) fn consume(&mut self) {
        self.state = State::Consumed;
    }

    /// The partner of a bound channel (seed 000): its rank in the communicator of the
    /// request bound, and its tag; `bytes` is what this end moves per start.
    pub fn channel_status(&self) -> Result<Status> {
        match self.channel_end() {
            Some(c) => {
                let c = c.borrow();
                Ok(Status {
                    bytes: c.bytes,
                    ..c.status
                })
            }
            None => Err(Error::new(
                ErrorClass::Request,
                "channel_status on a request that is not a bound channel",
            )),
        }
    }

    /// The next slot of a channel's send end, to fill in place and send with
    /// [`start_filled`](Self::start_filled): zero copy (seed 000's early binding taken to the
    /// end). On a ready-mode channel its receive must be posted already (MPI_ERR_REQUEST
    /// otherwise: the receiver may still be reading the slot); on a synchronous one this
    /// waits for it, as a synchronous send would. `T` must view the message's bytes whole
    /// (MPI_ERR_TYPE).
    pub fn next_slot_mut<T: crate::Equivalence>(&mut self) -> Result<&mut [T]> {
        let errh = self.errh.clone();
        let eng = &self.eng;
        let r = chan_of(&mut self.plan, "next_slot_mut").and_then(|c| {
            if c.role != crate::channel::flow::Role::Send {
                return Err(Error::new(
                    ErrorClass::Request,
                    "next_slot_mut on the receive end of a channel (use wait_in_place and arrived)",
                ));
            }
            c.wait_posted(&mut eng.borrow_mut())?;
            let bytes = c.next_slot()?;
            let n = bytes.len();
            crate::sys::plain::cast_bytes_mut(bytes).ok_or_else(|| slot_type_error::<T>(n))
        });
        apply(&errh, "next_slot_mut", r)
    }

    /// MPI_Start of a channel's send end whose slot was filled in place through
    /// [`next_slot_mut`](Self::next_slot_mut): publishes it without copying.
    pub fn start_filled(&mut self) -> Result<()> {
        let r = chan_of(&mut self.plan, "start_filled").and_then(|c| c.start(true));
        if r.is_ok() {
            self.state = State::Chan;
        }
        apply(&self.errh, "start_filled", r)
    }

    /// MPI_Wait on a channel's receive end that leaves the data in its slot, to read in place
    /// with [`arrived`](Self::arrived) (zero copy) until this end's next start.
    pub fn wait_in_place(&mut self) -> Result<Status> {
        let eng = &self.eng;
        let r = chan_of(&mut self.plan, "wait_in_place").map(|c| {
            let r = c.wait(&mut eng.borrow_mut(), true);
            (r, c.outstanding())
        });
        let r = match r {
            Ok((r, left)) => {
                self.state = if left > 0 {
                    State::Chan
                } else {
                    State::Inactive
                };
                r
            }
            Err(e) => Err(e),
        };
        apply(&self.errh, "wait_in_place", r)
    }

    /// The data of a channel's last completed receive, read in place in its slot (after
    /// [`wait_in_place`](Self::wait_in_place), or after a plain wait, which also copied it
    /// into the buffer). MPI_ERR_REQUEST when none has completed, or its slot has been posted
    /// again by a later start; MPI_ERR_TYPE when `T` cannot view the bytes whole.
    pub fn arrived<T: crate::Equivalence>(&mut self) -> Result<&[T]> {
        let errh = self.errh.clone();
        let r = chan_of(&mut self.plan, "arrived").and_then(|c| {
            let bytes = c.arrived()?;
            let n = bytes.len();
            crate::sys::plain::cast_bytes(bytes).ok_or_else(|| slot_type_error::<T>(n))
        });
        apply(&errh, "arrived", r)
    }

    /// A nonblocking request running `steps` on `ch`'s endpoint and scope (an unbind).
    pub(crate) fn unbinding(ch: &Request<'s>, steps: Box<dyn Steps>) -> Request<'s> {
        Request::steps(&ch.eng, ch.scope, steps, &ch.errh)
    }

    /// A bundle (seed 000, proposal 4: a persistent generalized request) of persistent
    /// requests: point-to-point, collective, bound channels, or other bundles. Starting it
    /// starts every member in order; it completes, with the empty status, when every member
    /// has (MPI_ERR_IN_STATUS naming the members that failed). The members must be persistent,
    /// inactive, and of one endpoint (MPI_ERR_REQUEST otherwise); [`bundle_member_mut`]
    /// reaches them between starts, and dropping the bundle drops them.
    ///
    /// [`bundle_member_mut`]: Request::bundle_member_mut
    pub fn bundle(members: Vec<Request<'s>>) -> Result<Request<'s>> {
        let Some(first) = members.first() else {
            return Err(Error::new(ErrorClass::Arg, "bundle of no requests"));
        };
        for (i, m) in members.iter().enumerate() {
            let why = if !m.is_persistent() {
                "is not persistent"
            } else if m.is_active() {
                "is active"
            } else if !Rc::ptr_eq(&m.eng, &first.eng) {
                "belongs to another endpoint"
            } else {
                continue;
            };
            return Err(Error::new(
                ErrorClass::Request,
                format!("bundle: member {i} {why} (members must be inactive persistent requests of one endpoint)"),
            ));
        }
        let (eng, scope, errh) = (first.eng.clone(), first.scope, first.errh.clone());
        let mut b = Request::with(
            &eng,
            scope,
            State::Inactive,
            Some(Plan::Bundle),
            None,
            &errh,
        );
        b.members = Some(Box::new(members));
        Ok(b)
    }

    /// Member `i` of a bundle, to reach its buffers between starts (MPI_ERR_REQUEST while
    /// the bundle is active, or for another kind of request; MPI_ERR_ARG past the end).
    pub fn bundle_member_mut(&mut self, i: usize) -> Result<&mut Request<'s>> {
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "bundle_member_mut on an active bundle (wait for it first)",
            ));
        }
        let Some(m) = self.members.as_mut() else {
            return Err(Error::new(
                ErrorClass::Request,
                "bundle_member_mut on a request that is not a bundle",
            ));
        };
        let n = m.len();
        m.get_mut(i).ok_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                format!("bundle_member_mut({i}) of a bundle of {n} members"),
            )
        })
    }

    /// The members of a bundle, taken back (the bundle is consumed); MPI_ERR_REQUEST while it
    /// is active or for another kind of request.
    pub fn into_members(mut self) -> Result<Vec<Request<'s>>> {
        if self.is_active() || self.members.is_none() {
            return Err(Error::new(
                ErrorClass::Request,
                "into_members on an active bundle or a request that is not a bundle",
            ));
        }
        self.plan = None;
        self.state = State::Consumed;
        Ok(*self.members.take().expect("checked"))
    }

    fn start_bundle(&mut self) -> Result<()> {
        let members = self.members.as_mut().expect("bundle members");
        if let Some(i) = members
            .iter()
            .position(|m| m.is_active() && m.channel_end().is_none())
        {
            return Err(Error::new(
                ErrorClass::Request,
                format!("start of a bundle whose member {i} is still active"),
            ));
        }
        let mut r = Ok(());
        for (i, m) in members.iter_mut().enumerate() {
            if let Err(e) = m.start_inner() {
                r = Err(Error::new(
                    e.class(),
                    format!(
                        "bundle member {i}: {} (the members before it were started)",
                        e.detail()
                    ),
                ));
                break;
            }
        }
        if members.iter().any(|m| m.is_active()) {
            self.state = State::Bundle;
        }
        r
    }
}

/// MPI_Startall: start every request of the array, in order; each must be an inactive
/// persistent request. Stops at the first that cannot be started (MPI_ERR_REQUEST), leaving
/// the ones before it started.
pub fn start_all(reqs: &mut [Request<'_>]) -> Result<()> {
    for r in reqs.iter_mut() {
        r.start()?;
    }
    Ok(())
}

/// All requests of an array must belong to one endpoint.
fn one_engine(reqs: &[Request<'_>], what: &str) -> Result<Option<EngineRef>> {
    let Some(first) = reqs.first() else {
        return Ok(None);
    };
    if reqs.iter().any(|r| !Rc::ptr_eq(&r.eng, &first.eng)) {
        let e = Error::new(
            ErrorClass::Request,
            format!("{what}: requests of different endpoints in one array"),
        );
        return apply(&first.errh, what, Err(e));
    }
    Ok(Some(first.eng.clone()))
}

fn settled(r: &Request<'_>) -> bool {
    !r.is_active()
}

/// MPI_Waitall: wait for every request. On failure the error is MPI_ERR_IN_STATUS naming the
/// requests that failed; use [`wait_all_into`] to get each request's status (with its own
/// error class) as well.
pub fn wait_all(reqs: &mut [Request<'_>]) -> Result<Vec<Status>> {
    let mut out = vec![Status::empty(); reqs.len()];
    wait_all_into(reqs, &mut out).map(|()| out)
}

/// MPI_Waitall with a statuses array: fills `statuses[i]` for every request, also when some
/// failed (then the error is MPI_ERR_IN_STATUS and each status says its own error class, as
/// MPI fills MPI_ERROR). `statuses` must be as long as `reqs` (MPI_ERR_ARG otherwise).
pub fn wait_all_into(reqs: &mut [Request<'_>], statuses: &mut [Status]) -> Result<()> {
    if statuses.len() != reqs.len() {
        let e = Error::new(
            ErrorClass::Arg,
            format!(
                "wait_all_into: {} statuses for {} requests",
                statuses.len(),
                reqs.len()
            ),
        );
        return match reqs.first() {
            Some(r) => apply(&r.errh, "wait_all", Err(e)),
            None => Err(e),
        };
    }
    let Some(eng) = one_engine(reqs, "wait_all")? else {
        return Ok(());
    };
    let out = statuses;
    let mut failed = vec![];
    {
        let mut e = eng.borrow_mut();
        let blocked = first_blocked(reqs);
        // Collect in array order, looking past the first incomplete request only once it
        // completes: each completion is then seen once, however the frames trickle in.
        let mut next = 0;
        let waited = e.wait_for(blocked, |e| {
            while next < reqs.len() {
                if reqs[next].is_null() {
                    // A request completed earlier (by wait_any, say) is MPI_REQUEST_NULL in
                    // the array: ignored, with the empty status.
                    out[next] = Status::empty();
                    next += 1;
                    continue;
                }
                match reqs[next].poll(e) {
                    None => return None,
                    Some(Ok(st)) => out[next] = st,
                    Some(Err(err)) => {
                        let mut st = err.status().copied().unwrap_or_default();
                        st.error = err.class();
                        out[next] = st;
                        failed.push(format!("request {next}: {err}"));
                    }
                }
                next += 1;
            }
            Some(())
        });
        if let Err(err) = waited {
            drop(e);
            return apply(&reqs[0].errh, "wait_all", Err(err));
        }
    }
    let r = if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::new(ErrorClass::InStatus, failed.join("; ")))
    };
    apply(&reqs[0].errh, "wait_all", r)
}

/// MPI_Testall: all statuses if every request is complete, else `None` (and nothing is
/// collected).
pub fn test_all(reqs: &mut [Request<'_>]) -> Result<Option<Vec<Status>>> {
    let Some(eng) = one_engine(reqs, "test_all")? else {
        return Ok(Some(vec![]));
    };
    let all = {
        let mut e = eng.borrow_mut();
        e.progress();
        // Consumed entries are MPI_REQUEST_NULL: complete, with the empty status.
        reqs.iter_mut().all(|r| r.ready(&mut e) || settled(r))
    };
    if !all {
        return Ok(None);
    }
    wait_all(reqs).map(Some)
}

/// MPI_Waitany: wait until one active request completes; `None` (MPI_UNDEFINED) when none
/// is active.
pub fn wait_any(reqs: &mut [Request<'_>]) -> Result<Option<(usize, Status)>> {
    let Some(eng) = one_engine(reqs, "wait_any")? else {
        return Ok(None);
    };
    if reqs.iter().all(settled) {
        return Ok(None);
    }
    let r = {
        let mut e = eng.borrow_mut();
        let blocked = first_blocked(reqs);
        e.wait_for(blocked, |e| {
            reqs.iter_mut()
                .enumerate()
                .filter(|(_, r)| !settled(r))
                .find_map(|(i, r)| r.poll(e).map(|res| (i, res)))
        })
    };
    let (i, res) = match r {
        Ok(v) => v,
        Err(err) => return apply(&reqs[0].errh, "wait_any", Err(err)),
    };
    apply(&reqs[0].errh, "wait_any", res.map(|st| Some((i, st))))
}

/// MPI_Testany: one completed request, if any.
pub fn test_any(reqs: &mut [Request<'_>]) -> Result<Option<(usize, Status)>> {
    let Some(eng) = one_engine(reqs, "test_any")? else {
        return Ok(None);
    };
    let found = {
        let mut e = eng.borrow_mut();
        e.progress();
        reqs.iter_mut()
            .enumerate()
            .filter(|(_, r)| !settled(r))
            .find_map(|(i, r)| r.poll(&mut e).map(|res| (i, res)))
    };
    match found {
        None => Ok(None),
        Some((i, res)) => apply(&reqs[0].errh, "test_any", res.map(|st| Some((i, st)))),
    }
}

/// MPI_Waitsome: wait until at least one active request completes; returns every one that
/// has (index, status). Empty when none is active.
pub fn wait_some(reqs: &mut [Request<'_>]) -> Result<Vec<(usize, Status)>> {
    let Some(eng) = one_engine(reqs, "wait_some")? else {
        return Ok(vec![]);
    };
    if reqs.iter().all(settled) {
        return Ok(vec![]);
    }
    {
        let mut e = eng.borrow_mut();
        let blocked = first_blocked(reqs);
        if let Err(err) = e.wait_for(blocked, |e| {
            reqs.iter_mut().any(|r| r.ready(e)).then_some(())
        }) {
            drop(e);
            return apply(&reqs[0].errh, "wait_some", Err(err));
        }
    }
    test_some(reqs)
}

/// MPI_Testsome: every active request that has completed (index, status).
pub fn test_some(reqs: &mut [Request<'_>]) -> Result<Vec<(usize, Status)>> {
    let Some(eng) = one_engine(reqs, "test_some")? else {
        return Ok(vec![]);
    };
    let mut out = vec![];
    let mut failed = vec![];
    {
        let mut e = eng.borrow_mut();
        e.progress();
        for (i, r) in reqs.iter_mut().enumerate() {
            if settled(r) {
                continue;
            }
            match r.poll(&mut e) {
                None => {}
                Some(Ok(st)) => out.push((i, st)),
                Some(Err(err)) => {
                    let mut st = err.status().copied().unwrap_or_default();
                    st.error = err.class();
                    out.push((i, st));
                    failed.push(format!("request {i}: {err}"));
                }
            }
        }
    }
    let r = if failed.is_empty() {
        Ok(out)
    } else {
        Err(Error::new(ErrorClass::InStatus, failed.join("; ")))
    };
    apply(&reqs[0].errh, "test_some", r)
}

impl Request<'_> {
    /// Whether the request is active and complete (steps are advanced, and kept as `Done`
    /// when they finish).
    fn ready(&mut self, e: &mut Engine) -> bool {
        if let State::Steps(s) = &mut self.state {
            if let Some(r) = s.advance(e) {
                self.state = State::Done(r);
            }
        }
        if let State::Coll = self.state {
            if let Some(r) = coll_sched(&self.plan).borrow_mut().advance(e) {
                self.state = State::Done(r);
            }
        }
        match &mut self.state {
            State::Op(op, _) => e.is_done(*op),
            State::Done(_) => true,
            State::Chan => chan(&mut self.plan).ready_now(),
            State::Bundle => self
                .members
                .as_mut()
                .expect("bundle members")
                .iter_mut()
                .all(|m| m.ready(e) || settled(m)),
            _ => false,
        }
    }
}

/// The channel end of a channel request's plan, reached without a run-time borrow: the
/// request is its only owner (`channel_end` lends it out only for the length of a call).
fn chan_end(plan: &mut Option<Plan>) -> Option<&mut ChannelEnd> {
    match plan {
        Some(Plan::Channel(c)) => Rc::get_mut(c).map(RefCell::get_mut),
        _ => None,
    }
}

/// [`chan_end`] for call `what`: MPI_ERR_REQUEST on a request that is not a bound channel.
fn chan_of<'p>(plan: &'p mut Option<Plan>, what: &str) -> Result<&'p mut ChannelEnd> {
    chan_end(plan).ok_or_else(|| {
        Error::new(
            ErrorClass::Request,
            format!("{what} on a request that is not a bound channel"),
        )
    })
}

/// [`chan_end`] of a request in `State::Chan`.
fn chan(plan: &mut Option<Plan>) -> &mut ChannelEnd {
    chan_end(plan).expect("State::Chan on a channel plan that only the request holds")
}

/// A channel slot of `n` bytes that `[T]` cannot view.
fn slot_type_error<T>(n: usize) -> Error {
    Error::new(
        ErrorClass::Type,
        format!(
            "a slot of {n} bytes cannot be viewed as [{}]",
            std::any::type_name::<T>()
        ),
    )
}

/// A bundle's result from its members' results: the empty status, or MPI_ERR_IN_STATUS
/// naming the members that failed.
fn bundle_result(results: impl Iterator<Item = Option<Result<Status>>>) -> Result<Status> {
    let failed: Vec<String> = results
        .enumerate()
        .filter_map(|(i, r)| match r {
            Some(Err(e)) => Some(format!("member {i}: {e}")),
            _ => None,
        })
        .collect();
    if failed.is_empty() {
        Ok(Status::empty())
    } else {
        Err(Error::new(ErrorClass::InStatus, failed.join("; ")))
    }
}

/// The schedule of a persistent collective's plan.
fn coll_sched(plan: &Option<Plan>) -> Rc<RefCell<Schedule>> {
    match plan {
        Some(Plan::Coll { sched, .. }) => sched.clone(),
        _ => unreachable!("State::Coll without a collective plan"),
    }
}

fn first_blocked(reqs: &[Request<'_>]) -> Blocked {
    reqs.iter()
        .find_map(|r| match r.state {
            State::Op(_, b) => Some(b.as_wait()),
            State::Steps(ref s) => Some(s.blocked()),
            State::Coll | State::Chan => r.plan.as_ref().map(Plan::blocked),
            _ => None,
        })
        .unwrap_or(Blocked::wait())
}

/// A scope's bookkeeping: its id, with which every operation that may touch a buffer
/// borrowed for the scope is tagged in its engine, and the engines it used (usually one).
/// When the scope ends, each engine settles the operations tagged with the id.
pub struct ScopeOps {
    id: u32,
    /// The first engine used (almost always the only one), kept inline: no allocation.
    first: RefCell<Option<EngineRef>>,
    /// Any further engines (a thread that drives two endpoints within one scope).
    more: RefCell<Vec<EngineRef>>,
}

impl Default for ScopeOps {
    fn default() -> Self {
        thread_local! {
            static NEXT_SCOPE: std::cell::Cell<u32> = const { std::cell::Cell::new(1) };
        }
        // Ids are per thread, as engines are; 0 means "no scope" and is skipped on wrap.
        let id = NEXT_SCOPE.with(|n| {
            let id = n.get();
            n.set(id.checked_add(1).unwrap_or(1));
            id
        });
        ScopeOps {
            id,
            first: RefCell::new(None),
            more: RefCell::new(Vec::new()),
        }
    }
}

impl ScopeOps {
    /// The id operations of this scope are tagged with.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Tag `op` (just started on `e`, the engine behind `eng`) with this scope.
    #[inline(always)]
    fn register(&self, eng: &EngineRef, e: &mut Engine, op: OpId) {
        e.set_scope(op, self.id);
        self.note_engine(eng);
    }

    /// Remember that `eng` has (or will have) operations of this scope to settle.
    #[inline(always)]
    fn note_engine(&self, eng: &EngineRef) {
        let mut first = self.first.borrow_mut();
        match &*first {
            None => *first = Some(eng.clone()),
            Some(f) if Rc::ptr_eq(f, eng) => {}
            Some(_) => {
                let mut v = self.more.borrow_mut();
                if !v.iter().any(|x| Rc::ptr_eq(x, eng)) {
                    v.push(eng.clone());
                }
            }
        }
    }
}

impl Drop for ScopeOps {
    fn drop(&mut self) {
        let first = self.first.get_mut().take();
        for eng in first.into_iter().chain(self.more.get_mut().drain(..)) {
            let Ok(mut e) = eng.try_borrow_mut() else {
                // Only reachable while unwinding out of the engine itself, with buffers of
                // this scope possibly still referenced: stopping here is the only safe move.
                eprintln!("earlybird: scope ended while its endpoint is in use; aborting");
                std::process::abort();
            };
            e.settle_scope(self.id);
        }
    }
}

/// The region in which buffers may be lent to nonblocking and persistent operations.
/// See [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    pub(crate) ops: ScopeOps,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// Run `f` with a [`Scope`] in which nonblocking and persistent operations may borrow
/// buffers that live at least as long as the scope. When `f` returns (or unwinds), every
/// operation still in flight has completed before `scope` returns: a receive nobody matched
/// is cancelled, a send is waited for.
///
/// ```no_run
/// # fn main() -> earlybird::Result<()> {
/// let universe = earlybird::init()?;
/// let world = universe.world();
/// let data = [1.0f64; 4];
/// let mut got = [0.0f64; 4];
/// let (right, left) = ((world.rank() + 1) % world.size(), (world.rank() + world.size() - 1) % world.size());
/// earlybird::scope(|s| -> earlybird::Result<()> {
///     let mut reqs = vec![world.irecv(s, &mut got, left, 0)?, world.isend(s, &data, right, 0)?];
///     earlybird::wait_all(&mut reqs)?;
///     Ok(())
/// })?;
/// # Ok(()) }
/// ```
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let s = Scope {
        ops: ScopeOps::default(),
        _scope: PhantomData,
        _env: PhantomData,
    };
    f(&s)
}
