//! Element types of tensors: the one dtype table.
//!
//! Each dtype has a fixed byte size, a stable lowercase name (the `.sjir`
//! syntax: `f32`, `f16`, `bf16`, `f64`, `i8`, `i16`, `i32`, `i64`, `u8`,
//! `u16`, `u32`, `u64`, `bool`), and a **compute dtype** ([`DType::compute`]):
//! the dtype the importer computes it in for ops that have kernels only for
//! f32, i32, i64 and bool. f16, bf16 and f64 compute in f32 (each op rounds once
//! to the narrow type at its end; the importer keeps f64 for the elementwise
//! arithmetic that has f64 kernels); the 8-, 16- and 32-bit integers compute in i64,
//! where every value and every wrapping result is exact once cast back; u64
//! computes in i64 by its bits (sums, differences, products and left shifts are
//! exact; division, remainders, extremes and right shifts read a value at or
//! above 2^63 as negative; comparisons run on every dtype without promotion).
//!
//! The narrow types of ONNX quantization (`f8e4m3fn`, `f8e4m3fnuz`, `f8e5m2`,
//! `f8e5m2fnuz`, `f8e8m0`, `f4e2m1`, `i4`, `u4`, `i2`, `u2`) are storage
//! types, one byte per element, computing in f32 or i64 ([`narrow`] gives
//! their conversion rules).
//!
//! [`Scalar`] converts between element types with one rule for every pair (used by
//! the `cast` op and [`crate::Tensor::cast`]): float → int truncates toward zero
//! and saturates (NaN → 0); int → int wraps; int → float and float → float round
//! to nearest even; → bool is `!= 0` (NaN → true); bool → number is 0 or 1.
//!
//! **Invariant:** every dtype has a fixed byte size and a stable name; the
//! compute dtype of a dtype is one of f32, i32, i64, bool and is its own compute
//! dtype.

use std::fmt;

pub use half::{bf16, f16};
pub use narrow::{F4E2M1, F8E4M3Fn, F8E4M3Fnuz, F8E5M2, F8E5M2Fnuz, F8E8M0, I2, I4, U2, U4};

pub mod narrow;

/// The element type of a tensor.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer (shapes, indices).
    I64,
    /// Boolean, one byte per element (0 or 1).
    Bool,
    /// 16-bit IEEE float (computed in f32).
    F16,
    /// bfloat16 (computed in f32).
    Bf16,
    /// 64-bit IEEE float (computed in f32).
    F64,
    /// 8-bit signed integer.
    I8,
    /// 16-bit signed integer.
    I16,
    /// 8-bit unsigned integer.
    U8,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
    /// float8 e4m3, no inf (computed in f32).
    F8E4M3Fn,
    /// float8 e4m3, no inf, no -0 (computed in f32).
    F8E4M3Fnuz,
    /// float8 e5m2 (computed in f32).
    F8E5M2,
    /// float8 e5m2, no inf, no -0 (computed in f32).
    F8E5M2Fnuz,
    /// float8 exponent only, a power of two (computed in f32).
    F8E8M0,
    /// float4 e2m1, one per byte (computed in f32).
    F4E2M1,
    /// 4-bit signed integer, one per byte (computed in i64).
    I4,
    /// 4-bit unsigned integer, one per byte (computed in i64).
    U4,
    /// 2-bit signed integer, one per byte (computed in i64).
    I2,
    /// 2-bit unsigned integer, one per byte (computed in i64).
    U2,
}

impl DType {
    /// All dtypes, in a stable order.
    pub const ALL: [DType; 23] = [
        DType::F32,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::F16,
        DType::Bf16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F8E4M3Fn,
        DType::F8E4M3Fnuz,
        DType::F8E5M2,
        DType::F8E5M2Fnuz,
        DType::F8E8M0,
        DType::F4E2M1,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F8E4M3Fn
            | DType::F8E4M3Fnuz
            | DType::F8E5M2
            | DType::F8E5M2Fnuz
            | DType::F8E8M0
            | DType::F4E2M1
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => 1,
            DType::F16 | DType::Bf16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::I64 | DType::F64 | DType::U64 => 8,
        }
    }

    /// The lowercase name used in text formats.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F8E4M3Fn => "f8e4m3fn",
            DType::F8E4M3Fnuz => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2Fnuz => "f8e5m2fnuz",
            DType::F8E8M0 => "f8e8m0",
            DType::F4E2M1 => "f4e2m1",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I2 => "i2",
            DType::U2 => "u2",
        }
    }

    /// True for the narrow storage types of ONNX quantization (the float8
    /// and float4 formats, the 4- and 2-bit integers; see [`narrow`]).
    pub fn is_narrow(self) -> bool {
        matches!(
            self,
            DType::F8E4M3Fn
                | DType::F8E4M3Fnuz
                | DType::F8E5M2
                | DType::F8E5M2Fnuz
                | DType::F8E8M0
                | DType::F4E2M1
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    /// Whether a `bitcast` (bits reinterpreted) to `to` is allowed: the byte
    /// sizes agree, and `to` has no invalid bit patterns the source could
    /// hold (bool and the sub-byte types only from themselves). The one rule
    /// for inference and the VM.
    pub fn bitcast_to(self, to: DType) -> Result<(), String> {
        if self.size() != to.size() {
            return Err(format!(
                "bitcast from {self} ({} bytes) to {to} ({} bytes)",
                self.size(),
                to.size()
            ));
        }
        if to.bits() < 8 && self != to {
            return Err(format!(
                "bitcast from {self} to {to}, whose bytes do not hold every bit pattern"
            ));
        }
        Ok(())
    }

    /// The bits of each stored byte an element uses: 1 for bool, 4 or 2 for
    /// the sub-byte types, `8 * size` otherwise (the other bits are zero).
    pub fn bits(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F4E2M1 | DType::I4 | DType::U4 => 4,
            DType::I2 | DType::U2 => 2,
            _ => 8 * self.size(),
        }
    }

    /// Parses a dtype name (`f32`, `i64`, `u8`, `bool`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for floating-point dtypes.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::F16
                | DType::Bf16
                | DType::F64
                | DType::F8E4M3Fn
                | DType::F8E4M3Fnuz
                | DType::F8E5M2
                | DType::F8E5M2Fnuz
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// True for integer dtypes (signed or unsigned).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I32
                | DType::I64
                | DType::I8
                | DType::I16
                | DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    /// The dtype ops compute in when they have no kernel for this one (see the
    /// module docs): f32, i32, i64 and bool compute in themselves.
    pub fn compute(self) -> DType {
        match self {
            DType::F16
            | DType::Bf16
            | DType::F64
            | DType::F8E4M3Fn
            | DType::F8E4M3Fnuz
            | DType::F8E5M2
            | DType::F8E5M2Fnuz
            | DType::F8E8M0
            | DType::F4E2M1 => DType::F32,
            DType::I8
            | DType::I16
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => DType::I64,
            DType::F32 | DType::I32 | DType::I64 | DType::Bool => self,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    /// Types with no padding and no invalid bytes when read as `u8`.
    pub trait PlainData: Copy + Send + Sync + 'static {}
    impl PlainData for f32 {}
    impl PlainData for f64 {}
    impl PlainData for half::f16 {}
    impl PlainData for half::bf16 {}
    impl PlainData for i8 {}
    impl PlainData for i16 {}
    impl PlainData for i32 {}
    impl PlainData for i64 {}
    impl PlainData for u8 {}
    impl PlainData for u16 {}
    impl PlainData for u32 {}
    impl PlainData for u64 {}
    impl PlainData for bool {}
    impl PlainData for super::narrow::F8E4M3Fn {}
    impl PlainData for super::narrow::F8E4M3Fnuz {}
    impl PlainData for super::narrow::F8E5M2 {}
    impl PlainData for super::narrow::F8E5M2Fnuz {}
    impl PlainData for super::narrow::F8E8M0 {}
    impl PlainData for super::narrow::F4E2M1 {}
    impl PlainData for super::narrow::I4 {}
    impl PlainData for super::narrow::U4 {}
    impl PlainData for super::narrow::I2 {}
    impl PlainData for super::narrow::U2 {}
}
pub(crate) use sealed::PlainData;

/// A Rust type that can be a tensor element (sealed: one per [`DType`]).
pub trait Element: PlainData + Default + PartialEq + PartialOrd + fmt::Debug + Scalar {
    /// The matching dtype.
    const DTYPE: DType;
}

/// An element value on its way from one dtype to another: every float is
/// exact as `f64`, every integer as `i128`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    /// a float value
    Float(f64),
    /// an integer value
    Int(i128),
    /// a boolean
    Bool(bool),
}

/// Conversion of element values to and from [`Num`] (the module docs give the
/// rule for each pair).
pub trait Scalar: Copy {
    /// The value, exactly.
    fn to_num(self) -> Num;
    /// The value converted to this type.
    fn from_num(n: Num) -> Self;
    /// The value as `f64` (rounded for integers beyond 2^53).
    fn to_f64(self) -> f64 {
        match self.to_num() {
            Num::Float(v) => v,
            Num::Int(v) => v as f64,
            Num::Bool(v) => v as u8 as f64,
        }
    }
}

macro_rules! element_float {
    ($t:ty, $d:ident, $to:expr, $from_f64:expr, $from_int:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
        impl Scalar for $t {
            fn to_num(self) -> Num {
                Num::Float($to(self))
            }
            fn from_num(n: Num) -> $t {
                match n {
                    Num::Float(v) => $from_f64(v),
                    Num::Int(v) => $from_int(v),
                    Num::Bool(v) => $from_int(v as i128),
                }
            }
        }
    };
}

// An integer rounds to f16/bf16 through f64, which holds it exactly up to
// 2^53 (beyond that it rounds twice).
element_float!(f32, F32, |x: f32| x as f64, |v: f64| v as f32, |v: i128| v
    as f32);
element_float!(f64, F64, |x: f64| x, |v: f64| v, |v: i128| v as f64);
element_float!(f16, F16, |x: f16| x.to_f64(), f16::from_f64, |v: i128| {
    f16::from_f64(v as f64)
});
element_float!(
    bf16,
    Bf16,
    |x: bf16| x.to_f64(),
    bf16::from_f64,
    |v: i128| bf16::from_f64(v as f64)
);

macro_rules! element_int {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
        impl Scalar for $t {
            fn to_num(self) -> Num {
                Num::Int(self as i128)
            }
            fn from_num(n: Num) -> $t {
                match n {
                    Num::Float(v) => v as $t,
                    Num::Int(v) => v as $t,
                    Num::Bool(v) => v as $t,
                }
            }
        }
    };
}
element_int!(i8, I8);
element_int!(i16, I16);
element_int!(i32, I32);
element_int!(i64, I64);
element_int!(u8, U8);
element_int!(u16, U16);
element_int!(u32, U32);
element_int!(u64, U64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
}
impl Scalar for bool {
    fn to_num(self) -> Num {
        Num::Bool(self)
    }
    fn from_num(n: Num) -> bool {
        match n {
            Num::Float(v) => v != 0.0,
            Num::Int(v) => v != 0,
            Num::Bool(v) => v,
        }
    }
}

/// Runs `$body` with `$T` bound to the Rust element type of `$dtype`.
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::F16 => {
                type $T = $crate::dtype::f16;
                $body
            }
            $crate::DType::Bf16 => {
                type $T = $crate::dtype::bf16;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::U16 => {
                type $T = u16;
                $body
            }
            $crate::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::DType::U64 => {
                type $T = u64;
                $body
            }
            $crate::DType::F8E4M3Fn => {
                type $T = $crate::dtype::F8E4M3Fn;
                $body
            }
            $crate::DType::F8E4M3Fnuz => {
                type $T = $crate::dtype::F8E4M3Fnuz;
                $body
            }
            $crate::DType::F8E5M2 => {
                type $T = $crate::dtype::F8E5M2;
                $body
            }
            $crate::DType::F8E5M2Fnuz => {
                type $T = $crate::dtype::F8E5M2Fnuz;
                $body
            }
            $crate::DType::F8E8M0 => {
                type $T = $crate::dtype::F8E8M0;
                $body
            }
            $crate::DType::F4E2M1 => {
                type $T = $crate::dtype::F4E2M1;
                $body
            }
            $crate::DType::I4 => {
                type $T = $crate::dtype::I4;
                $body
            }
            $crate::DType::U4 => {
                type $T = $crate::dtype::U4;
                $body
            }
            $crate::DType::I2 => {
                type $T = $crate::dtype::I2;
                $body
            }
            $crate::DType::U2 => {
                type $T = $crate::dtype::U2;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(d.compute().compute(), d.compute());
            assert!(matches!(
                d.compute(),
                DType::F32 | DType::I32 | DType::I64 | DType::Bool
            ));
            assert_eq!(d.is_float(), d.compute() == DType::F32, "{d}");
            let size = with_dtype!(d, T => std::mem::size_of::<T>());
            assert_eq!(size, d.size(), "{d}");
            let dt = with_dtype!(d, T => <T as Element>::DTYPE);
            assert_eq!(dt, d);
        }
    }

    #[test]
    fn conversions_follow_the_documented_rule() {
        // float -> int truncates toward zero and saturates; NaN -> 0
        assert_eq!(i8::from_num((-2.9f32).to_num()), -2);
        assert_eq!(u8::from_num(300.5f64.to_num()), 255);
        assert_eq!(u8::from_num((-1.0f32).to_num()), 0);
        assert_eq!(i32::from_num(f32::NAN.to_num()), 0);
        // int -> int wraps
        assert_eq!(u8::from_num(300i64.to_num()), 44);
        assert_eq!(i8::from_num(200u8.to_num()), -56);
        assert_eq!(u64::from_num((-1i64).to_num()), u64::MAX);
        assert_eq!(i64::from_num(u64::MAX.to_num()), -1);
        // int -> float rounds once (2^24 + 1 is not an f32)
        assert_eq!(f32::from_num(16_777_217i64.to_num()), 16_777_216.0);
        assert_eq!(f64::from_num(16_777_217i64.to_num()), 16_777_217.0);
        // float -> narrow float rounds to nearest even, overflows to inf
        let ulp = 2f32.powi(-10);
        assert_eq!(
            f16::from_num(f64::from(1.0 + ulp).to_num()).to_f32(),
            1.0 + ulp
        );
        // halfway between 1 and 1 + ulp: ties to the even 1
        assert_eq!(f16::from_num((1.0 + ulp / 2.0).to_num()).to_f32(), 1.0);
        assert!(f16::from_num(70000.0f32.to_num()).to_f32().is_infinite());
        assert_eq!(bf16::from_num(3.0f32.to_num()).to_f32(), 3.0);
        // bool
        assert!(bool::from_num(f32::NAN.to_num()));
        assert!(!bool::from_num(0u16.to_num()));
        assert_eq!(f16::from_num(true.to_num()).to_f32(), 1.0);
        assert_eq!(u32::from_num(true.to_num()), 1);
    }
}
