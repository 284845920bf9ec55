//! `.npy` files in and out (f32, i32, i64, bool; C order, little or big endian).
//!
//! **Invariant:** a tensor read from a file has exactly the file's shape and
//! element count; anything else (Fortran order, other dtypes, truncated data) is an
//! error naming the file.

use anyhow::{Context, Result, bail};
use shapejit::{DType, Tensor};
use std::path::Path;

/// Reads a tensor from a `.npy` file.
pub fn read(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .with_context(|| format!("'{}' is not a valid .npy file", path.display()))?;
    if npy.order() == npyz::Order::Fortran {
        bail!(
            "'{}' is in Fortran order; save it in C order (numpy.ascontiguousarray)",
            path.display()
        );
    }
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .with_context(|| format!("'{}' has a dim too large for this machine", path.display()))?;
    let descr = match npy.dtype() {
        npyz::DType::Plain(type_str) => type_str.to_string(),
        other => other.descr(),
    };
    let ctx = || format!("cannot read the data of '{}' ({descr})", path.display());
    let tensor = match descr.get(1..).unwrap_or_default() {
        "f4" => Tensor::from_vec(npy.into_vec::<f32>().with_context(ctx)?, &shape),
        "i4" => Tensor::from_vec(npy.into_vec::<i32>().with_context(ctx)?, &shape),
        "i8" => Tensor::from_vec(npy.into_vec::<i64>().with_context(ctx)?, &shape),
        "b1" => Tensor::from_vec(npy.into_vec::<bool>().with_context(ctx)?, &shape),
        _ => bail!(
            "'{}' has dtype '{descr}'; supported: float32, int32, int64, bool",
            path.display()
        ),
    };
    tensor.with_context(|| {
        format!(
            "'{}' does not hold as many elements as its shape says",
            path.display()
        )
    })
}

/// Writes a tensor to a `.npy` file.
pub fn write(path: &Path, tensor: &Tensor) -> Result<()> {
    let ctx = || format!("cannot write '{}'", path.display());
    let file = std::io::BufWriter::new(std::fs::File::create(path).with_context(ctx)?);
    let shape: Vec<u64> = tensor.shape().iter().map(|&d| d as u64).collect();
    match tensor.dtype() {
        DType::F32 => write_typed(file, &shape, tensor.as_slice::<f32>()?),
        DType::I32 => write_typed(file, &shape, tensor.as_slice::<i32>()?),
        DType::I64 => write_typed(file, &shape, tensor.as_slice::<i64>()?),
        DType::Bool => write_typed(file, &shape, tensor.as_slice::<bool>()?),
    }
    .with_context(ctx)
}

fn write_typed<T, W>(writer: W, shape: &[u64], data: &[T]) -> std::io::Result<()>
where
    T: npyz::AutoSerialize + Copy,
    W: std::io::Write,
{
    use npyz::WriterBuilder;
    let mut out = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(writer)
        .begin_nd()?;
    out.extend(data.iter().copied())?;
    out.finish()
}

/// Turns an output name into a safe file stem: keeps `[A-Za-z0-9_.-]`, maps
/// anything else to `_`, and never returns an empty, `.` or `..` stem.
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        format!("_{s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let tensors = [
            Tensor::from_vec(vec![1.5f32, -2.0, 3.25, 0.0, 7.0, 8.0], &[2, 3]).unwrap(),
            Tensor::from_vec(vec![1i32, -2, 3], &[3]).unwrap(),
            Tensor::from_vec(vec![i64::MAX, -1], &[2, 1]).unwrap(),
            Tensor::from_vec(vec![true, false], &[2]).unwrap(),
            Tensor::scalar(4.0f32),
        ];
        for (i, t) in tensors.iter().enumerate() {
            let path = dir.path().join(format!("{i}.npy"));
            write(&path, t).unwrap();
            assert_eq!(&read(&path).unwrap(), t);
        }
    }

    #[test]
    fn rejects_garbage_and_other_dtypes() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.npy");
        std::fs::write(&junk, b"not a numpy file").unwrap();
        assert!(format!("{:#}", read(&junk).unwrap_err()).contains("not a valid .npy"));
        let f64_file = dir.path().join("f64.npy");
        npyz::to_file_1d(&f64_file, vec![1.0f64, 2.0]).unwrap();
        assert!(format!("{:#}", read(&f64_file).unwrap_err()).contains("<f8"));
        let truncated = dir.path().join("short.npy");
        write(
            &truncated,
            &Tensor::from_vec(vec![1f32; 16], &[16]).unwrap(),
        )
        .unwrap();
        let bytes = std::fs::read(&truncated).unwrap();
        std::fs::write(&truncated, &bytes[..bytes.len() - 8]).unwrap();
        assert!(read(&truncated).is_err());
    }

    #[test]
    fn sanitizes_names() {
        assert_eq!(sanitize("y"), "y");
        assert_eq!(sanitize("out/../x:0"), "out_.._x_0");
        assert_eq!(sanitize(".."), "_..");
        assert_eq!(sanitize(""), "_");
    }
}
