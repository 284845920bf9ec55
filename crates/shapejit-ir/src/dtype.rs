//! Element types of tensors.
//!
//! **Invariant:** every dtype has a fixed byte size and a stable lowercase name
//! (`f32`, `i32`, `i64`, `bool`); the name is the `.sjir` syntax.

use std::fmt;

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
}

impl DType {
    /// All dtypes, in a stable order.
    pub const ALL: [DType; 4] = [DType::F32, DType::I32, DType::I64, DType::Bool];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// The lowercase name used in text formats.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    /// Parses a dtype name (`f32`, `i32`, `i64`, `bool`).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for floating-point dtypes.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32)
    }

    /// True for integer dtypes.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
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
    impl PlainData for i32 {}
    impl PlainData for i64 {}
    impl PlainData for bool {}
    impl PlainData for u64 {}
}
pub(crate) use sealed::PlainData;

/// A Rust type that can be a tensor element (sealed: f32, i32, i64, bool).
pub trait Element: PlainData + Default {
    /// The matching dtype.
    const DTYPE: DType;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
}
