//! The wait/test family on arrays of requests, of any mix of kinds: `&mut [Request]`, or
//! an array of anything that lends a request mutably (`&mut [&mut Request]`, a
//! `[Channel]`, a `[Bundle]`, ...).
#![forbid(unsafe_code)]

use super::{EngineRef, Request};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::wait::Blocked;
use crate::status::Status;
use std::rc::Rc;

/// MPI_Startall: start every request of the array, in order; each must be an inactive
/// persistent request. Stops at the first that cannot be started (MPI_ERR_REQUEST), leaving
/// the ones before it started.
pub fn start_all<'s, R: std::borrow::BorrowMut<Request<'s>>>(reqs: &mut [R]) -> Result<()> {
    for r in reqs.iter_mut() {
        r.borrow_mut().start()?;
    }
    Ok(())
}

/// All requests of an array must belong to one endpoint.
fn one_engine<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    what: &str,
) -> Result<Option<EngineRef>> {
    let Some(first) = reqs.first_mut() else {
        return Ok(None);
    };
    let eng = first.borrow_mut().eng.clone();
    if reqs
        .iter_mut()
        .any(|r| !Rc::ptr_eq(&r.borrow_mut().eng, &eng))
    {
        let e = Error::new(
            ErrorClass::Request,
            format!("{what}: requests of different endpoints in one array"),
        );
        return apply(reqs, what, Err(e));
    }
    let mixing = crate::assertions::Assertions::NO_MIXED_REQUESTS;
    if eng.borrow().assertions().contains(mixing) {
        let mut kinds = reqs
            .iter_mut()
            .map(|r| r.borrow_mut())
            .filter(|r| !r.is_null())
            .map(|r| r.kind());
        if let Some(k) = kinds.next() {
            if let Some(other) = kinds.find(|o| *o != k) {
                let e = crate::assertions::broken(
                    what,
                    mixing,
                    &format!("requests of two kinds ({k} and {other}) in one array"),
                );
                return apply(reqs, what, Err(e));
            }
        }
    }
    Ok(Some(eng))
}

/// Pass a result through the error handler of the array's first request.
fn apply<'s, R: std::borrow::BorrowMut<Request<'s>>, T>(
    reqs: &mut [R],
    what: &str,
    r: Result<T>,
) -> Result<T> {
    match reqs.first_mut() {
        Some(q) => q.borrow_mut().origin.apply(what, r),
        None => r,
    }
}

/// What a long wait on the array reports: the first active request's.
fn first_blocked<'s, R: std::borrow::BorrowMut<Request<'s>>>(reqs: &mut [R]) -> Blocked {
    reqs.iter_mut()
        .find_map(|r| r.borrow_mut().blocked_in())
        .map_or(Blocked::wait(), Blocked::as_wait)
}

fn settled<'s, R: std::borrow::BorrowMut<Request<'s>>>(r: &mut R) -> bool {
    !r.borrow_mut().is_active()
}

/// A failed request's status, with its own error class (as MPI fills MPI_ERROR).
fn failed_status(err: &Error) -> Status {
    let mut st = err.status().copied().unwrap_or_default();
    st.error = err.class();
    st
}

/// MPI_Waitall: wait for every request. On failure the error is MPI_ERR_IN_STATUS naming the
/// requests that failed; use [`wait_all_into`] to get each request's status (with its own
/// error class) as well.
pub fn wait_all<'s, R: std::borrow::BorrowMut<Request<'s>>>(reqs: &mut [R]) -> Result<Vec<Status>> {
    let mut out = vec![Status::empty(); reqs.len()];
    wait_all_into(reqs, &mut out).map(|()| out)
}

/// MPI_Waitall with a statuses array: fills `statuses[i]` for every request, also when some
/// failed (then the error is MPI_ERR_IN_STATUS and each status says its own error class, as
/// MPI fills MPI_ERROR). `statuses` must be as long as `reqs` (MPI_ERR_ARG otherwise).
pub fn wait_all_into<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    statuses: &mut [Status],
) -> Result<()> {
    if statuses.len() != reqs.len() {
        let e = Error::new(
            ErrorClass::Arg,
            format!(
                "wait_all_into: {} statuses for {} requests",
                statuses.len(),
                reqs.len()
            ),
        );
        return apply(reqs, "wait_all", Err(e));
    }
    let Some(eng) = one_engine(reqs, "wait_all")? else {
        return Ok(());
    };
    let out = statuses;
    let mut failed = vec![];
    let waited = {
        let mut e = eng.borrow_mut();
        let blocked = first_blocked(reqs);
        // Collect in array order, looking past the first incomplete request only once it
        // completes: each completion is then seen once, however the frames trickle in.
        let mut next = 0;
        e.wait_for(blocked, |e| {
            while next < reqs.len() {
                let r = reqs[next].borrow_mut();
                if r.is_null() {
                    // A request completed earlier (by wait_any, say) is MPI_REQUEST_NULL in
                    // the array: ignored, with the empty status.
                    out[next] = Status::empty();
                    next += 1;
                    continue;
                }
                match r.poll_in(e) {
                    None => return None,
                    Some(Ok(st)) => out[next] = st,
                    Some(Err(err)) => {
                        out[next] = failed_status(&err);
                        failed.push(format!("request {next}: {err}"));
                    }
                }
                next += 1;
            }
            Some(())
        })
    };
    if let Err(err) = waited {
        return apply(reqs, "wait_all", Err(err));
    }
    let r = if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::new(ErrorClass::InStatus, failed.join("; ")))
    };
    apply(reqs, "wait_all", r)
}

/// MPI_Testall: all statuses if every request is complete, else `None` (and nothing is
/// collected).
pub fn test_all<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
) -> Result<Option<Vec<Status>>> {
    let Some(eng) = one_engine(reqs, "test_all")? else {
        return Ok(Some(vec![]));
    };
    let all = {
        let mut e = eng.borrow_mut();
        e.progress();
        // Consumed entries are MPI_REQUEST_NULL: complete, with the empty status.
        reqs.iter_mut().all(|r| {
            let r = r.borrow_mut();
            r.ready_in(&mut e) || !r.is_active()
        })
    };
    if !all {
        return Ok(None);
    }
    wait_all(reqs).map(Some)
}

/// MPI_Waitany: wait until one active request completes; `None` (MPI_UNDEFINED) when none
/// is active.
pub fn wait_any<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
) -> Result<Option<(usize, Status)>> {
    let Some(eng) = one_engine(reqs, "wait_any")? else {
        return Ok(None);
    };
    if reqs.iter_mut().all(settled) {
        return Ok(None);
    }
    let r = {
        let mut e = eng.borrow_mut();
        let blocked = first_blocked(reqs);
        e.wait_for(blocked, |e| {
            reqs.iter_mut()
                .enumerate()
                .filter_map(|(i, r)| {
                    let r = r.borrow_mut();
                    r.is_active().then_some((i, r))
                })
                .find_map(|(i, r)| r.poll_in(e).map(|res| (i, res)))
        })
    };
    let (i, res) = match r {
        Ok(v) => v,
        Err(err) => return apply(reqs, "wait_any", Err(err)),
    };
    apply(reqs, "wait_any", res.map(|st| Some((i, st))))
}

/// What [`test_any`] and [`test_some`] found: MPI's flag (or outcount) and its
/// MPI_UNDEFINED case told apart.
#[derive(Clone, Debug, PartialEq)]
pub enum Tested<T> {
    /// These completed now and were collected (flag true; outcount at least 1).
    Completed(T),
    /// Active requests remain and none of them has completed yet (flag false; outcount 0).
    Pending,
    /// No request in the array is active (index, or outcount, MPI_UNDEFINED; flag true).
    NoneActive,
}

impl<T> Tested<T> {
    /// What completed, if anything did.
    pub fn completed(self) -> Option<T> {
        match self {
            Tested::Completed(t) => Some(t),
            _ => None,
        }
    }

    /// Whether something completed.
    pub fn is_completed(&self) -> bool {
        matches!(self, Tested::Completed(_))
    }

    /// Whether the array held no active request.
    pub fn is_none_active(&self) -> bool {
        matches!(self, Tested::NoneActive)
    }
}

/// MPI_Testany: one completed request, if any; [`Tested::NoneActive`] when no request is
/// active (MPI's index MPI_UNDEFINED), [`Tested::Pending`] when active ones remain and none
/// has completed.
pub fn test_any<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
) -> Result<Tested<(usize, Status)>> {
    let Some(eng) = one_engine(reqs, "test_any")? else {
        return Ok(Tested::NoneActive);
    };
    if reqs.iter_mut().all(settled) {
        return Ok(Tested::NoneActive);
    }
    let found = {
        let mut e = eng.borrow_mut();
        e.progress();
        reqs.iter_mut()
            .enumerate()
            .filter_map(|(i, r)| {
                let r = r.borrow_mut();
                r.is_active().then_some((i, r))
            })
            .find_map(|(i, r)| r.poll_in(&mut e).map(|res| (i, res)))
    };
    match found {
        None => Ok(Tested::Pending),
        Some((i, res)) => apply(reqs, "test_any", res.map(|st| Tested::Completed((i, st)))),
    }
}

/// MPI_Waitsome: wait until at least one active request completes; returns every one that
/// has (index, status). Empty when none is active. On failure the error is
/// MPI_ERR_IN_STATUS naming the requests that failed; use [`wait_some_into`] to learn which
/// completed as well.
pub fn wait_some<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
) -> Result<Vec<(usize, Status)>> {
    let mut done = vec![];
    wait_some_into(reqs, &mut done).map(|()| done)
}

/// MPI_Waitsome with MPI's outputs on failure: `done` receives (index, status) of every
/// request that completed, those that failed included (their status says its own error
/// class, as MPI fills MPI_ERROR), and the result is then MPI_ERR_IN_STATUS naming the
/// failed ones. `done` stays empty when no request is active.
pub fn wait_some_into<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    done: &mut Vec<(usize, Status)>,
) -> Result<()> {
    done.clear();
    let Some(eng) = one_engine(reqs, "wait_some")? else {
        return Ok(());
    };
    if reqs.iter_mut().all(settled) {
        return Ok(());
    }
    let waited = {
        let mut e = eng.borrow_mut();
        let blocked = first_blocked(reqs);
        e.wait_for(blocked, |e| {
            reqs.iter_mut()
                .any(|r| r.borrow_mut().ready_in(e))
                .then_some(())
        })
    };
    if let Err(err) = waited {
        return apply(reqs, "wait_some", Err(err));
    }
    test_some_into(reqs, done).map(|_| ())
}

/// MPI_Testsome: every active request that has completed (index, status);
/// [`Tested::NoneActive`] when no request is active (MPI's outcount MPI_UNDEFINED),
/// [`Tested::Pending`] when active ones remain and none has completed. On failure the error
/// is MPI_ERR_IN_STATUS; [`test_some_into`] keeps which completed.
pub fn test_some<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
) -> Result<Tested<Vec<(usize, Status)>>> {
    let mut done = vec![];
    Ok(match test_some_into(reqs, &mut done)? {
        Tested::Completed(()) => Tested::Completed(done),
        Tested::Pending => Tested::Pending,
        Tested::NoneActive => Tested::NoneActive,
    })
}

/// MPI_Testsome with MPI's outputs on failure (see [`wait_some_into`]): `done` receives every
/// request that completed, failed ones included, and the result says whether any did.
pub fn test_some_into<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    done: &mut Vec<(usize, Status)>,
) -> Result<Tested<()>> {
    done.clear();
    let Some(eng) = one_engine(reqs, "test_some")? else {
        return Ok(Tested::NoneActive);
    };
    if reqs.iter_mut().all(settled) {
        return Ok(Tested::NoneActive);
    }
    let mut failed = vec![];
    {
        let mut e = eng.borrow_mut();
        e.progress();
        for (i, r) in reqs.iter_mut().enumerate() {
            let r = r.borrow_mut();
            if !r.is_active() {
                continue;
            }
            match r.poll_in(&mut e) {
                None => {}
                Some(Ok(st)) => done.push((i, st)),
                Some(Err(err)) => {
                    done.push((i, failed_status(&err)));
                    failed.push(format!("request {i}: {err}"));
                }
            }
        }
    }
    let r = if !failed.is_empty() {
        Err(Error::new(ErrorClass::InStatus, failed.join("; ")))
    } else if done.is_empty() {
        Ok(Tested::Pending)
    } else {
        Ok(Tested::Completed(()))
    };
    apply(reqs, "test_some", r)
}
