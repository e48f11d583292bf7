//! Lending user buffers to operations that run later (from the progress engine, after the
//! call that started them has returned), without any safe function able to reach memory
//! that is no longer lent.
//!
//! * [`Lent`]: the raw view of some bytes (address, length, and where the message's bytes
//!   are: all of them, or a datatype's [`Layout`]). It carries no proof of anything: the
//!   methods that read or write the bytes are `unsafe fn`, each with its `# Safety`.
//! * [`View<'b>`]: a raw view made from a borrow of the buffer for `'b` (a slice, a part of
//!   one, a datatype's view of one). It cannot be dereferenced either; it is what a buffer
//!   argument becomes before it is lent.
//! * [`Lending`]: a region in which views may be lent (a request scope, or one blocking
//!   call), made only by [`lending`], which ends it when its closure returns or unwinds:
//!   first it lets the region settle its operations ([`Settle`]), then it ends the region's
//!   *life*.
//! * [`Loan`]: a view lent for a region ([`Loan::new`] takes a `View<'l>` and a
//!   `&Lending<'l, ..>` of the same `'l`, so the buffer outlives the region), or memory the
//!   loan owns. Its methods that touch the bytes are safe: each checks that the region's life
//!   has not ended (one load of a flag) and then calls the `unsafe` method of [`Lent`]. This
//!   is where the `# Safety` obligations of `Lent` are discharged: a live region's buffers
//!   are alive (the borrow outlives the region), and written only through loans of a `&mut`
//!   borrow (checked per loan), one call at a time on the endpoint's thread (a `Loan` is not
//!   `Send`).
//!
//! A region that ends while loans of it are still held (an operation the settling missed, a
//! request leaked with `mem::forget`) leaves those loans dead: any later access through them
//! is refused ([`Unusable`]), never a use of freed memory. A region whose loans are all gone
//! when it ends gives its life back to a per-thread pool, so a blocking call (one region per
//! call) allocates nothing.
//!
//! Reads of a *peer's* lent bytes (a rendezvous receiver pulling a sender's buffer) are not
//! made through a `Loan`: they go through the fabric's bulk transfer, whose protocol keeps the
//! sender's buffer lent until the receiver says it is done (see `fabric::bulk`).

use super::layout::{Layout, Segment};
use super::overlap::{first_overlap, Overlap, Part};
use super::plain::Plain;
use super::sig::Sig;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::rc::Rc;

/// The address and length of some bytes, and where in them a message's bytes are: all of
/// them in order (contiguous), or a [`Layout`] of a derived datatype. A raw view: nothing
/// about it says the bytes are alive, so reading or writing them is `unsafe`.
#[derive(Clone, Debug)]
pub(crate) struct Lent {
    ptr: *mut u8,
    len: usize,
    /// `None`: the message is the bytes. `Some`: its pieces, checked to lie within `0..len`.
    layout: Option<Rc<Layout>>,
    /// Whether all `len` bytes are initialised data (no padding) lent to this view alone, so
    /// that whole-buffer byte views are sound (false for a laid-out part of a split buffer,
    /// which spans bytes of the other parts).
    gapless: bool,
    /// The basic type the message is made of, which a receive compares with the sender's.
    sig: Sig,
    /// Bytes of one element of the buffer's type (its extent), 1 when unknown: the unit of a
    /// bound channel's address increment.
    elem: u32,
}

impl Lent {
    /// No bytes (zero-length messages, PROC_NULL).
    pub(crate) const EMPTY: Lent = Lent {
        ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
        len: 0,
        layout: None,
        gapless: true,
        sig: Sig::MIXED,
        elem: 1,
    };

    fn run(ptr: *mut u8, len: usize, gapless: bool) -> Lent {
        Lent {
            ptr,
            len,
            gapless,
            ..Lent::EMPTY
        }
    }

    fn laid_out(ptr: *mut u8, len: usize, gapless: bool, layout: Layout) -> Result<Lent, String> {
        Lent::laid_out_rc(ptr, len, gapless, Rc::new(layout))
    }

    fn laid_out_rc(
        ptr: *mut u8,
        len: usize,
        gapless: bool,
        layout: Rc<Layout>,
    ) -> Result<Lent, String> {
        if layout.end() > len {
            return Err(format!(
                "the datatype reaches byte {} of a buffer of {len} bytes",
                layout.end()
            ));
        }
        Ok(Lent {
            ptr,
            len,
            layout: Some(layout),
            gapless,
            sig: Sig::MIXED,
            elem: 1,
        })
    }

    /// Bytes `off..off + len` of this contiguous view, or with `layout` a layout placed over
    /// them (checked to lie within them). Panics if the range leaves the view: callers cut
    /// blocks from counts they have checked.
    #[inline(always)]
    pub(crate) fn sub(
        &self,
        off: usize,
        len: usize,
        layout: Option<Rc<Layout>>,
    ) -> Result<Lent, String> {
        assert!(
            self.layout.is_none() && off.checked_add(len).is_some_and(|e| e <= self.len),
            "sub: bytes {off}+{len} of a buffer of {} bytes",
            self.len
        );
        // In bounds (asserted); same provenance as `ptr`.
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
            Some(l) => {
                Lent::laid_out_rc(ptr, len, self.gapless, l).map(|x| Lent { sig: self.sig, ..x })
            }
        }
    }

    /// Bytes of the view (its extent in memory).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the message: the length when contiguous, the layout's packed size otherwise.
    #[inline(always)]
    pub(crate) fn packed_len(&self) -> usize {
        match &self.layout {
            None => self.len,
            Some(l) => l.packed_len(),
        }
    }

    pub(crate) fn is_contiguous(&self) -> bool {
        self.layout.is_none()
    }

    /// Where the message's bytes are in the view, for a laid-out one (checked to lie within
    /// it); `None` when the message is all the bytes in order.
    pub(crate) fn layout(&self) -> Option<&Layout> {
        self.layout.as_deref()
    }

    pub(crate) fn sig(&self) -> Sig {
        self.sig
    }

    /// Bytes of one element of the buffer's type (1 when unknown).
    pub(crate) fn elem(&self) -> usize {
        self.elem as usize
    }

    /// The address of the first byte (of the view, not of the message).
    pub(crate) fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The pointer the bytes are reached through (for the fabric's bulk transfers).
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The first `n` message bytes as `(address, length)` segments (one for a contiguous
    /// view), for a single-copy read by a peer or by this side.
    pub(crate) fn segments(&self, n: usize) -> Vec<Segment> {
        match &self.layout {
            None => vec![[self.addr(), n.min(self.len) as u64]],
            Some(l) => l.segments(self.addr(), n),
        }
    }

    /// Whether the two views are the same bytes.
    pub(crate) fn same_bytes(&self, other: &Lent) -> bool {
        self.ptr == other.ptr && self.len == other.len
    }

    /// Write the first `dst.len()` message bytes into `dst`.
    ///
    /// # Safety
    /// The bytes are alive for the duration of the call, and nothing writes them meanwhile;
    /// `dst.len()` is at most [`packed_len`](Self::packed_len).
    #[inline(always)]
    pub(crate) unsafe fn pack_into(&self, dst: &mut [u8]) {
        match &self.layout {
            None => {
                if dst.is_empty() {
                    return;
                }
                debug_assert!(dst.len() <= self.len);
                // SAFETY: the bytes are alive and not written meanwhile (this function's
                // contract), initialised (a contiguous view is made from a slice of a plain
                // type, whose bytes are all initialised, or from zeroed or copied memory),
                // and `dst.len() <= len`; the slice does not escape.
                let src = unsafe { std::slice::from_raw_parts(self.ptr, dst.len()) };
                super::copy::copy_small(dst, src);
            }
            Some(l) => l.pieces(dst.len(), |b, p, n| {
                // SAFETY: the piece lies within `0..len` (checked when the layout was
                // placed), the bytes are alive (contract) and initialised (a layout's pieces
                // are a plain type's data bytes); `dst[p..p + n]` is in bounds (`pieces`
                // stops at `dst.len()`).
                unsafe {
                    std::ptr::copy_nonoverlapping(self.ptr.add(b), dst[p..p + n].as_mut_ptr(), n)
                }
            }),
        }
    }

    /// Write `src` as the first `src.len()` message bytes (at most the message's length).
    ///
    /// # Safety
    /// The bytes are alive for the duration of the call, may be written (the view was made
    /// from a `&mut` borrow or from memory its owner writes), and nothing else reads or
    /// writes them meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn unpack_from(&self, src: &[u8]) {
        match &self.layout {
            None => {
                let n = src.len().min(self.len);
                if n == 0 {
                    return;
                }
                // SAFETY: alive, writable and not otherwise accessed during the call
                // (contract); `n <= len`; the slice does not escape.
                let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr, n) };
                super::copy::copy_small(dst, &src[..n]);
            }
            Some(l) => l.pieces(src.len(), |b, p, n| {
                // SAFETY: the piece lies within the view (checked at placement), which is
                // alive and writable (contract); any bytes are valid in a plain type's data
                // positions; `src[p..p + n]` is in bounds.
                unsafe { std::ptr::copy_nonoverlapping(src[p..p + n].as_ptr(), self.ptr.add(b), n) }
            }),
        }
    }

    /// Copy the message `self` holds into `dst`, as a collective moves a block locally;
    /// copying a view onto itself does nothing.
    ///
    /// # Safety
    /// Both are alive for the call; `self` is not written meanwhile; `dst` may be written
    /// and nothing else accesses it meanwhile; the two share no byte unless they are the
    /// same contiguous view.
    pub(crate) unsafe fn copy_to(&self, dst: &Lent) {
        if self.same_bytes(dst) && self.layout.is_none() && dst.layout.is_none() {
            return;
        }
        let n = self.packed_len().min(dst.packed_len());
        if n == 0 {
            return;
        }
        match (&self.layout, &dst.layout) {
            (None, _) => {
                // SAFETY: `self` is alive and not written during the call and holds `n <=
                // len` initialised bytes (contract); `dst` is a different view (contract).
                let src = unsafe { std::slice::from_raw_parts(self.ptr, n) };
                // SAFETY: `dst`'s obligations are this function's.
                unsafe { dst.unpack_from(src) };
            }
            (Some(_), None) => {
                // SAFETY: `dst` is alive, writable and not otherwise accessed (contract) and
                // holds `n <= len` bytes; it shares no byte with `self`.
                let d = unsafe { std::slice::from_raw_parts_mut(dst.ptr, n) };
                // SAFETY: `self`'s obligations are this function's.
                unsafe { self.pack_into(d) };
            }
            (Some(_), Some(_)) => {
                let mut tmp = vec![0u8; n];
                // SAFETY: as above, each for its own view.
                unsafe {
                    self.pack_into(&mut tmp);
                    dst.unpack_from(&tmp);
                }
            }
        }
    }

    /// Run `f` on the elements of two contiguous views of whole `T`s of equal length: `src`
    /// read, `dst` written (a reduction step, `dst = src op dst`). Panics when they are not
    /// whole, aligned runs of `T` of one length, or overlap.
    ///
    /// # Safety
    /// Both are alive for the call; `src` is not written meanwhile; `dst` may be written and
    /// nothing else accesses it meanwhile; both hold initialised values of `T` (slices of
    /// `T`, or zeroed memory that only messages of `T` wrote).
    pub(crate) unsafe fn typed_pair<T: Plain>(
        src: &Lent,
        dst: &Lent,
        f: impl FnOnce(&[T], &mut [T]),
    ) {
        if src.len == 0 && dst.len == 0 {
            return;
        }
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
            "typed_pair: views of {} and {} bytes are not equal runs of {}",
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
            "typed_pair: overlapping views"
        );
        let n = src.len / size;
        // SAFETY: alive, `src` unwritten and `dst` exclusively ours for the call, both
        // initialised `T`s (contract); aligned whole runs of `n` values that do not overlap
        // (checked); the slices do not escape `f`.
        unsafe {
            let a = std::slice::from_raw_parts(src.ptr as *const T, n);
            let b = std::slice::from_raw_parts_mut(dst.ptr as *mut T, n);
            f(a, b)
        }
    }

    /// All the view's bytes as one slice, for `'a`.
    ///
    /// # Safety
    /// The bytes are alive, writable and initialised for all of `'a`, and nothing else reads
    /// or writes them during `'a`.
    pub(crate) unsafe fn bytes_mut<'a>(&self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: the contract above, for all of `'a`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// A raw view made from a borrow of its buffer for `'b`: what a buffer argument becomes
/// before it is lent. It gives no access to the bytes; [`Loan::new`] lends it for a region
/// that `'b` outlives.
#[derive(Debug)]
pub(crate) struct View<'b> {
    raw: Lent,
    /// Made from a `&mut` borrow (or memory that may be written through a shared one): a
    /// receive may write it.
    writable: bool,
    _borrow: PhantomData<&'b [u8]>,
}

impl<'b> View<'b> {
    /// The signature of the data it holds.
    pub(crate) fn sig(&self) -> Sig {
        self.raw.sig()
    }

    /// All the bytes of a slice of a plain type (padding included), read only.
    pub(crate) fn read<T: Plain>(buf: &'b [T]) -> View<'b> {
        let raw = Lent::run(
            buf.as_ptr() as *mut u8,
            std::mem::size_of_val(buf),
            T::GAPLESS,
        );
        View {
            raw,
            writable: false,
            _borrow: PhantomData,
        }
    }

    /// All the bytes of a slice of a plain type (padding included), writable.
    pub(crate) fn write<T: Plain>(buf: &'b mut [T]) -> View<'b> {
        let raw = Lent::run(
            buf.as_mut_ptr().cast(),
            std::mem::size_of_val(buf),
            T::GAPLESS,
        );
        View {
            raw,
            writable: true,
            _borrow: PhantomData,
        }
    }

    /// A slice read through `layout` (checked to lie within it).
    pub(crate) fn read_laid<T: Plain>(buf: &'b [T], layout: Layout) -> Result<View<'b>, String> {
        let raw = Lent::laid_out(
            buf.as_ptr() as *mut u8,
            std::mem::size_of_val(buf),
            T::GAPLESS,
            layout,
        )?;
        Ok(View {
            raw,
            writable: false,
            _borrow: PhantomData,
        })
    }

    /// A slice written through `layout` (checked to lie within it).
    pub(crate) fn write_laid<T: Plain>(
        buf: &'b mut [T],
        layout: Layout,
    ) -> Result<View<'b>, String> {
        let len = std::mem::size_of_val(buf);
        let raw = Lent::laid_out(buf.as_mut_ptr().cast(), len, T::GAPLESS, layout)?;
        Ok(View {
            raw,
            writable: true,
            _borrow: PhantomData,
        })
    }

    /// A receive buffer many receives may share (see [`ScratchBuffer`]).
    pub(crate) fn scratch(buf: &'b ScratchBuffer) -> View<'b> {
        // A pointer to UnsafeCell contents may be written through from a shared reference;
        // the writes happen only on the receiving thread (see the type's doc).
        let raw = Lent::run(
            std::cell::UnsafeCell::raw_get(buf.bytes.as_ptr()),
            buf.bytes.len(),
            true,
        );
        View {
            raw,
            writable: true,
            _borrow: PhantomData,
        }
    }

    /// Views of parts of one buffer that operations will use at once (a halo exchange sends
    /// a grid's boundary cells while it receives into the halo around them): `parts[i]` is
    /// a [`Part`] and whether its operation writes it. A part that is written must share no
    /// byte with any other part; `Err` names the first two that do.
    ///
    /// Every view comes from the one exclusive borrow of `buf` taken here, and no byte is
    /// both written by one part and touched by another, so the operations never race. A
    /// laid-out part spans the whole buffer, parts of which belong to the others: it is
    /// marked so that it is never handed out as one byte slice.
    ///
    /// Every part must lie within `buf` (the datatype layer checks views before making them);
    /// one outside is a bug of the caller and panics.
    pub(crate) fn split<T: Plain>(
        buf: &'b mut [T],
        parts: Vec<(Part, bool)>,
    ) -> Result<Vec<View<'b>>, Overlap> {
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
            .map(|(part, writable)| {
                let raw = match part {
                    // In bounds (asserted above); same provenance as `base`.
                    Part::Run(r) => Lent::run(base.wrapping_add(r.start), r.len(), T::GAPLESS),
                    Part::Laid(l) => Lent {
                        ptr: base,
                        len,
                        layout: Some(Rc::new(l)),
                        gapless: false,
                        sig: Sig::MIXED,
                        elem: 1,
                    },
                };
                View {
                    raw,
                    writable,
                    _borrow: PhantomData,
                }
            })
            .collect())
    }

    /// The same view, of the same borrow, for a shorter one (a view kept in a `Typed` is
    /// lent again by each call that takes it).
    pub(crate) fn reborrow(&self) -> View<'_> {
        View {
            raw: self.raw.clone(),
            writable: self.writable,
            _borrow: PhantomData,
        }
    }

    /// The view without its layout, and the layout: all the bytes it was made over, as one
    /// run. A collective cuts blocks of a typed buffer out of that run with parts of the
    /// layout ([`Layout::bytes`]), so every byte it reaches is one the view reached.
    #[inline]
    pub(crate) fn into_run(mut self) -> (View<'b>, Option<Rc<Layout>>) {
        let layout = self.raw.layout.take();
        (self, layout)
    }

    /// Keep the first `len` bytes of this contiguous view only (the part of a slice a
    /// collective uses). Panics past its end or on a laid-out view.
    #[inline(always)]
    pub(crate) fn truncate(&mut self, len: usize) {
        assert!(
            self.raw.layout.is_none() && len <= self.raw.len,
            "truncate: {len} bytes of a view of {}",
            self.raw.len
        );
        self.raw.len = len;
    }

    /// The view, leaving an empty one in its place.
    #[inline(always)]
    pub(crate) fn take(&mut self) -> View<'b> {
        std::mem::replace(
            self,
            View {
                raw: Lent::EMPTY,
                writable: false,
                _borrow: PhantomData,
            },
        )
    }

    /// `f` of the view's bytes, when it is one run of initialised bytes that nothing writes
    /// while the view lives: a view that is not writable, made from a shared borrow of a
    /// slice or made read-only from an exclusive one (a `TypedMut` sent); scratch buffers,
    /// which a receive may write through a shared borrow, make writable views. `None` (and
    /// `f` not called) otherwise.
    #[inline]
    pub(crate) fn with_shared_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if self.writable || self.raw.layout.is_some() || !self.raw.gapless {
            return None;
        }
        if self.raw.len == 0 {
            return Some(f(&[]));
        }
        // SAFETY: (1) a view that is not writable was made from a borrow of its buffer for
        // `'b` (shared, or exclusive and made read-only), which this borrow of the view is
        // within, so the `len` bytes at `ptr` are alive; (2) `gapless` says they are
        // initialised data lent to this view alone; (3) such a borrow of a plain type (no
        // interior mutability) lets nobody else write it while it lasts, and the slice does
        // not outlive `f`.
        Some(f(unsafe {
            std::slice::from_raw_parts(self.raw.ptr, self.raw.len)
        }))
    }

    /// Whether the view was made from a `&mut` borrow.
    #[inline]
    pub(crate) fn is_writable(&self) -> bool {
        self.writable
    }

    /// The same view, read only.
    pub(crate) fn read_only(mut self) -> View<'b> {
        self.writable = false;
        self
    }

    /// The same view, its message made of the basic type `sig`.
    pub(crate) fn with_sig(mut self, sig: Sig) -> View<'b> {
        self.raw.sig = sig;
        self
    }

    /// The same view, with elements of `bytes` bytes (the type's extent).
    pub(crate) fn with_elem(mut self, bytes: usize) -> View<'b> {
        self.raw.elem = bytes.clamp(1, u32::MAX as usize) as u32;
        self
    }

    /// Bytes of the message.
    pub(crate) fn packed_len(&self) -> usize {
        self.raw.packed_len()
    }

    /// Bytes of the view.
    pub(crate) fn len(&self) -> usize {
        self.raw.len()
    }
}

/// What a lending region does when it ends, before its loans die: complete (or withdraw)
/// every operation that may still touch its buffers. Whatever it does, the region's loans
/// die after it, so no operation it missed can reach the buffers any more.
pub(crate) trait Settle {
    fn settle(&self);
}

/// A region that settles nothing: one blocking call, which waits for its own operations.
impl Settle for () {
    fn settle(&self) {}
}

/// Whether the buffers of one region are still lent.
#[derive(Debug)]
struct Life {
    alive: Cell<bool>,
}

thread_local! {
    /// Lives of regions that ended with no loan left, alive and ready for the next region.
    static LIVES: RefCell<Vec<Rc<Life>>> = const { RefCell::new(Vec::new()) };
}

/// Lives kept in the pool at most.
const POOLED_LIVES: usize = 16;

fn take_life() -> Rc<Life> {
    LIVES
        .try_with(|p| p.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            Rc::new(Life {
                alive: Cell::new(true),
            })
        })
}

/// A region in which views of buffers borrowed for `'l` may be lent, and the settling state
/// `S` it ends with: a request [`Scope`](crate::Scope) is one. Made only by the library.
pub struct Lending<'l, 'env: 'l, S> {
    life: Rc<Life>,
    inner: S,
    _region: PhantomData<&'l mut &'l ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<S> Lending<'_, '_, S> {
    /// The region's settling state.
    pub(crate) fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Lending<'_, '_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lending")
            .field("inner", &self.inner)
            .finish()
    }
}

/// Run `f` in a new lending region: views of buffers that outlive it may be lent for it.
/// When `f` returns or unwinds, the region settles (`inner.settle()`) and then its loans die:
/// if any is still held, the region's life is revoked; if none is, the life goes back to
/// this thread's pool, alive, for a later region (no loan can refer to it any more).
pub(crate) fn lending<'env, S: Settle, R>(
    inner: S,
    f: impl for<'l> FnOnce(&'l Lending<'l, 'env, S>) -> R,
) -> R {
    struct End<'a, 'l, 'env, S: Settle>(&'a Lending<'l, 'env, S>);
    impl<S: Settle> Drop for End<'_, '_, '_, S> {
        fn drop(&mut self) {
            self.0.inner.settle();
            if Rc::strong_count(&self.0.life) > 1 {
                self.0.life.alive.set(false);
            }
        }
    }
    let l = Lending {
        life: take_life(),
        inner,
        _region: PhantomData,
        _env: PhantomData,
    };
    let r = {
        let _end = End(&l);
        f(&l)
    };
    // No loan is left: the life (alive) goes to the pool, for a region that starts after
    // this one has gone.
    if l.life.alive.get() && Rc::strong_count(&l.life) == 1 {
        let _ = LIVES.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < POOLED_LIVES {
                p.push(l.life.clone());
            }
        });
    }
    r
}

/// A lending region that never ends, for views of buffers that live as long as the program
/// (`'static`): nothing settles it, and its loans stay alive. What a caller that cannot wrap
/// its work in a closure (a C binding, whose operations outlive any Rust call) lends to.
pub(crate) fn endless<S>(inner: S) -> &'static Lending<'static, 'static, S> {
    Box::leak(Box::new(Lending {
        life: take_life(),
        inner,
        _region: PhantomData,
        _env: PhantomData,
    }))
}

/// A region lent to one holder: its clones are counted, so that the holder can tell when
/// no operation holds a copy and the bytes may be handed out whole.
#[derive(Debug)]
struct Exclusive {
    life: Rc<Life>,
}

/// Memory a loan owns: zeroed, 16-byte aligned.
#[derive(Debug)]
struct Owned {
    _mem: Box<[std::cell::UnsafeCell<u128>]>,
}

/// What keeps a loan's bytes alive.
#[derive(Clone, Debug)]
enum Keep {
    /// No bytes.
    Nothing,
    /// Lent for a region: alive while its life lasts.
    Region(Rc<Life>),
    /// Lent for a region to one holder (see [`Loan::exclusive`]).
    Exclusive(Rc<Exclusive>),
    /// Owned by the loan (and its clones).
    Owned(Rc<Owned>),
    /// Bytes of a shared mapping the loan holds (a collective's shared-memory slot; see
    /// [`Loan::mapped`]).
    Mapped { _seg: Rc<super::segment::Segment> },
}

/// Why a loan's bytes cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// The region it was lent for has ended.
    Ended,
    /// Written through a loan of a read-only borrow.
    ReadOnly,
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unusable::Ended => {
                "the buffer is no longer lent (the scope or call that lent it has ended)"
            }
            Unusable::ReadOnly => "the buffer was lent read-only",
        })
    }
}

/// A view lent to operations for a region, or memory it owns: the handle through which the
/// library reads and writes buffers of operations in progress (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Loan {
    raw: Lent,
    keep: Keep,
    writable: bool,
}

impl Loan {
    /// No bytes.
    pub(crate) const EMPTY: Loan = Loan {
        raw: Lent::EMPTY,
        keep: Keep::Nothing,
        writable: true,
    };

    /// Lend `view` for the region `lending`: its buffer is borrowed for the region's `'l`,
    /// which ends only after the region's life has (see [`lending`]).
    #[inline(always)]
    pub(crate) fn new<'l, S: Settle>(view: View<'l>, lending: &Lending<'l, '_, S>) -> Loan {
        Loan {
            raw: view.raw,
            keep: Keep::Region(lending.life.clone()),
            writable: view.writable,
        }
    }

    /// `bytes` zeroed bytes the loan owns, 16-byte aligned (a collective's scratch).
    pub(crate) fn zeroed(bytes: usize) -> Loan {
        if bytes == 0 {
            return Loan::EMPTY;
        }
        let mem: Box<[std::cell::UnsafeCell<u128>]> = (0..bytes.div_ceil(16))
            .map(|_| std::cell::UnsafeCell::new(0u128))
            .collect();
        // Writes go through the cells' raw pointers, from the loan's one thread.
        let ptr = std::cell::UnsafeCell::raw_get(mem.as_ptr()).cast::<u8>();
        Loan {
            raw: Lent::run(ptr, bytes, true),
            keep: Keep::Owned(Rc::new(Owned { _mem: mem })),
            writable: true,
        }
    }

    /// Bytes `off..off + len` of the shared mapping `seg`, kept mapped by the loan (and its
    /// clones), writable if `writable`. Panics if the range leaves the mapping.
    ///
    /// Other processes or threads map the same bytes: the structure placed in the mapping
    /// must order every access to them by its own atomics, so that nobody writes the bytes
    /// while this loan reads or writes them (a collective's slot is written by its owner
    /// only before it publishes the slot's flag, and again only after every reader has said
    /// it is done with it: see `fabric::coll_region`).
    pub(crate) fn mapped(
        seg: &Rc<super::segment::Segment>,
        off: usize,
        len: usize,
        writable: bool,
    ) -> Loan {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= seg.len()),
            "mapped loan: bytes {off}+{len} of a mapping of {} bytes",
            seg.len()
        );
        Loan {
            raw: Lent::run(seg.base().wrapping_add(off), len, true),
            keep: Keep::Mapped { _seg: seg.clone() },
            writable,
        }
    }

    /// A copy of `bytes` the loan owns (a buffered send's copy, a small control message).
    pub(crate) fn copied(bytes: &[u8]) -> Loan {
        let l = Loan::zeroed(bytes.len());
        // Owned, writable and alive: cannot fail.
        let _ = l.unpack_from(bytes);
        l
    }

    /// The same loan, lent to one holder (a persistent request, a channel): the holder can
    /// then hand its bytes out whole ([`bytes_mut`](Self::bytes_mut)) whenever no copy of
    /// the loan is held by an operation.
    pub(crate) fn exclusive(self) -> Loan {
        let keep = match self.keep {
            Keep::Region(life) => Keep::Exclusive(Rc::new(Exclusive { life })),
            k => k,
        };
        Loan { keep, ..self }
    }

    #[inline(always)]
    fn alive(&self) -> bool {
        match &self.keep {
            Keep::Nothing | Keep::Owned(_) | Keep::Mapped { .. } => true,
            Keep::Region(l) => l.alive.get(),
            Keep::Exclusive(x) => x.life.alive.get(),
        }
    }

    /// The raw view, to read the bytes now (the fabric's bulk transfer), if they are alive.
    #[inline(always)]
    pub(crate) fn raw_to_read(&self) -> Result<&Lent, Unusable> {
        if self.alive() {
            Ok(&self.raw)
        } else {
            Err(Unusable::Ended)
        }
    }

    /// The raw view, to write the bytes now (the fabric's bulk transfer), if they are alive
    /// and writable.
    #[inline(always)]
    pub(crate) fn raw_to_write(&self) -> Result<&Lent, Unusable> {
        if !self.writable {
            return Err(Unusable::ReadOnly);
        }
        self.raw_to_read()
    }

    /// Bytes `off..off + len` (or a layout over them) of this contiguous loan, lent alike.
    #[inline(always)]
    pub(crate) fn sub(
        &self,
        off: usize,
        len: usize,
        layout: Option<Rc<Layout>>,
    ) -> Result<Loan, String> {
        Ok(Loan {
            raw: self.raw.sub(off, len, layout)?,
            keep: self.keep.clone(),
            writable: self.writable,
        })
    }

    /// The loan without its layout, and the layout: all the bytes the view was made over,
    /// as one run, as [`View::into_run`] (a partitioned request cuts its partitions out of
    /// that run with parts of the layout, every byte of them one the view reached).
    pub(crate) fn into_run(mut self) -> (Loan, Option<Rc<Layout>>) {
        let layout = self.raw.layout.take();
        (self, layout)
    }

    /// The same loan, its message made of the basic type `sig`.
    #[inline(always)]
    pub(crate) fn with_sig(mut self, sig: Sig) -> Loan {
        self.raw.sig = sig;
        self
    }

    pub(crate) fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether the loan may be written (made from a `&mut` borrow, or owned).
    pub(crate) fn is_writable(&self) -> bool {
        self.writable
    }

    #[inline(always)]
    pub(crate) fn packed_len(&self) -> usize {
        self.raw.packed_len()
    }

    pub(crate) fn is_contiguous(&self) -> bool {
        self.raw.is_contiguous()
    }

    pub(crate) fn sig(&self) -> Sig {
        self.raw.sig()
    }

    pub(crate) fn elem(&self) -> usize {
        self.raw.elem()
    }

    /// The address of the first byte (a key, never dereferenced).
    pub(crate) fn addr(&self) -> u64 {
        self.raw.addr()
    }

    /// Write the first `dst.len()` message bytes (at most the message's length) into `dst`.
    #[inline(always)]
    pub(crate) fn pack_into(&self, dst: &mut [u8]) -> Result<(), Unusable> {
        let raw = self.raw_to_read()?;
        assert!(dst.len() <= raw.packed_len(), "pack past the message");
        // SAFETY: the loan is alive (checked), so its buffer is (module doc); the loan is
        // used on its endpoint's thread only, one call at a time, and a writable loan's bytes
        // are written only by such calls, none of which runs during this one.
        unsafe { raw.pack_into(dst) };
        Ok(())
    }

    /// Write `src` as the first message bytes.
    #[inline(always)]
    pub(crate) fn unpack_from(&self, src: &[u8]) -> Result<(), Unusable> {
        let raw = self.raw_to_write()?;
        // SAFETY: alive (checked), writable (checked: made from a `&mut` borrow, or owned),
        // and nothing else reads or writes the bytes during the call (calls on the loan's
        // thread run one at a time; a user's `&mut` of them exists only through
        // `bytes_mut`, which needs the loan's only copy).
        unsafe { raw.unpack_from(src) };
        Ok(())
    }

    /// Copy the message this loan holds into `dst` (a collective's local copy step).
    #[inline]
    pub(crate) fn copy_to(&self, dst: &Loan) -> Result<(), Unusable> {
        let (s, d) = (self.raw_to_read()?, dst.raw_to_write()?);
        assert!(
            s.same_bytes(d) || !overlaps(s, d),
            "copy between overlapping buffers"
        );
        // SAFETY: both alive, `dst` writable (checked) and not otherwise accessed during the
        // call (as in `unpack_from`); they do not overlap unless they are the same bytes
        // (asserted).
        unsafe { s.copy_to(d) };
        Ok(())
    }

    /// Run `f` on `src` and `dst` as slices of `T` (a reduction step, `dst = src op dst`).
    /// Panics unless both are equal, aligned, disjoint runs of whole `T`s.
    pub(crate) fn typed_pair<T: Plain>(
        src: &Loan,
        dst: &Loan,
        f: impl FnOnce(&[T], &mut [T]),
    ) -> Result<(), Unusable> {
        let (s, d) = (src.raw_to_read()?, dst.raw_to_write()?);
        // SAFETY: both alive, `dst` writable and not otherwise accessed (as in
        // `unpack_from`); they hold initialised `T`s: a collective lends slices of `T`, or
        // its own zeroed scratch that only messages of `T` write (any bytes are valid in a
        // plain type's data positions, and zero in its padding).
        unsafe { Lent::typed_pair(s, d, f) };
        Ok(())
    }

    /// The message bytes, packed into a new vector.
    pub(crate) fn to_packed(&self) -> Result<Vec<u8>, Unusable> {
        let mut v = vec![0u8; self.packed_len()];
        self.pack_into(&mut v)?;
        Ok(v)
    }

    /// All the bytes, for as long as this loan is borrowed mutably: `None` unless it is an
    /// [`exclusive`](Self::exclusive) (or owned) loan of a writable, gapless, contiguous buffer
    /// that is alive and of which no copy exists (so no operation can touch the bytes
    /// meanwhile).
    pub(crate) fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        let sole = match &self.keep {
            Keep::Exclusive(x) => Rc::strong_count(x) == 1 && x.life.alive.get(),
            Keep::Owned(o) => Rc::strong_count(o) == 1,
            Keep::Nothing => true,
            // Shared bytes are never handed out as a slice: peers reach them too.
            Keep::Region(_) | Keep::Mapped { .. } => false,
        };
        if !(sole && self.writable && self.raw.gapless && self.raw.is_contiguous()) {
            return None;
        }
        // SAFETY: (1) alive: an owned loan owns the memory; an exclusive one's region is
        // alive (checked), so its buffer is; (2) writable and gapless, so every byte is
        // initialised and may be written; (3) this is the only copy of the loan (checked), no
        // other loan of these bytes exists (an exclusive loan is made from the one view of a
        // `&mut` borrow), and it is borrowed mutably for the slice's lifetime, so nothing else
        // reads or writes the bytes meanwhile.
        Some(unsafe { self.raw.bytes_mut() })
    }
}

/// Whether two contiguous views share a byte (views with layouts: compared by their spans).
fn overlaps(a: &Lent, b: &Lent) -> bool {
    let (a0, b0) = (a.ptr as usize, b.ptr as usize);
    a.len > 0
        && b.len > 0
        && a0 < b0 + b.len
        && b0 < a0 + a.len
        && (a.is_contiguous() && b.is_contiguous())
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
        // proves that no request (each borrows `&self` for its scope) can write the bytes
        // meanwhile.
        unsafe { &mut *(cells as *mut [std::cell::UnsafeCell<u8>] as *mut [u8]) }
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
        let views = View::split(&mut grid, parts).unwrap();
        assert_eq!(views.len(), 5);
        assert_eq!(
            views[0].raw.segments(16),
            vec![[views[0].raw.addr() + 32, 8], [views[0].raw.addr() + 64, 8]]
        );
        assert_eq!((views[4].len(), views[4].raw.is_contiguous()), (32, true));
        assert!(!views[0].raw.gapless && views[4].raw.gapless);
        assert!(!views[1].writable && views[2].writable);
        // Receiving into column 1 while sending it is refused, naming both parts.
        let bad = vec![
            (col(1), false),
            (col(0), true),
            (laid(&[(0, 16)], 32, 1, 32), true),
        ];
        assert_eq!(
            View::split(&mut grid, bad).unwrap_err(),
            Overlap {
                a: 1,
                b: 2,
                byte: 32
            }
        );
    }

    #[test]
    fn loans_die_with_their_region_and_pooled_lives_are_fresh() {
        let mut buf = [1u8, 2, 3, 4];
        let kept = lending((), |l| {
            let loan = Loan::new(View::write(&mut buf[..]), l);
            loan.unpack_from(&[9, 9]).unwrap();
            loan // outlives the region
        });
        assert_eq!(buf, [9, 9, 3, 4]);
        assert_eq!(kept.pack_into(&mut [0u8; 2]), Err(Unusable::Ended));
        assert_eq!(kept.unpack_from(&[1]), Err(Unusable::Ended));
        // A region whose loans are all gone recycles its life, alive, for the next one.
        for _ in 0..3 {
            let got = lending((), |l| {
                let loan = Loan::new(View::read(&buf[..]), l);
                let mut d = [0u8; 4];
                loan.pack_into(&mut d).unwrap();
                assert_eq!(loan.unpack_from(&[0]), Err(Unusable::ReadOnly));
                d
            });
            assert_eq!(got, [9, 9, 3, 4]);
        }
        // The revoked life stays revoked while a loan holds it.
        assert_eq!(kept.pack_into(&mut [0u8; 1]), Err(Unusable::Ended));
    }

    #[test]
    fn an_exclusive_loan_is_handed_out_only_without_copies() {
        let mut buf = [0u32; 4];
        let mut two = [0u8; 2];
        lending((), |l| {
            let mut ex = Loan::new(View::write(&mut buf[..]), l).exclusive();
            assert!(ex.bytes_mut().is_some());
            let copy = ex.clone();
            assert!(ex.bytes_mut().is_none(), "a copy is held by an operation");
            copy.unpack_from(&[7, 0, 0, 0]).unwrap();
            drop(copy);
            ex.bytes_mut().unwrap()[4] = 8;
            let mut plain = Loan::new(View::write(&mut two[..]), l);
            assert!(
                plain.bytes_mut().is_none(),
                "only exclusive loans are handed out"
            );
        });
        assert_eq!(buf[0], 7);
        assert_eq!(buf[1], 8);
    }

    #[test]
    fn owned_scratch_is_zeroed_and_aligned() {
        let s = Loan::zeroed(40);
        assert_eq!(s.raw.addr() % 16, 0);
        let mut out = [1u8; 40];
        s.pack_into(&mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0));
        let c = Loan::copied(&[5, 6, 7]);
        assert_eq!(c.to_packed().unwrap(), vec![5, 6, 7]);
    }
}
