//! Shapes: lists of [`Dim`]s, printed `[batch, 32, 256]`.

use crate::dim::{Dim, DimParseError};
use std::fmt;

/// A tensor shape whose dims may be symbolic.
#[derive(Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    /// A shape of known dims.
    pub fn known(dims: &[usize]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::from(d)).collect())
    }

    /// The scalar shape `[]`.
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The dims.
    pub fn dims(&self) -> &[Dim] {
        &self.0
    }

    /// All dims as integers, when every dim is known.
    pub fn as_known(&self) -> Option<Vec<usize>> {
        self.0
            .iter()
            .map(|d| d.as_known().and_then(|n| usize::try_from(n).ok()))
            .collect()
    }

    /// The element count as a dim (product of all dims).
    pub fn numel(&self) -> Dim {
        self.0.iter().cloned().fold(Dim::known(1), |a, b| a * b)
    }

    /// The element count, or `None` when the product would exceed
    /// [`crate::dim::MAX_TERMS`] monomials (see [`Dim::checked_mul`]).
    pub fn checked_numel(&self) -> Option<Dim> {
        self.0
            .iter()
            .try_fold(Dim::known(1), |a, b| a.checked_mul(b))
    }

    /// Parses `[batch, 32, 256]` (brackets required, `[]` is a scalar).
    pub fn parse(text: &str) -> Result<Shape, DimParseError> {
        let t = text.trim();
        let inner = t
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or(DimParseError {
                offset: 0,
                message: "expected '[' dims ']'".into(),
            })?;
        if inner.trim().is_empty() {
            return Ok(Shape::scalar());
        }
        let mut dims = Vec::new();
        let mut offset = t.len() - t.trim_start().len() + 1;
        for part in inner.split(',') {
            dims.push(Dim::parse(part).map_err(|e| DimParseError {
                offset: offset + e.offset,
                ..e
            })?);
            offset += part.len() + 1;
        }
        Ok(Shape(dims))
    }
}

impl From<Vec<Dim>> for Shape {
    fn from(dims: Vec<Dim>) -> Shape {
        Shape(dims)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Builds a [`Shape`] from integers and symbol names: `shape!["batch", 32, 256]`.
#[macro_export]
macro_rules! shape {
    ($($d:expr),* $(,)?) => {
        $crate::Shape(vec![$($crate::IntoDim::into_dim($d)),*])
    };
}

/// Conversion used by [`shape!`]: integers become known dims, strings are parsed
/// as dim expressions.
pub trait IntoDim {
    /// Converts to a dim.
    fn into_dim(self) -> Dim;
}

impl IntoDim for i64 {
    fn into_dim(self) -> Dim {
        Dim::known(self)
    }
}
impl IntoDim for i32 {
    fn into_dim(self) -> Dim {
        Dim::known(self as i64)
    }
}
impl IntoDim for usize {
    fn into_dim(self) -> Dim {
        Dim::known(self as i64)
    }
}
impl IntoDim for Dim {
    fn into_dim(self) -> Dim {
        self
    }
}
impl IntoDim for &str {
    /// Panics on a malformed expression: the macro is for literals in code.
    fn into_dim(self) -> Dim {
        Dim::parse(self).unwrap_or_else(|e| panic!("bad dim literal {self:?}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_round_trip() {
        let s = shape!["batch", 32, "seq+1"];
        assert_eq!(s.to_string(), "[batch, 32, seq+1]");
        assert_eq!(Shape::parse(&s.to_string()).unwrap(), s);
        assert_eq!(Shape::parse("[]").unwrap(), Shape::scalar());
        assert!(Shape::parse("[a, +]").is_err());
        assert_eq!(s.numel().to_string(), "batch*seq*32+batch*32");
    }
}
