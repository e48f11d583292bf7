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
//! - **Zero copy**: [`Channel::next_slot_mut`] and [`Channel::start_filled`] let a sender
//!   write the next slot in place, [`Channel::wait_in_place`] and [`Channel::arrived`] let a
//!   receiver read it there. The slots are in memory both ends map, processes or threads.
//! - **Unbinding** is collective over the pair in that both ends unbind, but neither waits
//!   for the other (a waiting unbind would deadlock two ends that unbind their two channels
//!   in opposite orders): the end leaves, its memory goes when both ends have left, and the
//!   partner's later starts and waits fail with MPI_ERR_REQUEST instead of hanging. The
//!   nonblocking forms are therefore complete when made. Dropping a bound channel without
//!   unbinding leaves the same way. `request_free` on a channel is MPI_ERR_REQUEST.
//! - **A channel is its own type**, [`Channel`], with the calls only channels have; it is a
//!   [`Request`] (through `Deref`), so it starts, waits, tests and joins the wait/test family
//!   and bundles like any persistent request.
//! - While a channel bound from a request exists, the channel holds the request's buffer: the
//!   request cannot start, and hands no buffer out; it gets both back when the channel is
//!   unbound or dropped. A request is bound to one channel at a time.
//! - **The buffer between calls**: a channel touches its buffer only inside calls on it (a
//!   send's window is read at its start, or, when its receive was not posted yet in
//!   synchronous mode, by the call that writes it; a receive's window is written by its
//!   wait), so [`Request::buffer_mut`] hands the buffer out between those calls even with
//!   starts outstanding: write window j before starting j, read window j after waiting for j.
//!
//! # Standard section(s)
//! None: seed 000 (`MPI_Bind_channel` and the rest), on MPI 4.1 §3.9 persistent requests.
#![forbid(unsafe_code)]

mod binding;
mod flow;
mod handshake;

pub use binding::{Binding, ADDRESS_BASE_INCREMENT};

use crate::error::{Error, ErrorClass, Result};
use crate::fabric::channel::Gone;
use crate::info::Info;
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::request::steps::Steps;
use crate::request::Request;
use crate::status::Status;
use flow::ChannelEnd;
use std::rc::Rc;

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

fn ibind_many<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
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
    let Some(first) = reqs.first_mut() else {
        return Ok(vec![]);
    };
    let eng = first.borrow_mut().engine().clone();
    if reqs
        .iter_mut()
        .any(|r| !Rc::ptr_eq(r.borrow_mut().engine(), &eng))
    {
        return Err(Error::new(
            ErrorClass::Request,
            format!("{what}: requests of different endpoints in one call"),
        ));
    }
    // One call id; each offer says how many of this call go to its destination, so that a
    // receiver can tell when all of them have arrived.
    let call = handshake::new_call(&mut eng.borrow_mut());
    let dests: Vec<Option<i32>> = reqs
        .iter_mut()
        .map(|r| {
            r.borrow_mut()
                .persistent_p2p()
                .and_then(|p| match p.plan() {
                    crate::request::pt2pt::Plan::Send { peer, .. } => Some(peer),
                    _ => None,
                })
        })
        .collect();
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
            r.borrow_mut(),
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

fn bind_many<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    slacks: &[u32],
    increments: &[isize],
    infos: &[Info],
    what: &str,
) -> Result<Vec<Channel<'s>>> {
    let origin = reqs.first_mut().map(|r| r.borrow_mut().origin().clone());
    let r = ibind_many(reqs, slacks, increments, infos, true, what).and_then(|mut b| {
        wait_bindings(&mut b)?;
        b.into_iter().map(Binding::into_channel).collect()
    });
    match origin {
        Some(o) => o.apply(what, r),
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
    let origin = req.origin().clone();
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
    origin.apply(what, r)
}

/// MPI_Bind_channel: bind a persistent send or receive request into a slack-1 channel with
/// its partner, which binds the matching request (collective over the pair). Returns the
/// channel; `req` stays valid but cannot start while the channel exists (the channel holds
/// its buffer). A receive with ANY_SOURCE or ANY_TAG binds to whichever matching sender
/// binds: [`Channel::partner`] names it.
pub fn bind_channel<'s>(req: &mut Request<'s>, info: &Info) -> Result<Channel<'s>> {
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
) -> Result<Channel<'s>> {
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
pub fn bind_channels<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    infos: &[Info],
) -> Result<Vec<Channel<'s>>> {
    bind_many(reqs, &[], &[], infos, "bind_channels")
}

/// MPI_Ibind_channels.
pub fn ibind_channels<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    infos: &[Info],
) -> Result<Vec<Binding<'s>>> {
    ibind_many(reqs, &[], &[], infos, false, "ibind_channels")
}

/// MPI_Bind_slack_channels: as [`bind_channels`], with a slackness and an address increment
/// per request (empty slices: 1 and 0 for all).
pub fn bind_slack_channels<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
    slacks: &[u32],
    increments: &[isize],
    infos: &[Info],
) -> Result<Vec<Channel<'s>>> {
    bind_many(reqs, slacks, increments, infos, "bind_slack_channels")
}

/// MPI_Ibind_slack_channels.
pub fn ibind_slack_channels<'s, R: std::borrow::BorrowMut<Request<'s>>>(
    reqs: &mut [R],
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

/// The end of channel `ch`, with no start outstanding, for an unbind.
fn unbind_end<'a>(ch: &'a mut Channel<'_>, what: &str) -> Result<&'a mut ChannelEnd> {
    let e = ch.end();
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
    Ok(e)
}

/// An unbind: complete as soon as made, since an end's leaving needs nothing from its
/// partner (see the module doc).
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

fn iunbind_many<'s, C: std::borrow::BorrowMut<Channel<'s>>>(
    chs: &mut [C],
    what: &str,
) -> Result<Vec<Request<'s>>> {
    let Some(first) = chs.first_mut() else {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("{what} of no channels"),
        ));
    };
    let (eng, origin) = {
        let c = first.borrow_mut();
        (c.0.engine().clone(), c.0.origin().clone())
    };
    let r = (|| {
        // Every channel is checked before any leaves: the call unbinds all of them or none.
        let n = chs.len();
        for (i, c) in chs.iter_mut().enumerate() {
            unbind_end(c.borrow_mut(), what).map_err(|e| match n {
                1 => e,
                _ => Error::new(e.class(), format!("channel {i}: {}", e.detail())),
            })?;
        }
        Ok(chs
            .iter_mut()
            .map(|c| {
                c.borrow_mut().end().leave(Gone::Unbound);
                Request::steps(&eng, origin.clone(), Unbinding)
            })
            .collect())
    })();
    origin.apply(what, r)
}

/// MPI_Unbind_channel: unbind a channel (collective over the pair: both ends unbind). This
/// end leaves at once, giving the buffer back to the request it was bound from; its later
/// starts fail, and the partner's later starts and waits on its end fail with
/// MPI_ERR_REQUEST. Neither end waits for the other, so each side may unbind its channels in
/// any order. MPI_ERR_REQUEST for a channel with starts outstanding, or already unbound.
pub fn unbind_channel(ch: &mut Channel<'_>) -> Result<()> {
    iunbind_channel(ch)?.wait().map(|_| ())
}

/// MPI_Iunbind_channel: the unbind as a request to wait for.
pub fn iunbind_channel<'s>(ch: &mut Channel<'s>) -> Result<Request<'s>> {
    let mut v = iunbind_many(std::slice::from_mut(ch), "iunbind_channel")?;
    Ok(v.pop().expect("one unbind per channel"))
}

/// MPI_Unbind_channels: unbind several channels, in any order (all of them, or none when one
/// cannot be unbound).
pub fn unbind_channels<'s, C: std::borrow::BorrowMut<Channel<'s>>>(chs: &mut [C]) -> Result<()> {
    if chs.is_empty() {
        return Ok(());
    }
    for mut r in iunbind_many(chs, "unbind_channels")? {
        r.wait()?;
    }
    Ok(())
}

/// MPI_Iunbind_channels: one request per channel (the seed completes the unbind of each by
/// a wait on it).
pub fn iunbind_channels<'s, C: std::borrow::BorrowMut<Channel<'s>>>(
    chs: &mut [C],
) -> Result<Vec<Request<'s>>> {
    iunbind_many(chs, "iunbind_channels")
}

/// A bound channel (seed 000): one end of a pair of persistent requests bound together, with
/// their own ordering space and memory both ends map. It is a [`Request`] (through `Deref`):
/// [`start`](Request::start), [`wait`](Request::wait), [`test`](Request::test),
/// [`buffer_mut`](Request::buffer_mut), the wait/test family and bundles take it as one; the
/// calls below are those only channels have.
///
/// # Standard section(s)
/// None: seed 000 (`MPI_Bind_channel` and the rest), on MPI 4.1 §3.9 persistent requests.
pub struct Channel<'s>(Request<'s>);

impl std::fmt::Debug for Channel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Channel").field(&self.0).finish()
    }
}

impl<'s> Channel<'s> {
    pub(crate) fn new(r: Request<'s>) -> Channel<'s> {
        Channel(r)
    }

    fn end(&mut self) -> &mut ChannelEnd {
        self.0
            .ext_mut::<ChannelEnd>()
            .expect("a Channel's request is a channel end")
    }

    /// Pass a call's result through the error handler of the channel's communicator.
    fn apply<T>(&self, what: &str, r: Result<T>) -> Result<T> {
        self.0.origin().apply(what, r)
    }

    /// The partner (seed 000): its rank in the communicator of the request bound, and its
    /// tag; `bytes` is what this end moves per start.
    pub fn partner(&self) -> Status {
        let c = self
            .0
            .ext_ref::<ChannelEnd>()
            .expect("a Channel's request is a channel end");
        Status {
            bytes: c.bytes,
            ..c.status
        }
    }

    /// The next slot of a channel's send end, to fill in place and send with
    /// [`start_filled`](Self::start_filled): zero copy (seed 000's early binding taken to the
    /// end). On a ready-mode channel its receive must be posted already (MPI_ERR_REQUEST
    /// otherwise: the receiver may still be reading the slot); on a synchronous one this
    /// waits for it, as a synchronous send would. `T` must view the message's bytes whole
    /// (MPI_ERR_TYPE).
    pub fn next_slot_mut<T: crate::datatype::Equivalence>(&mut self) -> Result<&mut [T]> {
        let origin = self.0.origin().clone();
        let eng = self.0.engine().clone();
        let c = self.end();
        let r = c
            .wait_posted(&mut eng.borrow_mut())
            .and_then(|()| c.next_slot())
            .and_then(|bytes| {
                let n = bytes.len();
                crate::sys::plain::cast_bytes_mut(bytes).ok_or_else(|| slot_type_error::<T>(n))
            });
        origin.apply("next_slot_mut", r)
    }

    /// MPI_Start of a channel's send end whose slot was filled in place through
    /// [`next_slot_mut`](Self::next_slot_mut): publishes it without copying.
    pub fn start_filled(&mut self) -> Result<()> {
        let r = self.end().start(true);
        self.apply("start_filled", r)
    }

    /// MPI_Wait on a channel's receive end that leaves the data in its slot, to read in place
    /// with [`arrived`](Self::arrived) (zero copy) until this end's next start.
    pub fn wait_in_place(&mut self) -> Result<Status> {
        let eng = self.0.engine().clone();
        let r = self.end().wait(&mut eng.borrow_mut(), true);
        self.apply("wait_in_place", r)
    }

    /// The data of a channel's last completed receive, read in place in its slot (after
    /// [`wait_in_place`](Self::wait_in_place), or after a plain wait, which also copied it
    /// into the buffer). MPI_ERR_REQUEST when none has completed, or its slot has been posted
    /// again by a later start; MPI_ERR_TYPE when `T` cannot view the bytes whole.
    pub fn arrived<T: crate::datatype::Equivalence>(&mut self) -> Result<&[T]> {
        let origin = self.0.origin().clone();
        let r = self.end().arrived().and_then(|bytes| {
            let n = bytes.len();
            crate::sys::plain::cast_bytes(bytes).ok_or_else(|| slot_type_error::<T>(n))
        });
        origin.apply("arrived", r)
    }

    /// The channel as a plain request (MPI's view of it: a persistent request).
    pub fn into_request(self) -> Request<'s> {
        self.0
    }
}

/// A channel slot of `n` bytes that `[T]` cannot view.
fn slot_type_error<T>(n: usize) -> Error {
    Error::new(
        ErrorClass::Type,
        format!(
            "a slot of {n} bytes cannot be viewed as [{}]",
            std::any::type_name::<T>()
        ),
    )
}

impl<'s> std::ops::Deref for Channel<'s> {
    type Target = Request<'s>;
    fn deref(&self) -> &Request<'s> {
        &self.0
    }
}

impl<'s> std::ops::DerefMut for Channel<'s> {
    fn deref_mut(&mut self) -> &mut Request<'s> {
        &mut self.0
    }
}

impl<'s> std::borrow::Borrow<Request<'s>> for Channel<'s> {
    fn borrow(&self) -> &Request<'s> {
        &self.0
    }
}

impl<'s> std::borrow::BorrowMut<Request<'s>> for Channel<'s> {
    fn borrow_mut(&mut self) -> &mut Request<'s> {
        &mut self.0
    }
}

/// A request that is a bound channel, as its [`Channel`] again (the request back when it is
/// not one): for channels kept in an array of requests, or taken back from a bundle.
impl<'s> TryFrom<Request<'s>> for Channel<'s> {
    type Error = Request<'s>;
    fn try_from(mut r: Request<'s>) -> std::result::Result<Channel<'s>, Request<'s>> {
        if r.ext_mut::<ChannelEnd>().is_some() {
            Ok(Channel(r))
        } else {
            Err(r)
        }
    }
}

impl<'s> From<Channel<'s>> for Request<'s> {
    fn from(c: Channel<'s>) -> Request<'s> {
        c.0
    }
}
