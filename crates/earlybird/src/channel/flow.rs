//! One end of a bound channel: starts, waits and tests over the unit ring of the channel's
//! memory (`fabric::channel`, whose sides hold the posted/full protocol), and its
//! [`Completion`], so that a channel is a request like any other.
//!
//! The receiver posts the units of a start (one store per unit); the sender checks that the
//! first unit of its start is posted (ready mode: an error otherwise, nothing written) and
//! copies its data into the posted units; the receiver's wait spins on the last unit's state
//! word and copies the data out. The sender's wait completes once every unit of its start is
//! written, which it is at the start unless the receiver was behind (synchronous mode, or a
//! message split over several receives). No lock, allocation or system call on any of it.
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};
use crate::fabric::channel::{Gone, RecvSide, SendSide, Word};
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::request::completion::Completion;
use crate::request::pt2pt::BufferSlot;
use crate::status::Status;
use crate::sys::lend::{Loan, Unusable};
use std::sync::atomic::Ordering;

/// Which end of the channel this is, with its side of the channel's memory.
#[derive(Debug)]
pub(crate) enum Side {
    Send(SendSide),
    Recv(RecvSide),
}

/// One end of a bound channel.
#[derive(Debug)]
pub(crate) struct ChannelEnd {
    pub(crate) side: Side,
    /// The user's buffer, lent to this end alone (the whole circular buffer) while it is
    /// bound; given back to the request it was bound from when it leaves.
    pub(crate) buf: Loan,
    /// Where `buf` goes back (let go of when it has).
    pub(crate) home: Option<BufferSlot>,
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
    /// Whether this end has left (unbound, or dropped).
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

    /// Whether this is a send end.
    pub(crate) fn is_send(&self) -> bool {
        matches!(self.side, Side::Send(_))
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
        match &self.side {
            Side::Send(s) => s.mem().shape().unit_bytes,
            Side::Recv(r) => r.mem().shape().unit_bytes,
        }
    }

    fn units(&self) -> u64 {
        match &self.side {
            Side::Send(s) => s.mem().shape().units as u64,
            Side::Recv(r) => r.mem().shape().units as u64,
        }
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
        let word = match &self.side {
            Side::Send(s) => s.mem().word(Word::ReceiverGone),
            Side::Recv(r) => r.mem().word(Word::SenderGone),
        };
        let how = match word.load(Ordering::Acquire) {
            0 => return None,
            w if w == Gone::Unbound as u64 => "unbound it",
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
        match self.side {
            Side::Send(_) => self.start_send(filled),
            Side::Recv(_) if filled => Err(Error::new(
                ErrorClass::Request,
                "start_filled on the receive end of a channel",
            )),
            Side::Recv(_) => self.start_recv(),
        }
    }

    // ---- sender -------------------------------------------------------------------------

    /// MPI_Start on a send end: copy the buffer's window into the posted units.
    #[inline(always)]
    fn start_send(&mut self, filled: bool) -> Result<()> {
        self.check_room()?;
        let s = self.started;
        let first = s * self.per;
        let win = self.window(s);
        let n = self.bytes;
        let per = self.per;
        let Side::Send(side) = &mut self.side else {
            unreachable!("a send end")
        };
        if self.next_unit == first {
            if per == 1 {
                // The common case: one posted unit, written here and now.
                match side.fill(first, 1) {
                    Some(mut f) => {
                        if !filled {
                            f.write(|dst| pack_window(&self.buf, win, &mut dst[..n]))
                                .map_err(unusable)?;
                        }
                        f.publish();
                        self.next_unit = first + 1;
                        self.started = s + 1;
                        return Ok(());
                    }
                    None if self.ready => return Err(self.not_posted(s)),
                    None if filled => return Err(Error::new(ErrorClass::Request, "start_filled of a send whose receive is not posted (fill a slot only once next_slot_mut has returned it)")),
                    None => {}
                }
            } else if filled {
                // Every unit must be posted (next_slot_mut checked it when it handed them
                // out).
                let Some(f) = side.fill(first, per as usize) else {
                    return Err(Error::new(ErrorClass::Request, "start_filled of a send whose receives are not all posted (fill the slot through next_slot_mut first)"));
                };
                f.publish();
                self.next_unit = first + per;
                self.started = s + 1;
                return Ok(());
            } else if self.ready && !side.is_posted(first) {
                return Err(self.not_posted(s));
            }
        } else if filled {
            return Err(Error::new(
                ErrorClass::Request,
                "start_filled while an earlier send still waits for its receive",
            ));
        }
        self.started = s + 1;
        self.flush().map_err(unusable)
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
    fn flush(&mut self) -> std::result::Result<(), Unusable> {
        let end = self.started * self.per;
        let ub = self.unit_bytes();
        let n = ub.min(self.bytes);
        while self.next_unit < end {
            let v = self.next_unit;
            let j = v / self.per;
            let off = self.window(j) + (v % self.per) as usize * ub;
            let Side::Send(side) = &mut self.side else {
                unreachable!("a send end")
            };
            let Some(mut f) = side.fill(v, 1) else {
                break;
            };
            f.write(|dst| pack_window(&self.buf, off, &mut dst[..n]))?;
            f.publish();
            self.next_unit = v + 1;
        }
        Ok(())
    }

    /// Synchronous mode: wait until the receive of the next send is posted (and every
    /// earlier send written), so that its slot may be filled in place. Nothing in ready mode,
    /// where [`next_slot`](Self::next_slot) says at once whether it is.
    pub(crate) fn wait_posted(&mut self, eng: &mut Engine) -> Result<()> {
        if self.ready || !self.is_send() {
            return Ok(());
        }
        self.check_room()?;
        let first = self.started * self.per;
        let last = first + self.per - 1;
        self.wait_until(eng, |c| {
            let _ = c.flush();
            let Side::Send(side) = &c.side else {
                unreachable!("a send end")
            };
            c.next_unit == first && side.is_posted(last)
        })
    }

    /// The units of the next send, to fill in place before a start with `filled`. Its
    /// receive must be posted already, and no earlier send pending.
    pub(crate) fn next_slot(&mut self) -> Result<&mut [u8]> {
        self.check_room()?;
        let first = self.started * self.per;
        if self.next_unit != first {
            return Err(Error::new(
                ErrorClass::Request,
                "next_slot_mut while an earlier send still waits for its receive",
            ));
        }
        let (n, per, started, source, tag) = (
            self.bytes,
            self.per as usize,
            self.started,
            self.status.source,
            self.status.tag,
        );
        let gone = self.partner_gone();
        let Side::Send(side) = &mut self.side else {
            return Err(Error::new(
                ErrorClass::Request,
                "next_slot_mut on the receive end of a channel (use wait_in_place and arrived)",
            ));
        };
        match side.fill(first, per) {
            // The units stay posted, and this end's, until start_filled publishes them.
            Some(f) => Ok(&mut f.into_bytes()[..n]),
            None => Err(gone.unwrap_or_else(|| {
                Error::new(
                    ErrorClass::Request,
                    format!(
                        "next_slot_mut: the receive of send {started} (rank {source}, tag {tag}) is not posted yet, so its slot may still be read"
                    ),
                )
            })),
        }
    }

    // ---- receiver -----------------------------------------------------------------------

    /// MPI_Start on a receive end: post its units.
    #[inline(always)]
    fn start_recv(&mut self) -> Result<()> {
        self.check_room()?;
        let r = self.started;
        let first = r * self.per;
        let Side::Recv(side) = &mut self.side else {
            unreachable!("a receive end")
        };
        for v in first..first + self.per {
            side.post(v);
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
        let per = self.per;
        match &self.side {
            Side::Send(_) => {
                if self.next_unit < (c + 1) * per {
                    let _ = self.flush();
                }
                self.next_unit >= (c + 1) * per
            }
            Side::Recv(side) => {
                let last = (c + 1) * per - 1;
                side.is_full(last) && (per == 1 || (c * per..last).all(|v| side.is_full(v)))
            }
        }
    }

    /// Complete the oldest outstanding start, which [`ready_now`](Self::ready_now) said is
    /// complete: a receive copies its data out unless `in_place`.
    #[inline(always)]
    fn complete(&mut self, in_place: bool) -> Result<Status> {
        let c = self.completed;
        if let (Side::Recv(side), false) = (&self.side, in_place) {
            let win = self.window(c);
            let src = side
                .read(c * self.per, self.per as usize)
                .expect("ready_now saw the units full");
            unpack_window(&self.buf, win, &src[..self.bytes]).map_err(unusable)?;
        }
        self.completed = c + 1;
        Ok(self.status)
    }

    /// Wait for the oldest outstanding start (the empty status when none is).
    #[inline(always)]
    pub(crate) fn wait(&mut self, eng: &mut Engine, in_place: bool) -> Result<Status> {
        if self.outstanding() == 0 {
            return Ok(Status::empty());
        }
        self.wait_until(eng, ChannelEnd::ready_now)?;
        self.complete(in_place)
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

    /// The data of the last completed receive, left in its slots by an in-place wait (and
    /// still there after a plain wait, which also copied it out).
    pub(crate) fn arrived(&self) -> Result<&[u8]> {
        let Side::Recv(side) = &self.side else {
            return Err(Error::new(
                ErrorClass::Request,
                "arrived on the send end of a channel",
            ));
        };
        if self.completed == 0 {
            return Err(Error::new(
                ErrorClass::Request,
                "arrived: no receive of this channel has completed yet",
            ));
        }
        let c = self.completed - 1;
        // Start c + units/per posts the same slots again: the sender may be writing them.
        if self.started > c + self.units() / self.per {
            return Err(Error::new(
                ErrorClass::Request,
                "arrived: the slots of the last completed receive have been posted again by a later start",
            ));
        }
        let src = side
            .read(c * self.per, self.per as usize)
            .expect("a completed receive's units stay full until posted again");
        Ok(&src[..self.bytes])
    }

    /// Leave the channel (`how`) for the partner to see, and give the buffer back to the
    /// request it was bound from.
    pub(crate) fn leave(&mut self, how: Gone) {
        if self.unbound {
            return;
        }
        let word = match &self.side {
            Side::Send(s) => s.mem().word(Word::SenderGone),
            Side::Recv(r) => r.mem().word(Word::ReceiverGone),
        };
        word.store(how as u64, Ordering::Release);
        self.unbound = true;
        if let Some(home) = self.home.take() {
            *home.borrow_mut() = Some(std::mem::replace(&mut self.buf, Loan::EMPTY));
        }
    }
}

impl Completion for ChannelEnd {
    fn kind(&self) -> &'static str {
        "channel"
    }

    fn start(&mut self, eng: &mut Engine) -> Result<Option<Result<Status>>> {
        let _ = eng;
        ChannelEnd::start(self, false).map(|()| None)
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let _ = eng;
        if !self.ready_now() {
            return None;
        }
        Some(self.complete(false))
    }

    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        ChannelEnd::wait(self, eng, false)
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let _ = eng;
        self.ready_now().then_some(Ok(self.status))
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        Err(Error::new(
            ErrorClass::Request,
            "cancel of a bound channel (a channel's starts complete in order; unbind it instead)",
        ))
    }

    fn blocked_in(&self) -> Blocked {
        self.blocked
    }

    fn abandon(&mut self, eng: &mut Engine) {
        let _ = eng;
    }

    fn is_active(&self) -> bool {
        self.outstanding() > 0
    }

    fn is_persistent(&self) -> bool {
        true
    }

    /// An unbound channel is a null request.
    fn is_null(&self) -> bool {
        self.unbound
    }

    /// Nothing in flight touches the user's buffer (a channel copies inside start and wait):
    /// tell the partner this end is gone.
    fn settle(&mut self, eng: &mut Engine) {
        let _ = eng;
        self.leave(Gone::Dropped);
    }

    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        Err(Error::new(ErrorClass::Request, "request_free on a bound channel is erroneous: channels end with unbind_channel (collective over the pair); this end is dropped as if unbound without one, and its partner's calls will say so"))
    }

    fn can_start(&self) -> bool {
        !self.unbound && self.outstanding() < self.slack
    }

    /// A channel touches its buffer only inside calls on it (a start or flush reads a send's
    /// window, a wait writes a receive's), so the buffer may be handed out between those
    /// calls even with starts outstanding: the circular buffer's model, where window j+1 is
    /// filled while j is in flight.
    fn buffer(&mut self, send: bool) -> Result<&mut [u8]> {
        if send && !self.is_send() {
            return Err(Error::new(
                ErrorClass::Buffer,
                "send_buffer_mut on the receive end of a channel (use buffer_mut)",
            ));
        }
        if self.unbound {
            return Err(Error::new(
                ErrorClass::Request,
                "buffer_mut on a channel that has been unbound (use the request it was bound from)",
            ));
        }
        let writable = self.buf.is_writable();
        self.buf.bytes_mut().ok_or_else(|| {
            if !writable {
                Error::new(ErrorClass::Buffer, "buffer_mut on a channel bound from a persistent send whose buffer was lent read-only (&[T]); lend it as &mut [T]")
            } else {
                Error::new(ErrorClass::Buffer, "buffer_mut on a buffer that cannot be handed out whole (its element type has padding, or it is a non-contiguous view)")
            }
        })
    }
}

fn unusable(u: Unusable) -> Error {
    Error::new(ErrorClass::Intern, format!("channel: {u}"))
}

/// Copy `dst.len()` message bytes of `buf` from byte `off` into `dst`.
#[inline(always)]
fn pack_window(buf: &Loan, off: usize, dst: &mut [u8]) -> std::result::Result<(), Unusable> {
    if off == 0 {
        buf.pack_into(dst)
    } else {
        // A window of a circular buffer: contiguous (checked at bind).
        buf.sub(off, dst.len(), None)
            .expect("contiguous window")
            .pack_into(dst)
    }
}

/// Copy `src` into `buf`'s message bytes from byte `off`.
#[inline(always)]
fn unpack_window(buf: &Loan, off: usize, src: &[u8]) -> std::result::Result<(), Unusable> {
    if off == 0 {
        buf.unpack_from(src)
    } else {
        buf.sub(off, src.len(), None)
            .expect("contiguous window")
            .unpack_from(src)
    }
}
