//! Window memory: what an RMA window exposes and how a peer reaches it (DESIGN.md "window").
//!
//! A window's **segment** holds one control block per rank (the words that fence, PSCW,
//! locks, accumulates and dynamic attachment synchronise on) and, for the windows whose
//! memory the library allocates (`win_allocate`, `win_allocate_shared`), every rank's
//! exposed bytes. Rank 0 of the window creates it; every rank maps it, so a peer's memory is
//! reached with plain loads, stores and atomics and no target ever has to call MPI for an
//! origin's operation to happen.
//!
//! ```text
//! [control block of rank 0][control block of rank 1]...[pad to 4 KiB][data of rank 0][data of rank 1]...
//! control block: [fence][lock][acc lock][attach lock][attach count]   one 64-byte line each
//!                [post from rank q, q = 0..n]                          one line each
//!                [mail from rank q, q = 0..n: two boxes, a report line] see below
//!                [attach table: MAX_ATTACH x (address, length)]        dynamic windows only
//!                [sync counters: SYNC_COUNTERS x signals]              one line each
//!                [their generations: SYNC_COUNTERS words]              rarely written
//! mail box:      [seq][consumed][spare][payload...]                    written by q only
//! ```
//!
//! A **mail box** carries one PSCW access epoch of rank q to the block's rank: at the end of
//! the epoch q writes the epoch's small puts into the payload, how many of the block's rank's
//! epochs q has applied as a target into `consumed`, and last the epoch's number into `seq`,
//! which is how the target learns that q has completed; the target applies the puts to its
//! memory when it waits. Epochs alternate between q's two boxes, so that q can fill the next
//! while the target still reads the last; all of a box is written in one burst, so that a
//! target polling `seq` takes the line once. The **report line** holds the same `consumed`
//! count, stored when q applies an epoch: the block's rank reads it only when it must wait
//! for a box and q has not completed an epoch to it since.

//! [`Mem`] is one rank's exposed bytes as another rank reaches them: in a mapped segment, in
//! this process's memory (the user memory of `win_create` or `win_attach` when the ranks are
//! threads of one process), or in another process's memory (reached with
//! `process_vm_readv`/`writev`, which the kernel checks). Every access is bounds-checked
//! here; the layer above checks ranges against the window first, so that a bad displacement
//! is MPI_ERR_RMA_RANGE rather than an I/O error.

use crate::sys::layout::Layout;
use crate::sys::lend::Loan;
use crate::sys::segment::Segment;
use std::io;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Bytes of one control line (one cache line, so that words written by different ranks do
/// not share one).
pub(crate) const LINE: usize = 64;
/// Regions a rank may have attached to a dynamic window at once.
pub(crate) const MAX_ATTACH: usize = 4096;
/// Bytes of one mail box (a whole number of lines).
pub(crate) const MAIL: usize = 4 * LINE;
/// Bytes of a mail box before its payload: seq, consumed, a spare word.
const MAIL_HEAD: usize = 24;
/// Payload bytes of a mail box.
pub(crate) const MAIL_PAYLOAD: usize = MAIL - MAIL_HEAD;
/// Bytes of one sender's mail in a block: two boxes and the report line.
const MAIL_PAIR: usize = 2 * MAIL + LINE;
/// Sync counters (seed 001) a rank may have allocated on one window at once.
pub(crate) const SYNC_COUNTERS: usize = 256;
/// Where the data of the library-allocated windows starts: a page boundary.
const DATA_ALIGN: usize = 4096;

/// The fixed words of a rank's control block, one line each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// Fences this rank has entered (written by the rank, read by all).
    Fence = 0,
    /// The passive-target lock of the rank's window memory.
    Lock = 1,
    /// Serialises the accumulates that cannot be one hardware atomic on this rank's memory.
    AccLock = 2,
    /// Readers/writer word of the attach table (dynamic windows).
    AttachLock = 3,
    /// Entries in use in the attach table.
    AttachCount = 4,
}
const FIXED_LINES: usize = 5;

/// Sizes of a window's segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WinShape {
    pub(crate) nranks: usize,
    /// Whether control blocks carry an attach table.
    pub(crate) dynamic: bool,
    /// Words of the write bitmap each control block carries (persistent windows, seed 004;
    /// 0 for others).
    pub(crate) dirty_words: usize,
}

impl WinShape {
    /// Bytes of one rank's control block.
    pub(crate) fn ctl_bytes(&self) -> usize {
        self.dirty_at() + self.dirty_words * 8
    }

    /// Where the write bitmap starts in a control block: on a line of its own.
    fn dirty_at(&self) -> usize {
        (self.generations_at() + SYNC_COUNTERS * 8).next_multiple_of(LINE)
    }

    /// Where the counters' generations start in a control block: on lines of their own, so
    /// that reading them (which every signal does) never takes a counter's line.
    fn generations_at(&self) -> usize {
        self.sync_at() + SYNC_COUNTERS * LINE
    }

    /// Where the sync counters start in a control block (after the attach table, on a line).
    fn sync_at(&self) -> usize {
        let table = if self.dynamic { MAX_ATTACH * 16 } else { 0 };
        (self.table_at() + table).next_multiple_of(LINE)
    }

    /// Where the mail boxes start in a control block.
    fn mail_at(&self) -> usize {
        (FIXED_LINES + self.nranks) * LINE
    }

    /// Where the attach table starts in a control block.
    fn table_at(&self) -> usize {
        self.mail_at() + MAIL_PAIR * self.nranks
    }

    /// Where the data area starts (after every control block, page-aligned).
    pub(crate) fn data_start(&self) -> usize {
        (self.ctl_bytes() * self.nranks).next_multiple_of(DATA_ALIGN)
    }
}

/// A window's mapped segment: control blocks and, for allocated windows, data.
#[derive(Clone, Debug)]
pub(crate) struct WinSegment {
    seg: Arc<Segment>,
    shape: WinShape,
}

impl WinSegment {
    /// The segment `seg`, checked to hold the control blocks of `shape`.
    pub(crate) fn new(seg: Segment, shape: WinShape) -> Result<WinSegment, String> {
        if seg.len() < shape.data_start() {
            return Err(format!(
                "a window segment of {} bytes for {} ranks, which need {}",
                seg.len(),
                shape.nranks,
                shape.data_start()
            ));
        }
        Ok(WinSegment {
            seg: Arc::new(seg),
            shape,
        })
    }

    /// The 8-byte word at `off`.
    fn at(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= self.shape.data_start(),
            "control word {off} outside the control blocks"
        );
        // SAFETY: (1) `off + 8` lies within the mapping (checked: the control blocks end
        // before `data_start`, which `new` checked against the segment's length); (2) the
        // mapping is page-aligned and `off` a multiple of 8, so the word is aligned; (3) the
        // mapping lives as long as `self` (held through the Arc), which the borrow outlives;
        // (4) every rank touches control words only through atomics.
        unsafe { &*(self.seg.base().add(off) as *const AtomicU64) }
    }

    fn block(&self, rank: usize) -> usize {
        assert!(
            rank < self.shape.nranks,
            "rank {rank} of a window of {}",
            self.shape.nranks
        );
        rank * self.shape.ctl_bytes()
    }

    /// One of `rank`'s fixed control words.
    pub(crate) fn word(&self, rank: usize, w: Word) -> &AtomicU64 {
        self.at(self.block(rank) + w as usize * LINE)
    }

    /// In `rank`'s block, on its fence word's line (read with it, for no extra transfer):
    /// what the rank brings to its persisting fence number `n` (seed 004), word `n % 2` of
    /// two, since a peer may already be one fence ahead (never two).
    pub(crate) fn persist_flag(&self, rank: usize, n: u64) -> &AtomicU64 {
        self.at(self.block(rank) + Word::Fence as usize * LINE + 8 + 8 * (n % 2) as usize)
    }

    /// In `rank`'s block: the exposure epochs `from` has opened to it (PSCW posts).
    pub(crate) fn post(&self, rank: usize, from: usize) -> &AtomicU64 {
        assert!(from < self.shape.nranks);
        self.at(self.block(rank) + (FIXED_LINES + from) * LINE)
    }

    /// Byte offset of `from`'s mail box `parity` in `rank`'s block.
    fn mail_off(&self, rank: usize, from: usize, parity: usize) -> usize {
        assert!(from < self.shape.nranks && parity < 2);
        self.block(rank) + self.shape.mail_at() + from * MAIL_PAIR + parity * MAIL
    }

    /// In `rank`'s block, `from`'s report line: how many of `rank`'s access epochs `from`
    /// has applied as a target.
    pub(crate) fn mail_report(&self, rank: usize, from: usize) -> &AtomicU64 {
        assert!(from < self.shape.nranks);
        self.at(self.block(rank) + self.shape.mail_at() + from * MAIL_PAIR + 2 * MAIL)
    }

    /// In `rank`'s block, `from`'s mail box `parity`: its words (seq, consumed, spare). The
    /// seq word holds the epoch's number above 16 bits and its payload bytes below.
    pub(crate) fn mail_words(&self, rank: usize, from: usize, parity: usize) -> [&AtomicU64; 3] {
        let o = self.mail_off(rank, from, parity);
        [self.at(o), self.at(o + 8), self.at(o + 16)]
    }

    /// In `rank`'s block, the payload of `from`'s mail box `parity`.
    pub(crate) fn mail(&self, rank: usize, from: usize, parity: usize) -> Mem {
        Mem::Mapped {
            seg: self.seg.clone(),
            off: self.mail_off(rank, from, parity) + MAIL_HEAD,
            len: MAIL_PAYLOAD,
            track: None,
        }
    }

    /// Entry `i` of `rank`'s attach table: (address, length).
    pub(crate) fn attached(&self, rank: usize, i: usize) -> (&AtomicU64, &AtomicU64) {
        assert!(self.shape.dynamic && i < MAX_ATTACH, "attach entry {i}");
        let off = self.block(rank) + self.shape.table_at() + i * 16;
        (self.at(off), self.at(off + 8))
    }

    /// Sync counter `i` of `rank`'s block: (signals, generation). The signals word, alone on
    /// its line, counts the signals the counter has received since it was allocated; the
    /// generation changes whenever the counter is allocated or freed, so that a reference to
    /// a freed counter is recognised.
    pub(crate) fn sync_counter(&self, rank: usize, i: usize) -> (&AtomicU64, &AtomicU64) {
        assert!(i < SYNC_COUNTERS, "sync counter {i}");
        let b = self.block(rank);
        (
            self.at(b + self.shape.sync_at() + i * LINE),
            self.at(b + self.shape.generations_at() + i * 8),
        )
    }

    /// The write bitmap of `rank`'s memory, for blocks of `1 << shift` bytes.
    pub(crate) fn track(&self, rank: usize, shift: u32) -> Track {
        assert!(self.shape.dirty_words > 0, "a window without write bitmaps");
        Track {
            seg: self.seg.clone(),
            at: self.block(rank) + self.shape.dirty_at(),
            words: self.shape.dirty_words,
            shift,
        }
    }

    /// Bytes `off..off + len` of the segment's data area.
    pub(crate) fn data(&self, off: usize, len: usize) -> Result<Mem, String> {
        let start = self.shape.data_start() + off;
        if start.checked_add(len).is_none_or(|e| e > self.seg.len()) {
            return Err(format!(
                "data {off}+{len} outside a window segment of {} bytes",
                self.seg.len()
            ));
        }
        Ok(Mem::Mapped {
            seg: self.seg.clone(),
            off: start,
            len,
            track: None,
        })
    }
}

/// The write bitmap of one rank's memory in a persistent window (seed 004): one bit per
/// block, in the rank's control block, set by every write to the memory (a peer's put or
/// accumulate, the owner's stores through the library), cleared by the owner when it
/// commits. Marks are relaxed: a commit reads them after a synchronisation (fence, wait)
/// that orders every write of the epoch before it.
#[derive(Clone, Debug)]
pub(crate) struct Track {
    seg: Arc<Segment>,
    at: usize,
    words: usize,
    shift: u32,
}

impl Track {
    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.words, "bitmap word {i} of {}", self.words);
        let off = self.at + 8 * i;
        assert!(off + 8 <= self.seg.len());
        // SAFETY: (1) the bitmap lies in a control block of the segment (built by
        // `WinSegment::track`, whose shape the segment was checked to hold); (2) `at` is a
        // multiple of a line and the mapping page-aligned, so the word is aligned; (3) the Arc
        // keeps the mapping alive while `self` is borrowed; (4) bitmap words are only ever
        // accessed through atomics.
        unsafe { &*(self.seg.base().add(off) as *const AtomicU64) }
    }

    /// Record a write of `len` bytes at `off`.
    #[inline]
    pub(crate) fn mark(&self, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        let (first, last) = (off >> self.shift, (off + len - 1) >> self.shift);
        let last = last.min(self.words * 64 - 1);
        let mut b = first;
        while b <= last {
            let w = b / 64;
            let hi = last.min(w * 64 + 63);
            let n = hi - b + 1;
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << (b % 64)
            };
            let word = self.word(w);
            if word.load(Ordering::Relaxed) & mask != mask {
                word.fetch_or(mask, Ordering::Relaxed);
            }
            b = hi + 1;
        }
    }

    /// The bitmap, cleared.
    pub(crate) fn take(&self) -> Vec<u64> {
        (0..self.words)
            .map(|i| self.word(i).swap(0, Ordering::AcqRel))
            .collect()
    }

    /// Put bits back (after a commit failed).
    pub(crate) fn restore(&self, bits: &[u64]) {
        for (i, &b) in bits.iter().enumerate().take(self.words) {
            self.word(i).fetch_or(b, Ordering::AcqRel);
        }
    }

    /// Whether any block was written since the last `take`.
    pub(crate) fn any(&self) -> bool {
        (0..self.words).any(|i| self.word(i).load(Ordering::Acquire) != 0)
    }
}

/// One rank's exposed bytes, as this rank reaches them.
#[derive(Clone, Debug)]
pub(crate) enum Mem {
    /// Bytes of a segment every rank maps (for a persistent window, its data file), with the
    /// bitmap its writes are recorded in, if any.
    Mapped {
        seg: Arc<Segment>,
        off: usize,
        len: usize,
        track: Option<Track>,
    },
    /// Memory of this process at `addr`: user memory a window keeps alive (owns) until every
    /// rank has left the collective that frees it, or until it is detached under the attach
    /// table's writer lock, which waits for every reader (see `rma`).
    Local { addr: usize, len: usize },
    /// Memory of process `pid` at `addr`, reached through the kernel.
    Remote { pid: u32, addr: u64, len: usize },
}

/// The hardware atomic covering one element of 1, 2, 4 or 8 bytes; values travel as `u64`
/// holding the element's bytes in memory order (little-endian here).
/// A write through it is recorded in the memory's bitmap, if any, after it is made (a
/// commit that clears the bitmap meanwhile then sees it at the next one).
pub(crate) struct Atomic<'a> {
    cell: Cell<'a>,
    mark: Option<(&'a Track, usize, usize)>,
}

enum Cell<'a> {
    B1(&'a AtomicU8),
    B2(&'a AtomicU16),
    B4(&'a AtomicU32),
    B8(&'a AtomicU64),
}

macro_rules! each_width {
    ($self:ident, $a:ident => $e:expr) => {
        match $self.cell {
            Cell::B1($a) => $e,
            Cell::B2($a) => $e,
            Cell::B4($a) => $e,
            Cell::B8($a) => $e,
        }
    };
}

// The 8-byte arm of each method casts u64 to u64; the others widen.
#[allow(clippy::unnecessary_cast)]
impl Atomic<'_> {
    /// The element's bytes.
    pub(crate) fn load(&self) -> u64 {
        each_width!(self, a => a.load(Ordering::Acquire) as u64)
    }

    /// Record a write in the bitmap.
    #[inline]
    fn marked(&self, v: u64) -> u64 {
        if let Some((t, off, n)) = self.mark {
            t.mark(off, n);
        }
        v
    }

    /// Replace the element, returning the old bytes.
    pub(crate) fn swap(&self, v: u64) -> u64 {
        self.marked(each_width!(self, a => a.swap(v as _, Ordering::AcqRel) as u64))
    }

    /// Wrapping integer add, returning the old bytes.
    pub(crate) fn fetch_add(&self, v: u64) -> u64 {
        self.marked(each_width!(self, a => a.fetch_add(v as _, Ordering::AcqRel) as u64))
    }

    /// Replace `old` by `new` if the element holds `old`; the bytes it held.
    pub(crate) fn compare_swap(&self, old: u64, new: u64) -> u64 {
        self.marked(each_width!(self, a => match a.compare_exchange(old as _, new as _, Ordering::AcqRel, Ordering::Acquire) {
            Ok(v) | Err(v) => v as u64,
        }))
    }

    /// Replace the element by `f(old)` atomically (a compare-and-swap loop); the old bytes.
    pub(crate) fn update(&self, mut f: impl FnMut(u64) -> u64) -> u64 {
        let mut old = self.load();
        loop {
            let seen = self.compare_swap(old, f(old));
            if seen == old {
                return old;
            }
            old = seen;
        }
    }
}

impl Mem {
    /// Bytes `0..len` of `seg`, whose writes are recorded in `track`.
    pub(crate) fn mapped(seg: Arc<Segment>, len: usize, track: Option<Track>) -> Mem {
        Mem::Mapped {
            seg,
            off: 0,
            len,
            track,
        }
    }

    /// The bitmap writes to this memory are recorded in.
    pub(crate) fn track(&self) -> Option<&Track> {
        match self {
            Mem::Mapped { track, .. } => track.as_ref(),
            _ => None,
        }
    }

    /// Bytes exposed.
    pub(crate) fn len(&self) -> usize {
        match self {
            Mem::Mapped { len, .. } | Mem::Local { len, .. } | Mem::Remote { len, .. } => *len,
        }
    }

    /// Whether this rank reaches the bytes with loads and stores (not through the kernel).
    pub(crate) fn loadable(&self) -> bool {
        !matches!(self, Mem::Remote { .. })
    }

    /// The address of byte 0 in the process that owns the memory (MPI_WIN_BASE), or in this
    /// process for a mapped segment.
    pub(crate) fn address(&self) -> u64 {
        match self {
            Mem::Mapped { seg, off, .. } => seg.base() as u64 + *off as u64,
            Mem::Local { addr, .. } => *addr as u64,
            Mem::Remote { addr, .. } => *addr,
        }
    }

    fn range_err(&self, off: usize, n: usize) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "bytes {off}+{n} outside window memory of {} bytes",
                self.len()
            ),
        )
    }

    /// The address of byte `off` in this process, `n` bytes from it within the memory;
    /// `None` for remote memory.
    fn ptr(&self, off: usize, n: usize) -> io::Result<Option<*mut u8>> {
        if off.checked_add(n).is_none_or(|e| e > self.len()) {
            return Err(self.range_err(off, n));
        }
        Ok(match self {
            Mem::Mapped { seg, off: o, .. } => Some(seg.base().wrapping_add(o + off)),
            Mem::Local { addr, .. } => Some((addr + off) as *mut u8),
            Mem::Remote { .. } => None,
        })
    }

    /// Copy `src` to bytes `off..` of the memory.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> io::Result<()> {
        let r = self.write_unmarked(off, src);
        // After the write: a commit that clears the bitmap meanwhile sees it next time.
        if let Some(t) = self.track() {
            t.mark(off, src.len());
        }
        r
    }

    fn write_unmarked(&self, off: usize, src: &[u8]) -> io::Result<()> {
        match self.ptr(off, src.len())? {
            // SAFETY: (1) the destination lies within the memory (checked by `ptr`), which is
            // alive: a mapping held through the Arc, or user memory kept alive as `Local`
            // says; (2) `src` is a borrow of other memory (window memory is never handed out
            // as a Rust reference), so the two do not overlap; (3) concurrent access by peers
            // is through raw copies and atomics only, never through references.
            Some(p) => unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len());
                Ok(())
            },
            None => match self {
                Mem::Remote { pid, addr, .. } => {
                    crate::sys::cma::write_remote(*pid, addr + off as u64, src)
                }
                _ => unreachable!("only remote memory has no local address"),
            },
        }
    }

    /// Copy bytes `off..off + dst.len()` of the memory to `dst`.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> io::Result<()> {
        match self.ptr(off, dst.len())? {
            // SAFETY: as in `write`, with the roles of the two ranges swapped.
            Some(p) => unsafe {
                std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len());
                Ok(())
            },
            None => match self {
                Mem::Remote { pid, addr, .. } => {
                    crate::sys::cma::read_remote(*pid, addr + off as u64, dst)
                }
                _ => unreachable!("only remote memory has no local address"),
            },
        }
    }

    /// The hardware atomic over bytes `off..off + width` (width 1, 2, 4 or 8, `off` aligned
    /// to it in memory); `None` for remote memory, another width, or a misaligned element.
    pub(crate) fn atomic(&self, off: usize, width: usize) -> Option<Atomic<'_>> {
        let p = self.ptr(off, width).ok()??;
        if !(p as usize).is_multiple_of(width) {
            return None;
        }
        let mark = self.track().map(|t| (t, off, width));
        // SAFETY: (1) `width` bytes at `p` lie within live memory (as in `write`) and are
        // aligned for the atomic of that width (checked); (2) the borrow of `self` keeps a
        // mapping alive; user memory stays alive as `Local` says; (3) the atomic types have
        // the size and alignment of the integers, and every bit pattern is valid.
        let cell = unsafe {
            match width {
                1 => Cell::B1(&*(p as *const AtomicU8)),
                2 => Cell::B2(&*(p as *const AtomicU16)),
                4 => Cell::B4(&*(p as *const AtomicU32)),
                8 => Cell::B8(&*(p as *const AtomicU64)),
                _ => return None,
            }
        };
        Some(Atomic { cell, mark })
    }
}

/// Where an operation lands in a rank's memory: `n` bytes from an offset, or the pieces of a
/// target datatype's layout (offsets into the memory).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Place<'a> {
    Run(usize),
    Laid(&'a Layout),
}

impl Place<'_> {
    /// `f(memory offset, len)` for the message bytes `first .. first + n`, in order.
    fn pieces(&self, first: usize, n: usize, f: &mut dyn FnMut(usize, usize)) {
        match self {
            Place::Run(at) => f(at + first, n),
            Place::Laid(l) => l.bytes(first, n).pieces(n, |m, _, len| f(m, len)),
        }
    }
}

fn dead(e: crate::sys::lend::Unusable) -> io::Error {
    io::Error::other(format!("the buffer is not usable: {e:?}"))
}

/// The pieces where the first `n` message bytes of the buffer at `base` (laid out by
/// `layout`, or a run of `len` bytes) meet the pieces of `place`, in message order:
/// `f(address in the buffer, length, offset in the memory)`. Stops at the first error.
fn meet(
    base: *mut u8,
    len: usize,
    layout: Option<&Layout>,
    place: Place<'_>,
    n: usize,
    f: &mut dyn FnMut(*mut u8, usize, usize) -> io::Result<()>,
) -> io::Result<()> {
    let mut err = Ok(());
    if let (Some(l), Place::Laid(t)) = (layout, &place) {
        // Both laid out: walk each once, in step (asking the target's layout for the bytes
        // of each origin piece would walk it from its start every time: quadratic in the
        // pieces of a strided column).
        let mut src: Vec<(usize, usize)> = Vec::new();
        l.pieces(n, |b, _, len| src.push((b, len)));
        let (mut i, mut used) = (0, 0);
        t.pieces(n, |mut m, _, mut k| {
            while k > 0 && err.is_ok() && i < src.len() {
                let (b, len) = src[i];
                let take = (len - used).min(k);
                err = f(base.wrapping_add(b + used), take, m);
                used += take;
                m += take;
                k -= take;
                if used == len {
                    i += 1;
                    used = 0;
                }
            }
        });
        return err;
    }
    let mut each = |b: usize, p: usize, l: usize| {
        let mut c = 0;
        place.pieces(p, l, &mut |m, k| {
            if err.is_ok() {
                err = f(base.wrapping_add(b + c), k, m);
            }
            c += k;
        });
    };
    match layout {
        None => each(0, 0, n.min(len)),
        Some(l) => l.pieces(n, &mut each),
    }
    err
}

/// For the first `n` message bytes of `buf`: `f(bytes of buf, offset in the memory)` in
/// message order, the memory's offsets taken from `place`. Chunks are where a piece of the
/// buffer and a piece of the place overlap, so they hold whole elements when both hold whole
/// elements. Stops at the first error `f` returns.
pub(crate) fn read_chunks(
    buf: &Loan,
    place: Place<'_>,
    n: usize,
    f: &mut dyn FnMut(&[u8], usize) -> io::Result<()>,
) -> io::Result<()> {
    let raw = buf.raw_to_read().map_err(dead)?;
    meet(
        raw.as_mut_ptr(),
        raw.len(),
        raw.layout(),
        place,
        n,
        &mut |p, l, m| {
            // SAFETY: (1) the loan is alive (checked), so its buffer is; (2) the piece lies
            // within the buffer (its layout was checked against it when the view was made, or it
            // is within the first `len` bytes of a run); (3) the buffer is borrowed shared for
            // the blocking call that made the loan, so nothing writes it meanwhile.
            f(unsafe { std::slice::from_raw_parts(p, l) }, m)
        },
    )
}

/// As [`read_chunks`], for a buffer `f` fills: `f(bytes of buf to fill, offset in memory)`.
pub(crate) fn write_chunks(
    buf: &Loan,
    place: Place<'_>,
    n: usize,
    f: &mut dyn FnMut(&mut [u8], usize) -> io::Result<()>,
) -> io::Result<()> {
    let raw = buf.raw_to_write().map_err(dead)?;
    meet(
        raw.as_mut_ptr(),
        raw.len(),
        raw.layout(),
        place,
        n,
        &mut |p, l, m| {
            // SAFETY: as in `read_chunks`; and the loan is writable (checked), made from an
            // exclusive borrow held for the blocking call, and the pieces of a layout do not
            // overlap, so this slice is the only access to these bytes.
            f(unsafe { std::slice::from_raw_parts_mut(p, l) }, m)
        },
    )
}
