//! What a communication call may be given as its buffer: a slice (or array, or vector) of an
//! [`Equivalence`] type, or a view of a slice through a derived datatype.
#![forbid(unsafe_code)]

use super::{Datatype, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::lend::{Lending, Loan, Settle, View};
use crate::sys::overlap::Part;
use crate::sys::plain::{as_bytes, as_bytes_mut};

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
    fn view(&self) -> Result<BufView<'_>>;
}

/// A buffer a receive writes: `[T]`, `[T; N]`, `Vec<T>`, or a [`TypedMut`] view. Sealed.
pub trait BufferMut: Sealed {
    #[doc(hidden)]
    fn view_mut(&mut self) -> Result<BufView<'_>>;
}

/// Lend `buf` for the region `l` (a scope, or one blocking call).
#[inline(always)]
pub(crate) fn lend<'l, B: Buffer + ?Sized, S: Settle>(
    buf: &'l B,
    l: &Lending<'l, '_, S>,
) -> Result<Loan> {
    Ok(Loan::new(buf.view()?.0, l))
}

/// Lend `buf` for writing for the region `l`.
#[inline(always)]
pub(crate) fn lend_mut<'l, B: BufferMut + ?Sized, S: Settle>(
    buf: &'l mut B,
    l: &Lending<'l, '_, S>,
) -> Result<Loan> {
    Ok(Loan::new(buf.view_mut()?.0, l))
}

/// What a buffer argument hands the library: a view of its bytes under the borrow the call
/// took (see the sealed [`Buffer`] and [`BufferMut`]). Opaque.
#[doc(hidden)]
#[derive(Debug)]
pub struct BufView<'b>(pub(crate) View<'b>);

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
fn view_padded<T: Equivalence>(s: &[T]) -> Result<View<'_>> {
    let t = own_datatype::<T>()?;
    let l = t.layout(s.len(), 0, std::mem::size_of_val(s))?;
    View::read_laid(s, l)
        .map(|v| v.with_sig(T::SIG).with_elem(std::mem::size_of::<T>()))
        .map_err(|e| Error::new(ErrorClass::Type, e))
}

#[cold]
fn view_padded_mut<T: Equivalence>(s: &mut [T]) -> Result<View<'_>> {
    let t = own_datatype::<T>()?;
    let l = t.layout(s.len(), 0, std::mem::size_of_val(s))?;
    View::write_laid(s, l)
        .map(|v| v.with_sig(T::SIG).with_elem(std::mem::size_of::<T>()))
        .map_err(|e| Error::new(ErrorClass::Type, e))
}

/// The view of a slice: its bytes when the type has no padding, else through its datatype.
#[inline(always)]
pub(crate) fn view_of<T: Equivalence>(s: &[T]) -> Result<View<'_>> {
    if T::GAPLESS {
        return Ok(View::read(s)
            .with_sig(T::SIG)
            .with_elem(std::mem::size_of::<T>()));
    }
    view_padded(s)
}

/// The writable view of a slice (see [`view_of`]).
#[inline(always)]
pub(crate) fn view_of_mut<T: Equivalence>(s: &mut [T]) -> Result<View<'_>> {
    if T::GAPLESS {
        return Ok(View::write(s)
            .with_sig(T::SIG)
            .with_elem(std::mem::size_of::<T>()));
    }
    view_padded_mut(s)
}

impl<T: Equivalence> Buffer for [T] {
    #[inline(always)]
    fn view(&self) -> Result<BufView<'_>> {
        view_of(self).map(BufView)
    }
}

impl<T: Equivalence> BufferMut for [T] {
    #[inline(always)]
    fn view_mut(&mut self) -> Result<BufView<'_>> {
        view_of_mut(self).map(BufView)
    }
}

impl<T: Equivalence, const N: usize> Buffer for [T; N] {
    #[inline(always)]
    fn view(&self) -> Result<BufView<'_>> {
        self[..].view()
    }
}

impl<T: Equivalence, const N: usize> BufferMut for [T; N] {
    #[inline(always)]
    fn view_mut(&mut self) -> Result<BufView<'_>> {
        self[..].view_mut()
    }
}

impl<T: Equivalence> Buffer for Vec<T> {
    #[inline(always)]
    fn view(&self) -> Result<BufView<'_>> {
        self[..].view()
    }
}

impl<T: Equivalence> BufferMut for Vec<T> {
    #[inline(always)]
    fn view_mut(&mut self) -> Result<BufView<'_>> {
        self[..].view_mut()
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
    view: View<'b>,
    dt: Datatype,
    count: usize,
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
        let v = match view::<T>("typed view", buf.len(), origin, count, dt)? {
            Part::Run(r) => View::read(&as_bytes(buf).expect("gapless")[r]),
            Part::Laid(l) => {
                View::read_laid(buf, l).map_err(|e| Error::new(ErrorClass::Buffer, e))?
            }
        };
        Ok(Typed {
            view: v
                .with_sig(dt.sig_code())
                .with_elem(dt.extent().max(1) as usize),
            dt: dt.clone(),
            count,
        })
    }

    /// Bytes the view sends.
    pub fn packed_len(&self) -> usize {
        self.view.packed_len()
    }

    /// The view, its datatype and its count (what a collective takes apart).
    pub(crate) fn into_parts(self) -> (View<'b>, Datatype, usize) {
        (self.view, self.dt, self.count)
    }
}

impl Buffer for Typed<'_> {
    fn view(&self) -> Result<BufView<'_>> {
        Ok(BufView(self.view.reborrow()))
    }
}

/// A slice seen through a derived datatype, for receiving (see [`Typed`]).
#[derive(Debug)]
pub struct TypedMut<'b> {
    view: View<'b>,
    dt: Datatype,
    count: usize,
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
        let v = match view::<T>("typed view", buf.len(), origin, count, dt)? {
            Part::Run(r) => View::write(&mut as_bytes_mut(buf).expect("gapless")[r]),
            Part::Laid(l) => {
                View::write_laid(buf, l).map_err(|e| Error::new(ErrorClass::Buffer, e))?
            }
        };
        Ok(TypedMut {
            view: v
                .with_sig(dt.sig_code())
                .with_elem(dt.extent().max(1) as usize),
            dt: dt.clone(),
            count,
        })
    }

    /// Bytes the view receives at most.
    pub fn packed_len(&self) -> usize {
        self.view.packed_len()
    }

    /// The view, its datatype and its count (what a collective takes apart).
    pub(crate) fn into_parts(self) -> (View<'b>, Datatype, usize) {
        (self.view, self.dt, self.count)
    }
}

impl Buffer for TypedMut<'_> {
    fn view(&self) -> Result<BufView<'_>> {
        Ok(BufView(self.view.reborrow().read_only()))
    }
}

impl BufferMut for TypedMut<'_> {
    fn view_mut(&mut self) -> Result<BufView<'_>> {
        Ok(BufView(self.view.reborrow()))
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
    let types: Vec<(Datatype, usize)> = sends
        .iter()
        .chain(recvs)
        .map(|v| (v.2.clone(), v.1))
        .collect();
    let size = std::mem::size_of::<T>();
    let mut views = View::split(buf, parts)
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
        .zip(types)
        .map(|(v, (dt, count))| (v.with_sig(dt.sig_code()), dt, count));
    let typed = views
        .by_ref()
        .take(sends.len())
        .map(|(view, dt, count)| Typed { view, dt, count })
        .collect();
    let typed_mut = views
        .map(|(view, dt, count)| TypedMut { view, dt, count })
        .collect();
    Ok((typed, typed_mut))
}
