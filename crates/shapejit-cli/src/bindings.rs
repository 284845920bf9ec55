//! Symbol bindings (`--dim SYMBOL=N`) and seeded random inputs.
//!
//! **Invariant:** an input shape is made concrete only when every symbol it names is
//! bound; an unbound symbol is an error that names the input and the symbol and says
//! to pass `--dim`.
//!
//! **Invariant:** random inputs are admitted by an [`InputBudget`] (the module's
//! `max_memory`) before any byte is allocated, and their storage is reserved
//! fallibly: a huge `--dim` is an error naming the input, never an abort.

use anyhow::{Context, Result, bail};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shapejit::{DType, Tensor, ValueType};
use std::collections::BTreeMap;

/// Symbol values by name.
pub type Bindings = BTreeMap<String, usize>;

/// Parses `SYMBOL=N` (for clap's `value_parser`).
pub fn parse_binding(text: &str) -> Result<(String, usize), String> {
    let (sym, value) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not SYMBOL=N"))?;
    let sym = sym.trim();
    if sym.is_empty() {
        return Err(format!("'{text}' has no symbol name before '='"));
    }
    let n = value
        .trim()
        .parse::<usize>()
        .map_err(|_| format!("'{}' is not a non-negative integer", value.trim()))?;
    Ok((sym.to_string(), n))
}

/// Parses `--timeout SECONDS` (positive, finite; for clap's `value_parser`).
pub fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("'{text}': the timeout must be positive"));
    }
    std::time::Duration::try_from_secs_f64(secs).map_err(|_| format!("'{text}' is too large"))
}

/// The limits of one run under `--timeout`.
pub fn run_limits(timeout: Option<std::time::Duration>) -> shapejit::RunOptions {
    timeout
        .map(shapejit::RunOptions::timeout)
        .unwrap_or_default()
}

/// Collects `--dim` pairs, rejecting a symbol bound twice to different values.
pub fn collect(pairs: &[(String, usize)]) -> Result<Bindings> {
    let mut out = Bindings::new();
    for (sym, n) in pairs {
        if let Some(old) = out.insert(sym.clone(), *n)
            && old != *n
        {
            bail!("--dim {sym} is given twice ({old} and {n})");
        }
    }
    Ok(out)
}

/// The concrete shape of input `name` of type `ty` under `bindings`.
pub fn concrete_shape(name: &str, ty: &ValueType, bindings: &Bindings) -> Result<Vec<usize>> {
    ty.shape
        .dims()
        .iter()
        .map(|d| {
            if let Some(sym) = d
                .symbols()
                .into_iter()
                .find(|s| !bindings.contains_key(s.name()))
            {
                bail!("input '{name}' ({ty}) needs a value for symbol '{sym}': pass --dim {sym}=N");
            }
            let v = d.eval(&|s| bindings.get(s.name()).and_then(|&n| i64::try_from(n).ok()));
            let v = v.with_context(|| format!("dim '{d}' of input '{name}' overflows"))?;
            usize::try_from(v)
                .with_context(|| format!("dim '{d}' of input '{name}' is negative ({v})"))
        })
        .collect()
}

/// The memory the inputs built so far hold, against the module's limit.
#[derive(Debug)]
pub struct InputBudget {
    limit: usize,
    used: u128,
}

impl InputBudget {
    /// Nothing used yet; at most `limit` bytes (`Options::max_memory`).
    pub fn new(limit: usize) -> InputBudget {
        InputBudget { limit, used: 0 }
    }

    /// Admits an input of `shape` and `dtype`, or says why it does not fit.
    pub fn admit(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<()> {
        let bytes = shapejit::ir::tensor::byte_len(dtype, shape);
        let used = self.used.saturating_add(bytes);
        if used > self.limit as u128 {
            bail!(
                "input '{name}' ({dtype}{shape:?}) needs {bytes} bytes; with the inputs before it that is {used}, over the memory limit of {} bytes (Options::max_memory, the machine's memory by default)",
                self.limit
            );
        }
        self.used = used;
        Ok(())
    }
}

/// `n` values from `next`, reserved fallibly.
fn generated<T>(n: usize, next: impl FnMut(usize) -> T) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| anyhow::anyhow!("cannot allocate {n} elements (out of memory)"))?;
    v.extend((0..n).map(next));
    Ok(v)
}

/// A random tensor: floats uniform in [-1, 1) (drawn as f32, converted to
/// the dtype), integers in 0..10, bools fair.
pub fn random_tensor(dtype: DType, shape: &[usize], rng: &mut SmallRng) -> Result<Tensor> {
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .context("input shape has too many elements")?;
    let tensor = match dtype {
        DType::F32 => Tensor::from_vec(generated(n, |_| rng.random_range(-1.0f32..1.0))?, shape),
        DType::I32 => Tensor::from_vec(generated(n, |_| rng.random_range(0i32..10))?, shape),
        DType::I64 => Tensor::from_vec(generated(n, |_| rng.random_range(0i64..10))?, shape),
        DType::Bool => Tensor::from_vec(generated(n, |_| rng.random_bool(0.5))?, shape),
        other if other.is_float() => {
            Tensor::from_vec(generated(n, |_| rng.random_range(-1.0f32..1.0))?, shape)
                .and_then(|t| t.cast(other))
        }
        other => Tensor::from_vec(generated(n, |_| rng.random_range(0i64..10))?, shape)
            .and_then(|t| t.cast(other)),
    };
    Ok(tensor?)
}

/// A seeded generator for random inputs.
pub fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shapejit::{Dim, Shape};

    #[test]
    fn parses_bindings() {
        assert_eq!(parse_binding("batch=16"), Ok(("batch".to_string(), 16)));
        for bad in ["batch", "=3", "batch=x", "batch=-1"] {
            assert!(parse_binding(bad).is_err(), "{bad}");
        }
        assert!(collect(&[("b".into(), 1), ("b".into(), 2)]).is_err());
        assert!(collect(&[("b".into(), 1), ("b".into(), 1)]).is_ok());
    }

    #[test]
    fn unbound_symbols_are_named() {
        let ty = ValueType {
            dtype: DType::F32,
            shape: Shape(vec![Dim::sym("batch") * Dim::known(2), Dim::known(3)]),
        };
        let err = concrete_shape("x", &ty, &Bindings::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'x'") && err.contains("--dim batch=N"),
            "{err}"
        );
        let bound = Bindings::from([("batch".to_string(), 4)]);
        assert_eq!(concrete_shape("x", &ty, &bound).unwrap(), [8, 3]);
    }

    #[test]
    fn random_tensors_are_seeded() {
        let a = random_tensor(DType::F32, &[2, 3], &mut rng(1)).unwrap();
        assert_eq!(a, random_tensor(DType::F32, &[2, 3], &mut rng(1)).unwrap());
        assert_ne!(a, random_tensor(DType::F32, &[2, 3], &mut rng(2)).unwrap());
        assert!(
            a.as_slice::<f32>()
                .unwrap()
                .iter()
                .all(|v| (-1.0..1.0).contains(v))
        );
    }
}
