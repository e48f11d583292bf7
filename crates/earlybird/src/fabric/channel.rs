//! The shared memory of one bound channel (seed 000): a ring of unit slots that both ends map,
//! and the protocol by which they hand units to each other.
//!
//! ```text
//! [header: 3 lines of 128 B][unit lines: units x 128 B][data: units x unit_bytes, if not inline]
//! ```
//!
//! The receiving end creates the region at bind time (a region of the fabric, unlinked, so
//! nothing is left behind whatever dies) and the sending end maps it. A *unit* is the
//! smaller of the two ends' messages (they are equal unless the channel splits or merges).
//! Unit `u` (absolute, never wraps) lives in slot `u % units`, whose line holds a state word
//! and, when the unit is small and the channel neither splits nor merges, the data itself:
//! then a message moves as one cache line each way, the floor of DESIGN.md.
//!
//! # Protocol
//!
//! 1. The state word of slot `u % units` is `0` (never used), `posted(u)` (stored by the
//!    receiver with Release once it will read unit `u` and has finished reading unit
//!    `u - units`), or `full(u)` (stored by the sender with Release after writing the data).
//! 2. The sender writes the data of unit `u` only after an Acquire load showed `posted(u)`;
//!    the receiver reads it only after an Acquire load showed `full(u)`, and stops reading
//!    before it stores `posted(u + units)`. So at any time one end at most touches a unit's
//!    bytes.
//! 3. The header's words are each written by one end only (see [`Word`]).
//!
//! The types hold the protocol, so that no safe code can break it: the sending end's
//! [`SendSide::fill`] checks `posted` for every unit it hands out and needs `&mut` of the
//! sending end (one [`Filling`] at a time), and a `Filling` ends by publishing `full`; the
//! receiving end's [`RecvSide::read`] checks `full` and borrows the receiving end, whose
//! [`RecvSide::post`] needs `&mut`, so nothing it read is still borrowed when it posts the
//! slot again. The protocol runs on the atomics of [`sync`](super::sync), so a loom model
//! checks it (see the tests below).

use super::sync::{AtomicU64, Ordering, UnsafeCell};
use crate::sys::segment::Segment;

/// Bytes of one line.
const LINE: usize = 128;
/// Bytes of data a unit line holds after its state word (and one spare word).
pub(crate) const INLINE_BYTES: usize = LINE - 16;

/// The state word of a unit: `posted(u)` and `full(u)` of the protocol.
#[inline(always)]
const fn posted(u: u64) -> u64 {
    ((u + 1) << 2) | 1
}

/// See [`posted`].
#[inline(always)]
const fn full(u: u64) -> u64 {
    ((u + 1) << 2) | 2
}

/// A header line: one word, written by one end.
#[repr(C, align(128))]
struct HeaderLine {
    word: AtomicU64,
}

/// A unit line: its state word, a spare word, and the unit's data when it is inline.
#[repr(C, align(128))]
struct UnitLine {
    state: AtomicU64,
    _spare: u64,
    data: UnsafeCell<[u8; INLINE_BYTES]>,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<HeaderLine>() == LINE);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<UnitLine>() == LINE);
#[cfg(not(loom))]
const _: () = assert!(std::mem::offset_of!(UnitLine, data) == 16);

const HEADER_LINES: usize = 3;

/// The header words, each written by one end only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// Written by the sender: 1 once it has mapped the region.
    Mapped,
    /// Written by the sender: why it left (see [`Gone`]).
    SenderGone,
    /// Written by the receiver: why it left.
    ReceiverGone,
}

/// Why an end left its channel, as its word says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gone {
    /// It unbound the channel.
    Unbound = 1,
    /// It was dropped (or its bind abandoned) without an unbind.
    Dropped = 2,
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

/// Sizes of a channel's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChannelShape {
    /// Unit slots in the ring.
    pub(crate) units: u32,
    /// Bytes of one unit.
    pub(crate) unit_bytes: usize,
    /// Whether each unit's data lives in its state line.
    pub(crate) inline: bool,
}

impl ChannelShape {
    fn lines_offset() -> usize {
        HEADER_LINES * std::mem::size_of::<HeaderLine>()
    }

    fn data_offset(&self) -> usize {
        ChannelShape::lines_offset() + self.units as usize * std::mem::size_of::<UnitLine>()
    }

    /// Total bytes of the region.
    pub(crate) fn total_bytes(&self) -> usize {
        let data = if self.inline {
            0
        } else {
            self.units as usize * self.unit_bytes
        };
        (self.data_offset() + data).div_ceil(4096) * 4096
    }

    /// A shape a peer sent must describe a sane region.
    pub(crate) fn valid(&self) -> bool {
        self.units > 0
            && (!self.inline || self.unit_bytes <= INLINE_BYTES)
            && (self.units as usize)
                .checked_mul(self.unit_bytes.max(1))
                .is_some_and(|b| b < (1usize << 40))
    }
}

/// What keeps a mapping alive.
#[derive(Debug)]
enum Backing {
    /// A mapping of the region (both ends, processes or threads).
    Mapped(#[allow(dead_code)] Segment),
    /// Lines in this process's heap, shared by the two ends of a model check.
    #[cfg(all(test, loom))]
    Model(#[allow(dead_code)] std::sync::Arc<ModelMem>),
}

/// One end's mapping of a channel's region.
#[derive(Debug)]
pub(crate) struct ChannelMem {
    base: *mut u8,
    shape: ChannelShape,
    /// `units - 1` when `units` is a power of two: the slot of a unit without a division on
    /// the start and wait paths.
    mask: Option<u64>,
    _backing: Backing,
}

impl ChannelMem {
    /// The mapping of a region of the fabric with room for `shape` (checked: `Err` if the
    /// shape is not sane or the region is too small). A created region is zero-filled; its
    /// lines are only ever accessed as below.
    pub(crate) fn new(seg: Segment, shape: ChannelShape) -> Result<ChannelMem, String> {
        if !shape.valid() {
            return Err(format!("channel shape {shape:?}"));
        }
        if seg.len() < shape.total_bytes() {
            return Err(format!(
                "channel region of {} bytes, shape needs {}",
                seg.len(),
                shape.total_bytes()
            ));
        }
        let mask = shape
            .units
            .is_power_of_two()
            .then_some(shape.units as u64 - 1);
        Ok(ChannelMem {
            base: seg.base(),
            shape,
            mask,
            _backing: Backing::Mapped(seg),
        })
    }

    /// The send side of this mapping.
    pub(crate) fn into_send(self) -> SendSide {
        SendSide { mem: self }
    }

    /// The receive side of this mapping.
    pub(crate) fn into_recv(self) -> RecvSide {
        RecvSide { mem: self }
    }

    pub(crate) fn shape(&self) -> ChannelShape {
        self.shape
    }

    /// The slot of unit `u`.
    #[inline(always)]
    fn slot(&self, u: u64) -> usize {
        match self.mask {
            Some(m) => (u & m) as usize,
            None => (u % self.shape.units as u64) as usize,
        }
    }

    /// A header word.
    #[inline(always)]
    pub(crate) fn word(&self, w: Word) -> &AtomicU64 {
        let off = w.line() * std::mem::size_of::<HeaderLine>();
        // SAFETY: the header's three lines lie at the start of a region at least
        // `total_bytes` long (checked at `new`), aligned (the region is page aligned, lines
        // are line-sized); the bytes are zero-filled at creation and only ever accessed as
        // these lines' atomics, which any bit pattern is valid for.
        unsafe { &(*(self.base.add(off) as *const HeaderLine)).word }
    }

    #[inline(always)]
    fn line(&self, u: u64) -> &UnitLine {
        let off = ChannelShape::lines_offset() + self.slot(u) * std::mem::size_of::<UnitLine>();
        // SAFETY: slot < units, so the line lies inside the region (checked at `new`);
        // aligned; only ever accessed as a UnitLine (its state atomically, its data under
        // the protocol).
        unsafe { &*(self.base.add(off) as *const UnitLine) }
    }

    /// The state word of the slot of unit `u`.
    #[inline(always)]
    fn state(&self, u: u64) -> &AtomicU64 {
        &self.line(u).state
    }

    /// Where the data of units `u .. u + n` (consecutive slots, not wrapping) starts.
    fn data_ptr(&self, u: u64, n: usize) -> *mut u8 {
        let slot = self.slot(u);
        assert!(
            n >= 1 && slot + n <= self.shape.units as usize && (n == 1 || !self.shape.inline),
            "channel units {u}+{n} of {:?}",
            self.shape
        );
        if self.shape.inline {
            return self.line(u).data.with_mut(|p| p.cast::<u8>());
        }
        let off = self.shape.data_offset() + slot * self.shape.unit_bytes;
        // SAFETY: the units lie inside the ring (checked above, no wrap), so the offset is
        // inside the region's data area.
        unsafe { self.base.add(off) }
    }

    /// Whether the state of unit `u` is `want` (an Acquire load).
    #[inline(always)]
    fn is(&self, u: u64, want: u64) -> bool {
        self.state(u).load(Ordering::Acquire) == want
    }
}

/// The sending end's side of a channel's region.
#[derive(Debug)]
pub(crate) struct SendSide {
    mem: ChannelMem,
}

/// The units of one start, handed to the sender to write (rule 2: each was seen posted).
/// Publish them with [`Filling::publish`]; dropped unpublished, they stay the sender's.
#[derive(Debug)]
pub(crate) struct Filling<'a> {
    mem: &'a ChannelMem,
    u: u64,
    n: usize,
}

impl SendSide {
    pub(crate) fn mem(&self) -> &ChannelMem {
        &self.mem
    }

    /// Whether unit `u` is posted.
    #[inline(always)]
    pub(crate) fn is_posted(&self, u: u64) -> bool {
        self.mem.is(u, posted(u))
    }

    /// Units `u .. u + n`, to write, if every one is posted.
    #[inline(always)]
    pub(crate) fn fill(&mut self, u: u64, n: usize) -> Option<Filling<'_>> {
        if n == 1 {
            if !self.is_posted(u) {
                return None;
            }
        } else if !(u..u + n as u64).all(|v| self.is_posted(v)) {
            return None;
        }
        Some(Filling {
            mem: &self.mem,
            u,
            n,
        })
    }
}

impl<'a> Filling<'a> {
    /// Write the units' first bytes with `f` (up to all of their bytes).
    #[inline(always)]
    pub(crate) fn write<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let len = self.n * self.mem.shape.unit_bytes;
        if len == 0 {
            return f(&mut []);
        }
        if self.mem.shape.inline {
            assert_eq!(self.n, 1, "an inline channel moves one unit per start");
            return self.mem.line(self.u).data.with_mut(|p| {
                // SAFETY: as below, for the one inline unit; `len <= INLINE_BYTES` (shapes
                // are checked); inside the cell's access (tracked under loom).
                f(unsafe { &mut (&mut *p)[..len] })
            });
        }
        let p = self.mem.data_ptr(self.u, self.n);
        // SAFETY: the bytes of units u..u+n lie in the region (data_ptr checks); each unit
        // was seen posted by an Acquire load and not yet published full, so by rule 2 the
        // receiver does not touch them; this Filling borrows the send side mutably, so no
        // other Filling (or slice of one) exists; the slice does not escape `f`.
        f(unsafe { std::slice::from_raw_parts_mut(p, len) })
    }

    /// The units' bytes, to fill in place for as long as the send side stays borrowed,
    /// unpublished: a later [`SendSide::fill`] of the same units (still posted) publishes
    /// them. (Under loom the slice escapes the cell's access tracking; the model checks
    /// the protocol through [`Filling::write`].)
    pub(crate) fn into_bytes(self) -> &'a mut [u8] {
        let len = self.n * self.mem.shape.unit_bytes;
        if len == 0 {
            return &mut [];
        }
        let p = self.mem.data_ptr(self.u, self.n);
        // SAFETY: as in `write`; the send side was borrowed mutably for `'a` to make this
        // Filling, so for all of `'a` no other Filling or slice of its units exists, and the
        // units stay posted and unpublished (the receiver does not touch them).
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }

    /// Hand the units to the receiver: store `full` for each (Release, after the writes).
    #[inline(always)]
    pub(crate) fn publish(self) {
        for v in self.u..self.u + self.n as u64 {
            self.mem.state(v).store(full(v), Ordering::Release);
        }
    }
}

/// The receiving end's side of a channel's region.
#[derive(Debug)]
pub(crate) struct RecvSide {
    mem: ChannelMem,
}

impl RecvSide {
    pub(crate) fn mem(&self) -> &ChannelMem {
        &self.mem
    }

    /// Post unit `u`: the sender may write it. `&mut` so that nothing read from this side
    /// (which borrows it) is still in use (rule 2).
    #[inline(always)]
    pub(crate) fn post(&mut self, u: u64) {
        self.mem.state(u).store(posted(u), Ordering::Release);
    }

    /// Whether unit `u` is full.
    #[inline(always)]
    pub(crate) fn is_full(&self, u: u64) -> bool {
        self.mem.is(u, full(u))
    }

    /// The data of units `u .. u + n`, if every one is full, for as long as this side is
    /// borrowed.
    #[inline(always)]
    pub(crate) fn read(&self, u: u64, n: usize) -> Option<&[u8]> {
        if !(u..u + n as u64).all(|v| self.is_full(v)) {
            return None;
        }
        let len = n * self.mem.shape.unit_bytes;
        if len == 0 {
            return Some(&[]);
        }
        let p = self.mem.data_ptr(u, n);
        // SAFETY: the bytes lie in the region (data_ptr checks); every unit was seen full by
        // an Acquire load, so the sender's writes are visible and by rule 2 it does not write
        // them again until they are posted anew, which needs `&mut self`, after this borrow.
        Some(unsafe { std::slice::from_raw_parts(p, len) })
    }

    /// Run `f` on the data of units `u .. u + n` if every one is full (see
    /// [`read`](Self::read)); the form the model check uses.
    #[cfg(all(test, loom))]
    fn read_with<R>(&self, u: u64, n: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if !(u..u + n as u64).all(|v| self.is_full(v)) {
            return None;
        }
        Some(self.mem.line(u).data.with(|p| {
            // SAFETY: as in `read`, inside loom's access tracking.
            f(unsafe { &(&*p)[..self.mem.shape.unit_bytes] })
        }))
    }
}

#[cfg(all(test, loom))]
#[repr(C)]
struct ModelMem {
    header: [HeaderLine; HEADER_LINES],
    lines: [UnitLine; 2],
}

#[cfg(all(test, loom))]
impl std::fmt::Debug for ModelMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelMem")
    }
}

#[cfg(all(test, loom))]
impl ChannelMem {
    /// Two mappings of one 2-unit inline region in the heap, for the model check.
    fn model_pair(unit_bytes: usize) -> (ChannelMem, ChannelMem) {
        let mem = std::sync::Arc::new(ModelMem {
            header: std::array::from_fn(|_| HeaderLine {
                word: AtomicU64::new(0),
            }),
            lines: std::array::from_fn(|_| UnitLine {
                state: AtomicU64::new(0),
                _spare: 0,
                data: UnsafeCell::new([0; INLINE_BYTES]),
            }),
        });
        let shape = ChannelShape {
            units: 2,
            unit_bytes,
            inline: true,
        };
        let one = || ChannelMem {
            base: std::sync::Arc::as_ptr(&mem) as *mut u8,
            shape,
            mask: Some(1),
            _backing: Backing::Model(mem.clone()),
        };
        (one(), one())
    }
}

// SAFETY: a ChannelMem is one end's mapping; all shared state in it is reached through
// atomics or under the protocol above, whichever thread the end lives on.
unsafe impl Send for ChannelMem {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::fabric::Transport;

    fn pair(shape: ChannelShape) -> (RecvSide, SendSide) {
        let job = crate::fabric::job::JobSegment::anonymous(1).unwrap();
        let mut f = crate::fabric::Fabric::new(job, 0).unwrap();
        let (seg, key, _fd) = f
            .create_region(shape.total_bytes(), shape.total_bytes())
            .unwrap();
        let r = ChannelMem::new(seg, shape).unwrap().into_recv();
        let s = ChannelMem::new(f.map_region(&key).unwrap(), shape)
            .unwrap()
            .into_send();
        (r, s)
    }

    #[test]
    fn two_mappings_share_units_under_the_protocol() {
        for (units, unit_bytes, inline) in [(1, 8, true), (5, 8192, false), (4, 100, true)] {
            let shape = ChannelShape {
                units,
                unit_bytes,
                inline,
            };
            let (mut r, mut s) = pair(shape);
            for u in 0..(2 * units as u64) {
                assert!(s.fill(u, 1).is_none(), "not posted yet");
                r.post(u);
                assert!(r.read(u, 1).is_none(), "not full yet");
                let mut f = s.fill(u, 1).expect("posted");
                f.write(|b| b.fill(u as u8 + 1));
                f.publish();
                assert!(s.fill(u, 1).is_none(), "published: the receiver's now");
                assert!(r.read(u, 1).unwrap().iter().all(|&b| b == u as u8 + 1));
            }
            s.mem().word(Word::Mapped).store(1, Ordering::Release);
            assert_eq!(r.mem().word(Word::Mapped).load(Ordering::Acquire), 1);
            assert_eq!(r.mem().word(Word::SenderGone).load(Ordering::Acquire), 0);
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        let seg = Segment::anonymous(4096).unwrap();
        let bad = ChannelShape {
            units: 0,
            unit_bytes: 8,
            inline: true,
        };
        assert!(ChannelMem::new(seg, bad).is_err());
        let too_big_inline = ChannelShape {
            units: 1,
            unit_bytes: 200,
            inline: true,
        };
        let seg = Segment::anonymous(4096).unwrap();
        assert!(ChannelMem::new(seg, too_big_inline).is_err());
        let small = Segment::anonymous(4096).unwrap();
        let big = ChannelShape {
            units: 64,
            unit_bytes: 4096,
            inline: false,
        };
        assert!(ChannelMem::new(small, big).is_err());
    }
}

/// Model check of the channel protocol: `RUSTFLAGS="--cfg loom" cargo test -p earlybird
/// --lib --release loom_` (see README).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A slack-2 channel: the sender writes three messages through two slots, the receiver
    /// posts each slot again only after reading it; every message arrives whole and in
    /// order, and no access of one end to a unit's bytes races with the other's.
    #[test]
    fn loom_posted_full_hand_units_over() {
        loom::model(|| {
            let (r, s) = ChannelMem::model_pair(8);
            let (mut r, mut s) = (r.into_recv(), s.into_send());
            r.post(0);
            r.post(1);
            let t = loom::thread::spawn(move || {
                let mut u = 0u64;
                while u < 3 {
                    match s.fill(u, 1) {
                        Some(mut f) => {
                            f.write(|b| b[..8].copy_from_slice(&[u as u8 + 1; 8]));
                            f.publish();
                            u += 1;
                        }
                        None => loom::thread::yield_now(),
                    }
                }
            });
            let mut u = 0u64;
            while u < 3 {
                match r.read_with(u, 1, |b| b[..8].to_vec()) {
                    Some(got) => {
                        assert_eq!(got, vec![u as u8 + 1; 8]);
                        r.post(u + 2);
                        u += 1;
                    }
                    None => loom::thread::yield_now(),
                }
            }
            t.join().unwrap();
        });
    }
}
