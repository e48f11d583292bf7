//! One end of a bound channel: starts, waits and tests over the unit ring of
//! [`ChannelMem`](crate::fabric::channel::ChannelMem).
//!
//! The receiver posts the units of a start (one store per unit); the sender checks that the
//! first unit of its start is posted (ready mode: an error otherwise, nothing written) and
//! copies its data into the posted units; the receiver's wait spins on the last unit's state
//! word and copies the data out. The sender's wait completes once every unit of its start is
//! written, which it is at the start unless the receiver was behind (synchronous mode, or a
//! message split over several receives). No lock, allocation or system call on any of it.
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};
use crate::fabric::channel::{full, posted, ChannelMem, Word};
use crate::p2p::engine::{Blocked, Engine};
use crate::p2p::Status;
use crate::sys::lend::Lent;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// Which end of the channel this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Send,
    Recv,
}

/// One end of a bound channel.
#[derive(Debug)]
pub(crate) struct ChannelEnd {
    pub(crate) mem: ChannelMem,
    pub(crate) role: Role,
    /// The user's buffer, as the persistent request lent it (the whole circular buffer).
    pub(crate) buf: Lent,
    /// Bytes this end moves per start.
    pub(crate) bytes: usize,
    /// Units per start on this end.
    pub(crate) per: u64,
    pub(crate) slack: u64,
    /// Slots the buffer address advances per start (0: every start uses the whole buffer).
    pub(crate) step: u64,
    /// Ready mode (a send errs when its receive is not posted) or synchronous (it waits).
    pub(crate) ready: bool,
    pub(crate) started: u64,
    pub(crate) completed: u64,
    /// Sender: the next unit to write.
    pub(crate) next_unit: u64,
    /// The partner and the tag, as completions report them.
    pub(crate) status: Status,
    /// Held while the channel exists: the request it was bound from cannot start meanwhile.
    pub(crate) lock: Rc<Cell<u32>>,
    /// Whether the last completed receive's data was left in its slots (in-place waits).
    pub(crate) unbound: bool,
    pub(crate) blocked: Blocked,
}

/// Polls of a wait before it also progresses the engine (and may yield its core).
const SPIN_FIRST: u32 = 1024;
/// Polls of a waiting channel between looks at whether the partner went away.
const GONE_CHECK_EVERY: u32 = 4096;

impl ChannelEnd {
    /// Starts not yet completed by a wait or test.
    #[inline(always)]
    pub(crate) fn outstanding(&self) -> u64 {
        self.started - self.completed
    }

    /// The byte offset in the user's buffer of start `j`.
    #[inline(always)]
    fn window(&self, j: u64) -> usize {
        if self.step == 0 {
            0
        } else {
            ((j * self.step) % self.slack) as usize * self.bytes
        }
    }

    fn unit_bytes(&self) -> usize {
        self.mem.shape().unit_bytes
    }

    fn check_room(&self) -> Result<()> {
        if self.unbound {
            return Err(Error::new(
                ErrorClass::Request,
                "start of a channel that has been unbound",
            ));
        }
        if self.outstanding() >= self.slack {
            return Err(Error::new(
                ErrorClass::Request,
                format!(
                    "start of a channel with slackness {} and {} starts outstanding (more than K starts before a wait)",
                    self.slack,
                    self.outstanding()
                ),
            ));
        }
        Ok(())
    }

    /// The partner's unbind or drop, as an error (`None` while it is bound).
    fn partner_gone(&self) -> Option<Error> {
        let w = match self.role {
            Role::Send => Word::ReceiverGone,
            Role::Recv => Word::SenderGone,
        };
        let how = match self.mem.word(w).load(Ordering::Acquire) {
            0 => return None,
            1 => "unbound it",
            _ => "dropped it without unbinding",
        };
        Some(Error::new(
            ErrorClass::Request,
            format!(
                "the partner of this channel (rank {}, tag {}) {how}",
                self.status.source, self.status.tag
            ),
        ))
    }

    /// MPI_Start: a send copies (or, `filled`, publishes) its data, a receive posts.
    #[inline(always)]
    pub(crate) fn start(&mut self, filled: bool) -> Result<()> {
        match self.role {
            Role::Send => self.start_send(filled),
            Role::Recv if filled => Err(Error::new(
                ErrorClass::Request,
                "start_filled on the receive end of a channel",
            )),
            Role::Recv => self.start_recv(),
        }
    }

    // ---- sender -------------------------------------------------------------------------

    /// MPI_Start on a send end: copy the buffer's window into the posted units.
    #[inline(always)]
    pub(crate) fn start_send(&mut self, filled: bool) -> Result<()> {
        self.check_room()?;
        let s = self.started;
        let first = s * self.per;
        if self.next_unit == first {
            let st = self.mem.state(first).load(Ordering::Acquire);
            if st != posted(first) {
                if self.ready {
                    return Err(self.not_posted(s));
                }
                if filled {
                    return Err(Error::new(ErrorClass::Request, "start_filled of a send whose receive is not posted (fill a slot only once next_slot_mut has returned it)"));
                }
            } else if self.per == 1 {
                // The common case: one posted unit, written here and now.
                if !filled {
                    let win = self.window(s);
                    let n = self.bytes;
                    let dst = self.mem.units_mut(first, 1);
                    pack_window(&self.buf, win, &mut dst[..n]);
                }
                self.mem.state(first).store(full(first), Ordering::Release);
                self.next_unit = first + 1;
                self.started = s + 1;
                return Ok(());
            }
        } else if filled {
            return Err(Error::new(
                ErrorClass::Request,
                "start_filled while an earlier send still waits for its receive",
            ));
        }
        if filled {
            // Every unit must be posted (next_slot_mut checked it when it handed them out).
            if (first..first + self.per)
                .any(|v| self.mem.state(v).load(Ordering::Acquire) != posted(v))
            {
                return Err(Error::new(ErrorClass::Request, "start_filled of a send whose receives are not all posted (fill the slot through next_slot_mut first)"));
            }
            for v in first..first + self.per {
                self.mem.state(v).store(full(v), Ordering::Release);
            }
            self.next_unit = first + self.per;
        }
        self.started = s + 1;
        self.flush();
        Ok(())
    }

    #[cold]
    fn not_posted(&self, s: u64) -> Error {
        if let Some(e) = self.partner_gone() {
            return e;
        }
        Error::new(
            ErrorClass::Request,
            format!(
                "ready-mode channel to rank {} (tag {}): send {s} started before its receive was posted (the receiver has not started it yet; nothing was sent)",
                self.status.source, self.status.tag
            ),
        )
    }

    /// Write every unit of the started sends whose receive is posted, in order.
    fn flush(&mut self) {
        let end = self.started * self.per;
        let ub = self.unit_bytes();
        while self.next_unit < end {
            let v = self.next_unit;
            if self.mem.state(v).load(Ordering::Acquire) != posted(v) {
                break;
            }
            let j = v / self.per;
            let off = self.window(j) + (v % self.per) as usize * ub;
            let n = ub.min(self.bytes);
            let dst = self.mem.units_mut(v, 1);
            pack_window(&self.buf, off, &mut dst[..n]);
            self.mem.state(v).store(full(v), Ordering::Release);
            self.next_unit = v + 1;
        }
    }

    /// Synchronous mode: wait until the receive of the next send is posted (and every
    /// earlier send written), so that its slot may be filled in place. Nothing in ready mode,
    /// where [`next_slot`](Self::next_slot) says at once whether it is.
    pub(crate) fn wait_posted(&mut self, eng: &mut Engine) -> Result<()> {
        if self.ready || self.role != Role::Send {
            return Ok(());
        }
        self.check_room()?;
        let first = self.started * self.per;
        let last = first + self.per - 1;
        self.wait_until(eng, |c| {
            c.flush();
            c.next_unit == first && c.mem.state(last).load(Ordering::Acquire) == posted(last)
        })
    }

    /// The units of the next send, to fill in place before [`start_send`](Self::start_send)
    /// with `filled`. Its receive must be posted already, and no earlier send pending.
    pub(crate) fn next_slot(&mut self) -> Result<&mut [u8]> {
        self.check_room()?;
        let first = self.started * self.per;
        if self.next_unit != first {
            return Err(Error::new(
                ErrorClass::Request,
                "next_slot_mut while an earlier send still waits for its receive",
            ));
        }
        for v in first..first + self.per {
            if self.mem.state(v).load(Ordering::Acquire) != posted(v) {
                if let Some(e) = self.partner_gone() {
                    return Err(e);
                }
                return Err(Error::new(
                    ErrorClass::Request,
                    format!(
                        "next_slot_mut: the receive of send {} (rank {}, tag {}) is not posted yet, so its slot may still be read",
                        self.started, self.status.source, self.status.tag
                    ),
                ));
            }
        }
        let n = self.bytes;
        Ok(&mut self.mem.units_mut(first, self.per as usize)[..n])
    }

    // ---- receiver -----------------------------------------------------------------------

    /// MPI_Start on a receive end: post its units.
    #[inline(always)]
    pub(crate) fn start_recv(&mut self) -> Result<()> {
        self.check_room()?;
        let r = self.started;
        let first = r * self.per;
        for v in first..first + self.per {
            self.mem.state(v).store(posted(v), Ordering::Release);
        }
        self.started = r + 1;
        Ok(())
    }

    /// Whether the oldest outstanding start is complete (a sender writes what it can first).
    #[inline(always)]
    pub(crate) fn ready_now(&mut self) -> bool {
        if self.outstanding() == 0 {
            return false;
        }
        let c = self.completed;
        match self.role {
            Role::Send => {
                if self.next_unit < (c + 1) * self.per {
                    self.flush();
                }
                self.next_unit >= (c + 1) * self.per
            }
            Role::Recv => {
                let last = (c + 1) * self.per - 1;
                self.mem.state(last).load(Ordering::Acquire) == full(last)
                    && (self.per == 1
                        || (c * self.per..last)
                            .all(|v| self.mem.state(v).load(Ordering::Acquire) == full(v)))
            }
        }
    }

    /// Complete the oldest outstanding start, which [`ready_now`](Self::ready_now) said is
    /// complete: a receive copies its data out unless `in_place`.
    #[inline(always)]
    pub(crate) fn complete(&mut self, in_place: bool) -> Status {
        let c = self.completed;
        if self.role == Role::Recv && !in_place {
            let win = self.window(c);
            let src = self.mem.units(c * self.per, self.per as usize);
            unpack_window(&self.buf, win, &src[..self.bytes]);
        }
        self.completed = c + 1;
        self.status
    }

    /// Wait for the oldest outstanding start (the empty status when none is).
    #[inline(always)]
    pub(crate) fn wait(&mut self, eng: &mut Engine, in_place: bool) -> Result<Status> {
        if self.outstanding() == 0 {
            return Ok(Status::empty());
        }
        self.wait_until(eng, ChannelEnd::ready_now)?;
        Ok(self.complete(in_place))
    }

    /// Block until `done` holds: a short tight spin on the word first (the partner is usually
    /// a line transfer away, and a progress pass between polls would only delay seeing it),
    /// then the engine's wait, which progresses and yields, and looks now and then whether
    /// the partner went away (an error then, not a hang).
    #[inline(always)]
    fn wait_until(
        &mut self,
        eng: &mut Engine,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> Result<()> {
        if done(self) {
            return Ok(());
        }
        for _ in 0..SPIN_FIRST {
            std::hint::spin_loop();
            if done(self) {
                return Ok(());
            }
        }
        let mut polls = 0u32;
        eng.wait_for(self.blocked, |_| {
            if done(self) {
                return Some(Ok(()));
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(GONE_CHECK_EVERY) {
                if let Some(e) = self.partner_gone() {
                    return Some(Err(e));
                }
            }
            None
        })?
    }

    /// The data of the last completed receive, left in its slots by an in-place wait.
    pub(crate) fn arrived(&self) -> Result<&[u8]> {
        if self.role != Role::Recv || self.completed == 0 {
            return Err(Error::new(
                ErrorClass::Request,
                "arrived: no receive of this channel has completed yet (or this is a send end)",
            ));
        }
        let c = self.completed - 1;
        // Start c + units/per posts the same slots again: the sender may be writing them.
        if self.started > c + self.mem.shape().units as u64 / self.per {
            return Err(Error::new(
                ErrorClass::Request,
                "arrived: the slots of the last completed receive have been posted again by a later start",
            ));
        }
        Ok(&self.mem.units(c * self.per, self.per as usize)[..self.bytes])
    }

    /// Mark this end gone (1: unbound, 2: dropped) for the partner to see, and free the
    /// request it was bound from.
    pub(crate) fn leave(&mut self, how: u64) {
        let w = match self.role {
            Role::Send => Word::SenderGone,
            Role::Recv => Word::ReceiverGone,
        };
        self.mem.word(w).store(how, Ordering::Release);
        self.unbound = true;
        self.lock.set(self.lock.get().saturating_sub(1));
    }
}

/// Copy `dst.len()` message bytes of `buf` from byte `off` into `dst`.
#[inline(always)]
fn pack_window(buf: &Lent, off: usize, dst: &mut [u8]) {
    if off == 0 {
        buf.pack_into(dst);
    } else {
        // A window of a circular buffer: contiguous (checked at bind).
        buf.sub(off, dst.len(), None)
            .expect("contiguous window")
            .pack_into(dst);
    }
}

/// Copy `src` into `buf`'s message bytes from byte `off`.
#[inline(always)]
fn unpack_window(buf: &Lent, off: usize, src: &[u8]) {
    if off == 0 {
        buf.unpack_from(src);
    } else {
        buf.sub(off, src.len(), None)
            .expect("contiguous window")
            .unpack_from(src);
    }
}
