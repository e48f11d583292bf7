//! Packing in the portable "external32" representation (MPI 4.1 §5.2.3, the representation
//! itself in §15.5.2): MPI_Pack_external, MPI_Unpack_external, MPI_Pack_external_size.
//!
//! external32 is big-endian, byte-aligned, with fixed sizes. On this platform (x86-64,
//! LP64) every basic type has its native size there except three: `long` and
//! `unsigned long` are 4 bytes (a value that does not fit is MPI_ERR_CONVERSION), `wchar_t`
//! is 2 bytes (a code point above U+FFFF is MPI_ERR_CONVERSION), and `long double` is the
//! 16-byte IEEE binary128 (converted from and to the x87 80-bit format, rounding to nearest
//! even on the way back). Complex types are pairs of their floats; the pair types of
//! MINLOC/MAXLOC are their members, without padding. Packing converts after the native
//! pack (which has already removed the padding); unpacking converts before the native
//! unpack.
#![forbid(unsafe_code)]

use super::{BasicType, Datatype, Equivalence};
use crate::error::{Error, ErrorClass, Result};

/// Bytes of `b` in external32.
fn ext_size(b: BasicType) -> usize {
    match b {
        BasicType::Long | BasicType::UnsignedLong => 4,
        BasicType::Wchar => 2,
        b => b.size(),
    }
}

/// Whether a basic value is one big-endian unit as a whole (integers, single floats), as
/// opposed to a pair of floats (complex: each half swapped) or opaque bytes.
enum Kind {
    Bytes,
    Int { signed: bool },
    Float,
    ComplexHalves(usize),
    LongDouble,
}

fn kind(b: BasicType) -> Kind {
    use BasicType::*;
    match b {
        Char | SignedChar | UnsignedChar | Byte | CBool | Int8 | Uint8 | Packed => Kind::Bytes,
        Short | Int | Long | LongLong | Int16 | Int32 | Int64 | Aint | Offset | Count => {
            Kind::Int { signed: true }
        }
        UnsignedShort | Unsigned | UnsignedLong | UnsignedLongLong | Uint16 | Uint32 | Uint64
        | Wchar => Kind::Int { signed: false },
        Float | Double => Kind::Float,
        CFloatComplex => Kind::ComplexHalves(4),
        CDoubleComplex => Kind::ComplexHalves(8),
        LongDouble => Kind::LongDouble,
        // Pair types (and long double complex) appear in signatures as their members.
        FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | LongDoubleInt | CLongDoubleComplex => {
            Kind::Bytes
        }
        // A sync counter names this job's window memory: its bytes, as they are.
        HandleSync => Kind::Bytes,
    }
}

fn check_datarep(what: &str, datarep: &str) -> Result<()> {
    if datarep == "external32" {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::UnsupportedDatarep,
        format!("{what}: data representation {datarep:?} (only \"external32\" is defined here)"),
    ))
}

fn conversion(what: &str, b: BasicType, detail: String) -> Error {
    Error::new(
        ErrorClass::Conversion,
        format!("{what}: a {} {detail} in external32", b.mpi_name()),
    )
}

/// x87 80-bit extended (little-endian, 16 bytes with padding) to IEEE binary128, big-endian.
fn x87_to_binary128(src: &[u8]) -> [u8; 16] {
    let mant = u64::from_le_bytes(src[..8].try_into().expect("8 bytes"));
    let se = u16::from_le_bytes(src[8..10].try_into().expect("2 bytes"));
    // Same sign and exponent fields (15 bits, bias 16383); the fraction drops the explicit
    // integer bit and widens from 63 to 112 bits.
    let frac = ((mant & (u64::MAX >> 1)) as u128) << 49;
    let q = ((se as u128) << 112) | frac;
    q.to_be_bytes()
}

/// IEEE binary128, big-endian, to x87 80-bit extended (little-endian, 16 bytes): the
/// fraction rounded to 63 bits, to nearest even.
fn binary128_to_x87(src: &[u8]) -> [u8; 16] {
    let q = u128::from_be_bytes(src[..16].try_into().expect("16 bytes"));
    let mut se = (q >> 112) as u16;
    let exp = se & 0x7fff;
    let frac = q & ((1u128 << 112) - 1);
    let mut out = [0u8; 16];
    if exp == 0x7fff {
        // Infinity or NaN: keep a nonzero fraction nonzero.
        let f = (frac >> 49) as u64 | u64::from(frac != 0 && (frac >> 49) == 0);
        let mant = (1u64 << 63) | f;
        out[..8].copy_from_slice(&mant.to_le_bytes());
        out[8..10].copy_from_slice(&se.to_le_bytes());
        return out;
    }
    let mut f = (frac >> 49) as u64;
    let rest = frac & ((1u128 << 49) - 1);
    let half = 1u128 << 48;
    if rest > half || (rest == half && f & 1 == 1) {
        f += 1;
    }
    let mut int_bit = u64::from(exp != 0);
    if f >> 63 != 0 {
        // The fraction overflowed its 63 bits: carry into the integer bit or the exponent.
        f &= u64::MAX >> 1;
        if int_bit == 1 {
            se += 1;
        } else {
            int_bit = 1;
            se += 1;
        }
    }
    let mant = (int_bit << 63) | f;
    out[..8].copy_from_slice(&mant.to_le_bytes());
    out[8..10].copy_from_slice(&se.to_le_bytes());
    out
}

/// `dst` = `src` with the bytes of each `unit`-byte unit reversed (little- to big-endian
/// and back).
fn reverse_units(src: &[u8], dst: &mut [u8], unit: usize) {
    for (s, d) in src.chunks_exact(unit).zip(dst.chunks_exact_mut(unit)) {
        for (x, y) in d.iter_mut().zip(s.iter().rev()) {
            *x = *y;
        }
    }
}

/// The conversions that are their own inverse and keep the size: bytes as they are, floats
/// and the halves of complex numbers byte-reversed.
fn swap(k: Kind, src: &[u8], dst: &mut [u8]) {
    match k {
        Kind::Float => reverse_units(src, dst, src.len()),
        Kind::ComplexHalves(h) => reverse_units(src, dst, h),
        _ => dst.copy_from_slice(src),
    }
}

impl Datatype {
    /// Call `f(basic type, native offset, external offset)` for every basic value of
    /// `count` elements, in type-map order.
    fn each_value(
        &self,
        count: usize,
        mut f: impl FnMut(BasicType, usize, usize) -> Result<()>,
    ) -> Result<()> {
        let (mut n, mut e) = (0, 0);
        for _ in 0..count {
            for &(b, k) in self.0.sig.iter() {
                for _ in 0..k {
                    f(b, n, e)?;
                    n += b.size();
                    e += ext_size(b);
                }
            }
        }
        Ok(())
    }

    /// Bytes of one element in external32.
    fn external_elem_size(&self) -> usize {
        self.0.sig.iter().map(|&(b, k)| ext_size(b) * k).sum()
    }

    /// MPI_Pack_external_size: the bytes `count` elements of this type take in `datarep`
    /// (only "external32"; others are MPI_ERR_UNSUPPORTED_DATAREP).
    pub fn pack_external_size(&self, datarep: &str, count: usize) -> Result<usize> {
        check_datarep("pack_external_size", datarep)?;
        self.external_elem_size().checked_mul(count).ok_or_else(|| {
            Error::new(
                ErrorClass::Count,
                format!("pack_external_size: {count} elements overflow"),
            )
        })
    }

    /// MPI_Pack_external: `count` elements of this type from `inbuf`, in `datarep`, into
    /// `outbuf` at `*position`, which advances past them. MPI_ERR_TRUNCATE if `outbuf` lacks
    /// room, MPI_ERR_CONVERSION for a value external32 cannot hold.
    pub fn pack_external<T: Equivalence>(
        &self,
        datarep: &str,
        inbuf: &[T],
        count: usize,
        outbuf: &mut [u8],
        position: &mut usize,
    ) -> Result<()> {
        let what = "pack_external";
        check_datarep(what, datarep)?;
        let mut native = vec![0u8; self.pack_size(count)?];
        let mut at = 0;
        self.pack(inbuf, count, &mut native, &mut at)?;
        let n = self.pack_external_size(datarep, count)?;
        let end = super::packed_end(what, "do not fit", n, *position, outbuf.len())?;
        let out = &mut outbuf[*position..end];
        self.each_value(count, |b, n, e| {
            let (src, dst) = (&native[n..n + b.size()], &mut out[e..e + ext_size(b)]);
            match kind(b) {
                Kind::Int { signed } => {
                    let es = dst.len();
                    if es < src.len() {
                        let mut w = [0u8; 8];
                        w[..src.len()].copy_from_slice(src);
                        let v = u64::from_le_bytes(w);
                        let fits = if signed {
                            let lim = 1i64 << (8 * es - 1);
                            (-lim..lim).contains(&(v as i64))
                        } else {
                            v < 1u64 << (8 * es)
                        };
                        if !fits {
                            return Err(conversion(
                                what,
                                b,
                                format!("value does not fit in {es} bytes"),
                            ));
                        }
                    }
                    // The low `es` bytes, most significant first.
                    reverse_units(&src[..es], dst, es);
                }
                Kind::LongDouble => dst.copy_from_slice(&x87_to_binary128(src)),
                k => swap(k, src, dst),
            }
            Ok(())
        })?;
        *position = end;
        Ok(())
    }

    /// MPI_Unpack_external: `count` elements of this type in `datarep` from `inbuf` at
    /// `*position` (which advances) into `outbuf`. MPI_ERR_TRUNCATE if `inbuf` holds fewer
    /// bytes.
    pub fn unpack_external<T: Equivalence>(
        &self,
        datarep: &str,
        inbuf: &[u8],
        position: &mut usize,
        outbuf: &mut [T],
        count: usize,
    ) -> Result<()> {
        let what = "unpack_external";
        check_datarep(what, datarep)?;
        let n = self.pack_external_size(datarep, count)?;
        let end = super::packed_end(what, "wanted", n, *position, inbuf.len())?;
        let src_all = &inbuf[*position..end];
        let mut native = vec![0u8; self.pack_size(count)?];
        self.each_value(count, |b, n, e| {
            let (src, dst) = (&src_all[e..e + ext_size(b)], &mut native[n..n + b.size()]);
            match kind(b) {
                Kind::Int { signed } => {
                    // Most significant first; widen with the sign (or zeros).
                    let es = src.len();
                    let fill = if signed && src[0] & 0x80 != 0 {
                        0xff
                    } else {
                        0
                    };
                    dst.fill(fill);
                    reverse_units(src, &mut dst[..es], es);
                }
                Kind::LongDouble => dst.copy_from_slice(&binary128_to_x87(src)),
                k => swap(k, src, dst),
            }
            Ok(())
        })?;
        let mut at = 0;
        self.unpack(&native, &mut at, outbuf, count)?;
        *position = end;
        Ok(())
    }
}
