//! datatype — Rust types as MPI types, and derived datatypes (MPI 4.1 §5).
//!
//! * Every Rust primitive with an MPI counterpart implements [`Equivalence`]; its slices are
//!   sent as their bytes (the contiguous fast path).
//! * A [`Datatype`] is an MPI datatype: a basic one ([`Datatype::basic`], [`Datatype::of`]) or
//!   a derived one (contiguous, vector, hvector, indexed, hindexed, indexed_block,
//!   hindexed_block, struct, subarray, resized, dup). It must be committed before it moves
//!   data.
//! * A derived type describes a buffer through a view: [`Typed`] (to send) and [`TypedMut`]
//!   (to receive) pair a slice with a datatype and a count. A send packs straight into the eager
//!   slot, and a rendezvous receive reads the sender's pieces in place (one copy, no
//!   intermediate buffer).
//! * `#[derive(Equivalence)]` from `earlybird-derive` maps a `#[repr(C)]` struct to a struct
//!   datatype, so `&[MyStruct]` is a buffer like `&[f64]`.
//!
//! A datatype is flattened when it is built: each element is a list of `(displacement,
//! length)` blocks in type-map order (adjacent blocks merged) and a run-length signature of
//! basic types. Packing walks the blocks; nothing is interpreted at send time.
#![forbid(unsafe_code)]

pub(crate) mod buffer;
mod constructors;
mod darray;
mod decode;
mod external;
pub mod long_double;
pub mod reduce;

pub use buffer::{split_views, BufView, Buffer, BufferMut, Typed, TypedMut, ViewOf};
pub use constructors::Order;
pub use decode::{Combiner, CombinerKind, Contents, Distribution, Envelope};

use crate::error::{Error, ErrorClass, Result};
use crate::status::Status;
use crate::sys::layout::Layout;
use crate::sys::plain::Plain;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// MPI's predefined datatypes (MPI 4.1 §3.2.2, §5.9.4 for the pair types).
///
/// Rust counterparts (x86-64 Linux, LP64): `Char`, `SignedChar`, `Int8` ↔ `i8`;
/// `UnsignedChar`, `Uint8`, `Byte` ↔ `u8`; `Short`, `Int16` ↔ `i16`; `UnsignedShort`,
/// `Uint16` ↔ `u16`; `Int`, `Int32` ↔ `i32`; `Unsigned`, `Uint32` ↔ `u32`; `Long`,
/// `LongLong`, `Int64`, `Aint`, `Offset`, `Count` ↔ `i64` (and `isize`); `UnsignedLong`,
/// `UnsignedLongLong`, `Uint64` ↔ `u64` (and `usize`); `Float` ↔ `f32`; `Double` ↔ `f64`;
/// `Wchar` ↔ `i32`; `CBool` ↔ [`CBool`] (a byte: Rust's `bool` may not hold every byte, so it
/// cannot be a receive buffer); `CFloatComplex` ↔ [`Complex<f32>`]; `CDoubleComplex` ↔ `Complex<f64>`;
/// `LongDouble` ↔ [`LongDouble`] (16 bytes, x87 80-bit, with its arithmetic in software);
/// `CLongDoubleComplex` ↔ `Complex<LongDouble>`. The pair types used by MINLOC/MAXLOC are
/// [`ValueIndex`]: `#[repr(C)]` structs of value then `i32` index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BasicType {
    Char,
    SignedChar,
    UnsignedChar,
    Byte,
    Wchar,
    Short,
    UnsignedShort,
    Int,
    Unsigned,
    Long,
    UnsignedLong,
    LongLong,
    UnsignedLongLong,
    Float,
    Double,
    LongDouble,
    CBool,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Aint,
    Offset,
    Count,
    CFloatComplex,
    CDoubleComplex,
    /// MPI_C_LONG_DOUBLE_COMPLEX: two `long double`s.
    CLongDoubleComplex,
    /// MPI_PACKED: the bytes of [`Datatype::pack`]; matches any signature.
    Packed,
    FloatInt,
    DoubleInt,
    LongInt,
    TwoInt,
    ShortInt,
    /// MPI_LONG_DOUBLE_INT.
    LongDoubleInt,
    /// MPIX_HANDLE_SYNC (seed 001): a sync counter of a window, sent to the ranks that will
    /// decrement it. Point-to-point and collectives other than reductions and scans only:
    /// derived datatypes, reductions and RMA refuse it (MPI_ERR_TYPE).
    HandleSync,
}

/// What a basic type is, for signature matching: equal kinds and sizes match.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Raw = 0,
    Signed = 1,
    Unsigned = 2,
    Float = 3,
    Complex = 4,
    Bool = 5,
    Handle = 6,
}

impl BasicType {
    /// Size in bytes.
    pub const fn size(self) -> usize {
        use BasicType::*;
        match self {
            Char | SignedChar | UnsignedChar | Byte | CBool | Int8 | Uint8 | Packed => 1,
            Short | UnsignedShort | Int16 | Uint16 => 2,
            Wchar | Int | Unsigned | Float | Int32 | Uint32 => 4,
            Long | UnsignedLong | LongLong | UnsignedLongLong | Double | Int64 | Uint64 | Aint
            | Offset | Count | CFloatComplex => 8,
            LongDouble | CDoubleComplex => 16,
            FloatInt | TwoInt | ShortInt => 8,
            DoubleInt | LongInt | HandleSync => 16,
            LongDoubleInt | CLongDoubleComplex => 32,
        }
    }

    /// Alignment in a C struct (x86-64 System V).
    pub const fn align(self) -> usize {
        use BasicType::*;
        match self {
            CFloatComplex => 4,
            LongDouble | LongDoubleInt | CLongDoubleComplex => 16,
            _ => {
                let s = self.size();
                if s < 8 {
                    s
                } else {
                    8
                }
            }
        }
    }

    const fn kind(self) -> Kind {
        use BasicType::*;
        match self {
            // Unsigned bytes are Rust's raw bytes: never signature-checked, like MPI_BYTE.
            Byte | Packed | UnsignedChar | Uint8 | LongDouble | FloatInt | DoubleInt | LongInt
            | TwoInt | ShortInt | LongDoubleInt | CLongDoubleComplex => Kind::Raw,
            Char | SignedChar | Wchar | Short | Int | Long | LongLong | Int8 | Int16 | Int32
            | Int64 | Aint | Offset | Count => Kind::Signed,
            UnsignedShort | Unsigned | UnsignedLong | UnsignedLongLong | Uint16 | Uint32
            | Uint64 => Kind::Unsigned,
            Float | Double => Kind::Float,
            CFloatComplex | CDoubleComplex => Kind::Complex,
            CBool => Kind::Bool,
            HandleSync => Kind::Handle,
        }
    }

    /// The signature code a message of this type carries: kind above, size in the low byte;
    /// 0 (never checked) for bytes (MPI_BYTE, and the unsigned 8-bit types, which are Rust's
    /// raw bytes), packed data, long double and the pair types, which are structs.
    pub const fn sig(self) -> Sig {
        match self.kind() {
            Kind::Raw => Sig::MIXED,
            k => Sig::basic(k as u8, self.size() as u8),
        }
    }

    /// The MPI name (`MPI_DOUBLE`, ...).
    pub fn mpi_name(self) -> &'static str {
        use BasicType::*;
        match self {
            Char => "MPI_CHAR",
            SignedChar => "MPI_SIGNED_CHAR",
            UnsignedChar => "MPI_UNSIGNED_CHAR",
            Byte => "MPI_BYTE",
            Wchar => "MPI_WCHAR",
            Short => "MPI_SHORT",
            UnsignedShort => "MPI_UNSIGNED_SHORT",
            Int => "MPI_INT",
            Unsigned => "MPI_UNSIGNED",
            Long => "MPI_LONG",
            UnsignedLong => "MPI_UNSIGNED_LONG",
            LongLong => "MPI_LONG_LONG",
            UnsignedLongLong => "MPI_UNSIGNED_LONG_LONG",
            Float => "MPI_FLOAT",
            Double => "MPI_DOUBLE",
            LongDouble => "MPI_LONG_DOUBLE",
            CBool => "MPI_C_BOOL",
            Int8 => "MPI_INT8_T",
            Int16 => "MPI_INT16_T",
            Int32 => "MPI_INT32_T",
            Int64 => "MPI_INT64_T",
            Uint8 => "MPI_UINT8_T",
            Uint16 => "MPI_UINT16_T",
            Uint32 => "MPI_UINT32_T",
            Uint64 => "MPI_UINT64_T",
            Aint => "MPI_AINT",
            Offset => "MPI_OFFSET",
            Count => "MPI_COUNT",
            CFloatComplex => "MPI_C_FLOAT_COMPLEX",
            CDoubleComplex => "MPI_C_DOUBLE_COMPLEX",
            CLongDoubleComplex => "MPI_C_LONG_DOUBLE_COMPLEX",
            Packed => "MPI_PACKED",
            FloatInt => "MPI_FLOAT_INT",
            DoubleInt => "MPI_DOUBLE_INT",
            LongInt => "MPI_LONG_INT",
            TwoInt => "MPI_2INT",
            ShortInt => "MPI_SHORT_INT",
            LongDoubleInt => "MPI_LONG_DOUBLE_INT",
            HandleSync => "MPIX_HANDLE_SYNC",
        }
    }

    /// The members of the predefined types that are C structs: the pair types (value, then
    /// the `int` index) and `long double _Complex`; each with its displacement.
    fn members(self) -> Option<[(BasicType, isize); 2]> {
        use BasicType::*;
        match self {
            FloatInt => Some([(Float, 0), (Int, 4)]),
            DoubleInt => Some([(Double, 0), (Int, 8)]),
            LongInt => Some([(Long, 0), (Int, 8)]),
            TwoInt => Some([(Int, 0), (Int, 4)]),
            ShortInt => Some([(Short, 0), (Int, 4)]),
            LongDoubleInt => Some([(LongDouble, 0), (Int, 16)]),
            CLongDoubleComplex => Some([(LongDouble, 0), (LongDouble, 16)]),
            _ => None,
        }
    }
}

use crate::sys::lend::lending;
pub use crate::sys::sig::Sig;

/// A Rust type with an MPI datatype. Implemented for the primitives that have MPI
/// counterparts (see [`BasicType`]), for arrays of them, and by `#[derive(Equivalence)]`
/// (crate `earlybird-derive`) for `#[repr(C)]` structs.
pub trait Equivalence: Plain {
    /// The signature of a message of this type ([`BasicType::sig`] when every basic
    /// element is of one type, else [`Sig::MIXED`]).
    const SIG: Sig;

    /// The committed datatype of one value.
    fn datatype() -> Datatype;

    /// `b[i] = a[i] op b[i]` for a predefined operation MPI allows on this type; `false`
    /// (and nothing written) when it does not allow it. Called with empty slices to ask.
    #[doc(hidden)]
    fn reduce_predefined(op: reduce::Predefined, a: &[Self], b: &mut [Self]) -> bool
    where
        Self: Sized,
    {
        let _ = (op, a, b);
        false
    }
}

macro_rules! equivalence {
    ($kernel:ident: $($t:ty => $d:ident),* $(,)?) => {
        $(impl Equivalence for $t {
            const SIG: Sig = BasicType::$d.sig();
            fn datatype() -> Datatype { Datatype::basic(BasicType::$d) }
            #[inline]
            fn reduce_predefined(op: reduce::Predefined, a: &[Self], b: &mut [Self]) -> bool {
                reduce::$kernel(op, a, b)
            }
        })*
    };
}

// `u8` is MPI_UINT8_T, and also how Rust holds raw bytes: its messages are not
// signature-checked (see `BasicType::sig`), so any message may be received into bytes and
// bytes into anything, as with MPI_BYTE.
equivalence! { reduce_int:
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
    u8 => Uint8, u16 => Uint16, u32 => Uint32, u64 => Uint64,
}
equivalence! { reduce_float: f32 => Float, f64 => Double }

#[cfg(target_pointer_width = "64")]
equivalence! { reduce_int: isize => Int64, usize => Uint64 }

impl<T: Equivalence, const N: usize> Equivalence for [T; N] {
    const SIG: Sig = T::SIG;
    fn datatype() -> Datatype {
        let d = Datatype::array(N, &T::datatype()).expect("an array is a contiguous type");
        d.commit()
            .expect("a derived type of a committed type commits");
        d
    }
    #[inline]
    fn reduce_predefined(op: reduce::Predefined, a: &[Self], b: &mut [Self]) -> bool {
        T::reduce_predefined(op, a.as_flattened(), b.as_flattened_mut())
    }
}

pub use crate::sys::plain::ValueIndex;

pub use crate::sys::plain::{CBool, Complex};
pub use long_double::LongDouble;

equivalence! { reduce_pair:
    ValueIndex<f32> => FloatInt, ValueIndex<f64> => DoubleInt, ValueIndex<i64> => LongInt,
    ValueIndex<i32> => TwoInt, ValueIndex<i16> => ShortInt, ValueIndex<LongDouble> => LongDoubleInt,
}
equivalence! { reduce_complex:
    Complex<f32> => CFloatComplex, Complex<f64> => CDoubleComplex,
    Complex<LongDouble> => CLongDoubleComplex,
}
equivalence! { reduce_long_double: LongDouble => LongDouble }
equivalence! { reduce_bool: CBool => CBool }

/// MPI_HANDLE_SYNC: no reduction takes it (`reduce_predefined` says so).
impl Equivalence for crate::sys::plain::SyncCounter {
    const SIG: Sig = BasicType::HandleSync.sig();
    fn datatype() -> Datatype {
        Datatype::basic(BasicType::HandleSync)
    }
}

/// An MPI datatype (MPI_Datatype). Clones are handles on the same datatype.
#[derive(Clone)]
pub struct Datatype(Rc<Inner>);

struct Inner {
    /// `Some` for a predefined type.
    basic: Option<BasicType>,
    /// One element's blocks, type-map order, adjacent ones merged; no empty block.
    blocks: Rc<[(isize, usize)]>,
    /// One element's signature, run-length encoded, adjacent runs merged.
    sig: Rc<[(BasicType, usize)]>,
    size: usize,
    lb: isize,
    ub: isize,
    true_lb: isize,
    true_ub: isize,
    /// Largest alignment of the basic types inside (for the padding of struct extents).
    align: usize,
    /// Whether lb and ub were set explicitly (resized, subarray, or built of such), like
    /// MPI's lb/ub markers.
    explicit: bool,
    sig_code: Sig,
    committed: Cell<bool>,
    name: RefCell<String>,
    /// The constructor call that made a derived type (`None` for a predefined one).
    combiner: Option<Rc<decode::Combiner>>,
}

impl std::fmt::Debug for Datatype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datatype")
            .field("name", &self.describe())
            .field("size", &self.0.size)
            .field("lb", &self.0.lb)
            .field("extent", &self.extent())
            .field("blocks", &self.0.blocks.len())
            .finish()
    }
}

impl PartialEq for Datatype {
    /// Handles on the same datatype.
    fn eq(&self, other: &Datatype) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Datatype {
    /// Whether the two types touch the same bytes in the same order with the same bounds (a
    /// type and its dup, or two builds of one Rust type's datatype).
    pub(crate) fn same_map(&self, other: &Datatype) -> bool {
        let (a, b) = (&self.0, &other.0);
        Rc::ptr_eq(a, b)
            || (a.lb == b.lb
                && a.ub == b.ub
                && a.blocks[..] == b.blocks[..]
                && a.sig[..] == b.sig[..])
    }
}

impl Datatype {
    /// A predefined datatype (committed).
    pub fn basic(b: BasicType) -> Datatype {
        if let Some([(a, ad), (b2, bd)]) = b.members() {
            // A pair type is the struct { value; int index } with the struct's padding (and
            // a long double complex the struct of its two halves).
            let t = Datatype::create_struct(
                &[1, 1],
                &[ad, bd],
                &[Datatype::basic(a), Datatype::basic(b2)],
            )
            .expect("pair types are valid structs");
            let inner = Inner {
                basic: Some(b),
                name: RefCell::new(b.mpi_name().into()),
                committed: Cell::new(true),
                ..Rc::try_unwrap(t.0).ok().expect("fresh type")
            };
            return Datatype(Rc::new(inner));
        }
        let size = b.size();
        Datatype(Rc::new(Inner {
            basic: Some(b),
            blocks: Rc::from(vec![(0isize, size)]),
            sig: Rc::from(vec![(b, 1usize)]),
            size,
            lb: 0,
            ub: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            align: b.align(),
            explicit: false,
            sig_code: b.sig(),
            committed: Cell::new(true),
            name: RefCell::new(b.mpi_name().into()),
            combiner: None,
        }))
    }

    /// The datatype of a Rust type (`Datatype::of::<f64>()` is MPI_DOUBLE).
    pub fn of<T: Equivalence>() -> Datatype {
        T::datatype()
    }

    /// Whether this is a predefined datatype.
    pub fn is_predefined(&self) -> bool {
        self.0.basic.is_some()
    }

    /// MPI_Type_commit: make the datatype usable for communication. Committing twice is
    /// allowed (MPI says it has no effect).
    pub fn commit(&self) -> Result<()> {
        self.0.committed.set(true);
        Ok(())
    }

    /// Whether [`commit`](Self::commit) was called (predefined types are committed).
    pub fn is_committed(&self) -> bool {
        self.0.committed.get()
    }

    /// MPI_Type_free: release this handle. Types built from it and pending operations that
    /// use it are not affected. Freeing a predefined type is `MPI_ERR_TYPE`.
    pub fn free(self) -> Result<()> {
        if let Some(b) = self.0.basic {
            return Err(Error::new(
                ErrorClass::Type,
                format!("type_free of {}, a predefined datatype", b.mpi_name()),
            ));
        }
        Ok(())
    }

    /// MPI_Type_size: bytes of data in one element (gaps not counted).
    pub fn size(&self) -> usize {
        self.0.size
    }

    /// MPI_Type_get_extent: `(lb, extent)`.
    pub fn extent(&self) -> isize {
        self.0.ub - self.0.lb
    }

    /// The lower bound (first member of MPI_Type_get_extent).
    pub fn lb(&self) -> isize {
        self.0.lb
    }

    /// MPI_Type_get_extent as MPI returns it: `(lb, extent)`.
    pub fn get_extent(&self) -> (isize, isize) {
        (self.0.lb, self.extent())
    }

    /// MPI_Type_get_true_extent: `(true_lb, true_extent)`, the bounds of the bytes the type
    /// actually touches, ignoring resizing.
    pub fn get_true_extent(&self) -> (isize, isize) {
        (self.0.true_lb, self.0.true_ub - self.0.true_lb)
    }

    /// MPI_Type_set_name.
    pub fn set_name(&self, name: &str) {
        *self.0.name.borrow_mut() = name.to_string();
    }

    /// MPI_Type_get_name (the MPI name for predefined types, empty if never named).
    pub fn name(&self) -> String {
        self.0.name.borrow().clone()
    }

    pub(crate) fn describe(&self) -> String {
        let n = self.0.name.borrow();
        if n.is_empty() {
            "a derived datatype".into()
        } else {
            n.clone()
        }
    }

    /// Number of contiguous blocks in one element (1 for a contiguous type).
    pub fn block_count(&self) -> usize {
        self.0.blocks.len()
    }

    /// The signature code of messages of this type (see [`BasicType::sig`]).
    pub(crate) fn sig_code(&self) -> Sig {
        self.0.sig_code
    }

    /// The one predefined type this datatype's data is made of (the type itself for a
    /// predefined one, pair types included), as a reduction sees it; `None` when it mixes
    /// several.
    /// Whether MPIX_HANDLE_SYNC is among its basic types (which only point-to-point and the
    /// collectives that do not reduce may carry).
    pub(crate) fn has_handle_sync(&self) -> bool {
        self.0.sig.iter().any(|&(b, _)| b == BasicType::HandleSync)
    }

    pub(crate) fn reduction_basic(&self) -> Option<BasicType> {
        if let Some(b) = self.0.basic {
            return Some(b);
        }
        let first = self.0.sig.first()?.0;
        self.0.sig.iter().all(|&(b, _)| b == first).then_some(first)
    }

    /// `MPI_ERR_TYPE` unless committed.
    pub(crate) fn check_committed(&self, what: &str) -> Result<()> {
        if self.is_committed() {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::Type,
                format!(
                    "{what}: {} used before commit (call Datatype::commit)",
                    self.describe()
                ),
            ))
        }
    }

    /// Whether `count` elements are exactly the bytes `0..count * size` of the buffer in order,
    /// so that they move as plain bytes.
    pub(crate) fn is_contiguous_run(&self, count: usize) -> bool {
        count == 0
            || self.0.size == 0
            || (self.0.blocks.len() == 1
                && self.0.blocks[0].0 == 0
                && (count == 1 || self.extent() == self.0.size as isize))
    }

    /// The layout of `count` elements starting at byte `origin` of a buffer of `buf_len`
    /// bytes; `MPI_ERR_BUFFER` naming the overflow if it does not fit.
    pub(crate) fn layout(&self, count: usize, origin: usize, buf_len: usize) -> Result<Layout> {
        Layout::new(
            self.0.blocks.clone(),
            self.extent(),
            count,
            origin,
            self.0.true_lb,
            self.0.true_ub,
            buf_len,
        )
        .map_err(|why| {
            Error::new(
                ErrorClass::Buffer,
                format!("{count} x {} at byte {origin}: {why}", self.describe()),
            )
        })
    }

    /// MPI_Pack_size: an upper bound on the bytes [`pack`](Self::pack) writes for `count`
    /// elements (exact here: packed data carries no header).
    pub fn pack_size(&self, count: usize) -> Result<usize> {
        self.size().checked_mul(count).ok_or_else(|| {
            Error::new(
                ErrorClass::Count,
                format!(
                    "pack_size: {count} elements of {} bytes overflow",
                    self.size()
                ),
            )
        })
    }

    /// MPI_Pack: pack `count` elements of this type from `inbuf` into `outbuf` at
    /// `*position`, which advances past them. `MPI_ERR_TRUNCATE` if `outbuf` lacks room.
    pub fn pack<T: Equivalence>(
        &self,
        inbuf: &[T],
        count: usize,
        outbuf: &mut [u8],
        position: &mut usize,
    ) -> Result<()> {
        let v = Typed::new(inbuf, count, self)?;
        lending((), |l| {
            let loan = buffer::lend(&v, l)?;
            let end = packed_end(
                "pack",
                "do not fit",
                loan.packed_len(),
                *position,
                outbuf.len(),
            )?;
            loan.pack_into(&mut outbuf[*position..end])
                .map_err(|u| Error::new(ErrorClass::Intern, u.to_string()))?;
            *position = end;
            Ok(())
        })
    }

    /// MPI_Unpack: unpack `count` elements of this type from `inbuf` at `*position` (which
    /// advances) into `outbuf`. `MPI_ERR_TRUNCATE` if `inbuf` holds fewer bytes.
    pub fn unpack<T: Equivalence>(
        &self,
        inbuf: &[u8],
        position: &mut usize,
        outbuf: &mut [T],
        count: usize,
    ) -> Result<()> {
        let mut v = TypedMut::new(outbuf, count, self)?;
        lending((), |l| {
            let loan = buffer::lend_mut(&mut v, l)?;
            let end = packed_end(
                "unpack",
                "wanted",
                loan.packed_len(),
                *position,
                inbuf.len(),
            )?;
            loan.unpack_from(&inbuf[*position..end])
                .map_err(|u| Error::new(ErrorClass::Intern, u.to_string()))?;
            *position = end;
            Ok(())
        })
    }

    /// Basic elements in the first `bytes` bytes of a message of this type; `None`
    /// (MPI_UNDEFINED) if they end inside a basic element.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.0.size == 0 {
            return (bytes == 0).then_some(0);
        }
        let per: usize = self.0.sig.iter().map(|s| s.1).sum();
        let (full, mut rem) = (bytes / self.0.size, bytes % self.0.size);
        let mut n = full * per;
        for &(b, k) in self.0.sig.iter() {
            if rem == 0 {
                break;
            }
            let whole = (rem / b.size()).min(k);
            n += whole;
            rem -= whole * b.size();
            if whole < k {
                break;
            }
        }
        (rem == 0).then_some(n)
    }
}

/// Where `n` packed bytes at `position` of a `len`-byte buffer end; `MPI_ERR_TRUNCATE` if
/// they do not fit (`how` says so in the message: "do not fit", "wanted").
fn packed_end(what: &str, how: &str, n: usize, position: usize, len: usize) -> Result<usize> {
    position
        .checked_add(n)
        .filter(|&e| e <= len)
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Truncate,
                format!("{what}: {n} bytes {how} at position {position} of a {len}-byte buffer"),
            )
        })
}

impl Status {
    /// MPI_Get_count: whole elements of `dt` received; `None` (MPI_UNDEFINED) when the bytes
    /// are not a whole number of them.
    pub fn count_of(&self, dt: &Datatype) -> Option<usize> {
        match dt.size() {
            0 => Some(0),
            sz => self.bytes.is_multiple_of(sz).then_some(self.bytes / sz),
        }
    }

    /// MPI_Get_elements: basic elements received, which may end inside an element of `dt`
    /// (a partial receive); `None` (MPI_UNDEFINED) if they end inside a basic element.
    pub fn elements_of(&self, dt: &Datatype) -> Option<usize> {
        dt.elements_in(self.bytes)
    }

    /// Number of whole `T` received (MPI_Get_count with `T`'s datatype).
    pub fn count<T: Equivalence>(&self) -> Option<usize> {
        if T::GAPLESS {
            match std::mem::size_of::<T>() {
                0 => Some(0),
                sz => self.bytes.is_multiple_of(sz).then_some(self.bytes / sz),
            }
        } else {
            self.count_of(&T::datatype())
        }
    }

    /// Number of basic elements received when receiving `T` (MPI_Get_elements).
    pub fn elements<T: Equivalence>(&self) -> Option<usize> {
        self.elements_of(&T::datatype())
    }
}

#[cfg(test)]
mod tests;
