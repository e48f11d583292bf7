//! A communicator's shared memory for collectives (issue 18, item 3): slots the ranks of one
//! host write their contributions into and read each other's from, with a flag per slot
//! and a watermark per rank, so that a small barrier, broadcast or reduction takes one
//! store and a few loads of cache lines instead of messages through the rings.
//!
//! ```text
//! [watermarks: lane 0 rank 0, lane 0 rank 1, ... lane L-1 rank n-1]   one 64-byte line each
//! [pad to 4 KiB]
//! [lane 0:  slot 0: rank 0 .. rank n-1, slot 1: ..., slot COMM_DEPTH-1]   SLOT bytes each
//! [lane 1:  slot 0, slot 1 (LANE_DEPTH)] ... [lane L-1]
//! SLOT:     [flag: u64][length: u64][payload: PAYLOAD bytes]
//! ```
//!
//! A **lane** is a sequence of runs numbered 1, 2, 3, ... that every rank makes in the same
//! order: lane 0 is the communicator's (its blocking and nonblocking calls, numbered as they
//! are made), and each persistent collective that uses shared memory has a lane of its own
//! (numbered by its starts: MPI lets ranks start different persistent collectives in
//! different orders). Run `s` uses slot `s % depth` of its lane.
//!
//! The protocol (the layer above, `coll::shm`, follows it):
//!
//! * A rank writes its slot of run `s` only once every rank's **watermark** on the lane is
//!   at least `s - depth` (every rank has finished reading the slot's last run), then
//!   stores `s` into the slot's **flag** (release).
//! * A rank reads a peer's slot of run `s` only after loading a flag of at least `s`
//!   (acquire), and raises its own watermark (release) only when it has finished reading
//!   every run up to it.
//!
//! So no byte of a slot is written while anyone reads it, and the flag and the first 48
//! payload bytes share one cache line: a reader of a small contribution takes one line.

use crate::sys::lend::Loan;
use crate::sys::segment::Segment;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;

/// Bytes of one control line.
const LINE: usize = 64;
/// Bytes of one rank's slot in one run: its flag and its payload.
pub(crate) const SLOT: usize = 1024;
/// Where a slot's payload starts (16-byte aligned, for any element type).
const PAYLOAD_AT: usize = 16;
/// Bytes a rank contributes to one run at most.
pub(crate) const PAYLOAD: usize = SLOT - PAYLOAD_AT;
/// Slots of the communicator's lane: how many runs of it may be under way at once, so how
/// far a root of back-to-back bcasts runs ahead of its readers. Deep for ranks that share
/// cores: a reader catches up a whole time slice's runs at once, and a root held back
/// waits for one (8 B blocking bcast at 4 / 8 ranks on 2 cores, 2026-11-29: 0.566 / 1.169
/// us with 8 slots, 0.312 / 0.633 with 32, 0.260 / 0.539 with 64; Open MPI 0.235 / 0.501).
/// 64 KiB a rank per communicator with a region.
pub(crate) const COMM_DEPTH: u64 = 64;
/// Slots of a persistent collective's lane (its runs follow one another on each rank).
pub(crate) const LANE_DEPTH: u64 = 8;
/// Lanes of persistent collectives a communicator has.
pub(crate) const PERSISTENT_LANES: usize = 16;
/// Where the slots start: a page boundary.
const PAGE: usize = 4096;

/// The shape of one communicator's region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CollShape {
    /// Ranks of the communicator.
    pub(crate) n: usize,
}

impl CollShape {
    const LANES: usize = 1 + PERSISTENT_LANES;

    fn slots_at(&self) -> usize {
        (Self::LANES * self.n * LINE).next_multiple_of(PAGE)
    }

    fn depth(lane: usize) -> u64 {
        if lane == 0 {
            COMM_DEPTH
        } else {
            LANE_DEPTH
        }
    }

    /// Bytes of lane `lane`'s slots.
    fn lane_len(&self, lane: usize) -> usize {
        Self::depth(lane) as usize * self.n * SLOT
    }

    /// Where lane `lane`'s slots start.
    fn lane_at(&self, lane: usize) -> usize {
        self.slots_at() + (0..lane).map(|l| self.lane_len(l)).sum::<usize>()
    }

    /// Bytes of the whole region.
    pub(crate) fn total_bytes(&self) -> usize {
        self.lane_at(Self::LANES)
    }

    /// Bytes backed when the region is made: the watermarks and the communicator's lane
    /// (persistent lanes are backed when a persistent collective takes one).
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.lane_at(1)
    }
}

/// A communicator's collective region, mapped.
#[derive(Debug)]
pub(crate) struct CollRegion {
    seg: Rc<Segment>,
    shape: CollShape,
}

impl CollRegion {
    /// The region in `seg`, checked to be large enough for `shape`.
    pub(crate) fn new(seg: Segment, shape: CollShape) -> Result<CollRegion, String> {
        if seg.len() < shape.total_bytes() {
            return Err(format!(
                "a collective region of {} bytes for {} ranks, which need {}",
                seg.len(),
                shape.n,
                shape.total_bytes()
            ));
        }
        Ok(CollRegion {
            seg: Rc::new(seg),
            shape,
        })
    }

    /// Slots of lane `lane`.
    pub(crate) fn depth(lane: usize) -> u64 {
        CollShape::depth(lane)
    }

    /// The 8-byte word at `off`.
    fn at(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= self.shape.total_bytes(),
            "collective region: word {off} outside the region"
        );
        // SAFETY: (1) `off + 8` lies within the mapping (checked against the shape, which
        // `new` checked against the segment's length); (2) the mapping is page-aligned and
        // `off` a multiple of 8, so the word is aligned; (3) the mapping lives as long as
        // `self` (held through the Rc), which the borrow outlives; (4) flags and watermarks
        // are touched by every rank only through atomics.
        unsafe { &*(self.seg.base().add(off) as *const AtomicU64) }
    }

    /// `rank`'s watermark on lane `lane`: every run of the lane up to it, the rank has
    /// finished reading.
    pub(crate) fn watermark(&self, lane: usize, rank: usize) -> &AtomicU64 {
        assert!(lane < CollShape::LANES && rank < self.shape.n);
        self.at((lane * self.shape.n + rank) * LINE)
    }

    fn slot_at(&self, lane: usize, seq: u64, rank: usize) -> usize {
        assert!(lane < CollShape::LANES && rank < self.shape.n);
        let slot = (seq % CollShape::depth(lane)) as usize;
        self.shape.lane_at(lane) + (slot * self.shape.n + rank) * SLOT
    }

    /// The flag of `rank`'s slot of run `seq` on lane `lane`: the last run it wrote there.
    pub(crate) fn flag(&self, lane: usize, seq: u64, rank: usize) -> &AtomicU64 {
        self.at(self.slot_at(lane, seq, rank))
    }

    /// The payload of `rank`'s slot of run `seq` on lane `lane`, as a loan (writable if
    /// `writable`; the caller writes only its own slot, by the protocol above).
    pub(crate) fn payload(&self, lane: usize, seq: u64, rank: usize, writable: bool) -> Loan {
        Loan::mapped(
            &self.seg,
            self.slot_at(lane, seq, rank) + PAYLOAD_AT,
            PAYLOAD,
            writable,
        )
    }

    /// Copy the message `src` holds (at most [`PAYLOAD`] bytes) into `rank`'s payload of
    /// run `seq` on lane `lane`: the caller's own slot, free by the protocol above.
    pub(crate) fn put_payload(
        &self,
        lane: usize,
        seq: u64,
        rank: usize,
        src: &Loan,
    ) -> Result<(), crate::sys::lend::Unusable> {
        let n = src.packed_len();
        assert!(
            n <= PAYLOAD,
            "a contribution of {n} bytes in a slot of {PAYLOAD}"
        );
        let slot = self.slot_at(lane, seq, rank);
        // Ordered before the readers' loads by the flag's Release store that follows.
        self.at(slot + 8)
            .store(n as u64, std::sync::atomic::Ordering::Relaxed);
        let at = slot + PAYLOAD_AT;
        // SAFETY: (1) `at + n` lies within the mapping (`slot_at` is within the shape's
        // slots, checked against the segment by `new`, and `n <= PAYLOAD`); (2) the mapping
        // lives as long as `self`, which the slice does not outlive (it is dropped at the
        // end of this call); (3) by the protocol (module doc) the caller writes only its own
        // slot, and only while every rank's watermark says nobody reads it, so no other
        // access to these bytes happens during the call; (4) any bytes are valid `u8`s.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.seg.base().add(at), n) };
        src.pack_into(dst)
    }

    /// Copy `rank`'s payload of run `seq` on lane `lane` into `dst` (after an acquire
    /// load showed the run's flag), as much of it as fits: the payload's length, as
    /// [`put_payload`](Self::put_payload) stored it.
    pub(crate) fn get_payload(
        &self,
        lane: usize,
        seq: u64,
        rank: usize,
        dst: &Loan,
    ) -> Result<usize, crate::sys::lend::Unusable> {
        let slot = self.slot_at(lane, seq, rank);
        let sent = self.at(slot + 8).load(std::sync::atomic::Ordering::Relaxed) as usize;
        let n = dst.packed_len().min(sent).min(PAYLOAD);
        let at = slot + PAYLOAD_AT;
        // SAFETY: (1) in bounds as in `put_payload`; (2) the slice lives for this call only,
        // within the mapping's life; (3) the slot's owner published it (the caller loaded
        // its flag with Acquire) and writes it again only after this rank's watermark has
        // passed the run, which this rank raises after the call: nothing writes the bytes
        // meanwhile; (4) the slot's bytes are initialised (the mapping starts zeroed).
        let src = unsafe { std::slice::from_raw_parts(self.seg.base().add(at), n) };
        dst.unpack_from(src)?;
        Ok(sent)
    }

    /// [`payload`](Self::payload), and the length [`put_payload`](Self::put_payload) stored
    /// in the slot (read after an acquire load showed the run's flag).
    pub(crate) fn payload_sent(
        &self,
        lane: usize,
        seq: u64,
        rank: usize,
        writable: bool,
    ) -> (Loan, usize) {
        let slot = self.slot_at(lane, seq, rank);
        let sent = self.at(slot + 8).load(std::sync::atomic::Ordering::Relaxed) as usize;
        let p = Loan::mapped(&self.seg, slot + PAYLOAD_AT, PAYLOAD, writable);
        (p, sent)
    }

    /// Ask for the line of `rank`'s slot of run `seq` on lane `lane` (its flag and the
    /// first bytes of its payload) ahead of use: to write (`WRITE`, the caller's own slot
    /// of a coming run) or to read. A hint: nothing changes if it is wrong.
    #[inline(always)]
    pub(crate) fn prefetch_slot<const WRITE: bool>(&self, lane: usize, seq: u64, rank: usize) {
        super::sync::prefetch::<WRITE, _>(self.at(self.slot_at(lane, seq, rank)));
    }

    /// Back lane `lane`'s slots with memory now: an error (a full `/dev/shm`) here rather
    /// than a SIGBUS at the first write.
    pub(crate) fn populate(&self, lane: usize) -> std::io::Result<()> {
        self.seg
            .populate(self.shape.lane_at(lane), self.shape.lane_len(lane))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn slots_and_lines_do_not_overlap() {
        let shape = CollShape { n: 3 };
        let r = CollRegion::new(Segment::anonymous(shape.total_bytes()).unwrap(), shape).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for lane in 0..CollShape::LANES {
            for rank in 0..3 {
                let w = r.watermark(lane, rank) as *const AtomicU64 as usize;
                assert!(seen.insert(w / LINE), "two watermarks share a line");
            }
        }
        let base = r.seg.base() as usize;
        assert!(seen
            .iter()
            .all(|l| l * LINE + LINE <= base + shape.slots_at()));
        let mut slots = std::collections::BTreeSet::new();
        for lane in 0..CollShape::LANES {
            for seq in 0..CollShape::depth(lane) {
                for rank in 0..3 {
                    let at = r.slot_at(lane, seq, rank);
                    assert!(at >= shape.slots_at() && at + SLOT <= shape.total_bytes());
                    assert!(slots.insert(at), "lane {lane} seq {seq} rank {rank}");
                    // The next run with the same slot lands on it again.
                    assert_eq!(r.slot_at(lane, seq + CollShape::depth(lane), rank), at);
                }
            }
        }
        r.flag(1, 5, 2).store(5, Ordering::Release);
        assert_eq!(r.flag(1, 5 + LANE_DEPTH, 2).load(Ordering::Acquire), 5);
        assert_eq!(r.flag(1, 6, 2).load(Ordering::Acquire), 0);
        let p = r.payload(0, 1, 1, true);
        p.unpack_from(&[7u8; PAYLOAD]).unwrap();
        assert_eq!(
            r.payload(0, 1 + COMM_DEPTH, 1, false).to_packed().unwrap(),
            vec![7u8; PAYLOAD]
        );
        assert!(shape.reserved_bytes() < shape.total_bytes());
    }
}
