//! The arithmetic of MPI_LONG_DOUBLE's reductions, in software: x86-64's `long double` is
//! the x87 80-bit extended format (sign, 15-bit exponent, 64-bit significand with its integer
//! bit explicit), which Rust has no type for. Sums and products are exact, then rounded once
//! to nearest, ties to even, as the x87 does at its full precision (C's default); MIN and
//! MAX compare exactly. NaNs propagate (quieted), an invalid operation (∞ − ∞, 0 × ∞) gives
//! the x87's default NaN, overflow gives ∞ and underflow goes gradually through the
//! denormals, as IEEE 754 says.
//!
//! # Standard section(s)
//! MPI 4.1 §6.9.2 (MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX on floating point, MPI_LONG_DOUBLE
//! among them).
#![forbid(unsafe_code)]

use super::reduce::Predefined;
pub use crate::sys::plain::LongDouble;
use std::cmp::Ordering;

/// The bias of the exponent.
const BIAS: i32 = 16383;
/// The exponent field of infinities and NaNs.
const EMAX_FIELD: i32 = 0x7fff;
/// `value = m × 2^e` for the smallest exponent (denormals and the smallest normals).
const EMIN: i32 = 1 - BIAS - 63;

/// A value taken apart.
#[derive(Clone, Copy, Debug)]
enum Parts {
    Nan,
    Inf(bool),
    /// Sign, significand, exponent: the value is ±m × 2^e.
    Finite(bool, u64, i32),
}

impl LongDouble {
    /// The value of an `f64` (exact: every `f64` is a `long double`).
    pub fn from_f64(x: f64) -> LongDouble {
        let bits = x.to_bits();
        let sign = bits >> 63 == 1;
        let field = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1 << 52) - 1);
        match field {
            0x7ff if frac == 0 => encode(sign, 1 << 63, EMAX_FIELD as u16),
            0x7ff => encode(
                sign,
                (1 << 63) | (1 << 62) | (frac << 11),
                EMAX_FIELD as u16,
            ),
            0 if frac == 0 => encode(sign, 0, 0),
            0 => round(sign, frac as u128, -1074),
            _ => round(sign, ((1u64 << 52) | frac) as u128, field - 1023 - 52),
        }
    }

    /// The 80 bits that hold the value: sign and exponent, then the significand.
    pub fn to_bits(self) -> (u16, u64) {
        let b = self.bytes;
        let m = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        (u16::from_le_bytes([b[8], b[9]]), m)
    }

    /// The value of those 80 bits.
    pub fn from_bits(sign_exponent: u16, significand: u64) -> LongDouble {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&significand.to_le_bytes());
        bytes[8..10].copy_from_slice(&sign_exponent.to_le_bytes());
        LongDouble { bytes }
    }

    fn parts(self) -> Parts {
        let (se, m) = self.to_bits();
        let sign = se >> 15 == 1;
        let field = i32::from(se & 0x7fff);
        if field == EMAX_FIELD {
            return if m << 1 == 0 {
                Parts::Inf(sign)
            } else {
                Parts::Nan
            };
        }
        Parts::Finite(sign, m, field.max(1) - BIAS - 63)
    }

    /// The x87's default NaN (the "real indefinite").
    fn indefinite() -> LongDouble {
        encode(true, 0xc000_0000_0000_0000, EMAX_FIELD as u16)
    }

    /// A NaN operand, quieted.
    fn quiet(self) -> LongDouble {
        let (se, m) = self.to_bits();
        LongDouble::from_bits(se, m | (1 << 62))
    }

    /// `self + other`, rounded once.
    fn plus(self, other: LongDouble) -> LongDouble {
        match (self.parts(), other.parts()) {
            (Parts::Nan, _) => self.quiet(),
            (_, Parts::Nan) => other.quiet(),
            (Parts::Inf(a), Parts::Inf(b)) if a != b => LongDouble::indefinite(),
            (Parts::Inf(_), _) => self,
            (_, Parts::Inf(_)) => other,
            (Parts::Finite(sa, ma, ea), Parts::Finite(sb, mb, eb)) => {
                if ma == 0 && mb == 0 {
                    return encode(sa && sb, 0, 0);
                }
                if mb == 0 {
                    return self;
                }
                if ma == 0 {
                    return other;
                }
                // The larger exponent first; both significands moved up 62 bits, the smaller
                // one's then aligned down with what falls off kept as a sticky bit (62 guard
                // bits make it round as the exact sum would).
                let ((s1, m1, e1), (s2, m2, e2)) = if ea >= eb {
                    ((sa, ma, ea), (sb, mb, eb))
                } else {
                    ((sb, mb, eb), (sa, ma, ea))
                };
                let a = u128::from(m1) << 62;
                let b = u128::from(m2) << 62;
                let d = (e1 - e2) as u32;
                let b = if d >= 128 {
                    u128::from(b != 0)
                } else {
                    (b >> d) | u128::from(b & ((1u128 << d) - 1) != 0)
                };
                let (sign, m) = if s1 == s2 {
                    (s1, a + b)
                } else if a >= b {
                    (s1, a - b)
                } else {
                    (s2, b - a)
                };
                if m == 0 {
                    return encode(false, 0, 0);
                }
                round(sign, m, e1 - 62)
            }
        }
    }

    /// `self × other`, rounded once.
    fn times(self, other: LongDouble) -> LongDouble {
        match (self.parts(), other.parts()) {
            (Parts::Nan, _) => self.quiet(),
            (_, Parts::Nan) => other.quiet(),
            (Parts::Inf(_), Parts::Finite(_, 0, _)) | (Parts::Finite(_, 0, _), Parts::Inf(_)) => {
                LongDouble::indefinite()
            }
            (Parts::Inf(a), Parts::Inf(b) | Parts::Finite(b, _, _))
            | (Parts::Finite(a, _, _), Parts::Inf(b)) => encode(a != b, 1 << 63, EMAX_FIELD as u16),
            (Parts::Finite(sa, ma, ea), Parts::Finite(sb, mb, eb)) => {
                let m = u128::from(ma) * u128::from(mb);
                if m == 0 {
                    return encode(sa != sb, 0, 0);
                }
                round(sa != sb, m, ea + eb)
            }
        }
    }

    /// The order of two values (`None` when either is a NaN; +0 and −0 are equal).
    pub fn compare(self, other: LongDouble) -> Option<Ordering> {
        // Each value as a signed key: its magnitude orders as (exponent field, significand),
        // denormals below the normals.
        let key = |x: LongDouble| -> Option<i128> {
            match x.parts() {
                Parts::Nan => None,
                _ => {
                    let (se, m) = x.to_bits();
                    let mag = (i128::from(se & 0x7fff) << 64) | i128::from(m);
                    let zero = se & 0x7fff == 0 && m == 0;
                    Some(if se >> 15 == 1 && !zero { -mag } else { mag })
                }
            }
        };
        Some(key(self)?.cmp(&key(other)?))
    }
}

/// Equal values (+0 and −0 are; a NaN is equal to nothing), as C's `==`.
impl PartialEq for LongDouble {
    fn eq(&self, other: &LongDouble) -> bool {
        self.compare(*other) == Some(Ordering::Equal)
    }
}

/// C's order of `long double`s (none with a NaN).
impl PartialOrd for LongDouble {
    fn partial_cmp(&self, other: &LongDouble) -> Option<Ordering> {
        self.compare(*other)
    }
}

impl std::ops::Add for LongDouble {
    type Output = LongDouble;
    fn add(self, other: LongDouble) -> LongDouble {
        self.plus(other)
    }
}

impl std::ops::Mul for LongDouble {
    type Output = LongDouble;
    fn mul(self, other: LongDouble) -> LongDouble {
        self.times(other)
    }
}

impl std::ops::Neg for LongDouble {
    type Output = LongDouble;
    fn neg(self) -> LongDouble {
        let (se, m) = self.to_bits();
        LongDouble::from_bits(se ^ 0x8000, m)
    }
}

impl std::ops::Sub for LongDouble {
    type Output = LongDouble;
    fn sub(self, other: LongDouble) -> LongDouble {
        self.plus(-other)
    }
}

/// The bytes of sign, significand and exponent field.
fn encode(sign: bool, m: u64, field: u16) -> LongDouble {
    LongDouble::from_bits(field | (u16::from(sign) << 15), m)
}

/// `m` shifted down `shift` (≥ 1) bits, rounded to nearest, ties to even.
fn shift_round(m: u128, shift: u32) -> u128 {
    if shift > 128 {
        return 0; // below half of the last place kept
    }
    let (q, rem) = if shift == 128 {
        (0, m)
    } else {
        (m >> shift, m & ((1u128 << shift) - 1))
    };
    let half = 1u128 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// ±m × 2^e (m > 0) rounded to the format: 64 significant bits, or fewer in the denormal
/// range; ∞ past the largest finite value.
fn round(sign: bool, m: u128, e: i32) -> LongDouble {
    let top = 127 - m.leading_zeros() as i32;
    let shift = (top - 63).max(EMIN - e);
    let (mut r, mut e) = if shift > 0 {
        (shift_round(m, shift as u32), e + shift)
    } else {
        (m << (-shift) as u32, e + shift)
    };
    if r >> 64 == 1 {
        // Rounding carried into a 65th bit.
        r >>= 1;
        e += 1;
    }
    let field = if r >> 63 == 1 { e - EMIN + 1 } else { 0 };
    if field >= EMAX_FIELD {
        return encode(sign, 1 << 63, EMAX_FIELD as u16);
    }
    encode(sign, r as u64, field as u16)
}

/// MPI_SUM, MPI_PROD, MPI_MIN and MPI_MAX on `long double`.
pub(super) fn reduce_long_double(op: Predefined, a: &[LongDouble], b: &mut [LongDouble]) -> bool {
    let f: fn(LongDouble, LongDouble) -> LongDouble = match op {
        Predefined::Sum => LongDouble::plus,
        Predefined::Prod => LongDouble::times,
        Predefined::Max => |x, y| match x.compare(y) {
            Some(Ordering::Greater) => x,
            _ => y,
        },
        Predefined::Min => |x, y| match x.compare(y) {
            Some(Ordering::Less) => x,
            _ => y,
        },
        _ => return false,
    };
    for (x, y) in a.iter().zip(b.iter_mut()) {
        *y = f(*x, *y);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(x: f64) -> LongDouble {
        LongDouble::from_f64(x)
    }

    fn same(a: LongDouble, b: LongDouble) -> bool {
        a.to_bits() == b.to_bits()
    }

    #[test]
    fn from_f64_gives_the_x87_encoding() {
        assert_eq!(ld(1.0).to_bits(), (0x3fff, 1 << 63));
        assert_eq!(ld(-2.0).to_bits(), (0xc000, 1 << 63));
        assert_eq!(ld(0.0).to_bits(), (0, 0));
        assert_eq!(ld(-0.0).to_bits(), (0x8000, 0));
        assert_eq!(ld(f64::INFINITY).to_bits(), (0x7fff, 1 << 63));
        // The smallest f64 denormal is a normal long double: 2^-1074.
        assert_eq!(
            ld(f64::from_bits(1)).to_bits(),
            ((BIAS - 1074) as u16, 1 << 63)
        );
        assert_eq!(ld(0.75).to_bits(), (0x3ffe, 0xc000_0000_0000_0000));
    }

    #[test]
    fn sums_and_products_of_exact_values_are_exact() {
        for (a, b) in [
            (1.0, 2.0),
            (3.5, -1.25),
            (1e300, 1e300),
            (-7.0, 7.0),
            (0.1, 0.2),
        ] {
            // f64 inputs of 53 bits: their sum needs at most 54 + exponent gap bits; these
            // fit 64, so the long double sum is the exact one, and so is f64's when exact.
            let exact = a + b;
            if exact - a == b && exact - b == a {
                assert!(same(ld(a).plus(ld(b)), ld(exact)), "{a} + {b}");
            }
        }
        assert!(same(ld(3.0).times(ld(-0.5)), ld(-1.5)));
        assert!(same(
            ld(1e200).times(ld(1e-200)).times(ld(1.0)),
            ld(1e200).times(ld(1e-200))
        ));
        // x + (-x) is +0; -0 + -0 is -0.
        assert_eq!(ld(5.0).plus(ld(-5.0)).to_bits(), (0, 0));
        assert_eq!(ld(-0.0).plus(ld(-0.0)).to_bits(), (0x8000, 0));
    }

    #[test]
    fn sums_keep_the_bits_an_f64_loses() {
        // 2^60 + 1 needs 61 bits: exact in long double, not in f64.
        let big = LongDouble::from_bits(0x3fff + 60, 1 << 63);
        let s = big.plus(ld(1.0));
        assert_eq!(s.to_bits(), (0x3fff + 60, (1 << 63) | (1 << 3)));
        // 2^64 + 1 needs 65 bits: ties to even gives 2^64.
        let two64 = LongDouble::from_bits(0x3fff + 64, 1 << 63);
        assert!(same(two64.plus(ld(1.0)), two64));
        // 2^64 + 3 rounds up to 2^64 + 4.
        assert_eq!(two64.plus(ld(3.0)).to_bits(), (0x3fff + 64, (1 << 63) | 2));
        // (2^64 - 1)(2^64 - 1) = 2^128 - 2^65 + 1, rounded to 64 bits: 2^128 - 2^65.
        let max = LongDouble::from_bits(0x3fff + 63, u64::MAX);
        assert_eq!(max.times(max).to_bits(), (0x3fff + 127, u64::MAX - 1));
    }

    #[test]
    fn specials_overflow_and_denormals() {
        let inf = ld(f64::INFINITY);
        assert!(same(inf.plus(ld(1.0)), inf));
        assert_eq!(
            inf.plus(ld(f64::NEG_INFINITY)).to_bits(),
            (0xffff, 0xc000_0000_0000_0000)
        );
        assert_eq!(
            inf.times(ld(0.0)).to_bits(),
            (0xffff, 0xc000_0000_0000_0000)
        );
        assert!(ld(f64::NAN).plus(ld(1.0)).compare(ld(1.0)).is_none());
        let largest = LongDouble::from_bits(0x7ffe, u64::MAX);
        assert!(same(largest.plus(largest), inf));
        // The smallest normal halved is a denormal, and back.
        let min_normal = LongDouble::from_bits(1, 1 << 63);
        let half = min_normal.times(ld(0.5));
        assert_eq!(half.to_bits(), (0, 1 << 62));
        assert!(same(half.plus(half), min_normal));
        // The smallest denormal halved ties to even: 0.
        let tiny = LongDouble::from_bits(0, 1);
        assert_eq!(tiny.times(ld(0.5)).to_bits(), (0, 0));
    }

    #[test]
    fn min_and_max_order_exactly() {
        let v = [
            -1e300,
            -2.0,
            -0.0,
            0.0,
            1.0,
            1.0 + f64::EPSILON,
            f64::INFINITY,
        ];
        for (i, &a) in v.iter().enumerate() {
            for (j, &b) in v.iter().enumerate() {
                let want = if a == b { Ordering::Equal } else { i.cmp(&j) };
                assert_eq!(ld(a).compare(ld(b)), Some(want), "{a} vs {b}");
            }
        }
        let mut b = [ld(3.0), ld(-4.0)];
        assert!(reduce_long_double(
            Predefined::Max,
            &[ld(5.0), ld(-5.0)],
            &mut b
        ));
        assert!(same(b[0], ld(5.0)) && same(b[1], ld(-4.0)));
        assert!(!reduce_long_double(Predefined::Band, &[], &mut []));
    }

    /// 1,500 sums and products the x87 itself computed (`tests/data/x87_vectors.c` made
    /// them: normals near 1, denormals, values near overflow and underflow, and sums that
    /// nearly cancel), matched bit for bit.
    #[test]
    fn sums_and_products_match_the_x87_bit_for_bit() {
        let text = include_str!("../../tests/data/x87_vectors.txt");
        let mut checked = 0;
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            let v = |i: usize| {
                LongDouble::from_bits(
                    u16::from_str_radix(w[2 * i], 16).expect("hex"),
                    u64::from_str_radix(w[2 * i + 1], 16).expect("hex"),
                )
            };
            let (a, b) = (v(0), v(1));
            // NaNs match as NaNs (the x87 picks which operand's payload).
            let nan = |x: LongDouble| matches!(x.parts(), Parts::Nan);
            for (ours, x87, op) in [(a.plus(b), v(2), "+"), (a.times(b), v(3), "*")] {
                assert!(
                    ours.to_bits() == x87.to_bits() || nan(ours) && nan(x87),
                    "{line}: a {op} b is {:x?} here",
                    ours.to_bits()
                );
            }
            checked += 1;
        }
        assert_eq!(checked, 1500);
    }
}
