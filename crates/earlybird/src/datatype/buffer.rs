//! What a communication call may be given as its buffer: a slice (or array, or vector) of an
//! [`Equivalence`] type, or a view of a slice through a derived datatype.
#![forbid(unsafe_code)]

use super::{Datatype, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::lend::Lent;
use crate::sys::plain::{as_bytes, as_bytes_mut};
use std::marker::PhantomData;

/// A buffer a send reads: `[T]`, `[T; N]`, `Vec<T>` of an [`Equivalence`] type, or a
/// [`Typed`] view.
pub trait Buffer {
    #[doc(hidden)]
    fn lent(&self) -> Result<Lent>;
}

/// A buffer a receive writes: `[T]`, `[T; N]`, `Vec<T>`, or a [`TypedMut`] view.
pub trait BufferMut {
    #[doc(hidden)]
    fn lent_mut(&mut self) -> Result<Lent>;
}

/// A slice of a type with padding moves through its own datatype.
#[cold]
fn lend_padded<T: Equivalence>(s: &[T]) -> Result<Lent> {
    let t = T::datatype();
    let l = t.layout(s.len(), 0, std::mem::size_of_val(s))?;
    Lent::of_layout(s, l)
        .map(|l| l.with_sig(T::SIG))
        .map_err(|e| Error::new(ErrorClass::Type, e))
}

#[cold]
fn lend_padded_mut<T: Equivalence>(s: &mut [T]) -> Result<Lent> {
    let t = T::datatype();
    let l = t.layout(s.len(), 0, std::mem::size_of_val(s))?;
    Lent::of_layout_mut(s, l)
        .map(|l| l.with_sig(T::SIG))
        .map_err(|e| Error::new(ErrorClass::Type, e))
}

impl<T: Equivalence> Buffer for [T] {
    #[inline(always)]
    fn lent(&self) -> Result<Lent> {
        match as_bytes(self) {
            Some(b) => Ok(Lent::of(b).with_sig(T::SIG)),
            None => lend_padded(self),
        }
    }
}

impl<T: Equivalence> BufferMut for [T] {
    #[inline(always)]
    fn lent_mut(&mut self) -> Result<Lent> {
        if T::GAPLESS {
            let b = as_bytes_mut(self).expect("gapless");
            return Ok(Lent::of_mut(b).with_sig(T::SIG));
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

/// Check the arguments of a view and lay it out.
fn view<T: Equivalence>(
    what: &str,
    len: usize,
    origin: usize,
    count: usize,
    dt: &Datatype,
) -> Result<crate::sys::layout::Layout> {
    dt.check_committed(what)?;
    // A type with padding may only be seen through its own datatype, which skips the
    // padding; any other could reach it.
    if !T::GAPLESS && *dt != T::datatype() {
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
    dt.layout(count, origin * size, len * size)
}

/// A slice seen through a derived datatype, for sending: `count` elements of `dt`, the
/// datatype's displacement 0 at element `origin` of the slice (MPI's buffer address). Every
/// byte the datatype reaches must lie within the slice, which is checked here
/// (`MPI_ERR_BUFFER` otherwise); negative displacements are fine as long as they stay inside.
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
        let l = view::<T>("typed view", buf.len(), origin, count, dt)?;
        let lent = if T::GAPLESS && dt.is_contiguous_run(count) {
            let b = as_bytes(buf).expect("gapless");
            // A contiguous run starts at displacement 0 (or is empty).
            let start = origin * std::mem::size_of::<T>();
            Lent::of(&b[start..start + l.packed_len()])
        } else {
            Lent::of_layout(buf, l).map_err(|e| Error::new(ErrorClass::Buffer, e))?
        };
        Ok(Typed {
            lent: lent.with_sig(dt.sig_code()),
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
        let l = view::<T>("typed view", buf.len(), origin, count, dt)?;
        let lent = if T::GAPLESS && dt.is_contiguous_run(count) {
            let b = as_bytes_mut(buf).expect("gapless");
            // A contiguous run starts at displacement 0 (or is empty).
            let start = origin * std::mem::size_of::<T>();
            Lent::of_mut(&mut b[start..start + l.packed_len()])
        } else {
            Lent::of_layout_mut(buf, l).map_err(|e| Error::new(ErrorClass::Buffer, e))?
        };
        Ok(TypedMut {
            lent: lent.with_sig(dt.sig_code()),
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
