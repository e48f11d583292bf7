//! The shared-memory transport: every endpoint of a job on one host, threads of one process
//! or separate processes alike, through the job segment's rings (one per ordered pair of
//! endpoints), single-copy bulk transfers, and memory regions mapped by both ends.
//!
//! In a job with doorbells (see [`job`](super::job)) a ring is backed when its sender first
//! uses it, every frame rings the receiver's doorbell, and [`Shm::rung`] says which rings to
//! poll. The bell after a frame and the receiver's look at the ring after clearing the bell
//! are ordered by a SeqCst fence on each side (a Dekker pair): either the sender sees the bit
//! cleared and sets it again, or the receiver sees the frame.
//!
//! A sender rings only when it finds its bit clear, so a receiver can spare its busiest
//! peers the bell: it keeps up to [`HOT_PEERS`] *hot* peers whose bits it leaves set and
//! whose rings it polls on every call, as a small job polls all of them. A peer whose frames
//! arrive is made hot (its bit set by the receiver); a hot peer silent for [`HOT_IDLE`] polls
//! is cooled: its bit cleared, a fence, and its ring polled once more (the same Dekker pair).
//! Two ranks in a ping-pong then pay one fence per frame, not two cache-line transfers.

use super::bulk::{self, RemoteRef};
use super::frame::Frame;
use super::job::JobSegment;
use super::ring::{Consumer, Producer};
use super::{RegionKey, Transport};
use crate::sys::lend::Loan;
use crate::sys::segment::Segment;
use std::cell::Cell;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, Ordering};

/// Peers a receiver with doorbells polls on every call without a bell (see the module).
pub(crate) const HOT_PEERS: usize = 8;
/// Empty polls after which a hot peer is cooled.
const HOT_IDLE: u32 = 1024;

/// One endpoint's ends of the job's rings.
pub(crate) struct Shm {
    me: u32,
    my_pid: u32,
    job: JobSegment,
    /// Producer of ring (me -> p), for every peer p but me (with doorbells: once used).
    outs: Vec<Option<Producer>>,
    /// Consumer of ring (p -> me), for every peer p but me.
    ins: Vec<Option<Consumer>>,
    /// Peers' pids as read from their rank slots (0: not read yet).
    peer_pid: Vec<Cell<u32>>,
    max_payload: usize,
    /// The job has doorbells: rings backed on first use, receivers rung (see the module).
    doorbells: bool,
    /// With doorbells: the peers whose rings still held frames when this endpoint last
    /// stopped reading them, a bit per rank, polled again without a new bell.
    pending: Vec<u64>,
    /// The hot peers (see the module) and how many polls each has been silent.
    hot: Vec<(u32, u32)>,
    /// The hot peers as bits of the doorbell's words.
    hot_mask: Vec<u64>,
    /// A ring could not be backed (reported once; the job is aborted).
    backing_failed: bool,
}

impl std::fmt::Debug for Shm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shm").field("me", &self.me).finish()
    }
}

impl Shm {
    /// Endpoint `me` of `job`, claimed for this process (`Err` if it was claimed already).
    pub(crate) fn new(job: JobSegment, me: u32) -> Result<Shm, String> {
        let my_pid = crate::sys::process::pid();
        job.claim(me, my_pid)?;
        let n = job.nranks();
        let shape = job.shape();
        let doorbells = shape.doorbells;
        let mut outs = Vec::with_capacity(n as usize);
        let mut ins = Vec::with_capacity(n as usize);
        for p in 0..n {
            if p == me {
                outs.push(None);
                ins.push(None);
                continue;
            }
            // SAFETY: this endpoint was claimed above, once for the whole job, and only the
            // endpoint `me` makes ends of rings (me -> p) as producer and (p -> me) as
            // consumer: each ring gets one producer and one consumer. The ends live in this
            // Shm, which holds a clone of the segment they point into. Making an end touches
            // no ring memory.
            let (o, i) = unsafe {
                (
                    Producer::new(job.ring(me, p)),
                    Consumer::new(job.ring(p, me)),
                )
            };
            // With doorbells the producer is kept back until its ring is backed.
            outs.push((!doorbells).then_some(o));
            ins.push(Some(i));
        }
        let max_payload = if n == 1 {
            64 * 1024
        } else {
            shape.ring.max_payload()
        };
        Ok(Shm {
            me,
            my_pid,
            outs,
            ins,
            peer_pid: (0..n).map(|_| Cell::new(0)).collect(),
            max_payload,
            doorbells,
            pending: vec![0; job.bell_words()],
            hot: Vec::with_capacity(HOT_PEERS),
            hot_mask: vec![0; job.bell_words()],
            backing_failed: false,
            job,
        })
    }

    /// Whether the job has doorbells (receivers poll only the rings [`rung`](Self::rung)
    /// names).
    pub(crate) fn doorbells(&self) -> bool {
        self.doorbells
    }

    /// Add to `out` the peers whose rings may hold frames for this endpoint: the hot ones,
    /// those that rang since the last call and those it left frames from. Doorbell jobs
    /// only; tell [`polled`](Self::polled) what each gave.
    pub(crate) fn rung(&mut self, out: &mut Vec<u32>) {
        let mut any = false;
        for (i, p) in self.pending.iter_mut().enumerate() {
            let w = self.job.bell(self.me, i);
            let keep = self.hot_mask[i];
            if w.load(Ordering::Relaxed) & !keep != 0 {
                // Clear the bells of the others; the hot peers' bits stay set.
                *p |= w.fetch_and(keep, Ordering::Acquire) & !keep;
                any = true;
            }
        }
        if any {
            // The receiver's half of the Dekker pair (see the module's doc).
            fence(Ordering::SeqCst);
        }
        out.extend(self.hot.iter().map(|&(peer, _)| peer));
        for (i, p) in self.pending.iter_mut().enumerate() {
            let mut bits = std::mem::take(p) & !self.hot_mask[i];
            while bits != 0 {
                out.push(i as u32 * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }

    /// What polling `peer` (named by [`rung`](Self::rung)) gave: `frames` frames, and
    /// whether it stopped with frames left (`full`), to be polled again without a bell.
    /// Makes it hot, or cools it.
    pub(crate) fn polled(&mut self, peer: u32, frames: usize, full: bool) {
        let (word, bit) = (peer as usize / 64, 1u64 << (peer % 64));
        if self.hot_mask[word] & bit != 0 {
            let Some(h) = self.hot.iter_mut().find(|(p, _)| *p == peer) else {
                return;
            };
            if frames > 0 {
                h.1 = 0;
                return;
            }
            h.1 += 1;
            if h.1 >= HOT_IDLE {
                // Cool it: clear its bit, then look at its ring once more (Dekker).
                self.hot.retain(|&(p, _)| p != peer);
                self.hot_mask[word] &= !bit;
                self.job
                    .bell(self.me, word)
                    .fetch_and(!bit, Ordering::AcqRel);
                fence(Ordering::SeqCst);
                self.pending[word] |= bit;
            }
            return;
        }
        if full {
            self.pending[word] |= bit;
        }
        if frames > 0 && self.hot.len() < HOT_PEERS {
            // Make it hot: its bit stays set, so it stops ringing, and its ring is polled on
            // every call from now on.
            self.hot.push((peer, 0));
            self.hot_mask[word] |= bit;
            self.job
                .bell(self.me, word)
                .fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Tell `peer` that a frame from this endpoint is in its ring.
    #[inline(always)]
    fn ring_bell(&self, peer: u32) {
        // The sender's half of the Dekker pair (see the module's doc).
        fence(Ordering::SeqCst);
        let w = self.job.bell(peer, self.me as usize / 64);
        let bit = 1u64 << (self.me % 64);
        if w.load(Ordering::Relaxed) & bit == 0 {
            w.fetch_or(bit, Ordering::Release);
        }
    }

    /// Back ring (me -> `peer`) and make its producer; `false` (the job aborted, said once)
    /// when there is no memory for it.
    #[cold]
    fn open_out(&mut self, peer: u32) -> bool {
        if let Err(e) = self.job.populate_ring(self.me, peer) {
            if !self.backing_failed {
                self.backing_failed = true;
                let bytes = self.job.shape().ring.bytes();
                eprintln!(
                    "earlybird: rank {}: cannot back the shared ring to rank {peer} ({} KiB in {}): {e}; ending the job",
                    self.me,
                    bytes.div_ceil(1024),
                    crate::sys::segment::shm_dir().display()
                );
                self.job.abort(self.me as i32, 1);
            }
            return false;
        }
        // SAFETY: as in `new`: this endpoint alone makes the producer of ring (me -> peer),
        // and makes it once (outs[peer] was None); the segment outlives it (self.job).
        self.outs[peer as usize] = Some(unsafe { Producer::new(self.job.ring(self.me, peer)) });
        true
    }

    fn pid_of(&self, peer: u32) -> u32 {
        let c = &self.peer_pid[peer as usize];
        if c.get() == 0 {
            c.set(self.job.pid(peer));
        }
        c.get()
    }

    fn out(&mut self, peer: u32) -> &mut Producer {
        self.outs[peer as usize]
            .as_mut()
            .expect("a ring to every other endpoint")
    }

    fn input(&self, peer: u32) -> &Consumer {
        self.ins[peer as usize]
            .as_ref()
            .expect("a ring from every other endpoint")
    }
}

impl Transport for Shm {
    fn max_payload(&self) -> usize {
        self.max_payload
    }

    #[inline(always)]
    fn try_send(
        &mut self,
        peer: u32,
        frame: &Frame,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        if !self.doorbells {
            return self.out(peer).try_push_with(frame, len, fill);
        }
        if self.outs[peer as usize].is_none() && !self.open_out(peer) {
            return false;
        }
        let sent = self.out(peer).try_push_with(frame, len, fill);
        if sent {
            self.ring_bell(peer);
        }
        sent
    }

    #[inline(always)]
    fn peek(&self, peer: u32) -> Option<Frame> {
        self.input(peer).peek()
    }

    #[inline(always)]
    fn payload<'f>(&'f self, peer: u32, frame: &'f Frame) -> &'f [u8] {
        self.input(peer).payload(frame)
    }

    #[inline(always)]
    fn consume(&mut self, peer: u32, frame: &Frame) {
        self.ins[peer as usize]
            .as_mut()
            .expect("a ring from every other endpoint")
            .pop(frame);
    }

    fn delivered_by(&self, peer: u32) -> u64 {
        self.outs[peer as usize]
            .as_ref()
            .map_or(0, |o| o.delivered_bytes())
    }

    fn report_delivered(&mut self, from: u32, bytes: u64) {
        if let Some(c) = self.ins[from as usize].as_mut() {
            c.add_delivered(bytes);
        }
    }

    fn same_process(&self, peer: u32) -> bool {
        // A job without a launcher (thread job, singleton) has all its ranks in this process.
        self.job.launcher_pid() == 0 || self.pid_of(peer) == self.my_pid
    }

    fn pull(&self, peer: u32, remote: &RemoteRef, dst: &Loan, n: usize) -> io::Result<()> {
        let pid = self.pid_of(peer);
        bulk::pull(pid == self.my_pid, pid, remote, dst, n)
    }

    fn create_region(
        &mut self,
        bytes: usize,
        reserved: usize,
    ) -> io::Result<(Segment, RegionKey, OwnedFd)> {
        let (seg, fd) = Segment::create_unlinked(&crate::sys::segment::shm_dir(), bytes, reserved)?;
        let key = RegionKey {
            pid: self.my_pid,
            fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
            bytes,
        };
        Ok((seg, key, fd))
    }

    fn map_region(&mut self, key: &RegionKey) -> io::Result<Segment> {
        Segment::map_held(key.pid, key.fd, key.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::job::JobShape;

    fn job(n: u32, doorbells: bool) -> JobSegment {
        let mut shape = JobShape::for_ranks(n);
        shape.doorbells = doorbells;
        JobSegment::init(Segment::anonymous(shape.total_bytes()).unwrap(), shape)
    }

    /// More senders than there are hot places push numbered frames to endpoint 0, pausing
    /// now and then (so that hot peers cool and are rung again); endpoint 0 polls only the
    /// rings `rung` names: every frame arrives, in order per sender, so no race between a
    /// bell and the receiver clearing or keeping it strands one. Once all is quiet the hot
    /// peers cool and every bell is clear.
    #[test]
    fn doorbells_lose_no_frame() {
        const FRAMES: u64 = 4_000;
        let n = HOT_PEERS as u32 + 5;
        let js = job(n, true);
        let senders: Vec<_> = (1..n)
            .map(|s| {
                let js = js.clone();
                std::thread::spawn(move || {
                    let mut shm = Shm::new(js, s).unwrap();
                    for i in 0..FRAMES {
                        let mut f = Frame::new(1, s, 0);
                        f.a = i;
                        while !shm.try_send(0, &f, 0, |_| {}) {
                            std::thread::yield_now();
                        }
                        if i % 500 == 499 {
                            std::thread::sleep(std::time::Duration::from_micros(300));
                        }
                    }
                })
            })
            .collect();
        let mut rx = Shm::new(js.clone(), 0).unwrap();
        let mut next = vec![0u64; n as usize];
        let mut ready = Vec::new();
        let mut poll = |rx: &mut Shm, next: &mut Vec<u64>| {
            ready.clear();
            rx.rung(&mut ready);
            for &p in &ready {
                let mut k = 0;
                while k < 8 {
                    let Some(f) = rx.peek(p) else { break };
                    assert_eq!((f.ctx, f.a), (p, next[p as usize]), "from {p}");
                    next[p as usize] += 1;
                    rx.consume(p, &f);
                    k += 1;
                }
                rx.polled(p, k, k == 8);
            }
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while next[1..].iter().any(|&k| k < FRAMES) {
            assert!(
                std::time::Instant::now() < deadline,
                "frames stranded: {next:?}"
            );
            poll(&mut rx, &mut next);
        }
        for s in senders {
            s.join().unwrap();
        }
        for _ in 0..=HOT_IDLE {
            poll(&mut rx, &mut next);
        }
        assert!(rx.hot.is_empty(), "{:?}", rx.hot);
        assert!((0..js.bell_words()).all(|i| js.bell(0, i).load(Ordering::Relaxed) == 0));
        assert!((1..n).all(|p| rx.peek(p).is_none()));
    }

    /// With doorbells, a ring is backed and its producer made on the first send only; a
    /// job without them has every producer from the start.
    #[test]
    fn rings_open_on_first_send_with_doorbells() {
        for doorbells in [false, true] {
            let js = job(3, doorbells);
            let mut a = Shm::new(js.clone(), 0).unwrap();
            assert_eq!(
                a.outs.iter().filter(|o| o.is_some()).count(),
                if doorbells { 0 } else { 2 }
            );
            assert!(a.try_send(2, &Frame::new(1, 0, 0), 0, |_| {}));
            assert!(a.outs[2].is_some() && a.outs[1].is_some() != doorbells);
            let mut c = Shm::new(js, 2).unwrap();
            let mut ready = Vec::new();
            if doorbells {
                c.rung(&mut ready);
                assert_eq!(ready, [0]);
            }
            assert!(c.peek(0).is_some() && c.peek(1).is_none());
        }
    }
}
