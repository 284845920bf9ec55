//! The exception classes and the mapping of [`shapejit::Error`] onto them.
//!
//! `Error` is the base; `InvalidArgument` (a bad call: input names, dtypes,
//! ranks, shapes, options), `NoSuchFile` (a model file that cannot be read),
//! `InvalidGraph` (a model that does not parse, import, infer, lower or
//! verify) and `Fail` (a run that failed) derive from it, as onnxruntime's
//! classes of the same names do.
//!
//! **Invariant:** every error crossing into Python carries shapejit's own
//! message (its `Display`, causes included), never a panic.

use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::PyException;

create_exception!(
    shapejit,
    Error,
    PyException,
    "Base class of every shapejit error."
);
create_exception!(
    shapejit,
    InvalidArgument,
    Error,
    "A bad call: an unknown or missing input, a wrong dtype, rank or shape, a bad option."
);
create_exception!(
    shapejit,
    NoSuchFile,
    Error,
    "A model file (or its external data) that cannot be read."
);
create_exception!(
    shapejit,
    InvalidGraph,
    Error,
    "A model that does not parse, import, type-check, lower or verify."
);
create_exception!(
    shapejit,
    Fail,
    Error,
    "A run that failed (a shape error between nodes, memory, an internal error)."
);

/// The exception for a shapejit error, with its message.
pub fn to_py(e: shapejit::Error) -> PyErr {
    use shapejit::Error as E;
    let message = e.to_string();
    match e {
        E::Io { .. }
        | E::Onnx {
            source: shapejit::OnnxError::Io { .. },
            ..
        }
        | E::Image {
            source: shapejit::bytecode::image::ImageError::Io { .. },
            ..
        } => NoSuchFile::new_err(message),
        E::UnknownBuiltin { .. } | E::UnknownFormat { .. } | E::ImageHasNoGraph { .. } => {
            InvalidArgument::new_err(message)
        }
        E::Image { .. }
        | E::Parse { .. }
        | E::Onnx { .. }
        | E::Ir(_)
        | E::Lower(_)
        | E::Verify(_) => InvalidGraph::new_err(message),
        E::Input(_) | E::Options(_) => InvalidArgument::new_err(message),
        E::Run(_) => Fail::new_err(message),
    }
}

/// An `InvalidArgument` with `message`.
pub fn invalid(message: impl Into<String>) -> PyErr {
    InvalidArgument::new_err(message.into())
}
