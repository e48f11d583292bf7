//! What a communication call may be given as its buffer: a slice (or array, or vector) of an
//! [`Equivalence`] type, or a view of a slice through a derived datatype.
#![forbid(unsafe_code)]

use super::{Datatype, Equivalence, Sig};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::lend::{Lent, Part};
use crate::sys::plain::{as_bytes, as_bytes_mut};
use std::marker::PhantomData;

/// Only this crate implements the buffer traits: a buffer hands the engine a raw view of
/// memory, which must come from a borrow the library checked.
mod private {
    pub trait Sealed {}
}
pub(crate) use private::Sealed;

impl<T: Equivalence> Sealed for [T] {}
impl<T: Equivalence, const N: usize> Sealed for [T; N] {}
impl<T: Equivalence> Sealed for Vec<T> {}
impl Sealed for Typed<'_> {}
impl Sealed for TypedMut<'_> {}
impl<B: Buffer + ?Sized> Sealed for &B {}
impl<B: BufferMut + ?Sized> Sealed for &mut B {}

/// A buffer a send reads: `[T]`, `[T; N]`, `Vec<T>` of an [`Equivalence`] type, or a
/// [`Typed`] view. Sealed: implemented by this crate only.
pub trait Buffer: Sealed {
    #[doc(hidden)]
    fn lent(&self) -> Result<Lent>;
}

/// A buffer a receive writes: `[T]`, `[T; N]`, `Vec<T>`, or a [`TypedMut`] view. Sealed.
pub trait BufferMut: Sealed {
    #[doc(hidden)]
    fn lent_mut(&mut self) -> Result<Lent>;
}

/// The datatype of a type with padding, checked to describe one value: its data within
/// `0..size_of::<T>()` and its extent `size_of::<T>()` (what the `Plain` contract promises
/// for the derive's types; a hand-written implementation that breaks it is refused here
/// rather than let a slice's layout reach past its elements).
pub(crate) fn own_datatype<T: Equivalence>() -> Result<Datatype> {
    let t = T::datatype();
    let size = std::mem::size_of::<T>() as isize;
    let (tlb, text) = t.get_true_extent();
    if t.size() > 0 && (tlb < 0 || tlb + text > size) || t.extent() != size || t.lb() != 0 {
        return Err(Error::new(
            ErrorClass::Type,
            format!(
                "the datatype of {} (true extent {tlb}+{text}, lb {}, extent {}) does not describe one value of {size} bytes",
                std::any::type_name::<T>(),
                t.lb(),
                t.extent()
            ),
        ));
    }
    Ok(t)
}

/// A slice of a type with padding moves through its own datatype.
#[cold]
fn lend_padded<T: Equivalence>(s: &[T]) -> Result<Lent> {
    let t = own_datatype::<T>()?;
    let l = t.layout(s.len(), 0, std::mem::size_of_val(s))?;
    Lent::of_layout(s, l)
        .map(|l| l.with_sig(T::SIG).with_elem(std::mem::size_of::<T>()))
        .map_err(|e| Error::new(ErrorClass::Type, e))
}

#[cold]
fn lend_padded_mut<T: Equivalence>(s: &mut [T]) -> Result<Lent> {
    let t = own_datatype::<T>()?;
    let l = t.layout(s.len(), 0, std::mem::size_of_val(s))?;
    Lent::of_layout_mut(s, l)
        .map(|l| l.with_sig(T::SIG).with_elem(std::mem::size_of::<T>()))
        .map_err(|e| Error::new(ErrorClass::Type, e))
}

impl<T: Equivalence> Buffer for [T] {
    #[inline(always)]
    fn lent(&self) -> Result<Lent> {
        match as_bytes(self) {
            Some(b) => Ok(Lent::of(b)
                .with_sig(T::SIG)
                .with_elem(std::mem::size_of::<T>())),
            None => lend_padded(self),
        }
    }
}

impl<T: Equivalence> BufferMut for [T] {
    #[inline(always)]
    fn lent_mut(&mut self) -> Result<Lent> {
        if T::GAPLESS {
            let b = as_bytes_mut(self).expect("gapless");
            return Ok(Lent::of_mut(b)
                .with_sig(T::SIG)
                .with_elem(std::mem::size_of::<T>()));
        }
        lend_padded_mut(self)
    }
}

impl<T: Equivalence, const N: usize> Buffer for [T; N] {
    #[inline(always)]
    fn lent(&self) -> Result<Lent> {
        self[..].lent()
    }
}

impl<T: Equivalence, const N: usize> BufferMut for [T; N] {
    #[inline(always)]
    fn lent_mut(&mut self) -> Result<Lent> {
        self[..].lent_mut()
    }
}

impl<T: Equivalence> Buffer for Vec<T> {
    #[inline(always)]
    fn lent(&self) -> Result<Lent> {
        self[..].lent()
    }
}

impl<T: Equivalence> BufferMut for Vec<T> {
    #[inline(always)]
    fn lent_mut(&mut self) -> Result<Lent> {
        self[..].lent_mut()
    }
}

/// Check the arguments of a view and place it: a run of bytes when `count` elements of `dt`
/// are contiguous (they move as plain bytes), else the datatype's layout.
fn view<T: Equivalence>(
    what: &str,
    len: usize,
    origin: usize,
    count: usize,
    dt: &Datatype,
) -> Result<Part> {
    dt.check_committed(what)?;
    // A type with padding may only be seen through its own datatype, which skips the
    // padding; any other could reach it.
    if !T::GAPLESS && !dt.same_map(&T::datatype()) {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!(
                "{what}: {} has padding; only its own datatype may view it (or send the slice itself)",
                std::any::type_name::<T>()
            ),
        ));
    }
    if origin > len {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!("{what}: origin {origin} is past the end of a slice of {len}"),
        ));
    }
    let size = std::mem::size_of::<T>();
    let l = dt
        .layout(count, origin * size, len * size)
        .map_err(|e| Error::new(e.class(), format!("{what}: {}", e.detail())))?;
    Ok(if T::GAPLESS && dt.is_contiguous_run(count) {
        // A contiguous run starts at displacement 0 (or is empty).
        let start = origin * size;
        Part::Run(start..start + l.packed_len())
    } else {
        Part::Laid(l)
    })
}

/// A slice seen through a derived datatype, for sending: `count` elements of `dt`, the
/// datatype's displacement 0 at element `origin` of the slice (MPI's buffer address). Every
/// byte the datatype reaches must lie within the slice, which is checked here
/// (`MPI_ERR_BUFFER` otherwise); negative displacements are fine as long as they stay inside.
#[derive(Debug)]
pub struct Typed<'b> {
    lent: Lent,
    _buf: PhantomData<&'b [u8]>,
}

impl<'b> Typed<'b> {
    /// `count` elements of `dt` from the start of `buf`.
    pub fn new<T: Equivalence>(buf: &'b [T], count: usize, dt: &Datatype) -> Result<Typed<'b>> {
        Typed::at(buf, 0, count, dt)
    }

    /// `count` elements of `dt` whose displacement 0 is `buf[origin]`.
    pub fn at<T: Equivalence>(
        buf: &'b [T],
        origin: usize,
        count: usize,
        dt: &Datatype,
    ) -> Result<Typed<'b>> {
        let lent = match view::<T>("typed view", buf.len(), origin, count, dt)? {
            Part::Run(r) => Lent::of(&as_bytes(buf).expect("gapless")[r]),
            Part::Laid(l) => {
                Lent::of_layout(buf, l).map_err(|e| Error::new(ErrorClass::Buffer, e))?
            }
        };
        Ok(Typed {
            lent: lent
                .with_sig(dt.sig_code())
                .with_elem(dt.extent().max(1) as usize),
            _buf: PhantomData,
        })
    }

    /// Bytes the view sends.
    pub fn packed_len(&self) -> usize {
        self.lent.packed_len()
    }

    pub(crate) fn lent_ref(&self) -> &Lent {
        &self.lent
    }
}

impl Buffer for Typed<'_> {
    fn lent(&self) -> Result<Lent> {
        Ok(self.lent.clone())
    }
}

/// A slice seen through a derived datatype, for receiving (see [`Typed`]).
#[derive(Debug)]
pub struct TypedMut<'b> {
    lent: Lent,
    _buf: PhantomData<&'b mut [u8]>,
}

impl<'b> TypedMut<'b> {
    /// `count` elements of `dt` from the start of `buf`.
    pub fn new<T: Equivalence>(
        buf: &'b mut [T],
        count: usize,
        dt: &Datatype,
    ) -> Result<TypedMut<'b>> {
        TypedMut::at(buf, 0, count, dt)
    }

    /// `count` elements of `dt` whose displacement 0 is `buf[origin]`.
    pub fn at<T: Equivalence>(
        buf: &'b mut [T],
        origin: usize,
        count: usize,
        dt: &Datatype,
    ) -> Result<TypedMut<'b>> {
        let lent = match view::<T>("typed view", buf.len(), origin, count, dt)? {
            Part::Run(r) => Lent::of_mut(&mut as_bytes_mut(buf).expect("gapless")[r]),
            Part::Laid(l) => {
                Lent::of_layout_mut(buf, l).map_err(|e| Error::new(ErrorClass::Buffer, e))?
            }
        };
        Ok(TypedMut {
            lent: lent
                .with_sig(dt.sig_code())
                .with_elem(dt.extent().max(1) as usize),
            _buf: PhantomData,
        })
    }

    /// Bytes the view receives at most.
    pub fn packed_len(&self) -> usize {
        self.lent.packed_len()
    }

    pub(crate) fn lent_ref(&mut self) -> &Lent {
        &self.lent
    }
}

impl Buffer for TypedMut<'_> {
    fn lent(&self) -> Result<Lent> {
        Ok(self.lent.clone())
    }
}

impl BufferMut for TypedMut<'_> {
    fn lent_mut(&mut self) -> Result<Lent> {
        Ok(self.lent.clone())
    }
}

/// One view of [`split_views`]: `(origin, count, datatype)`, as [`Typed::at`] takes them.
pub type ViewOf<'d> = (usize, usize, &'d Datatype);

/// Views of disjoint parts of one slice, to send from some while receiving into others at the
/// same time: a halo exchange sends a grid's boundary cells while it receives into the halo
/// around them, and with vector types for the columns the two interleave in memory, which
/// [`Typed`] and [`TypedMut`] of the whole slice cannot do (each borrows all of it).
///
/// `sends[i]` and `recvs[j]` are `(origin, count, datatype)` as [`Typed::at`] takes them; the
/// result is one [`Typed`] per send and one [`TypedMut`] per receive, in order, borrowing
/// `buf` for as long as any of them lives. Send views may overlap each other (they are only
/// read); a byte a receive view writes must belong to no other view.
///
/// Errors: what [`Typed::at`] reports for each view (uncommitted datatype `MPI_ERR_TYPE`,
/// a view that leaves the slice `MPI_ERR_BUFFER`), and `MPI_ERR_BUFFER` naming the two views
/// and the first element they share when a receive view overlaps another view (MPI calls such
/// buffers aliased).
///
/// A receive view of a split slice is never handed out whole: [`Request::buffer_mut`] of a
/// persistent request built on a non-contiguous one is `MPI_ERR_BUFFER`.
///
/// [`Request::buffer_mut`]: crate::Request::buffer_mut
pub fn split_views<'b, T: Equivalence>(
    buf: &'b mut [T],
    sends: &[ViewOf<'_>],
    recvs: &[ViewOf<'_>],
) -> Result<(Vec<Typed<'b>>, Vec<TypedMut<'b>>)> {
    let what = |i: usize| {
        if i < sends.len() {
            format!("send view {i}")
        } else {
            format!("receive view {}", i - sends.len())
        }
    };
    let mut parts = Vec::with_capacity(sends.len() + recvs.len());
    for (i, &(origin, count, dt)) in sends.iter().chain(recvs).enumerate() {
        let p = view::<T>(
            &format!("split_views: {}", what(i)),
            buf.len(),
            origin,
            count,
            dt,
        )?;
        parts.push((p, i >= sends.len()));
    }
    let sigs: Vec<Sig> = sends.iter().chain(recvs).map(|v| v.2.sig_code()).collect();
    let size = std::mem::size_of::<T>();
    let mut lents = Lent::split(buf, parts)
        .map_err(|o| {
            Error::new(
                ErrorClass::Buffer,
                format!(
                    "split_views: {} and {} both reach element {} of the slice; a receive view may share no element with another view",
                    what(o.a.min(o.b)),
                    what(o.a.max(o.b)),
                    o.byte / size
                ),
            )
        })?
        .into_iter()
        .zip(sigs)
        .map(|(l, sig)| l.with_sig(sig));
    let typed = lents
        .by_ref()
        .take(sends.len())
        .map(|lent| Typed {
            lent,
            _buf: PhantomData,
        })
        .collect();
    let typed_mut = lents
        .map(|lent| TypedMut {
            lent,
            _buf: PhantomData,
        })
        .collect();
    Ok((typed, typed_mut))
}
