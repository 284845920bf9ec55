//! The narrow element types of ONNX quantization: the float8 formats
//! (`f8e4m3fn`, `f8e4m3fnuz`, `f8e5m2`, `f8e5m2fnuz`, `f8e8m0`), `f4e2m1`, and
//! the 4- and 2-bit integers (`i4`, `u4`, `i2`, `u2`).
//!
//! In memory each element is one byte (ONNX files pack the 4- and 2-bit types
//! two and four to a byte; the loader unpacks them): a float's bit pattern, an
//! integer's two's-complement bits in the low bits. They are storage types:
//! ops compute them in f32 or i64 (their compute dtype) between casts.
//!
//! Conversions follow the onnx reference (`ml_dtypes`), rounding once:
//! - to a float8 or float4 format: round to nearest even; a magnitude beyond
//!   the largest finite value (after rounding) becomes inf where the format has
//!   one (`f8e5m2`), NaN where it has NaN but no inf, and the largest value in
//!   `f4e2m1`, which has neither (there NaN becomes -0); the `fnuz` formats
//!   have no -0 (it becomes +0). The `Cast` op's default `saturate` clips to
//!   the largest finite value before converting (see the ONNX importer).
//! - to `f8e8m0` (an unsigned power of two `2^(e-127)`, `0xff` NaN): the
//!   exponent of the f32 value rounded up when any fraction bit is set, the
//!   sign dropped, never past `2^127`; NaN and infinities become NaN (ONNX's
//!   default `round_mode = "up"`, `saturate = 1`).
//! - to a 4- or 2-bit integer from a float: truncate toward zero; a value
//!   outside the range (and NaN) becomes 0. From an integer: wrap (keep the
//!   low bits). From bool: 0 or 1.
//!
//! **Invariant:** a stored byte uses only the type's bits (4 for `f4e2m1`,
//! `i4`, `u4`; 2 for `i2`, `u2`); [`crate::Tensor::from_bytes`] checks it.

use super::Num;
use std::cmp::Ordering;
use std::fmt;

/// How a minifloat format spends its special encodings.
#[derive(Clone, Copy)]
enum Specials {
    /// IEEE-like: the top exponent holds inf (mantissa 0) and NaN.
    Ieee,
    /// No inf; NaN is the all-ones exponent and mantissa (`fn`).
    Fn,
    /// No inf and no -0; NaN is the sign bit alone (`fnuz`).
    Fnuz,
    /// Neither inf nor NaN (`f4e2m1`).
    None,
}

/// A sign + exponent + mantissa format of at most 8 bits.
#[derive(Clone, Copy)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    specials: Specials,
}

impl Format {
    fn sign_bit(self) -> u8 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn max_exp_field(self) -> i32 {
        (1 << self.exp_bits) - 1
    }

    /// The largest finite value.
    fn max_finite(self) -> f64 {
        let man_max = (1u32 << self.man_bits) - 1;
        let (exp_field, man) = match self.specials {
            Specials::Ieee => (self.max_exp_field() - 1, man_max),
            Specials::Fn => (self.max_exp_field(), man_max - 1),
            Specials::Fnuz | Specials::None => (self.max_exp_field(), man_max),
        };
        (1.0 + f64::from(man) / f64::from(1u32 << self.man_bits)) * 2f64.powi(exp_field - self.bias)
    }

    fn nan(self) -> u8 {
        match self.specials {
            Specials::Ieee | Specials::Fn => self.sign_bit() - 1,
            Specials::Fnuz => self.sign_bit(),
            // no NaN: the onnx reference (ml_dtypes) stores -0
            Specials::None => self.sign_bit(),
        }
    }

    fn decode(self, bits: u8) -> f64 {
        let sign = if bits & self.sign_bit() != 0 {
            -1.0
        } else {
            1.0
        };
        let mag = bits & (self.sign_bit() - 1);
        let exp_field = i32::from(mag >> self.man_bits);
        let man = u32::from(mag) & ((1 << self.man_bits) - 1);
        let man_max = (1u32 << self.man_bits) - 1;
        match self.specials {
            Specials::Ieee if exp_field == self.max_exp_field() => {
                return if man == 0 {
                    sign * f64::INFINITY
                } else {
                    f64::NAN
                };
            }
            Specials::Fn if exp_field == self.max_exp_field() && man == man_max => {
                return f64::NAN;
            }
            Specials::Fnuz if bits == self.sign_bit() => return f64::NAN,
            _ => {}
        }
        let scale = f64::from(1u32 << self.man_bits);
        let value = if exp_field == 0 {
            f64::from(man) / scale * 2f64.powi(1 - self.bias)
        } else {
            (1.0 + f64::from(man) / scale) * 2f64.powi(exp_field - self.bias)
        };
        sign * value
    }

    fn encode(self, x: f64) -> u8 {
        if x.is_nan() {
            return self.nan();
        }
        let neg = x.is_sign_negative();
        let sign = if neg { self.sign_bit() } else { 0 };
        let a = x.abs();
        // the quantum at a's binade (subnormals share the lowest normal one)
        let min_exp = 1 - self.bias;
        let exp = if a == 0.0 || a.is_infinite() {
            min_exp
        } else {
            (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp)
        };
        let quantum = 2f64.powi(exp - self.man_bits as i32);
        let rounded = (a / quantum).round_ties_even() * quantum;
        if rounded > self.max_finite() || a.is_infinite() {
            return match self.specials {
                Specials::Ieee => sign | ((self.max_exp_field() as u8) << self.man_bits),
                Specials::Fn | Specials::Fnuz => self.nan(),
                Specials::None => sign | (self.sign_bit() - 1),
            };
        }
        if rounded == 0.0 {
            return match self.specials {
                Specials::Fnuz => 0,
                _ => sign,
            };
        }
        let scale = f64::from(1u32 << self.man_bits);
        let min_normal = 2f64.powi(min_exp);
        let mag = if rounded < min_normal {
            (rounded / 2f64.powi(min_exp) * scale) as u8
        } else {
            // rounding may carry into the next binade: take its exponent again
            let e = ((rounded.to_bits() >> 52) & 0x7ff) as i32 - 1023;
            let man = (rounded / 2f64.powi(e) - 1.0) * scale;
            (((e + self.bias) as u8) << self.man_bits) | man as u8
        };
        sign | mag
    }
}

fn float_of(n: Num) -> f64 {
    match n {
        Num::Float(v) => v,
        Num::Int(v) => v as f64,
        Num::Bool(v) => f64::from(u8::from(v)),
    }
}

macro_rules! minifloat {
    ($(#[$doc:meta])* $t:ident, $d:ident, $exp:expr, $man:expr, $bias:expr, $specials:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $t(pub u8);

        impl $t {
            const FORMAT: Format = Format {
                exp_bits: $exp,
                man_bits: $man,
                bias: $bias,
                specials: Specials::$specials,
            };

            /// The largest finite value.
            pub fn max_finite() -> f64 {
                Self::FORMAT.max_finite()
            }
        }

        impl super::Element for $t {
            const DTYPE: super::DType = super::DType::$d;
        }

        impl super::Scalar for $t {
            fn to_num(self) -> Num {
                Num::Float(Self::FORMAT.decode(self.0))
            }
            fn from_num(n: Num) -> $t {
                // an integer beyond 2^53 rounds twice, far beyond every finite value
                $t(Self::FORMAT.encode(float_of(n)))
            }
        }

        value_semantics!($t);
    };
}

/// Equality and order by value (NaN unordered, -0 == +0), printing the value.
macro_rules! value_semantics {
    ($t:ident) => {
        impl PartialEq for $t {
            fn eq(&self, other: &$t) -> bool {
                super::Scalar::to_f64(*self) == super::Scalar::to_f64(*other)
            }
        }
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &$t) -> Option<Ordering> {
                super::Scalar::to_f64(*self).partial_cmp(&super::Scalar::to_f64(*other))
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", super::Scalar::to_f64(*self))
            }
        }
    };
}

minifloat!(
    /// float8 with 4 exponent and 3 mantissa bits, no inf, NaN `s.1111.111`.
    F8E4M3Fn, F8E4M3Fn, 4, 3, 7, Fn
);
minifloat!(
    /// float8 with 4 exponent and 3 mantissa bits, no inf, no -0, NaN `0x80`.
    F8E4M3Fnuz, F8E4M3Fnuz, 4, 3, 8, Fnuz
);
minifloat!(
    /// float8 with 5 exponent and 2 mantissa bits (IEEE-like: inf and NaN).
    F8E5M2, F8E5M2, 5, 2, 15, Ieee
);
minifloat!(
    /// float8 with 5 exponent and 2 mantissa bits, no inf, no -0, NaN `0x80`.
    F8E5M2Fnuz, F8E5M2Fnuz, 5, 2, 16, Fnuz
);
minifloat!(
    /// float4 with 2 exponent bits and 1 mantissa bit, no inf, no NaN.
    F4E2M1, F4E2M1, 2, 1, 1, None
);

/// float8 holding only an exponent: `2^(e-127)`, `0xff` is NaN.
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct F8E8M0(pub u8);

impl super::Element for F8E8M0 {
    const DTYPE: super::DType = super::DType::F8E8M0;
}

impl super::Scalar for F8E8M0 {
    fn to_num(self) -> Num {
        Num::Float(if self.0 == 0xff {
            f64::NAN
        } else {
            2f64.powi(i32::from(self.0) - 127)
        })
    }
    fn from_num(n: Num) -> F8E8M0 {
        // the onnx reference converts through f32
        let bits = (float_of(n) as f32).to_bits();
        let exp = ((bits >> 23) & 0xff) as u8;
        let fraction = bits & 0x7f_ffff != 0;
        F8E8M0(if exp == 0xff || !fraction || exp == 0xfe {
            exp
        } else {
            exp + 1
        })
    }
}

value_semantics!(F8E8M0);

macro_rules! small_int {
    ($(#[$doc:meta])* $t:ident, $d:ident, $bits:expr, $signed:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $t(pub u8);

        impl $t {
            const MIN: i128 = if $signed { -(1 << ($bits - 1)) } else { 0 };
            const MAX: i128 = if $signed { (1 << ($bits - 1)) - 1 } else { (1 << $bits) - 1 };

            /// The value of the stored bits.
            pub fn value(self) -> i128 {
                let v = i128::from(self.0 & ((1 << $bits) - 1));
                if $signed && v > Self::MAX { v - (1 << $bits) } else { v }
            }
        }

        impl super::Element for $t {
            const DTYPE: super::DType = super::DType::$d;
        }

        impl super::Scalar for $t {
            fn to_num(self) -> Num {
                Num::Int(self.value())
            }
            fn from_num(n: Num) -> $t {
                let v = match n {
                    Num::Float(v) => {
                        let t = v.trunc();
                        if t.is_nan() || t < Self::MIN as f64 || t > Self::MAX as f64 {
                            0
                        } else {
                            t as i128
                        }
                    }
                    Num::Int(v) => v,
                    Num::Bool(v) => i128::from(v),
                };
                $t((v & ((1 << $bits) - 1)) as u8)
            }
        }

        impl PartialEq for $t {
            fn eq(&self, other: &$t) -> bool {
                self.value() == other.value()
            }
        }
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &$t) -> Option<Ordering> {
                self.value().partial_cmp(&other.value())
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.value())
            }
        }
    };
}

small_int!(
    /// 4-bit signed integer (-8..=7).
    I4, I4, 4, true
);
small_int!(
    /// 4-bit unsigned integer (0..=15).
    U4, U4, 4, false
);
small_int!(
    /// 2-bit signed integer (-2..=1).
    I2, I2, 2, true
);
small_int!(
    /// 2-bit unsigned integer (0..=3).
    U2, U2, 2, false
);

#[cfg(test)]
mod tests {
    use super::super::Scalar;
    use super::*;

    /// Every finite value of a format, from decoding every byte.
    fn finite_values<T: Scalar>(wrap: fn(u8) -> T, bits: u32) -> Vec<(u8, f64)> {
        (0..1u16 << bits)
            .map(|b| (b as u8, wrap(b as u8).to_f64()))
            .filter(|(_, v)| v.is_finite())
            .collect()
    }

    /// The naive reference: the nearest finite value, ties to the even
    /// (lowest bit clear) encoding, `None` beyond the largest finite value
    /// plus half its quantum.
    fn nearest(values: &[(u8, f64)], x: f64, max: f64, max_quantum: f64) -> Option<f64> {
        if x.abs() > max + max_quantum / 2.0
            || (x.abs() == max + max_quantum / 2.0
                && values.iter().any(|&(b, v)| v == max && b & 1 == 1))
        {
            return None;
        }
        let best = values
            .iter()
            .map(|&(b, v)| ((v - x).abs(), b & 1, v))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))?;
        Some(best.2)
    }

    fn check_format<T: Scalar>(wrap: fn(u8) -> T, bits: u32, max: f64, max_quantum: f64) {
        let values = finite_values(wrap, bits);
        let top = values.iter().map(|v| v.1).fold(0.0, f64::max);
        assert_eq!(top, max);
        let mut x = -2.0 * max;
        let step = max / 3000.0;
        while x <= 2.0 * max {
            let got = T::from_num(Num::Float(x)).to_f64();
            match nearest(&values, x, max, max_quantum) {
                Some(want) => assert_eq!(got, want, "{x}"),
                None => assert!(
                    got.is_infinite() || got.is_nan() || got.abs() == max,
                    "{x}: {got}"
                ),
            }
            x += step;
        }
        // every value converts back to itself
        for &(_, v) in &values {
            assert_eq!(T::from_num(Num::Float(v)).to_f64(), v);
        }
    }

    #[test]
    fn minifloats_round_to_the_nearest_value() {
        check_format(F8E4M3Fn, 8, 448.0, 32.0);
        check_format(F8E4M3Fnuz, 8, 240.0, 16.0);
        check_format(F8E5M2, 8, 57344.0, 8192.0);
        check_format(F8E5M2Fnuz, 8, 57344.0, 8192.0);
        check_format(F4E2M1, 4, 6.0, 2.0);
    }

    #[test]
    fn minifloat_specials() {
        let f = |x: f64| F8E5M2::from_num(Num::Float(x)).to_f64();
        assert_eq!(f(1e6), f64::INFINITY);
        assert_eq!(f(-f64::INFINITY), f64::NEG_INFINITY);
        assert!(F8E4M3Fn::from_num(Num::Float(1e6)).to_f64().is_nan());
        assert!(F8E4M3Fn::from_num(Num::Float(f64::NAN)).to_f64().is_nan());
        assert_eq!(F8E4M3Fn::from_num(Num::Float(-0.0)).0, 0x80);
        assert_eq!(F8E4M3Fnuz::from_num(Num::Float(-0.0)).0, 0);
        assert_eq!(F8E5M2Fnuz::from_num(Num::Float(-1e-9)).0, 0);
        assert_eq!(F4E2M1::from_num(Num::Float(f64::INFINITY)).to_f64(), 6.0);
        assert_eq!(F4E2M1::from_num(Num::Float(-0.25)).0, 0b1000);
    }

    #[test]
    fn e8m0_rounds_the_exponent_up() {
        let f = |x: f64| F8E8M0::from_num(Num::Float(x)).to_f64();
        assert_eq!(f(4.0), 4.0);
        assert_eq!(f(1.1), 2.0);
        assert_eq!(f(0.124), 0.125);
        assert_eq!(f(-0.5), 0.5);
        assert_eq!(f(0.0), 2f64.powi(-127));
        assert!(f(f64::INFINITY).is_nan());
        assert_eq!(f(f64::from(f32::MAX)), 2f64.powi(127));
    }

    #[test]
    fn small_ints_truncate_and_wrap() {
        let f = |x: f64| I4::from_num(Num::Float(x)).value();
        assert_eq!(
            (f(-8.0), f(7.9), f(-2.5), f(8.0), f(-9.0), f(f64::NAN)),
            (-8, 7, -2, 0, 0, 0)
        );
        assert_eq!(I4::from_num(Num::Int(9)).value(), -7);
        assert_eq!(U4::from_num(Num::Int(-1)).value(), 15);
        assert_eq!(U4::from_num(Num::Float(15.5)).value(), 15);
        assert_eq!(I2::from_num(Num::Float(-2.0)).value(), -2);
        assert_eq!(I2::from_num(Num::Float(2.0)).value(), 0);
        assert_eq!(U2::from_num(Num::Int(6)).value(), 2);
        assert_eq!(U2(3).to_num(), Num::Int(3));
    }
}
