//! Nonblocking send-receive (MPI 4.0, MPI 4.1 §3.10): one request for a send and a receive
//! started together, complete when both are. A request kind of its own ([`SendRecv`]),
//! implementing the completion seam outside `request/`.
//!
//! # Standard section(s)
//! MPI 4.1 §3.10 (send-receive: MPI_Isendrecv, MPI_Isendrecv_replace).
#![forbid(unsafe_code)]

use super::Comm;
use crate::datatype::buffer::{lend, lend_mut, Buffer, BufferMut};
use crate::error::Result;
use crate::p2p::engine::{Engine, SendMode, Started};
use crate::p2p::ops::OpId;
use crate::p2p::wait::Blocked;
use crate::p2p::Status;
use crate::request::completion::Completion;
use crate::request::{Request, Scope};
use crate::sys::lend::Loan;

/// One half of the pair.
#[derive(Debug)]
enum Half {
    /// In flight on the engine.
    Op(OpId),
    /// Complete; its result waits here.
    Done(Result<Status>),
}

impl Half {
    /// Collect the operation's result if it has completed; whether the half is done.
    fn settle_in(&mut self, e: &mut Engine) -> bool {
        if let Half::Op(op) = *self {
            if !e.is_done(op) {
                return false;
            }
            *self = Half::Done(e.take(op));
        }
        true
    }

    fn op(&self) -> Option<OpId> {
        match *self {
            Half::Op(op) => Some(op),
            Half::Done(_) => None,
        }
    }
}

/// The request of an isendrecv: its send and its receive.
#[derive(Debug)]
pub(crate) struct SendRecv {
    send: Half,
    recv: Half,
    /// What a long wait reports: the receive.
    blocked: Blocked,
    active: bool,
}

impl SendRecv {
    /// The result once both halves are done: the send's error if it failed, else the
    /// receive's status.
    fn result(&self) -> Result<Status> {
        match (&self.send, &self.recv) {
            (Half::Done(Err(e)), _) => Err(e.clone()),
            (_, Half::Done(r)) => r.clone(),
            _ => unreachable!("both halves are done"),
        }
    }
}

impl Completion for SendRecv {
    fn kind(&self) -> &'static str {
        "point-to-point"
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let r = self.peek(eng)?;
        self.active = false;
        Some(r)
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if !self.active {
            return None;
        }
        let send = self.send.settle_in(eng);
        let recv = self.recv.settle_in(eng);
        (send && recv).then(|| self.result())
    }

    /// Cancels both halves (MPI 4.1 §3.8: the request is complete, cancelled or not, once
    /// both are).
    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        for op in [self.send.op(), self.recv.op()].into_iter().flatten() {
            eng.cancel(op);
        }
        Ok(())
    }

    fn blocked_in(&self) -> Blocked {
        self.blocked
    }

    fn abandon(&mut self, eng: &mut Engine) {
        for op in [self.send.op(), self.recv.op()].into_iter().flatten() {
            eng.abandon(op);
        }
        self.active = false;
    }

    fn is_active(&self) -> bool {
        self.active
    }

    fn is_persistent(&self) -> bool {
        false
    }

    /// Going away while active: a receive nobody matched is withdrawn, the send is waited
    /// for (as for a dropped nonblocking receive and send).
    fn settle(&mut self, eng: &mut Engine) {
        if !self.active {
            return;
        }
        if let Some(op) = self.recv.op() {
            eng.cancel(op);
        }
        if self.wait(eng).is_err() {
            self.abandon(eng);
        }
    }

    /// Freeing is local: both halves go on and complete on their own.
    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        for op in [self.send.op(), self.recv.op()].into_iter().flatten() {
            eng.detach(op);
        }
        self.active = false;
        Ok(())
    }
}

impl Comm {
    /// MPI_Isendrecv: start a send of `sbuf` to `dest` and a receive into `rbuf` from `src`
    /// together; the request completes when both have, with the receive's status.
    #[allow(clippy::too_many_arguments)]
    pub fn isendrecv<'s, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        sbuf: &'s S,
        dest: i32,
        stag: i32,
        rbuf: &'s mut R,
        src: i32,
        rtag: i32,
    ) -> Result<Request<'s>> {
        let bufs = lend(sbuf, s).and_then(|send| lend_mut(rbuf, s).map(|recv| (send, recv)));
        let r = bufs
            .and_then(|(send, recv)| self.sendrecv_request(s, send, dest, stag, recv, src, rtag));
        self.ret("isendrecv", r)
    }

    /// MPI_Isendrecv_replace: send `buf` to `dest` and receive into it from `src`, as one
    /// request (the outgoing message is packed into a copy when the call is made).
    pub fn isendrecv_replace<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        dest: i32,
        stag: i32,
        src: i32,
        rtag: i32,
    ) -> Result<Request<'s>> {
        let r = lend_mut(buf, s).and_then(|recv| {
            let send = super::pt2pt::outgoing_copy(&recv)?;
            self.sendrecv_request(s, send, dest, stag, recv, src, rtag)
        });
        self.ret("isendrecv_replace", r)
    }

    /// Check both halves, then start the receive and the send.
    #[allow(clippy::too_many_arguments)]
    fn sendrecv_request<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        send: Loan,
        dest: i32,
        stag: i32,
        recv: Loan,
        src: i32,
        rtag: i32,
    ) -> Result<Request<'s>> {
        let pat = self.pattern("isendrecv", src, rtag)?;
        let (peer, ctx, tag) = self.send_target(dest, stag)?;
        let mode = SendMode::Standard;
        let mut e = self.eng.borrow_mut();
        let recv = match pat {
            None => Half::Done(Ok(Status::proc_null())),
            Some(pat) => {
                let op = e.recv_start(pat, recv);
                s.inner().register(&self.eng, &mut e, op);
                Half::Op(op)
            }
        };
        let send = match e.send_start(peer, ctx, tag, &send, mode) {
            Ok(Started::Done) => Half::Done(Ok(Status::empty())),
            Ok(Started::Op(op)) => {
                s.inner().register(&self.eng, &mut e, op);
                Half::Op(op)
            }
            Err(err) => {
                // Nothing was sent: withdraw the receive again.
                if let Half::Op(op) = recv {
                    e.cancel(op);
                    if e.is_done(op) {
                        let _ = e.take(op);
                    } else {
                        e.detach(op);
                    }
                }
                return Err(err);
            }
        };
        drop(e);
        let kind = SendRecv {
            send,
            recv,
            blocked: Blocked::recv(src, rtag, self.ctx.raw()),
            active: true,
        };
        Ok(Request::ext(&self.eng, self.origin(), Box::new(kind)))
    }
}
