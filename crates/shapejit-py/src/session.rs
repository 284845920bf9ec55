//! The native session behind `shapejit.InferenceSession`: one loaded
//! [`Module`] and a pool of per-thread [`Runtime`]s.
//!
//! **Invariants:** `run` holds the GIL only to read the inputs and to build
//! the output arrays; the model runs with the GIL released. A runtime is used
//! by one call at a time: a call takes one from the pool (or makes a new one
//! when all are busy) and puts it back afterwards, so any number of Python
//! threads may share a session, and the pool grows to the largest number of
//! concurrent calls.

use crate::convert::{input_tensor, onnx_type, output_array};
use crate::errors::{Fail, NoSuchFile, invalid, to_py};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use shapejit::{CompileMode, IoSpec, Module, Options, Runtime, Tensor, Tier};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// A loaded model and its runtimes.
#[pyclass(frozen, module = "shapejit")]
pub struct Session {
    module: Module,
    pool: Mutex<Vec<Runtime>>,
    input_index: HashMap<String, usize>,
    output_index: HashMap<String, usize>,
}

/// Options from the `tier` and `compile` strings and the intra-op thread count
/// (`0`: the default, the machine's available parallelism or `SHAPEJIT_THREADS`).
pub fn options(tier: &str, compile: &str, threads: usize) -> PyResult<Options> {
    let tier = match tier {
        "jit" => Tier::Jit,
        "interp" => Tier::Interp,
        other => {
            return Err(invalid(format!(
                "tier must be 'jit' or 'interp', got '{other}'"
            )));
        }
    };
    let compile = match compile {
        "background" => CompileMode::Background,
        "sync" => CompileMode::Sync,
        "off" => CompileMode::Off,
        other => {
            return Err(invalid(format!(
                "compile must be 'background', 'sync' or 'off', got '{other}'"
            )));
        }
    };
    let defaults = Options::default();
    Ok(Options {
        tier,
        compile,
        threads: if threads == 0 {
            defaults.threads
        } else {
            threads
        },
        ..defaults
    })
}

/// Loads a model from a path (`str`, `os.PathLike`), `builtin:NAME`, or the
/// bytes of an ONNX model, with the GIL released.
pub fn load(model: &Bound<'_, PyAny>, options: Options) -> PyResult<Module> {
    let py = model.py();
    if let Ok(bytes) = model.cast::<PyBytes>() {
        let bytes = bytes.as_bytes().to_vec();
        return py
            .detach(|| Module::from_onnx_bytes(bytes, options))
            .map_err(to_py);
    }
    let path: String = py
        .import("os")?
        .call_method1("fspath", (model,))
        .and_then(|p| p.extract())
        .map_err(|_| {
            invalid(format!(
                "a model is a path, builtin:NAME or the bytes of an ONNX model, got {}",
                model
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".into(), |n| n.to_string())
            ))
        })?;
    if !path.starts_with("builtin:") && !std::path::Path::new(&path).exists() {
        return Err(NoSuchFile::new_err(format!(
            "cannot read '{path}': no such file"
        )));
    }
    py.detach(|| Module::load(&path, options)).map_err(to_py)
}

fn by_name(specs: &[IoSpec]) -> HashMap<String, usize> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i))
        .collect()
}

fn names(specs: &[IoSpec]) -> String {
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    names.join(", ")
}

/// `(name, shape, type)` of each spec; a dim is an int when known, else its
/// symbol (or expression) as a string, as onnxruntime shows `dim_param`s.
fn describe<'py>(py: Python<'py>, specs: &[IoSpec]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for s in specs {
        let shape = PyList::empty(py);
        for d in s.ty.shape.dims() {
            match d.as_known() {
                Some(n) => shape.append(n)?,
                None => shape.append(d.to_string())?,
            }
        }
        list.append((s.name.as_str(), shape, onnx_type(s.ty.dtype)))?;
    }
    Ok(list)
}

impl Session {
    fn take_runtime(&self) -> Runtime {
        let pooled = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        pooled.unwrap_or_else(|| self.module.runtime())
    }

    fn return_runtime(&self, rt: Runtime) {
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(rt);
    }

    /// The inputs in the module's order, from `feed` (a dict name → value).
    fn inputs(&self, feed: &Bound<'_, PyDict>) -> PyResult<Vec<Tensor>> {
        let specs = self.module.inputs();
        let mut tensors: Vec<Option<Tensor>> = vec![None; specs.len()];
        for (key, value) in feed.iter() {
            let name: String = key
                .extract()
                .map_err(|_| invalid(format!("input names are strings, got {key:?}")))?;
            let &i = self.input_index.get(&name).ok_or_else(|| {
                invalid(format!(
                    "the model has no input '{name}' (its inputs: {})",
                    names(specs)
                ))
            })?;
            tensors[i] = Some(input_tensor(&specs[i], &value)?);
        }
        tensors
            .into_iter()
            .zip(specs)
            .map(|(t, s)| {
                t.ok_or_else(|| {
                    invalid(format!(
                        "input '{}' is missing (the model's inputs: {})",
                        s.name,
                        names(specs)
                    ))
                })
            })
            .collect()
    }

    /// Indices of the requested outputs (`None`: all, in order).
    fn output_indices(&self, output_names: Option<Vec<String>>) -> PyResult<Vec<usize>> {
        let Some(wanted) = output_names else {
            return Ok((0..self.module.outputs().len()).collect());
        };
        wanted
            .iter()
            .map(|name| {
                self.output_index.get(name).copied().ok_or_else(|| {
                    invalid(format!(
                        "the model has no output '{name}' (its outputs: {})",
                        names(self.module.outputs())
                    ))
                })
            })
            .collect()
    }
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (model, tier = "jit", compile = "background", threads = 0))]
    fn new(
        model: &Bound<'_, PyAny>,
        tier: &str,
        compile: &str,
        threads: usize,
    ) -> PyResult<Session> {
        let module = load(model, options(tier, compile, threads)?)?;
        Ok(Session {
            input_index: by_name(module.inputs()),
            output_index: by_name(module.outputs()),
            pool: Mutex::new(Vec::new()),
            module,
        })
    }

    /// Runs the model: the outputs named by `output_names` (`None`: all),
    /// from `input_feed` (input name → array).
    #[pyo3(signature = (output_names, input_feed, run_options = None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        output_names: Option<Vec<String>>,
        input_feed: &Bound<'py, PyDict>,
        run_options: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let _ = run_options; // accepted for onnxruntime compatibility
        let wanted = self.output_indices(output_names)?;
        let inputs = self.inputs(input_feed)?;
        let mut rt = self.take_runtime();
        let result = py.detach(|| rt.run(&inputs));
        self.return_runtime(rt);
        drop(inputs);
        let mut outputs: Vec<Option<Tensor>> =
            result.map_err(to_py)?.into_iter().map(Some).collect();
        wanted
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                // A name asked for again later gets a copy here; its last
                // request takes the buffer.
                let t = if wanted[k + 1..].contains(&i) {
                    outputs[i].clone()
                } else {
                    outputs[i].take()
                };
                let t = t.ok_or_else(|| Fail::new_err("the run returned too few outputs"))?;
                output_array(py, t)
            })
            .collect()
    }

    /// `(name, shape, type)` of each input.
    fn inputs_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        describe(py, self.module.inputs())
    }

    /// `(name, shape, type)` of each output.
    fn outputs_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        describe(py, self.module.outputs())
    }

    /// The model's metadata as a dict.
    fn meta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.module.meta();
        let d = PyDict::new(py);
        d.set_item("producer_name", &m.producer_name)?;
        d.set_item("producer_version", &m.producer_version)?;
        d.set_item("graph_name", &m.graph_name)?;
        d.set_item("domain", &m.domain)?;
        d.set_item("description", &m.description)?;
        d.set_item("version", m.version)?;
        let custom = PyDict::new(py);
        for (k, v) in &m.custom {
            custom.set_item(k, v)?;
        }
        d.set_item("custom_metadata_map", custom)?;
        Ok(d)
    }

    /// The statistics as JSON (the `stats` object of `shapejit run --stats --json`).
    fn stats_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.module.stats())
            .map_err(|e| Fail::new_err(format!("cannot encode the stats: {e}")))
    }
}
