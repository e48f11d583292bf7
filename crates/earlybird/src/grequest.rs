//! Generalized requests (MPI 4.1 §13.2): requests whose operation the program carries out
//! itself (on another thread, say) and completes with [`GrequestCompleter::complete`]. They
//! are requests like any other: wait, test, the wait/test family, cancel and free take them.
//!
//! This kind lives outside `request/`: it implements the request layer's completion seam
//! and nothing in `request/` knows it exists.
//!
//! # The callbacks
//!
//! * `query` fills the status a completion returns (source, tag, element count, cancelled).
//!   It is called by the wait or test that completes the request, and by `get_status` once
//!   the request is complete (so possibly several times).
//! * `free` releases the program's state: called once, after `query`, by the wait or test
//!   that completes the request; or, for a request freed with [`Request::free`], by that call
//!   if the request is complete already, else by [`GrequestCompleter::complete`].
//! * `cancel` is called by [`Request::cancel`] with whether the request is complete.
//!
//! A callback's error is what the call that ran it returns (of `query` and `free` run by one
//! completion, `free`'s, as MPI says). The callbacks are `Send`: the completer may be on
//! another thread, and `free` then runs there.
//!
//! # Standard section(s)
//! MPI 4.1 §13.2 (generalized requests), §13.3 (MPI_Status_set_elements, set_cancelled).
#![forbid(unsafe_code)]

use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::request::completion::Completion;
use crate::request::Request;
use crate::status::Status;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A generalized request's free callback.
type FreeFn = Box<dyn FnOnce() -> Result<()> + Send>;
/// The query callback: fills the status wait and test return.
type QueryFn = Box<dyn FnMut(&mut Status) -> Result<()> + Send>;
/// The cancel callback, told whether the request had completed.
type CancelFn = Box<dyn FnMut(bool) -> Result<()> + Send>;

/// What the request and its completer share.
struct Shared {
    /// Set by `complete` (mirrors `state.done`, read without the lock by polls).
    done: AtomicBool,
    state: Mutex<State>,
}

struct State {
    done: bool,
    /// The free callback of a request freed before it completed: `complete` runs it.
    orphan: Option<FreeFn>,
}

/// The handle that completes a generalized request (MPI_Grequest_complete). It may be
/// cloned and sent to another thread.
#[derive(Clone)]
pub struct GrequestCompleter(Arc<Shared>);

impl std::fmt::Debug for GrequestCompleter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrequestCompleter")
            .field("done", &self.0.done.load(Ordering::Relaxed))
            .finish()
    }
}

impl GrequestCompleter {
    /// MPI_Grequest_complete: the operation is done; a wait on the request returns. If the
    /// request was freed before, its `free` callback runs here (and its error is returned).
    /// MPI_ERR_REQUEST if the request was completed already.
    pub fn complete(&self) -> Result<()> {
        let orphan = {
            let mut st = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
            if st.done {
                return Err(Error::new(
                    ErrorClass::Request,
                    "grequest_complete of a generalized request completed already",
                ));
            }
            st.done = true;
            self.0.done.store(true, Ordering::Release);
            st.orphan.take()
        };
        orphan.map_or(Ok(()), |f| f())
    }
}

/// The completion of a generalized request.
struct Grequest {
    shared: Arc<Shared>,
    query: QueryFn,
    free: Option<FreeFn>,
    cancel: CancelFn,
    /// Not yet collected, freed or dropped.
    active: bool,
}

impl Grequest {
    fn is_done(&self) -> bool {
        self.shared.done.load(Ordering::Acquire)
    }

    /// The status `query` gives.
    fn queried(&mut self) -> Result<Status> {
        let mut st = Status::empty();
        (self.query)(&mut st).map(|()| st)
    }

    /// Let go of the request before it is collected: run `free` now if it is complete, else
    /// leave it to the completer.
    fn release(&mut self) -> Result<()> {
        self.active = false;
        let Some(f) = self.free.take() else {
            return Ok(());
        };
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.done {
            drop(st);
            return f();
        }
        st.orphan = Some(f);
        Ok(())
    }
}

impl Completion for Grequest {
    fn kind(&self) -> &'static str {
        "generalized"
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let _ = eng;
        if !self.active || !self.is_done() {
            return None;
        }
        self.active = false;
        let q = self.queried();
        let f = self.free.take().map_or(Ok(()), |f| f());
        // Of the two callbacks, the error of the last (free) is the call's.
        Some(match (q, f) {
            (_, Err(e)) => Err(e),
            (q, Ok(())) => q,
        })
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let _ = eng;
        (self.active && self.is_done()).then(|| self.queried())
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        let complete = self.is_done();
        (self.cancel)(complete)
    }

    fn blocked_in(&self) -> Blocked {
        Blocked::wait()
    }

    fn abandon(&mut self, eng: &mut Engine) {
        let _ = eng;
    }

    fn is_active(&self) -> bool {
        self.active
    }

    fn is_persistent(&self) -> bool {
        false
    }

    /// Dropped without completion: as freed (the program's operation touches no buffer of
    /// the library's).
    fn settle(&mut self, eng: &mut Engine) {
        let _ = eng;
        if self.active {
            let _ = self.release();
        }
    }

    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        self.release()
    }
}

impl Comm {
    /// MPI_Grequest_start: a generalized request with the callbacks `query`, `free` and
    /// `cancel` (see the [module doc](crate::grequest)), active until the returned completer
    /// completes it. Errors of calls on the request go to this communicator's error
    /// handler. The program's state lives in what the closures capture.
    pub fn grequest_start(
        &self,
        query: impl FnMut(&mut Status) -> Result<()> + Send + 'static,
        free: impl FnOnce() -> Result<()> + Send + 'static,
        cancel: impl FnMut(bool) -> Result<()> + Send + 'static,
    ) -> Result<(Request<'static>, GrequestCompleter)> {
        let r = self.check_live().map(|()| {
            let shared = Arc::new(Shared {
                done: AtomicBool::new(false),
                state: Mutex::new(State {
                    done: false,
                    orphan: None,
                }),
            });
            let g = Grequest {
                shared: shared.clone(),
                query: Box::new(query),
                free: Some(Box::new(free)),
                cancel: Box::new(cancel),
                active: true,
            };
            (
                Request::ext(&self.eng, self.origin().without_ranks(), Box::new(g)),
                GrequestCompleter(shared),
            )
        });
        self.ret("grequest_start", r)
    }
}
