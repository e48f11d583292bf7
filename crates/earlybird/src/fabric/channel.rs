//! The shared memory of one bound channel (seed 000): a ring of unit slots that both ends map.
//!
//! ```text
//! [header: 3 lines of 128 B][unit lines: units x 128 B][data: units x unit_bytes, if not inline]
//! ```
//!
//! The receiving end creates the segment at bind time (an unlinked tmpfs file, like the job
//! segment, so nothing is left behind whatever dies), and the sending end maps the same file
//! through `/proc/<pid>/fd/<fd>` of the receiver, which keeps the descriptor open until the
//! sender says it has mapped it. Threads of one process do the same with their own pid.
//!
//! A *unit* is the smaller of the two ends' messages (they are equal unless the channel splits
//! or merges). Unit `u` (absolute, never wraps) lives in slot `u % units`, whose line holds a
//! state word and, when the unit is small and the channel neither splits nor merges, the data
//! itself: then a message moves as one cache line each way, the floor of DESIGN.md.
//!
//! # Protocol (the channel layer keeps it; every `unsafe` below leans on it)
//!
//! 1. The state word of slot `u % units` is `0` (never used), `posted(u)` (stored by the
//!    receiver with Release once it will read unit `u` and has finished reading unit
//!    `u - units`), or `full(u)` (stored by the sender with Release after writing the data).
//! 2. The sender writes the data of unit `u` only after an Acquire load showed `posted(u)`;
//!    the receiver reads it only after an Acquire load showed `full(u)`, and stops reading
//!    before it stores `posted(u + units)`. So at any time one end at most touches a unit's
//!    bytes.
//! 3. The header's words are each written by one end only (see [`Word`]).

use crate::sys::segment::Segment;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicU64;

const LINE: usize = 128;
const HEADER_LINES: usize = 3;
/// Bytes of data a unit line holds after its state word (and one spare word).
pub const INLINE_BYTES: usize = LINE - 16;

/// The state word of a unit: `posted(u)` and `full(u)` of the protocol.
#[inline(always)]
pub const fn posted(u: u64) -> u64 {
    ((u + 1) << 2) | 1
}

/// See [`posted`].
#[inline(always)]
pub const fn full(u: u64) -> u64 {
    ((u + 1) << 2) | 2
}

/// The header words, each written by one end only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    /// Written by the sender: 1 once it has mapped the segment.
    Mapped,
    /// Written by the sender: 1 at its unbind, 2 when dropped without one.
    SenderGone,
    /// Written by the receiver: 1 at its unbind, 2 when dropped without one.
    ReceiverGone,
}

impl Word {
    fn line(self) -> usize {
        match self {
            Word::Mapped => 0,
            Word::SenderGone => 1,
            Word::ReceiverGone => 2,
        }
    }
}

/// Sizes of a channel's segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelShape {
    /// Unit slots in the ring.
    pub units: u32,
    /// Bytes of one unit.
    pub unit_bytes: usize,
    /// Whether each unit's data lives in its state line.
    pub inline: bool,
}

impl ChannelShape {
    fn data_offset(&self) -> usize {
        (HEADER_LINES + self.units as usize) * LINE
    }

    /// Total bytes of the segment.
    pub fn total_bytes(&self) -> usize {
        let data = if self.inline {
            0
        } else {
            self.units as usize * self.unit_bytes
        };
        (self.data_offset() + data).div_ceil(4096) * 4096
    }

    /// Checked at mapping: a shape a peer sent must describe a sane segment.
    fn valid(&self) -> bool {
        self.units > 0
            && (!self.inline || self.unit_bytes <= INLINE_BYTES)
            && (self.units as usize)
                .checked_mul(self.unit_bytes.max(1))
                .is_some_and(|b| b < (1usize << 40))
    }
}

/// One end's mapping of a channel's segment.
#[derive(Debug)]
pub struct ChannelMem {
    seg: Segment,
    shape: ChannelShape,
    /// `units - 1` when `units` is a power of two: the slot of a unit without a division on
    /// the start and wait paths.
    mask: Option<u64>,
}

impl ChannelMem {
    /// The receiving end: create the segment in `$EARLYBIRD_SHM_DIR` (default `/dev/shm`).
    /// Returns the mapping and the descriptor the sender opens through `/proc`.
    pub fn create(shape: ChannelShape) -> io::Result<(ChannelMem, OwnedFd)> {
        if !shape.valid() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "channel shape"));
        }
        let (seg, fd) =
            Segment::create_unlinked(&crate::sys::segment::shm_dir(), shape.total_bytes())?;
        Ok((ChannelMem::new(seg, shape), fd))
    }

    /// The sending end: map the segment the receiver `pid` holds open as `fd`.
    pub fn open(pid: u32, fd: i32, shape: ChannelShape) -> io::Result<ChannelMem> {
        if !shape.valid() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "channel shape"));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))?;
        let len = crate::sys::segment::fd_len(file.as_fd())?;
        if len < shape.total_bytes() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "channel segment of {len} bytes, shape needs {}",
                    shape.total_bytes()
                ),
            ));
        }
        let seg = Segment::map_fd(file.as_fd(), shape.total_bytes())?;
        Ok(ChannelMem::new(seg, shape))
    }

    fn new(seg: Segment, shape: ChannelShape) -> ChannelMem {
        let mask = shape
            .units
            .is_power_of_two()
            .then_some(shape.units as u64 - 1);
        ChannelMem { seg, shape, mask }
    }

    /// The slot of unit `u`.
    #[inline(always)]
    fn slot(&self, u: u64) -> usize {
        match self.mask {
            Some(m) => (u & m) as usize,
            None => (u % self.shape.units as u64) as usize,
        }
    }

    pub fn shape(&self) -> ChannelShape {
        self.shape
    }

    /// A header word.
    #[inline(always)]
    pub fn word(&self, w: Word) -> &AtomicU64 {
        // SAFETY: the header's three lines lie at the start of a segment at least
        // `total_bytes` long; the offsets are 128-aligned (lines 0..3) and only ever accessed
        // as atomics, which any bit pattern (zero-filled at creation) is valid for.
        unsafe { &*(self.seg.base().add(w.line() * LINE) as *const AtomicU64) }
    }

    /// The state word of the slot of unit `u`.
    #[inline(always)]
    pub fn state(&self, u: u64) -> &AtomicU64 {
        let slot = self.slot(u);
        // SAFETY: slot < units, so the line lies inside the segment; 128-aligned; only ever
        // accessed as an atomic (zero-filled at creation).
        unsafe { &*(self.seg.base().add((HEADER_LINES + slot) * LINE) as *const AtomicU64) }
    }

    fn data_ptr(&self, u: u64, n: usize) -> *mut u8 {
        let slot = self.slot(u);
        assert!(
            n >= 1 && slot + n <= self.shape.units as usize && (n == 1 || !self.shape.inline),
            "channel units {u}+{n} of {:?}",
            self.shape
        );
        let off = if self.shape.inline {
            (HEADER_LINES + slot) * LINE + 16
        } else {
            self.shape.data_offset() + slot * self.shape.unit_bytes
        };
        // SAFETY: checked above that the units lie inside the ring (and do not wrap); the
        // offset is therefore inside the segment.
        unsafe { self.seg.base().add(off) }
    }

    /// The data of units `u .. u + n` (consecutive slots), for the sender to fill.
    /// The caller must hold the protocol's write right on every one of them (an Acquire load
    /// of `posted(v)` for each unit `v`, and no `full(v)` stored yet), and must not let the
    /// slice live past its store of the last `full`.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub fn units_mut(&self, u: u64, n: usize) -> &mut [u8] {
        let len = n * self.shape.unit_bytes;
        if len == 0 {
            return &mut [];
        }
        let p = self.data_ptr(u, n);
        // SAFETY: the bytes lie inside the mapping (data_ptr checks), which lives as long as
        // `&self`; by the protocol (module doc, rule 2) no one else reads or writes them until
        // the caller stores `full`; any bytes are valid u8.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }

    /// The data of units `u .. u + n`, for the receiver to read. The caller must hold the
    /// protocol's read right (an Acquire load of `full(v)` for each unit) and drop the slice
    /// before it stores the next `posted` of any of these slots.
    #[inline(always)]
    pub fn units(&self, u: u64, n: usize) -> &[u8] {
        let len = n * self.shape.unit_bytes;
        if len == 0 {
            return &[];
        }
        let p = self.data_ptr(u, n);
        // SAFETY: as in `units_mut`; the sender no longer writes these bytes (rule 2).
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_share_units() {
        for (units, unit_bytes, inline) in [(1, 8, true), (5, 8192, false), (4, 100, true)] {
            let shape = ChannelShape {
                units,
                unit_bytes,
                inline,
            };
            let (r, fd) = ChannelMem::create(shape).unwrap();
            let s = ChannelMem::open(std::process::id(), fd.as_raw_fd(), shape).unwrap();
            for u in 0..(2 * units as u64) {
                r.state(u).store(posted(u), Ordering::Release);
                assert_eq!(s.state(u).load(Ordering::Acquire), posted(u));
                s.units_mut(u, 1).fill(u as u8 + 1);
                s.state(u).store(full(u), Ordering::Release);
                assert_eq!(r.state(u).load(Ordering::Acquire), full(u));
                assert!(r.units(u, 1).iter().all(|&b| b == u as u8 + 1));
            }
            s.word(Word::Mapped).store(1, Ordering::Release);
            assert_eq!(r.word(Word::Mapped).load(Ordering::Acquire), 1);
            assert_eq!(r.word(Word::SenderGone).load(Ordering::Acquire), 0);
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        let bad = ChannelShape {
            units: 0,
            unit_bytes: 8,
            inline: true,
        };
        assert!(ChannelMem::create(bad).is_err());
        let too_big_inline = ChannelShape {
            units: 1,
            unit_bytes: 200,
            inline: true,
        };
        assert!(ChannelMem::create(too_big_inline).is_err());
    }
}
