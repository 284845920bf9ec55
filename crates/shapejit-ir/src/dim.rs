//! Symbolic dimensions: integers, named symbols, and polynomials of them.
//!
//! A [`Dim`] is a polynomial with integer coefficients over named symbols
//! (`batch`, `seq`), e.g. `batch*32`, `seq+1`, `batch*seq*8`. The representation
//! is canonical (monomials sorted, no zero coefficients), so structural equality
//! *is* algebraic equality: `batch*32 == 32*batch` and `(seq+1)-1 == seq`.
//!
//! **Invariant:** `terms` never holds a zero coefficient, and each monomial's
//! symbol list is sorted. The constant term is the empty monomial.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Most monomials [`Dim::checked_mul`] lets a product have.
pub const MAX_TERMS: usize = 1024;

/// A named symbolic dimension, such as `batch`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(Arc<str>);

impl Symbol {
    /// Creates a symbol with the given name.
    pub fn new(name: &str) -> Symbol {
        Symbol(Arc::from(name))
    }

    /// The symbol's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A dimension: a known integer or a polynomial of symbols.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dim {
    terms: BTreeMap<Vec<Symbol>, i64>,
}

impl Dim {
    /// A known dimension.
    pub fn known(n: i64) -> Dim {
        let mut terms = BTreeMap::new();
        if n != 0 {
            terms.insert(Vec::new(), n);
        }
        Dim { terms }
    }

    /// A dimension that is exactly one symbol.
    pub fn sym(name: &str) -> Dim {
        Dim::from_symbol(Symbol::new(name))
    }

    /// A dimension that is exactly one symbol.
    pub fn from_symbol(symbol: Symbol) -> Dim {
        let mut terms = BTreeMap::new();
        terms.insert(vec![symbol], 1);
        Dim { terms }
    }

    /// The value when the dim has no symbols.
    pub fn as_known(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The symbol when the dim is exactly one symbol with coefficient 1.
    pub fn as_symbol(&self) -> Option<&Symbol> {
        if self.terms.len() != 1 {
            return None;
        }
        let (mono, coef) = self.terms.iter().next()?;
        (mono.len() == 1 && *coef == 1).then(|| &mono[0])
    }

    /// True when the dim is a known integer.
    pub fn is_known(&self) -> bool {
        self.as_known().is_some()
    }

    /// True when no coefficient is negative: the value is then ≥ 0 whatever
    /// non-negative sizes the symbols take.
    pub fn is_nonnegative(&self) -> bool {
        self.terms.values().all(|&c| c >= 0)
    }

    /// Every symbol the dim mentions, sorted and deduplicated.
    pub fn symbols(&self) -> Vec<Symbol> {
        let mut out: Vec<Symbol> = self.terms.keys().flatten().cloned().collect();
        out.sort();
        out.dedup();
        out
    }

    /// Evaluates the dim with values for its symbols; `None` if one is unbound
    /// or the arithmetic overflows.
    pub fn eval(&self, value_of: &dyn Fn(&Symbol) -> Option<i64>) -> Option<i64> {
        let mut total: i64 = 0;
        for (mono, coef) in &self.terms {
            let mut term = *coef;
            for s in mono {
                term = term.checked_mul(value_of(s)?)?;
            }
            total = total.checked_add(term)?;
        }
        Some(total)
    }

    /// Replaces symbols by dims (symbols with no replacement are kept).
    pub fn substitute(&self, replace: &dyn Fn(&Symbol) -> Option<Dim>) -> Dim {
        let mut total = Dim::known(0);
        for (mono, coef) in &self.terms {
            let mut term = Dim::known(*coef);
            for s in mono {
                let factor = replace(s).unwrap_or_else(|| Dim::from_symbol(s.clone()));
                term = term * factor;
            }
            total = total + term;
        }
        total
    }

    /// `self * rhs`, or `None` when the product could have more than
    /// [`MAX_TERMS`] monomials (bounds the work hostile shapes can cause) or a
    /// coefficient overflows `i64`.
    pub fn checked_mul(&self, rhs: &Dim) -> Option<Dim> {
        if self.terms.len().saturating_mul(rhs.terms.len()) > MAX_TERMS {
            return None;
        }
        let mut raw = Vec::with_capacity(self.terms.len() * rhs.terms.len());
        for (ma, ca) in &self.terms {
            for (mb, cb) in &rhs.terms {
                let mut mono = ma.clone();
                mono.extend(mb.iter().cloned());
                raw.push((mono, ca.checked_mul(*cb)?));
            }
        }
        Dim::checked_from_terms(raw)
    }

    /// `self + rhs`, or `None` when a coefficient overflows `i64`.
    pub fn checked_add(&self, rhs: &Dim) -> Option<Dim> {
        Dim::checked_from_terms(self.terms.clone().into_iter().chain(rhs.terms.clone()))
    }

    /// `self - rhs`, or `None` when a coefficient overflows `i64`.
    pub fn checked_sub(&self, rhs: &Dim) -> Option<Dim> {
        let negated = rhs
            .terms
            .iter()
            .map(|(m, c)| Some((m.clone(), c.checked_neg()?)))
            .collect::<Option<Vec<_>>>()?;
        Dim::checked_from_terms(self.terms.clone().into_iter().chain(negated))
    }

    fn checked_from_terms(raw: impl IntoIterator<Item = (Vec<Symbol>, i64)>) -> Option<Dim> {
        let mut terms: BTreeMap<Vec<Symbol>, i64> = BTreeMap::new();
        for (mut mono, coef) in raw {
            mono.sort();
            let slot = terms.entry(mono).or_insert(0);
            *slot = slot.checked_add(coef)?;
        }
        terms.retain(|_, c| *c != 0);
        Some(Dim { terms })
    }

    /// Exact division by a known integer; `None` if some coefficient is not divisible.
    pub fn div_exact(&self, d: i64) -> Option<Dim> {
        if d == 0 {
            return None;
        }
        let mut terms = BTreeMap::new();
        for (mono, coef) in &self.terms {
            if coef.checked_rem(d)? != 0 {
                return None;
            }
            terms.insert(mono.clone(), coef.checked_div(d)?);
        }
        Some(Dim { terms })
    }

    /// Exact division by another dim when the quotient is a known integer or
    /// the divisor is a single monomial dividing every term.
    pub fn div_dim(&self, divisor: &Dim) -> Option<Dim> {
        if let Some(d) = divisor.as_known() {
            return self.div_exact(d);
        }
        if divisor.terms.len() != 1 {
            // e.g. (2*seq+2) / (seq+1): try a known quotient.
            let (mono, coef) = divisor.terms.iter().next_back()?;
            let num = self.terms.get(mono)?;
            if num.checked_rem(*coef)? != 0 {
                return None;
            }
            let q = Dim::known(num.checked_div(*coef)?);
            return (divisor.clone() * q.clone() == *self).then_some(q);
        }
        let (dmono, dcoef) = divisor.terms.iter().next()?;
        let mut terms = BTreeMap::new();
        for (mono, coef) in &self.terms {
            if coef.checked_rem(*dcoef)? != 0 {
                return None;
            }
            let mut rest = mono.clone();
            for s in dmono {
                let pos = rest.iter().position(|x| x == s)?;
                rest.remove(pos);
            }
            terms.insert(rest, coef.checked_div(*dcoef)?);
        }
        Some(Dim { terms })
    }

    fn from_terms(raw: impl IntoIterator<Item = (Vec<Symbol>, i64)>) -> Dim {
        let mut terms: BTreeMap<Vec<Symbol>, i64> = BTreeMap::new();
        for (mut mono, coef) in raw {
            mono.sort();
            // Wrapping: overflow must not panic. Dims from user files are built
            // with the `checked_*` forms, which report it instead.
            let slot = terms.entry(mono).or_insert(0);
            *slot = slot.wrapping_add(coef);
        }
        terms.retain(|_, c| *c != 0);
        Dim { terms }
    }

    /// Parses the text form (`batch*32`, `seq+1`, `(a+1)*2`, `64`).
    pub fn parse(text: &str) -> Result<Dim, DimParseError> {
        let mut p = DimParser {
            src: text.as_bytes(),
            pos: 0,
            depth: 0,
        };
        let d = p.expr()?;
        p.skip_ws();
        if p.pos != p.src.len() {
            return Err(p.error("expected an operator or the end of the dim"));
        }
        Ok(d)
    }
}

impl From<i64> for Dim {
    fn from(n: i64) -> Dim {
        Dim::known(n)
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::known(n as i64)
    }
}

impl std::ops::Add for Dim {
    type Output = Dim;
    fn add(self, rhs: Dim) -> Dim {
        Dim::from_terms(self.terms.into_iter().chain(rhs.terms))
    }
}

impl std::ops::Sub for Dim {
    type Output = Dim;
    fn sub(self, rhs: Dim) -> Dim {
        Dim::from_terms(
            self.terms
                .into_iter()
                .chain(rhs.terms.into_iter().map(|(m, c)| (m, c.wrapping_neg()))),
        )
    }
}

impl std::ops::Mul for Dim {
    type Output = Dim;
    fn mul(self, rhs: Dim) -> Dim {
        let mut raw = Vec::new();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &rhs.terms {
                let mut mono = ma.clone();
                mono.extend(mb.iter().cloned());
                raw.push((mono, ca.wrapping_mul(*cb)));
            }
        }
        Dim::from_terms(raw)
    }
}

impl fmt::Display for Dim {
    /// Prints monomials with the highest degree first, then the constant:
    /// `batch*seq*8+batch+1`; coefficients follow the symbols (`batch*32`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        let mut ordered: Vec<(&Vec<Symbol>, &i64)> = self.terms.iter().collect();
        ordered.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        for (i, (mono, coef)) in ordered.into_iter().enumerate() {
            let mag = coef.unsigned_abs();
            if i == 0 {
                if *coef < 0 {
                    f.write_str("-")?;
                }
            } else {
                f.write_str(if *coef < 0 { "-" } else { "+" })?;
            }
            if mono.is_empty() {
                write!(f, "{mag}")?;
                continue;
            }
            let names: Vec<&str> = mono.iter().map(Symbol::name).collect();
            f.write_str(&names.join("*"))?;
            if mag != 1 {
                write!(f, "*{mag}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An error parsing a dim expression: the byte offset and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at offset {offset}: {message}")]
pub struct DimParseError {
    /// Byte offset into the dim text.
    pub offset: usize,
    /// What was expected there.
    pub message: String,
}

/// Deepest parenthesis nesting [`Dim::parse`] accepts (bounds recursion).
const MAX_DIM_DEPTH: usize = 32;
/// Most monomials a parsed dim may have (bounds `(a+b)*(c+d)*...` blow-up).
const MAX_DIM_TERMS: usize = 64;

fn overflow(offset: usize) -> DimParseError {
    DimParseError {
        offset,
        message: "the dim arithmetic overflows a 64-bit integer".into(),
    }
}

struct DimParser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
}

impl DimParser<'_> {
    fn error(&self, message: &str) -> DimParseError {
        DimParseError {
            offset: self.pos,
            message: message.to_string(),
        }
    }

    fn skip_ws(&mut self) {
        while self.pos < self.src.len() && self.src[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.src.get(self.pos).copied()
    }

    fn expr(&mut self) -> Result<Dim, DimParseError> {
        let mut acc = self.term()?;
        loop {
            match self.peek() {
                Some(b'+') => {
                    self.pos += 1;
                    let at = self.pos;
                    acc = acc.checked_add(&self.term()?).ok_or_else(|| overflow(at))?;
                }
                Some(b'-') => {
                    self.pos += 1;
                    let at = self.pos;
                    acc = acc.checked_sub(&self.term()?).ok_or_else(|| overflow(at))?;
                }
                _ => return Ok(acc),
            }
        }
    }

    fn term(&mut self) -> Result<Dim, DimParseError> {
        let mut acc = self.atom()?;
        while self.peek() == Some(b'*') {
            self.pos += 1;
            let at = self.pos;
            acc = acc.checked_mul(&self.atom()?).ok_or_else(|| overflow(at))?;
            if acc.terms.len() > MAX_DIM_TERMS {
                return Err(self.error("dim expression has too many terms"));
            }
        }
        Ok(acc)
    }

    fn atom(&mut self) -> Result<Dim, DimParseError> {
        match self.peek() {
            Some(b'(') => {
                if self.depth >= MAX_DIM_DEPTH {
                    return Err(self.error("dim expression nested too deeply"));
                }
                self.pos += 1;
                self.depth += 1;
                let d = self.expr()?;
                self.depth -= 1;
                if self.peek() != Some(b')') {
                    return Err(self.error("expected ')'"));
                }
                self.pos += 1;
                Ok(d)
            }
            Some(b'-') => {
                if self.depth >= MAX_DIM_DEPTH {
                    return Err(self.error("dim expression nested too deeply"));
                }
                self.pos += 1;
                self.depth += 1;
                let at = self.pos;
                let d = self.atom();
                self.depth -= 1;
                Dim::known(0).checked_sub(&d?).ok_or_else(|| overflow(at))
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.pos;
                while self.pos < self.src.len() && self.src[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
                text.parse::<i64>()
                    .map(Dim::known)
                    .map_err(|_| DimParseError {
                        offset: start,
                        message: "integer too large".into(),
                    })
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.pos;
                while self.pos < self.src.len()
                    && (self.src[self.pos].is_ascii_alphanumeric() || self.src[self.pos] == b'_')
                {
                    self.pos += 1;
                }
                // Invariant: the slice holds only ASCII identifier bytes.
                let name = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
                Ok(Dim::sym(name))
            }
            _ => Err(self.error("expected an integer, a symbol or '('")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_equality() {
        let b = Dim::sym("batch");
        assert_eq!(b.clone() * Dim::known(32), Dim::known(32) * b.clone());
        assert_eq!((b.clone() + Dim::known(1)) - Dim::known(1), b);
        assert_eq!((b.clone() * Dim::known(32)).div_exact(32), Some(b.clone()));
        assert_eq!((b.clone() * Dim::known(32)).div_exact(3), None);
        let bs = Dim::sym("batch") * Dim::sym("seq");
        assert_eq!(bs.div_dim(&Dim::sym("seq")), Some(b));
    }

    #[test]
    fn print_parse_round_trip() {
        for text in [
            "batch*32",
            "seq+1",
            "batch*seq*8+batch-3",
            "64",
            "0",
            "-batch",
        ] {
            let d = Dim::parse(text).unwrap();
            assert_eq!(d.to_string(), text);
            assert_eq!(Dim::parse(&d.to_string()).unwrap(), d);
        }
        assert_eq!(Dim::parse("(a+1)*2").unwrap().to_string(), "a*2+2");
        assert!(Dim::parse("a+").is_err());
        assert!(Dim::parse("a b").is_err());
    }

    #[test]
    fn overflowing_dim_arithmetic_is_an_error() {
        // 4611686018427387904 * 4 = 2^64: wrapped, the monomial vanished and this
        // printed as `3`.
        let err = Dim::parse("n*4611686018427387904*4+3").unwrap_err();
        assert_eq!(
            err.to_string(),
            "at offset 22: the dim arithmetic overflows a 64-bit integer"
        );
        assert!(Dim::parse("9223372036854775807+1").is_err());
        assert!(Dim::parse("-9223372036854775807-2").is_err());
        assert!(Dim::parse("n*9223372036854775807+n").is_err());
        assert_eq!(
            Dim::parse("n*4611686018427387903*2-n*9223372036854775805").unwrap(),
            Dim::sym("n")
        );
        let big = Dim::known(i64::MAX);
        assert!(big.checked_add(&Dim::known(1)).is_none());
        assert!(big.checked_mul(&Dim::known(2)).is_none());
        assert!(Dim::known(i64::MIN).checked_sub(&Dim::known(1)).is_none());
    }

    #[test]
    fn eval_binds_symbols() {
        let d = Dim::parse("batch*32+1").unwrap();
        let v = d.eval(&|s| (s.name() == "batch").then_some(4));
        assert_eq!(v, Some(129));
        assert_eq!(d.eval(&|_| None), None);
    }
}
