//! Reduction operations (MPI_Op): the predefined ones and user operations made from Rust
//! closures, typed on one element type or (for language bindings) on the bytes of any
//! contiguous datatype, with the kernels that apply them.
//!
//! Every reduction step computes `b[i] = a[i] op b[i]` where `a` holds the contribution of
//! the lower ranks and `b` that of the higher ones (the order MPI's user functions take,
//! `inoutvec = invec op inoutvec`), so an operation that is not commutative sees its
//! operands in rank order.
//!
//! # Standard section(s)
//! MPI 4.1 §6.9.2 (predefined operations), §6.9.4 (MINLOC and MAXLOC), §6.9.5 (user
//! operations), §6.9.7 (MPI_Reduce_local, MPI_Op_commutative).
#![forbid(unsafe_code)]

pub use crate::datatype::reduce::Predefined;
use crate::datatype::{Datatype, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::lend::{Loan, Unusable};
use crate::sys::plain::{as_bytes, as_bytes_mut};
use std::any::Any;
use std::rc::Rc;

/// A reduction operation (MPI_Op): one of the predefined ones, or a user operation.
///
/// ```
/// use earlybird::Op;
/// let sum = Op::SUM;
/// // A user operation on f64: 2x2 matrix product, which is not commutative.
/// let matmul = Op::user(false, |a: &[[f64; 4]], b: &mut [[f64; 4]]| {
///     for (x, y) in a.iter().zip(b.iter_mut()) {
///         *y = [x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3],
///               x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]];
///     }
/// });
/// assert!(sum.is_commutative() && !matmul.is_commutative());
/// ```
#[derive(Clone)]
pub struct Op(OpKind);

#[derive(Clone)]
enum OpKind {
    Predefined(Predefined),
    User(Rc<UserOp>),
    Bytes(Rc<BytesOp>),
}

/// A user operation on the bytes of any contiguous datatype (see [`Op::user_bytes`]).
struct BytesOp {
    commute: bool,
    f: Box<BytesFn>,
}

/// `f(a, b, count, dt)`: `b = a op b` on `count` elements of `dt` laid out contiguously.
type BytesFn = dyn Fn(&[u8], &mut [u8], usize, &Datatype);

struct UserOp {
    commute: bool,
    /// The reducer of the type it was made for, that type's one predefined type (if it is
    /// made of one) and its size: what a typed buffer's data must be made of.
    reducer: fn(&Op) -> Result<Reducer>,
    basic: Option<crate::datatype::BasicType>,
    size: usize,
    /// A `Box<dyn Fn(&[T], &mut [T])>` for the `T` it was made for.
    f: Box<dyn Any>,
    type_name: &'static str,
}

type UserFn<T> = Box<dyn Fn(&[T], &mut [T])>;

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Op {
    pub const MAX: Op = Op(OpKind::Predefined(Predefined::Max));
    pub const MIN: Op = Op(OpKind::Predefined(Predefined::Min));
    pub const SUM: Op = Op(OpKind::Predefined(Predefined::Sum));
    pub const PROD: Op = Op(OpKind::Predefined(Predefined::Prod));
    pub const LAND: Op = Op(OpKind::Predefined(Predefined::Land));
    pub const BAND: Op = Op(OpKind::Predefined(Predefined::Band));
    pub const LOR: Op = Op(OpKind::Predefined(Predefined::Lor));
    pub const BOR: Op = Op(OpKind::Predefined(Predefined::Bor));
    pub const LXOR: Op = Op(OpKind::Predefined(Predefined::Lxor));
    pub const BXOR: Op = Op(OpKind::Predefined(Predefined::Bxor));
    pub const MINLOC: Op = Op(OpKind::Predefined(Predefined::Minloc));
    pub const MAXLOC: Op = Op(OpKind::Predefined(Predefined::Maxloc));
    /// MPI_REPLACE: for one-sided accumulates only (a reduction refuses it, MPI_ERR_OP).
    pub const REPLACE: Op = Op(OpKind::Predefined(Predefined::Replace));
    /// MPI_NO_OP: for one-sided accumulates only (a reduction refuses it, MPI_ERR_OP).
    pub const NO_OP: Op = Op(OpKind::Predefined(Predefined::NoOp));

    /// A predefined operation.
    pub const fn predefined(p: Predefined) -> Op {
        Op(OpKind::Predefined(p))
    }

    /// MPI_Op_create: a user operation on elements of `T`. `f(a, b)` must set
    /// `b[i] = a[i] op b[i]` for every `i`, where `a` comes from lower ranks than `b`; it may be
    /// called on any number of elements at once. `commute` says whether the operation is
    /// commutative (it must be associative in any case, as MPI requires). The operation may
    /// be used only on buffers of `T` (MPI_ERR_OP otherwise).
    ///
    /// `f` must not call MPI: it runs inside the library, from whatever call of this rank
    /// advances the reduction (a pending nonblocking collective moves on in any call that
    /// blocks or polls), while the rank's endpoint is in use.
    pub fn user<T: Equivalence>(commute: bool, f: impl Fn(&[T], &mut [T]) + 'static) -> Op {
        let f: UserFn<T> = Box::new(f);
        Op(OpKind::User(Rc::new(UserOp {
            commute,
            reducer: Reducer::new::<T>,
            basic: if T::GAPLESS {
                T::datatype().reduction_basic()
            } else {
                None
            },
            size: std::mem::size_of::<T>(),
            f: Box::new(f),
            type_name: std::any::type_name::<T>(),
        })))
    }

    /// MPI_Op_create as a language binding needs it: a user operation that takes the data of
    /// any datatype as bytes, with the element count and the datatype, as C's
    /// `MPI_User_function` does. `f(a, b, count, dt)` must set `b = a op b` element-wise on
    /// `count` elements of `dt`, laid out contiguously (the operation refuses, with
    /// MPI_ERR_OP, a datatype whose elements are not contiguous bytes: one with holes, or
    /// with a lower bound that is not 0). Same rules as [`Op::user`] otherwise.
    pub fn user_bytes(
        commute: bool,
        f: impl Fn(&[u8], &mut [u8], usize, &Datatype) + 'static,
    ) -> Op {
        Op(OpKind::Bytes(Rc::new(BytesOp {
            commute,
            f: Box::new(f),
        })))
    }

    /// MPI_Op_commutative.
    pub fn is_commutative(&self) -> bool {
        match &self.0 {
            OpKind::Predefined(_) => true,
            OpKind::User(u) => u.commute,
            OpKind::Bytes(u) => u.commute,
        }
    }

    /// The predefined operation this is, if it is one.
    pub fn as_predefined(&self) -> Option<Predefined> {
        match self.0 {
            OpKind::Predefined(p) => Some(p),
            OpKind::User(_) | OpKind::Bytes(_) => None,
        }
    }

    /// MPI_Op_free: a no-op kept for symmetry (an `Op` is freed when its last clone goes).
    pub fn free(self) {}

    /// A name for messages: `MPI_SUM`, or `user op on f64`.
    pub fn name(&self) -> String {
        match &self.0 {
            OpKind::Predefined(p) => p.mpi_name().to_string(),
            OpKind::User(u) => format!("user op on {}", u.type_name),
            OpKind::Bytes(_) => "user op on bytes".to_string(),
        }
    }

    /// Check that the operation applies to `T`: MPI_ERR_OP naming both if not.
    pub(crate) fn check<T: Equivalence>(&self) -> Result<()> {
        let ok = match &self.0 {
            OpKind::Predefined(p) => T::reduce_predefined(*p, &[], &mut []),
            OpKind::User(u) => u.f.is::<UserFn<T>>(),
            OpKind::Bytes(_) => T::GAPLESS,
        };
        if ok {
            return Ok(());
        }
        Err(Error::new(
            ErrorClass::Op,
            format!(
                "{} cannot reduce {} ({})",
                self.name(),
                std::any::type_name::<T>(),
                match &self.0 {
                    OpKind::Predefined(_) => "MPI does not define it on that type",
                    OpKind::User(_) => "the user operation was made for another type",
                    OpKind::Bytes(_) => "a type with padding is not contiguous bytes",
                }
            ),
        ))
    }

    /// `b = a op b` on slices of `T`; the operation was checked for `T`.
    #[inline]
    pub(crate) fn apply<T: Equivalence>(&self, a: &[T], b: &mut [T]) {
        match &self.0 {
            OpKind::Predefined(p) => {
                let done = T::reduce_predefined(*p, a, b);
                debug_assert!(done, "op checked before use");
            }
            OpKind::User(u) => {
                if let Some(f) = u.f.downcast_ref::<UserFn<T>>() {
                    f(a, b)
                }
            }
            OpKind::Bytes(u) => {
                let n = a.len();
                if let (Some(x), Some(y)) = (as_bytes(a), as_bytes_mut(b)) {
                    (u.f)(x, y, n, &T::datatype())
                }
            }
        }
    }
}

fn bytes_kernel_name() -> &'static str {
    "bytes of the operation's datatype"
}

/// The element type of a bytes operation: a datatype's contiguous elements.
static BYTES_KERNEL: Kernel = Kernel {
    name: bytes_kernel_name,
    padded: None,
};

fn apply_bytes(r: &Reducer, src: &Loan, dst: &Loan) -> std::result::Result<(), Unusable> {
    Loan::typed_pair::<u8>(src, dst, |a, b| {
        if let (OpKind::Bytes(u), Some(dt)) = (&r.op.0, &r.dt) {
            (u.f)(a, b, a.len() / r.elem.max(1), dt)
        }
    })
}

/// [`apply_bytes`] for a datatype with holes: the reduction's data is packed, so each side is
/// unpacked into the datatype's own layout for the function, and the result packed back.
/// (The reducer was made only for a datatype whose layout starts at or after displacement
/// 0, which pack and unpack take.)
fn apply_bytes_laid_out(r: &Reducer, src: &Loan, dst: &Loan) -> std::result::Result<(), Unusable> {
    Loan::typed_pair::<u8>(src, dst, |a, b| {
        let (OpKind::Bytes(u), Some(dt)) = (&r.op.0, &r.dt) else {
            return;
        };
        let n = a.len() / r.elem.max(1);
        if n == 0 {
            return;
        }
        let (tlb, text) = dt.get_true_extent();
        let span = ((n - 1) as isize * dt.extent() + tlb + text).max(0) as usize;
        let (mut x, mut y) = (vec![0u8; span], vec![0u8; span]);
        let unpacked = dt
            .unpack(a, &mut 0, &mut x, n)
            .and_then(|()| dt.unpack(b, &mut 0, &mut y, n));
        debug_assert!(unpacked.is_ok(), "{unpacked:?}");
        if unpacked.is_ok() {
            (u.f)(&x, &mut y, n, dt);
            let packed = dt.pack(&y, n, b, &mut 0);
            debug_assert!(packed.is_ok(), "{packed:?}");
        }
    })
}

/// What a reduction knows of its element type, one constant per type.
#[derive(Debug)]
pub(crate) struct Kernel {
    /// The type's name (`std::any::type_name`).
    pub(crate) name: fn() -> &'static str,
    /// For a type with padding, its own datatype (its data in a message).
    pub(crate) padded: Option<fn() -> Result<Datatype>>,
}

trait KernelOf {
    const KERNEL: Kernel;
}

impl<T: Equivalence> KernelOf for T {
    const KERNEL: Kernel = Kernel {
        name: std::any::type_name::<T>,
        padded: if T::GAPLESS {
            None
        } else {
            Some(crate::datatype::buffer::own_datatype::<T>)
        },
    };
}

/// How a collective reduces: its operation and the element type's kernel, fixed when the
/// collective is called (for a persistent one, at init).
#[derive(Clone)]
pub(crate) struct Reducer {
    pub(crate) op: Op,
    /// Element size in bytes (in memory, padding included).
    pub(crate) elem: usize,
    /// The element type: two buffers reduce alike only with the same one.
    pub(crate) kernel: &'static Kernel,
    apply: fn(&Reducer, &Loan, &Loan) -> std::result::Result<(), Unusable>,
    /// The datatype a bytes operation reduces (its callback is given it).
    dt: Option<Datatype>,
}

impl std::fmt::Debug for Reducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reducer({:?}, {} B)", self.op, self.elem)
    }
}

/// Sync counters (seed 001) are never reduced: MPI_ERR_TYPE.
fn handle_sync_refused(op: &Op) -> Error {
    Error::new(
        ErrorClass::Type,
        format!(
            "{} on MPIX_HANDLE_SYNC: sync counters travel with point-to-point and the collectives that do not reduce",
            op.name()
        ),
    )
}

fn apply_loans<T: Equivalence>(
    r: &Reducer,
    src: &Loan,
    dst: &Loan,
) -> std::result::Result<(), Unusable> {
    Loan::typed_pair::<T>(src, dst, |a, b| r.op.apply(a, b))
}

impl Reducer {
    /// A reducer of `T` by `op` (MPI_ERR_OP if the operation does not apply to `T`).
    pub(crate) fn new<T: Equivalence>(op: &Op) -> Result<Reducer> {
        if T::SIG == crate::datatype::BasicType::HandleSync.sig() {
            return Err(handle_sync_refused(op));
        }
        op.check::<T>()?;
        Ok(Reducer {
            op: op.clone(),
            elem: std::mem::size_of::<T>(),
            kernel: &<T as KernelOf>::KERNEL,
            apply: apply_loans::<T>,
            dt: None,
        })
    }

    /// A reducer of the data of datatype `dt` by `op`: its elements are the one predefined
    /// type it is made of (MPI 4.1 §6.9.2 lets a predefined operation reduce a derived
    /// datatype of one predefined type), or for a user operation the type it was made for,
    /// which `dt`'s data must be a whole number of. MPI_ERR_OP if `op` does not apply.
    pub(crate) fn for_datatype(dt: &Datatype, op: &Op) -> Result<Reducer> {
        if dt.has_handle_sync() {
            return Err(handle_sync_refused(op));
        }
        if let OpKind::Bytes(_) = &op.0 {
            let (tlb, text) = dt.get_true_extent();
            let contiguous = dt.size() > 0
                && dt.lb() == 0
                && tlb == 0
                && dt.extent() == dt.size() as isize
                && text == dt.size() as isize
                && dt.is_contiguous_run(1);
            // A datatype with holes: the function gets the elements laid out as the datatype
            // lays them out (MPI hands a user function the buffers themselves), from
            // displacement 0, so the layout must start there or after.
            if !contiguous && (dt.size() == 0 || dt.lb() < 0 || tlb < 0) {
                return Err(Error::new(
                    ErrorClass::Op,
                    format!(
                        "{} cannot reduce {}: a user function on bytes takes a datatype whose data starts at or after displacement 0",
                        op.name(),
                        dt.describe()
                    ),
                ));
            }
            return Ok(Reducer {
                op: op.clone(),
                elem: dt.size(),
                kernel: &BYTES_KERNEL,
                apply: if contiguous {
                    apply_bytes
                } else {
                    apply_bytes_laid_out
                },
                dt: Some(dt.clone()),
            });
        }
        if let OpKind::User(u) = &op.0 {
            let fits = dt.reduction_basic().is_some_and(|b| Some(b) == u.basic)
                && u.size > 0
                && dt.size().is_multiple_of(u.size);
            if !fits {
                return Err(Error::new(
                    ErrorClass::Op,
                    format!(
                        "{} cannot reduce {} (its data must be elements of the operation's own type, which must be made of one predefined type)",
                        op.name(),
                        dt.describe()
                    ),
                ));
            }
            return (u.reducer)(op);
        }
        use crate::datatype::BasicType::*;
        use crate::sys::plain::ValueIndex;
        let unsupported = |b: crate::datatype::BasicType| {
            Error::new(
                ErrorClass::Op,
                format!(
                    "{} cannot reduce {} ({} has no reduction here)",
                    op.name(),
                    dt.describe(),
                    b.mpi_name()
                ),
            )
        };
        let Some(b) = dt.reduction_basic() else {
            return Err(Error::new(
                ErrorClass::Op,
                format!(
                    "{} cannot reduce {}: a predefined operation reduces data of one predefined type",
                    op.name(),
                    dt.describe()
                ),
            ));
        };
        match b {
            Char | SignedChar | Int8 => Reducer::new::<i8>(op),
            UnsignedChar | Uint8 | Byte => Reducer::new::<u8>(op),
            Short | Int16 => Reducer::new::<i16>(op),
            UnsignedShort | Uint16 => Reducer::new::<u16>(op),
            Int | Int32 | Wchar => Reducer::new::<i32>(op),
            Unsigned | Uint32 => Reducer::new::<u32>(op),
            Long | LongLong | Int64 | Aint | Offset | Count => Reducer::new::<i64>(op),
            UnsignedLong | UnsignedLongLong | Uint64 => Reducer::new::<u64>(op),
            Float => Reducer::new::<f32>(op),
            Double => Reducer::new::<f64>(op),
            FloatInt => Reducer::new::<ValueIndex<f32>>(op),
            DoubleInt => Reducer::new::<ValueIndex<f64>>(op),
            LongInt => Reducer::new::<ValueIndex<i64>>(op),
            TwoInt => Reducer::new::<ValueIndex<i32>>(op),
            ShortInt => Reducer::new::<ValueIndex<i16>>(op),
            CFloatComplex => Reducer::new::<crate::datatype::Complex<f32>>(op),
            CDoubleComplex => Reducer::new::<crate::datatype::Complex<f64>>(op),
            LongDouble => Reducer::new::<crate::datatype::LongDouble>(op),
            LongDoubleInt => Reducer::new::<ValueIndex<crate::datatype::LongDouble>>(op),
            CLongDoubleComplex => {
                Reducer::new::<crate::datatype::Complex<crate::datatype::LongDouble>>(op)
            }
            CBool => Reducer::new::<crate::datatype::CBool>(op),
            HandleSync => Err(handle_sync_refused(op)),
            Packed => Err(unsupported(b)),
        }
    }

    /// What tells this reducer from another: the operation (a predefined one, or which user
    /// operation) and the element type's kernel.
    pub(crate) fn identity(&self) -> (usize, usize) {
        let op = match &self.op.0 {
            OpKind::Predefined(p) => *p as usize + 1,
            OpKind::User(u) => Rc::as_ptr(u) as usize,
            OpKind::Bytes(u) => Rc::as_ptr(u) as usize,
        };
        (op, self.apply as usize)
    }

    /// `dst = src op dst`, both contiguous runs of whole elements of the same length.
    #[inline]
    pub(crate) fn reduce(&self, src: &Loan, dst: &Loan) -> std::result::Result<(), Unusable> {
        (self.apply)(self, src, dst)
    }
}

/// MPI_Reduce_local: `inout[i] = input[i] op inout[i]`. MPI_ERR_COUNT if the lengths differ,
/// MPI_ERR_OP if the operation does not apply to `T`.
pub fn reduce_local<T: Equivalence>(input: &[T], inout: &mut [T], op: &Op) -> Result<()> {
    if input.len() != inout.len() {
        return Err(Error::new(
            ErrorClass::Count,
            format!(
                "reduce_local: input of {} elements, inout of {}",
                input.len(),
                inout.len()
            ),
        ));
    }
    op.check::<T>()?;
    op.apply(input, inout);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::ValueIndex;

    #[test]
    fn predefined_kernels_follow_mpi() {
        let mut b = [5i32, -3, 0, 7];
        reduce_local(&[1, 2, 3, 4], &mut b, &Op::SUM).unwrap();
        assert_eq!(b, [6, -1, 3, 11]);
        reduce_local(&[1, 0, 3, 0], &mut b, &Op::LAND).unwrap();
        assert_eq!(b, [1, 0, 1, 0]);
        let mut f = [1.5f64, -2.0];
        reduce_local(&[0.5, 4.0], &mut f, &Op::MAX).unwrap();
        assert_eq!(f, [1.5, 4.0]);
        let mut u = [0b1100u8];
        reduce_local(&[0b1010], &mut u, &Op::BXOR).unwrap();
        assert_eq!(u, [0b0110]);
        let mut p = [ValueIndex::new(2.0f64, 5), ValueIndex::new(1.0, 9)];
        reduce_local(
            &[ValueIndex::new(2.0, 3), ValueIndex::new(3.0, 0)],
            &mut p,
            &Op::MINLOC,
        )
        .unwrap();
        assert_eq!(p, [ValueIndex::new(2.0, 3), ValueIndex::new(1.0, 9)]);
        let mut arr = [[1u16, 2], [3, 4]];
        reduce_local(&[[1, 1], [1, 1]], &mut arr, &Op::PROD).unwrap();
        assert_eq!(arr, [[1, 2], [3, 4]]);
    }

    #[test]
    fn ops_refuse_types_mpi_does_not_define_them_on() {
        let e = reduce_local(&[1.0f32], &mut [2.0f32], &Op::BAND).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Op);
        assert!(
            e.to_string().contains("MPI_BAND") && e.to_string().contains("f32"),
            "{e}"
        );
        let e = reduce_local(&[1i32], &mut [2], &Op::MAXLOC).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Op);
        let user = Op::user(true, |a: &[f64], b: &mut [f64]| {
            b.iter_mut().zip(a).for_each(|(y, x)| *y += x)
        });
        let e = reduce_local(&[1i64], &mut [2], &user).unwrap_err();
        assert!(e.to_string().contains("f64"), "{e}");
        let e = reduce_local(&[1i64, 2], &mut [2], &Op::SUM).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Count);
    }

    #[test]
    fn user_ops_see_lower_ranks_first() {
        let concat = Op::user(false, |a: &[[u8; 2]], b: &mut [[u8; 2]]| {
            for (x, y) in a.iter().zip(b.iter_mut()) {
                *y = [x[0], y[1]];
            }
        });
        let mut b = [[7u8, 8]];
        reduce_local(&[[1, 2]], &mut b, &concat).unwrap();
        assert_eq!(b, [[1, 8]]);
        assert!(!concat.is_commutative());
    }
}
