//! Requests whose operation is made of several engine operations and some local work: a
//! nonblocking or persistent collective's schedule, a communicator agreement
//! (MPI_Comm_idup). Such a kind implements the small [`Steps`] trait; a [`Run`] of it is
//! advanced by its request's test and wait and, while active, by every progress call of the
//! engine (`p2p::background`), whatever that call waits for; [`Stepped`] makes a nonblocking
//! one a [`Completion`].
#![forbid(unsafe_code)]

use super::completion::{Completion, Origin};
use super::{EngineRef, Request};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::background::Background;
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::status::Status;
use std::cell::RefCell;
use std::rc::{Rc, Weak};

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
    /// Whether it has engine operations still to post: only then must progress calls
    /// advance it (what is posted already is moved on by frames alone, and its local steps
    /// can wait for its own test or wait).
    fn posts_more(&self) -> bool {
        true
    }
}

/// A run of [`Steps`]: the steps, whether the run is active, and its result once they are
/// done and until it is collected. Shared between its request and the engine's background
/// list (see `p2p::background`), which advances it from every progress call.
pub(crate) struct Run<S: ?Sized> {
    /// The result, once the steps are done and until it is collected.
    result: Option<Result<Status>>,
    active: bool,
    /// On the engine's background list (once at most, however often it is started).
    listed: bool,
    /// Last, so that a run may be held as `Run<dyn Steps>` (its request's).
    steps: S,
}

/// A [`Run`] as its request and the engine's background list hold it.
pub(crate) type SharedRun<S> = Rc<RefCell<Run<S>>>;

/// A run held by its request, whatever its kind of steps.
type AnyRun = Rc<RefCell<Run<dyn Steps>>>;

impl<S: Steps> Run<S> {
    /// An inactive run of `steps`.
    pub(crate) fn new(steps: S) -> SharedRun<S> {
        Rc::new(RefCell::new(Run {
            steps,
            result: None,
            active: false,
            listed: false,
        }))
    }

    /// Begin a run of `this` (its steps set up for it): advance it once, so that its first
    /// messages leave at once, and if it has more to post than that, put it on the engine's
    /// background list.
    pub(crate) fn begin(this: &SharedRun<S>, eng: &mut Engine) {
        let list = {
            let mut r = this.borrow_mut();
            r.result = None;
            r.active = true;
            let pending = !r.advance(eng) && r.steps.posts_more();
            let list = pending && !r.listed;
            r.listed |= list;
            list
        };
        if list {
            let weak: Weak<RefCell<dyn Background>> = Rc::downgrade(this) as _;
            eng.advance_in_background(weak);
        }
    }
}

impl<S: Steps + ?Sized> Run<S> {
    /// Advance; whether the run's result is there.
    fn advance(&mut self, eng: &mut Engine) -> bool {
        if self.result.is_none() && self.active {
            self.result = self.steps.advance(eng);
        }
        self.result.is_some()
    }

    /// The steps.
    pub(crate) fn steps(&self) -> &S {
        &self.steps
    }

    /// The steps, to set up a run.
    pub(crate) fn steps_mut(&mut self) -> &mut S {
        &mut self.steps
    }
}

impl<S: Steps> Background for Run<S> {
    fn advance_in_background(&mut self, eng: &mut Engine) -> bool {
        let keep = !self.advance(eng) && self.active;
        self.listed = keep;
        keep
    }
}

impl<S: Steps + ?Sized> Run<S> {
    /// Advance; the result once the run has completed (collected: the run is over).
    pub(crate) fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if self.result.is_none() {
            if !self.active {
                return None;
            }
            // Handed straight back, not stored and taken again.
            let r = self.steps.advance(eng)?;
            self.active = false;
            return Some(r);
        }
        self.active = false;
        self.result.take()
    }

    /// Advance; the result once the run has completed, left for a later poll.
    pub(crate) fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        self.advance(eng);
        self.result.clone()
    }

    /// Block until the run completes and collect its result. The run stays borrowed for the
    /// whole wait, so the engine's background pass (which would advance it a second time
    /// per turn) passes it over and advances only the others.
    pub(crate) fn wait(this: &SharedRun<S>, eng: &mut Engine) -> Result<Status> {
        let mut r = this.borrow_mut();
        if let Some(x) = r.poll(eng) {
            return x;
        }
        let blocked = r.steps.blocked();
        eng.wait_for(blocked, |e| r.poll(e))?
    }

    /// Give the run up (its wait failed: the job is ending).
    pub(crate) fn abandon(&mut self, eng: &mut Engine) {
        if self.active && self.result.is_none() {
            self.steps.abandon(eng);
        }
        self.active = false;
    }

    /// Whether a run is active (begun, its result not collected).
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }
}

/// A nonblocking request carried out as [`Steps`].
pub(crate) struct Stepped<S: ?Sized>(SharedRun<S>);

impl<S: Steps + ?Sized> Completion for Stepped<S> {
    fn kind(&self) -> &'static str {
        "collective"
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        self.0.borrow_mut().poll(eng)
    }

    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        Run::wait(&self.0, eng)
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        self.0.borrow_mut().peek(eng)
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        Err(Error::new(
            ErrorClass::Request,
            "cancel of a request of a collective operation (MPI does not allow it)",
        ))
    }

    fn blocked_in(&self) -> Blocked {
        self.0.borrow().steps.blocked()
    }

    fn abandon(&mut self, eng: &mut Engine) {
        self.0.borrow_mut().abandon(eng);
    }

    fn is_active(&self) -> bool {
        self.0.borrow().active
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
        Request::steps_run(eng, origin, Run::new(steps))
    }

    /// [`steps`](Self::steps) on a run made earlier, inactive and set up for this one (a
    /// run kept to be started again).
    pub(crate) fn steps_run<S: Steps>(
        eng: &EngineRef,
        origin: Origin,
        run: SharedRun<S>,
    ) -> Request<'s> {
        Run::begin(&run, &mut eng.borrow_mut());
        let run: AnyRun = run;
        Request::new(eng, origin, super::Body::Steps(Stepped(run)))
    }
}
