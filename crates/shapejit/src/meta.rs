//! Model metadata: what a model file says about itself (ONNX `ModelProto`
//! fields such as `producer_name`), kept beside the module for embedders that
//! show it (the Python binding's `get_modelmeta()`).
//!
//! **Invariant:** metadata is descriptive only; nothing in it changes how a
//! model runs. Sources without such fields (`.sjir`, `builtin:`, `.sjb`) get
//! empty strings except `graph_name`, which is the graph's name when there is
//! a graph.

use crate::Error;
use shapejit_ir::Graph;
use shapejit_onnx::proto::ModelProto;
use std::path::Path;

/// Descriptive metadata of a loaded model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelMeta {
    /// the tool that wrote the file (ONNX `producer_name`)
    pub producer_name: String,
    /// that tool's version (ONNX `producer_version`)
    pub producer_version: String,
    /// the main graph's name
    pub graph_name: String,
    /// the model's reverse-DNS namespace (ONNX `domain`)
    pub domain: String,
    /// free text (ONNX `doc_string`)
    pub description: String,
    /// the model's version (ONNX `model_version`)
    pub version: i64,
    /// free key/value pairs (ONNX `metadata_props`), in file order
    pub custom: Vec<(String, String)>,
}

impl ModelMeta {
    /// The metadata of a graph that came without a model file around it.
    pub(crate) fn of_graph(graph: &Graph) -> ModelMeta {
        ModelMeta {
            graph_name: graph.name.clone(),
            ..ModelMeta::default()
        }
    }

    fn of_onnx(model: &ModelProto, graph: &Graph) -> ModelMeta {
        ModelMeta {
            producer_name: model.producer_name.clone(),
            producer_version: model.producer_version.clone(),
            graph_name: graph.name.clone(),
            domain: model.domain.clone(),
            description: model.doc_string.clone(),
            version: model.model_version,
            custom: model
                .metadata_props
                .iter()
                .map(|p| (p.key.clone(), p.value.clone()))
                .collect(),
        }
    }
}

/// Imports an ONNX model from its bytes (decoded once), with its metadata.
/// `origin` names the source in errors; external data is looked up in
/// `base_dir` (`None` rejects it).
pub(crate) fn import_onnx(
    bytes: bytes::Bytes,
    base_dir: Option<&Path>,
    origin: &str,
) -> Result<(Graph, ModelMeta), Error> {
    let onnx = |source| Error::Onnx {
        path: origin.to_string(),
        source,
    };
    let model = shapejit_onnx::decode_model(bytes).map_err(onnx)?;
    let external = shapejit_onnx::tensor::ExternalFiles::new(base_dir);
    let graph = shapejit_onnx::import::import_model(&model, &external).map_err(onnx)?;
    let meta = ModelMeta::of_onnx(&model, &graph);
    Ok((graph, meta))
}

/// Maps and imports an `.onnx` file; external data lives beside it.
pub(crate) fn load_onnx(path: &Path, origin: &str) -> Result<(Graph, ModelMeta), Error> {
    let bytes = shapejit_onnx::tensor::map_file(path).map_err(|source| Error::Onnx {
        path: origin.to_string(),
        source,
    })?;
    let dir = path.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    });
    import_onnx(bytes, dir, origin)
}
