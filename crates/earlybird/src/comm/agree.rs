//! Agreeing on a new communicator's context pair (MPI 4.1 §7.4: a context is agreed by the
//! processes of the new communicator).
//!
//! Every endpoint keeps a bitmap of the context pairs its communicators use. To make a
//! communicator, the participants exchange their *offers* (bitmaps of pairs they may take)
//! on an internal context (an allgather in log2(n) rounds, [`Exchange`]), and each takes the
//! lowest pair set in every offer.
//!
//! # No pair is handed out twice
//!
//! * A **blocking** agreement offers every pair that is free and claims the chosen pair
//!   when it completes; nothing else runs on the endpoint in between (an endpoint is driven
//!   by one thread, and a blocking agreement advances only itself).
//! * A blocking agreement **run aside** (under [`crate::p2p::wait::waits_aside`]: the C ABI
//!   under MPI_THREAD_MULTIPLE, whose other threads make calls on the endpoint while it
//!   waits) offers a window as a nonblocking one does and reserves it for its exchange; when
//!   the exchange ends it releases the window and, before anything else runs on the
//!   endpoint, claims the chosen pair ([`offers_windowed`]).
//! * A **nonblocking** agreement ([`Agreement`], MPI_Comm_idup) offers a *window*, the
//!   lowest [`WINDOW`] free pairs (fewer when pairs run short: [`window_for`]), and claims
//!   (reserves) all of them when it makes the offer; when the result arrives it keeps the
//!   chosen pair and releases the rest.
//!
//! Take two agreements X and Y on one endpoint that both end with pair p. Each offered p,
//! so p was free (neither used nor reserved) at each offer. Say X offered first. If X is
//! nonblocking or runs aside, p stayed reserved from X's offer until X ended holding it, so
//! Y's offer could not contain p. If X is blocking, it ended (claiming p) before anything
//! else on the endpoint offered. Either way Y could not have offered p: a contradiction.
//! Agreements on different endpoints may end with the same pair only if no endpoint
//! belongs to both communicators, where a shared pair is harmless (a context only
//! separates messages between the same endpoints).
//!
//! # Windows that do not meet
//!
//! The first round offers each participant's lowest free pairs, which meet unless other
//! agreements hold pairs there. Two nonblocking agreements started in different orders on
//! different endpoints (MPI allows it for different communicators) take the lowest windows
//! in opposite orders, and would keep doing so round after round. So a round after the
//! first offers the free pairs from a point of the pair space that every participant
//! computes alike from the agreement (its context, call number and round) and that differs
//! between agreements: concurrent agreements then look in different places, and a round
//! fails again only if their points fall close (then the next round draws new ones). After
//! 31 rounds without a common pair the agreement fails (no pair is free on all
//! participants, or others keep holding them). Rounds after the first advance when the
//! participants test or wait on their requests.
//!
//! A blocking agreement whose first round finds no pair common to the new communicator's
//! members goes on with such rounds among those members ([`settle`]): windows of processes
//! that run aside may miss each other as nonblocking ones do. Every member sees the same
//! offers, so all of them go on, or none.
#![forbid(unsafe_code)]

use super::context::{self, Mask, CTX_WORDS};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::{Engine, SendMode, Started};
use crate::p2p::matching::Pattern;
use crate::p2p::ops::OpId;
use crate::p2p::wait::{aside, Blocked, Pause};
use crate::request::EngineRef;
use crate::status::Status;
use crate::sys::lend::Loan;

/// A participant's offer in a blocking agreement: its free mask and the bytes it added.
pub(crate) type Offer = (Mask, Vec<u8>);

/// Bytes of a [`Mask`] on the wire.
pub(crate) const MASK_BYTES: usize = CTX_WORDS * 8;

/// Pairs a nonblocking agreement offers (and reserves) per round, at most.
pub(crate) const WINDOW: usize = 256;

/// The pairs a round offers when `free` pairs are free: [`WINDOW`], or an eighth of them
/// when that is fewer (at least one), so that many agreements pending at once on one
/// endpoint each get a window: five idups started by each of four threads, for one, would
/// otherwise reserve more pairs than there are and fail.
fn window_for(free: usize) -> usize {
    WINDOW.min((free / 8).max(1))
}

/// Internal tags of collective calls: round `round` of call number `seq` on a communicator.
/// They are negative, so they never meet the (non-negative) user tags that
/// MPI_Comm_create_group and MPI_Intercomm_create use on the same internal contexts.
pub(crate) fn coll_tag(seq: u32, round: u32) -> i32 {
    debug_assert!(round < 32);
    i32::MIN + (((seq & 0x03FF_FFFF) << 5) | round) as i32
}

/// How the rounds of an agreement are tagged.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tags {
    /// Round r of collective call number `seq` on the parent: [`coll_tag`]`(seq, r)`.
    Call(u32),
    /// Every round on the tag the program gave MPI_Comm_create_group: its rounds run among
    /// the same processes in the same pattern, so each pair's messages match in order.
    Fixed(i32),
}

impl Tags {
    fn tag(self, round: u32) -> i32 {
        match self {
            Tags::Call(seq) => coll_tag(seq, round),
            Tags::Fixed(t) => t,
        }
    }

    /// What tells this agreement's window points from a concurrent one's.
    fn salt(self) -> u32 {
        match self {
            Tags::Call(seq) => seq,
            Tags::Fixed(t) => t as u32 ^ 0x8000_0000,
        }
    }
}

pub(crate) fn mask_to_bytes(m: &Mask) -> Vec<u8> {
    m.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub(crate) fn mask_from_bytes(b: &[u8]) -> Mask {
    let mut m = [0u64; CTX_WORDS];
    for (w, c) in m.iter_mut().zip(b.chunks_exact(8)) {
        *w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
    }
    m
}

/// The AND of `masks` (all pairs set for none).
pub(crate) fn and_of<'a>(masks: impl IntoIterator<Item = &'a Mask>) -> Mask {
    let mut and = [u64::MAX; CTX_WORDS];
    for m in masks {
        for (a, w) in and.iter_mut().zip(m) {
            *a &= w;
        }
    }
    and
}

/// The lowest pair set in every one of `masks`.
pub(crate) fn lowest_common<'a>(masks: impl IntoIterator<Item = &'a Mask>) -> Option<u32> {
    and_of(masks)
        .iter()
        .enumerate()
        .find(|(_, &w)| w != 0)
        .map(|(i, w)| (i * 64) as u32 + w.trailing_zeros())
}

/// The pairs set in `m`, in increasing order.
fn pairs(m: &Mask) -> impl Iterator<Item = u32> + '_ {
    m.iter().enumerate().flat_map(|(i, &w)| {
        (0..64u32)
            .filter(move |b| w & (1 << b) != 0)
            .map(move |b| i as u32 * 64 + b)
    })
}

pub(crate) fn no_pair(what: &str, n: usize) -> Error {
    Error::new(
        ErrorClass::Other,
        format!(
            "{what}: no context id is free on all {n} processes (each endpoint has {} communicators at most)",
            CTX_WORDS * 64
        ),
    )
}

pub(crate) fn blocked(ctx: u32, tag: i32) -> Blocked {
    Blocked::collective(tag, ctx)
}

/// Take the operations of `ops` that have completed out of it; the first error among them.
fn take_done(e: &mut Engine, ops: &mut Vec<OpId>) -> Result<()> {
    let mut i = 0;
    while i < ops.len() {
        let op = ops[i];
        if !e.is_done(op) {
            i += 1;
            continue;
        }
        ops.swap_remove(i);
        e.take(op)?;
    }
    Ok(())
}

/// Abandon `ops` (the job is ending), taking those that completed.
fn withdraw(e: &mut Engine, ops: impl Iterator<Item = OpId>) {
    for op in ops {
        e.abandon(op);
        if e.is_done(op) {
            let _ = e.take(op);
        }
    }
}

/// An exchange of equal-length byte strings among `parts` (endpoints, the same list in the
/// same order on every participant), on context `ctx` with tag `tag`: every participant's
/// string, in participant order. It runs in rounds of doubling distance (Bruck's allgather):
/// in round k each participant sends the blocks it holds to the one 2^k before it and
/// receives as many from the one 2^k after it, so it talks to about log2(n) others instead
/// of n - 1 (a large job's shared memory grows with the pairs that talk, see `fabric::job`).
/// A participant relays others' blocks; the exchange still completes whatever its members
/// do meanwhile, because a blocking one is driven by its caller and a nonblocking one is on
/// the engine's background list (advanced by every progress call, `p2p::background`), and a
/// participant starts every send of its own before it completes. Owns its buffers (loans of
/// its own memory, which operations still in flight keep alive).
#[derive(Debug)]
pub(crate) struct Exchange {
    ctx: u32,
    tag: i32,
    parts: Vec<u32>,
    me: usize,
    /// Bytes of one participant's string.
    len: usize,
    /// The blocks held: those of participants me, me + 1, ... (mod n), in that order.
    held: Vec<u8>,
    /// This round's distance (the exchange is complete once it reaches n).
    dist: usize,
    /// This round's receive: the operation and its buffer.
    recv: Option<(OpId, Loan)>,
    /// Sends in flight.
    sends: Vec<OpId>,
    /// The buffers of the sends (kept to the end: a few, of at most n strings in all).
    sent: Vec<Loan>,
}

impl Exchange {
    /// Start the exchange of `mine` (its first round).
    pub(crate) fn start(
        e: &mut Engine,
        ctx: u32,
        tag: i32,
        parts: &[u32],
        me: usize,
        mine: Vec<u8>,
    ) -> Result<Exchange> {
        let mut x = Exchange {
            ctx,
            tag,
            parts: parts.to_vec(),
            me,
            len: mine.len(),
            held: mine,
            dist: 1,
            recv: None,
            sends: Vec::new(),
            sent: Vec::new(),
        };
        if x.dist < x.parts.len() {
            x.round(e)?;
        }
        Ok(x)
    }

    /// Start the round of distance `dist`: its receive, then its send.
    fn round(&mut self, e: &mut Engine) -> Result<()> {
        let n = self.parts.len();
        let count = self.dist.min(n - self.dist);
        let from = self.parts[(self.me + self.dist) % n];
        let to = self.parts[(self.me + n - self.dist) % n];
        let buf = Loan::zeroed(count * self.len);
        let pat = Pattern {
            ctx: self.ctx,
            src: Some(from),
            tag: Some(self.tag),
        };
        self.recv = Some((e.recv_start(pat, buf.clone()), buf));
        let out = Loan::copied(&self.held[..count * self.len]);
        if let Started::Op(op) =
            e.send_start(to as i32, self.ctx, self.tag, &out, SendMode::Standard)?
        {
            self.sends.push(op);
            self.sent.push(out);
        }
        Ok(())
    }

    /// Collect what has completed and start the rounds it allows: every participant's
    /// bytes, in participant order, once all have arrived and every send has completed.
    pub(crate) fn poll(&mut self, e: &mut Engine) -> Option<Result<Vec<Vec<u8>>>> {
        while let Some((op, buf)) = self.recv.take() {
            if !e.is_done(op) {
                self.recv = Some((op, buf));
                break;
            }
            match e.take(op) {
                Ok(st) if st.bytes() == buf.len() => {}
                Ok(st) => {
                    return Some(Err(Error::new(
                        ErrorClass::Intern,
                        format!(
                            "communicator creation: {} bytes in the round of distance {} where {} were expected",
                            st.bytes(),
                            self.dist,
                            buf.len()
                        ),
                    )))
                }
                Err(err) => return Some(Err(err)),
            }
            match buf.to_packed() {
                Ok(b) => self.held.extend_from_slice(&b),
                Err(u) => return Some(Err(Error::new(ErrorClass::Intern, u.to_string()))),
            }
            self.dist *= 2;
            if self.dist < self.parts.len() {
                if let Err(err) = self.round(e) {
                    return Some(Err(err));
                }
            }
        }
        if let Err(err) = take_done(e, &mut self.sends) {
            return Some(Err(err));
        }
        if self.recv.is_some() || !self.sends.is_empty() {
            return None;
        }
        let n = self.parts.len();
        let mut got = vec![Vec::new(); n];
        for (j, block) in self.held.chunks_exact(self.len.max(1)).take(n).enumerate() {
            got[(self.me + j) % n] = block[..self.len].to_vec();
        }
        Some(Ok(got))
    }

    /// Withdraw what can be withdrawn (the job is ending).
    pub(crate) fn abandon(&mut self, e: &mut Engine) {
        withdraw(
            e,
            self.recv
                .iter()
                .map(|(op, _)| *op)
                .chain(self.sends.iter().copied()),
        );
        self.recv = self.recv.take().filter(|(op, _)| !e.is_done(*op));
        self.sends.retain(|&op| !e.is_done(op));
    }
}

/// A blocking [`Exchange`].
pub(crate) fn exchange(
    eng: &EngineRef,
    ctx: u32,
    tag: i32,
    parts: &[u32],
    me: usize,
    mine: Vec<u8>,
) -> Result<Vec<Vec<u8>>> {
    exchange_pausing(eng, (ctx, tag), parts, me, mine, None)
}

/// A blocking [`Exchange`] on `(ctx, tag)`, [`drive`]n with `pause`.
fn exchange_pausing(
    eng: &EngineRef,
    (ctx, tag): (u32, i32),
    parts: &[u32],
    me: usize,
    mine: Vec<u8>,
    pause: Option<Pause>,
) -> Result<Vec<Vec<u8>>> {
    let mut x = Exchange::start(&mut eng.borrow_mut(), ctx, tag, parts, me, mine)?;
    let b = blocked(ctx, tag);
    drive(eng, b, pause, &mut x, Exchange::poll, Exchange::abandon)
}

/// Where round `round` of an agreement offers its window: the lowest pair in the first
/// round, then a point drawn from `salt` (which every participant computes alike from the
/// agreement, and which differs between concurrent agreements; see the module doc).
pub(crate) fn window_start(salt: u64, round: u32) -> u32 {
    if round == 0 {
        return 0;
    }
    let h = salt ^ u64::from(round).wrapping_mul(0x1656_67B1_9E37_79F9);
    ((h ^ (h >> 29)) % (CTX_WORDS as u64 * 64)) as u32
}

/// Reserve (claim) a window of the endpoint's free pairs, [`window_for`] of them from
/// `start` on (wrapping round): the pairs, and their mask.
pub(crate) fn reserve_window(e: &mut Engine, start: u32) -> (Vec<u32>, Mask) {
    let free = context::free_mask(e);
    let size = window_for(pairs(&free).count());
    let offered: Vec<u32> = pairs(&free)
        .filter(|&p| p >= start)
        .chain(pairs(&free).filter(|&p| p < start))
        .take(size)
        .collect();
    let mut window = [0u64; CTX_WORDS];
    for &p in &offered {
        context::claim(e, p);
        window[p as usize / 64] |= 1 << (p % 64);
    }
    (offered, window)
}

/// Drive `poll` on `x` to its result: a blocking wait, or, given the `pause` of the
/// [`crate::p2p::wait::waits_aside`] the calling thread runs under, polls with the endpoint
/// let go and that pause between them (which lets the layer's lock go, so the process's
/// other threads progress meanwhile). On an error of the wait, `abandon` withdraws what is
/// in flight.
fn drive<S, T>(
    eng: &EngineRef,
    blocked: Blocked,
    pause: Option<Pause>,
    x: &mut S,
    poll: impl Fn(&mut S, &mut Engine) -> Option<Result<T>>,
    abandon: impl FnOnce(&mut S, &mut Engine),
) -> Result<T> {
    let Some(pause) = pause else {
        let mut e = eng.borrow_mut();
        return match e.wait_for(blocked, |e| poll(x, e)) {
            Ok(r) => r,
            Err(err) => {
                abandon(x, &mut e);
                Err(err)
            }
        };
    };
    loop {
        {
            let mut e = eng.borrow_mut();
            e.progress();
            if let Some(r) = poll(x, &mut e) {
                return r;
            }
        }
        if let Err(err) = pause() {
            abandon(x, &mut eng.borrow_mut());
            return Err(err);
        }
    }
}

/// A blocking [`Exchange`] that, when the calling thread runs under
/// [`crate::p2p::wait::waits_aside`], polls with the endpoint let go (see [`drive`]). For
/// exchanges that take nothing other calls may take meanwhile (a shared region's key, an
/// offer of reserved pairs).
pub(crate) fn exchange_aside(
    eng: &EngineRef,
    ctx: u32,
    tag: i32,
    parts: &[u32],
    me: usize,
    mine: Vec<u8>,
) -> Result<Vec<Vec<u8>>> {
    exchange_pausing(eng, (ctx, tag), parts, me, mine, aside())
}

/// The first round of a blocking agreement that [`settle`] ends: as [`offers`], except that
/// when the calling thread runs aside (see the module doc) it offers a window of its free
/// pairs, reserved until the exchange ends. The window is released then: the caller claims
/// the pair it settles on before anything else runs on the endpoint.
pub(crate) fn offers_windowed(
    eng: &EngineRef,
    ctx: u32,
    tag: i32,
    parts: &[u32],
    me: usize,
    extra: &[u8],
) -> Result<Vec<Offer>> {
    if aside().is_none() {
        return offers(eng, ctx, tag, parts, me, extra);
    }
    let (offered, window) = reserve_window(&mut eng.borrow_mut(), 0);
    let mut mine = mask_to_bytes(&window);
    mine.extend_from_slice(extra);
    let got = exchange_aside(eng, ctx, tag, parts, me, mine);
    {
        let mut e = eng.borrow_mut();
        for p in offered {
            context::release(&mut e, p);
        }
    }
    Ok(got?
        .into_iter()
        .map(|b| (mask_from_bytes(&b[..MASK_BYTES]), b[MASK_BYTES..].to_vec()))
        .collect())
}

/// The pair a blocking agreement ends with, among `group` (the new communicator's
/// endpoints, the same list in the same order on each of them; this process is `me`) whose
/// first-round offers are `masks`: their lowest common pair, or, when there is none, the one
/// later rounds among them agree on (windows from points drawn from the agreement, see the
/// module doc), left claimed. Those rounds' waits run aside when the caller does.
pub(crate) fn settle<'a>(
    eng: &EngineRef,
    what: &'static str,
    ctx: u32,
    tags: Tags,
    group: &[u32],
    me: usize,
    masks: impl IntoIterator<Item = &'a Mask>,
) -> Result<u32> {
    if let Some(p) = lowest_common(masks) {
        return Ok(p);
    }
    let mut a = Agreement::new(what, ctx, tags, group.to_vec(), me);
    a.round = 1;
    drive(
        eng,
        a.blocked(),
        aside(),
        &mut a,
        Agreement::poll,
        Agreement::abandon,
    )
}

/// A blocking agreement's exchange: every participant's free mask, and the `extra` bytes
/// it added (the same length on all), in participant order. The caller picks the pair
/// ([`lowest_common`] over the offers of the new communicator's members) and claims it
/// before anything else runs on the endpoint.
pub(crate) fn offers(
    eng: &EngineRef,
    ctx: u32,
    tag: i32,
    parts: &[u32],
    me: usize,
    extra: &[u8],
) -> Result<Vec<Offer>> {
    let mut mine = mask_to_bytes(&context::free_mask(&mut eng.borrow_mut()));
    mine.extend_from_slice(extra);
    Ok(exchange(eng, ctx, tag, parts, me, mine)?
        .into_iter()
        .map(|b| (mask_from_bytes(&b[..MASK_BYTES]), b[MASK_BYTES..].to_vec()))
        .collect())
}

/// Rounds an agreement makes before it fails (see the module doc); the last round of the
/// internal tags is fault tolerance's agreement's (`fault_tolerance::AGREE_ROUND`).
pub(crate) const ROUNDS: u32 = 31;

/// A nonblocking agreement over windows of reserved pairs (see the module doc). Poll it
/// with the endpoint until it yields the pair, which it leaves claimed.
#[derive(Debug)]
pub(crate) struct Agreement {
    what: &'static str,
    ctx: u32,
    tags: Tags,
    parts: Vec<u32>,
    me: usize,
    round: u32,
    /// Pairs this endpoint reserved for the current round.
    offered: Vec<u32>,
    ex: Option<Exchange>,
}

impl Agreement {
    pub(crate) fn new(
        what: &'static str,
        ctx: u32,
        tags: Tags,
        parts: Vec<u32>,
        me: usize,
    ) -> Agreement {
        Agreement {
            what,
            ctx,
            tags,
            parts,
            me,
            round: 0,
            offered: Vec::new(),
            ex: None,
        }
    }

    pub(crate) fn blocked(&self) -> Blocked {
        blocked(self.ctx, self.tags.tag(self.round))
    }

    fn release(&mut self, e: &mut Engine) {
        for p in self.offered.drain(..) {
            context::release(e, p);
        }
    }

    /// Advance: `Some` with the agreed pair (claimed) or the error, once known.
    pub(crate) fn poll(&mut self, e: &mut Engine) -> Option<Result<u32>> {
        loop {
            if self.ex.is_none() {
                let window;
                (self.offered, window) = reserve_window(e, self.start());
                let tag = self.tags.tag(self.round);
                match Exchange::start(
                    e,
                    self.ctx,
                    tag,
                    &self.parts,
                    self.me,
                    mask_to_bytes(&window),
                ) {
                    Ok(x) => self.ex = Some(x),
                    Err(err) => {
                        self.release(e);
                        return Some(Err(err));
                    }
                }
            }
            let got = self.ex.as_mut()?.poll(e)?;
            self.ex = None;
            let windows: Vec<Mask> = match got {
                Ok(all) => all.iter().map(|b| mask_from_bytes(b)).collect(),
                Err(err) => {
                    self.release(e);
                    return Some(Err(err));
                }
            };
            if let Some(p) = lowest_common(&windows) {
                self.offered.retain(|&q| q != p);
                self.release(e);
                return Some(Ok(p));
            }
            self.release(e);
            if self.round + 1 == ROUNDS {
                return Some(Err(no_pair(self.what, self.parts.len())));
            }
            self.round += 1;
        }
    }

    /// Where this round's window starts (see [`window_start`]).
    fn start(&self) -> u32 {
        let salt = u64::from(self.ctx).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(self.tags.salt()).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        window_start(salt, self.round)
    }

    /// Withdraw what can be withdrawn and give the reservation back (the job is ending).
    pub(crate) fn abandon(&mut self, e: &mut Engine) {
        if let Some(x) = &mut self.ex {
            x.abandon(e);
        }
        self.release(e);
    }
}

// ---- library point-to-point on internal contexts --------------------------------------------

/// Wait for the operation `op` to complete: blocking, or aside when the calling thread
/// runs under [`crate::p2p::wait::waits_aside`] (see [`drive`]).
fn wait_op(eng: &EngineRef, op: OpId, b: Blocked) -> Result<Status> {
    let Some(pause) = aside() else {
        return eng.borrow_mut().wait_blocking(op, b);
    };
    let poll = |_: &mut (), e: &mut Engine| e.is_done(op).then(|| e.take(op));
    drive(eng, b, Some(pause), &mut (), poll, |_, _| {})
}

/// Blocking send of library bytes to endpoint `to` (aside, see [`wait_op`]).
pub(crate) fn send_bytes(eng: &EngineRef, ctx: u32, to: u32, tag: i32, data: &[u8]) -> Result<()> {
    let started = eng.borrow_mut().send_start(
        to as i32,
        ctx,
        tag,
        &Loan::copied(data),
        SendMode::Standard,
    )?;
    if let Started::Op(op) = started {
        wait_op(eng, op, blocked(ctx, tag))?;
    }
    Ok(())
}

/// Blocking receive of at most `cap` library bytes from endpoint `peer`, after sending it
/// `data` if given (the receive is posted first, so two peers swapping never wait on each
/// other). Its waits run aside (see [`wait_op`]).
pub(crate) fn swap_bytes(
    eng: &EngineRef,
    ctx: u32,
    peer: u32,
    tag: i32,
    data: Option<&[u8]>,
    cap: usize,
) -> Result<Vec<u8>> {
    let buf = Loan::zeroed(cap);
    let pat = Pattern {
        ctx,
        src: Some(peer),
        tag: Some(tag),
    };
    let rop = eng.borrow_mut().recv_start(pat, buf.clone());
    let both = || -> Result<Status> {
        if let Some(data) = data {
            send_bytes(eng, ctx, peer, tag, data)?;
        }
        wait_op(eng, rop, blocked(ctx, tag))
    };
    match both() {
        Ok(st) => {
            let mut v = buf
                .to_packed()
                .map_err(|u| Error::new(ErrorClass::Intern, u.to_string()))?;
            v.truncate(st.bytes());
            Ok(v)
        }
        Err(err) => {
            // The receive may still be posted (the send failed first): withdraw it (its
            // buffer is a loan it holds, alive for as long as it needs).
            let mut e = eng.borrow_mut();
            e.abandon(rop);
            if e.is_done(rop) {
                let _ = e.take(rop);
            }
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_shrink_so_that_many_pending_agreements_fit() {
        assert_eq!(window_for(4096), WINDOW);
        assert_eq!(window_for(800), 100);
        assert_eq!(window_for(3), 1);
        // Twenty-one agreements pending at once on an endpoint of 4096 pairs (five idups
        // started by each of four threads, and one more) each reserve a window.
        let mut free = 4096;
        for _ in 0..21 {
            let w = window_for(free);
            assert!(w >= 1 && w <= free, "a window of {w} of {free} free pairs");
            free -= w;
        }
        assert!(free > 0);
    }

    #[test]
    fn collective_tags_are_negative_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for seq in [0u32, 1, 2, 1000, 0x03FF_FFFF] {
            for round in [0u32, 1, 16, 31] {
                let t = coll_tag(seq, round);
                assert!(t < 0, "{seq} {round} -> {t}");
                assert!(seen.insert(t));
            }
        }
        // The count wraps (a call 2^26 calls later reuses the tag of this one).
        assert_eq!(coll_tag(0x0400_0000 + 5, 3), coll_tag(5, 3));
    }

    #[test]
    fn masks_round_trip_and_meet_at_the_lowest_common_pair() {
        let mut a = [0u64; CTX_WORDS];
        let mut b = [0u64; CTX_WORDS];
        for p in [3u32, 70, 300, 4095] {
            a[p as usize / 64] |= 1 << (p % 64);
        }
        for p in [4u32, 300, 4095] {
            b[p as usize / 64] |= 1 << (p % 64);
        }
        assert_eq!(mask_from_bytes(&mask_to_bytes(&a)), a);
        assert_eq!(pairs(&a).collect::<Vec<_>>(), vec![3, 70, 300, 4095]);
        assert_eq!(lowest_common([&a, &b]), Some(300));
        assert_eq!(lowest_common([&a]), Some(3));
        assert_eq!(lowest_common([&a, &[0u64; CTX_WORDS]]), None);
    }
}
