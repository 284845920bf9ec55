//! ONNX → shapejit IR.
//!
//! [`load_path`] maps an `.onnx` file with `memmap2` and decodes it with the
//! project's own `prost` messages ([`proto`]); weights are slices of the map
//! (see [`tensor`] for when a copy happens). [`load_bytes`] imports from bytes
//! already in memory. The result is an IR [`Graph`] whose shapes were inferred
//! node by node by the IR's [`shapejit_ir::GraphBuilder`], with `dim_param`s as
//! named symbolic dims.
//!
//! Supported: default-domain opsets 6..=28, each op at the version the opset
//! resolves it to (see [`ops`] for the version table and which older forms
//! are mapped); dtypes f32, i32, i64, bool.
//!
//! **Invariant:** no byte string makes the loader panic: malformed protobuf,
//! bad tensors, unknown ops and inconsistent graphs are [`OnnxError`]s.
#![deny(missing_docs)]

pub mod attrs;
pub mod error;
pub mod import;
pub mod node;
pub mod ops;
pub mod proto;
pub mod tensor;

pub use error::{NodeRef, OnnxError};
pub use import::{MAX_OPSET, MIN_OPSET};

use bytes::Bytes;
use prost::Message;
use shapejit_ir::Graph;
use std::path::Path;

/// Loads an `.onnx` file: maps it, decodes it, imports the main graph.
/// External-data files are resolved relative to the file's directory.
pub fn load_path(path: &Path) -> Result<Graph, OnnxError> {
    let bytes = tensor::map_file(path)?;
    let dir = path.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    });
    load_bytes(bytes, dir)
}

/// Imports a model from its bytes. `base_dir` is where external-data files
/// live (`None`: a model with external data is rejected).
pub fn load_bytes(bytes: Bytes, base_dir: Option<&Path>) -> Result<Graph, OnnxError> {
    let model = decode_model(bytes)?;
    let external = tensor::ExternalFiles::new(base_dir);
    import::import_model(&model, &external)
}

/// Decodes the protobuf without importing (raw data stays in `bytes`).
pub fn decode_model(bytes: Bytes) -> Result<proto::ModelProto, OnnxError> {
    Ok(proto::ModelProto::decode(bytes)?)
}
