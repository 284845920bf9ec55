//! `.npy` files in and out (every dtype numpy has: f16, f32, f64, the signed and
//! unsigned integers of 8 to 64 bits, bool; C order, little or big endian).
//! numpy has no bfloat16: a bf16 output is written as float32 (exactly).
//!
//! **Invariant:** a tensor read from a file has exactly the file's shape and
//! element count; anything else (Fortran order, other dtypes, truncated data) is an
//! error naming the file. Only regular files are read, and the data is allocated
//! only once the header says how much there is and the file holds exactly that.

use crate::bindings::InputBudget;
use anyhow::{Context, Result, bail};
use shapejit::{DType, Tensor};
use std::path::Path;

/// The longest `.npy` header accepted (numpy writes a few hundred bytes).
const MAX_HEADER: usize = 1 << 16;

/// Reads the fixed prefix (magic, version, header length) and returns it with
/// the header length, so nothing is read or allocated before the header is known
/// to be a `.npy` header of a sane size.
fn prefix(file: &mut impl std::io::Read, path: &Path) -> Result<(Vec<u8>, usize)> {
    let bad = || format!("'{}' is not a valid .npy file", path.display());
    let mut pre = vec![0u8; 10];
    file.read_exact(&mut pre).with_context(bad)?;
    if &pre[..6] != b"\x93NUMPY" {
        bail!("{}: bad magic", bad());
    }
    let header_len = match pre[6] {
        1 => u16::from_le_bytes([pre[8], pre[9]]) as usize,
        2 | 3 => {
            let mut rest = [0u8; 2];
            file.read_exact(&mut rest).with_context(bad)?;
            pre.extend_from_slice(&rest);
            u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize
        }
        v => bail!("{}: format version {v}", bad()),
    };
    if header_len > MAX_HEADER {
        bail!(
            "{}: a {header_len}-byte header (at most {MAX_HEADER})",
            bad()
        );
    }
    Ok((pre, header_len))
}

/// Reads a tensor from a `.npy` file, streaming: the header is read and checked
/// first (only a regular file is accepted, its data must be exactly what the
/// shape needs and fit in `budget`), then the data.
pub fn read(path: &Path, name: &str, budget: &mut InputBudget) -> Result<Tensor> {
    let mut file = shapejit::ir::file::open_regular(path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    let file_len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let (pre, header_len) = prefix(&mut file, path)?;
    let data_start = (pre.len() + header_len) as u64;
    let reader = std::io::BufReader::new(file);
    let npy = npyz::NpyFile::new(std::io::Read::chain(&pre[..], reader))
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
    let dtype = match descr.get(1..).unwrap_or_default() {
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        _ => bail!(
            "'{}' has dtype '{descr}'; supported: float16/32/64, int8/16/32/64, uint8/16/32/64, bool",
            path.display()
        ),
    };
    let needed = shapejit::ir::tensor::byte_len(dtype, &shape);
    let held = u128::from(file_len.saturating_sub(data_start));
    if needed != held {
        bail!(
            "'{}' holds {held} data bytes, its shape {shape:?} of {descr} needs {needed}",
            path.display()
        );
    }
    budget.admit(name, dtype, &shape)?;
    let ctx = || format!("cannot read the data of '{}' ({descr})", path.display());
    use shapejit::ir::dtype::f16;
    let tensor = match dtype {
        DType::F16 => Tensor::from_vec(npy.into_vec::<f16>().with_context(ctx)?, &shape),
        DType::F32 => Tensor::from_vec(npy.into_vec::<f32>().with_context(ctx)?, &shape),
        DType::F64 => Tensor::from_vec(npy.into_vec::<f64>().with_context(ctx)?, &shape),
        DType::I8 => Tensor::from_vec(npy.into_vec::<i8>().with_context(ctx)?, &shape),
        DType::I16 => Tensor::from_vec(npy.into_vec::<i16>().with_context(ctx)?, &shape),
        DType::I32 => Tensor::from_vec(npy.into_vec::<i32>().with_context(ctx)?, &shape),
        DType::I64 => Tensor::from_vec(npy.into_vec::<i64>().with_context(ctx)?, &shape),
        DType::U8 => Tensor::from_vec(npy.into_vec::<u8>().with_context(ctx)?, &shape),
        DType::U16 => Tensor::from_vec(npy.into_vec::<u16>().with_context(ctx)?, &shape),
        DType::U32 => Tensor::from_vec(npy.into_vec::<u32>().with_context(ctx)?, &shape),
        DType::U64 => Tensor::from_vec(npy.into_vec::<u64>().with_context(ctx)?, &shape),
        DType::Bool => Tensor::from_vec(npy.into_vec::<bool>().with_context(ctx)?, &shape),
        DType::Bf16 => bail!("'{}': numpy has no bfloat16", path.display()),
        other => bail!("'{}': numpy has no {other}", path.display()),
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
    use shapejit::ir::dtype::f16;
    match tensor.dtype() {
        DType::F16 => write_typed(file, &shape, tensor.as_slice::<f16>()?),
        DType::F32 => write_typed(file, &shape, tensor.as_slice::<f32>()?),
        DType::Bf16 => write_typed(file, &shape, tensor.cast(DType::F32)?.as_slice::<f32>()?),
        DType::F64 => write_typed(file, &shape, tensor.as_slice::<f64>()?),
        DType::I8 => write_typed(file, &shape, tensor.as_slice::<i8>()?),
        DType::I16 => write_typed(file, &shape, tensor.as_slice::<i16>()?),
        DType::I32 => write_typed(file, &shape, tensor.as_slice::<i32>()?),
        DType::I64 => write_typed(file, &shape, tensor.as_slice::<i64>()?),
        DType::U8 => write_typed(file, &shape, tensor.as_slice::<u8>()?),
        DType::U16 => write_typed(file, &shape, tensor.as_slice::<u16>()?),
        DType::U32 => write_typed(file, &shape, tensor.as_slice::<u32>()?),
        DType::U64 => write_typed(file, &shape, tensor.as_slice::<u64>()?),
        DType::Bool => write_typed(file, &shape, tensor.as_slice::<bool>()?),
        // numpy has no narrow types: their values, exactly, in the compute dtype
        narrow => {
            let wide = tensor.cast(narrow.compute())?;
            match wide.dtype() {
                DType::F32 => write_typed(file, &shape, wide.as_slice::<f32>()?),
                _ => write_typed(file, &shape, wide.as_slice::<i64>()?),
            }
        }
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

    fn budget() -> InputBudget {
        InputBudget::new(1 << 30)
    }

    fn read_err(path: &Path) -> String {
        format!("{:#}", read(path, "x", &mut budget()).unwrap_err())
    }

    #[test]
    fn round_trips_every_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let tensors = [
            Tensor::from_vec(vec![1.5f32, -2.0, 3.25, 0.0, 7.0, 8.0], &[2, 3]).unwrap(),
            Tensor::from_vec(vec![1i32, -2, 3], &[3]).unwrap(),
            Tensor::from_vec(vec![i64::MAX, -1], &[2, 1]).unwrap(),
            Tensor::from_vec(vec![true, false], &[2]).unwrap(),
            Tensor::scalar(4.0f32),
            Tensor::from_vec(vec![0.1f64, -1e300], &[2]).unwrap(),
            Tensor::from_vec(vec![-128i8, 127], &[2]).unwrap(),
            Tensor::from_vec(vec![-300i16], &[1]).unwrap(),
            Tensor::from_vec(vec![255u8, 0], &[1, 2]).unwrap(),
            Tensor::from_vec(vec![65535u16], &[1]).unwrap(),
            Tensor::from_vec(vec![u32::MAX], &[1]).unwrap(),
            Tensor::from_vec(vec![u64::MAX, 1], &[2]).unwrap(),
            Tensor::from_vec(
                vec![
                    shapejit::ir::dtype::f16::from_f32(-0.5),
                    shapejit::ir::dtype::f16::MAX,
                ],
                &[2],
            )
            .unwrap(),
        ];
        for (i, t) in tensors.iter().enumerate() {
            let path = dir.path().join(format!("{i}.npy"));
            write(&path, t).unwrap();
            assert_eq!(&read(&path, "x", &mut budget()).unwrap(), t);
        }
    }

    #[test]
    fn rejects_garbage_and_other_dtypes() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.npy");
        std::fs::write(&junk, b"not a numpy file").unwrap();
        assert!(
            read_err(&junk).contains("not a valid .npy"),
            "{}",
            read_err(&junk)
        );
        let c64_file = dir.path().join("c64.npy");
        let header = "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0; 8]);
        std::fs::write(&c64_file, &bytes).unwrap();
        assert!(
            read_err(&c64_file).contains("<c8"),
            "{}",
            read_err(&c64_file)
        );
        let truncated = dir.path().join("short.npy");
        write(
            &truncated,
            &Tensor::from_vec(vec![1f32; 16], &[16]).unwrap(),
        )
        .unwrap();
        let bytes = std::fs::read(&truncated).unwrap();
        std::fs::write(&truncated, &bytes[..bytes.len() - 8]).unwrap();
        let err = read_err(&truncated);
        assert!(
            err.contains("holds 56 data bytes, its shape [16] of <f4 needs 64"),
            "{err}"
        );
    }

    #[test]
    fn special_files_huge_headers_and_huge_shapes_are_errors() {
        let err = read_err(Path::new("/dev/zero"));
        assert!(
            err.contains("a character device, expected a regular file"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        // A v2 header claiming 4 GiB of header text.
        let big_header = dir.path().join("big.npy");
        let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&big_header, &bytes).unwrap();
        let err = read_err(&big_header);
        assert!(err.contains("a 4294967295-byte header"), "{err}");
        // A shape of 2^40 floats over no data: caught before any allocation.
        let huge = dir.path().join("huge.npy");
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16 + 1).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.push(b'\n');
        std::fs::write(&huge, &bytes).unwrap();
        let err = read_err(&huge);
        assert!(
            err.contains(
                "holds 0 data bytes, its shape [1099511627776] of <f4 needs 4398046511104"
            ),
            "{err}"
        );
        // Within the file but over the memory budget.
        let ok = dir.path().join("ok.npy");
        write(&ok, &Tensor::from_vec(vec![1f32; 16], &[16]).unwrap()).unwrap();
        let err = format!(
            "{:#}",
            read(&ok, "x", &mut InputBudget::new(63)).unwrap_err()
        );
        assert!(err.contains("input 'x' (f32[16]) needs 64 bytes"), "{err}");
    }

    #[test]
    fn sanitizes_names() {
        assert_eq!(sanitize("y"), "y");
        assert_eq!(sanitize("out/../x:0"), "out_.._x_0");
        assert_eq!(sanitize(".."), "_..");
        assert_eq!(sanitize(""), "_");
    }
}
