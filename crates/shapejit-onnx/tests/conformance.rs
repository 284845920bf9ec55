//! ONNX backend conformance: the onnx package's node cases, the nine `light`
//! models, and its `pytorch-converted`, `pytorch-operator` and `simple` cases,
//! each a `model.onnx` + `test_data_set_0/{input,output}_N.pb`.
//!
//! Runs only when `SHAPEJIT_ONNX_CONFORMANCE` names the directory
//! `.ci/conformance_cases.py` wrote (CI sets it, see `.ci/conformance.sh`);
//! otherwise it says why it skipped (`.ci/run` runs it through
//! `.ci/conformance.sh`). Each case runs
//! on the interpreter (the specification tier). Outcomes, counted per suite:
//! - passed: every output has the expected dtype and shape, floats within
//!   `|got - want| <= atol + rtol·|want|` (the onnx backend runner's test,
//!   NaN equal to NaN; `rtol` 1e-3, 2e-3 for densenet121, `atol` 1e-7; for
//!   f16 and bf16 outputs at least two units in the last place of the type,
//!   2^-9 and 2^-6, since each op rounds its f32 result once where the
//!   reference may round a decomposed op's every step), other dtypes exactly
//!   equal;
//! - wrong: an output differs — never acceptable, whatever the list says;
//! - crashed: the import or the run panicked — never acceptable either;
//! - error: the import or the run returned an error that is not "unsupported";
//! - unsupported: the importer (or the test data reader) says what it does
//!   not support.
//!
//! `tests/conformance/expected_failures.txt` lists the cases expected to be
//! errors or unsupported; any other case that does not pass fails the test,
//! and so does any wrong or crashed case. `SHAPEJIT_BLESS=1` rewrites the list
//! from this run (wrong and crashed cases still fail it).
//!
//! When the directory has `schemas.txt` (every op's since-versions from
//! `onnx.defs`), the importer's version table is checked against it.

use prost::Message;
use shapejit_ir::{DType, Tensor};
use shapejit_onnx::OnnxError;
use shapejit_onnx::proto::TensorProto;
use shapejit_onnx::tensor::{ExternalFiles, tensor_from_proto};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SUITES: [&str; 5] = [
    "node",
    "light",
    "simple",
    "pytorch-converted",
    "pytorch-operator",
];

enum Outcome {
    Passed,
    Wrong(String),
    Crashed(String),
    Error(String),
    Unsupported(String),
}

fn is_unsupported(e: &OnnxError) -> bool {
    match e {
        OnnxError::Unsupported { .. }
        | OnnxError::UnsupportedOp { .. }
        | OnnxError::UnsupportedDomain { .. }
        | OnnxError::Opset { .. } => true,
        OnnxError::Value { what, .. } | OnnxError::Tensor { what, .. } => {
            what.contains("unsupported")
        }
        _ => false,
    }
}

fn read_tensor(path: &Path) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let tp =
        TensorProto::decode(bytes.as_slice()).map_err(|e| format!("{}: {e}", path.display()))?;
    tensor_from_proto(&tp, &ExternalFiles::new(None)).map_err(|e| e.to_string())
}

fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    (0..)
        .map(|i| dir.join(format!("{prefix}_{i}.pb")))
        .take_while(|p| p.exists())
        .collect()
}

fn read_all(paths: &[PathBuf]) -> Result<Vec<Tensor>, Outcome> {
    paths
        .iter()
        .map(|p| {
            read_tensor(p).map_err(|e| {
                if e.contains("unsupported") {
                    Outcome::Unsupported(e)
                } else {
                    Outcome::Error(e)
                }
            })
        })
        .collect()
}

/// The first difference between the outputs and the references, if any.
fn compare(gots: &[Tensor], wants: &[Tensor], rtol: f64) -> Option<String> {
    if gots.len() != wants.len() {
        return Some(format!("{} outputs, expected {}", gots.len(), wants.len()));
    }
    for (i, (got, want)) in gots.iter().zip(wants).enumerate() {
        if got.shape() != want.shape() || got.dtype() != want.dtype() {
            return Some(format!(
                "output {i}: {}{:?} vs expected {}{:?}",
                got.dtype(),
                got.shape(),
                want.dtype(),
                want.shape()
            ));
        }
        let float = want.dtype().is_float();
        let rtol = match want.dtype() {
            DType::F16 => rtol.max(2f64.powi(-9)),
            DType::Bf16 => rtol.max(2f64.powi(-6)),
            _ => rtol,
        };
        for (j, (g, w)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
            let ok = if float {
                (g - w).abs() <= 1e-7 + rtol * w.abs() || (g.is_nan() && w.is_nan()) || *g == w
            } else {
                *g == w
            };
            if !ok {
                return Some(format!("output {i}[{j}] = {g}, expected {w}"));
            }
        }
    }
    None
}

fn run_case(case: &Path, rtol: f64) -> Outcome {
    if let Ok(why) = std::fs::read_to_string(case.join("unsupported.txt")) {
        return Outcome::Unsupported(why.trim().to_string());
    }
    let data = case.join("test_data_set_0");
    let (inputs, wants) = match (
        read_all(&numbered(&data, "input")),
        read_all(&numbered(&data, "output")),
    ) {
        (Ok(i), Ok(w)) => (i, w),
        (Err(o), _) | (_, Err(o)) => return o,
    };
    let model = case.join("model.onnx");
    let run = std::panic::catch_unwind(move || -> Result<Vec<Tensor>, Outcome> {
        let graph = shapejit_onnx::load_path(&model).map_err(|e| {
            if is_unsupported(&e) {
                Outcome::Unsupported(e.to_string())
            } else {
                Outcome::Error(format!("import: {e}"))
            }
        })?;
        let module = shapejit::Module::from_graph(graph, shapejit::Options::interp())
            .map_err(|e| Outcome::Error(format!("compile: {e}")))?;
        module
            .runtime()
            .run(&inputs)
            .map_err(|e| Outcome::Error(format!("run: {e}")))
    });
    match run {
        Ok(Ok(gots)) => match compare(&gots, &wants, rtol) {
            None => Outcome::Passed,
            Some(why) => Outcome::Wrong(why),
        },
        Ok(Err(outcome)) => outcome,
        Err(panic) => Outcome::Crashed(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
    }
}

fn list_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/expected_failures.txt")
}

fn read_expected() -> BTreeSet<String> {
    std::fs::read_to_string(list_path())
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Checks each op's version list against the since-versions of `onnx.defs`:
/// the same versions from the table's first one up to `MAX_OPSET`.
fn check_versions(schemas: &str) {
    let mut mismatches = Vec::new();
    for (op, versions, _) in shapejit_onnx::ops::OPS {
        let Some(line) = schemas
            .lines()
            .find(|l| l.split_whitespace().next() == Some(op))
        else {
            mismatches.push(format!("{op}: not an ONNX op"));
            continue;
        };
        let onnx: Vec<i64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .filter(|&v| v >= versions[0] && v <= shapejit_onnx::MAX_OPSET)
            .collect();
        if onnx != *versions {
            mismatches.push(format!("{op}: table {versions:?}, onnx {onnx:?}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "the version table differs from onnx.defs: {mismatches:?}"
    );
}

#[test]
fn onnx_backend_conformance() {
    let Ok(root) = std::env::var("SHAPEJIT_ONNX_CONFORMANCE") else {
        println!(
            "SKIP: set SHAPEJIT_ONNX_CONFORMANCE to the directory .ci/conformance_cases.py writes"
        );
        return;
    };
    let root = PathBuf::from(root);
    if let Ok(schemas) = std::fs::read_to_string(root.join("schemas.txt")) {
        check_versions(&schemas);
    }
    let expected = read_expected();
    let mut not_passing = BTreeSet::new();
    let mut regressions = Vec::new();
    let mut never_ok = Vec::new();
    for suite in SUITES {
        let dir = root.join(suite);
        let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.join("model.onnx").exists())
            .collect();
        cases.sort();
        let mut counts = [0usize; 5];
        let start = std::time::Instant::now();
        for case in &cases {
            let leaf = case
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = format!("{suite}/{leaf}");
            let rtol = if leaf == "densenet121" { 2e-3 } else { 1e-3 };
            let (slot, label, why) = match run_case(case, rtol) {
                Outcome::Passed => {
                    counts[0] += 1;
                    if expected.contains(&name) {
                        println!("now passes (remove it from the expected failures): {name}");
                    }
                    continue;
                }
                Outcome::Wrong(why) => (1, "WRONG", why),
                Outcome::Crashed(why) => (2, "CRASHED", why),
                Outcome::Error(why) => (3, "error", why),
                Outcome::Unsupported(why) => (4, "unsupported", why),
            };
            counts[slot] += 1;
            println!("{label} {name}: {why}");
            if slot <= 2 {
                never_ok.push(name.clone());
            } else if !expected.contains(&name) {
                regressions.push(name.clone());
            }
            not_passing.insert(name);
        }
        println!(
            "{suite}: {} passed, {} failed (wrong result), {} crashed, {} error, {} unsupported (of {}) in {:.1} s",
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[4],
            cases.len(),
            start.elapsed().as_secs_f64()
        );
    }
    if std::env::var("SHAPEJIT_BLESS").is_ok_and(|v| v == "1") {
        let mut text = String::from(
            "# ONNX conformance cases expected not to pass (errors or unsupported; a wrong\n\
             # result or a crash is never listed). Regenerate with SHAPEJIT_BLESS=1\n\
             # (see crates/shapejit-onnx/tests/conformance.rs).\n",
        );
        for name in not_passing.iter().filter(|n| !never_ok.contains(n)) {
            text.push_str(name);
            text.push('\n');
        }
        std::fs::write(list_path(), text).expect("write the expected-failures list");
    } else {
        assert!(
            regressions.is_empty(),
            "cases not in the expected-failures list failed: {regressions:?}"
        );
    }
    assert!(
        never_ok.is_empty(),
        "wrong results or crashes (never expected failures): {never_ok:?}"
    );
}
