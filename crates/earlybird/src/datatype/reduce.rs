//! The predefined reduction operations and what they do on each basic type: MPI defines
//! them per datatype (which operation applies to which type, and how), so they live with
//! the types; `coll::op` builds MPI_Op on top of them.
//!
//! # Standard section(s)
//! MPI 4.1 §6.9.2 (predefined reduction operations), §6.9.4 (MINLOC and MAXLOC).
#![forbid(unsafe_code)]

pub(super) use super::long_double::reduce_long_double;
use super::{CBool, Complex, ValueIndex};

/// The predefined operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Predefined {
    Max,
    Min,
    Sum,
    Prod,
    Land,
    Band,
    Lor,
    Bor,
    Lxor,
    Bxor,
    Minloc,
    Maxloc,
    /// MPI_REPLACE: the origin's value replaces the target's (one-sided accumulates only).
    Replace,
    /// MPI_NO_OP: the target's value stays (one-sided accumulates only).
    NoOp,
}

impl Predefined {
    /// The MPI name (`MPI_SUM`, ...).
    pub fn mpi_name(self) -> &'static str {
        use Predefined::*;
        match self {
            Max => "MPI_MAX",
            Min => "MPI_MIN",
            Sum => "MPI_SUM",
            Prod => "MPI_PROD",
            Land => "MPI_LAND",
            Band => "MPI_BAND",
            Lor => "MPI_LOR",
            Bor => "MPI_BOR",
            Lxor => "MPI_LXOR",
            Bxor => "MPI_BXOR",
            Minloc => "MPI_MINLOC",
            Maxloc => "MPI_MAXLOC",
            Replace => "MPI_REPLACE",
            NoOp => "MPI_NO_OP",
        }
    }
}

/// Integers: every predefined operation but MINLOC/MAXLOC. Sums and products wrap, as C's
/// unsigned arithmetic does (signed overflow is undefined in C; here it wraps too).
pub(super) fn reduce_int<T: IntLike>(op: Predefined, a: &[T], b: &mut [T]) -> bool {
    use Predefined::*;
    let z = T::default();
    let l = |v: bool| if v { T::ONE } else { z };
    macro_rules! each {
        ($f:expr) => {{
            for (x, y) in a.iter().zip(b.iter_mut()) {
                *y = $f(*x, *y);
            }
        }};
    }
    match op {
        Sum => each!(|x: T, y: T| x.wadd(y)),
        Prod => each!(|x: T, y: T| x.wmul(y)),
        Max => each!(|x: T, y: T| if x > y { x } else { y }),
        Min => each!(|x: T, y: T| if x < y { x } else { y }),
        Land => each!(|x: T, y: T| l(x != z && y != z)),
        Lor => each!(|x: T, y: T| l(x != z || y != z)),
        Lxor => each!(|x: T, y: T| l((x != z) != (y != z))),
        Band => each!(|x: T, y: T| x & y),
        Bor => each!(|x: T, y: T| x | y),
        Bxor => each!(|x: T, y: T| x ^ y),
        Minloc | Maxloc | Replace | NoOp => return false,
    }
    true
}

/// Floating point: sum, product, min and max.
pub(super) fn reduce_float<T>(op: Predefined, a: &[T], b: &mut [T]) -> bool
where
    T: Copy + PartialOrd + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    use Predefined::*;
    match op {
        Sum => a.iter().zip(b.iter_mut()).for_each(|(x, y)| *y = *x + *y),
        Prod => a.iter().zip(b.iter_mut()).for_each(|(x, y)| *y = *x * *y),
        Max => a
            .iter()
            .zip(b.iter_mut())
            .for_each(|(x, y)| *y = if *x > *y { *x } else { *y }),
        Min => a
            .iter()
            .zip(b.iter_mut())
            .for_each(|(x, y)| *y = if *x < *y { *x } else { *y }),
        _ => return false,
    }
    true
}

/// C's `_Bool`: the logical operations, giving 0 or 1 as C does.
pub(super) fn reduce_bool(op: Predefined, a: &[CBool], b: &mut [CBool]) -> bool {
    let f: fn(bool, bool) -> bool = match op {
        Predefined::Land => |x, y| x && y,
        Predefined::Lor => |x, y| x || y,
        Predefined::Lxor => |x, y| x != y,
        _ => return false,
    };
    for (x, y) in a.iter().zip(b.iter_mut()) {
        *y = CBool(u8::from(f(x.0 != 0, y.0 != 0)));
    }
    true
}

/// Complex numbers: sum and product (MPI defines no order on them, so no min or max).
pub(super) fn reduce_complex<T>(op: Predefined, a: &[Complex<T>], b: &mut [Complex<T>]) -> bool
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
{
    match op {
        Predefined::Sum => a.iter().zip(b.iter_mut()).for_each(|(x, y)| {
            *y = Complex::new(x.re + y.re, x.im + y.im);
        }),
        Predefined::Prod => a.iter().zip(b.iter_mut()).for_each(|(x, y)| {
            *y = Complex::new(x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re);
        }),
        _ => return false,
    }
    true
}

/// MINLOC and MAXLOC on value-index pairs: the extreme value, and on a tie the lower index.
pub(super) fn reduce_pair<V: Copy + PartialOrd>(
    op: Predefined,
    a: &[ValueIndex<V>],
    b: &mut [ValueIndex<V>],
) -> bool {
    let max = match op {
        Predefined::Minloc => false,
        Predefined::Maxloc => true,
        _ => return false,
    };
    for (x, y) in a.iter().zip(b.iter_mut()) {
        let better = if max {
            x.value > y.value
        } else {
            x.value < y.value
        };
        if better {
            *y = *x;
        } else if x.value == y.value && x.index < y.index {
            y.index = x.index;
        }
    }
    true
}

/// The integer operations the kernels need.
pub(super) trait IntLike:
    Copy
    + Default
    + PartialOrd
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
{
    const ONE: Self;
    fn wadd(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
}

macro_rules! int_like {
    ($($t:ty),*) => {
        $(impl IntLike for $t {
            const ONE: Self = 1;
            #[inline(always)]
            fn wadd(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self { self.wrapping_mul(o) }
        })*
    };
}

int_like!(i8, i16, i32, i64, u8, u16, u32, u64, isize, usize);
