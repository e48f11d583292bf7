//! Bundles (seed 000, proposal 4): a persistent request made of persistent requests of any
//! kind (point-to-point, collective, bound channels, other bundles), started and completed
//! as one.
#![forbid(unsafe_code)]

use super::completion::Completion;
use super::{Body, Request};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::status::Status;
use std::rc::Rc;

/// A bundle's members (its completion).
pub(crate) struct Members<'s> {
    reqs: Vec<Request<'s>>,
}

impl Completion for Members<'_> {
    /// Start every member in order. Nothing is started when a member cannot start now.
    fn start(&mut self, eng: &mut Engine) -> Result<Option<Result<Status>>> {
        if let Some(i) = self.reqs.iter().position(|m| !m.can_start()) {
            return Err(Error::new(
                ErrorClass::Request,
                format!("start of a bundle whose member {i} is still active"),
            ));
        }
        for (i, m) in self.reqs.iter_mut().enumerate() {
            if let Err(e) = m.start_in(eng) {
                return Err(Error::new(
                    e.class(),
                    format!(
                        "bundle member {i}: {} (the members before it were started)",
                        e.detail()
                    ),
                ));
            }
        }
        Ok(None)
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if !self
            .reqs
            .iter_mut()
            .all(|m| m.ready_in(eng) || !m.is_active())
        {
            return None;
        }
        Some(bundle_result(self.reqs.iter_mut().map(|m| m.poll_in(eng))))
    }

    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        let blocked = self.blocked_in();
        eng.wait_for(blocked, |e| {
            self.reqs
                .iter_mut()
                .all(|m| m.ready_in(e) || !m.is_active())
                .then_some(())
        })?;
        self.poll(eng).unwrap_or(Ok(Status::empty()))
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        self.reqs
            .iter_mut()
            .all(|m| m.ready_in(eng) || !m.is_active())
            .then(|| Ok(Status::empty()))
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        Err(Error::new(
            ErrorClass::Request,
            "cancel of a bundle (cancel its members instead)",
        ))
    }

    fn blocked_in(&self) -> Blocked {
        self.reqs
            .iter()
            .find_map(|m| m.blocked_in())
            .map_or(Blocked::wait(), Blocked::as_wait)
    }

    fn abandon(&mut self, eng: &mut Engine) {
        let _ = eng;
        // Each member abandons what it holds when it is dropped with its bundle.
    }

    fn is_active(&self) -> bool {
        self.reqs.iter().any(|m| m.is_active())
    }

    fn is_persistent(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "bundle"
    }

    fn settle(&mut self, eng: &mut Engine) {
        let _ = eng;
        // The members settle themselves when they are dropped with the bundle.
    }
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

/// A bundle (seed 000, proposal 4: a persistent generalized request) of persistent
/// requests: point-to-point, collective, bound channels, or other bundles. Starting it
/// starts every member in order; it completes, with the empty status, when every member
/// has (MPI_ERR_IN_STATUS naming the members that failed). It is a [`Request`] (through
/// `Deref`), so it starts, waits and joins the wait/test family as one.
///
/// # Standard section(s)
/// None: seed 000, proposal 4 (bundles), on MPI 4.1 §3.9 persistent requests.
pub struct Bundle<'s>(Request<'s>);

impl std::fmt::Debug for Bundle<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Bundle").field(&self.0).finish()
    }
}

impl<'s> Bundle<'s> {
    /// A bundle of `members`, which must be persistent, inactive, and of one endpoint
    /// (MPI_ERR_REQUEST otherwise; MPI_ERR_ARG for none). [`member_mut`](Self::member_mut)
    /// reaches them between starts, and dropping the bundle drops them.
    pub fn new(members: Vec<Request<'s>>) -> Result<Bundle<'s>> {
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
        let (eng, origin) = (first.eng.clone(), first.origin.clone());
        Ok(Bundle(Request::new(
            &eng,
            origin,
            Body::Bundle(Members { reqs: members }),
        )))
    }

    fn members(&mut self) -> &mut Vec<Request<'s>> {
        match &mut self.0.body {
            Body::Bundle(m) => &mut m.reqs,
            _ => unreachable!("a Bundle's request is a bundle"),
        }
    }

    /// Member `i`, to reach its buffers between starts (MPI_ERR_REQUEST while the bundle is
    /// active; MPI_ERR_ARG past the end).
    pub fn member_mut(&mut self, i: usize) -> Result<&mut Request<'s>> {
        if self.0.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "member_mut on an active bundle (wait for it first)",
            ));
        }
        let m = self.members();
        let n = m.len();
        m.get_mut(i).ok_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                format!("member_mut({i}) of a bundle of {n} members"),
            )
        })
    }

    /// The members, taken back (the bundle is gone); MPI_ERR_REQUEST while it is active.
    pub fn into_members(mut self) -> Result<Vec<Request<'s>>> {
        if self.0.is_active() {
            return Err(Error::new(
                ErrorClass::Request,
                "into_members on an active bundle (wait for it first)",
            ));
        }
        Ok(std::mem::take(self.members()))
    }
}

impl<'s> std::ops::Deref for Bundle<'s> {
    type Target = Request<'s>;
    fn deref(&self) -> &Request<'s> {
        &self.0
    }
}

impl<'s> std::ops::DerefMut for Bundle<'s> {
    fn deref_mut(&mut self) -> &mut Request<'s> {
        &mut self.0
    }
}

impl<'s> std::borrow::Borrow<Request<'s>> for Bundle<'s> {
    fn borrow(&self) -> &Request<'s> {
        &self.0
    }
}

impl<'s> std::borrow::BorrowMut<Request<'s>> for Bundle<'s> {
    fn borrow_mut(&mut self) -> &mut Request<'s> {
        &mut self.0
    }
}

impl<'s> From<Bundle<'s>> for Request<'s> {
    fn from(b: Bundle<'s>) -> Request<'s> {
        b.0
    }
}
