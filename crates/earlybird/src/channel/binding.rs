//! Binding: the arguments of a bind checked into what each end will be ([`EndSpec`]), and a
//! bind in progress ([`Binding`], MPI_Ibind_channel), which completes through the
//! handshake.
#![forbid(unsafe_code)]

use super::flow::{ChannelEnd, Side};
use super::handshake::{self, Accepted, Mapped, Offer, RecvBind, SendBind};
use super::Channel;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::channel::{ChannelMem, Gone, Word};
use crate::info::Info;
use crate::p2p::engine::{Engine, SendMode};
use crate::p2p::wait::Blocked;
use crate::request::completion::Origin;
use crate::request::pt2pt::{BufferSlot, Plan};
use crate::request::{EngineRef, Request};
use crate::status::Status;
use crate::sys::lend::Loan;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// The info key of the seed's ADDRESS_BASE_INCREMENT.
pub const ADDRESS_BASE_INCREMENT: &str = "address_base_increment";

/// What a channel is bound from: a persistent point-to-point request's plan, its buffer
/// (taken from the request while the bind and the channel last, and given back after), and
/// what the request keeps of its communicator.
pub(crate) struct ChannelSource<'s> {
    eng: EngineRef,
    origin: Origin,
    plan: Plan,
    /// The buffer, until a channel end takes it.
    buf: Option<Loan>,
    home: BufferSlot,
    _scope: PhantomData<&'s ()>,
}

impl<'s> ChannelSource<'s> {
    /// What binding `req` takes from it: MPI_ERR_REQUEST unless it is an inactive
    /// persistent point-to-point send or receive whose buffer is not lent to a channel
    /// already.
    pub(crate) fn of(req: &mut Request<'s>, what: &str) -> Result<ChannelSource<'s>> {
        let (eng, origin) = (req.engine().clone(), req.origin().clone());
        let active = req.is_active();
        if req.ext_mut::<ChannelEnd>().is_some() {
            return Err(Error::new(ErrorClass::Request, format!("{what}: the request is a bound channel already (bind the persistent request it came from)")));
        }
        let Some(p) = req.persistent_p2p() else {
            return Err(Error::new(ErrorClass::Request, format!("{what}: only a persistent point-to-point send or receive (send_init, ..., recv_init) can be bound into a channel")));
        };
        if active {
            return Err(Error::new(
                ErrorClass::Request,
                format!("{what}: the request is active (complete it before binding it)"),
            ));
        }
        let home = p.buffer_slot().clone();
        let Some(buf) = home.borrow_mut().take() else {
            return Err(Error::new(
                ErrorClass::Request,
                format!(
                    "{what}: the request is bound to a channel already (unbind that channel first)"
                ),
            ));
        };
        Ok(ChannelSource {
            eng,
            origin,
            plan: p.plan(),
            buf: Some(buf),
            home,
            _scope: PhantomData,
        })
    }

    fn buf(&self) -> &Loan {
        self.buf
            .as_ref()
            .expect("the source's buffer until its end takes it")
    }
}

impl Drop for ChannelSource<'_> {
    fn drop(&mut self) {
        // No channel took the buffer (the bind failed, or was dropped): give it back.
        if let Some(b) = self.buf.take() {
            *self.home.borrow_mut() = Some(b);
        }
    }
}

/// What one end of a channel will be, from its request and the bind's arguments.
#[derive(Debug, Clone)]
pub(crate) struct EndSpec {
    send: bool,
    slack: u64,
    step: u64,
    bytes: usize,
    ready: bool,
    blocked: Blocked,
}

pub(crate) fn end_spec(
    src: &ChannelSource<'_>,
    slack: u32,
    increment: isize,
    info: &Info,
    what: &str,
) -> Result<EndSpec> {
    if slack == 0 {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("{what}: slackness 0 (a channel has at least one start outstanding at a time)"),
        ));
    }
    let increment = if increment != 0 {
        increment
    } else {
        match info.get(ADDRESS_BASE_INCREMENT)? {
            None => 0,
            Some(v) => v.trim().parse::<isize>().map_err(|_| {
                Error::new(ErrorClass::InfoValue, format!("{what}: info {ADDRESS_BASE_INCREMENT} = {v:?} is not an integer count of elements"))
            })?,
        }
    };
    let buf = src.buf();
    let (send, ready, blocked) = match src.plan {
        Plan::Send {
            peer,
            ctx,
            tag,
            mode,
        } => {
            if peer == crate::status::PROC_NULL {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("{what}: a send to PROC_NULL has no partner to bind to"),
                ));
            }
            (
                true,
                mode != SendMode::Synchronous,
                Blocked::send(peer, tag, ctx),
            )
        }
        Plan::Recv { pat: Some(p) } => (false, true, Blocked::recv_matching(&p)),
        Plan::Recv { pat: None } => {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("{what}: a receive from PROC_NULL has no partner to bind to"),
            ))
        }
    };
    let total = buf.packed_len();
    let k = slack as usize;
    let (bytes, step) = if increment == 0 || slack == 1 {
        (total, 0)
    } else {
        if !buf.is_contiguous() {
            return Err(Error::new(ErrorClass::Type, format!("{what}: an address increment needs a contiguous buffer (this one is laid out by a derived datatype)")));
        }
        if !total.is_multiple_of(k) || !(total / k).is_multiple_of(buf.elem()) || total == 0 {
            return Err(Error::new(ErrorClass::Count, format!("{what}: a circular buffer of {total} bytes does not hold K = {slack} whole messages of whole elements of {} bytes", buf.elem())));
        }
        let count = (total / k / buf.elem()) as isize;
        if increment % count != 0 {
            return Err(Error::new(ErrorClass::Arg, format!("{what}: address increment {increment} is not a multiple of the {count} elements each start moves")));
        }
        let step = (increment / count).rem_euclid(k as isize) as u64;
        if gcd(step, slack as u64) != 1 {
            return Err(Error::new(ErrorClass::Arg, format!("{what}: address increment {increment} ({} messages of {count}) revisits a slot before K = {slack} starts: two outstanding starts would share it", increment / count)));
        }
        (total / k, step)
    };
    Ok(EndSpec {
        send,
        slack: slack as u64,
        step,
        bytes,
        ready,
        blocked,
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The side of a bind in progress.
#[derive(Debug)]
enum Pending {
    Send(Rc<RefCell<SendBind>>),
    /// A receive bind, and once matched what it got, until the sender has mapped it.
    Recv(Rc<RefCell<RecvBind>>, Option<Accepted>),
}

/// A bind in progress (MPI_Ibind_channel, MPI_Ibind_slack_channel): complete it with
/// [`wait`](Binding::wait) or [`test`](Binding::test) (or [`wait_bindings`](crate::channel::wait_bindings)), then take the
/// channel with [`into_channel`](Binding::into_channel).
pub struct Binding<'s> {
    src: ChannelSource<'s>,
    spec: EndSpec,
    side: Pending,
    result: Option<Result<(ChannelEnd, Status)>>,
}

impl std::fmt::Debug for Binding<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("side", &self.side)
            .field("done", &self.result.is_some())
            .finish()
    }
}

impl<'s> Binding<'s> {
    pub(crate) fn start(
        req: &mut Request<'s>,
        slack: u32,
        increment: isize,
        info: &Info,
        call: Option<(u64, u32, u32, bool)>,
        what: &str,
    ) -> Result<Binding<'s>> {
        let src = ChannelSource::of(req, what)?;
        let spec = end_spec(&src, slack, increment, info, what)?;
        let eng = src.eng.clone();
        let mut e = eng.borrow_mut();
        let (call, idx, n, blocking) = match call {
            Some(c) => c,
            None => (handshake::new_call(&mut e), 0, 1, false),
        };
        let buf = src.buf();
        let side = match &src.plan {
            Plan::Send { peer, ctx, tag, .. } => {
                let o = Offer {
                    src: e.rank(),
                    id: 0,
                    call,
                    idx,
                    n,
                    blocking,
                    ctx: *ctx,
                    tag: *tag,
                    slack,
                    bytes: spec.bytes as u64,
                    sig: buf.sig(),
                    elem: buf.elem() as u32,
                    contiguous: buf.is_contiguous(),
                };
                Pending::Send(handshake::offer(&mut e, *peer as u32, o)?)
            }
            Plan::Recv { pat: Some(p) } => Pending::Recv(
                handshake::post(
                    &mut e,
                    RecvBind {
                        pat: *p,
                        slack,
                        bytes: spec.bytes,
                        sig: buf.sig(),
                        elem: buf.elem(),
                        contiguous: buf.is_contiguous(),
                        blocking,
                        result: None,
                    },
                ),
                None,
            ),
            _ => unreachable!("checked by end_spec"),
        };
        drop(e);
        Ok(Binding {
            src,
            spec,
            side,
            result: None,
        })
    }

    /// Progress every bind of the endpoint, then see whether this one is done.
    fn advance(&mut self, eng: &mut Engine) -> Result<bool> {
        if self.result.is_some() {
            return Ok(true);
        }
        handshake::progress(eng)?;
        let got: Option<Result<(ChannelEnd, Status)>> = match &mut self.side {
            Pending::Send(sb) => {
                let r = sb.borrow_mut().result.take();
                r.map(|r| r.map(|m| self.send_end(m)))
            }
            Pending::Recv(rb, acc) => {
                if acc.is_none() {
                    match rb.borrow_mut().result.take() {
                        Some(Ok(a)) => *acc = Some(a),
                        Some(Err(e)) => {
                            self.result = Some(Err(e));
                            return Ok(true);
                        }
                        None => {}
                    }
                }
                // Bound once the sender has mapped the memory (then the descriptor closes):
                // the receive end may be unbound or dropped at once after its bind.
                match acc.as_ref().map(|a| handshake::mapped(eng, a)) {
                    Some(Some(Ok(()))) => {
                        let a = acc.take().expect("accepted");
                        let r = Ok(self.recv_end(a));
                        self.result = Some(r);
                        return Ok(true);
                    }
                    Some(Some(Err(e))) => {
                        self.result = Some(Err(e));
                        return Ok(true);
                    }
                    _ => None,
                }
            }
        };
        match got {
            None => Ok(false),
            Some(r) => {
                self.result = Some(r);
                Ok(true)
            }
        }
    }

    fn rank_of(&self, ep: u32) -> i32 {
        self.src
            .origin
            .ranks()
            .as_ref()
            .map_or(ep as i32, |m| m.rank_of(ep as i32))
    }

    fn make_end(
        &mut self,
        mem: ChannelMem,
        per: u64,
        partner: u32,
        tag: i32,
        bytes: usize,
    ) -> ChannelEnd {
        let status = Status {
            source: self.rank_of(partner),
            tag,
            bytes,
            cancelled: false,
            error: ErrorClass::Success,
        };
        let side = if self.spec.send {
            Side::Send(mem.into_send())
        } else {
            Side::Recv(mem.into_recv())
        };
        ChannelEnd {
            side,
            buf: self.src.buf.take().expect("the source's buffer"),
            home: Some(self.src.home.clone()),
            bytes: self.spec.bytes,
            per,
            slack: self.spec.slack,
            step: self.spec.step,
            ready: self.spec.ready,
            started: 0,
            completed: 0,
            next_unit: 0,
            status,
            unbound: false,
            blocked: self.spec.blocked.with_peer(partner as i32),
        }
    }

    fn send_end(&mut self, m: Mapped) -> (ChannelEnd, Status) {
        let (dest, tag) = match self.src.plan {
            Plan::Send { peer, tag, .. } => (peer as u32, tag),
            Plan::Recv { .. } => unreachable!("a send bind's plan"),
        };
        let end = self.make_end(m.mem, m.per, dest, tag, self.spec.bytes);
        let st = Status {
            bytes: m.partner_bytes,
            ..end.status
        };
        (end, st)
    }

    fn recv_end(&mut self, a: Accepted) -> (ChannelEnd, Status) {
        let end = self.make_end(a.mem, a.per, a.partner, a.tag, self.spec.bytes);
        let st = Status {
            bytes: a.partner_bytes,
            ..end.status
        };
        (end, st)
    }

    /// MPI_Test on a bind: `Some(status)` once bound (the status names the partner: its rank,
    /// its tag, and its bytes per start).
    pub fn test(&mut self) -> Result<Option<Status>> {
        let eng = self.src.eng.clone();
        let r = self.advance(&mut eng.borrow_mut());
        let r = r.and_then(|done| {
            if done {
                self.status().map(Some)
            } else {
                Ok(None)
            }
        });
        self.src.origin.apply("ibind_channel test", r)
    }

    /// MPI_Wait on a bind: block until bound; the status names the partner.
    pub fn wait(&mut self) -> Result<Status> {
        let eng = self.src.eng.clone();
        let blocked = self.spec.blocked.as_wait();
        let r = eng
            .borrow_mut()
            .wait_for(blocked, |e| match self.advance(e) {
                Ok(false) => None,
                Ok(true) => Some(Ok(())),
                Err(err) => Some(Err(err)),
            });
        let r = r.and_then(|x| x).and_then(|()| self.status());
        self.src.origin.apply("bind_channel", r)
    }

    fn status(&self) -> Result<Status> {
        match &self.result {
            Some(Ok((_, st))) => Ok(*st),
            Some(Err(e)) => Err(e.clone()),
            None => Err(Error::new(
                ErrorClass::Request,
                "the bind has not completed (wait for it or test it first)",
            )),
        }
    }

    /// The bound channel, once the bind has completed. MPI_ERR_REQUEST before completion;
    /// the bind's own error if it failed.
    pub fn into_channel(mut self) -> Result<Channel<'s>> {
        match self.result.take() {
            Some(Ok((end, _))) => Ok(Channel::new(
                // The end's statuses name the partner's rank already.
                Request::ext(
                    &self.src.eng,
                    self.src.origin.without_ranks(),
                    Box::new(end),
                ),
            )),
            Some(Err(e)) => Err(e),
            None => Err(Error::new(
                ErrorClass::Request,
                "into_channel before the bind completed (wait for it or test it first)",
            )),
        }
    }
}

impl Drop for Binding<'_> {
    fn drop(&mut self) {
        if self.result.is_some() {
            return;
        }
        let Ok(mut e) = self.src.eng.try_borrow_mut() else {
            return;
        };
        match &mut self.side {
            // The offer is out: the reply, when it comes, is mapped and the end marked gone,
            // so the receiver is not left waiting.
            Pending::Send(sb) => sb.borrow_mut().orphan = true,
            Pending::Recv(rb, acc) => {
                handshake::withdraw(&mut e, rb);
                if let Some(a) = acc.take() {
                    a.mem
                        .word(Word::ReceiverGone)
                        .store(Gone::Dropped as u64, Ordering::Release);
                }
            }
        }
    }
}
