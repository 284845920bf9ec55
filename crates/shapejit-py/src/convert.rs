//! numpy arrays ↔ shapejit tensors, with as few copies as the layouts allow.
//!
//! Inputs: an array of the input's dtype that is C-contiguous and aligned is
//! read in place (the tensor's storage borrows the array and keeps a reference
//! to it); any other layout, and a byte-swapped dtype, is converted once with
//! `numpy.ascontiguousarray`; a non-array value goes through `numpy.asarray`
//! with the input's dtype; an array of another dtype is an `InvalidArgument`
//! (as in onnxruntime: no silent casts).
//!
//! Outputs: a run's output owns a fresh buffer nothing else shares; it becomes
//! the storage of a writeable numpy array (kept alive by an [`OutputBuffer`]
//! as the array's base object), so nothing is copied. Only a shared or
//! misaligned buffer (never produced by a run) is copied.
//!
//! **Invariants:** a borrowed input array is referenced for as long as a
//! tensor over it lives; a run reads an input while the GIL is released, so,
//! as with onnxruntime, the caller must not write to that array from another
//! thread during the run.

use crate::errors::invalid;
use bytes::{Bytes, BytesMut};
use numpy::ndarray::{ArrayViewMut, IxDyn};
use numpy::{
    PyArrayDescr, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use shapejit::{DType, IoSpec, Tensor};

/// The onnxruntime type string of a dtype (`tensor(float)`, ...).
pub fn onnx_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "tensor(float)",
        DType::I32 => "tensor(int32)",
        DType::I64 => "tensor(int64)",
        DType::Bool => "tensor(bool)",
        DType::F16 => "tensor(float16)",
        DType::Bf16 => "tensor(bfloat16)",
        DType::F64 => "tensor(double)",
        DType::I8 => "tensor(int8)",
        DType::I16 => "tensor(int16)",
        DType::U8 => "tensor(uint8)",
        DType::U16 => "tensor(uint16)",
        DType::U32 => "tensor(uint32)",
        DType::U64 => "tensor(uint64)",
        DType::F8E4M3Fn => "tensor(float8e4m3fn)",
        DType::F8E4M3Fnuz => "tensor(float8e4m3fnuz)",
        DType::F8E5M2 => "tensor(float8e5m2)",
        DType::F8E5M2Fnuz => "tensor(float8e5m2fnuz)",
        DType::F8E8M0 => "tensor(float8e8m0)",
        DType::F4E2M1 => "tensor(float4e2m1)",
        DType::I4 => "tensor(int4)",
        DType::U4 => "tensor(uint4)",
        DType::I2 => "tensor(int2)",
        DType::U2 => "tensor(uint2)",
    }
}

/// The numpy dtype of a shapejit dtype (numpy has no bfloat16 and no narrow
/// types: bf16 and narrow float outputs are float32 arrays, narrow integer
/// outputs int64 arrays, exactly, and such inputs are not accepted).
fn descr(py: Python<'_>, dtype: DType) -> Bound<'_, PyArrayDescr> {
    match dtype {
        DType::F32 | DType::Bf16 => numpy::dtype::<f32>(py),
        narrow if narrow.is_narrow() => descr(py, narrow.compute()),
        DType::I32 => numpy::dtype::<i32>(py),
        DType::I64 => numpy::dtype::<i64>(py),
        DType::Bool => numpy::dtype::<bool>(py),
        DType::F16 => numpy::dtype::<shapejit::ir::dtype::f16>(py),
        DType::F64 => numpy::dtype::<f64>(py),
        DType::I8 => numpy::dtype::<i8>(py),
        DType::I16 => numpy::dtype::<i16>(py),
        DType::U8 => numpy::dtype::<u8>(py),
        DType::U16 => numpy::dtype::<u16>(py),
        DType::U32 => numpy::dtype::<u32>(py),
        DType::U64 => numpy::dtype::<u64>(py),
        _ => unreachable!("every narrow dtype is matched above"),
    }
}

/// The `numpy` module, imported once.
fn np(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NUMPY
        .get_or_try_init(py, || py.import("numpy").map(Bound::unbind))
        .map(|m| m.bind(py))
}

/// The storage of an input tensor that reads a numpy array in place.
struct ArrayBytes {
    /// keeps the array (and so its data) alive
    _array: Py<PyAny>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the pointer is only read, through `as_ref`; the data it points to is
// owned by `_array`, which `Py` keeps alive from any thread. (`Py` itself is
// `Send`; only the raw pointer makes the struct `!Send` by default.)
unsafe impl Send for ArrayBytes {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for ArrayBytes {}

impl AsRef<[u8]> for ArrayBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` is the data pointer of a live, C-contiguous, aligned
        // numpy array of exactly `len` bytes (or a dangling pointer for
        // `len == 0`); numpy does not move or free the data of an array that
        // is referenced (`resize` refuses while other references exist).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The tensor for input `spec` from a Python value.
pub fn input_tensor(spec: &IoSpec, value: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = value.py();
    // bf16 and narrow inputs are given in their compute dtype (float32 or
    // int64) and converted once here
    let dtype = match spec.ty.dtype {
        DType::Bf16 => DType::F32,
        other if other.is_narrow() => other.compute(),
        other => other,
    };
    let want = descr(py, dtype);
    let array = match value.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => np(py)?
            .call_method1("asarray", (value, &want))
            .and_then(|a| Ok(a.cast_into::<PyUntypedArray>()?))
            .map_err(|e| {
                invalid(format!(
                    "input '{}': cannot convert a {} to a {dtype} array: {e}",
                    spec.name,
                    value
                        .get_type()
                        .name()
                        .map_or_else(|_| "?".into(), |n| n.to_string())
                ))
            })?,
    };
    let have = array.dtype();
    let array = if have.is_equiv_to(&want) {
        if array.is_c_contiguous() && array.is_aligned() {
            array
        } else {
            contiguous(&array, &want)?
        }
    } else if np(py)?
        .call_method1("can_cast", (&have, &want, "equiv"))?
        .is_truthy()?
    {
        contiguous(&array, &want)?
    } else {
        return Err(invalid(format!(
            "input '{}': dtype expected {} ({}), got {}",
            spec.name,
            dtype,
            onnx_type(dtype),
            have.str()?
        )));
    };
    let shape = array.shape().to_vec();
    let len = array.len() * dtype.size();
    // SAFETY: `as_array_ptr` is the live array object; `data` is its buffer.
    let data = unsafe { (*array.as_array_ptr()).fields.data } as *const u8;
    let ptr = if len == 0 {
        std::ptr::NonNull::<u64>::dangling().as_ptr() as *const u8
    } else {
        data
    };
    let bytes = Bytes::from_owner(ArrayBytes {
        _array: array.into_any().unbind(),
        ptr,
        len,
    });
    let tensor = Tensor::from_bytes(dtype, &shape, bytes)
        .map_err(|e| invalid(format!("input '{}': {e}", spec.name)))?;
    if spec.ty.dtype == dtype {
        return Ok(tensor);
    }
    tensor
        .cast(spec.ty.dtype)
        .map_err(|e| invalid(format!("input '{}': {e}", spec.name)))
}

/// One conversion to a C-contiguous aligned array of dtype `want`.
fn contiguous<'py>(
    array: &Bound<'py, PyUntypedArray>,
    want: &Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    Ok(np(array.py())?
        .call_method1("ascontiguousarray", (array, want))?
        .cast_into::<PyUntypedArray>()?)
}

/// Owns an output tensor's buffer; the base object of the numpy array over it.
#[pyclass(frozen, module = "shapejit")]
pub struct OutputBuffer {
    _buffer: BytesMut,
}

/// The numpy array of a run's output.
pub fn output_array(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>> {
    match tensor.dtype() {
        DType::F32 => array_of::<f32>(py, tensor),
        DType::I32 => array_of::<i32>(py, tensor),
        DType::I64 => array_of::<i64>(py, tensor),
        DType::Bool => array_of::<bool>(py, tensor),
        DType::F16 => array_of::<shapejit::ir::dtype::f16>(py, tensor),
        DType::Bf16
        | DType::F8E4M3Fn
        | DType::F8E4M3Fnuz
        | DType::F8E5M2
        | DType::F8E5M2Fnuz
        | DType::F8E8M0
        | DType::F4E2M1 => {
            let wide = tensor
                .cast(DType::F32)
                .map_err(|e| pyo3::exceptions::PyMemoryError::new_err(e.to_string()))?;
            array_of::<f32>(py, wide)
        }
        DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
            let wide = tensor
                .cast(DType::I64)
                .map_err(|e| pyo3::exceptions::PyMemoryError::new_err(e.to_string()))?;
            array_of::<i64>(py, wide)
        }
        DType::F64 => array_of::<f64>(py, tensor),
        DType::I8 => array_of::<i8>(py, tensor),
        DType::I16 => array_of::<i16>(py, tensor),
        DType::U8 => array_of::<u8>(py, tensor),
        DType::U16 => array_of::<u16>(py, tensor),
        DType::U32 => array_of::<u32>(py, tensor),
        DType::U64 => array_of::<u64>(py, tensor),
    }
}

fn array_of<T: numpy::Element>(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>> {
    let shape = tensor.shape().to_vec();
    let bytes = tensor.into_bytes();
    let aligned = |p: *const u8| (p as usize).is_multiple_of(std::mem::align_of::<T>());
    if bytes.is_empty() || !aligned(bytes.as_ptr()) {
        return Ok(copied::<T>(py, &shape, &bytes).into_any());
    }
    let mut buffer = match bytes.try_into_mut() {
        Ok(buffer) => buffer,
        Err(shared) => return Ok(copied::<T>(py, &shape, &shared).into_any()),
    };
    let ptr = buffer.as_mut_ptr().cast::<T>();
    let owner = Bound::new(py, OutputBuffer { _buffer: buffer })?;
    // SAFETY: `ptr` points to the buffer `owner` holds: `numel(shape)` elements
    // of `T` (the tensor invariant: length and dtype match the shape), aligned
    // (checked above), initialized, and valid as `T` (bool data is 0 or 1).
    // Moving the `BytesMut` into `owner` does not move its heap buffer.
    let view = unsafe { ArrayViewMut::<T, IxDyn>::from_shape_ptr(IxDyn(&shape), ptr) };
    // SAFETY: `owner` becomes the array's base object and keeps the buffer
    // alive and unmoved for the array's lifetime; nothing else refers to it.
    Ok(unsafe { PyArrayDyn::<T>::borrow_from_array(&view, owner.into_any()) }.into_any())
}

/// A numpy-owned copy of `bytes` (a tensor's storage of `shape` and `T`).
fn copied<'py, T: numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
    bytes: &[u8],
) -> Bound<'py, PyArrayDyn<T>> {
    let array = PyArrayDyn::<T>::zeros(py, IxDyn(shape), false);
    if !bytes.is_empty() {
        // SAFETY: a fresh C-ordered array of `shape` holds exactly
        // `bytes.len()` bytes (the tensor invariant), and does not overlap them.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), array.data().cast::<u8>(), bytes.len())
        };
    }
    array
}
