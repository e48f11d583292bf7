//! What a collective takes as a buffer: a slice (array, vector) of an [`Equivalence`] type, or
//! a view of a slice through a derived datatype ([`Typed`], [`TypedMut`]), as MPI describes
//! every collective buffer as (address, count, datatype).
//!
//! # Elements or bytes
//!
//! When a call's buffers are slices of one type (the common case), its counts and blocks are
//! in elements of that type, as they always were. When either is a typed view, or the two
//! slices' types differ in size or layout, the call counts in bytes of the packed message
//! instead: a typed buffer is then the message its layout makes of the slice, and a block of
//! `n` bytes from byte `k` is that part of the message ([`Layout::bytes`]). The send and
//! receive buffers may then have different datatypes with the same type signature (a gather
//! that sends 2 ints and receives one `contiguous(2, int)`), as MPI allows; the lengths
//! rules of each call (a gather's count from its send buffer, ...) apply to the bytes, and
//! the counts and displacements of the v forms, given in elements of each buffer's datatype,
//! are scaled to bytes by its size. Length errors of such a call count bytes. A reduction
//! of typed buffers runs on copies in elements of the one predefined type the datatype is
//! made of, as the kernel sees them (padding kept for the pair types; see `algo::run`).
//! Algorithms cut a message counted in bytes at multiples of [`GRAIN`](super::GRAIN) only.
//!
//! # Checks
//!
//! A typed view was checked to lie in its slice when it was made. Here: the two buffers'
//! signatures must agree where both are of one basic type (`MPI_ERR_TYPE` naming both); a
//! block must be a whole number of each side's elements (`MPI_ERR_TYPE`); the two buffers
//! of a reduction must reduce the same element type (`MPI_ERR_TYPE`); and whatever the
//! call's own rules say about counts.
#![forbid(unsafe_code)]

use super::api::InPlace;
use super::op::{Op, Reducer};
use super::Elem;
use crate::datatype::buffer::own_datatype;
use crate::datatype::{Datatype, Equivalence, Sig, Typed, TypedMut};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::layout::Layout;
use crate::sys::lend::View;
use std::rc::Rc;

/// A collective's send argument: `&[T]`, `&[T; N]`, `&Vec<T>` of an [`Equivalence`] type, a
/// [`Typed`] view, or [`IN_PLACE`](super::IN_PLACE) where the call allows it. A persistent
/// collective given `&mut [T]` (or `&mut Vec<T>`, `&mut [T; N]`) lets the program change
/// the data between starts through
/// [`Request::send_buffer_mut`](crate::Request::send_buffer_mut).
#[derive(Debug)]
pub struct Src<'b>(pub(crate) Option<Side<'b>>);

/// A collective's receive argument: `&mut [T]`, `&mut [T; N]`, `&mut Vec<T>`, or a
/// [`TypedMut`] view.
#[derive(Debug)]
pub struct Dst<'b>(pub(crate) Side<'b>);

/// A scatter's receive argument: a [`Dst`], or [`IN_PLACE`](super::IN_PLACE) at the root.
#[derive(Debug)]
pub struct DstOrInPlace<'b>(pub(crate) Option<Side<'b>>);

/// One buffer argument: its memory, and how the call counts it (see [`Side::place`]).
#[derive(Debug)]
pub(crate) struct Side<'b> {
    /// The slice's bytes (a typed view's whole slice, its layout in `of`).
    pub(crate) view: View<'b>,
    /// Elements held: the slice's length or the view's count, in bytes once placed so.
    len: usize,
    of: Of,
    /// The elements as the call counts them (a slice's own until placed otherwise).
    pub(crate) elem: Elem,
    /// Bytes per element of the program's counts (1 when the call counts in elements): what
    /// the v forms' counts and displacements are scaled by.
    scale: usize,
    /// Whether [`place`](Side::place) has counted it in bytes (placing is done once).
    in_bytes: bool,
}

#[derive(Debug)]
enum Of {
    Slice(&'static SliceType),
    Typed {
        dt: Datatype,
        /// `None`: the view's elements are one run of bytes (the view is that run).
        layout: Option<Rc<Layout>>,
    },
}

/// What a call needs to know about a slice's element type, one constant per type.
#[derive(Debug)]
struct SliceType {
    size: usize,
    sig: Sig,
    gapless: bool,
    /// The type's own datatype (for a type with padding).
    own: fn() -> Result<Datatype>,
    reducer: fn(&Op) -> Result<Reducer>,
}

trait SliceOf {
    const TYPE: SliceType;
}

impl<T: Equivalence> SliceOf for T {
    const TYPE: SliceType = SliceType {
        size: std::mem::size_of::<T>(),
        sig: T::SIG,
        gapless: T::GAPLESS,
        own: own_datatype::<T>,
        reducer: Reducer::new::<T>,
    };
}

impl<'b> Side<'b> {
    #[inline(always)]
    fn slice<T: Equivalence>(view: View<'b>, len: usize) -> Side<'b> {
        Side {
            view,
            len,
            of: Of::Slice(&<T as SliceOf>::TYPE),
            elem: Elem::plain(std::mem::size_of::<T>(), T::SIG),
            scale: 1,
            in_bytes: false,
        }
    }

    fn typed((view, dt, count): (View<'b>, Datatype, usize)) -> Side<'b> {
        let (view, layout) = view.into_run();
        Side {
            view,
            len: count,
            elem: Elem::plain(1, dt.sig_code()),
            scale: 1,
            in_bytes: false,
            of: Of::Typed { dt, layout },
        }
    }

    #[inline(always)]
    fn sig(&self) -> Sig {
        match &self.of {
            Of::Slice(t) => t.sig,
            Of::Typed { dt, .. } => dt.sig_code(),
        }
    }

    /// Whether the two are slices of types alike: same size, signature and layout.
    #[inline(always)]
    pub(crate) fn alike(&self, other: &Side) -> bool {
        match (&self.of, &other.of) {
            (Of::Slice(a), Of::Slice(b)) => {
                std::ptr::eq(*a, *b)
                    || (a.size == b.size
                        && a.sig == b.sig
                        && a.gapless == b.gapless
                        && (a.gapless
                            || matches!(((a.own)(), (b.own)()), (Ok(x), Ok(y)) if x.same_map(&y))))
            }
            _ => false,
        }
    }

    /// Count this buffer as the call does (see the module doc), in place.
    #[inline(always)]
    pub(crate) fn place(&mut self, units: Units) -> Result<()> {
        if self.in_bytes {
            debug_assert!(units == Units::Bytes, "a buffer placed twice, differently");
            return Ok(());
        }
        self.in_bytes = units == Units::Bytes;
        match (&self.of, units) {
            // The common case, as made: a slice of a type without padding, in elements.
            (Of::Slice(t), Units::Elements) if t.gapless => Ok(()),
            (Of::Slice(t), Units::Bytes) if t.gapless => {
                self.elem = Elem::plain(1, t.sig);
                self.len *= t.size;
                self.scale = t.size;
                Ok(())
            }
            _ => self.place_laid(units),
        }
    }

    /// [`place`](Self::place) of a slice of a type with padding, or of a typed view.
    #[cold]
    fn place_laid(&mut self, units: Units) -> Result<()> {
        match &self.of {
            Of::Slice(t) => {
                let dt = (t.own)()?;
                match units {
                    Units::Elements => self.elem = Elem::padded(t.size, dt, t.sig),
                    Units::Bytes => {
                        let l = dt.layout(self.len, 0, self.view.len())?;
                        self.len = l.packed_len();
                        self.scale = dt.size();
                        self.elem = Elem::bytes_of(Rc::new(l), t.sig);
                    }
                }
            }
            Of::Typed { dt, layout } => {
                let sig = dt.sig_code();
                self.scale = dt.size();
                match layout {
                    None => self.len = self.view.len(),
                    Some(l) => {
                        self.len = l.packed_len();
                        self.elem = Elem::bytes_of(l.clone(), sig);
                    }
                }
            }
        }
        Ok(())
    }

    /// Elements held (bytes, when the call counts in bytes).
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Keep the first `n` elements only (checked by the caller to be at most `len`).
    #[inline(always)]
    pub(crate) fn prefix(&mut self, n: usize) {
        assert!(n <= self.len, "prefix: {n} of {} elements", self.len);
        if n == self.len {
            return;
        }
        match self.elem.first_bytes(n) {
            Some(e) => self.elem = e,
            None => self.view.truncate(n * self.elem.size),
        }
        self.len = n;
    }

    /// Counts or displacements given in the program's elements, as the call counts them.
    pub(crate) fn scaled(&self, v: &[usize]) -> Result<Rc<[usize]>> {
        v.iter()
            .map(|&x| {
                x.checked_mul(self.scale).ok_or_else(|| {
                    Error::new(ErrorClass::Count, format!("{x} elements overflow in bytes"))
                })
            })
            .collect()
    }

    /// MPI_ERR_TYPE unless a block of `n` (bytes, when the call counts in bytes) is a whole
    /// number of this buffer's elements: a gather that sends 2 ints to a root receiving
    /// triples would otherwise cut elements.
    pub(crate) fn check_whole(&self, what: &str, which: &str, n: usize) -> Result<()> {
        if n.is_multiple_of(self.scale.max(1)) {
            return Ok(());
        }
        Err(Error::new(
            ErrorClass::Type,
            format!(
                "{what}: a block of {n} bytes is not a whole number of the {which} buffer's elements of {} bytes (type signatures differ)",
                self.scale
            ),
        ))
    }

    /// The reduction of this buffer's data by `op`.
    #[inline(always)]
    pub(crate) fn reducer(&self, op: &Op) -> Result<Reducer> {
        match &self.of {
            Of::Slice(t) => (t.reducer)(op),
            Of::Typed { dt, .. } => Reducer::for_datatype(dt, op),
        }
    }

    /// For an alltoallw: for a slice of a type with padding its own datatype (blocks of
    /// such a slice may only use that one). Typed views are refused: the datatypes of a w
    /// form are in its specs.
    pub(crate) fn w_slice(&self, what: &str) -> Result<Option<Datatype>> {
        match &self.of {
            Of::Typed { .. } => Err(Error::new(
                ErrorClass::Buffer,
                format!("{what}: give the w forms slices; their datatypes are in the block specs"),
            )),
            Of::Slice(t) if t.gapless => Ok(None),
            Of::Slice(t) => (t.own)().map(Some),
        }
    }
}

/// How a call counts its buffers (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Units {
    Elements,
    Bytes,
}

/// How call `what` counts its buffers `a` and `b` (either may be absent: in place, or not
/// significant here): in elements if both are slices of types alike, else in bytes.
/// MPI_ERR_TYPE when both are of one basic type and the two differ.
#[inline(always)]
pub(crate) fn units(what: &str, a: Option<&Side>, b: Option<&Side>) -> Result<Units> {
    if let (Some(x), Some(y)) = (a, b) {
        let (sx, sy) = (x.sig(), y.sig());
        if !sx.is_mixed() && !sy.is_mixed() && sx != sy {
            return Err(Error::new(
                ErrorClass::Type,
                format!(
                    "{what}: the send buffer holds {sx} and the receive buffer {sy} (type signatures differ)"
                ),
            ));
        }
        if !x.alike(y) {
            return Ok(Units::Bytes);
        }
    }
    let typed = [a, b]
        .into_iter()
        .flatten()
        .any(|s| matches!(s.of, Of::Typed { .. }));
    Ok(if typed { Units::Bytes } else { Units::Elements })
}

/// Place both buffers of call `what` (see [`units`]), in place; the units chosen.
#[inline(always)]
pub(crate) fn place(
    what: &str,
    send: Option<&mut Side<'_>>,
    recv: Option<&mut Side<'_>>,
) -> Result<Units> {
    let u = units(what, send.as_deref(), recv.as_deref())?;
    if let Some(s) = send {
        s.place(u)?;
    }
    if let Some(r) = recv {
        r.place(u)?;
    }
    Ok(u)
}

macro_rules! from_slices {
    ($ty:ident, $wrap:expr, $($mutability:tt)*) => {
        impl<'b, T: Equivalence> From<&'b $($mutability)* [T]> for $ty<'b> {
            fn from(s: &'b $($mutability)* [T]) -> Self {
                let len = s.len();
                $wrap(Side::slice::<T>(from_slices!(@view s, $($mutability)*), len))
            }
        }
        impl<'b, T: Equivalence, const N: usize> From<&'b $($mutability)* [T; N]> for $ty<'b> {
            fn from(s: &'b $($mutability)* [T; N]) -> Self {
                (&$($mutability)* s[..]).into()
            }
        }
        impl<'b, T: Equivalence> From<&'b $($mutability)* Vec<T>> for $ty<'b> {
            fn from(s: &'b $($mutability)* Vec<T>) -> Self {
                (&$($mutability)* s[..]).into()
            }
        }
    };
    (@view $s:ident, mut) => { View::write($s) };
    (@view $s:ident, ) => { View::read($s) };
}

from_slices!(Src, |s| Src(Some(s)),);
from_slices!(Src, |s| Src(Some(s)), mut);
from_slices!(Dst, Dst, mut);
from_slices!(DstOrInPlace, |s| DstOrInPlace(Some(s)), mut);

impl<'b> From<Typed<'b>> for Src<'b> {
    fn from(t: Typed<'b>) -> Self {
        Src(Some(Side::typed(t.into_parts())))
    }
}
impl<'b> From<TypedMut<'b>> for Dst<'b> {
    fn from(t: TypedMut<'b>) -> Self {
        Dst(Side::typed(t.into_parts()))
    }
}
impl<'b> From<TypedMut<'b>> for DstOrInPlace<'b> {
    fn from(t: TypedMut<'b>) -> Self {
        DstOrInPlace(Some(Side::typed(t.into_parts())))
    }
}
impl From<InPlace> for Src<'_> {
    fn from(_: InPlace) -> Self {
        Src(None)
    }
}
impl From<InPlace> for DstOrInPlace<'_> {
    fn from(_: InPlace) -> Self {
        DstOrInPlace(None)
    }
}
