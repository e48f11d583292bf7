//! Which Rust types may be moved as bytes, and the byte views of their slices.
//!
//! [`Plain`] is the one promise the library needs from a buffer's element type: the bytes
//! its datatype ([`Equivalence::datatype`](crate::Equivalence::datatype)) describes are
//! initialised, and any bytes written there leave a valid value. Primitives are plain; a
//! `#[repr(C)]` struct gets the promise from `earlybird-derive`, which builds the datatype
//! from the fields themselves, so padding is never read.

/// A type whose datatype's bytes may be read and written as raw bytes.
///
/// # Safety
/// Implementing it promises that (1) the type's datatype (`<T as Equivalence>::datatype()`)
/// describes one value: its data lies within `0..size_of::<T>()`, its lower bound is 0 and its
/// extent `size_of::<T>()` (the library also checks this before it relies on it); (2) every
/// byte that datatype covers is initialised in every value of `T`; (3) writing any bytes into
/// those positions of a valid `T` leaves a valid `T`;
/// (4) if [`GAPLESS`](Plain::GAPLESS) is true, that holds for all `size_of::<T>()` bytes (the
/// type has no padding and no invalid bit patterns, as `bytemuck::Pod`).
pub unsafe trait Plain: Copy + 'static {
    /// The type has no padding: its slices are moved as their bytes.
    const GAPLESS: bool;
}

macro_rules! plain {
    ($($t:ty),*) => {
        // SAFETY: primitive integers and floats have no padding and every bit pattern is a
        // valid value.
        $(unsafe impl Plain for $t { const GAPLESS: bool = true; })*
    };
}

plain!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, isize, usize);

// SAFETY: an array of a plain type is its elements back to back, with no padding between
// them; gapless exactly when the element is.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {
    const GAPLESS: bool = T::GAPLESS;
}

/// The bytes of a slice of a gapless type; `None` for a type with padding.
#[inline(always)]
pub(crate) fn as_bytes<T: Plain>(s: &[T]) -> Option<&[u8]> {
    if !T::GAPLESS {
        return None;
    }
    // SAFETY: a gapless plain type has every byte initialised (contract of `Plain`); the view
    // covers exactly the slice and borrows it.
    Some(unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) })
}

/// The bytes of a slice of a gapless type, writable; `None` for a type with padding.
#[inline(always)]
pub(crate) fn as_bytes_mut<T: Plain>(s: &mut [T]) -> Option<&mut [u8]> {
    if !T::GAPLESS {
        return None;
    }
    let len = std::mem::size_of_val(s);
    // SAFETY: as in `as_bytes`, and any bytes written leave valid values (contract of
    // `Plain`); the view borrows the slice exclusively.
    Some(unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), len) })
}

/// `size_of::<T>()` if `b` can be viewed as a slice of `T`: `T` gapless and not zero-sized,
/// `b` a whole number of aligned `T`s.
fn castable<T: Plain>(b: &[u8]) -> Option<usize> {
    let size = std::mem::size_of::<T>();
    (T::GAPLESS
        && size != 0
        && b.len().is_multiple_of(size)
        && (b.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()))
    .then_some(size)
}

/// View bytes as a slice of a gapless type: `None` if `T` has padding, or the bytes are not a
/// whole number of `T` or not aligned for it.
pub(crate) fn cast_bytes_mut<T: Plain>(b: &mut [u8]) -> Option<&mut [T]> {
    let size = castable::<T>(b)?;
    // SAFETY: the bytes are initialised (they are a `&mut [u8]`), aligned and a whole number
    // of `T`, and any bytes are a valid gapless plain `T`; the view borrows `b` exclusively.
    Some(unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<T>(), b.len() / size) })
}

/// View bytes as a shared slice of a gapless type, on the terms of [`cast_bytes_mut`].
pub(crate) fn cast_bytes<T: Plain>(b: &[u8]) -> Option<&[T]> {
    let size = castable::<T>(b)?;
    // SAFETY: the bytes are initialised, aligned and a whole number of `T`, and any bytes are
    // a valid gapless plain `T`; the view borrows `b`.
    Some(unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<T>(), b.len() / size) })
}

/// A value and its index, the element of MINLOC and MAXLOC reductions (MPI's pair types:
/// `ValueIndex<f32>` is MPI_FLOAT_INT, `<f64>` MPI_DOUBLE_INT, `<i64>` MPI_LONG_INT, `<i32>`
/// MPI_2INT, `<i16>` MPI_SHORT_INT), laid out as the C structs are.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ValueIndex<V> {
    pub value: V,
    pub index: i32,
}

impl<V> ValueIndex<V> {
    pub const fn new(value: V, index: i32) -> Self {
        ValueIndex { value, index }
    }
}

macro_rules! plain_pair {
    ($($v:ty => $gapless:expr),*) => {
        // SAFETY: a `#[repr(C)]` struct of a primitive and an `i32`; its datatype (the MPI
        // pair type, built as that struct) covers exactly the two fields at their C offsets
        // with the struct's size as extent, both fields accept any bits, and the struct has
        // padding exactly when `GAPLESS` says it does (after a 2-byte value before the
        // index, or after the index that follows an 8-byte value).
        $(unsafe impl Plain for ValueIndex<$v> { const GAPLESS: bool = $gapless; })*
    };
}

plain_pair!(f32 => true, f64 => false, i64 => false, i32 => true, i16 => false);
// SAFETY: as for the other pairs: the long double at 0, the index at 16, 12 bytes of padding
// after it (so not gapless); MPI_LONG_DOUBLE_INT's datatype is built as that struct.
unsafe impl Plain for ValueIndex<LongDouble> {
    const GAPLESS: bool = false;
}

/// A complex number laid out as C's `float _Complex` and `double _Complex` are: the real
/// part, then the imaginary one (`Complex<f32>` is MPI_C_FLOAT_COMPLEX, `Complex<f64>`
/// MPI_C_DOUBLE_COMPLEX).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex<T> {
    pub re: T,
    pub im: T,
}

impl<T> Complex<T> {
    pub const fn new(re: T, im: T) -> Self {
        Complex { re, im }
    }
}

// SAFETY: a `#[repr(C)]` struct of two floats of one type: no padding, every bit pattern
// valid; its datatype (MPI's complex type of that float) covers both at offsets 0 and the
// float's size, with the struct's size as extent.
unsafe impl Plain for Complex<f32> {
    const GAPLESS: bool = true;
}
// SAFETY: as above.
unsafe impl Plain for Complex<f64> {
    const GAPLESS: bool = true;
}

/// C's `_Bool` (MPI_C_BOOL) as the byte C stores it: 0 is false, anything else true (Rust's
/// `bool` may not hold other bytes, so it cannot be a receive buffer).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CBool(pub u8);

// SAFETY: one byte, every bit pattern valid.
unsafe impl Plain for CBool {
    const GAPLESS: bool = true;
}

/// C's `long double` on x86-64 (MPI_LONG_DOUBLE): the x87 80-bit extended format in the low
/// ten bytes of sixteen, aligned as C aligns it. Its arithmetic (the reductions MPI defines
/// on it) is in `datatype::long_double`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default)]
pub struct LongDouble {
    /// The value's bytes, little-endian: the 64-bit significand, then sign and exponent; the
    /// last six are padding C leaves undefined (carried, never read).
    pub bytes: [u8; 16],
}

// SAFETY: a `#[repr(C)]` struct of 16 bytes (its alignment adds none): no padding, any bit
// pattern valid; MPI_LONG_DOUBLE's datatype is 16 bytes at 0 with extent 16.
unsafe impl Plain for LongDouble {
    const GAPLESS: bool = true;
}

// SAFETY: two 16-byte long doubles, the second at 16 (its alignment): no padding, any bits
// valid; MPI_C_LONG_DOUBLE_COMPLEX's datatype is both at those offsets, extent 32.
unsafe impl Plain for Complex<LongDouble> {
    const GAPLESS: bool = true;
}

/// A sync counter of an RMA window (seed 001's `MPI_Sync`), as a value: which window (its
/// serial, the same on every rank), which rank's control block holds it, which counter there,
/// and the counter's generation when it was allocated. On the rank that allocated it, it is
/// the local counter; anywhere else (it travels as MPI_HANDLE_SYNC) it is a reference to the
/// remote one. The meaning lives in `rma::counter`; all zeros is [`SyncCounter::NULL`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SyncCounter {
    pub(crate) win: u64,
    pub(crate) owner: u32,
    pub(crate) index: u16,
    pub(crate) generation: u16,
}

// SAFETY: a `#[repr(C)]` struct of 8 + 4 + 2 + 2 bytes, each field at its natural alignment:
// no padding, any bit pattern valid (a meaningless one is refused where it is used);
// MPI_HANDLE_SYNC's datatype is these 16 bytes at 0, extent 16.
unsafe impl Plain for SyncCounter {
    const GAPLESS: bool = true;
}

/// The value of a gapless plain type whose bytes `b` holds (any alignment); `None` if `T`
/// has padding or `b` is not `size_of::<T>()` bytes.
pub(crate) fn read_value<T: Plain>(b: &[u8]) -> Option<T> {
    if !T::GAPLESS || b.len() != std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: `b` holds exactly `size_of::<T>()` initialised bytes, and any bytes are a valid
    // gapless plain `T` (contract of `Plain`); an unaligned read copies them out.
    Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) })
}
