//! `TensorProto` → [`Tensor`]: raw bytes, typed fields and external data.
//!
//! Element data comes from, in order of precedence: the external file
//! (`data_location = EXTERNAL`), `raw_data`, or the typed field of the dtype
//! (`float_data`, `double_data`, `int64_data`, `uint64_data`, and `int32_data`
//! for the narrower integers, bools, and the bits of FLOAT16 and BFLOAT16).
//! `int32_data` holds the float8 types one element per entry and the 4- and
//! 2-bit types as their packed bytes. Supported dtypes: FLOAT, FLOAT16,
//! BFLOAT16, DOUBLE, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64,
//! BOOL, the float8 types, FLOAT4E2M1, INT4, UINT4, INT2, UINT2; any other is
//! an error naming it. The 4- and 2-bit types are packed two and four to a
//! byte, the first element in the low bits; they are unpacked to one per byte
//! (the IR's layout), which copies them.
//!
//! **Invariant:** raw and external bytes are never copied when they are aligned
//! for the dtype: the tensor is a slice of the memory-mapped file. Unaligned
//! bytes (protobuf does not align `raw_data`) are copied once into aligned
//! storage. Raw data is read as little-endian (the ONNX byte order), which is
//! the byte order of every target this crate supports.
//!
//! **Invariant:** an external location resolves inside the model's directory:
//! absolute paths, `..` components and symlinks leading outside are rejected.

#[cfg(target_endian = "big")]
compile_error!("shapejit-onnx reads ONNX raw data in place and needs a little-endian target");

use crate::error::OnnxError;
use crate::proto::{DATA_LOCATION_EXTERNAL, TensorProto, data_type};
use bytes::Bytes;
use shapejit_ir::{DType, Tensor};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Maps an ONNX data type code to an IR dtype.
pub fn dtype_of(code: i32) -> Option<DType> {
    match code {
        data_type::FLOAT => Some(DType::F32),
        data_type::INT32 => Some(DType::I32),
        data_type::INT64 => Some(DType::I64),
        data_type::BOOL => Some(DType::Bool),
        data_type::FLOAT16 => Some(DType::F16),
        data_type::BFLOAT16 => Some(DType::Bf16),
        data_type::DOUBLE => Some(DType::F64),
        data_type::INT8 => Some(DType::I8),
        data_type::INT16 => Some(DType::I16),
        data_type::UINT8 => Some(DType::U8),
        data_type::UINT16 => Some(DType::U16),
        data_type::UINT32 => Some(DType::U32),
        data_type::UINT64 => Some(DType::U64),
        data_type::FLOAT8E4M3FN => Some(DType::F8E4M3Fn),
        data_type::FLOAT8E4M3FNUZ => Some(DType::F8E4M3Fnuz),
        data_type::FLOAT8E5M2 => Some(DType::F8E5M2),
        data_type::FLOAT8E5M2FNUZ => Some(DType::F8E5M2Fnuz),
        data_type::FLOAT8E8M0 => Some(DType::F8E8M0),
        data_type::FLOAT4E2M1 => Some(DType::F4E2M1),
        data_type::INT4 => Some(DType::I4),
        data_type::UINT4 => Some(DType::U4),
        data_type::INT2 => Some(DType::I2),
        data_type::UINT2 => Some(DType::U2),
        _ => None,
    }
}

/// The ONNX data type code of an IR dtype (the inverse of [`dtype_of`]).
pub fn code_of(dtype: DType) -> i32 {
    match dtype {
        DType::F32 => data_type::FLOAT,
        DType::I32 => data_type::INT32,
        DType::I64 => data_type::INT64,
        DType::Bool => data_type::BOOL,
        DType::F16 => data_type::FLOAT16,
        DType::Bf16 => data_type::BFLOAT16,
        DType::F64 => data_type::DOUBLE,
        DType::I8 => data_type::INT8,
        DType::I16 => data_type::INT16,
        DType::U8 => data_type::UINT8,
        DType::U16 => data_type::UINT16,
        DType::U32 => data_type::UINT32,
        DType::U64 => data_type::UINT64,
        DType::F8E4M3Fn => data_type::FLOAT8E4M3FN,
        DType::F8E4M3Fnuz => data_type::FLOAT8E4M3FNUZ,
        DType::F8E5M2 => data_type::FLOAT8E5M2,
        DType::F8E5M2Fnuz => data_type::FLOAT8E5M2FNUZ,
        DType::F8E8M0 => data_type::FLOAT8E8M0,
        DType::F4E2M1 => data_type::FLOAT4E2M1,
        DType::I4 => data_type::INT4,
        DType::U4 => data_type::UINT4,
        DType::I2 => data_type::INT2,
        DType::U2 => data_type::UINT2,
    }
}

/// The error for a data type the IR has no dtype for.
pub fn unsupported_dtype(code: i32) -> String {
    format!(
        "unsupported data type {} (supported: FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, BOOL, FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, FLOAT8E8M0, FLOAT4E2M1, INT4, UINT4, INT2, UINT2)",
        data_type::name(code)
    )
}

/// Resolves and maps external-data files, one map per file.
#[derive(Debug, Default)]
pub struct ExternalFiles {
    base_dir: Option<PathBuf>,
    maps: RefCell<HashMap<PathBuf, Bytes>>,
}

impl ExternalFiles {
    /// External files are looked up in `base_dir` (the model's directory);
    /// `None` rejects every external tensor.
    pub fn new(base_dir: Option<&Path>) -> ExternalFiles {
        ExternalFiles {
            base_dir: base_dir.map(Path::to_path_buf),
            maps: RefCell::default(),
        }
    }

    fn file_bytes(&self, tensor: &str, location: &str) -> Result<Bytes, OnnxError> {
        let err = |what: String| OnnxError::Tensor {
            name: tensor.to_string(),
            what,
        };
        let base = self.base_dir.as_ref().ok_or_else(|| {
            err(format!("external data '{location}' needs the model's directory (load the model from a path)"))
        })?;
        let rel = Path::new(location);
        if location.is_empty()
            || !rel
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(err(format!(
                "external data location '{location}' must be a relative path inside the model's directory"
            )));
        }
        let io = |path: &Path, source| OnnxError::Io {
            path: path.to_path_buf(),
            source,
        };
        let joined = base.join(rel);
        let canonical = joined.canonicalize().map_err(|e| io(&joined, e))?;
        let canonical_base = base.canonicalize().map_err(|e| io(base, e))?;
        if !canonical.starts_with(&canonical_base) {
            return Err(err(format!(
                "external data location '{location}' leads outside the model's directory"
            )));
        }
        if let Some(bytes) = self.maps.borrow().get(&canonical) {
            return Ok(bytes.clone());
        }
        let bytes = map_file(&canonical)?;
        self.maps.borrow_mut().insert(canonical, bytes.clone());
        Ok(bytes)
    }

    /// The bytes of an external tensor (`location`, `offset`, `length` entries).
    fn tensor_bytes(&self, tp: &TensorProto, name: &str) -> Result<Bytes, OnnxError> {
        let err = |what: String| OnnxError::Tensor {
            name: name.to_string(),
            what,
        };
        let (mut location, mut offset, mut length) = (None, 0usize, None);
        for entry in &tp.external_data {
            let number = || {
                entry.value.parse::<usize>().map_err(|_| {
                    err(format!(
                        "external data '{}' is not a byte count: '{}'",
                        entry.key, entry.value
                    ))
                })
            };
            match entry.key.as_str() {
                "location" => location = Some(entry.value.as_str()),
                "offset" => offset = number()?,
                "length" => length = Some(number()?),
                // The checksum is optional and informative; it is not verified.
                _ => {}
            }
        }
        let location =
            location.ok_or_else(|| err("external data without a 'location' entry".into()))?;
        let file = self.file_bytes(name, location)?;
        let end = match length {
            Some(len) => offset.checked_add(len),
            None => Some(file.len()),
        };
        match end {
            Some(end) if offset <= end && end <= file.len() => Ok(file.slice(offset..end)),
            _ => Err(err(format!(
                "external data range offset {offset} length {length:?} is outside '{location}' ({} bytes)",
                file.len()
            ))),
        }
    }
}

/// Maps a whole file read-only into a `Bytes` (empty files become empty bytes).
pub fn map_file(path: &Path) -> Result<Bytes, OnnxError> {
    let io = |source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = shapejit_ir::file::open_regular(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only and lives as long as the `Bytes` that own it.
    // Another process truncating or rewriting the file while it is mapped is
    // outside what this library can guard against (as for every mmap-based loader).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok(Bytes::from_owner(map))
}

/// Converts a `TensorProto` (an initializer, a `Constant` value or test data).
pub fn tensor_from_proto(tp: &TensorProto, external: &ExternalFiles) -> Result<Tensor, OnnxError> {
    let name = if tp.name.is_empty() {
        "<unnamed>"
    } else {
        tp.name.as_str()
    };
    let err = |what: String| OnnxError::Tensor {
        name: name.to_string(),
        what,
    };
    let dtype = dtype_of(tp.data_type).ok_or_else(|| err(unsupported_dtype(tp.data_type)))?;
    let shape = tp
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| err(format!("negative dim {d} in {:?}", tp.dims))))
        .collect::<Result<Vec<usize>, _>>()?;
    let ir = |e: shapejit_ir::tensor::TensorError| err(e.to_string());
    if dtype.bits() < 8 && dtype != DType::Bool {
        let packed = if tp.data_location == DATA_LOCATION_EXTERNAL {
            external.tensor_bytes(tp, name)?
        } else if !tp.raw_data.is_empty() {
            tp.raw_data.clone()
        } else {
            tp.int32_data.iter().map(|&v| v as u8).collect()
        };
        return unpack(dtype, &shape, &packed).map_err(err);
    }
    if tp.data_location == DATA_LOCATION_EXTERNAL {
        let bytes = external.tensor_bytes(tp, name)?;
        return Tensor::from_bytes_or_copy(dtype, &shape, bytes).map_err(ir);
    }
    if !tp.raw_data.is_empty() {
        return Tensor::from_bytes_or_copy(dtype, &shape, tp.raw_data.clone()).map_err(ir);
    }
    // `int32_data` holds the narrower integers as values and the 16-bit floats
    // as their bit patterns: the low bytes of each element
    let low_bytes = || {
        let width = dtype.size();
        let bytes: Vec<u8> = tp
            .int32_data
            .iter()
            .flat_map(|v| v.to_le_bytes().into_iter().take(width))
            .collect();
        Tensor::from_bytes_or_copy(dtype, &shape, Bytes::from(bytes))
    };
    match dtype {
        DType::F32 => Tensor::from_vec(tp.float_data.clone(), &shape),
        DType::F64 => Tensor::from_vec(tp.double_data.clone(), &shape),
        DType::I32 => Tensor::from_vec(tp.int32_data.clone(), &shape),
        DType::I64 => Tensor::from_vec(tp.int64_data.clone(), &shape),
        DType::U64 => Tensor::from_vec(tp.uint64_data.clone(), &shape),
        DType::U32 => Tensor::from_vec(
            tp.uint64_data
                .iter()
                .map(|&v| v as u32)
                .collect::<Vec<u32>>(),
            &shape,
        ),
        DType::Bool => Tensor::from_vec(tp.int32_data.iter().map(|&v| v != 0).collect(), &shape),
        DType::F16
        | DType::Bf16
        | DType::I8
        | DType::I16
        | DType::U8
        | DType::U16
        | DType::F8E4M3Fn
        | DType::F8E4M3Fnuz
        | DType::F8E5M2
        | DType::F8E5M2Fnuz
        | DType::F8E8M0 => low_bytes(),
        // unpacked above
        DType::F4E2M1 | DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
            unreachable!("sub-byte dtypes are unpacked before")
        }
    }
    .map_err(ir)
}

/// Unpacks `8 / bits` elements per byte, the first in the low bits.
fn unpack(dtype: DType, shape: &[usize], packed: &[u8]) -> Result<Tensor, String> {
    let bits = dtype.bits();
    let per_byte = 8 / bits;
    let numel = shapejit_ir::tensor::checked_numel(shape)
        .ok_or_else(|| format!("shape {shape:?} is too large"))?;
    if packed.len() != numel.div_ceil(per_byte) {
        return Err(format!(
            "{} packed bytes for {numel} {dtype} elements, expected {}",
            packed.len(),
            numel.div_ceil(per_byte)
        ));
    }
    let mask = (1u8 << bits) - 1;
    let bytes: Vec<u8> = (0..numel)
        .map(|i| (packed[i / per_byte] >> (bits * (i % per_byte))) & mask)
        .collect();
    Tensor::from_bytes_or_copy(dtype, shape, Bytes::from(bytes)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_tensor(raw: Bytes) -> TensorProto {
        TensorProto {
            name: "w".into(),
            dims: vec![2],
            data_type: data_type::FLOAT,
            raw_data: raw,
            ..Default::default()
        }
    }

    #[test]
    fn aligned_raw_data_is_not_copied_unaligned_is() {
        let words: Vec<u32> = vec![0, 1.5f32.to_bits(), (-2.0f32).to_bits(), 0];
        let buf = Bytes::from(
            words
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect::<Vec<u8>>(),
        );
        let base = buf.as_ptr() as usize;
        let offset = (0..4).find(|o| (base + o).is_multiple_of(4)).unwrap_or(0) + 4;
        let aligned = buf.slice(offset..offset + 8);
        let t = tensor_from_proto(&raw_tensor(aligned.clone()), &ExternalFiles::default()).unwrap();
        assert_eq!(
            t.bytes().as_ptr(),
            aligned.as_ptr(),
            "aligned data must be used in place"
        );
        let unaligned = buf.slice(offset - 1..offset + 7);
        let t =
            tensor_from_proto(&raw_tensor(unaligned.clone()), &ExternalFiles::default()).unwrap();
        assert_ne!(t.bytes().as_ptr(), unaligned.as_ptr());
        assert_eq!(t.as_slice::<f32>().unwrap().len(), 2);
    }

    #[test]
    fn dtype_and_shape_errors_name_the_tensor() {
        let mut tp = raw_tensor(Bytes::from_static(&[0; 8]));
        tp.data_type = data_type::COMPLEX64;
        let err = tensor_from_proto(&tp, &ExternalFiles::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tensor 'w'") && err.contains("COMPLEX64"),
            "{err}"
        );
        let mut tp = raw_tensor(Bytes::from_static(&[0; 8]));
        tp.dims = vec![-1];
        assert!(
            tensor_from_proto(&tp, &ExternalFiles::default())
                .unwrap_err()
                .to_string()
                .contains("negative dim")
        );
        let bools = TensorProto {
            dims: vec![3],
            data_type: data_type::BOOL,
            int32_data: vec![0, 2, 1],
            ..Default::default()
        };
        let t = tensor_from_proto(&bools, &ExternalFiles::default()).unwrap();
        assert_eq!(t.as_slice::<bool>().unwrap(), &[false, true, true]);
    }
}
