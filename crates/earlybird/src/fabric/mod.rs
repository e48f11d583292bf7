//! fabric — moves bytes between endpoints (DESIGN.md layer 2).
//!
//! One seam, the [`Transport`] trait, says everything the layers above need from a way of
//! reaching peers: put a frame on its way, take arrived frames in order, pull a peer's
//! exposed buffer with one copy ([`bulk`]), and map a memory region a peer created (bound
//! channels, later RMA windows). [`shm::Shm`] implements it for the endpoints of one host,
//! threads or processes alike (one [`ring`] per ordered pair in the [`job`] segment);
//! [`ofi::Ofi`] carries frames and bulk transfers to the ranks on other hosts.
//!
//! [`Fabric`] is what an endpoint holds: it decides, in one place ([`Fabric::route`]), how
//! each peer is reached (itself: a loopback queue; a peer on this host: shared memory; a
//! peer on another host, as [`hosts`] says: the network), keeps frames to one peer in order
//! when its ring or the network has no room (they wait in a queue and leave with a later
//! [`flush`](Fabric::flush)), and returns flow-control credit to peers. It implements
//! [`Transport`] too, so p2p, channels and RMA are written against the seam alone.

pub(crate) mod bulk;
pub(crate) mod channel;
pub(crate) mod coll_region;
pub(crate) mod frame;
pub(crate) mod hosts;
pub(crate) mod job;
pub(crate) mod ofi;
pub(crate) mod ring;
pub(crate) mod shm;
pub(crate) mod sync;
pub(crate) mod window;

use crate::sys::copy::copy_small;
use crate::sys::lend::{Loan, Unusable};
use crate::sys::segment::Segment;
use bulk::RemoteRef;
use frame::Frame;
use job::JobSegment;
use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;

/// Where a memory region one endpoint created can be mapped from by its peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegionKey {
    pub(crate) pid: u32,
    pub(crate) fd: i32,
    pub(crate) bytes: usize,
}

impl RegionKey {
    /// The key's bytes, as a control message carries them.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend(self.pid.to_le_bytes());
        out.extend(self.fd.to_le_bytes());
        out.extend((self.bytes as u64).to_le_bytes());
    }

    /// A key read from `b` (16 bytes), and the rest of `b`.
    pub(crate) fn decode(b: &[u8]) -> Option<(RegionKey, &[u8])> {
        let (k, rest) = b.split_first_chunk::<16>()?;
        let key = RegionKey {
            pid: u32::from_le_bytes(k[0..4].try_into().ok()?),
            fd: i32::from_le_bytes(k[4..8].try_into().ok()?),
            bytes: u64::from_le_bytes(k[8..16].try_into().ok()?) as usize,
        };
        Some((key, rest))
    }
}

/// The seam: what the layers above need from a way of reaching peers. Frames from one peer
/// arrive in the order it sent them.
pub(crate) trait Transport {
    /// The largest payload one frame carries.
    fn max_payload(&self) -> usize;

    /// Put `frame` with a payload of `len` bytes (at most [`max_payload`](Self::max_payload))
    /// that `fill` writes on its way to `peer`. `false`, with nothing written, when there is
    /// no room now.
    fn try_send(
        &mut self,
        peer: u32,
        frame: &Frame,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool;

    /// The oldest frame from `peer` not yet consumed.
    fn peek(&self, peer: u32) -> Option<Frame>;

    /// The payload of `frame`, the frame [`peek`](Self::peek) returned; valid until it is
    /// consumed.
    fn payload<'f>(&'f self, peer: u32, frame: &'f Frame) -> &'f [u8];

    /// Done with `frame`, the frame `peek` returned.
    fn consume(&mut self, peer: u32, frame: &Frame);

    /// Eager payload bytes `peer` reports delivered into receive buffers (flow control).
    fn delivered_by(&self, peer: u32) -> u64;

    /// Report `bytes` more of `from`'s eager payload delivered here.
    fn report_delivered(&mut self, from: u32, bytes: u64);

    /// Whether `peer` is a thread of this process.
    fn same_process(&self, peer: u32) -> bool;

    /// Fill the first `n` message bytes of `dst` from `peer`'s exposed bytes `remote` (see
    /// [`bulk`]).
    fn pull(&self, peer: u32, remote: &RemoteRef, dst: &Loan, n: usize) -> io::Result<()>;

    /// A zero-filled region of `bytes` that peers can map with the returned key while the
    /// returned descriptor is held; its first `reserved` bytes are backed by memory at once,
    /// the rest when first touched or populated (see `Segment::create_unlinked`).
    fn create_region(
        &mut self,
        bytes: usize,
        reserved: usize,
    ) -> io::Result<(Segment, RegionKey, OwnedFd)>;

    /// Map the region a peer created.
    fn map_region(&mut self, key: &RegionKey) -> io::Result<Segment>;
}

/// How a peer is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// This endpoint itself: a queue in its own memory.
    Loopback,
    /// An endpoint of this host: shared memory.
    Shm,
    /// An endpoint on another host: the network ([`ofi`]).
    Ofi,
}

/// A frame and its payload, kept in memory (a loopback frame, or one that found its ring
/// full).
type Held = (Frame, Vec<u8>);

/// An endpoint's fabric: its transports, routing, ordering queues and credit.
pub(crate) struct Fabric {
    me: u32,
    shm: Shm,
    /// Frames to this endpoint itself, in order, with their payloads.
    loopback: VecDeque<Held>,
    /// Frames that found their ring full, per peer, in order.
    queued: Vec<VecDeque<Held>>,
    queued_frames: usize,
    job: JobSegment,
    /// The transport to other hosts, when the job spans several.
    ofi: Option<ofi::Ofi>,
    /// Per rank: whether it is on another host (empty when the job is on one host).
    far: Vec<bool>,
}

use shm::Shm;

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("me", &self.me)
            .field("queued_frames", &self.queued_frames)
            .finish()
    }
}

impl Fabric {
    /// Endpoint `me` of `job` (`Err` if that endpoint was claimed already).
    pub(crate) fn new(job: JobSegment, me: u32) -> Result<Fabric, String> {
        let n = job.nranks() as usize;
        let shm = Shm::new(job.clone(), me)?;
        let (ofi, far) = match job.hosts() {
            Some(h) => (
                Some(ofi::Ofi::new(job.clone(), me, h)?),
                (0..n).map(|r| h.card(r as u32).is_some()).collect(),
            ),
            None => (None, Vec::new()),
        };
        Ok(Fabric {
            me,
            shm,
            loopback: VecDeque::new(),
            queued: (0..n).map(|_| VecDeque::new()).collect(),
            queued_frames: 0,
            job,
            ofi,
            far,
        })
    }

    /// How `peer` is reached: the one place routing is decided.
    #[inline(always)]
    pub(crate) fn route(&self, peer: u32) -> Route {
        if peer == self.me {
            Route::Loopback
        } else if self.far.get(peer as usize).copied().unwrap_or(false) {
            Route::Ofi
        } else {
            Route::Shm
        }
    }

    /// Whether some peers are on other hosts.
    pub(crate) fn spans_hosts(&self) -> bool {
        self.ofi.is_some()
    }

    /// Whether `peer`'s memory can be mapped here (it is on this host).
    pub(crate) fn shares_memory_with(&self, peer: u32) -> bool {
        self.route(peer) != Route::Ofi
    }

    /// Count this endpoint into finalize, on this host and at every rank on another.
    pub(crate) fn enter_finalize(&mut self) {
        self.job.enter_finalize();
        if let Some(o) = self.ofi.as_mut() {
            o.enter_finalize();
        }
    }

    /// Ranks of the job that have entered finalize, as this endpoint knows.
    pub(crate) fn finalizing(&self) -> u32 {
        self.job.finalizing() + self.ofi.as_ref().map_or(0, ofi::Ofi::finalizing)
    }

    /// Whether nothing this endpoint sent to another host is still in flight.
    pub(crate) fn quiet(&self) -> bool {
        self.ofi.as_ref().is_none_or(ofi::Ofi::quiet)
    }

    /// The job segment (rank slots, abort flag).
    pub(crate) fn job(&self) -> &JobSegment {
        &self.job
    }

    /// Endpoints of the job.
    pub(crate) fn nranks(&self) -> u32 {
        self.job.nranks()
    }

    /// Whether every peer is polled on each progress call (a job without doorbells), rather
    /// than those [`rung`](Self::rung) names.
    #[inline(always)]
    pub(crate) fn polls_all(&self) -> bool {
        !self.shm.doorbells()
    }

    /// Set `out` to the peers that may have frames for this endpoint (a job with doorbells):
    /// itself when its loopback queue holds any, peers on this host that rang or were left
    /// with frames, and every peer on another host.
    pub(crate) fn rung(&mut self, out: &mut Vec<u32>) {
        out.clear();
        if !self.loopback.is_empty() {
            out.push(self.me);
        }
        self.shm.rung(out);
        out.extend(
            self.far
                .iter()
                .enumerate()
                .filter_map(|(p, &far)| far.then_some(p as u32)),
        );
    }

    /// What polling `peer`, named by [`rung`](Self::rung), gave: `frames` frames, and
    /// whether it stopped with frames left (`full`); see `Shm::polled`.
    #[inline]
    pub(crate) fn polled(&mut self, peer: u32, frames: usize, full: bool) {
        if self.route(peer) == Route::Shm {
            self.shm.polled(peer, frames, full);
        }
    }

    /// Send `frame` with `payload` to `peer`: into its ring at once when nothing waits before
    /// it and there is room, else into its queue.
    #[inline(always)]
    pub(crate) fn send(&mut self, peer: u32, frame: &Frame, payload: &[u8]) {
        if !self.try_send(peer, frame, payload.len(), |d| copy_small(d, payload)) {
            self.enqueue(peer, *frame, payload.to_vec());
        }
    }

    /// Send `frame` with the message `loan` holds as its payload, packed straight into the
    /// ring when it goes there at once. `Err` (nothing sent) when the loan's buffer is no
    /// longer lent.
    #[inline(always)]
    pub(crate) fn send_loan(
        &mut self,
        peer: u32,
        frame: &Frame,
        loan: &Loan,
    ) -> Result<(), Unusable> {
        let len = loan.packed_len();
        let mut packed = Ok(());
        // Check first so that nothing is sent from a dead loan.
        loan.raw_to_read()?;
        let sent = self.try_send(peer, frame, len, |d| packed = loan.pack_into(d));
        packed?;
        if !sent {
            let bytes = loan.to_packed()?;
            self.enqueue(peer, *frame, bytes);
        }
        Ok(())
    }

    fn enqueue(&mut self, peer: u32, mut frame: Frame, payload: Vec<u8>) {
        frame.len = payload.len() as u32;
        match self.route(peer) {
            Route::Loopback => self.loopback.push_back((frame, payload)),
            Route::Shm | Route::Ofi => {
                self.queued[peer as usize].push_back((frame, payload));
                self.queued_frames += 1;
            }
        }
    }

    /// Frames waiting for room in a ring.
    #[inline(always)]
    pub(crate) fn queued_frames(&self) -> usize {
        self.queued_frames
    }

    /// Take what arrived from other hosts, and move queued frames into their rings while
    /// there is room. True if any queued frame moved or a frame arrived from another host.
    #[inline(always)]
    pub(crate) fn flush(&mut self) -> bool {
        let arrived = match self.ofi.as_mut() {
            Some(o) => o.poll(),
            None => false,
        };
        (self.queued_frames != 0 && self.flush_queued()) | arrived
    }

    #[inline(never)]
    fn flush_queued(&mut self) -> bool {
        let mut did = false;
        for peer in 0..self.queued.len() as u32 {
            did |= self.flush_queued_to(peer);
        }
        did
    }

    /// Move the frames queued for `peer` into its ring while there is room; whether any
    /// moved. (Also before a send to a peer with queued frames: a sender that once found the
    /// ring full would otherwise queue every later message, an allocation and a second copy
    /// each, until the next progress.)
    #[inline(never)]
    fn flush_queued_to(&mut self, peer: u32) -> bool {
        let far = self.far.get(peer as usize).copied().unwrap_or(false);
        let q = &mut self.queued[peer as usize];
        let mut did = false;
        while let Some((f, p)) = q.front() {
            let sent = match self.ofi.as_mut() {
                Some(o) if far => o.try_send(peer, f, p.len(), |d| copy_small(d, p)),
                _ => self.shm.try_send(peer, f, p.len(), |d| copy_small(d, p)),
            };
            if !sent {
                break;
            }
            q.pop_front();
            self.queued_frames -= 1;
            did = true;
        }
        did
    }

    /// Whether nothing is queued for `peer`, after moving what fits into its ring.
    #[inline(always)]
    fn queue_empty(&mut self, peer: u32) -> bool {
        self.queued[peer as usize].is_empty() || {
            self.flush_queued_to(peer);
            self.queued[peer as usize].is_empty()
        }
    }

    /// Senders on other hosts may have `bytes` of eager payload undelivered to this rank
    /// (their flow limit): the transport to other hosts returns credit within that.
    pub(crate) fn set_flow_limit(&mut self, bytes: u64) {
        if let Some(o) = self.ofi.as_mut() {
            o.set_flow_limit(bytes);
        }
    }

    /// The transport to other hosts (a peer routed there exists only with it).
    fn far(&self) -> &ofi::Ofi {
        self.ofi
            .as_ref()
            .expect("a peer on another host has the OFI transport")
    }

    fn far_mut(&mut self) -> &mut ofi::Ofi {
        self.ofi
            .as_mut()
            .expect("a peer on another host has the OFI transport")
    }

    /// Take the first frame to this endpoint itself that `pred` accepts out of the
    /// loopback queue; whether there was one.
    pub(crate) fn withdraw_loopback(&mut self, pred: impl Fn(&Frame) -> bool) -> bool {
        match self.loopback.iter().position(|(f, _)| pred(f)) {
            Some(i) => {
                self.loopback.remove(i);
                true
            }
            None => false,
        }
    }
}

impl Transport for Fabric {
    fn max_payload(&self) -> usize {
        match self.ofi {
            Some(_) => self.shm.max_payload().min(ofi::MAX_PAYLOAD),
            None => self.shm.max_payload(),
        }
    }

    /// Routes; a frame to this endpoint always goes (into the loopback queue), and one to a
    /// peer with frames queued before it does not (order).
    #[inline(always)]
    fn try_send(
        &mut self,
        peer: u32,
        frame: &Frame,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        match self.route(peer) {
            Route::Loopback => {
                let mut p = vec![0u8; len];
                fill(&mut p);
                self.enqueue(peer, *frame, p);
                true
            }
            Route::Shm => self.queue_empty(peer) && self.shm.try_send(peer, frame, len, fill),
            Route::Ofi => self.queue_empty(peer) && self.far_mut().try_send(peer, frame, len, fill),
        }
    }

    #[inline(always)]
    fn peek(&self, peer: u32) -> Option<Frame> {
        match self.route(peer) {
            Route::Loopback => self.loopback.front().map(|(f, _)| *f),
            Route::Shm => self.shm.peek(peer),
            Route::Ofi => self.far().peek(peer),
        }
    }

    #[inline(always)]
    fn payload<'f>(&'f self, peer: u32, frame: &'f Frame) -> &'f [u8] {
        match self.route(peer) {
            Route::Loopback => self.loopback.front().map_or(&[], |(_, p)| &p[..]),
            Route::Shm => self.shm.payload(peer, frame),
            Route::Ofi => self.far().payload(peer, frame),
        }
    }

    #[inline(always)]
    fn consume(&mut self, peer: u32, frame: &Frame) {
        match self.route(peer) {
            Route::Loopback => {
                self.loopback.pop_front();
            }
            Route::Shm => self.shm.consume(peer, frame),
            Route::Ofi => self.far_mut().consume(peer),
        }
    }

    fn delivered_by(&self, peer: u32) -> u64 {
        match self.route(peer) {
            Route::Loopback => 0,
            Route::Shm => self.shm.delivered_by(peer),
            Route::Ofi => self.far().delivered_by(peer),
        }
    }

    fn report_delivered(&mut self, from: u32, bytes: u64) {
        match self.route(from) {
            Route::Loopback => {}
            Route::Shm => self.shm.report_delivered(from, bytes),
            Route::Ofi => self.far_mut().report_delivered(from, bytes),
        }
    }

    fn same_process(&self, peer: u32) -> bool {
        match self.route(peer) {
            Route::Loopback => true,
            Route::Shm => self.shm.same_process(peer),
            Route::Ofi => false,
        }
    }

    fn pull(&self, peer: u32, remote: &RemoteRef, dst: &Loan, n: usize) -> io::Result<()> {
        match self.route(peer) {
            Route::Loopback => bulk::pull(true, 0, remote, dst, n),
            Route::Shm => self.shm.pull(peer, remote, dst, n),
            Route::Ofi => self.far().pull(peer, remote, dst, n),
        }
    }

    fn create_region(
        &mut self,
        bytes: usize,
        reserved: usize,
    ) -> io::Result<(Segment, RegionKey, OwnedFd)> {
        self.shm.create_region(bytes, reserved)
    }

    fn map_region(&mut self, key: &RegionKey) -> io::Result<Segment> {
        self.shm.map_region(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use job::JobShape;

    /// A sender that found its ring full queues what follows; once the receiver has made
    /// room, its next send moves the queued frames into the ring before its own (no
    /// progress call needed, nothing allocated for the new one), and every frame arrives in
    /// the order it was sent.
    #[test]
    fn a_send_moves_queued_frames_first() {
        let shape = JobShape::for_ranks(2);
        let js = JobSegment::init(Segment::anonymous(shape.total_bytes()).unwrap(), shape);
        let mut tx = Fabric::new(js.clone(), 0).unwrap();
        let mut rx = Fabric::new(js, 1).unwrap();
        let frame = |i: u64| {
            let mut f = Frame::new(1, 0, 0);
            f.a = i;
            f
        };
        let mut sent = 0u64;
        while tx.queued_frames() < 3 {
            tx.send(1, &frame(sent), &sent.to_le_bytes());
            sent += 1;
        }
        let mut next = 0u64;
        let take = |rx: &mut Fabric, next: &mut u64, k: u64| {
            for _ in 0..k {
                let f = rx.peek(0).expect("a frame");
                assert_eq!(f.a, *next);
                assert_eq!(rx.payload(0, &f), &next.to_le_bytes()[..]);
                rx.consume(0, &f);
                *next += 1;
            }
        };
        take(&mut rx, &mut next, 8);
        tx.send(1, &frame(sent), &sent.to_le_bytes());
        sent += 1;
        assert_eq!(tx.queued_frames(), 0, "the queued frames went first");
        let left = sent - next;
        take(&mut rx, &mut next, left);
        assert!(rx.peek(0).is_none());
    }
}
