//! request — one model for everything that completes (DESIGN.md layer 6).
//!
//! A [`Request`] is a nonblocking operation (complete once, then consumed) or a persistent
//! one (started and completed many times, inactive in between), of any kind: each kind
//! implements the `Completion` seam in its own module, and the
//! wait/test family ([`wait_all`], [`wait_any`], ...) works on arrays that mix them.
//!
//! | file | what |
//! |---|---|
//! | `completion.rs` | the seam, and a request's `Origin` (error handler, rank translation) |
//! | `pt2pt.rs` | point-to-point requests (the hot paths, dispatched without a virtual call) |
//! | `bundle.rs` | bundles of persistent requests ([`Bundle`], seed 000 proposal 4) |
//! | `complete.rs` | the wait/test family on arrays |
//! | `scope.rs` | [`Scope`]: the region buffers are lent for |
//! | `steps.rs` | requests advanced step by step (nonblocking collectives, communicator agreements) |
//!
//! # Buffer safety
//!
//! Requests borrow their buffers for the lifetime `'s` of a [`Scope`] (the pattern of
//! `std::thread::scope`): every operation that may touch a borrowed buffer is registered in
//! the scope, and the scope does not end until each of them has completed; then the
//! buffers' loans die (see `sys::lend`), so even an operation the settling missed could not
//! reach them. Dropping an active request cancels a pending receive and waits for a send;
//! forgetting one (`mem::forget`) leaves it to the scope.
//!
//! # Standard section(s)
//! MPI 4.1 §3.7 (nonblocking communication), §3.9 (persistent requests), §3.7.3-3.7.5
//! (wait/test and their any/all/some forms, request_free, request_get_status), §3.8 (cancel).
#![forbid(unsafe_code)]

mod bundle;
mod complete;
pub(crate) mod completion;
pub(crate) mod pt2pt;
mod scope;
pub(crate) mod steps;

pub use crate::sys::lend::Lending;
pub use bundle::Bundle;
pub use complete::{
    start_all, test_all, test_any, test_some, test_some_into, wait_all, wait_all_into, wait_any,
    wait_some, wait_some_into, Tested,
};
pub use scope::{endless_scope, scope, Scope, ScopeOps};

use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::status::Status;
use completion::{Completion, ExtCompletion, Origin};
use pt2pt::{NbOp, Persistent};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

pub(crate) type EngineRef = Rc<RefCell<Engine>>;

/// What a request is made of.
pub(crate) enum Body<'s> {
    Op(NbOp),
    Persistent(Persistent),
    Bundle(bundle::Members<'s>),
    Ext(Box<dyn ExtCompletion>),
    /// A run of [`steps::Steps`] (a nonblocking collective, an agreement): its run is
    /// allocated already (and often kept to start again), so it is held as it is, not boxed.
    Steps(steps::Stepped<dyn steps::Steps>),
}

/// Run `$e` with `$c` bound to the body's completion: a direct call for the built-in kinds,
/// a virtual one for the others.
macro_rules! with_completion {
    ($body:expr, $c:ident => $e:expr) => {
        match $body {
            Body::Op($c) => $e,
            Body::Persistent($c) => $e,
            Body::Bundle($c) => $e,
            Body::Steps($c) => $e,
            Body::Ext(b) => {
                let $c = &mut **b;
                $e
            }
        }
    };
}

/// A nonblocking send or receive started by [`Comm::isend_begun`](crate::Comm::isend_begun)
/// or [`Comm::irecv_begun`](crate::Comm::irecv_begun): complete at its start, with no request
/// made, or in flight.
#[derive(Debug)]
#[must_use = "a pending request must be waited on or tested to completion"]
pub enum Begun<'s> {
    /// It completed at its start: its status (what a wait on its request would have
    /// returned).
    Done(Status),
    /// It is in flight: its request.
    Pending(Request<'s>),
}

/// A communication request (MPI_Request): nonblocking or persistent, of any kind.
///
/// `'s` is the [`Scope`] its buffers are borrowed for.
#[must_use = "a request must be waited on or tested to completion"]
pub struct Request<'s> {
    eng: EngineRef,
    origin: Origin,
    body: Body<'s>,
    /// Whether the request is persistent (fixed when it is made).
    persistent: bool,
    /// A nonblocking request whose result has been collected (MPI_REQUEST_NULL in C).
    consumed: bool,
    _scope: PhantomData<&'s ()>,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("active", &self.is_active())
            .field("persistent", &self.is_persistent())
            .finish()
    }
}

impl<'s> Request<'s> {
    pub(crate) fn new(eng: &EngineRef, origin: Origin, body: Body<'s>) -> Request<'s> {
        let persistent = match &body {
            Body::Op(_) | Body::Steps(_) => false,
            Body::Persistent(_) | Body::Bundle(_) => true,
            Body::Ext(c) => c.is_persistent(),
        };
        Request {
            eng: eng.clone(),
            origin,
            body,
            persistent,
            consumed: false,
            _scope: PhantomData,
        }
    }

    /// A request of a kind defined outside this module.
    pub(crate) fn ext(eng: &EngineRef, origin: Origin, c: Box<dyn ExtCompletion>) -> Request<'s> {
        Request::new(eng, origin, Body::Ext(c))
    }

    /// A nonblocking point-to-point operation, started (`Ok(op)` on the engine) or complete
    /// at its start (`Err(result)`).
    #[inline(always)]
    pub(crate) fn nonblocking(
        eng: &EngineRef,
        origin: Origin,
        started: std::result::Result<crate::p2p::ops::OpId, Result<Status>>,
        blocked: Blocked,
    ) -> Request<'s> {
        Request::new(eng, origin, Body::Op(NbOp::new(started, blocked)))
    }

    /// An inactive persistent point-to-point request.
    pub(crate) fn persistent(eng: &EngineRef, origin: Origin, p: Persistent) -> Request<'s> {
        Request::new(eng, origin, Body::Persistent(p))
    }

    /// The completion of a kind defined outside this module, if this request is of kind `T`.
    pub(crate) fn ext_mut<T: ExtCompletion>(&mut self) -> Option<&mut T> {
        match &mut self.body {
            Body::Ext(b) => (&mut **b as &mut dyn std::any::Any).downcast_mut::<T>(),
            _ => None,
        }
    }

    /// [`ext_mut`](Self::ext_mut), shared.
    pub(crate) fn ext_ref<T: ExtCompletion>(&self) -> Option<&T> {
        match &self.body {
            Body::Ext(b) => (&**b as &dyn std::any::Any).downcast_ref::<T>(),
            _ => None,
        }
    }

    /// The persistent point-to-point request this is, if it is one.
    pub(crate) fn persistent_p2p(&mut self) -> Option<&mut Persistent> {
        match &mut self.body {
            Body::Persistent(p) => Some(p),
            _ => None,
        }
    }

    /// The endpoint the request belongs to.
    pub(crate) fn engine(&self) -> &EngineRef {
        &self.eng
    }

    /// Where its errors go and how its statuses translate.
    pub(crate) fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Whether this is a persistent request.
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    /// Whether the request is active (started and not yet completed by wait/test).
    pub fn is_active(&self) -> bool {
        !self.consumed
            && match &self.body {
                Body::Op(c) => c.is_active(),
                Body::Persistent(c) => c.is_active(),
                Body::Bundle(c) => c.is_active(),
                Body::Steps(c) => c.is_active(),
                Body::Ext(c) => c.is_active(),
            }
    }

    /// Whether this nonblocking request has been completed by wait or test already
    /// (the Rust counterpart of a handle set to MPI_REQUEST_NULL).
    /// What kind of request it is (point-to-point, a collective schedule, a channel, ...),
    /// for NO_MIXED_REQUESTS.
    pub(crate) fn kind(&self) -> &'static str {
        match &self.body {
            Body::Op(c) => c.kind(),
            Body::Persistent(c) => c.kind(),
            Body::Bundle(c) => c.kind(),
            Body::Steps(c) => c.kind(),
            Body::Ext(c) => c.kind(),
        }
    }

    pub fn is_null(&self) -> bool {
        self.consumed
            || match &self.body {
                Body::Op(c) => c.is_null(),
                Body::Persistent(c) => c.is_null(),
                Body::Bundle(c) => c.is_null(),
                Body::Steps(c) => c.is_null(),
                Body::Ext(c) => c.is_null(),
            }
    }

    fn consumed_error(what: &str) -> Error {
        Error::new(
            ErrorClass::Request,
            format!("{what} on a request that has already completed (a nonblocking request is consumed by its completion)"),
        )
    }

    /// A result collected from the completion: in the communicator's ranks, and a
    /// nonblocking request is consumed by it.
    #[inline(always)]
    fn collected(&mut self, r: Result<Status>) -> Result<Status> {
        if !self.persistent {
            self.consumed = true;
        }
        self.origin.to_ranks(r)
    }

    /// MPI_Start: start an inactive persistent request.
    #[inline(always)]
    pub fn start(&mut self) -> Result<()> {
        let r = match self.eng.try_borrow_mut() {
            Ok(mut e) => Request::start_body(self.consumed, &mut self.body, &mut e),
            Err(_) => Err(Request::engine_busy()),
        };
        self.origin.apply("start", r)
    }

    #[inline(always)]
    fn start_body(consumed: bool, body: &mut Body<'s>, e: &mut Engine) -> Result<()> {
        if consumed {
            return Err(Request::consumed_error("start"));
        }
        with_completion!(body, c => c.start(e)).map(|_| ())
    }

    #[cold]
    fn engine_busy() -> Error {
        Error::new(
            ErrorClass::Intern,
            "the request's endpoint is in use by another call (a call made from an error handler or a drop inside one)",
        )
    }

    /// [`start`](Self::start) on the engine, borrowed by the caller (a bundle, start_all).
    #[inline(always)]
    pub(crate) fn start_in(&mut self, e: &mut Engine) -> Result<()> {
        Request::start_body(self.consumed, &mut self.body, e)
    }

    /// Collect the result if complete (without waiting): `None` while in progress; the
    /// empty status for an inactive persistent request.
    #[inline(always)]
    pub(crate) fn poll_in(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        if !self.is_active() {
            return Some(Ok(Status::empty()));
        }
        let r = with_completion!(&mut self.body, c => c.poll(e))?;
        Some(self.collected(r))
    }

    /// Whether it is active and complete (without collecting).
    pub(crate) fn ready_in(&mut self, e: &mut Engine) -> bool {
        self.is_active() && with_completion!(&mut self.body, c => c.peek(e)).is_some()
    }

    /// What a long wait on it reports.
    pub(crate) fn blocked_in(&self) -> Option<Blocked> {
        if !self.is_active() {
            return None;
        }
        Some(match &self.body {
            Body::Op(c) => c.blocked_in(),
            Body::Persistent(c) => c.blocked_in(),
            Body::Bundle(c) => c.blocked_in(),
            Body::Steps(c) => c.blocked_in(),
            Body::Ext(c) => c.blocked_in(),
        })
    }

    /// Whether it may be started now.
    pub(crate) fn can_start(&self) -> bool {
        match &self.body {
            Body::Op(c) => c.can_start(),
            Body::Persistent(c) => c.can_start(),
            Body::Bundle(c) => c.can_start(),
            Body::Steps(c) => c.can_start(),
            Body::Ext(c) => c.can_start(),
        }
    }

    /// MPI_Wait: block until the request completes. A persistent request becomes inactive;
    /// a nonblocking one is consumed, and from then on behaves as MPI_REQUEST_NULL: a
    /// further wait, test or get_status returns the empty status at once, as does a wait on
    /// an inactive persistent request.
    #[inline(always)]
    pub fn wait(&mut self) -> Result<Status> {
        let r = match self.eng.try_borrow_mut() {
            Ok(mut e) => Request::wait_parts(
                &mut self.consumed,
                self.persistent,
                &mut self.body,
                &self.origin,
                &mut e,
            ),
            Err(_) => Err(Request::engine_busy()),
        };
        self.origin.apply("wait", r)
    }

    /// [`wait`](Self::wait) on the request's parts (its endpoint borrowed by the caller).
    #[inline(always)]
    fn wait_parts(
        consumed: &mut bool,
        persistent: bool,
        body: &mut Body<'s>,
        origin: &Origin,
        e: &mut Engine,
    ) -> Result<Status> {
        if *consumed || !with_completion!(&mut *body, c => c.is_active()) {
            return Ok(Status::empty());
        }
        let r = with_completion!(&mut *body, c => c.wait(e));
        if r.is_err() && with_completion!(&mut *body, c => c.is_active()) {
            // The job is ending: the request stays active (its operations own their
            // buffers); nothing was collected.
            return r;
        }
        if !persistent {
            *consumed = true;
        }
        origin.to_ranks(r)
    }

    /// The status of a nonblocking request that completed when it was started, collected as
    /// [`wait`](Self::wait) collects it, without driving progress: an eager send whose message
    /// went into the receiver's queue at once, a receive that matched a message that had
    /// arrived already. `None`, and nothing changes, when the request has an operation in
    /// flight, failed, is persistent or was collected. (What a library's lightweight
    /// completion of such calls rests on: the C ABI keeps no request for them.)
    #[inline]
    pub fn take_if_complete(&mut self) -> Option<Status> {
        if self.consumed {
            return None;
        }
        let Body::Op(op) = &mut self.body else {
            return None;
        };
        let st = op.take_done_ok()?;
        self.consumed = true;
        // A status in ranks of the communicator; only the source changes, so this is `Ok`.
        self.origin.to_ranks(Ok(st)).ok()
    }

    /// MPI_Test: `Some(status)` if the request completed (with the same state changes as
    /// [`wait`](Self::wait)), `None` if still in progress.
    pub fn test(&mut self) -> Result<Option<Status>> {
        let r = self.test_quiet();
        self.origin.apply("test", r)
    }

    /// [`test`](Self::test) with an error returned as it is, through no error handler: for
    /// a caller that reports it as its own.
    pub(crate) fn test_quiet(&mut self) -> Result<Option<Status>> {
        let eng = self.eng.clone();
        let mut e = eng.borrow_mut();
        e.progress();
        self.poll_in(&mut e).transpose()
    }

    /// MPI_Request_get_status: whether the request is complete, and its status if so,
    /// without collecting it (a later wait or test still returns the same status).
    pub fn get_status(&mut self) -> Result<Option<Status>> {
        if self.consumed {
            return Ok(Some(Status::empty()));
        }
        let eng = self.eng.clone();
        let mut e = eng.borrow_mut();
        e.progress();
        let r = if self.is_active() {
            with_completion!(&mut self.body, c => c.peek(&mut e)).transpose()
        } else {
            Ok(Some(Status::empty()))
        };
        drop(e);
        let r = r.and_then(|o| o.map(|st| self.origin.to_ranks(Ok(st))).transpose());
        self.origin.apply("request_get_status", r)
    }

    /// Whether [`wait`](Self::wait) would return at once (the request completed, failed,
    /// is inactive or was collected). It drives no progress (a caller testing many requests
    /// drives it once per pass), collects nothing and runs no error handler: for waits that
    /// try many times with a lock let go between tries, and then wait (the C ABI's
    /// MPI_THREAD_MULTIPLE).
    pub fn is_complete(&mut self) -> bool {
        if self.consumed || !self.is_active() {
            return true;
        }
        let eng = self.eng.clone();
        let mut e = eng.borrow_mut();
        with_completion!(&mut self.body, c => c.peek(&mut e)).is_some()
    }

    /// MPI_Cancel: withdraw a pending receive, or a send not yet matched. Complete the request
    /// with wait or test afterwards; `Status::is_cancelled` says whether it took effect.
    pub fn cancel(&mut self) -> Result<()> {
        let r = if self.consumed {
            Err(Error::new(
                ErrorClass::Request,
                "cancel of a request that has already completed",
            ))
        } else {
            let eng = self.eng.clone();
            let mut e = eng.borrow_mut();
            with_completion!(&mut self.body, c => c.cancel(&mut e))
        };
        self.origin.apply("cancel", r)
    }

    /// MPI_Request_free. Freeing is local: an active point-to-point operation, nonblocking
    /// or a started persistent one, goes on and completes on its own (a send is delivered, a
    /// receive fills its buffer); its buffer stays lent until then, and at the latest until
    /// the scope ends, which waits for a freed send and cancels a freed receive still
    /// unmatched. Freeing the active request of a collective operation is MPI_ERR_REQUEST
    /// (MPI calls it erroneous; the request is then completed as when dropped); other kinds
    /// say what freeing them means.
    pub fn free(mut self) -> Result<()> {
        if self.consumed {
            return Ok(());
        }
        let eng = self.eng.clone();
        let r = with_completion!(&mut self.body, c => c.free(&mut eng.borrow_mut()));
        self.origin.apply("request_free", r)
    }

    /// The buffer of an inactive persistent request, to read what the last receive brought
    /// or to write what the next send will carry (a persistent collective's receive buffer, a
    /// channel's whole circular buffer). MPI_ERR_REQUEST while the request is active or for a
    /// request that lends no buffer back; MPI_ERR_BUFFER for a buffer lent read-only or that
    /// cannot be viewed whole; MPI_ERR_TYPE if the bytes are not a whole, aligned number of
    /// `T`.
    pub fn buffer_mut<T: crate::datatype::Equivalence>(&mut self) -> Result<&mut [T]> {
        match with_completion!(&mut self.body, c => c.buffer(false)) {
            Ok(b) => as_elements(b),
            Err(e) => Err(e),
        }
    }

    /// The send buffer of an inactive persistent request lent as `&mut` (a persistent
    /// send's buffer, a persistent collective's send buffer), to change the data the next
    /// start sends. MPI_ERR_REQUEST while active; MPI_ERR_BUFFER if it was lent read-only
    /// (or the call was in place: use [`buffer_mut`](Self::buffer_mut)).
    pub fn send_buffer_mut<T: crate::datatype::Equivalence>(&mut self) -> Result<&mut [T]> {
        match with_completion!(&mut self.body, c => c.buffer(true)) {
            Ok(b) => as_elements(b),
            Err(e) => Err(e),
        }
    }
}

/// `bytes` as `[T]`, or MPI_ERR_TYPE naming both.
fn as_elements<T: crate::datatype::Equivalence>(bytes: &mut [u8]) -> Result<&mut [T]> {
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

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if self.consumed {
            return;
        }
        if !self.is_active() && !self.is_persistent() {
            return;
        }
        let Ok(mut e) = self.eng.try_borrow_mut() else {
            if !self.is_active() {
                return;
            }
            // Only reachable while unwinding out of the engine itself. A peer thread may still
            // read a send buffer this request lent (loans die with the scope, but a peer's
            // read of our memory cannot be revoked): stopping here is the only safe move.
            eprintln!("earlybird: request dropped while its endpoint is in use; aborting");
            std::process::abort();
        };
        with_completion!(&mut self.body, c => c.settle(&mut e));
    }
}
