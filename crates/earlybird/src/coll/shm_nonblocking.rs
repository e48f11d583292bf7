//! Nonblocking collectives straight through the communicator's collective region (issue
//! 18, items 3 and 4): an `ibarrier`, an `ibcast` of at most [`PAYLOAD`](super::shm::PAYLOAD) bytes and an
//! `iallreduce` whose contribution fits a slot run the protocol of `shm_blocking.rs` as a
//! request's [`Steps`]: put this rank's part into its slot as soon as the slot is free, then
//! wait for the parts it reads, then read them (the bcast's message, or the fold of every
//! rank's contribution in the canonical association). No schedule is recorded or replayed,
//! no message is sent, and a communicator keeps one such run a kind, started again by the
//! next call once the last one's request has gone: a call allocates nothing.
//!
//! # When
//!
//! Exactly when the blocking call runs in the region ([`shm_blocking::takes`]): a
//! communicator with a region, and the algorithm not forced to another one. Nonblocking
//! calls never match blocking ones (MPI 4.1 §6.12), so this is the nonblocking calls' own
//! choice, made alike on every rank from what every rank has alike.
//!
//! # Progress
//!
//! The run is begun at once, so a root's message and every rank's part of a barrier or an
//! allreduce are in the region when the call returns (if its slot is free, which it is
//! unless this rank is [`COMM_DEPTH`] calls ahead of another). Until it is done it is on
//! the engine's background list, advanced by every progress call of the rank, whatever
//! that call waits for: a rank that waits for something else still reads its runs, and its
//! watermark rises, so the others' later calls find their slots free.
//!
//! [`COMM_DEPTH`]: crate::fabric::coll_region::COMM_DEPTH
#![forbid(unsafe_code)]

use super::api::SHM;
use super::registry;
use super::sched::{notice, unusable, Wire, NOTICE_EVERY};
use super::shm::CollShm;
use super::shm_blocking::{self, fold_slots};
use super::{Args, Coll};
use crate::comm::Comm;
use crate::error::Result;
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::request::completion::Origin;
use crate::request::steps::{Run, SharedRun, Steps};
use crate::request::Request;
use crate::status::Status;
use crate::sys::lend::Loan;
use std::rc::Rc;

/// What this rank does in its run.
#[derive(Debug)]
enum Part {
    Barrier,
    /// A bcast's root: its message.
    Root(Loan),
    /// A bcast's other ranks: the root, and where its message goes.
    Leaf {
        root: usize,
        buf: Loan,
    },
    /// An allreduce: this rank's contribution, the receive buffer, and the element count's
    /// bytes.
    Allreduce {
        own: Loan,
        dst: Loan,
        bytes: usize,
    },
}

impl Part {
    /// What this rank puts into its slot, if anything.
    fn put(&self) -> Option<&Loan> {
        match self {
            Part::Barrier => Some(&Loan::EMPTY),
            Part::Root(m) => Some(m),
            Part::Allreduce { own, .. } => Some(own),
            Part::Leaf { .. } => None,
        }
    }
}

/// Where a run has got to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for this rank's slot to be free.
    Put,
    /// Waiting for the parts it reads.
    Await,
    /// Done (or not begun).
    Done,
}

/// A nonblocking barrier, bcast or allreduce's run of the region, as [`Steps`].
pub(crate) struct ShmCall {
    /// The call's wire (its error notices, its name, its operation).
    wire: Wire,
    /// The region and the run's number on lane 0, while the run is open.
    run: Option<(Rc<CollShm>, u64)>,
    size: i32,
    part: Part,
    phase: Phase,
    /// Advances that found it waiting (to look for error notices now and then).
    polls: u32,
}

impl ShmCall {
    /// The run is over (done, failed or abandoned): close it and let the buffers go.
    #[inline(always)]
    fn end(&mut self, r: Result<()>) -> Option<Result<Status>> {
        if let Some((shm, seq)) = self.run.take() {
            shm.close(0, seq);
        }
        self.part = Part::Barrier;
        self.phase = Phase::Done;
        Some(r.map(|()| Status::empty()))
    }

    /// Still waiting: now and then, look for another rank's error notice for the call.
    fn waiting(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(NOTICE_EVERY) {
            if let Some(x) = notice(e, &self.wire) {
                return self.end(Err(x));
            }
        }
        None
    }
}

impl Steps for ShmCall {
    #[inline(always)]
    fn advance(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        let (shm, seq) = self.run.clone()?;
        if self.phase == Phase::Put {
            if let Some(src) = self.part.put() {
                if !shm.slot_free(0, seq) {
                    return self.waiting(e);
                }
                if let Err(u) = shm.region().put_payload(0, seq, shm.me(), src) {
                    return self.end(Err(unusable(self.wire.what, u)));
                }
                shm.publish(0, seq);
                shm.claim_next(0, seq);
            }
            self.phase = Phase::Await;
        }
        let r = match &self.part {
            Part::Root(_) => Ok(()),
            Part::Barrier => {
                if !shm.arrived(0, seq, None) {
                    return self.waiting(e);
                }
                Ok(())
            }
            Part::Leaf { root, buf } => {
                if !shm.arrived(0, seq, Some(*root as i32)) {
                    return self.waiting(e);
                }
                shm_blocking::read_bcast(&self.wire, shm.region(), seq, *root, buf)
            }
            Part::Allreduce { own, dst, bytes } => {
                if !shm.arrived(0, seq, None) {
                    return self.waiting(e);
                }
                let put = own.packed_len();
                fold_slots(
                    self.size,
                    *bytes,
                    &self.wire,
                    shm.region(),
                    seq,
                    shm.me(),
                    put,
                    dst,
                )
            }
        };
        self.end(r)
    }

    fn blocked(&self) -> Blocked {
        self.wire.blocked()
    }

    fn abandon(&mut self, _e: &mut Engine) {
        self.end(Ok(()));
    }
}

impl Drop for ShmCall {
    fn drop(&mut self) {
        // A run still open when its steps go (the communicator freed with the request
        // pending): this rank reads no more of it.
        if let Some((shm, seq)) = self.run.take() {
            shm.close(0, seq);
        }
    }
}

impl Comm {
    /// Start the nonblocking call `a` (which [`shm_blocking::takes`] said runs here; `send` and `recv` its
    /// buffers, lent for the request's scope) in its run of the communicator's region, taken
    /// by `wire`'s ticket: the communicator's idle run of this kind set up for it, or a new
    /// one if that one is still in use (kept in turn if there was none).
    pub(super) fn started_in_region<'s>(
        &self,
        a: &Args,
        mut wire: Wire,
        send: Option<Loan>,
        recv: Option<Loan>,
        origin: Origin,
    ) -> Result<Request<'s>> {
        let (shm, seq) = wire
            .ticket
            .take()
            .expect("a call on a communicator with a region");
        registry::note_last(SHM);
        let part = part(a, send, recv);
        shm.enter(0, seq);
        let mut cache = self.shared.coll_repeat.borrow_mut();
        let slot = &mut cache[a.coll.index()].in_region;
        let run = match slot {
            Some(run) if Rc::strong_count(run) == 1 && !run.borrow().is_active() => {
                let run = run.clone();
                {
                    let mut r = run.borrow_mut();
                    let s = r.steps_mut();
                    s.wire.tag = wire.tag;
                    s.wire.notice_tag = wire.notice_tag;
                    s.wire.what = wire.what;
                    s.wire.reducer = wire.reducer;
                    s.run = Some((shm, seq));
                    s.part = part;
                    s.phase = Phase::Put;
                }
                run
            }
            _ => {
                let run: SharedRun<ShmCall> = Run::new(ShmCall {
                    wire,
                    run: Some((shm, seq)),
                    size: a.size,
                    part,
                    phase: Phase::Put,
                    polls: 0,
                });
                if slot.is_none() {
                    *slot = Some(run.clone());
                }
                run
            }
        };
        drop(cache);
        Ok(Request::steps_run(&self.eng, origin, run))
    }
}

/// This rank's part of the call `a` (a barrier, bcast or allreduce), on its buffers `send`
/// and `recv`: the message through its datatype's layout where it has one (a plain buffer
/// is used as it is).
fn part(a: &Args, send: Option<Loan>, recv: Option<Loan>) -> Part {
    if a.coll == Coll::Barrier {
        return Part::Barrier;
    }
    let whole = recv.expect("a bcast's or an allreduce's buffer");
    if a.coll == Coll::Bcast {
        let buf = if a.elem.is_gapless() && a.recv.is_all_of(&whole) {
            whole
        } else {
            a.rblock(0, a.count).within(&whole)
        };
        return if a.rank == a.root {
            Part::Root(buf)
        } else {
            Part::Leaf {
                root: a.root as usize,
                buf,
            }
        };
    }
    debug_assert_eq!(a.coll, Coll::Allreduce);
    let bytes = a.count * a.elem.size;
    let dst = if a.recv.is_all_of(&whole) && bytes == whole.len() {
        whole
    } else {
        a.elem.run(&a.recv, 0, a.count).within(&whole)
    };
    let own = match (send, &a.send) {
        (Some(s), Some(b)) if b.is_all_of(&s) && a.count * a.selem.size == s.len() => s,
        (Some(s), _) => a.sblock(0, a.count).within(&s),
        (None, _) => dst.clone(),
    };
    Part::Allreduce { own, dst, bytes }
}
