//! Requests whose operation is made of several engine operations and some local work,
//! advanced by test and wait (and by their array forms): a nonblocking collective's
//! schedule, a communicator agreement (MPI_Comm_idup). Such a kind implements the small
//! [`Steps`] trait; [`Stepped`] makes it a [`Completion`].
#![forbid(unsafe_code)]

use super::completion::{Completion, Origin};
use super::{EngineRef, Request};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::status::Status;

/// An operation advanced step by step. It owns (or holds the loans of) every buffer its
/// engine operations use.
pub(crate) trait Steps: 'static {
    /// Advance without blocking: post what can be posted, collect what has completed.
    /// `Some` with the result once everything is done (then never called again).
    fn advance(&mut self, eng: &mut Engine) -> Option<Result<Status>>;
    /// What a long wait on it reports to the launcher.
    fn blocked(&self) -> Blocked;
    /// Its wait failed (the job is ending) and it is going away: withdraw what can be
    /// withdrawn.
    fn abandon(&mut self, eng: &mut Engine);
}

/// A nonblocking request carried out as [`Steps`].
pub(crate) struct Stepped<S> {
    steps: S,
    /// The result, once the steps are done and until it is collected.
    result: Option<Result<Status>>,
    active: bool,
}

impl<S: Steps> Stepped<S> {
    fn advance(&mut self, eng: &mut Engine) -> bool {
        if self.result.is_none() && self.active {
            self.result = self.steps.advance(eng);
        }
        self.result.is_some()
    }
}

impl<S: Steps> Completion for Stepped<S> {
    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if !self.advance(eng) {
            return None;
        }
        self.active = false;
        self.result.take()
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        self.advance(eng);
        self.result.clone()
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        Err(Error::new(
            ErrorClass::Request,
            "cancel of a request of a collective operation (MPI does not allow it)",
        ))
    }

    fn blocked_in(&self) -> Blocked {
        self.steps.blocked()
    }

    fn abandon(&mut self, eng: &mut Engine) {
        if self.result.is_none() {
            self.steps.abandon(eng);
        }
        self.active = false;
    }

    fn is_active(&self) -> bool {
        self.active
    }

    fn is_persistent(&self) -> bool {
        false
    }

    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        if self.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "request_free of an active request of a collective operation (complete it with wait or test)",
            ));
        }
        Ok(())
    }
}

impl<'s> Request<'s> {
    /// A nonblocking request carried out as `steps`, advanced once here so that its first
    /// messages leave at once.
    pub(crate) fn steps<S: Steps>(eng: &EngineRef, origin: Origin, steps: S) -> Request<'s> {
        let mut c = Stepped {
            steps,
            result: None,
            active: true,
        };
        c.advance(&mut eng.borrow_mut());
        Request::ext(eng, origin, Box::new(c))
    }
}
