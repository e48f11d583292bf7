//! The bind handshake of a channel: pairwise, through the engine, on contexts no
//! communicator uses.
//!
//! A send end sends an *offer* (its communicator's context, tag, slackness, bytes per start,
//! datatype signature, mode) to its destination on [`OFFER_CTX`]. A receive end takes the
//! offers that reach its endpoint into a per-endpoint table and matches them, in arrival
//! order, against its pending receive binds with MPI's rules (source and tag, wildcards
//! included). On a match it checks the two ends fit, creates the channel's segment and
//! replies on [`REPLY_CTX`] (tag: the offer's id) with where to map it, or with the reason
//! they do not fit, which both ends then report.
//!
//! Every wait on a bind progresses every pending receive bind of its endpoint, so binds
//! started together ([`ibind_channels`](super::ibind_channels)) complete whatever order the
//! two sides list them in.
//!
//! A receive bind that waits, in a blocking call, for an offer from a given rank, while that
//! rank's blocking call has delivered all its offers here and none of them fits any pending
//! receive bind, can never complete: both calls fail (MPI_ERR_REQUEST) instead of hanging.
#![forbid(unsafe_code)]

use crate::comm::context::ContextId;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::channel::{ChannelMem, ChannelShape, Gone, Word, INLINE_BYTES};
use crate::fabric::{RegionKey, Transport};
use crate::p2p::engine::{Engine, SendMode, Started};
use crate::p2p::matching::Pattern;
use crate::p2p::wait::Blocked;
use crate::sys::lend::Loan;
use crate::sys::sig::Sig;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// Context of bind offers.
const OFFER_CTX: u32 = ContextId::CHANNEL_OFFERS.raw();
/// Context of bind replies.
const REPLY_CTX: u32 = ContextId::CHANNEL_REPLIES.raw();

/// What a send end offers, as it travels.
#[derive(Clone, Debug)]
pub(crate) struct Offer {
    /// The sender's endpoint (from the envelope).
    pub src: u32,
    pub id: u64,
    pub call: u64,
    pub idx: u32,
    pub n: u32,
    pub blocking: bool,
    pub ctx: u32,
    pub tag: i32,
    pub slack: u32,
    pub bytes: u64,
    pub sig: Sig,
    pub elem: u32,
    pub contiguous: bool,
}

impl Offer {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64);
        v.extend(self.id.to_le_bytes());
        v.extend(self.call.to_le_bytes());
        v.extend(self.idx.to_le_bytes());
        v.extend(self.n.to_le_bytes());
        v.push(self.blocking as u8);
        v.extend(self.ctx.to_le_bytes());
        v.extend(self.tag.to_le_bytes());
        v.extend(self.slack.to_le_bytes());
        v.extend(self.bytes.to_le_bytes());
        v.extend(self.sig.to_wire().to_le_bytes());
        v.extend(self.elem.to_le_bytes());
        v.push(self.contiguous as u8);
        v
    }

    fn decode(src: u32, b: &[u8]) -> Option<Offer> {
        let mut r = Reader(b);
        Some(Offer {
            src,
            id: r.u64()?,
            call: r.u64()?,
            idx: r.u32()?,
            n: r.u32()?,
            blocking: r.u8()? != 0,
            ctx: r.u32()?,
            tag: r.u32()? as i32,
            slack: r.u32()?,
            bytes: r.u64()?,
            sig: Sig::from_wire(r.u16()?),
            elem: r.u32()?,
            contiguous: r.u8()? != 0,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (a, b) = self.0.split_first_chunk::<N>()?;
        self.0 = b;
        Some(*a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|a| a[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
}

/// The reply tag of offer `id`.
fn reply_tag(id: u64) -> i32 {
    (id & 0x7FFF_FFFF) as i32
}

/// A receive end waiting for its offer.
#[derive(Debug)]
pub(crate) struct RecvBind {
    pub pat: Pattern,
    pub slack: u32,
    pub bytes: usize,
    pub sig: Sig,
    pub elem: usize,
    pub contiguous: bool,
    pub blocking: bool,
    pub result: Option<Result<Accepted>>,
}

/// What a matched receive bind got: its segment, and who it is bound to.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub mem: ChannelMem,
    /// Held open until the sender has mapped the segment through it.
    pub _fd: OwnedFd,
    pub partner: u32,
    pub tag: i32,
    pub partner_bytes: usize,
    /// Units per receive start.
    pub per: u64,
    /// The offer's id (a failure of the sender to map comes back with it).
    pub offer_id: u64,
}

/// What a send bind got.
#[derive(Debug)]
pub(crate) struct Mapped {
    pub mem: ChannelMem,
    pub partner_bytes: usize,
    /// Units per send start.
    pub per: u64,
}

/// A send end waiting for its reply.
#[derive(Debug)]
pub(crate) struct SendBind {
    pub dest: u32,
    pub id: u64,
    pub result: Option<Result<Mapped>>,
    /// Its `Binding` was dropped: map the reply anyway and leave at once.
    pub orphan: bool,
}

/// A channel layer's state per endpoint, kept in the engine's extensions.
#[derive(Default)]
struct Table {
    sends: Vec<Rc<RefCell<SendBind>>>,
    /// Offers not matched yet, in arrival order.
    offers: Vec<Offer>,
    /// Per sender: the latest call all of whose offers to this endpoint have arrived.
    complete_call: HashMap<u32, u64>,
    pending: Vec<Rc<RefCell<RecvBind>>>,
    next_id: u64,
    next_call: u64,
}

fn table(eng: &mut Engine) -> &mut Table {
    eng.ext.get::<Table>()
}

/// A new call id (one per bind call, for the never-match rule).
pub(crate) fn new_call(eng: &mut Engine) -> u64 {
    let t = table(eng);
    t.next_call += 1;
    t.next_call
}

/// Send `bytes` to `peer` and wait until they have left (binds are small and rare).
fn send_bytes(eng: &mut Engine, peer: u32, ctx: u32, tag: i32, bytes: &[u8]) -> Result<()> {
    let loan = Loan::copied(bytes);
    if let Started::Op(op) = eng.send_start(peer as i32, ctx, tag, &loan, SendMode::Standard)? {
        eng.wait(op, Blocked::send(peer as i32, tag, ctx))?;
    }
    Ok(())
}

/// Take the first message `pat` matches, if one has arrived, into a new vector.
fn take_bytes(eng: &mut Engine, pat: &Pattern) -> Option<Result<(u32, Vec<u8>)>> {
    let m = eng.improbe(pat)?;
    let src = m.envelope().src;
    let buf = Loan::zeroed(m.len());
    let op = eng.mrecv_start(m, buf.clone());
    Some(eng.take(op).and_then(|_| {
        buf.to_packed()
            .map(|v| (src, v))
            .map_err(|u| Error::new(ErrorClass::Intern, u.to_string()))
    }))
}

/// Post an offer for a send end; its replies are taken by [`progress`].
pub(crate) fn offer(eng: &mut Engine, dest: u32, mut o: Offer) -> Result<Rc<RefCell<SendBind>>> {
    let t = table(eng);
    t.next_id += 1;
    o.id = t.next_id;
    send_bytes(eng, dest, OFFER_CTX, 0, &o.encode())?;
    let sb = Rc::new(RefCell::new(SendBind {
        dest,
        id: o.id,
        result: None,
        orphan: false,
    }));
    table(eng).sends.push(sb.clone());
    Ok(sb)
}

/// The tag of a sender's "could not map" note for offer `id` (negative: apart from replies).
fn map_failed_tag(id: u64) -> i32 {
    -reply_tag(id) - 1
}

/// Whether the sender of an accepted offer has mapped the channel (`Some(Ok)`), failed to
/// (`Some(Err)`), or not yet answered (`None`).
pub(crate) fn mapped(eng: &mut Engine, a: &Accepted) -> Option<Result<()>> {
    if a.mem.word(Word::Mapped).load(Ordering::Acquire) != 0 {
        return Some(Ok(()));
    }
    let pat = Pattern {
        ctx: REPLY_CTX,
        src: Some(a.partner),
        tag: Some(map_failed_tag(a.offer_id)),
    };
    let (_, b) = match take_bytes(eng, &pat)? {
        Ok(x) => x,
        Err(e) => return Some(Err(e)),
    };
    Some(Err(Error::new(
        ErrorClass::Other,
        format!(
            "the sender (rank {}) could not map the channel's memory: {}",
            a.partner,
            String::from_utf8_lossy(&b)
        ),
    )))
}

/// Register a pending receive bind.
pub(crate) fn post(eng: &mut Engine, rb: RecvBind) -> Rc<RefCell<RecvBind>> {
    let rb = Rc::new(RefCell::new(rb));
    table(eng).pending.push(rb.clone());
    rb
}

/// Withdraw a receive bind that is going away unmatched.
pub(crate) fn withdraw(eng: &mut Engine, rb: &Rc<RefCell<RecvBind>>) {
    table(eng).pending.retain(|p| !Rc::ptr_eq(p, rb));
}

/// Look for the reply to send bind `id` from `dest`.
pub(crate) fn poll_reply(eng: &mut Engine, dest: u32, id: u64) -> Option<Result<Mapped>> {
    let pat = Pattern {
        ctx: REPLY_CTX,
        src: Some(dest),
        tag: Some(reply_tag(id)),
    };
    let (_, b) = match take_bytes(eng, &pat)? {
        Ok(x) => x,
        Err(e) => return Some(Err(e)),
    };
    let r = decode_reply(eng, &b);
    if let Err(e) = &r {
        if e.class() == ErrorClass::Other && b.first() == Some(&1) {
            // Accepted, but this end could not map the memory: tell the receiver.
            let _ = send_bytes(
                eng,
                dest,
                REPLY_CTX,
                map_failed_tag(id),
                e.detail().as_bytes(),
            );
        }
    }
    Some(r)
}

fn decode_reply(eng: &mut Engine, b: &[u8]) -> Result<Mapped> {
    let bad = || Error::new(ErrorClass::Intern, "malformed channel bind reply");
    let mut r = Reader(b);
    match r.u8().ok_or_else(bad)? {
        1 => {
            let (key, rest) = RegionKey::decode(r.0).ok_or_else(bad)?;
            r.0 = rest;
            let shape = ChannelShape {
                units: r.u32().ok_or_else(bad)?,
                unit_bytes: r.u64().ok_or_else(bad)? as usize,
                inline: r.u8().ok_or_else(bad)? != 0,
            };
            let per = r.u64().ok_or_else(bad)?;
            let partner_bytes = r.u64().ok_or_else(bad)? as usize;
            let cannot = |e: String| {
                Error::new(
                    ErrorClass::Other,
                    format!(
                        "cannot map the channel's memory (region {} of process {}): {e}",
                        key.fd, key.pid
                    ),
                )
            };
            if !shape.valid() || key.bytes < shape.total_bytes() {
                return Err(cannot(format!(
                    "a region of {} bytes for {shape:?}",
                    key.bytes
                )));
            }
            let seg = eng
                .fabric
                .map_region(&key)
                .map_err(|e| cannot(e.to_string()))?;
            let mem = ChannelMem::new(seg, shape).map_err(cannot)?;
            mem.word(Word::Mapped).store(1, Ordering::Release);
            Ok(Mapped {
                mem,
                partner_bytes,
                per,
            })
        }
        _ => {
            let class = r.u32().ok_or_else(bad)? as i32;
            let class = crate::error::ErrorClass::predefined()
                .find(|c| c.code() == class)
                .unwrap_or(ErrorClass::Other);
            Err(Error::new(class, String::from_utf8_lossy(r.0).into_owned()))
        }
    }
}

fn reject(eng: &mut Engine, o: &Offer, e: &Error) {
    let mut v = vec![0u8];
    v.extend((e.class().code() as u32).to_le_bytes());
    v.extend(e.detail().as_bytes());
    // A failure here means the job is ending; the receive end reports its own error anyway.
    let _ = send_bytes(eng, o.src, REPLY_CTX, reply_tag(o.id), &v);
}

/// How the two ends fit: unit bytes, units per send and per receive start.
fn fit(o: &Offer, rb: &RecvBind) -> Result<(usize, u64, u64)> {
    if o.slack != rb.slack {
        return Err(Error::new(
            ErrorClass::NotSame,
            format!(
                "the ends of a channel (rank {} tag {}) have different slackness: the sender's is {}, the receiver's {}",
                o.src, o.tag, o.slack, rb.slack
            ),
        ));
    }
    if !o.sig.is_mixed() && !rb.sig.is_mixed() && o.sig != rb.sig {
        return Err(Error::new(
            ErrorClass::Type,
            format!(
                "the ends of a channel (rank {} tag {}) have different datatypes: the sender sends {}, the receiver takes {}",
                o.src,
                o.tag,
                o.sig,
                rb.sig
            ),
        ));
    }
    let (s, r) = (o.bytes as usize, rb.bytes);
    if s == r {
        return Ok((s, 1, 1));
    }
    let unit = s.min(r);
    let whole = unit > 0
        && s.max(r).is_multiple_of(unit)
        && unit.is_multiple_of(o.elem.max(1) as usize)
        && unit.is_multiple_of(rb.elem.max(1));
    if !whole {
        return Err(if s > r {
            Error::new(ErrorClass::Truncate, format!("a channel's message of {s} bytes (from rank {} tag {}) is larger than its bound receive of {r} bytes, and not a whole number of such receives", o.src, o.tag))
        } else {
            Error::new(ErrorClass::Count, format!("incommensurable channel ends: the receive of {r} bytes is not a whole number of the {s}-byte sends of rank {} tag {}", o.src, o.tag))
        });
    }
    if s > r && !o.contiguous {
        return Err(Error::new(ErrorClass::Type, format!("a channel's send of {s} bytes split over receives of {r} needs a contiguous send buffer (rank {} tag {})", o.src, o.tag)));
    }
    if r > s && !rb.contiguous {
        return Err(Error::new(ErrorClass::Type, format!("a channel's receive of {r} bytes merging sends of {s} needs a contiguous receive buffer (rank {} tag {})", o.src, o.tag)));
    }
    Ok((unit, (s / unit) as u64, (r / unit) as u64))
}

/// A channel's memory is mapped by both ends: `Err` when the sender `src` is on another
/// host.
fn across_hosts(eng: &Engine, src: u32) -> Result<()> {
    if eng.fabric.shares_memory_with(src) {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::UnsupportedOperation,
        format!(
            "a channel from rank {src}, which is on another host: channels share memory \
             between their ends, and earlybird binds them between ranks of one host only"
        ),
    ))
}

/// Match offer `o` to receive bind `rb`: create the channel and reply, or reject.
fn accept(eng: &mut Engine, o: &Offer, rb: &mut RecvBind) {
    let made = across_hosts(eng, o.src)
        .and_then(|()| fit(o, rb))
        .and_then(|(unit, a, b)| {
            let units = rb.slack as u64 * a.max(b);
            if units > u32::MAX as u64 {
                return Err(Error::new(ErrorClass::Arg, "channel slackness too large"));
            }
            let shape = ChannelShape {
                units: units as u32,
                unit_bytes: unit,
                inline: a == 1 && b == 1 && unit <= INLINE_BYTES,
            };
            let no_mem = |e: String| {
                Error::new(
                    ErrorClass::NoMem,
                    format!(
                        "cannot create a channel's memory ({} bytes): {e}",
                        shape.total_bytes()
                    ),
                )
            };
            let (seg, key, fd) = eng
                .fabric
                .create_region(shape.total_bytes(), shape.total_bytes())
                .map_err(|e| no_mem(e.to_string()))?;
            let mem = ChannelMem::new(seg, shape).map_err(no_mem)?;
            Ok((mem, key, fd, a, b))
        });
    match made {
        Ok((mem, key, fd, a, b)) => {
            let shape = mem.shape();
            let mut v = vec![1u8];
            key.encode(&mut v);
            v.extend(shape.units.to_le_bytes());
            v.extend((shape.unit_bytes as u64).to_le_bytes());
            v.push(shape.inline as u8);
            v.extend(a.to_le_bytes());
            v.extend((rb.bytes as u64).to_le_bytes());
            rb.result = Some(
                send_bytes(eng, o.src, REPLY_CTX, reply_tag(o.id), &v).map(|()| Accepted {
                    mem,
                    _fd: fd,
                    partner: o.src,
                    tag: o.tag,
                    partner_bytes: o.bytes as usize,
                    per: b,
                    offer_id: o.id,
                }),
            );
        }
        Err(e) => {
            reject(eng, o, &e);
            rb.result = Some(Err(e));
        }
    }
}

/// Take the offers that have arrived and match every pending receive bind that can be.
pub(crate) fn progress(eng: &mut Engine) -> Result<()> {
    let pat = Pattern {
        ctx: OFFER_CTX,
        src: None,
        tag: None,
    };
    while let Some(got) = take_bytes(eng, &pat) {
        let (src, b) = got?;
        let Some(o) = Offer::decode(src, &b) else {
            return Err(Error::new(
                ErrorClass::Intern,
                format!("malformed channel bind offer from rank {src}"),
            ));
        };
        let t = table(eng);
        if o.idx + 1 == o.n {
            t.complete_call.insert(src, o.call);
        }
        t.offers.push(o);
    }
    if !table(eng).sends.is_empty() {
        let sends = table(eng).sends.clone();
        for sb in &sends {
            let (dest, id) = {
                let b = sb.borrow();
                (b.dest, b.id)
            };
            let Some(r) = poll_reply(eng, dest, id) else {
                continue;
            };
            table(eng).sends.retain(|x| !Rc::ptr_eq(x, sb));
            let mut b = sb.borrow_mut();
            if b.orphan {
                if let Ok(m) = &r {
                    m.mem
                        .word(Word::SenderGone)
                        .store(Gone::Dropped as u64, Ordering::Release);
                }
            } else {
                b.result = Some(r);
            }
        }
    }
    if table(eng).pending.is_empty() {
        return Ok(());
    }
    let pending = table(eng).pending.clone();
    for rb in &pending {
        let found = {
            let r = rb.borrow();
            let t = table(eng);
            t.offers.iter().position(|o| {
                r.pat.accepts(&crate::p2p::matching::Envelope {
                    ctx: o.ctx,
                    src: o.src,
                    tag: o.tag,
                })
            })
        };
        if let Some(i) = found {
            let o = table(eng).offers.remove(i);
            accept(eng, &o, &mut rb.borrow_mut());
            withdraw(eng, rb);
        }
    }
    never_match(eng);
    Ok(())
}

/// The never-match rule of the module doc.
fn never_match(eng: &mut Engine) {
    let pending = table(eng).pending.clone();
    for rb in &pending {
        let (src, blocking, ctx, tag) = {
            let r = rb.borrow();
            (r.pat.src, r.blocking, r.pat.ctx, r.pat.tag)
        };
        let (Some(s), true) = (src, blocking) else {
            continue;
        };
        let stuck = {
            let t = table(eng);
            let done = t.complete_call.get(&s).copied();
            t.offers
                .iter()
                .position(|o| o.src == s && o.blocking && done.is_some_and(|c| o.call <= c))
        };
        let Some(i) = stuck else { continue };
        let o = table(eng).offers.remove(i);
        let want = match tag {
            Some(t) => format!("tag {t}"),
            None => "any tag".to_string(),
        };
        let e = Error::new(
            ErrorClass::Request,
            format!(
                "channel binds that can never match: rank {} offers a send with tag {} (context {}) that no pending receive bind accepts, while the receive bind from it wants {want} (context {ctx}); both calls are blocking",
                o.src, o.tag, o.ctx
            ),
        );
        reject(eng, &o, &e);
        rb.borrow_mut().result = Some(Err(e));
        withdraw(eng, rb);
    }
}
