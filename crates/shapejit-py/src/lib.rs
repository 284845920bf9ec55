//! `shapejit._shapejit`: the native half of the `shapejit` Python package.
//!
//! The Python half (`python/shapejit/`) gives it onnxruntime's shape
//! (`InferenceSession`, `SessionOptions`, `NodeArg`, ...); this module holds
//! what must be native: loading ([`session::load`]), the run with the GIL
//! released ([`session::Session`]), the numpy conversions ([`convert`]) and
//! the exception classes ([`errors`]). It wraps the public `shapejit` crate
//! only.
//!
//! **Invariant:** no Python call reaches a panic or an abort on bad input:
//! every failure is one of the `shapejit.Error` classes.

mod convert;
mod errors;
mod session;

use pyo3::prelude::*;

/// Lowers `model` (a path, `builtin:NAME` or ONNX bytes) once and writes its
/// `.sjb` bytecode image to `path` (loadable by `InferenceSession(path)`).
#[pyfunction]
fn compile(model: &Bound<'_, PyAny>, path: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = model.py();
    let module = session::load(model, shapejit::Options::interp())?;
    let path: std::path::PathBuf = path.extract()?;
    py.detach(|| shapejit::bytecode::image::write(module.program(), &path))
        .map_err(|e| {
            let message = format!("cannot write the image: {e}");
            match e {
                shapejit::bytecode::image::ImageError::Io { .. } => {
                    errors::NoSuchFile::new_err(message)
                }
                _ => errors::Fail::new_err(message),
            }
        })
}

#[pymodule]
fn _shapejit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("InvalidArgument", py.get_type::<errors::InvalidArgument>())?;
    m.add("NoSuchFile", py.get_type::<errors::NoSuchFile>())?;
    m.add("InvalidGraph", py.get_type::<errors::InvalidGraph>())?;
    m.add("Fail", py.get_type::<errors::Fail>())?;
    m.add_class::<session::Session>()?;
    m.add_class::<convert::OutputBuffer>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    Ok(())
}
