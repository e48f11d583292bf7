//! The eager ring: a single-producer single-consumer queue of frames between two endpoints.
//!
//! # Layout (in the job segment, or on the heap under loom)
//!
//! ```text
//! [ConsumerLine: 128 B][slots: nslots x 64 B][data: data_bytes]
//! ```
//!
//! A frame is one 64-byte slot: an 8-byte sequence word and a 56-byte [`Frame`] (envelope,
//! protocol words, and up to [`INLINE_BYTES`] of payload). Larger eager payloads go into the
//! data area, a byte ring whose offsets the frame carries. A small message therefore moves as
//! one cache line from producer to consumer: the floor of DESIGN.md's performance model.
//!
//! # Invariants
//!
//! 1. Only the producer writes slots and data; only the consumer writes the consumer line.
//! 2. A slot at position `p` (absolute, never wraps) holds a frame iff its `seq == p + 1`;
//!    the producer stores `seq` last, with Release, after the body and the data.
//! 3. The consumer reads the body and data of position `p` after an Acquire load of `seq`, and
//!    publishes `head_slots = p + 1` (and `head_bytes` past the frame's data) with Release only
//!    after it has finished reading them; the producer reuses a slot or data byte only after an
//!    Acquire load of the head shows it consumed.
//! 4. Data for one frame is contiguous: when it would straddle the end of the data area the
//!    producer skips to the start (the skipped bytes count as consumed with the frame).
//!
//! This is Lamport's single-producer single-consumer ring with a per-slot sequence word (as in
//! Vyukov's bounded queue) so the consumer polls the very line it will read.

use super::frame::{Frame, INLINE_BYTES};
use super::sync::{prefetch, AtomicU64, Ordering, UnsafeCell};
#[cfg(test)]
use crate::sys::copy::copy_small;

/// Bytes of one slot.
pub(crate) const SLOT_BYTES: usize = 128;
const CONSUMER_LINE_BYTES: usize = 128;
const DATA_ALIGN: u64 = 64;

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Slot>() == SLOT_BYTES);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<ConsumerLine>() == CONSUMER_LINE_BYTES);

/// One slot: sequence word then frame body, padded to 128 bytes so that the adjacent-line
/// prefetcher does not pull the slot being written into the reader's cache with the slot
/// being read.
#[repr(C, align(128))]
pub(crate) struct Slot {
    seq: AtomicU64,
    body: UnsafeCell<Frame>,
}

impl Slot {
    #[allow(dead_code)]
    pub(crate) fn new() -> Slot {
        Slot {
            seq: AtomicU64::new(0),
            body: UnsafeCell::new(Frame::default()),
        }
    }
}

/// How far ahead of its tail the producer claims a slot's line for writing, after each push.
/// The consumer read that line when it took the slot's previous frame, so the producer's
/// first store into it must fetch it back from the consumer's cache: that store then waits
/// in the store buffer for the cross-core round trip, and with it any later load the buffer
/// cannot forward (a value copied in wider pieces than it was written, as compiled code does
/// all the time). Claimed early, the line is the producer's when it writes there. (Measured
/// on the C ABI's message rate: 6.9 M msg/s without it, 8.4 to 8.7 with it.) A page of slots
/// ahead: nearer (4, 16), the claim fought the consumer's hardware prefetcher, which reads
/// the lines after the one the consumer polls, and a stream of 8-byte persistent broadcasts
/// took 10 to 18% longer. To a consumer that keeps up (a ping-pong) the claim brings nothing
/// and costs about 1% of the 8-byte latency (its line's traffic); claiming only when frames
/// wait in the ring, known by a look at the consumer's head every 16 pushes, cost 3.5%.
const CLAIM_AHEAD: u64 = 32;

/// How far ahead of its head the consumer asks for a slot's line, after each pop that
/// follows another without an empty ring between them: frames that arrived together are
/// then fetched together instead of one cross-core miss after the other. (Measured on the
/// message rate: 9.0 against 10.6 M msg/s without it, 1 slot ahead 9.4, 2 ahead 9.9, 8 ahead
/// as 4; latency unchanged.) A consumer that keeps up (it found the ring empty since its last
/// pop) fetches nothing ahead: the slot is not written yet, and the fetch would only take
/// the line from the producer, which claims lines ahead too (see [`CLAIM_AHEAD`]).
const FETCH_AHEAD: u64 = 4;

/// Written by the consumer only.
#[repr(C, align(128))]
pub(crate) struct ConsumerLine {
    head_slots: AtomicU64,
    head_bytes: AtomicU64,
    /// Eager payload bytes that reached a user buffer (flow control, see `p2p`).
    delivered_bytes: AtomicU64,
}

impl ConsumerLine {
    #[allow(dead_code)]
    pub(crate) fn new() -> ConsumerLine {
        ConsumerLine {
            head_slots: AtomicU64::new(0),
            head_bytes: AtomicU64::new(0),
            delivered_bytes: AtomicU64::new(0),
        }
    }
}

/// Sizes of one ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingShape {
    pub(crate) nslots: usize,
    pub(crate) data_bytes: usize,
}

impl RingShape {
    /// Bytes the ring occupies in a segment (a multiple of 128).
    pub(crate) const fn bytes(&self) -> usize {
        CONSUMER_LINE_BYTES + self.nslots * SLOT_BYTES + self.data_bytes
    }

    /// Largest payload one frame can carry in the data area.
    pub(crate) const fn max_payload(&self) -> usize {
        self.data_bytes / 2
    }
}

/// Raw placement of one ring. Made by the job segment's layout (or by a test) with
/// [`RingPtrs::at`], whose contract the ends rely on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingPtrs {
    ctl: *const ConsumerLine,
    slots: *const Slot,
    data: *mut u8,
    shape: RingShape,
}

impl RingPtrs {
    /// Place a ring at `base`.
    ///
    /// # Safety
    /// `base` points at `shape.bytes()` bytes, 128-aligned, zeroed when the ring was first
    /// placed, that stay mapped for as long as any end made from the result lives; nothing
    /// but ends of this ring accesses them; `shape.nslots` is a power of two and
    /// `shape.data_bytes` a multiple of 64.
    pub(crate) unsafe fn at(base: *mut u8, shape: RingShape) -> RingPtrs {
        debug_assert_eq!(base as usize % 128, 0);
        debug_assert!(shape.nslots.is_power_of_two() && shape.data_bytes.is_multiple_of(64));
        // wrapping_add: pure address arithmetic, dereferenced only under the ring invariants.
        RingPtrs {
            ctl: base as *const ConsumerLine,
            slots: base.wrapping_add(CONSUMER_LINE_BYTES) as *const Slot,
            data: base.wrapping_add(CONSUMER_LINE_BYTES + shape.nslots * SLOT_BYTES),
            shape,
        }
    }

    /// Where the ring starts.
    #[cfg(test)]
    pub(crate) fn base(&self) -> *const u8 {
        self.ctl.cast()
    }

    fn ctl(&self) -> &ConsumerLine {
        // SAFETY: `ctl` points at a live, aligned ConsumerLine (RingPtrs::at's contract), and
        // it is only accessed through atomics.
        unsafe { &*self.ctl }
    }

    fn slot(&self, pos: u64) -> &Slot {
        let i = (pos as usize) & (self.shape.nslots - 1);
        // SAFETY: i < nslots (power of two mask) and the slot array is live (RingPtrs::at).
        unsafe { &*self.slots.add(i) }
    }
}

/// The producing end. Lives in the sender's private memory.
pub(crate) struct Producer {
    ring: RingPtrs,
    tail_slots: u64,
    tail_bytes: u64,
    seen_head_slots: u64,
    seen_head_bytes: u64,
}

// SAFETY: a Producer is the one writer of its ring (invariant 1); moving it to another thread
// moves that role with it.
unsafe impl Send for Producer {}

impl Producer {
    /// The producing end of `ring`.
    ///
    /// # Safety
    /// No other `Producer` of this ring exists while this one lives (invariant 1).
    pub(crate) unsafe fn new(ring: RingPtrs) -> Producer {
        Producer {
            ring,
            tail_slots: 0,
            tail_bytes: 0,
            seen_head_slots: 0,
            seen_head_bytes: 0,
        }
    }

    /// Largest payload one frame can carry in the data area.
    pub(crate) fn max_payload(&self) -> usize {
        self.ring.shape.max_payload()
    }

    /// Eager bytes the consumer reports delivered to user buffers.
    pub(crate) fn delivered_bytes(&self) -> u64 {
        self.ring.ctl().delivered_bytes.load(Ordering::Relaxed)
    }

    /// Try to publish `frame` with a payload written by `fill` into a `len`-byte area.
    /// Payloads up to [`INLINE_BYTES`] travel inside the frame. Returns false, writing
    /// nothing, when the ring has no room now.
    #[inline(always)]
    pub(crate) fn try_push_with(
        &mut self,
        frame: &Frame,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        debug_assert!(len <= self.max_payload());
        let nslots = self.ring.shape.nslots as u64;
        if self.tail_slots - self.seen_head_slots >= nslots {
            self.seen_head_slots = self.ring.ctl().head_slots.load(Ordering::Acquire);
            if self.tail_slots - self.seen_head_slots >= nslots {
                return false;
            }
        }
        // Place the payload first: a data area without room refuses before anything is written.
        let (data_dst, data_start, new_tail_bytes) = if len <= INLINE_BYTES {
            (None, 0, self.tail_bytes)
        } else {
            let d = self.ring.shape.data_bytes as u64;
            let mut start = self.tail_bytes;
            let off = start % d;
            if off + len as u64 > d {
                start += d - off;
            }
            let end = start + (len as u64).div_ceil(DATA_ALIGN) * DATA_ALIGN;
            if end - self.seen_head_bytes > d {
                self.seen_head_bytes = self.ring.ctl().head_bytes.load(Ordering::Acquire);
                if end - self.seen_head_bytes > d {
                    return false;
                }
            }
            // SAFETY: (1) [start, start+len) maps to [start % d, start % d + len) inside the
            // data area, by the skip above; (2) those bytes were consumed (Acquire load of
            // head_bytes shows end - head <= d), so the consumer no longer reads them
            // (invariant 3); (3) we are the only writer (invariant 1).
            let dst = unsafe {
                std::slice::from_raw_parts_mut(self.ring.data.add((start % d) as usize), len)
            };
            (Some(dst), start, end)
        };
        let slot = self.ring.slot(self.tail_slots);
        // SAFETY: the slot at tail_slots was consumed (checked against head_slots above), so
        // the consumer does not read its body until we store seq below (invariants 2, 3).
        // The frame is written straight into the slot: one copy, payload included.
        slot.body.with_mut(|p| unsafe {
            let body = &mut *p;
            *body = *frame;
            body.len = len as u32;
            match data_dst {
                None => fill(&mut body.inline[..len]),
                Some(dst) => {
                    fill(dst);
                    body.b = data_start;
                }
            }
        });
        slot.seq.store(self.tail_slots + 1, Ordering::Release);
        self.tail_slots += 1;
        self.tail_bytes = new_tail_bytes;
        prefetch::<true, _>(self.ring.slot(self.tail_slots + CLAIM_AHEAD));
        true
    }

    /// [`try_push_with`](Self::try_push_with) copying a byte slice.
    #[cfg(test)]
    pub(crate) fn try_push(&mut self, frame: &Frame, payload: &[u8]) -> bool {
        self.try_push_with(frame, payload.len(), |dst| copy_small(dst, payload))
    }
}

/// The consuming end. Lives in the receiver's private memory.
pub(crate) struct Consumer {
    ring: RingPtrs,
    head_slots: u64,
    head_bytes: u64,
    delivered: u64,
    /// A `peek` found the ring empty since the last `pop`: the consumer is keeping up with
    /// the producer, and fetches nothing ahead (see [`FETCH_AHEAD`]).
    caught_up: std::cell::Cell<bool>,
}

// SAFETY: a Consumer is the one reader of its ring and the one writer of its consumer line.
unsafe impl Send for Consumer {}

impl Consumer {
    /// The consuming end of `ring`.
    ///
    /// # Safety
    /// No other `Consumer` of this ring exists while this one lives (invariant 1).
    pub(crate) unsafe fn new(ring: RingPtrs) -> Consumer {
        Consumer {
            ring,
            head_slots: 0,
            head_bytes: 0,
            delivered: 0,
            caught_up: std::cell::Cell::new(true),
        }
    }

    /// The next frame, if one has been published. Does not consume it.
    #[inline]
    pub(crate) fn peek(&self) -> Option<Frame> {
        let slot = self.ring.slot(self.head_slots);
        if slot.seq.load(Ordering::Acquire) != self.head_slots + 1 {
            self.caught_up.set(true);
            return None;
        }
        // SAFETY: seq == head + 1 was loaded with Acquire, so the producer's body write
        // happened before; it does not write this slot again until we publish head
        // (invariants 2, 3).
        Some(slot.body.with(|p| unsafe { p.read() }))
    }

    /// The payload of `frame` (the frame last returned by `peek`), valid until `pop`.
    #[inline]
    pub(crate) fn payload<'f>(&'f self, frame: &'f Frame) -> &'f [u8] {
        let len = frame.len as usize;
        if len <= INLINE_BYTES {
            return &frame.inline[..len];
        }
        let d = self.ring.shape.data_bytes as u64;
        // SAFETY: the producer wrote [b, b+len) before the Release store of seq that `peek`
        // acquired, inside the data area (invariant 4), and does not overwrite it until we
        // publish head_bytes past it in `pop`; the borrow of self ends before pop (&mut).
        unsafe { std::slice::from_raw_parts(self.ring.data.add((frame.b % d) as usize), len) }
    }

    /// Consume `frame`, the one last returned by `peek`.
    #[inline]
    pub(crate) fn pop(&mut self, frame: &Frame) {
        self.head_slots += 1;
        if frame.len as usize > INLINE_BYTES {
            self.head_bytes = frame.b + (frame.len as u64).div_ceil(DATA_ALIGN) * DATA_ALIGN;
            self.ring
                .ctl()
                .head_bytes
                .store(self.head_bytes, Ordering::Release);
        }
        self.ring
            .ctl()
            .head_slots
            .store(self.head_slots, Ordering::Release);
        if !self.caught_up.replace(false) {
            prefetch::<false, _>(self.ring.slot(self.head_slots + FETCH_AHEAD));
        }
    }

    /// Report `n` more eager bytes delivered into user buffers (flow control).
    #[inline]
    pub(crate) fn add_delivered(&mut self, n: u64) {
        if n > 0 {
            self.delivered += n;
            self.ring
                .ctl()
                .delivered_bytes
                .store(self.delivered, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn heap_ring(shape: RingShape) -> (Vec<u128>, RingPtrs) {
        let mut mem = vec![0u128; shape.bytes() / 16 + 8];
        let base = mem.as_mut_ptr() as usize;
        let aligned = (base + 127) & !127;
        // SAFETY: `mem` has shape.bytes() zeroed bytes past the 128-aligned `aligned` (8
        // spare u128s cover the alignment) and outlives every end made in the test.
        let ptrs = unsafe { RingPtrs::at(aligned as *mut u8, shape) };
        (mem, ptrs)
    }

    #[test]
    fn frames_arrive_in_order_across_wraps() {
        let shape = RingShape {
            nslots: 8,
            data_bytes: 1024,
        };
        let (_mem, ptrs) = heap_ring(shape);
        // SAFETY: one producer and one consumer of this ring.
        let (mut p, mut c) = unsafe { (Producer::new(ptrs), Consumer::new(ptrs)) };
        let mut sent = 0u32;
        let mut got = 0u32;
        while got < 1000 {
            let len = (sent as usize * 37) % 300;
            let payload: Vec<u8> = (0..len).map(|i| (i as u32 + sent) as u8).collect();
            let f = Frame::new(0, 0, sent as i32);
            if sent < 1000 && p.try_push(&f, &payload) {
                sent += 1;
            }
            if let Some(fr) = c.peek() {
                let len = (got as usize * 37) % 300;
                assert_eq!(fr.tag, got as i32);
                let pl = c.payload(&fr);
                assert_eq!(pl.len(), len);
                assert!(pl
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == (i as u32 + got) as u8));
                c.pop(&fr);
                got += 1;
            }
        }
    }

    #[test]
    fn full_ring_refuses_then_accepts() {
        let shape = RingShape {
            nslots: 4,
            data_bytes: 512,
        };
        let (_mem, ptrs) = heap_ring(shape);
        // SAFETY: one producer and one consumer of this ring.
        let (mut p, mut c) = unsafe { (Producer::new(ptrs), Consumer::new(ptrs)) };
        for i in 0..4 {
            assert!(p.try_push(&Frame::new(0, 0, i), &[1, 2, 3]));
        }
        assert!(!p.try_push(&Frame::default(), &[]));
        let f = c.peek().unwrap();
        c.pop(&f);
        assert!(p.try_push(&Frame::default(), &[]));
        // Data-area exhaustion: 256-byte payloads, 512-byte area.
        let shape = RingShape {
            nslots: 16,
            data_bytes: 512,
        };
        let (_mem2, ptrs) = heap_ring(shape);
        // SAFETY: the one producer of this ring.
        let mut p = unsafe { Producer::new(ptrs) };
        assert!(p.try_push(&Frame::default(), &[7u8; 256]));
        assert!(p.try_push(&Frame::default(), &[7u8; 256]));
        assert!(!p.try_push(&Frame::default(), &[7u8; 100]));
    }
}

/// Model check of the ring protocol: `RUSTFLAGS="--cfg loom" cargo test -p earlybird --lib
/// --release loom_` (see README).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    #[repr(C, align(128))]
    struct Mem {
        ctl: ConsumerLine,
        slots: [Slot; 2],
        data: [u8; 128],
    }

    #[test]
    fn loom_spsc_ring_delivers_in_order() {
        loom::model(|| {
            let mem = Box::new(Mem {
                ctl: ConsumerLine::new(),
                slots: [Slot::new(), Slot::new()],
                data: [0; 128],
            });
            let base = Box::into_raw(mem);
            let shape = RingShape {
                nslots: 2,
                data_bytes: 128,
            };
            let ptrs = RingPtrs {
                // SAFETY: base is a live Box for the whole model run (freed at the end).
                ctl: unsafe { &(*base).ctl },
                slots: unsafe { (*base).slots.as_ptr() },
                data: unsafe { (*base).data.as_mut_ptr() },
                shape,
            };
            struct SendPtrs(RingPtrs);
            // SAFETY: the model's two threads are the ring's one producer and one consumer.
            unsafe impl Send for SendPtrs {}
            let sp = SendPtrs(ptrs);
            let t = loom::thread::spawn(move || {
                let sp = sp;
                // SAFETY: the model's one producer.
                let mut p = unsafe { Producer::new(sp.0) };
                let mut i = 0u8;
                while i < 3 {
                    let payload = [i; 40];
                    let f = Frame::new(0, 0, i as i32);
                    if p.try_push(&f, &payload[..if i == 1 { 40 } else { 4 }]) {
                        i += 1;
                    } else {
                        loom::thread::yield_now();
                    }
                }
            });
            // SAFETY: the model's one consumer.
            let mut c = unsafe { Consumer::new(ptrs) };
            let mut got = 0u8;
            while got < 3 {
                if let Some(f) = c.peek() {
                    assert_eq!(f.tag, got as i32);
                    assert!(c.payload(&f).iter().all(|&b| b == got));
                    c.pop(&f);
                    got += 1;
                } else {
                    loom::thread::yield_now();
                }
            }
            t.join().unwrap();
            // SAFETY: both threads are done with the ring.
            drop(unsafe { Box::from_raw(base) });
        });
    }
}
