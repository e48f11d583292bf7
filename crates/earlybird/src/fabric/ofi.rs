//! The transport between hosts: one libfabric endpoint per rank ([`crate::sys::ofi`]),
//! reliable and ordered from one endpoint to another.
//!
//! # Messages
//!
//! Every untagged message starts with 8 bytes: its kind, a flag byte, two spare bytes and
//! the sender's rank. A *frame* carries a [`Frame`] and its payload (inside the frame when it
//! fits, as in a ring, else after it), and frames
//! from one peer are taken in the order it sent them; *credit* carries the eager bytes the
//! sender has delivered so far (flow control, [`super::Transport::delivered_by`]); *finalize*
//! counts the sender into the job's finalize; *pull* asks for a peer's exposed bytes.
//!
//! # Bulk transfers (rendezvous)
//!
//! A receiver that [`pull`](Ofi::pull)s a peer's exposed buffer posts a tagged receive into
//! its own buffer (or a bounce buffer when that is not contiguous) under a tag of its own and
//! sends a pull message naming the tag and the [`RemoteRef`]. The peer's fabric answers
//! from its next poll with one tagged send straight from the exposed buffer (a gathered copy
//! when that is a segment table). The bulk rules of [`super::bulk`] keep the buffer lent
//! until the receiver's FIN; this transport adds one: frames from a peer are not delivered
//! while a bulk send to it is in flight, so the FIN that releases the buffer is seen only
//! after the provider has finished reading it. A rank waiting for its pull keeps answering
//! its peers' pulls, so two ranks pulling from each other both finish.

use super::bulk::{self, RemoteRef};
use super::frame::{Frame, INLINE_BYTES};
use super::hosts::Hosts;
use super::job::JobSegment;
use crate::sys::lend::Loan;
use crate::sys::ofi::{Addr, Completion, Endpoint, Posted, CONTEXT_BYTES};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;

const PREFIX: usize = 8;
const HEADER: usize = std::mem::size_of::<Frame>();
/// Payload bytes one frame carries between hosts.
pub(crate) const MAX_PAYLOAD: usize = 64 << 10;
const BUF_BYTES: usize = PREFIX + HEADER + MAX_PAYLOAD;
/// Frame receives kept posted.
const RECVS: usize = 32;
/// Messages up to this many bytes are copied out of their receive buffer.
const SMALL: usize = 4096;
/// Small-message buffers kept for reuse (what a flood leaves behind beyond them is freed).
const SMALL_SPARES: usize = 64;
/// Delivered bytes owed to a peer before a credit message goes, at most: a quarter of the
/// flow limit when that is less ([`Ofi::set_flow_limit`]), so that a sender held back by it
/// always gets credit. Not every 64 KiB: a credit message sent after each 64 KiB eager
/// message, just before the answer to it, made a 64 KiB ping-pong between namespace hosts
/// take 66 to 121 us instead of 26 (the provider holding the answer behind the small
/// message; 65,500 bytes, owed credit every other message, were not delayed).
const CREDIT_BATCH: u64 = 256 << 10;

const K_FRAME: u8 = 1;
const K_CREDIT: u8 = 2;
const K_FINALIZE: u8 = 3;
const K_PULL: u8 = 4;

/// A message received into one of the frame receive buffers, which it keeps until consumed.
struct Received {
    buf: Box<[u8]>,
    len: usize,
}

/// An operation in flight: the provider's scratch space first (the context libfabric is
/// given points here), then what the operation is.
#[repr(C)]
struct Op {
    scratch: [u64; CONTEXT_BYTES / 8],
    what: What,
}

enum What {
    /// A posted frame receive and its buffer.
    Recv(Box<[u8]>),
    /// A frame or control message to `peer`.
    Send { peer: u32, bytes: Vec<u8> },
    /// Bulk data to `peer`: from a gathered copy held here until it has left, or from the
    /// exposed buffer itself (`None`).
    PullSend { peer: u32, _copy: Option<Vec<u8>> },
    /// Bulk data landing for the pull with this tag.
    PullRecv(u64),
}

fn op(what: What) -> *mut Op {
    Box::into_raw(Box::new(Op {
        scratch: [0; CONTEXT_BYTES / 8],
        what,
    }))
}

/// A pull asked for by a peer that found no room to be answered yet.
struct Asked {
    peer: u32,
    tag: u64,
    remote: RemoteRef,
    n: usize,
}

/// The endpoint and what its completions change: mutable behind a `RefCell`, since a pull
/// (which the layers above call through `&self`) must reap completions while it waits.
struct Wire {
    /// Declared first: closed before the receive buffers below are freed.
    ep: Endpoint,
    me: u32,
    /// Per rank: its address, `None` for ranks of this host.
    addr: Vec<Option<Addr>>,
    /// The posted frame receives (declared after the endpoint: freed once it is closed).
    recvs: Receives,
    /// Receives to post again when the provider has room.
    unposted: Vec<*mut Op>,
    /// Frames arrived, in arrival order, with their senders, not yet sorted per peer.
    stash: Vec<(u32, Received)>,
    /// Receive buffers taken back from consumed frames, for the next receives.
    spare: Vec<Box<[u8]>>,
    /// Buffers of [`SMALL`] bytes taken back from consumed small messages, for the next
    /// copies (at most [`SMALL_SPARES`]).
    small_spare: Vec<Box<[u8]>>,
    /// Per peer: the eager bytes it says it has delivered.
    delivered_by: Vec<u64>,
    /// Per peer: bulk sends to it in flight.
    bulk_out: Vec<u32>,
    /// Operations in flight that send (frames, control, bulk).
    sends: usize,
    /// Peers counted into finalize.
    finalizing: u32,
    /// Tags of pulls whose data has landed.
    landed: Vec<u64>,
    next_tag: u64,
    asked: VecDeque<Asked>,
    scratch: Vec<u8>,
    /// Set once this rank is in finalize: a peer that finishes first may close its end, and
    /// what the provider then reports is no failure.
    leaving: bool,
    failed: bool,
}

/// The transport to the ranks on other hosts.
pub(crate) struct Ofi {
    wire: RefCell<Wire>,
    /// Per peer: frames taken from the stash, in order.
    arrived: Vec<VecDeque<Received>>,
    /// Per peer: delivered eager bytes reported so far, and how many are not yet sent.
    credit: Vec<(u64, u64)>,
    /// Owed bytes that make a credit message go (see [`CREDIT_BATCH`]).
    credit_batch: u64,
    job: JobSegment,
}

impl std::fmt::Debug for Ofi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ofi").finish_non_exhaustive()
    }
}

impl Ofi {
    /// Rank `me`'s transport, to the ranks of `job` that `hosts` gives an address (the
    /// others share this host), through the endpoint `hosts` holds for `me`.
    pub(crate) fn new(job: JobSegment, me: u32, hosts: &Hosts) -> Result<Ofi, String> {
        let mut ep = hosts.take_endpoint(me)?;
        let n = job.nranks() as usize;
        let addr = (0..n as u32)
            .map(|r| match hosts.card(r) {
                Some(name) => ep
                    .insert(name)
                    .map(Some)
                    .map_err(|e| format!("rank {r}'s network address: {e}")),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut w = Wire {
            ep,
            me,
            addr,
            recvs: Receives(Vec::with_capacity(RECVS)),
            unposted: Vec::new(),
            stash: Vec::new(),
            spare: Vec::new(),
            small_spare: Vec::new(),
            delivered_by: vec![0; n],
            bulk_out: vec![0; n],
            sends: 0,
            finalizing: 0,
            landed: Vec::new(),
            next_tag: 1,
            asked: VecDeque::new(),
            scratch: Vec::with_capacity(BUF_BYTES),
            leaving: false,
            failed: false,
        };
        for _ in 0..RECVS {
            let o = op(What::Recv(vec![0u8; BUF_BYTES].into_boxed_slice()));
            w.recvs.0.push(o);
            if let Posted::Failed(e) = w.post_recv(o) {
                return Err(e);
            }
        }
        Ok(Ofi {
            wire: RefCell::new(w),
            arrived: (0..n).map(|_| VecDeque::new()).collect(),
            credit: vec![(0, 0); n],
            credit_batch: CREDIT_BATCH,
            job,
        })
    }

    /// Reap completions: frames into their peers' queues, pulls answered, credit noted.
    pub(crate) fn poll(&mut self) -> bool {
        let w = self.wire.get_mut();
        let r = w.poll();
        self.note(r);
        let w = self.wire.get_mut();
        let did = !w.stash.is_empty();
        for (src, bytes) in w.stash.drain(..) {
            self.arrived[src as usize].push_back(bytes);
        }
        did
    }

    fn note(&self, r: Result<(), String>) {
        if let Err(e) = r {
            let mut w = self.wire.borrow_mut();
            if w.leaving || w.failed {
                return;
            }
            w.failed = true;
            eprintln!(
                "earlybird: rank {}: the network between hosts failed: {e}",
                w.me
            );
            self.job.abort(w.me as i32, 1);
        }
    }

    /// Send `frame` with a payload of `len` bytes that `fill` writes; `false` when the
    /// provider has no room now.
    pub(crate) fn try_send(
        &mut self,
        peer: u32,
        frame: &Frame,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        let w = self.wire.get_mut();
        let mut m = std::mem::take(&mut w.scratch);
        m.clear();
        m.extend_from_slice(&prefix(K_FRAME, 0, w.me));
        let mut f = *frame;
        f.len = len as u32;
        if len <= INLINE_BYTES {
            // Inside the frame, as in a ring: the message is 64 bytes, which every provider
            // injects (rxm's inject size is 64), without an operation to complete.
            fill(&mut f.inline[..len]);
            m.extend_from_slice(bytemuck::bytes_of(&f));
        } else {
            m.extend_from_slice(bytemuck::bytes_of(&f));
            m.resize(PREFIX + HEADER + len, 0);
            fill(&mut m[PREFIX + HEADER..]);
        }
        let r = w.post_msg(peer, m, false);
        match r {
            Posted::Yes => true,
            Posted::Again => false,
            Posted::Failed(e) => {
                self.note(Err(format!("sending to rank {peer}: {e}")));
                true
            }
        }
    }

    pub(crate) fn peek(&self, peer: u32) -> Option<Frame> {
        if self.wire.borrow().bulk_out[peer as usize] != 0 {
            return None;
        }
        let m = self.arrived[peer as usize].front()?;
        Some(bytemuck::pod_read_unaligned(
            &m.buf[PREFIX..PREFIX + HEADER],
        ))
    }

    pub(crate) fn payload<'f>(&'f self, peer: u32, frame: &'f Frame) -> &'f [u8] {
        let len = frame.len as usize;
        if len <= INLINE_BYTES {
            return &frame.inline[..len];
        }
        self.arrived[peer as usize].front().map_or(&[], |m| {
            let at = PREFIX + HEADER;
            &m.buf[at..(at + frame.len as usize).min(m.len)]
        })
    }

    pub(crate) fn consume(&mut self, peer: u32) {
        if let Some(m) = self.arrived[peer as usize].pop_front() {
            self.wire.get_mut().recycle(m.buf);
        }
    }

    pub(crate) fn delivered_by(&self, peer: u32) -> u64 {
        self.wire.borrow().delivered_by[peer as usize]
    }

    /// Senders may have `bytes` of eager payload undelivered to this rank: credit goes at
    /// least four times within that.
    pub(crate) fn set_flow_limit(&mut self, bytes: u64) {
        self.credit_batch = (bytes / 4).clamp(1, CREDIT_BATCH);
    }

    /// Note `bytes` more of `from`'s eager payload delivered; tell it every
    /// [`CREDIT_BATCH`] bytes (or fewer, [`set_flow_limit`](Self::set_flow_limit)).
    pub(crate) fn report_delivered(&mut self, from: u32, bytes: u64) {
        let c = &mut self.credit[from as usize];
        c.0 += bytes;
        c.1 += bytes;
        if c.1 < self.credit_batch {
            return;
        }
        let total = c.0;
        let w = self.wire.get_mut();
        let mut m = prefix(K_CREDIT, 0, w.me).to_vec();
        m.extend_from_slice(&total.to_le_bytes());
        if let Posted::Yes = w.post_msg(from, m, false) {
            self.credit[from as usize].1 = 0;
        }
    }

    /// Count this rank into finalize at every rank on another host (after every frame sent
    /// to them before).
    pub(crate) fn enter_finalize(&mut self) {
        let w = self.wire.get_mut();
        w.leaving = true;
        for peer in 0..w.addr.len() as u32 {
            if w.addr[peer as usize].is_none() {
                continue;
            }
            // Tracked, so that this rank does not leave while it is still queued.
            while let Posted::Again = w.post_msg(peer, prefix(K_FINALIZE, 0, w.me).to_vec(), true) {
                let _ = w.poll();
            }
        }
    }

    /// Ranks on other hosts that have entered finalize.
    pub(crate) fn finalizing(&self) -> u32 {
        self.wire.borrow().finalizing
    }

    /// Whether nothing this rank sent is still in flight.
    pub(crate) fn quiet(&self) -> bool {
        let w = self.wire.borrow();
        w.sends == 0 && w.asked.is_empty()
    }

    /// Fill the first `n` message bytes of `dst` from `peer`'s exposed bytes `remote` (see
    /// the module doc), answering other peers' pulls while it waits.
    pub(crate) fn pull(
        &self,
        peer: u32,
        remote: &RemoteRef,
        dst: &Loan,
        n: usize,
    ) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let raw = dst
            .raw_to_write()
            .map_err(|u| io::Error::other(u.to_string()))?;
        assert!(n <= raw.packed_len(), "rendezvous pull out of range");
        let mut w = self.wire.borrow_mut();
        let tag = w.next_tag;
        w.next_tag += 1;
        let mut bounce = (!raw.is_contiguous()).then(|| vec![0u8; n]);
        let into = match bounce.as_mut() {
            Some(b) => b.as_mut_ptr(),
            None => raw.as_mut_ptr(),
        };
        let src = w.addr[peer as usize].ok_or_else(|| io::Error::other("peer on this host"))?;
        let o = op(What::PullRecv(tag));
        loop {
            // SAFETY: `into` is our live, writable loan (or the bounce buffer, which lives
            // until this function returns) of at least `n` bytes, used by nothing else until
            // the completion naming `o` is reaped below, before this function returns; `o`
            // is boxed and freed only when that completion is reaped.
            match unsafe { w.ep.recv(into, n, src, Some(tag), o.cast()) } {
                Posted::Yes => break,
                Posted::Again => {
                    if let Err(e) = w.poll() {
                        // SAFETY: the receive was not posted; `o` is ours again.
                        drop(unsafe { Box::from_raw(o) });
                        return Err(io::Error::other(e));
                    }
                }
                Posted::Failed(e) => {
                    // SAFETY: the receive was not posted; `o` is ours again.
                    drop(unsafe { Box::from_raw(o) });
                    return Err(io::Error::other(e));
                }
            }
        }
        let (addr, entries) = remote.words();
        let mut m = prefix(K_PULL, u8::from(entries.is_some()), w.me).to_vec();
        for v in [tag, addr, entries.unwrap_or(0), n as u64] {
            m.extend_from_slice(&v.to_le_bytes());
        }
        // From here the receive is posted into `into`: this function returns only once its
        // completion (or cancellation) has been reaped, so the provider never writes a
        // buffer that has been given back.
        let mut failure: Option<String> = None;
        loop {
            match w.post_msg(peer, m.clone(), false) {
                Posted::Yes => break,
                Posted::Again => {
                    if let Err(e) = w.poll() {
                        failure = Some(e);
                        break;
                    }
                }
                Posted::Failed(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if failure.is_some() {
            w.ep.cancel(o.cast());
        }
        let mut spins = 0u32;
        let mut cancelled_at: Option<std::time::Instant> = None;
        while !w.landed.contains(&tag) {
            let polled = w.poll();
            if failure.is_none() {
                let aborted = self.job.aborted();
                if let Err(e) = polled {
                    failure = Some(format!("pulling from rank {peer}: {e}"));
                } else if let Some((r, _)) = aborted {
                    failure = Some(format!(
                        "the job was aborted (rank {r}) while pulling from rank {peer}"
                    ));
                }
                if failure.is_some() {
                    w.ep.cancel(o.cast());
                }
            }
            if failure.is_some() {
                let t = *cancelled_at.get_or_insert_with(std::time::Instant::now);
                if t.elapsed() > std::time::Duration::from_secs(10) {
                    // The provider holds a receive into our buffer and neither completes nor
                    // cancels it: nothing sound is left to return to.
                    eprintln!(
                        "earlybird: rank {}: a pull from rank {peer} failed ({}) and its \
                         receive cannot be cancelled",
                        w.me,
                        failure.as_deref().unwrap_or("")
                    );
                    std::process::abort();
                }
            }
            spins += 1;
            if spins > 1000 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if let Some(e) = failure {
            w.landed.retain(|&t| t != tag);
            drop(w);
            self.note(Err(e.clone()));
            return Err(io::Error::other(e));
        }
        w.landed.retain(|&t| t != tag);
        if let Some(b) = bounce {
            bulk::scatter_own(raw, &b, n)?;
        }
        Ok(())
    }
}

fn prefix(kind: u8, flag: u8, me: u32) -> [u8; PREFIX] {
    let r = me.to_le_bytes();
    [kind, flag, 0, 0, r[0], r[1], r[2], r[3]]
}

fn word(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .map_or(0, |s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

impl Wire {
    fn post_recv(&mut self, o: *mut Op) -> Posted {
        // SAFETY: `o` is one of our receive operations, boxed and alive until Drop (after
        // the endpoint is closed); its buffer is used by nothing else while it is posted.
        let r = unsafe {
            let What::Recv(buf) = &mut (*o).what else {
                unreachable!("a receive operation")
            };
            self.ep
                .recv(buf.as_mut_ptr(), buf.len(), u64::MAX, None, o.cast())
        };
        if let Posted::Again = r {
            self.unposted.push(o);
        }
        r
    }

    /// Send `m` to `peer`: injected when small and not `tracked`, else from an operation
    /// that owns it (and that finalize waits for).
    fn post_msg(&mut self, peer: u32, m: Vec<u8>, tracked: bool) -> Posted {
        let Some(dest) = self.addr[peer as usize] else {
            return Posted::Failed(format!("rank {peer} is not on another host"));
        };
        if !tracked && m.len() <= self.ep.inject_size {
            let r = self.ep.inject(&m, dest);
            self.scratch = m;
            return r;
        }
        let (ptr, len) = (m.as_ptr(), m.len());
        let o = op(What::Send { peer, bytes: m });
        // SAFETY: the bytes are owned by the boxed operation `o` (a Vec's heap buffer does
        // not move with it), freed only when the completion naming `o` is reaped.
        let r = unsafe { self.ep.send(ptr, len, dest, None, o.cast()) };
        self.posted(o, r)
    }

    /// Account for a send operation `o` posted with result `r` (taking it back if it was
    /// not posted).
    fn posted(&mut self, o: *mut Op, r: Posted) -> Posted {
        if let Posted::Yes = r {
            self.sends += 1;
        } else {
            // SAFETY: not posted: `o` is ours again.
            drop(unsafe { Box::from_raw(o) });
        }
        r
    }

    /// Reap every completion there is.
    fn poll(&mut self) -> Result<(), String> {
        for o in std::mem::take(&mut self.unposted) {
            if let Posted::Failed(e) = self.post_recv(o) {
                return Err(e);
            }
        }
        while let Some(a) = self.asked.pop_front() {
            if !self.answer(&a)? {
                self.asked.push_front(a);
                break;
            }
        }
        let mut cs = [Completion::EMPTY; 16];
        loop {
            let n = match self.ep.poll(&mut cs) {
                Ok(n) => n,
                Err((ctx, e)) => return Err(self.failed_op(ctx.cast(), e)),
            };
            if n == 0 {
                return Ok(());
            }
            // Every completion read is handled, even after one fails: each is read once.
            let mut first = Ok(());
            for c in &cs[..n] {
                let r = self.complete(c.context.cast(), c.len);
                if first.is_ok() {
                    first = r;
                }
            }
            first?;
            // Fewer than asked for: the queue was empty. Reading it again would only run the
            // provider's progress once more (a poll(2) of its sockets, about a microsecond)
            // before the caller can use what arrived.
            if n < cs.len() {
                return Ok(());
            }
        }
    }

    /// What a failed operation `o` was about, and `o` reclaimed.
    fn failed_op(&mut self, o: *mut Op, e: String) -> String {
        if o.is_null() || is_recv(o) {
            return e;
        }
        // SAFETY: a failed send or pull receive is reported once; `o` is ours again.
        let o = unsafe { Box::from_raw(o) };
        match o.what {
            What::Send { peer, .. } => {
                self.sends = self.sends.saturating_sub(1);
                format!("sending to rank {peer}: {e}")
            }
            What::PullSend { peer, .. } => {
                self.sends = self.sends.saturating_sub(1);
                self.bulk_out[peer as usize] -= 1;
                format!("sending to rank {peer}: {e}")
            }
            // The receive is over, cancelled or failed: its pull stops waiting.
            What::PullRecv(tag) => {
                self.landed.push(tag);
                e
            }
            What::Recv(_) => e,
        }
    }

    fn complete(&mut self, o: *mut Op, len: usize) -> Result<(), String> {
        if is_recv(o) {
            if len <= SMALL {
                // A small message is copied out and the buffer posted again: a flood of them
                // then holds their bytes, not 64 KiB each. The copy goes to a reused buffer.
                let mut copy = self
                    .small_spare
                    .pop()
                    .unwrap_or_else(|| vec![0u8; SMALL].into_boxed_slice());
                // SAFETY: `o` is one of our posted receives, now complete: the provider no
                // longer writes its buffer until we post it again below.
                unsafe {
                    let What::Recv(buf) = &(*o).what else {
                        unreachable!("a receive operation")
                    };
                    copy[..len].copy_from_slice(&buf[..len]);
                }
                let r = self.take(Received { buf: copy, len });
                if let Posted::Failed(e) = self.post_recv(o) {
                    return Err(e);
                }
                return r;
            }
            // Its buffer goes with the message; a spare one takes its place.
            let fresh = self
                .spare
                .pop()
                .unwrap_or_else(|| vec![0u8; BUF_BYTES].into_boxed_slice());
            // SAFETY: `o` is one of our posted receives, now complete: the provider no
            // longer writes its buffer, which we swap out, until we post it again below.
            let buf = unsafe {
                let What::Recv(buf) = &mut (*o).what else {
                    unreachable!("a receive operation")
                };
                std::mem::replace(buf, fresh)
            };
            let len = len.min(buf.len());
            self.take(Received { buf, len })?;
            if let Posted::Failed(e) = self.post_recv(o) {
                return Err(e);
            }
            return Ok(());
        }
        // SAFETY: `o` is a send or pull receive we boxed and posted; its completion comes
        // once, after which the provider holds no reference to it.
        let o = unsafe { Box::from_raw(o) };
        match o.what {
            What::Send { bytes, .. } => {
                self.sends -= 1;
                self.scratch = bytes;
            }
            What::PullSend { peer, .. } => {
                self.sends -= 1;
                self.bulk_out[peer as usize] -= 1;
            }
            What::PullRecv(tag) => self.landed.push(tag),
            What::Recv(_) => unreachable!("receives are found above"),
        }
        Ok(())
    }

    /// A message that arrived: a frame goes to the stash with its buffer, the buffer of
    /// anything else back to the spares.
    fn take(&mut self, r: Received) -> Result<(), String> {
        if r.len >= PREFIX + HEADER && r.buf[0] == K_FRAME {
            let src = self.source(&r.buf)?;
            self.stash.push((src, r));
            return Ok(());
        }
        let m = &r.buf[..r.len];
        let done = self.control(m);
        self.recycle(r.buf);
        done
    }

    /// Keep a received message's buffer for reuse: a whole one for a later receive, a small
    /// message's copy for a later copy (posted as a receive, it would truncate the next large
    /// message).
    fn recycle(&mut self, buf: Box<[u8]>) {
        match buf.len() {
            BUF_BYTES => self.spare.push(buf),
            SMALL if self.small_spare.len() < SMALL_SPARES => self.small_spare.push(buf),
            _ => {}
        }
    }

    /// The rank that sent `m`, checked.
    fn source(&self, m: &[u8]) -> Result<u32, String> {
        let src = u32::from_le_bytes(m[4..8].try_into().expect("4 bytes"));
        if src as usize >= self.addr.len() || self.addr[src as usize].is_none() {
            return Err(format!(
                "a message from rank {src}, not a rank on another host"
            ));
        }
        Ok(src)
    }

    /// A control message that arrived (see the module doc).
    fn control(&mut self, m: &[u8]) -> Result<(), String> {
        if m.len() < PREFIX {
            return Err(format!("a message of {} bytes", m.len()));
        }
        let src = self.source(m)?;
        match m[0] {
            K_CREDIT => {
                let d = &mut self.delivered_by[src as usize];
                *d = (*d).max(word(m, PREFIX));
            }
            K_FINALIZE => self.finalizing += 1,
            K_PULL => {
                let entries = (m[1] != 0).then(|| word(m, PREFIX + 16));
                let a = Asked {
                    peer: src,
                    tag: word(m, PREFIX),
                    remote: RemoteRef::from_words(word(m, PREFIX + 8), entries),
                    n: word(m, PREFIX + 24) as usize,
                };
                // Frames from the puller wait from now until the answer has left, so that its
                // FIN cannot release the buffer before (or while) it is read.
                self.bulk_out[src as usize] += 1;
                if !self.asked.is_empty() || !self.answer(&a)? {
                    self.asked.push_back(a);
                }
            }
            k => return Err(format!("a message of unknown kind {k} from rank {src}")),
        }
        Ok(())
    }

    /// Send the bytes a peer's pull asks for; `false` when the provider has no room now.
    fn answer(&mut self, a: &Asked) -> Result<bool, String> {
        let dest = self.addr[a.peer as usize].expect("a peer on another host");
        let bytes = match a.remote.words() {
            (_, None) => None,
            _ => Some(bulk::gather_own(&a.remote, a.n).map_err(|e| e.to_string())?),
        };
        let ptr = match (&bytes, a.remote.words()) {
            (Some(b), _) => b.as_ptr(),
            (None, (addr, _)) => addr as *const u8,
        };
        let o = op(What::PullSend {
            peer: a.peer,
            _copy: bytes,
        });
        // SAFETY: `ptr` is either the gathered copy, owned by the boxed operation `o` until
        // its completion is reaped, or this rank's own exposed buffer of at least `n` bytes,
        // which stays lent and unchanged until the puller's FIN (bulk rules 1-3); frames
        // from the puller, that FIN among them, are not delivered while this send is in
        // flight (`bulk_out`, module doc).
        let r = unsafe { self.ep.send(ptr, a.n, dest, Some(a.tag), o.cast()) };
        match self.posted(o, r) {
            Posted::Yes => Ok(true),
            Posted::Again => Ok(false),
            Posted::Failed(e) => Err(format!("answering rank {}'s pull: {e}", a.peer)),
        }
    }
}

/// The frame receives an endpoint keeps posted. A `Wire` drops it after its endpoint (field
/// order), when no buffer is in the provider's hands any more.
struct Receives(Vec<*mut Op>);

impl Drop for Receives {
    fn drop(&mut self) {
        for o in self.0.drain(..) {
            // SAFETY: boxed by `Ofi::new`, never freed elsewhere; the endpoint is closed.
            drop(unsafe { Box::from_raw(o) });
        }
    }
}

/// Whether `o` is a frame receive (every context this transport posts is an [`Op`]).
fn is_recv(o: *mut Op) -> bool {
    // SAFETY: `o` is non-null and one of our boxed operations, alive until its completion
    // is handled (receives: until the endpoint is closed).
    !o.is_null() && matches!(unsafe { &(*o).what }, What::Recv(_))
}
