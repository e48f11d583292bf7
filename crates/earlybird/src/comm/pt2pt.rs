//! Point-to-point communication on a communicator: blocking, nonblocking and persistent
//! sends in the four modes, receives, sendrecv, probes and matched probes.
//!
//! Every call checks its arguments (rank, tag) and returns the MPI error class with a message
//! naming the bad value, through the communicator's error handler.
//!
//! # Standard section(s)
//! MPI 4.1 §3 (point-to-point communication).
#![forbid(unsafe_code)]

use super::Comm;
use crate::assertions::Assertions;
use crate::datatype::buffer::{lend, lend_mut, Buffer, BufferMut};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::BlockedIn;
use crate::p2p::engine::{SendMode, Started};
use crate::p2p::matching::{Envelope, Pattern};
use crate::p2p::ops::OpId;
use crate::p2p::ranks::to_comm_ranks;
use crate::p2p::wait::Blocked;
use crate::p2p::{Matched, Status, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
use crate::request::pt2pt::{Persistent, Plan};
use crate::request::{Begun, Request, Scope};
use crate::sys::lend::{lending, Loan, ScratchBuffer, View};

/// What a send-receive-replace sends: the message `buf` holds now, packed into a loan of
/// its own, so that the receive may overwrite `buf` meanwhile.
pub(super) fn outgoing_copy(buf: &Loan) -> Result<Loan> {
    let packed = buf
        .to_packed()
        .map_err(|u| Error::new(ErrorClass::Intern, u.to_string()))?;
    Ok(Loan::copied(&packed).with_sig(buf.sig()))
}

/// A buffer a persistent send may be given: `&B` for constant data, or `&mut B` for data the
/// program changes between starts through [`Request::buffer_mut`], where `B` is a
/// [`Buffer`] (`[T]`, `[T; N]`, `Vec<T>`, a [`Typed`](crate::Typed) view). Sealed.
pub trait SendBuf<'s>: crate::datatype::buffer::Sealed {
    #[doc(hidden)]
    fn loan(self, s: &'s Scope<'s, '_>) -> Result<SendLoan>;
}

/// What a persistent send's buffer becomes when lent. Opaque.
#[doc(hidden)]
#[derive(Debug)]
pub struct SendLoan(pub(super) Loan);

impl<'s, B: Buffer + ?Sized> SendBuf<'s> for &'s B {
    fn loan(self, s: &'s Scope<'s, '_>) -> Result<SendLoan> {
        lend(self, s).map(SendLoan)
    }
}

impl<'s, B: BufferMut + ?Sized> SendBuf<'s> for &'s mut B {
    fn loan(self, s: &'s Scope<'s, '_>) -> Result<SendLoan> {
        // Lent to the request alone, which hands it back between starts.
        lend_mut(self, s).map(|l| SendLoan(l.exclusive()))
    }
}

/// A message taken out of matching by [`Comm::mprobe`] (MPI_Message); receive it with
/// [`Message::recv`].
#[derive(Debug)]
#[must_use = "a matched message must be received"]
pub struct Message {
    comm: Comm,
    m: Option<Matched>,
}

/// The blocking, nonblocking and persistent sends of one mode.
macro_rules! send_mode {
    ($mode:expr, $mpi:literal, $doc:literal, $send:ident, $isend:ident, $init:ident) => {
        #[doc = concat!("MPI_", $mpi, ": ", $doc)]
        pub fn $send<B: Buffer + ?Sized>(&self, buf: &B, dest: i32, tag: i32) -> Result<()> {
            self.blocking_send(stringify!($send), buf, dest, tag, $mode)
        }

        #[doc = concat!("MPI_I", $mpi, ": the nonblocking form of [`", stringify!($send), "`](Self::", stringify!($send), ").")]
        pub fn $isend<'s, B: Buffer + ?Sized>(
            &self,
            s: &'s Scope<'s, '_>,
            buf: &'s B,
            dest: i32,
            tag: i32,
        ) -> Result<Request<'s>> {
            self.nonblocking_send(s, stringify!($isend), buf, dest, tag, $mode)
        }

        #[doc = concat!("MPI_", $mpi, "_init: a persistent [`", stringify!($send), "`](Self::", stringify!($send), ") of `buf`, started with [`Request::start`]. The buffer is read at each start. Lend it as `&mut [T]` to change it between starts through [`Request::buffer_mut`], or as `&[T]` for constant data.")]
        pub fn $init<'s, B: SendBuf<'s>>(
            &self,
            s: &'s Scope<'s, '_>,
            buf: B,
            dest: i32,
            tag: i32,
        ) -> Result<Request<'s>> {
            self.persistent_send(s, stringify!($init), buf, dest, tag, $mode)
        }
    };
}

impl Comm {
    #[inline(always)]
    fn check_dest(&self, dest: i32) -> Result<()> {
        if dest == PROC_NULL || (0..self.peers).contains(&dest) {
            Ok(())
        } else {
            Err(self.bad_rank("destination", dest))
        }
    }

    #[inline(always)]
    fn check_source(&self, src: i32) -> Result<()> {
        if src == PROC_NULL || src == ANY_SOURCE || (0..self.peers).contains(&src) {
            Ok(())
        } else {
            Err(self.bad_rank("source", src))
        }
    }

    /// A nonblocking point-to-point request of this communicator: in flight (`Ok`), or done
    /// at its start with its result; `blocked` is what a long wait on it reports.
    #[inline(always)]
    fn nonblocking_request<'s>(
        &self,
        started: std::result::Result<OpId, Result<Status>>,
        blocked: Blocked,
    ) -> Request<'s> {
        Request::nonblocking(&self.eng, self.origin(), started, blocked)
    }

    #[cold]
    fn bad_rank(&self, what: &str, r: i32) -> Error {
        let of = if self.is_inter() {
            format!("remote group of size {}", self.peers)
        } else {
            format!("communicator of size {}", self.size)
        };
        Error::new(ErrorClass::Rank, format!("invalid {what} rank {r} ({of})"))
    }

    #[inline(always)]
    fn check_send_tag(tag: i32) -> Result<()> {
        if (0..=TAG_UB).contains(&tag) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::Tag,
                format!("invalid send tag {tag} (tags run from 0 to {TAG_UB})"),
            ))
        }
    }

    #[inline(always)]
    fn check_recv_tag(tag: i32) -> Result<()> {
        if tag == ANY_TAG || (0..=TAG_UB).contains(&tag) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::Tag,
                format!("invalid receive tag {tag} (tags run from 0 to {TAG_UB}, or ANY_TAG)"),
            ))
        }
    }

    /// Where a send to rank `dest` with `tag` goes, checked: (endpoint, context, tag).
    #[inline(always)]
    pub(super) fn send_target(&self, dest: i32, tag: i32) -> Result<(i32, u32, i32)> {
        self.check_live()?;
        self.check_dest(dest)?;
        Self::check_send_tag(tag)?;
        Ok((self.ep(dest), self.ctx.raw(), tag))
    }

    /// The plan of a send to rank `dest` with `tag`, checked.
    #[inline(always)]
    pub(super) fn send_plan(&self, dest: i32, tag: i32, mode: SendMode) -> Result<Plan> {
        let (peer, ctx, tag) = self.send_target(dest, tag)?;
        Ok(Plan::Send {
            peer,
            ctx,
            tag,
            mode,
        })
    }

    /// The pattern of a receive (or probe: call `what`) from rank `src` with `tag`, checked
    /// (`None` for PROC_NULL). A wildcard the communicator asserted away is
    /// MPIX_ERR_ASSERTION.
    #[inline(always)]
    pub(super) fn pattern(&self, what: &str, src: i32, tag: i32) -> Result<Option<Pattern>> {
        self.check_live()?;
        self.check_source(src)?;
        Self::check_recv_tag(tag)?;
        if src == PROC_NULL {
            return Ok(None);
        }
        if src == ANY_SOURCE {
            self.check_assertion(
                what,
                Assertions::NO_ANY_SOURCE,
                "MPI_ANY_SOURCE as the source",
            )?;
        }
        if tag == ANY_TAG {
            self.check_assertion(what, Assertions::NO_ANY_TAG, "MPI_ANY_TAG as the tag")?;
        }
        Ok(Some(Pattern {
            ctx: self.ctx.raw(),
            src: (src != ANY_SOURCE).then_some(self.ep(src) as u32),
            tag: (tag != ANY_TAG).then_some(tag),
        }))
    }

    /// The core of every blocking send: lend the buffer for the call, start the send and
    /// wait until it completes.
    fn blocking_send<B: Buffer + ?Sized>(
        &self,
        what: &str,
        buf: &B,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<()> {
        let r = lending((), |l| {
            let loan = lend(buf, l)?;
            let (peer, ctx, tag) = self.send_target(dest, tag)?;
            let mut e = self.eng.borrow_mut();
            if let Started::Op(op) = e.send_start(peer, ctx, tag, &loan, mode)? {
                e.wait_blocking(op, Blocked::send(peer, tag, ctx))?;
            }
            Ok(())
        });
        self.ret(what, r)
    }

    /// The start of every nonblocking send: its operation in flight, registered with the
    /// scope, or none when it was done at its start (an eager message that went straight into
    /// the receiver's queue); and what a wait on it blocks in.
    #[inline(always)]
    fn send_begin<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s B,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<(Option<OpId>, Blocked)> {
        let loan = lend(buf, s)?;
        let (peer, ctx, tag) = self.send_target(dest, tag)?;
        let mut e = self.eng.borrow_mut();
        let started = match e.send_start(peer, ctx, tag, &loan, mode)? {
            Started::Done => None,
            Started::Op(op) => {
                s.inner().register(&self.eng, &mut e, op);
                Some(op)
            }
        };
        Ok((started, Blocked::send(peer, tag, ctx)))
    }

    /// The core of every nonblocking send.
    #[inline(always)]
    fn nonblocking_send<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        buf: &'s B,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<Request<'s>> {
        let r = self
            .send_begin(s, buf, dest, tag, mode)
            .map(|(started, blocked)| {
                self.nonblocking_request(started.ok_or(Ok(Status::empty())), blocked)
            });
        self.ret(what, r)
    }

    /// MPI_Isend for a caller that keeps no request for a send that completed at its start
    /// (what MPICH calls lightweight completion; the C ABI keeps only the status then):
    /// [`Begun::Done`] when the message went out at once (an eager message with room in the
    /// receiver's queue), [`Begun::Pending`] with its request otherwise. Errors as
    /// [`isend`](Self::isend)'s.
    pub fn isend_begun<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s B,
        dest: i32,
        tag: i32,
    ) -> Result<Begun<'s>> {
        as_begun(|kept| self.isend_begun_with(s, buf, dest, tag, |r| *kept = Some(r)))
    }

    /// [`isend_begun`](Self::isend_begun) for a caller that keeps the request where it
    /// chooses, as [`irecv_begun_with`](Self::irecv_begun_with) (the C ABI's MPI_Isend).
    #[inline(always)]
    pub fn isend_begun_with<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s B,
        dest: i32,
        tag: i32,
        keep: impl FnOnce(Request<'s>),
    ) -> Result<Option<Status>> {
        let r = match self.send_begin(s, buf, dest, tag, SendMode::Standard) {
            Ok((None, _)) => Ok(Some(Status::empty())),
            Ok((Some(op), blocked)) => {
                keep(self.nonblocking_request(Ok(op), blocked));
                Ok(None)
            }
            Err(e) => Err(e),
        };
        self.ret("isend", r)
    }

    /// The core of every persistent send.
    fn persistent_send<'s, B: SendBuf<'s>>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        buf: B,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<Request<'s>> {
        let r = buf.loan(s).and_then(|SendLoan(loan)| {
            let plan = self.send_plan(dest, tag, mode)?;
            Ok(self.persistent(s, plan, loan))
        });
        self.ret(what, r)
    }

    /// An inactive persistent point-to-point request of this communicator.
    fn persistent<'s>(&self, s: &'s Scope<'s, '_>, plan: Plan, loan: Loan) -> Request<'s> {
        s.inner().note_engine(&self.eng);
        let p = Persistent::new(&mut self.eng.borrow_mut(), plan, loan, s.inner().id());
        Request::persistent(&self.eng, self.origin(), p)
    }

    send_mode!(
        SendMode::Standard,
        "Send",
        "standard-mode blocking send.",
        send,
        isend,
        send_init
    );
    send_mode!(
        SendMode::Synchronous,
        "Ssend",
        "returns once the matching receive has started.",
        ssend,
        issend,
        ssend_init
    );
    send_mode!(
        SendMode::Ready,
        "Rsend",
        "the program promises the receive is posted (sent as standard mode).",
        rsend,
        irsend,
        rsend_init
    );
    send_mode!(
        SendMode::Buffered,
        "Bsend",
        "copies into the attached buffer ([`Universe::buffer_attach`](crate::Universe::buffer_attach)) and returns; MPI_ERR_BUFFER when it does not fit.",
        bsend,
        ibsend,
        bsend_init
    );

    /// MPI_Recv: blocking receive into `buf`; `src` may be [`ANY_SOURCE`] or [`PROC_NULL`],
    /// `tag` may be [`ANY_TAG`]. A message longer than `buf` is MPI_ERR_TRUNCATE (the error
    /// carries the filled status).
    pub fn recv<B: BufferMut + ?Sized>(&self, buf: &mut B, src: i32, tag: i32) -> Result<Status> {
        let r = lending((), |l| {
            let Some(pat) = self.pattern("recv", src, tag)? else {
                return Ok(Status::proc_null());
            };
            let loan = lend_mut(buf, l)?;
            let mut e = self.eng.borrow_mut();
            let op = e.recv_start(pat, loan);
            e.wait_blocking(op, Blocked::recv(src, tag, self.ctx.raw()))
        });
        self.ret("recv", to_comm_ranks(&self.map, r))
    }

    /// MPI_Irecv on the loan `lend` makes, its error through the error handler.
    #[inline(always)]
    fn recv_started<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        lend: impl FnOnce() -> Result<Loan>,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        let r = self.recv_nonblocking(s, what, lend, src, tag);
        self.ret(what, r)
    }

    /// A nonblocking receive on the loan `lend` makes, without the error handler (the
    /// caller's call applies it). Inlined, with [`recv_started`](Self::recv_started) and
    /// [`recv_begin`](Self::recv_begin), so that the loan is made only once the receive's
    /// slot is found and written into it as it is made, not held on the stack across the
    /// calls before and loaded back wider from there (a load that waits for those stores).
    #[inline(always)]
    fn recv_nonblocking<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        lend: impl FnOnce() -> Result<Loan>,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        let (started, blocked) = self.recv_begin(s, what, lend, src, tag)?;
        Ok(self.nonblocking_request(started, blocked))
    }

    /// The start of a nonblocking receive: done at its start (from MPI_PROC_NULL, or matched
    /// to a message that had already arrived: its status in ranks of the job) or posted and
    /// registered with the scope; and what a wait on it blocks in.
    #[inline(always)]
    fn recv_begin<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        lend: impl FnOnce() -> Result<Loan>,
        src: i32,
        tag: i32,
    ) -> Result<(std::result::Result<OpId, Result<Status>>, Blocked)> {
        let pat = self.pattern(what, src, tag)?;
        let blocked = Blocked::recv(src, tag, self.ctx.raw());
        let Some(pat) = pat else {
            return Ok((Err(Ok(Status::proc_null())), blocked));
        };
        let mut e = self.eng.borrow_mut();
        let op = e.recv_start_lent(pat, lend)?;
        let started = if e.is_done(op) {
            // Matched a message that had already arrived: nothing left in flight.
            Err(e.take(op))
        } else {
            s.inner().register(&self.eng, &mut e, op);
            Ok(op)
        };
        Ok((started, blocked))
    }

    /// MPI_Irecv for a caller that keeps no request for a receive that completed at its
    /// start (see [`isend_begun`](Self::isend_begun)): [`Begun::Done`] with the status when
    /// it matched a message that had already arrived, or its source is [`PROC_NULL`];
    /// [`Begun::Pending`] with its request otherwise (a receive that completed with an error,
    /// truncation for one, keeps its request, which reports it). Errors as
    /// [`irecv`](Self::irecv)'s.
    pub fn irecv_begun<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        src: i32,
        tag: i32,
    ) -> Result<Begun<'s>> {
        as_begun(|kept| self.irecv_begun_with(s, buf, src, tag, |r| *kept = Some(r)))
    }

    /// [`irecv_begun`](Self::irecv_begun) for a caller that keeps the request where it
    /// chooses: `keep` is handed the request of a receive still in flight (and `None`
    /// returned), the status of one done at its start is returned. Inlined, so that the
    /// request is built where `keep` puts it, not moved there through the result (a large
    /// enum, copied in pieces that stall the loads after them: the C ABI's MPI_Irecv, its
    /// message rate).
    #[inline(always)]
    pub fn irecv_begun_with<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        src: i32,
        tag: i32,
        keep: impl FnOnce(Request<'s>),
    ) -> Result<Option<Status>> {
        let r = match self.recv_begin(s, "irecv", || lend_mut(buf, s), src, tag) {
            Ok((Err(Ok(st)), _)) if st.error() == ErrorClass::Success => {
                to_comm_ranks(&self.map, Ok(st)).map(Some)
            }
            Ok((started, blocked)) => {
                keep(self.nonblocking_request(started, blocked));
                Ok(None)
            }
            Err(e) => Err(e),
        };
        self.ret("irecv", r)
    }

    /// MPI_Irecv.
    pub fn irecv<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.recv_started(s, "irecv", || lend_mut(buf, s), src, tag)
    }

    /// MPI_Irecv into a [`ScratchBuffer`] that other pending receives may share (the
    /// pattern of OSU-style bandwidth benchmarks).
    pub fn irecv_scratch<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s ScratchBuffer,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.recv_started(
            s,
            "irecv",
            || Ok(Loan::new(View::scratch(buf), s)),
            src,
            tag,
        )
    }

    /// MPI_Recv_init: a persistent receive into `buf`.
    pub fn recv_init<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        let r = lend_mut(buf, s).and_then(|loan| {
            let pat = self.pattern("recv_init", src, tag)?;
            Ok(self.persistent(s, Plan::Recv { pat }, loan.exclusive()))
        });
        self.ret("recv_init", r)
    }

    /// MPI_Sendrecv.
    pub fn sendrecv<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        sbuf: &S,
        dest: i32,
        stag: i32,
        rbuf: &mut R,
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        let r = crate::request::scope(|s| {
            let send = lend(sbuf, s)?;
            let recv = lend_mut(rbuf, s)?;
            self.sendrecv_loans(s, send, dest, stag, recv, src, rtag)
        });
        self.ret("sendrecv", r)
    }

    /// Start the receive, then the send, and wait for both.
    #[allow(clippy::too_many_arguments)]
    fn sendrecv_loans<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        send: Loan,
        dest: i32,
        stag: i32,
        recv: Loan,
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        let mut rr = self.recv_nonblocking(s, "sendrecv", || Ok(recv), src, rtag)?;
        let (peer, ctx, tag) = self.send_target(dest, stag)?;
        let mode = SendMode::Standard;
        let started = {
            let mut e = self.eng.borrow_mut();
            match e.send_start(peer, ctx, tag, &send, mode)? {
                Started::Done => None,
                Started::Op(op) => {
                    s.inner().register(&self.eng, &mut e, op);
                    Some(op)
                }
            }
        };
        if let Some(op) = started {
            let mut sr = self.nonblocking_request(Ok(op), Blocked::send(peer, tag, ctx));
            sr.wait()?;
        }
        rr.wait()
    }

    /// MPI_Sendrecv_replace: send `buf`, then receive into it (the outgoing message is packed
    /// into a copy first).
    pub fn sendrecv_replace<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        dest: i32,
        stag: i32,
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        let r = crate::request::scope(|s| {
            let recv = lend_mut(buf, s)?;
            let send = outgoing_copy(&recv)?;
            self.sendrecv_loans(s, send, dest, stag, recv, src, rtag)
        });
        self.ret("sendrecv_replace", r)
    }

    // ---- probe ----------------------------------------------------------------------------

    fn probe_status(&self, env: Envelope, len: usize) -> Status {
        Status {
            source: self
                .map
                .as_ref()
                .map_or(env.src as i32, |m| m.rank_of(env.src as i32)),
            tag: env.tag,
            bytes: len,
            cancelled: false,
            error: ErrorClass::Success,
        }
    }

    /// MPI_Iprobe: the status of a message that a receive with `src`/`tag` would match now.
    pub fn iprobe(&self, src: i32, tag: i32) -> Result<Option<Status>> {
        let r = (|| {
            let Some(pat) = self.pattern("iprobe", src, tag)? else {
                return Ok(Some(Status::proc_null()));
            };
            Ok(self
                .eng
                .borrow_mut()
                .iprobe(&pat)
                .map(|(e, l)| self.probe_status(e, l)))
        })();
        self.ret("iprobe", r)
    }

    /// MPI_Probe: block until such a message is there.
    pub fn probe(&self, src: i32, tag: i32) -> Result<Status> {
        let r = (|| {
            let Some(pat) = self.pattern("probe", src, tag)? else {
                return Ok(Status::proc_null());
            };
            let blocked = Blocked::on(BlockedIn::Probe, src, tag, self.ctx.raw());
            self.eng
                .borrow_mut()
                .wait_for(blocked, |e| e.iprobe(&pat))
                .map(|(e, l)| self.probe_status(e, l))
        })();
        self.ret("probe", r)
    }

    /// MPI_Improbe: take the message out of matching, so that only [`Message::recv`] gets it.
    pub fn improbe(&self, src: i32, tag: i32) -> Result<Option<(Message, Status)>> {
        let r = (|| {
            let Some(pat) = self.pattern("improbe", src, tag)? else {
                return Ok(Some((self.null_message(), Status::proc_null())));
            };
            Ok(self.eng.borrow_mut().improbe(&pat).map(|m| self.matched(m)))
        })();
        self.ret("improbe", r)
    }

    /// MPI_Mprobe: block until a message matches, and take it out of matching.
    pub fn mprobe(&self, src: i32, tag: i32) -> Result<(Message, Status)> {
        let r = (|| {
            let Some(pat) = self.pattern("mprobe", src, tag)? else {
                return Ok((self.null_message(), Status::proc_null()));
            };
            let blocked = Blocked::on(BlockedIn::Probe, src, tag, self.ctx.raw());
            let m = self
                .eng
                .borrow_mut()
                .wait_for(blocked, |e| e.improbe(&pat))?;
            Ok(self.matched(m))
        })();
        self.ret("mprobe", r)
    }

    fn null_message(&self) -> Message {
        Message {
            comm: self.clone(),
            m: None,
        }
    }

    fn matched(&self, m: Matched) -> (Message, Status) {
        let st = self.probe_status(m.envelope(), m.len());
        (
            Message {
                comm: self.clone(),
                m: Some(m),
            },
            st,
        )
    }
}

impl Message {
    /// MPI_Mrecv: receive the matched message into `buf`.
    pub fn recv<B: BufferMut + ?Sized>(mut self, buf: &mut B) -> Result<Status> {
        let comm = self.comm.clone();
        let r = lending((), |l| match (self.m.take(), lend_mut(buf, l)) {
            (None, _) => Ok(Status::proc_null()),
            (Some(m), Err(e)) => {
                self.m = Some(m);
                Err(e)
            }
            (Some(m), Ok(loan)) => {
                let env = m.envelope();
                let mut e = comm.eng.borrow_mut();
                let op = e.mrecv_start(m, loan);
                e.wait_blocking(op, Blocked::recv(env.src as i32, env.tag, env.ctx))
            }
        });
        comm.ret("mrecv", to_comm_ranks(&comm.map, r))
    }

    /// MPI_Imrecv: the matched message is delivered at once (it has arrived), so the request
    /// is already complete; it exists for programs written against the nonblocking form.
    pub fn irecv<'s, B: BufferMut + ?Sized>(
        mut self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
    ) -> Result<Request<'s>> {
        let comm = self.comm.clone();
        let loan = match lend_mut(buf, s) {
            Ok(l) => l,
            Err(e) => return comm.ret("imrecv", Err(e)),
        };
        match self.m.take() {
            None => Ok(comm.nonblocking_request(
                Err(Ok(Status::proc_null())),
                Blocked::recv(PROC_NULL, ANY_TAG, comm.ctx.raw()),
            )),
            Some(m) => {
                let env = m.envelope();
                let mut e = comm.eng.borrow_mut();
                let op = e.mrecv_start(m, loan);
                s.inner().register(&comm.eng, &mut e, op);
                drop(e);
                Ok(comm
                    .nonblocking_request(Ok(op), Blocked::recv(env.src as i32, env.tag, env.ctx)))
            }
        }
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        // Receive it into nothing so that a rendezvous sender is released; the data is
        // discarded (MPI leaves a matched message that is never received undefined).
        if let Some(m) = self.m.take() {
            if let Ok(mut e) = self.comm.eng.try_borrow_mut() {
                let op = e.mrecv_start(m, Loan::EMPTY);
                let _ = e.take(op);
            }
        }
    }
}

/// A `*_begun_with` call `start` as a [`Begun`]: the status of an operation done at its
/// start, or the request it handed over.
fn as_begun<'s>(
    start: impl FnOnce(&mut Option<Request<'s>>) -> Result<Option<Status>>,
) -> Result<Begun<'s>> {
    let mut kept = None;
    Ok(match start(&mut kept)? {
        Some(st) => Begun::Done(st),
        None => Begun::Pending(
            kept.expect("an operation not done at its start handed its request over"),
        ),
    })
}
