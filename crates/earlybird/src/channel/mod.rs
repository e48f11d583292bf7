//! channel — persistent bound channels, K-slack circular buffers and bundles (seed 000,
//! proposals 1, 3 and 4).
//!
//! A persistent send request and the persistent receive request it would match are *bound*
//! into a channel: a pair of endpoints that share one ring of slots in memory both map, and
//! live in their own ordering space, apart from their communicator's matching. Everything is
//! decided at bind time (peer, buffers, sizes, mode, the slot each start uses), so a start
//! is a copy and one store, and a wait is a poll of one word.
//!
//! ```no_run
//! # fn main() -> earlybird::Result<()> {
//! use earlybird::channel;
//! let universe = earlybird::init()?;
//! let world = universe.world();
//! let mut x = [0.0f64; 1];
//! earlybird::scope(|s| -> earlybird::Result<()> {
//!     if world.rank() == 0 {
//!         let mut req = world.send_init(s, &mut x, 1, 7)?;
//!         let mut ch = channel::bind_channel(&mut req, &earlybird::Info::new())?;
//!         for i in 0..100 {
//!             ch.buffer_mut::<f64>()?[0] = i as f64;
//!             // Ready mode: rank 1 started its receive before this send (the pong says so).
//!             ch.start()?;
//!             ch.wait()?;
//!             world.recv(&mut [0u8; 0], 1, 8)?;
//!         }
//!         channel::unbind_channel(&mut ch)?;
//!     } else if world.rank() == 1 {
//!         let mut req = world.recv_init(s, &mut x, 0, 7)?;
//!         let mut ch = channel::bind_channel(&mut req, &earlybird::Info::new())?;
//!         for _ in 0..100 {
//!             ch.start()?;
//!             world.send(&[0u8; 0], 0, 8)?;
//!             ch.wait()?;
//!         }
//!         channel::unbind_channel(&mut ch)?;
//!     }
//!     Ok(())
//! })
//! # }
//! ```
//!
//! # Semantics chosen where the seed leaves room
//!
//! - **Binding** is collective over the pair only. The receive end creates the channel's
//!   memory when an offer matches it, and the send end's bind completes when it has mapped
//!   it, so a blocking bind returns on both sides with the channel usable, or with the same
//!   error. The multiple forms post every offer and receive bind first, and every wait on a
//!   bind progresses all of its endpoint's pending receive binds: they complete whatever
//!   order the two sides list their requests in.
//! - **Ready mode** (every channel not bound from a synchronous send): a send whose receive
//!   is not posted yet fails with MPI_ERR_REQUEST and sends nothing, so nothing is lost and
//!   the start may be retried. **Synchronous mode** (bound from `ssend_init`): such a send
//!   waits for its receive, in its wait or test.
//! - **Slackness** K: up to K starts outstanding on each end (one more is MPI_ERR_REQUEST);
//!   each wait or test completes the oldest. The two ends must give the same K
//!   (MPI_ERR_NOT_SAME at bind otherwise).
//! - **ADDRESS_BASE_INCREMENT** (the `increment` argument, else the info key
//!   `address_base_increment`), in elements of the request's type: the request's buffer is
//!   the whole circular buffer of K x count elements, each start moves `count` = buffer / K
//!   elements, and start j uses elements `(j x increment) mod (K x count)` onward. The
//!   increment must be a multiple of `count` whose slot step is coprime with K (so each slot
//!   is used once every K starts, and no two outstanding starts share one), and the buffer
//!   contiguous; 0 (the default) means every start uses the whole buffer.
//! - **Split and merge**: the two ends' bytes per start may differ when one is a whole
//!   multiple of the other (and of both element sizes): a send of 1,024 doubles fills two
//!   receives of 512, or two sends of 512 fill one receive of 1,024. Anything else is refused
//!   at bind: MPI_ERR_TRUNCATE when the send is larger, MPI_ERR_COUNT when smaller.
//! - **Zero copy**: [`Request::next_slot_mut`] and [`Request::start_filled`] let a sender
//!   write the next slot in place, [`Request::wait_in_place`] and [`Request::arrived`] let a
//!   receiver read it there. The slots are in memory both ends map, processes or threads.
//! - **Unbinding** is collective over the pair in that both ends unbind, but neither waits
//!   for the other (a waiting unbind would deadlock two ends that unbind their two channels
//!   in opposite orders): the end leaves, its memory goes when both ends have left, and the
//!   partner's later starts and waits fail with MPI_ERR_REQUEST instead of hanging. The
//!   nonblocking forms are therefore complete when made. Dropping a bound channel without
//!   unbinding leaves the same way. `request_free` on a channel is MPI_ERR_REQUEST.
//! - While a channel bound from a request exists, that request cannot start (they share its
//!   buffer); it is usable again once the channel is unbound or dropped.
//! - **The buffer between calls**: a channel touches its buffer only inside calls on it (a
//!   send's window is read at its start, or, when its receive was not posted yet in
//!   synchronous mode, by the call that writes it; a receive's window is written by its
//!   wait), so `Request::buffer_mut` hands the buffer out between those calls even with starts
//!   outstanding: write window j before starting j, read window j after waiting for j.
//!
//! # Standard section(s)
//! None: seed 000 (`MPI_Bind_channel` and the rest), on MPI 4.1 §3.9 persistent requests.
#![forbid(unsafe_code)]

pub(crate) mod bind;
pub(crate) mod flow;

use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::p2p::engine::{Blocked, Engine, SendMode};
use crate::p2p::Status;
use crate::request::{ChannelSource, Plan, Request, Steps};
use bind::{Accepted, Mapped, Offer, RecvBind, SendBind};
use flow::{ChannelEnd, Role};
use std::cell::RefCell;
use std::rc::Rc;

/// The info key of the seed's ADDRESS_BASE_INCREMENT.
pub const ADDRESS_BASE_INCREMENT: &str = "address_base_increment";

/// What one end of a channel will be, from its request and the bind's arguments.
#[derive(Debug, Clone)]
struct EndSpec {
    role: Role,
    slack: u64,
    step: u64,
    bytes: usize,
    ready: bool,
    blocked: Blocked,
}

fn end_spec(
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
    let (role, buf, ready, blocked) = match &src.plan {
        Plan::Send {
            peer,
            ctx,
            tag,
            buf,
            mode,
        } => {
            if *peer == crate::PROC_NULL {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("{what}: a send to PROC_NULL has no partner to bind to"),
                ));
            }
            let b = Blocked::send(*peer, *tag, *ctx);
            (Role::Send, buf, *mode != SendMode::Synchronous, b)
        }
        Plan::Recv { pat: Some(p), buf } => {
            let b = Blocked::recv_matching(p);
            (Role::Recv, buf, true, b)
        }
        _ => {
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
        role,
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
enum Side {
    Send(Rc<RefCell<SendBind>>),
    /// A receive bind, and once matched what it got, until the sender has mapped it.
    Recv(Rc<RefCell<RecvBind>>, Option<Accepted>),
}

/// A bind in progress (MPI_Ibind_channel, MPI_Ibind_slack_channel): complete it with
/// [`wait`](Binding::wait) or [`test`](Binding::test) (or [`wait_bindings`]), then take the
/// channel with [`into_channel`](Binding::into_channel).
pub struct Binding<'s> {
    src: ChannelSource<'s>,
    spec: EndSpec,
    side: Side,
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
    fn start(
        req: &mut Request<'s>,
        slack: u32,
        increment: isize,
        info: &Info,
        call: Option<(u64, u32, u32, bool)>,
        what: &str,
    ) -> Result<Binding<'s>> {
        let src = req.channel_source(what)?;
        let spec = end_spec(&src, slack, increment, info, what)?;
        let eng = src.eng.clone();
        let mut e = eng.borrow_mut();
        let (call, idx, n, blocking) = match call {
            Some(c) => c,
            None => (bind::new_call(&mut e), 0, 1, false),
        };
        let side = match &src.plan {
            Plan::Send {
                peer,
                ctx,
                tag,
                buf,
                ..
            } => {
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
                Side::Send(bind::offer(&mut e, *peer as u32, o)?)
            }
            Plan::Recv { pat: Some(p), buf } => Side::Recv(
                bind::post(
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
        bind::progress(eng)?;
        let got: Option<Result<(ChannelEnd, Status)>> = match &mut self.side {
            Side::Send(sb) => {
                let r = sb.borrow_mut().result.take();
                r.map(|r| r.map(|m| self.send_end(m)))
            }
            Side::Recv(rb, acc) => {
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
                match acc.as_ref().map(|a| bind::mapped(eng, a)) {
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
            .map
            .as_ref()
            .map_or(ep as i32, |m| m.rank_of(ep as i32))
    }

    fn make_end(
        &self,
        mem: crate::fabric::channel::ChannelMem,
        per: u64,
        partner: u32,
        tag: i32,
        bytes: usize,
    ) -> ChannelEnd {
        let buf = match &self.src.plan {
            Plan::Send { buf, .. } | Plan::Recv { buf, .. } => buf.clone(),
            _ => unreachable!(),
        };
        let status = Status {
            source: self.rank_of(partner),
            tag,
            bytes,
            cancelled: false,
            error: ErrorClass::Success,
        };
        ChannelEnd {
            mem,
            role: self.spec.role,
            buf,
            bytes: self.spec.bytes,
            per,
            slack: self.spec.slack,
            step: self.spec.step,
            ready: self.spec.ready,
            started: 0,
            completed: 0,
            next_unit: 0,
            status,
            lock: self.src.lock.clone(),
            unbound: false,
            blocked: self.spec.blocked.with_peer(partner as i32),
        }
    }

    fn send_end(&self, m: Mapped) -> (ChannelEnd, Status) {
        let (dest, tag) = match &self.src.plan {
            Plan::Send { peer, tag, .. } => (*peer as u32, *tag),
            _ => unreachable!(),
        };
        let end = self.make_end(m.mem, m.per, dest, tag, self.spec.bytes);
        let st = Status {
            bytes: m.partner_bytes,
            ..end.status
        };
        (end, st)
    }

    fn recv_end(&self, a: Accepted) -> (ChannelEnd, Status) {
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
        crate::comm::errhandler::apply(&self.src.errh, "ibind_channel test", r)
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
        crate::comm::errhandler::apply(&self.src.errh, "bind_channel", r)
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

    /// The bound channel, once the bind has completed: a persistent request whose starts and
    /// waits run on the channel. MPI_ERR_REQUEST before completion; the bind's own error if
    /// it failed.
    pub fn into_channel(mut self) -> Result<Request<'s>> {
        match self.result.take() {
            Some(Ok((end, _))) => Ok(Request::from_channel(&self.src, end)),
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
            Side::Send(sb) => sb.borrow_mut().orphan = true,
            Side::Recv(rb, acc) => {
                bind::withdraw(&mut e, rb);
                if let Some(a) = acc.take() {
                    a.mem
                        .word(crate::fabric::channel::Word::ReceiverGone)
                        .store(2, std::sync::atomic::Ordering::Release);
                }
            }
        }
    }
}

/// MPI_Wait_all over binds: wait for every one (each wait progresses them all).
pub fn wait_bindings(binds: &mut [Binding<'_>]) -> Result<Vec<Status>> {
    let mut out = Vec::with_capacity(binds.len());
    let mut failed = vec![];
    for (i, b) in binds.iter_mut().enumerate() {
        match b.wait() {
            Ok(st) => out.push(st),
            Err(e) => {
                failed.push(format!("bind {i}: {e}"));
                out.push(Status {
                    error: e.class(),
                    ..Status::empty()
                });
            }
        }
    }
    if failed.is_empty() {
        Ok(out)
    } else {
        Err(Error::new(ErrorClass::InStatus, failed.join("; ")))
    }
}

fn ibind_many<'s>(
    reqs: &mut [Request<'s>],
    slacks: &[u32],
    increments: &[isize],
    infos: &[Info],
    blocking: bool,
    what: &str,
) -> Result<Vec<Binding<'s>>> {
    let n = reqs.len();
    let bad = |len: usize| len != n && len != 0;
    if bad(slacks.len()) || bad(increments.len()) || bad(infos.len()) {
        return Err(Error::new(ErrorClass::Arg, format!("{what}: {n} requests but {} slackness values, {} increments and {} infos (give one per request, or none)", slacks.len(), increments.len(), infos.len())));
    }
    let Some(first) = reqs.first() else {
        return Ok(vec![]);
    };
    let eng = first.engine().clone();
    if reqs.iter().any(|r| !Rc::ptr_eq(r.engine(), &eng)) {
        return Err(Error::new(
            ErrorClass::Request,
            format!("{what}: requests of different endpoints in one call"),
        ));
    }
    // One call id; each offer says how many of this call go to its destination, so that a
    // receiver can tell when all of them have arrived.
    let call = bind::new_call(&mut eng.borrow_mut());
    let dests: Vec<Option<i32>> = reqs.iter_mut().map(|r| r.channel_dest()).collect();
    let empty = Info::new();
    let mut out = Vec::with_capacity(n);
    for (i, r) in reqs.iter_mut().enumerate() {
        let (idx, total) = match dests[i] {
            Some(d) => (
                dests[..i].iter().filter(|x| **x == Some(d)).count() as u32,
                dests.iter().filter(|x| **x == Some(d)).count() as u32,
            ),
            None => (0, 1),
        };
        let slack = slacks.get(i).copied().unwrap_or(1);
        let inc = increments.get(i).copied().unwrap_or(0);
        let info = infos.get(i).unwrap_or(&empty);
        match Binding::start(
            r,
            slack,
            inc,
            info,
            Some((call, idx, total, blocking)),
            &format!("{what} (request {i})"),
        ) {
            Ok(b) => out.push(b),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn bind_many<'s>(
    reqs: &mut [Request<'s>],
    slacks: &[u32],
    increments: &[isize],
    infos: &[Info],
    what: &str,
) -> Result<Vec<Request<'s>>> {
    let errh = reqs.first().map(|r| r.err_slot().clone());
    let r = ibind_many(reqs, slacks, increments, infos, true, what).and_then(|mut b| {
        wait_bindings(&mut b)?;
        b.into_iter().map(Binding::into_channel).collect()
    });
    match errh {
        Some(h) => crate::comm::errhandler::apply(&h, what, r),
        None => r,
    }
}

fn one<'s>(
    req: &mut Request<'s>,
    slack: u32,
    increment: isize,
    info: &Info,
    blocking: bool,
    what: &str,
) -> Result<Binding<'s>> {
    let errh = req.err_slot().clone();
    let r = match blocking {
        false => Binding::start(req, slack, increment, info, None, what),
        true => ibind_many(
            std::slice::from_mut(req),
            &[slack],
            &[increment],
            std::slice::from_ref(info),
            true,
            what,
        )
        .map(|mut v| v.pop().expect("one binding")),
    };
    crate::comm::errhandler::apply(&errh, what, r)
}

/// MPI_Bind_channel: bind a persistent send or receive request into a slack-1 channel with
/// its partner, which binds the matching request (collective over the pair). Returns the
/// channel, a persistent request; `req` stays valid but cannot start while the channel
/// exists. A receive with ANY_SOURCE or ANY_TAG binds to whichever matching sender binds:
/// [`Request::channel_status`] names it.
pub fn bind_channel<'s>(req: &mut Request<'s>, info: &Info) -> Result<Request<'s>> {
    bind_slack_channel(req, 1, 0, info)
}

/// MPI_Ibind_channel: start binding; see [`Binding`].
pub fn ibind_channel<'s>(req: &mut Request<'s>, info: &Info) -> Result<Binding<'s>> {
    one(req, 1, 0, info, false, "ibind_channel")
}

/// MPI_Bind_slack_channel: bind into a K-slack channel (`slack` = K starts outstanding at
/// most on each end), whose buffer address advances by `increment` elements per start,
/// modulo K times the count (0: the info key `address_base_increment`, else none). See the
/// module doc for the circular buffer's rules.
pub fn bind_slack_channel<'s>(
    req: &mut Request<'s>,
    slack: u32,
    increment: isize,
    info: &Info,
) -> Result<Request<'s>> {
    let mut b = one(req, slack, increment, info, true, "bind_slack_channel")?;
    b.wait()?;
    b.into_channel()
}

/// MPI_Ibind_slack_channel.
pub fn ibind_slack_channel<'s>(
    req: &mut Request<'s>,
    slack: u32,
    increment: isize,
    info: &Info,
) -> Result<Binding<'s>> {
    one(req, slack, increment, info, false, "ibind_slack_channel")
}

/// MPI_Bind_channels: bind several requests at once (across communicators), each into a
/// slack-1 channel; `infos` has one entry per request, or none. Never deadlocks whatever
/// order each side lists its requests in.
pub fn bind_channels<'s>(reqs: &mut [Request<'s>], infos: &[Info]) -> Result<Vec<Request<'s>>> {
    bind_many(reqs, &[], &[], infos, "bind_channels")
}

/// MPI_Ibind_channels.
pub fn ibind_channels<'s>(reqs: &mut [Request<'s>], infos: &[Info]) -> Result<Vec<Binding<'s>>> {
    ibind_many(reqs, &[], &[], infos, false, "ibind_channels")
}

/// MPI_Bind_slack_channels: as [`bind_channels`], with a slackness and an address increment
/// per request (empty slices: 1 and 0 for all).
pub fn bind_slack_channels<'s>(
    reqs: &mut [Request<'s>],
    slacks: &[u32],
    increments: &[isize],
    infos: &[Info],
) -> Result<Vec<Request<'s>>> {
    bind_many(reqs, slacks, increments, infos, "bind_slack_channels")
}

/// MPI_Ibind_slack_channels.
pub fn ibind_slack_channels<'s>(
    reqs: &mut [Request<'s>],
    slacks: &[u32],
    increments: &[isize],
    infos: &[Info],
) -> Result<Vec<Binding<'s>>> {
    ibind_many(
        reqs,
        slacks,
        increments,
        infos,
        false,
        "ibind_slack_channels",
    )
}

/// The channel end of `ch`, inactive, for an unbind.
fn unbind_end(ch: &Request<'_>, what: &str) -> Result<Rc<RefCell<ChannelEnd>>> {
    let Some(end) = ch.channel_end() else {
        return Err(Error::new(
            ErrorClass::Request,
            format!("{what} of a request that is not a bound channel"),
        ));
    };
    {
        let e = end.borrow();
        if e.unbound {
            return Err(Error::new(
                ErrorClass::Request,
                format!("{what} of a channel already unbound"),
            ));
        }
        if e.outstanding() > 0 {
            return Err(Error::new(
                ErrorClass::Request,
                format!(
                    "{what} of a channel with {} starts outstanding (wait for them first)",
                    e.outstanding()
                ),
            ));
        }
    }
    Ok(end)
}

/// An unbind: complete as soon as made, since an end's leaving needs nothing from its
/// partner (see the module doc).
#[derive(Debug)]
struct Unbinding;

impl Steps for Unbinding {
    fn advance(&mut self, _eng: &mut Engine) -> Option<Result<Status>> {
        Some(Ok(Status::empty()))
    }
    fn blocked(&self) -> Blocked {
        Blocked::wait()
    }
    fn abandon(&mut self, _eng: &mut Engine) {}
}

fn iunbind_many<'s>(chs: &mut [Request<'s>], what: &str) -> Result<Request<'s>> {
    let Some(first) = chs.first() else {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("{what} of no channels"),
        ));
    };
    let errh = first.err_slot().clone();
    let r = (|| {
        let ends = chs
            .iter()
            .map(|c| unbind_end(c, what))
            .collect::<Result<Vec<_>>>()?;
        for (c, e) in chs.iter_mut().zip(&ends) {
            e.borrow_mut().leave(1);
            c.consume();
        }
        Ok(Request::unbinding(&chs[0], Box::new(Unbinding)))
    })();
    crate::comm::errhandler::apply(&errh, what, r)
}

/// MPI_Unbind_channel: unbind a channel (collective over the pair: both ends unbind). This
/// end leaves at once and the request becomes null; the partner's later starts and waits on
/// its end fail with MPI_ERR_REQUEST. Neither end waits for the other, so each side may
/// unbind its channels in any order.
/// MPI_ERR_REQUEST for a request that is not a channel, or one with starts outstanding.
pub fn unbind_channel(ch: &mut Request<'_>) -> Result<()> {
    iunbind_many(std::slice::from_mut(ch), "unbind_channel")?
        .wait()
        .map(|_| ())
}

/// MPI_Iunbind_channel: the unbind as a request to wait for.
pub fn iunbind_channel<'s>(ch: &mut Request<'s>) -> Result<Request<'s>> {
    iunbind_many(std::slice::from_mut(ch), "iunbind_channel")
}

/// MPI_Unbind_channels: unbind several channels, in any order.
pub fn unbind_channels(chs: &mut [Request<'_>]) -> Result<()> {
    if chs.is_empty() {
        return Ok(());
    }
    iunbind_many(chs, "unbind_channels")?.wait().map(|_| ())
}

/// MPI_Iunbind_channels.
pub fn iunbind_channels<'s>(chs: &mut [Request<'s>]) -> Result<Request<'s>> {
    iunbind_many(chs, "iunbind_channels")
}

impl<'s> Request<'s> {
    /// The destination endpoint of a persistent send (for a bind call's offer count).
    fn channel_dest(&mut self) -> Option<i32> {
        self.channel_source("bind").ok().and_then(|s| match s.plan {
            Plan::Send { peer, .. } => Some(peer),
            _ => None,
        })
    }
}
