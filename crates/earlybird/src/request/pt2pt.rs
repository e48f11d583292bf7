//! Point-to-point requests: a nonblocking operation ([`NbOp`], complete once, then consumed)
//! and a persistent send or receive ([`Persistent`], started and completed many times).
//! These are the hot paths, so [`Request`](super::Request) dispatches to them without a
//! virtual call.
#![forbid(unsafe_code)]

use super::completion::Completion;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::BlockedIn;
use crate::p2p::engine::{Engine, SendMode, Started};
use crate::p2p::matching::Pattern;
use crate::p2p::ops::OpId;
use crate::p2p::wait::Blocked;
use crate::status::Status;
use crate::sys::lend::Loan;
use std::cell::RefCell;
use std::rc::Rc;

/// Where an operation is.
#[derive(Debug)]
enum Run {
    /// Not started (persistent), or collected.
    Idle,
    /// Complete already (at its start, or seen by get_status); the result waits here.
    Done(Result<Status>),
    /// In progress in the engine.
    Op(OpId),
}

/// A nonblocking point-to-point operation.
#[derive(Debug)]
pub(crate) struct NbOp {
    run: Run,
    blocked: Blocked,
}

impl NbOp {
    /// An operation started on the engine (`op`), or complete at its start (`done`).
    pub(crate) fn new(
        started: std::result::Result<OpId, Result<Status>>,
        blocked: Blocked,
    ) -> NbOp {
        let run = match started {
            Ok(op) => Run::Op(op),
            Err(r) => Run::Done(r),
        };
        NbOp { run, blocked }
    }

    /// The status of an operation that completed at its start with success, collected; `None`
    /// (nothing changes) when it is in flight, failed, or was collected.
    pub(crate) fn take_done_ok(&mut self) -> Option<Status> {
        match self.run {
            Run::Done(Ok(st)) if st.error() == ErrorClass::Success => {
                self.run = Run::Idle;
                Some(st)
            }
            _ => None,
        }
    }
}

/// The cancel of a send: MPIX_ERR_ASSERTION under NO_SEND_CANCELS.
#[inline]
fn no_send_cancels(eng: &Engine) -> Result<()> {
    let a = crate::assertions::Assertions::NO_SEND_CANCELS;
    if eng.assertions().contains(a) {
        return Err(crate::assertions::broken(
            "cancel",
            a,
            "cancel of a send request",
        ));
    }
    Ok(())
}

/// Collect `op` if it has completed.
#[inline(always)]
fn collect(eng: &mut Engine, op: OpId, bound: bool) -> Option<Result<Status>> {
    if !eng.is_done(op) {
        return None;
    }
    Some(if bound { eng.collect(op) } else { eng.take(op) })
}

impl Completion for NbOp {
    #[inline(always)]
    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let r = match &mut self.run {
            Run::Idle => return None,
            Run::Done(_) => match std::mem::replace(&mut self.run, Run::Idle) {
                Run::Done(r) => r,
                _ => unreachable!("matched Done"),
            },
            Run::Op(op) => collect(eng, *op, false)?,
        };
        self.run = Run::Idle;
        Some(r)
    }

    #[inline(always)]
    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        match std::mem::replace(&mut self.run, Run::Idle) {
            // Completed at its start: no engine call at all.
            Run::Done(r) => r,
            Run::Op(op) => {
                let r = eng.wait(op, self.blocked);
                if r.is_err() && !eng.is_done(op) {
                    // The wait failed before the operation completed (the job was aborted):
                    // it is still active and still holds its buffer.
                    self.run = Run::Op(op);
                }
                r
            }
            Run::Idle => Ok(Status::empty()),
        }
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if let Run::Op(op) = self.run {
            self.run = Run::Done(collect(eng, op, false)?);
        }
        match &self.run {
            Run::Done(r) => Some(r.clone()),
            _ => None,
        }
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        if matches!(self.blocked.what(), BlockedIn::Send) {
            no_send_cancels(eng)?;
        }
        if let Run::Op(op) = self.run {
            eng.cancel(op);
        }
        Ok(())
    }

    fn blocked_in(&self) -> Blocked {
        self.blocked
    }

    fn abandon(&mut self, eng: &mut Engine) {
        if let Run::Op(op) = self.run {
            eng.abandon(op);
        }
    }

    fn is_active(&self) -> bool {
        !matches!(self.run, Run::Idle)
    }

    fn is_persistent(&self) -> bool {
        false
    }

    fn kind(&self) -> &'static str {
        "point-to-point"
    }

    /// Dropped while active: a receive still posted is cancelled, anything else waited for.
    fn settle(&mut self, eng: &mut Engine) {
        if let Run::Op(op) = self.run {
            if matches!(self.blocked.what(), BlockedIn::Recv) {
                eng.cancel(op);
            }
            if eng.wait(op, self.blocked).is_err() && !eng.is_done(op) {
                eng.abandon(op);
            }
        }
        self.run = Run::Idle;
    }

    /// Freeing is local: the operation goes on and completes on its own (a send is
    /// delivered, a receive fills its buffer), holding its buffer until then; the scope ends
    /// only after it has.
    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        if let Run::Op(op) = self.run {
            eng.detach(op);
        }
        self.run = Run::Idle;
        Ok(())
    }
}

/// What a persistent point-to-point request does at each start.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Plan {
    Send {
        peer: i32,
        ctx: u32,
        tag: i32,
        mode: SendMode,
    },
    /// `None`: a receive from PROC_NULL.
    Recv { pat: Option<Pattern> },
}

impl Plan {
    fn blocked(&self) -> Blocked {
        match *self {
            Plan::Send { peer, ctx, tag, .. } => Blocked::send(peer, tag, ctx),
            Plan::Recv { pat: Some(p) } => Blocked::recv_matching(&p),
            Plan::Recv { pat: None } => {
                Blocked::recv(crate::status::PROC_NULL, crate::status::ANY_TAG, 0)
            }
        }
    }
}

/// A persistent request's buffer: its loan, lent exclusively to the request, or to a channel
/// bound from it while that channel exists (then `None` here).
pub(crate) type BufferSlot = Rc<RefCell<Option<Loan>>>;

/// A persistent point-to-point send or receive.
#[derive(Debug)]
pub(crate) struct Persistent {
    plan: Plan,
    buf: BufferSlot,
    run: Run,
    /// A receive's operation slot, bound at init and re-armed at each start.
    bound: Option<OpId>,
    /// The request scope its operations are tagged with.
    scope: u32,
}

impl Persistent {
    /// A persistent request with `plan` on `buf`, on `eng`, in request scope `scope`.
    pub(crate) fn new(eng: &mut Engine, plan: Plan, buf: Loan, scope: u32) -> Persistent {
        let bound = match plan {
            Plan::Recv { pat: Some(_) } => {
                let op = eng.recv_bind();
                eng.set_scope(op, scope);
                Some(op)
            }
            _ => None,
        };
        Persistent {
            plan,
            buf: Rc::new(RefCell::new(Some(buf))),
            run: Run::Idle,
            bound,
            scope,
        }
    }

    /// What it does at each start.
    pub(crate) fn plan(&self) -> Plan {
        self.plan
    }

    /// Its buffer's slot (a channel bound from it takes the loan out while it exists).
    pub(crate) fn buffer_slot(&self) -> &BufferSlot {
        &self.buf
    }

    fn lent_to_channel() -> Error {
        Error::new(
            ErrorClass::Request,
            "the request's buffer is lent to a channel bound from it: use the channel, or unbind it first",
        )
    }
}

impl Completion for Persistent {
    #[inline(always)]
    fn start(&mut self, eng: &mut Engine) -> Result<Option<Result<Status>>> {
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "start of an active persistent request (wait for it or test it to completion first)",
            ));
        }
        let slot = self.buf.borrow();
        let Some(buf) = slot.as_ref() else {
            return Err(Persistent::lent_to_channel());
        };
        match self.plan {
            Plan::Send {
                peer,
                ctx,
                tag,
                mode,
            } => match eng.send_start_as(peer, ctx, tag, buf, mode, true)? {
                Started::Done => {
                    drop(slot);
                    self.run = Run::Done(Ok(Status::empty()));
                    Ok(None)
                }
                Started::Op(op) => {
                    eng.set_scope(op, self.scope);
                    drop(slot);
                    self.run = Run::Op(op);
                    Ok(None)
                }
            },
            Plan::Recv { pat: None } => {
                drop(slot);
                self.run = Run::Done(Ok(Status::proc_null()));
                Ok(None)
            }
            Plan::Recv { pat: Some(p) } => {
                let op = self.bound.expect("a persistent receive is bound at init");
                // The slot gets a copy of the loan for this run and lets it go when
                // collected.
                eng.recv_rearm(op, p, buf.clone());
                drop(slot);
                self.run = match collect(eng, op, true) {
                    Some(r) => Run::Done(r),
                    None => Run::Op(op),
                };
                Ok(None)
            }
        }
    }

    #[inline(always)]
    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let r = match &mut self.run {
            Run::Idle => return None,
            Run::Done(_) => match std::mem::replace(&mut self.run, Run::Idle) {
                Run::Done(r) => r,
                _ => unreachable!("matched Done"),
            },
            Run::Op(op) => collect(eng, *op, self.bound == Some(*op))?,
        };
        self.run = Run::Idle;
        Some(r)
    }

    #[inline(always)]
    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        match std::mem::replace(&mut self.run, Run::Idle) {
            Run::Done(r) => r,
            Run::Op(op) => {
                let blocked = self.plan.blocked();
                let r = if self.bound == Some(op) {
                    eng.wait_bound(op, blocked)
                } else {
                    eng.wait(op, blocked)
                };
                if r.is_err() && !eng.is_done(op) {
                    self.run = Run::Op(op);
                }
                r
            }
            // Waiting on an inactive persistent request returns the empty status.
            Run::Idle => Ok(Status::empty()),
        }
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if let Run::Op(op) = self.run {
            self.run = Run::Done(collect(eng, op, self.bound == Some(op))?);
        }
        match &self.run {
            Run::Done(r) => Some(r.clone()),
            Run::Idle => Some(Ok(Status::empty())),
            Run::Op(_) => None,
        }
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        if matches!(self.plan, Plan::Send { .. }) {
            no_send_cancels(eng)?;
        }
        match self.run {
            Run::Op(op) => {
                eng.cancel(op);
                Ok(())
            }
            Run::Done(_) => Ok(()),
            Run::Idle => Err(Error::new(
                ErrorClass::Request,
                "cancel of an inactive persistent request",
            )),
        }
    }

    fn blocked_in(&self) -> Blocked {
        self.plan.blocked()
    }

    fn abandon(&mut self, eng: &mut Engine) {
        if let Run::Op(op) = self.run {
            eng.abandon(op);
        }
    }

    fn is_active(&self) -> bool {
        !matches!(self.run, Run::Idle)
    }

    fn is_persistent(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "point-to-point"
    }

    /// Going away: a receive still posted is cancelled, a send waited for; then the bound
    /// slot is given back.
    fn settle(&mut self, eng: &mut Engine) {
        if let Run::Op(op) = self.run {
            let blocked = self.plan.blocked();
            if matches!(self.plan, Plan::Recv { .. }) {
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
        self.run = Run::Idle;
        if let Some(op) = self.bound.take() {
            eng.unbind(op);
        }
    }

    /// Freeing is local (MPI 4.1 §3.9), active or not: a started run goes on and completes
    /// on its own (a send is delivered, a receive fills its buffer), its operation, the
    /// bound slot of a receive included, now the engine's to free when it completes. The
    /// buffer stays lent until then, and at the latest until the scope ends, which waits for
    /// a freed send and cancels a freed receive still unmatched.
    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        if let Run::Op(op) = std::mem::replace(&mut self.run, Run::Idle) {
            eng.detach(op);
            if self.bound == Some(op) {
                self.bound = None;
            }
        }
        Ok(())
    }

    fn buffer(&mut self, send: bool) -> Result<&mut [u8]> {
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "buffer_mut on an active persistent request (wait for it first)",
            ));
        }
        if send && matches!(self.plan, Plan::Recv { .. }) {
            return Err(Error::new(
                ErrorClass::Buffer,
                "send_buffer_mut on a persistent receive (it has no send buffer; use buffer_mut)",
            ));
        }
        let read_only = matches!(self.plan, Plan::Send { .. });
        // Shared while a channel bound from this request exists (or a bind is pending).
        let Some(slot) = Rc::get_mut(&mut self.buf) else {
            return Err(Persistent::lent_to_channel());
        };
        let Some(loan) = slot.get_mut().as_mut() else {
            return Err(Persistent::lent_to_channel());
        };
        let writable = loan.is_writable();
        loan.bytes_mut().ok_or_else(|| {
            if read_only && !writable {
                Error::new(ErrorClass::Buffer, "buffer_mut on a persistent send whose buffer was lent read-only (&[T]); lend it as &mut [T]")
            } else {
                Error::new(ErrorClass::Buffer, "buffer_mut on a buffer that cannot be handed out whole (its element type has padding, or it is a non-contiguous view from split_views)")
            }
        })
    }
}
