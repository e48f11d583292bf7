//! The completion seam: what every kind of request does, whatever it is made of.
//!
//! A kind of request implements [`Completion`] in its own module: point-to-point operations
//! and persistent point-to-point (`pt2pt` here), bundles (`bundle` here), collective
//! schedules (`coll`), bound channels (`channel`), generalized requests (`grequest`),
//! communicator agreements (`comm`), and later RMA requests, sync counters and pmem commits.
//! [`Request`](super::Request) drives all of them the same way, and the wait/test family
//! takes arrays that mix them. Nothing here names any of those kinds.
//!
//! A request also carries its [`Origin`]: where its errors go (the error handler of the
//! communicator, or window, it was made on) and how the statuses it returns translate
//! endpoints into that communicator's ranks.
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::Engine;
use crate::p2p::ranks::{to_comm_ranks, RankMap};
use crate::p2p::wait::Blocked;
use crate::status::Status;
use std::any::Any;
use std::rc::Rc;

/// A kind of request that is `'static` (holds no borrow): it can live behind
/// `Box<dyn ExtCompletion>` in a [`Request`](super::Request) and be reached again by its
/// type ([`Request::ext_mut`](super::Request::ext_mut)).
pub(crate) trait ExtCompletion: Completion + Any {}
impl<T: Completion + Any> ExtCompletion for T {}

/// One kind of request. The engine of the request's endpoint is lent to every call.
///
/// A request is *active* from its start (a nonblocking one from its making) until the
/// result of its run has been collected by [`poll`](Self::poll) or [`wait`](Self::wait); a
/// persistent one is then *inactive* and may start again.
pub(crate) trait Completion {
    /// MPI_Start: begin a run of a persistent request. `Some(result)` when the run completed
    /// already (an eager send), to be returned by the next wait or test.
    fn start(&mut self, eng: &mut Engine) -> Result<Option<Result<Status>>> {
        let _ = eng;
        Err(Error::new(
            ErrorClass::Request,
            "start of a nonpersistent request (only *_init requests can be started)",
        ))
    }

    /// Advance without blocking: `Some(result)` of the oldest run once it has completed
    /// (collected: the request moves on), `None` while it is in progress.
    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>>;

    /// Block until the oldest run completes, and collect its result. An `Err` that comes
    /// from the job ending (not from the operation) leaves the request active.
    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        let blocked = self.blocked_in();
        eng.wait_for(blocked, |e| self.poll(e))?
    }

    /// Whether the oldest run has completed, without collecting it (MPI_Request_get_status):
    /// `Some(result)`, which a later poll or wait still returns.
    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>>;

    /// MPI_Cancel. Complete the request with wait or test afterwards.
    fn cancel(&mut self, eng: &mut Engine) -> Result<()>;

    /// What a long wait on it reports to the launcher.
    fn blocked_in(&self) -> Blocked;

    /// Its wait failed because the job is ending and the request is going away: withdraw
    /// what can be withdrawn, so that no operation outlives the buffers it uses.
    fn abandon(&mut self, eng: &mut Engine);

    /// Whether it is active (see the trait doc).
    fn is_active(&self) -> bool;

    /// Whether it is persistent (started many times).
    fn is_persistent(&self) -> bool;

    /// Its kind, as a multiple wait names it when NO_MIXED_REQUESTS is broken (by default
    /// the implementing type's name, without its path).
    fn kind(&self) -> &'static str {
        let t = std::any::type_name::<Self>();
        let base = t.split('<').next().unwrap_or(t);
        base.rsplit("::").next().unwrap_or(base)
    }

    /// Whether it has become a null request by a call of its own kind (an unbound channel);
    /// a nonblocking request becomes one when its result is collected, which the request
    /// layer tracks.
    fn is_null(&self) -> bool {
        false
    }

    /// The request is dropped (or its scope ends) while active: complete what may touch
    /// buffers. By default wait for it, abandoning it if the job is ending.
    fn settle(&mut self, eng: &mut Engine) {
        if self.is_active() && self.wait(eng).is_err() {
            self.abandon(eng);
        }
    }

    /// MPI_Request_free: what happens to the operation. By default freeing an inactive
    /// request is fine and freeing an active one is an error (MPI_ERR_REQUEST); either way
    /// the request is then settled as when dropped.
    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "request_free of an active request of this kind (complete it with wait or test first)",
            ));
        }
        Ok(())
    }

    /// Whether [`start`](Self::start) may be called now (a K-slack channel may start while
    /// earlier starts are outstanding).
    fn can_start(&self) -> bool {
        !self.is_active()
    }

    /// The bytes of the buffer a persistent request hands back between runs: its receive
    /// buffer (or, for a send, the one it sends), or with `send` the send buffer of a request
    /// that has both. MPI_ERR_REQUEST when this kind hands none out.
    fn buffer(&mut self, send: bool) -> Result<&mut [u8]> {
        let _ = send;
        Err(Error::new(
            ErrorClass::Request,
            "buffer_mut on a request that lends no buffer back (a nonblocking request, or a kind without one)",
        ))
    }
}

/// Where a request's errors go: the error handler of what it was made on.
pub(crate) trait ErrorSink {
    /// Run the handler on `e`, raised by call `what`; the error the call then returns (the
    /// handler may also end the job).
    fn raise(self: Rc<Self>, what: &str, e: Error) -> Error;
}

/// What a request keeps of the communicator (or window) it was made on.
#[derive(Clone)]
pub(crate) struct Origin {
    errh: Rc<dyn ErrorSink>,
    /// The communicator's rank translation (statuses carry endpoints until returned).
    map: Option<Rc<RankMap>>,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("ranks", &self.map.is_some())
            .finish()
    }
}

impl Origin {
    pub(crate) fn new(errh: Rc<dyn ErrorSink>, map: Option<Rc<RankMap>>) -> Origin {
        Origin { errh, map }
    }

    /// Pass a call's result through the error handler (one branch on success).
    #[inline(always)]
    pub(crate) fn apply<T>(&self, what: &str, r: Result<T>) -> Result<T> {
        match r {
            Err(e) => Err(self.errh.clone().raise(what, e)),
            ok => ok,
        }
    }

    /// A status (or the status in an error) in the communicator's ranks.
    #[inline(always)]
    pub(crate) fn to_ranks(&self, r: Result<Status>) -> Result<Status> {
        to_comm_ranks(&self.map, r)
    }

    /// The same error handler, for a request whose statuses are in ranks already.
    pub(crate) fn without_ranks(&self) -> Origin {
        Origin {
            errh: self.errh.clone(),
            map: None,
        }
    }

    /// The rank translation.
    pub(crate) fn ranks(&self) -> &Option<Rc<RankMap>> {
        &self.map
    }
}
