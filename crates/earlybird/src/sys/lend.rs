//! Raw views of user buffers lent to operations in progress.
//!
//! A [`Lent`] is the address and length of a user buffer that a nonblocking or persistent
//! operation will read or write later, from the progress engine. **Crate invariant:** a
//! `Lent` is made only by the request layer, from a buffer that it keeps alive and unaliased
//! (borrowed for the request's lifetime inside a [`scope`](crate::scope), or owned by the
//! request) until the operation has completed or been cancelled. Every `unsafe` block below
//! leans on that invariant.

use super::layout::{Layout, Segment};
use super::plain::Plain;
use super::sig::Sig;
use std::io;
use std::rc::Rc;

/// Address and length of a buffer lent to an operation, and where in it the message's bytes
/// are: all of it in order (contiguous), or a [`Layout`] of a derived datatype.
#[derive(Clone, Debug)]
pub struct Lent {
    ptr: *mut u8,
    len: usize,
    /// `None`: the message is the buffer's bytes. `Some`: its pieces, checked to lie within
    /// `0..len`.
    layout: Option<Rc<Layout>>,
    /// Whether all `len` bytes are initialised data (no padding) lent to this operation
    /// alone, so that whole-buffer byte views are sound (false for a laid-out part of a split
    /// buffer, see [`Lent::split`]).
    gapless: bool,
    /// The basic type the message is made of when it is made of one; a receive compares it
    /// with the sender's.
    sig: Sig,
    /// Bytes of one element of the buffer's type (its extent), 1 when unknown: the unit of a
    /// bound channel's address increment.
    elem: u32,
}

/// One part of a buffer lent by [`Lent::split`]: a run of bytes, or a datatype's layout.
#[derive(Debug)]
pub(crate) enum Part {
    Run(std::ops::Range<usize>),
    Laid(Layout),
}

/// Two parts of a split buffer that share a byte while one of them is written: part `a`,
/// part `b` (`a` reaches the byte first in address order) and the lowest such byte of `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overlap {
    pub a: usize,
    pub b: usize,
    pub byte: usize,
}

/// The first overlap among `pieces` (`(start, end, part)`, nonempty) between two different
/// parts at least one of which is written. One sweep in address order: each piece is checked
/// against the furthest-reaching earlier piece of another part (of any part if it is written,
/// of a written part if not).
fn first_overlap(pieces: &mut [(usize, usize, usize)], writes: &[bool]) -> Option<Overlap> {
    pieces.sort_unstable();
    let (mut any, mut written) = (Reach::default(), Reach::default());
    for &(start, end, part) in pieces.iter() {
        let against = if writes[part] { &any } else { &written };
        if let Some(a) = against.past(start, part) {
            return Some(Overlap {
                a,
                b: part,
                byte: start,
            });
        }
        any.add(end, part);
        if writes[part] {
            written.add(end, part);
        }
    }
    None
}

/// The furthest end among pieces seen (`best`, with its part) and the furthest among those
/// of other parts than `best`'s (`second`): enough to find, for any part, the furthest end
/// among the other parts.
#[derive(Default)]
struct Reach {
    best: Option<(usize, usize)>,
    second: Option<(usize, usize)>,
}

impl Reach {
    fn add(&mut self, end: usize, part: usize) {
        match self.best {
            None => self.best = Some((end, part)),
            Some((be, bp)) if bp == part => self.best = Some((be.max(end), part)),
            Some((be, _)) if end > be => {
                self.second = self.best;
                self.best = Some((end, part));
            }
            Some(_) => {
                if self.second.is_none_or(|(se, _)| end > se) {
                    self.second = Some((end, part));
                }
            }
        }
    }

    /// A part other than `part` with a piece that ends after `start`.
    fn past(&self, start: usize, part: usize) -> Option<usize> {
        [self.best, self.second]
            .into_iter()
            .flatten()
            .find(|&(_, q)| q != part)
            .filter(|&(e, _)| e > start)
            .map(|(_, q)| q)
    }
}

/// Where a rendezvous sender's bytes are, as its RTS describes them.
#[derive(Clone, Copy, Debug)]
pub enum Remote {
    /// One run of bytes at this address.
    Contiguous(u64),
    /// A table of `[address, length]` segments (`[u64; 2]` each) at `table`, `entries` long;
    /// the sender keeps it alive until the FIN.
    Segments { table: u64, entries: usize },
}

impl Lent {
    /// An empty buffer (zero-length messages, PROC_NULL).
    pub const EMPTY: Lent = Lent {
        ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
        len: 0,
        layout: None,
        gapless: true,
        sig: Sig::MIXED,
        elem: 1,
    };

    /// Lend a buffer that the operation will only read.
    pub(crate) fn of(buf: &[u8]) -> Lent {
        Lent {
            ptr: buf.as_ptr() as *mut u8,
            len: buf.len(),
            ..Lent::EMPTY
        }
    }

    /// Lend a buffer that the operation will write.
    pub(crate) fn of_mut(buf: &mut [u8]) -> Lent {
        Lent {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
            ..Lent::EMPTY
        }
    }

    /// Lend a slice of a plain type, to be read through `layout` (checked against it).
    pub(crate) fn of_layout<T: Plain>(buf: &[T], layout: Layout) -> Result<Lent, String> {
        Lent::laid_out(
            buf.as_ptr() as *mut u8,
            std::mem::size_of_val(buf),
            T::GAPLESS,
            layout,
        )
    }

    /// Lend a slice of a plain type, to be written through `layout` (checked against it).
    pub(crate) fn of_layout_mut<T: Plain>(buf: &mut [T], layout: Layout) -> Result<Lent, String> {
        let len = std::mem::size_of_val(buf);
        Lent::laid_out(buf.as_mut_ptr().cast(), len, T::GAPLESS, layout)
    }

    fn laid_out(ptr: *mut u8, len: usize, gapless: bool, layout: Layout) -> Result<Lent, String> {
        if layout.end() > len {
            return Err(format!(
                "the datatype reaches byte {} of a buffer of {len} bytes",
                layout.end()
            ));
        }
        Ok(Lent {
            ptr,
            len,
            layout: Some(Rc::new(layout)),
            gapless,
            sig: Sig::MIXED,
            elem: 1,
        })
    }

    /// Lend parts of one buffer at once to operations that will be in progress together
    /// (a halo exchange sends a grid's boundary cells while it receives into the halo around
    /// them): `parts[i]` is a [`Part`] and whether its operation writes it. A part that is
    /// written must share no byte with any other part; `Err` names the first two that do.
    ///
    /// Every pointer lent comes from the one exclusive borrow of `buf` taken here, and no byte
    /// is both written by one part and touched by another, so the operations never race. A
    /// laid-out part spans the whole buffer, parts of which belong to the others: it is marked
    /// so that it is never handed out as one byte slice
    /// ([`bytes_mut_while`](Lent::bytes_mut_while) refuses it).
    ///
    /// Every part must lie within `buf` (the datatype layer checks views before lending
    /// them); one outside is a bug of the caller and panics.
    pub(crate) fn split<T: Plain>(
        buf: &mut [T],
        parts: Vec<(Part, bool)>,
    ) -> Result<Vec<Lent>, Overlap> {
        let len = std::mem::size_of_val(buf);
        let base = buf.as_mut_ptr().cast::<u8>();
        let mut pieces = Vec::new();
        for (i, (part, _)) in parts.iter().enumerate() {
            match part {
                Part::Run(r) => {
                    assert!(
                        r.start <= r.end && r.end <= len,
                        "split: run {r:?} outside {len} bytes"
                    );
                    if !r.is_empty() {
                        pieces.push((r.start, r.end, i));
                    }
                }
                Part::Laid(l) => {
                    assert!(
                        l.end() <= len,
                        "split: layout reaches byte {} of {len}",
                        l.end()
                    );
                    l.pieces(usize::MAX, |b, _, n| pieces.push((b, b + n, i)));
                }
            }
        }
        let writes: Vec<bool> = parts.iter().map(|p| p.1).collect();
        if let Some(o) = first_overlap(&mut pieces, &writes) {
            return Err(o);
        }
        Ok(parts
            .into_iter()
            .map(|(part, _)| match part {
                Part::Run(r) => Lent {
                    // In bounds (asserted above); same provenance as `base`.
                    ptr: base.wrapping_add(r.start),
                    len: r.len(),
                    layout: None,
                    gapless: T::GAPLESS,
                    sig: Sig::MIXED,
                    elem: 1,
                },
                Part::Laid(l) => Lent {
                    ptr: base,
                    len,
                    layout: Some(Rc::new(l)),
                    gapless: false,
                    sig: Sig::MIXED,
                    elem: 1,
                },
            })
            .collect())
    }

    /// Bytes `off..off + len` of this contiguous buffer, or, with `layout`, a layout placed
    /// over them (checked to lie within them), lent to the same kind of operation as the whole
    /// (a collective's block of one rank). Panics if the range leaves the buffer: the
    /// collective layer computes blocks from counts it has checked.
    pub(crate) fn sub(
        &self,
        off: usize,
        len: usize,
        layout: Option<Layout>,
    ) -> Result<Lent, String> {
        assert!(
            self.layout.is_none() && off.checked_add(len).is_some_and(|e| e <= self.len),
            "sub: bytes {off}+{len} of a buffer of {} bytes",
            self.len
        );
        let ptr = self.ptr.wrapping_add(off);
        match layout {
            None => Ok(Lent {
                ptr,
                len,
                layout: None,
                gapless: self.gapless,
                sig: self.sig,
                elem: self.elem,
            }),
            Some(l) => Lent::laid_out(ptr, len, self.gapless, l).map(|x| x.with_sig(self.sig)),
        }
    }

    /// Whether the two buffers are the same bytes (an in-place collective's block).
    pub(crate) fn same_bytes(&self, other: &Lent) -> bool {
        self.ptr == other.ptr && self.len == other.len
    }

    /// Copy the message `self` holds into `dst` (each contiguous or laid out), as a collective
    /// moves a block locally. Both must be lent to the calling operation, `self` for reading
    /// and `dst` for writing; copying a buffer onto itself does nothing.
    pub(crate) fn copy_to(&self, dst: &Lent) {
        if self.same_bytes(dst) && self.layout.is_none() && dst.layout.is_none() {
            return;
        }
        let n = self.packed_len().min(dst.packed_len());
        match (&self.layout, &dst.layout) {
            (None, _) => {
                if n == 0 {
                    return;
                }
                // SAFETY: the source is alive and only read meanwhile (crate invariant) and
                // covers `n <= len` initialised bytes; `unpack_from` writes only `dst`, which
                // is a different lent buffer or laid-out pieces disjoint from the source (the
                // collective layer never copies between overlapping blocks).
                let src = unsafe { std::slice::from_raw_parts(self.ptr, n) };
                dst.unpack_from(src);
            }
            (Some(_), None) => {
                dst.with_bytes_mut(|d| self.pack_into(&mut d[..n]));
            }
            (Some(_), Some(_)) => {
                let mut tmp = vec![0u8; n];
                self.pack_into(&mut tmp);
                dst.unpack_from(&tmp);
            }
        }
    }

    /// Run `f` on the elements of two contiguous buffers of whole `T`s of equal length:
    /// `src` read, `dst` written (a reduction step: `dst = src op dst`). Panics when the
    /// buffers are not whole, aligned runs of `T` or overlap; the collective layer makes them
    /// from slices of `T` or from its own aligned, zeroed scratch of `T`s.
    pub(crate) fn with_typed_pair<T: Plain>(
        src: &Lent,
        dst: &Lent,
        f: impl FnOnce(&[T], &mut [T]),
    ) {
        let size = std::mem::size_of::<T>();
        let align = std::mem::align_of::<T>();
        let whole = |l: &Lent| {
            l.layout.is_none()
                && size > 0
                && l.len.is_multiple_of(size)
                && (l.ptr as usize).is_multiple_of(align)
        };
        assert!(
            whole(src) && whole(dst) && src.len == dst.len,
            "with_typed_pair: buffers of {} and {} bytes are not equal runs of {}",
            src.len,
            dst.len,
            std::any::type_name::<T>()
        );
        if src.len == 0 {
            return;
        }
        let (s0, d0) = (src.ptr as usize, dst.ptr as usize);
        assert!(
            s0 + src.len <= d0 || d0 + dst.len <= s0,
            "with_typed_pair: overlapping buffers"
        );
        let n = src.len / size;
        // SAFETY: both buffers are alive and lent to the calling operation (crate invariant),
        // `src` for reading and `dst` for writing by it alone; they hold `n` aligned values of
        // `T` (slices of `T`, or zeroed scratch that only messages of `T` wrote, and any
        // bytes in a plain type's data positions are valid, zero padding included); they do
        // not overlap (checked); the slices do not escape `f`.
        unsafe {
            let a = std::slice::from_raw_parts(src.ptr as *const T, n);
            let b = std::slice::from_raw_parts_mut(dst.ptr as *mut T, n);
            f(a, b)
        }
    }

    /// The same buffer, tagged with the basic type its message is made of.
    #[inline(always)]
    pub(crate) fn with_sig(mut self, sig: Sig) -> Lent {
        self.sig = sig;
        self
    }

    /// The same buffer, with elements of `bytes` bytes (the type's extent).
    #[inline(always)]
    pub(crate) fn with_elem(mut self, bytes: usize) -> Lent {
        self.elem = bytes.clamp(1, u32::MAX as usize) as u32;
        self
    }

    /// Bytes of one element of the buffer's type (1 when unknown).
    pub fn elem(&self) -> usize {
        self.elem as usize
    }

    pub fn sig(&self) -> Sig {
        self.sig
    }

    /// Bytes of the buffer (its extent in memory).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the message the buffer holds or takes: the buffer's length when contiguous,
    /// the layout's packed size otherwise.
    #[inline(always)]
    pub fn packed_len(&self) -> usize {
        match &self.layout {
            None => self.len,
            Some(l) => l.packed_len(),
        }
    }

    pub fn is_contiguous(&self) -> bool {
        self.layout.is_none()
    }

    /// The address, as a peer's rendezvous read of a contiguous buffer needs it.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The first `n` message bytes as `(address, length)` segments (one for a contiguous
    /// buffer), for a peer's single-copy read or this side's.
    pub fn segments(&self, n: usize) -> Vec<Segment> {
        match &self.layout {
            None => vec![[self.addr(), n.min(self.len) as u64]],
            Some(l) => l.segments(self.addr(), n),
        }
    }

    /// Write the first `dst.len()` message bytes into `dst` (an eager slot). The operation
    /// must be a reader.
    #[inline(always)]
    pub(crate) fn pack_into(&self, dst: &mut [u8]) {
        match &self.layout {
            None => {
                if dst.is_empty() {
                    return;
                }
                // SAFETY: by the crate invariant the buffer is alive for the operation and
                // nobody writes it meanwhile; a contiguous Lent covers initialised bytes (it
                // was made from a `&[u8]`), and `dst.len() <= len` (callers pack at most
                // `packed_len()`); the slice does not escape.
                let src = unsafe { std::slice::from_raw_parts(self.ptr, dst.len()) };
                super::copy::copy_small(dst, src);
            }
            Some(l) => l.pieces(dst.len(), |b, p, n| {
                // SAFETY: the layout was checked to lie within `0..len` of the lent buffer,
                // which is alive (crate invariant); its pieces are initialised (the `Plain`
                // contract); `dst[p..p + n]` is in bounds (`pieces` stops at `dst.len()`).
                unsafe {
                    std::ptr::copy_nonoverlapping(self.ptr.add(b), dst[p..p + n].as_mut_ptr(), n)
                }
            }),
        }
    }

    /// Write `src` as the first `src.len()` message bytes into the buffer. The operation must
    /// be the buffer's writer.
    #[inline(always)]
    pub(crate) fn unpack_from(&self, src: &[u8]) {
        match &self.layout {
            None => {
                let n = src.len().min(self.len);
                if n == 0 {
                    return;
                }
                // SAFETY: the buffer is alive and lent for writing to this operation alone
                // (crate invariant); `n <= len`; the slice does not escape.
                let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr, n) };
                super::copy::copy_small(dst, &src[..n]);
            }
            Some(l) => l.pieces(src.len(), |b, p, n| {
                // SAFETY: the piece lies within the lent buffer (checked at construction),
                // which is alive and lent for writing to this operation alone; any bytes are
                // valid there (the `Plain` contract); `src[p..p + n]` is in bounds.
                unsafe { std::ptr::copy_nonoverlapping(src[p..p + n].as_ptr(), self.ptr.add(b), n) }
            }),
        }
    }

    /// The message bytes, packed into a new vector (a queued frame, a buffered send).
    pub(crate) fn to_packed(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.packed_len()];
        self.pack_into(&mut v);
        v
    }

    /// The lent bytes, writable, for the duration of a closure (a contiguous buffer only).
    pub(crate) fn with_bytes_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        assert!(self.layout.is_none(), "with_bytes_mut on a laid-out buffer");
        if self.len == 0 {
            return f(&mut []);
        }
        // SAFETY: by the crate invariant the buffer is alive and lent for writing to this
        // operation alone; the slice does not escape the closure.
        f(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// The lent bytes for as long as `holder` is borrowed mutably; `None` if the buffer's
    /// element type has padding (its bytes are not all data). The request layer calls this
    /// only on an inactive persistent request that lent the buffer mutably (`holder` is that
    /// request): no operation touches the bytes meanwhile, and the request's exclusive borrow
    /// of the user's buffer keeps anyone else away.
    pub(crate) fn bytes_mut_while<'h, H: ?Sized>(&self, holder: &'h mut H) -> Option<&'h mut [u8]> {
        let _ = holder;
        if !self.gapless {
            return None;
        }
        if self.len == 0 {
            return Some(&mut []);
        }
        // SAFETY: (1) the buffer outlives the holder (crate invariant: it is borrowed for the
        // request's scope); (2) the slice's lifetime is that of `&mut holder`, during which
        // the holder cannot start an operation on the buffer; (3) it was lent mutably, so no
        // other reference to it exists; (4) it is gapless, so every byte is initialised.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Fill the first `n` message bytes from a rendezvous sender's buffer: `memcpy` when the
    /// sender is a thread of this process, `process_vm_readv` when it is another process.
    pub(crate) fn pull(
        &self,
        same_process: bool,
        pid: u32,
        remote: Remote,
        n: usize,
    ) -> io::Result<()> {
        assert!(n <= self.packed_len(), "rendezvous pull out of range");
        if n == 0 {
            return Ok(());
        }
        if let (Remote::Contiguous(addr), None) = (remote, &self.layout) {
            // The common case: one run on each side.
            if same_process {
                // SAFETY: (1) `addr` is the address of the sender's lent buffer, which the
                // sender keeps alive and unmodified until our FIN reaches it (rendezvous
                // protocol, and the crate invariant on its side); (2) it is at least `n`
                // bytes (the RTS says so); (3) our own buffer is a different, exclusively lent
                // allocation of at least `n` bytes.
                unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, self.ptr, n) };
                return Ok(());
            }
            return self.with_bytes_mut(|dst| super::cma::read_remote(pid, addr, &mut dst[..n]));
        }
        let theirs = match remote {
            Remote::Contiguous(addr) => vec![[addr, n as u64]],
            Remote::Segments { table, entries } => {
                read_segment_table(same_process, pid, table, entries)?
            }
        };
        let mine = self.segments(n);
        if same_process {
            copy_segments(&mine, &theirs, n);
            Ok(())
        } else {
            // SAFETY: `mine` are the segments of this receive's buffer, lent for writing to
            // this operation alone (crate invariant) and checked to lie within it (layouts
            // are checked at construction).
            unsafe { super::cma::read_remote_segments(pid, &mine, &theirs, n) }
        }
    }
}

/// A rendezvous sender's segment table, read out of its memory.
fn read_segment_table(
    same_process: bool,
    pid: u32,
    table: u64,
    entries: usize,
) -> io::Result<Vec<Segment>> {
    let mut v: Vec<Segment> = vec![[0; 2]; entries];
    if same_process {
        // SAFETY: `table` is the sender's segment table of `entries` `[u64; 2]` (its RTS says
        // so), which it keeps alive until our FIN; `v` has room for exactly that.
        unsafe { std::ptr::copy_nonoverlapping(table as *const Segment, v.as_mut_ptr(), entries) };
    } else {
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
        super::cma::read_remote(pid, table, raw)?;
    }
    Ok(v)
}

/// Copy the first `n` bytes described by `src` segments into those described by `dst`
/// segments, both in this address space.
fn copy_segments(dst: &[Segment], src: &[Segment], n: usize) {
    let (mut di, mut doff, mut si, mut soff, mut left) = (0, 0u64, 0, 0u64, n as u64);
    while left > 0 && di < dst.len() && si < src.len() {
        let [da, dl] = dst[di];
        let [sa, sl] = src[si];
        let k = (dl - doff).min(sl - soff).min(left);
        // SAFETY: `dst` segments are pieces of our exclusively lent receive buffer; `src`
        // segments are pieces of the sender's lent buffer, alive and unmodified until our FIN
        // (rendezvous protocol); both are within their buffers (layouts are checked), and the
        // two buffers are different allocations.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (sa + soff) as *const u8,
                (da + doff) as *mut u8,
                k as usize,
            )
        };
        left -= k;
        doff += k;
        soff += k;
        if doff == dl {
            di += 1;
            doff = 0;
        }
        if soff == sl {
            si += 1;
            soff = 0;
        }
    }
}

/// A receive buffer that many pending receives may share, as OSU-style benchmarks post a
/// whole window of receives into one buffer. Only the receiving endpoint's thread writes it
/// (the progress engine copies into it; a rendezvous pull is issued by the receiver too), so
/// the writes are sequential; the type is not `Sync`, and its bytes can be read only through
/// `&mut self`, that is, once no request borrows it any more. Its contents are those of
/// whichever receive wrote last.
pub struct ScratchBuffer {
    bytes: Box<[std::cell::UnsafeCell<u8>]>,
}

impl std::fmt::Debug for ScratchBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScratchBuffer")
            .field("len", &self.len())
            .finish()
    }
}

impl ScratchBuffer {
    /// A zeroed buffer of `len` bytes.
    pub fn new(len: usize) -> ScratchBuffer {
        ScratchBuffer {
            bytes: (0..len).map(|_| std::cell::UnsafeCell::new(0u8)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes, once nothing borrows the buffer.
    pub fn get_mut(&mut self) -> &mut [u8] {
        let cells: &mut [std::cell::UnsafeCell<u8>] = &mut self.bytes;
        // SAFETY: UnsafeCell<u8> has the layout of u8 (repr(transparent)), and `&mut self`
        // proves that no request (each holds `&self`) can write the bytes meanwhile.
        unsafe { &mut *(cells as *mut [std::cell::UnsafeCell<u8>] as *mut [u8]) }
    }

    /// Lend the bytes for writing to one more receive.
    pub(crate) fn lend(&self) -> Lent {
        // A pointer to UnsafeCell contents may be written through from a shared reference;
        // the writes happen only on the receiving thread (see the type's doc).
        Lent {
            ptr: std::cell::UnsafeCell::raw_get(self.bytes.as_ptr()),
            len: self.bytes.len(),
            ..Lent::EMPTY
        }
    }
}

impl Lent {
    /// The bytes of a slice of `T` as one contiguous run (padding included), for a
    /// collective that places its blocks itself; it is read by the operation.
    pub(crate) fn of_elems<T: Plain>(s: &[T]) -> Lent {
        Lent {
            ptr: s.as_ptr() as *mut u8,
            len: std::mem::size_of_val(s),
            gapless: T::GAPLESS,
            ..Lent::EMPTY
        }
    }

    /// As [`of_elems`](Lent::of_elems), for a slice the operation writes.
    pub(crate) fn of_elems_mut<T: Plain>(s: &mut [T]) -> Lent {
        Lent {
            ptr: s.as_mut_ptr().cast(),
            len: std::mem::size_of_val(s),
            gapless: T::GAPLESS,
            ..Lent::EMPTY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn laid(blocks: &[(isize, usize)], extent: isize, count: usize, origin: usize) -> Part {
        let lo = blocks.iter().map(|b| b.0).min().unwrap();
        let hi = blocks.iter().map(|b| b.0 + b.1 as isize).max().unwrap();
        Part::Laid(Layout::new(Rc::from(blocks), extent, count, origin, lo, hi, 1 << 20).unwrap())
    }

    #[test]
    fn overlap_needs_a_writer_and_two_parts() {
        let w = [true, false, false];
        // Reads may overlap reads; a part may overlap itself.
        assert_eq!(
            first_overlap(&mut [(0, 8, 1), (4, 12, 2), (2, 6, 0), (0, 2, 0)], &w),
            Some(Overlap {
                a: 0,
                b: 1,
                byte: 0
            })
        );
        assert_eq!(
            first_overlap(&mut [(0, 8, 1), (4, 12, 2), (12, 16, 0), (12, 14, 0)], &w),
            None
        );
        // A write reached by an earlier read that is not the furthest-reaching piece.
        assert_eq!(
            first_overlap(&mut [(0, 100, 1), (10, 30, 2), (50, 60, 0)], &w),
            Some(Overlap {
                a: 1,
                b: 0,
                byte: 50
            })
        );
        // A write inside an earlier read.
        assert_eq!(
            first_overlap(&mut [(0, 100, 1), (10, 30, 0), (20, 21, 1)], &w),
            Some(Overlap {
                a: 1,
                b: 0,
                byte: 10
            })
        );
        assert_eq!(
            first_overlap(&mut [(0, 8, 0), (8, 16, 1), (16, 24, 0)], &w),
            None
        );
    }

    #[test]
    fn halo_columns_split_and_interleave() {
        // A 4 x 4 grid of f64 (row 32 bytes): receive into column 0, send column 1, receive
        // into column 3, send column 2 (rows 1 and 2 only); a receive into row 0.
        let mut grid = [0.0f64; 16];
        let col = |c: usize| laid(&[(0, 8)], 32, 2, 32 + 8 * c);
        let parts = vec![
            (col(0), true),
            (col(1), false),
            (col(3), true),
            (col(2), false),
            (Part::Run(0..32), true),
        ];
        let lents = Lent::split(&mut grid, parts).unwrap();
        assert_eq!(lents.len(), 5);
        assert_eq!(
            lents[0].segments(16),
            vec![[lents[0].addr() + 32, 8], [lents[0].addr() + 64, 8]]
        );
        assert_eq!((lents[4].len(), lents[4].is_contiguous()), (32, true));
        assert!(!lents[0].gapless && lents[4].gapless);
        // Receiving into column 1 while sending it is refused, naming both parts.
        let bad = vec![
            (col(1), false),
            (col(0), true),
            (laid(&[(0, 16)], 32, 1, 32), true),
        ];
        assert_eq!(
            Lent::split(&mut grid, bad).unwrap_err(),
            Overlap {
                a: 1,
                b: 2,
                byte: 32
            }
        );
    }
}
