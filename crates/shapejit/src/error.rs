//! The public error type. Variants say what is at fault: the file, the node,
//! or the input (with expected and actual values). [`Error::Lower`] with
//! `LowerError::Internal`, [`Error::Verify`] from a lowered graph and
//! `RunError::Internal` are bugs in shapejit.

use shapejit_bytecode::{LowerError, VerifyError};
use shapejit_ir::IrError;
use shapejit_vm::{InputError, ModuleError, OptionsError, RunError};

/// Anything that can go wrong loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model file could not be read.
    #[error("cannot read '{path}': {message}")]
    Io {
        /// the path
        path: String,
        /// the OS error
        message: String,
    },
    /// `builtin:NAME` with an unknown name.
    #[error("unknown built-in model '{name}' (known: {known})")]
    UnknownBuiltin {
        /// the name asked for
        name: String,
        /// the known names, comma-separated
        known: String,
    },
    /// The path's extension is not a known model format.
    #[error(
        "'{path}': unknown model format (expected a .onnx, .sjir or .sjb file, or builtin:NAME)"
    )]
    UnknownFormat {
        /// the path
        path: String,
    },
    /// A `.sjb` image was asked for as a graph (images hold bytecode only).
    #[error("'{path}': a .sjb image holds bytecode, not a graph; load it with Module::load")]
    ImageHasNoGraph {
        /// the path
        path: String,
    },
    /// A `.sjb` image could not be loaded (truncated, corrupted, wrong version).
    #[error("{path}: {source}")]
    Image {
        /// the path
        path: String,
        /// the image error
        source: shapejit_bytecode::image::ImageError,
    },
    /// A `.sjir` file failed to parse (the error carries line:column).
    #[error("{path}:{source}")]
    Parse {
        /// the path
        path: String,
        /// the parse error
        source: IrError,
    },
    /// An ONNX file failed to import.
    #[error("{path}: {source}")]
    Onnx {
        /// the path
        path: String,
        /// the import error
        source: shapejit_onnx::OnnxError,
    },
    /// The graph is invalid (shape inference or verification).
    #[error(transparent)]
    Ir(#[from] IrError),
    /// The graph could not be lowered to bytecode.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// The bytecode failed verification.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// An option is out of range (names the field and the accepted range).
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// An input does not match the model's declared input (names the input,
    /// expected vs actual).
    #[error(transparent)]
    Input(InputError),
    /// Running failed.
    #[error(transparent)]
    Run(RunError),
}

impl From<ModuleError> for Error {
    fn from(e: ModuleError) -> Error {
        match e {
            ModuleError::Verify(v) => Error::Verify(v),
            ModuleError::Options(o) => Error::Options(o),
        }
    }
}

impl From<RunError> for Error {
    fn from(e: RunError) -> Error {
        match e {
            RunError::Input(input) => Error::Input(input),
            other => Error::Run(other),
        }
    }
}
