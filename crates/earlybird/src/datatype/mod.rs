//! datatype — Rust types as MPI types.
//!
//! This first layer covers the basic types (MPI 4.1 §3.2.2): every Rust primitive that has an
//! MPI counterpart implements [`Equivalence`], and buffers are slices of them, moved as their
//! bytes. Derived datatypes (vector, indexed, struct, ...) come with the communicators issue.
#![forbid(unsafe_code)]

/// The MPI basic datatype a Rust type corresponds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BasicType {
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Float,
    Double,
    /// `MPI_BYTE`
    Byte,
}

/// A Rust type with a fixed MPI datatype, sent as its bytes. Implemented for the primitive
/// integer and floating-point types; `bytemuck::Pod` guarantees every byte pattern is a valid
/// value, so a receive can write any bytes into it.
pub trait Equivalence: bytemuck::Pod {
    const DATATYPE: BasicType;
}

macro_rules! equivalence {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Equivalence for $t { const DATATYPE: BasicType = BasicType::$d; })*
    };
}

equivalence! {
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
    u8 => Uint8, u16 => Uint16, u32 => Uint32, u64 => Uint64,
    f32 => Float, f64 => Double,
}

#[cfg(target_pointer_width = "64")]
equivalence! { isize => Int64, usize => Uint64 }

/// The bytes of a typed buffer.
#[inline]
pub(crate) fn bytes<T: Equivalence>(buf: &[T]) -> &[u8] {
    bytemuck::cast_slice(buf)
}

/// The bytes of a typed buffer, writable.
#[inline]
pub(crate) fn bytes_mut<T: Equivalence>(buf: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(buf)
}
