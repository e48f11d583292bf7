//! Accumulates on window memory: element-wise atomic against each other (MPI 4.1 §12.7.1).
//!
//! The rule that keeps them atomic is one per target memory and element: when every rank
//! reaches the memory with loads and stores and the element is a naturally aligned 1, 2, 4
//! or 8 bytes, every accumulate on it is one hardware atomic (a fetch-add for integer sums,
//! a swap for REPLACE, a load for NO_OP, a compare-and-swap loop around the operation's
//! kernel otherwise); else every accumulate on it runs under the target's accumulate lock.
//! Either way the choice depends only on the memory and the element, never on the origin or
//! the operation, so two accumulates on one element always take the same road.
#![forbid(unsafe_code)]

use crate::coll::op::Op;
use crate::datatype::reduce::Predefined;
use crate::datatype::{BasicType, Equivalence, LongDouble as Ld};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::window::Mem;
use crate::sys::plain::{as_bytes, as_bytes_mut, Complex, Plain, ValueIndex};
use std::io;

/// `b = a op b` on the bytes of whole elements of one basic type; `false` (nothing written)
/// when the operation does not apply to the type.
type ByteKernel = fn(Predefined, &[u8], &mut [u8]) -> bool;

/// What an accumulate knows of its element type.
#[derive(Clone, Copy)]
pub(crate) struct Elem {
    pub(crate) basic: BasicType,
    pub(crate) width: usize,
    kernel: ByteKernel,
    int: bool,
}

fn kernel<T: Equivalence + Plain + Default>(op: Predefined, a: &[u8], b: &mut [u8]) -> bool {
    const N: usize = 32;
    if !T::reduce_predefined(op, &[], &mut []) {
        return false;
    }
    let size = std::mem::size_of::<T>();
    let (mut x, mut y) = ([T::default(); N], [T::default(); N]);
    for (ca, cb) in a.chunks(N * size).zip(b.chunks_mut(N * size)) {
        let k = ca.len() / size;
        let (Some(xb), Some(yb)) = (as_bytes_mut(&mut x[..k]), as_bytes_mut(&mut y[..k])) else {
            return false;
        };
        xb.copy_from_slice(ca);
        yb.copy_from_slice(cb);
        if !T::reduce_predefined(op, &x[..k], &mut y[..k]) {
            return false;
        }
        match as_bytes(&y[..k]) {
            Some(out) => cb.copy_from_slice(out),
            None => return false,
        }
    }
    true
}

/// The value of a pair type with padding, read from its little-endian bytes.
trait PairValue: PartialOrd + Copy {
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
}

macro_rules! pair_value {
    ($($t:ty),*) => {$(
        impl PairValue for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                let mut w = [0u8; std::mem::size_of::<$t>()];
                w.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(w)
            }
        }
    )*};
}
pair_value!(f64, i64, i16);

impl PairValue for Ld {
    const SIZE: usize = 16;
    fn read(b: &[u8]) -> Self {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&b[..16]);
        Ld { bytes }
    }
}

/// The kernel of a pair type with padding (MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT), read
/// field by field from its bytes (the padding is never read): the value `V` at 0, the `i32`
/// index right after it at its alignment, `W` bytes per element. MINLOC and MAXLOC, as for
/// every pair type: the extreme value, and on a tie the lower index.
fn pair_kernel<V: PairValue, const W: usize>(op: Predefined, a: &[u8], b: &mut [u8]) -> bool {
    let max = match op {
        Predefined::Minloc => false,
        Predefined::Maxloc => true,
        _ => return false,
    };
    let at = V::SIZE.max(4);
    let index = |e: &[u8]| i32::from_le_bytes([e[at], e[at + 1], e[at + 2], e[at + 3]]);
    for (x, y) in a.chunks_exact(W).zip(b.chunks_exact_mut(W)) {
        let (xv, yv) = (V::read(x), V::read(y));
        let better = if max { xv > yv } else { xv < yv };
        if better {
            y[..at + 4].copy_from_slice(&x[..at + 4]);
        } else if xv == yv && index(x) < index(y) {
            y[at..at + 4].copy_from_slice(&x[at..at + 4]);
        }
    }
    true
}

impl Elem {
    /// The element of accumulates on data of basic type `b`; MPI_ERR_TYPE for the types
    /// earlybird does not accumulate (MPI_PACKED).
    pub(crate) fn of(b: BasicType) -> Result<Elem> {
        use BasicType::*;
        let (kernel, int): (ByteKernel, bool) = match b {
            Char | SignedChar | Int8 => (kernel::<i8>, true),
            UnsignedChar | Uint8 | Byte => (kernel::<u8>, true),
            Short | Int16 => (kernel::<i16>, true),
            UnsignedShort | Uint16 => (kernel::<u16>, true),
            Int | Int32 | Wchar => (kernel::<i32>, true),
            Unsigned | Uint32 => (kernel::<u32>, true),
            Long | LongLong | Int64 | Aint | Offset | Count => (kernel::<i64>, true),
            UnsignedLong | UnsignedLongLong | Uint64 => (kernel::<u64>, true),
            Float => (kernel::<f32>, false),
            Double => (kernel::<f64>, false),
            FloatInt => (kernel::<ValueIndex<f32>>, false),
            TwoInt => (kernel::<ValueIndex<i32>>, false),
            DoubleInt => (pair_kernel::<f64, 16>, false),
            LongInt => (pair_kernel::<i64, 16>, false),
            ShortInt => (pair_kernel::<i16, 8>, false),
            CFloatComplex => (kernel::<Complex<f32>>, false),
            CDoubleComplex => (kernel::<Complex<f64>>, false),
            LongDouble => (kernel::<Ld>, false),
            // A logical type: compare_and_swap takes it too.
            CBool => (kernel::<crate::datatype::CBool>, true),
            LongDoubleInt => (pair_kernel::<Ld, 32>, false),
            CLongDoubleComplex => (kernel::<Complex<Ld>>, false),
            _ => {
                return Err(Error::new(
                    ErrorClass::Type,
                    format!(
                        "accumulate on {}: earlybird does not accumulate this type",
                        b.mpi_name()
                    ),
                ))
            }
        };
        Ok(Elem {
            basic: b,
            width: b.size(),
            kernel,
            int,
        })
    }

    /// Whether compare_and_swap takes the type (integers, MPI_BYTE, as MPI says).
    pub(crate) fn is_integer(&self) -> bool {
        self.int
    }
}

/// The operation of an accumulate: a predefined one (REPLACE and NO_OP included);
/// MPI_ERR_OP for a user operation or one that does not apply to the element type.
pub(crate) fn check_op(op: &Op, e: &Elem) -> Result<Predefined> {
    let Some(p) = op.as_predefined() else {
        return Err(Error::new(
            ErrorClass::Op,
            format!(
                "{}: one-sided accumulates take predefined operations only",
                op.name()
            ),
        ));
    };
    if matches!(p, Predefined::Replace | Predefined::NoOp) || (e.kernel)(p, &[], &mut []) {
        return Ok(p);
    }
    Err(Error::new(
        ErrorClass::Op,
        format!(
            "{} cannot accumulate {} (MPI does not define it on that type)",
            p.mpi_name(),
            e.basic.mpi_name()
        ),
    ))
}

fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// Accumulate `n` bytes of whole elements at byte `m` of `mem`: `target = origin op target`
/// (`origin` is unused for NO_OP), the old target bytes into `old` when given. `atomics`:
/// whether every rank reaches this memory with loads and stores. `lock(true)` takes the
/// target's accumulate lock, `lock(false)` releases it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply(
    mem: &Mem,
    m: usize,
    n: usize,
    origin: &[u8],
    mut old: Option<&mut [u8]>,
    e: &Elem,
    op: Predefined,
    atomics: bool,
    lock: &mut dyn FnMut(bool) -> io::Result<()>,
) -> io::Result<()> {
    let w = e.width;
    if atomics && mem.atomic(m, w).is_some() {
        for i in 0..n / w {
            let Some(a) = mem.atomic(m + i * w, w) else {
                return Err(io::Error::other("accumulate element outside the memory"));
            };
            let o = if op == Predefined::NoOp {
                0
            } else {
                word(&origin[i * w..(i + 1) * w])
            };
            let prev = match op {
                Predefined::Replace => a.swap(o),
                Predefined::NoOp => a.load(),
                Predefined::Sum if e.int => a.fetch_add(o),
                p => a.update(|cur| {
                    let mut t = cur.to_le_bytes();
                    (e.kernel)(p, &o.to_le_bytes()[..w], &mut t[..w]);
                    u64::from_le_bytes(t)
                }),
            };
            if let Some(old) = old.as_deref_mut() {
                old[i * w..(i + 1) * w].copy_from_slice(&prev.to_le_bytes()[..w]);
            }
        }
        return Ok(());
    }
    // The accumulate lock, around a read-modify-write of the whole run.
    let mut small = [0u8; 256];
    let mut big = Vec::new();
    let cur: &mut [u8] = if n <= small.len() {
        &mut small[..n]
    } else {
        big.resize(n, 0);
        &mut big
    };
    lock(true)?;
    let r = (|| {
        mem.read(m, cur)?;
        if let Some(old) = old.as_deref_mut() {
            old[..n].copy_from_slice(cur);
        }
        match op {
            Predefined::NoOp => Ok(()),
            Predefined::Replace => mem.write(m, &origin[..n]),
            p => {
                (e.kernel)(p, &origin[..n], cur);
                mem.write(m, cur)
            }
        }
    })();
    lock(false)?;
    r
}

/// compare_and_swap of one element at byte `m`: `new` replaces the element if it holds
/// `cmp`; the old bytes into `old`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compare_swap(
    mem: &Mem,
    m: usize,
    new: &[u8],
    cmp: &[u8],
    old: &mut [u8],
    atomics: bool,
    lock: &mut dyn FnMut(bool) -> io::Result<()>,
) -> io::Result<()> {
    let w = new.len();
    if atomics {
        if let Some(a) = mem.atomic(m, w) {
            let prev = a.compare_swap(word(cmp), word(new));
            old.copy_from_slice(&prev.to_le_bytes()[..w]);
            return Ok(());
        }
    }
    lock(true)?;
    let r = (|| {
        mem.read(m, old)?;
        if old == cmp {
            mem.write(m, new)?;
        }
        Ok(())
    })();
    lock(false)?;
    r
}
