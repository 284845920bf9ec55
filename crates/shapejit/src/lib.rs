//! shapejit: run neural-network inference graphs whose shapes change from call
//! to call (batch size, sequence length) fast on CPU.
//!
//! This crate is the embedding API: load a model ([`Module::load`] or
//! [`Module::from_graph`]), make one [`Runtime`] per thread, and [`Runtime::run`]
//! it with any batch size. A [`Module`] is cheap to clone and `Send + Sync`;
//! outputs are owned by the caller.
//!
//! ```
//! use shapejit::{DType, GraphBuilder, Module, Options, Tensor, shape};
//!
//! // y = relu(x * 2 - 1) over x: f32[batch, 3]
//! let mut b = GraphBuilder::new("tiny");
//! let x = b.input("x", DType::F32, shape!["batch", 3]);
//! let two = b.const_f32(2.0)?;
//! let one = b.const_f32(1.0)?;
//! let y = b.mul(x, two)?;
//! let y = b.sub(y, one)?;
//! let y = b.relu(y)?;
//! b.output("y", y)?;
//! let module = Module::from_graph(b.finish()?, Options::default())?;
//!
//! let mut rt = module.runtime();
//! for batch in [1, 4] {
//!     let data: Vec<f32> = (0..batch * 3).map(|i| i as f32 * 0.5).collect();
//!     let out = rt.run(&[Tensor::from_vec(data.clone(), &[batch, 3])?])?;
//!     assert_eq!(out[0].shape(), &[batch, 3]);
//!     let expected: Vec<f32> = data.iter().map(|v| (v * 2.0 - 1.0).max(0.0)).collect();
//!     assert_eq!(out[0].as_slice::<f32>()?, &expected[..]);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Model sources accepted by [`Module::load`]: `builtin:NAME` (see [`builtin`]),
//! `.sjir` text files and `.onnx` files.
//!
//! **Invariant:** every program a [`Module`] runs was lowered from a verified
//! graph and passed the bytecode verifier.
#![deny(missing_docs)]

pub mod builtin;
mod error;
mod meta;

pub use error::Error;
pub use meta::ModelMeta;
pub use shapejit_bytecode::{self as bytecode, IoSpec, Program};
pub use shapejit_ir::{
    self as ir, BinaryOp, DType, Dim, Graph, GraphBuilder, Op, ReduceOp, Shape, Tensor, UnaryOp,
    ValueType, shape,
};
/// CPU feature levels: the level the kernels run at ([`cpu::level`]) and its
/// `SHAPEJIT_CPU` cap.
pub use shapejit_kernels::cpu;
pub use shapejit_onnx::OnnxError;
pub use shapejit_vm::{
    self as vm, CancelToken, CompileMode, GuardPolicy, InputError, Options, OptionsError, RunError,
    RunOptions, SlotStats, Stats, Tier,
};

use std::path::Path;
use std::sync::Arc;

/// A loaded model: its verified bytecode, the shared VM state and (unless it
/// came from a `.sjb` image) the graph it was lowered from.
#[derive(Clone, Debug)]
pub struct Module {
    vm: shapejit_vm::Module,
    graph: Option<Arc<Graph>>,
    meta: Arc<ModelMeta>,
}

impl Module {
    /// Loads `model`: `builtin:NAME`, a `.sjir` or `.onnx` file, or a `.sjb`
    /// bytecode image (memory-mapped: its weights are not copied).
    pub fn load(model: &str, options: Options) -> Result<Module, Error> {
        if is_image(model) {
            let program = shapejit_bytecode::image::load(Path::new(model)).map_err(|source| {
                Error::Image {
                    path: model.to_string(),
                    source,
                }
            })?;
            return Module::from_program(program, options);
        }
        if has_extension(model, "onnx") {
            let (graph, meta) = meta::load_onnx(Path::new(model), model)?;
            return Ok(Module::from_graph(graph, options)?.with_meta(meta));
        }
        Module::from_graph(load_graph(model)?, options)
    }

    /// Imports an ONNX model from its serialized bytes (as `onnx.save` writes
    /// them); a model with external data is rejected, as there is no directory
    /// to find it in.
    pub fn from_onnx_bytes(bytes: Vec<u8>, options: Options) -> Result<Module, Error> {
        let (graph, meta) = meta::import_onnx(bytes.into(), None, "<bytes>")?;
        Ok(Module::from_graph(graph, options)?.with_meta(meta))
    }

    /// A module from a program alone (e.g. read from a `.sjb` image); it is
    /// verified first, and [`Module::graph`] is `None`.
    pub fn from_program(program: Program, options: Options) -> Result<Module, Error> {
        let vm = shapejit_vm::Module::with_executor(program, options, shapejit_jit::make_executor)?;
        Ok(Module {
            vm,
            graph: None,
            meta: Arc::default(),
        })
    }

    /// Lowers a graph (verified first) and builds a module for it; with
    /// [`Tier::Jit`] (the default) region heads are served by the JIT tier
    /// when the host supports it.
    pub fn from_graph(graph: Graph, options: Options) -> Result<Module, Error> {
        let program = shapejit_bytecode::lower(&graph)?;
        Module::from_parts(graph, program, options)
    }

    /// A module from a graph and a program lowered from it earlier (e.g. read
    /// back from an image). The program is verified first; a corrupt one is an
    /// [`Error::Verify`].
    pub fn from_parts(graph: Graph, program: Program, options: Options) -> Result<Module, Error> {
        let vm = shapejit_vm::Module::with_executor(program, options, shapejit_jit::make_executor)?;
        Ok(Module {
            vm,
            meta: Arc::new(ModelMeta::of_graph(&graph)),
            graph: Some(Arc::new(graph)),
        })
    }

    fn with_meta(mut self, meta: ModelMeta) -> Module {
        self.meta = Arc::new(meta);
        self
    }

    /// A new runtime; use one per thread.
    pub fn runtime(&self) -> Runtime {
        Runtime {
            inner: self.vm.runtime(),
        }
    }

    /// A snapshot of per-slot and global statistics.
    pub fn stats(&self) -> Stats {
        self.vm.stats()
    }

    /// What the model file says about itself (producer, graph name, ...).
    pub fn meta(&self) -> &ModelMeta {
        &self.meta
    }

    /// The graph the module was built from; `None` for a `.sjb` image.
    pub fn graph(&self) -> Option<&Graph> {
        self.graph.as_deref()
    }

    /// The lowered program (its `Display` is the bytecode listing).
    pub fn program(&self) -> &Program {
        self.vm.program()
    }

    /// The graph inputs: names and declared types, in `run` order.
    pub fn inputs(&self) -> &[IoSpec] {
        &self.vm.program().inputs
    }

    /// The graph outputs: names and declared types, in result order.
    pub fn outputs(&self) -> &[IoSpec] {
        &self.vm.program().outputs
    }

    /// The VM module (for tools that need counters and profiles).
    pub fn vm(&self) -> &shapejit_vm::Module {
        &self.vm
    }
}

/// One thread's interpreter for a [`Module`].
pub struct Runtime {
    inner: shapejit_vm::Runtime,
}

impl Runtime {
    /// Runs the model on `inputs` (in [`Module::inputs`] order); the outputs are
    /// owned by the caller.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        self.inner.run(inputs).map_err(Error::from)
    }

    /// [`Runtime::run`] with a deadline and/or a [`CancelToken`] another thread
    /// may trigger: a runaway `loop` stops at its next iteration with
    /// `RunError::Cancelled` or `RunError::DeadlineExceeded`.
    pub fn run_with(
        &mut self,
        inputs: &[Tensor],
        limits: &RunOptions,
    ) -> Result<Vec<Tensor>, Error> {
        self.inner.run_with(inputs, limits).map_err(Error::from)
    }

    /// The VM runtime.
    pub fn vm(&mut self) -> &mut shapejit_vm::Runtime {
        &mut self.inner
    }
}

/// True when `model` names a `.sjb` bytecode image.
fn is_image(model: &str) -> bool {
    has_extension(model, "sjb")
}

/// True when `model` is a file path (not `builtin:`) with this extension.
fn has_extension(model: &str, ext: &str) -> bool {
    !model.starts_with("builtin:")
        && Path::new(model).extension().and_then(|e| e.to_str()) == Some(ext)
}

/// Reads a model source into a graph (`builtin:NAME`, `.sjir`, `.onnx`).
pub fn load_graph(model: &str) -> Result<Graph, Error> {
    if let Some(name) = model.strip_prefix("builtin:") {
        return builtin::by_name(name).ok_or_else(|| Error::UnknownBuiltin {
            name: name.to_string(),
            known: builtin::NAMES.join(", "),
        });
    }
    let path = Path::new(model);
    match path.extension().and_then(|e| e.to_str()) {
        Some("sjir") => {
            let text = shapejit_ir::file::read_to_string(path).map_err(|e| Error::Io {
                path: model.to_string(),
                message: e.to_string(),
            })?;
            shapejit_ir::text::parse(&text).map_err(|source| Error::Parse {
                path: model.to_string(),
                source,
            })
        }
        Some("onnx") => meta::load_onnx(path, model).map(|(graph, _)| graph),
        Some("sjb") => Err(Error::ImageHasNoGraph {
            path: model.to_string(),
        }),
        _ => Err(Error::UnknownFormat {
            path: model.to_string(),
        }),
    }
}
