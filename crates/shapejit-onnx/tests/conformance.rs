//! ONNX backend conformance over the onnx package's `pytorch-converted` and
//! `pytorch-operator` cases (`model.onnx` + `test_data_set_0/{input,output}_N.pb`).
//!
//! Runs only when `SHAPEJIT_ONNX_CONFORMANCE` names the `onnx/backend/test/data`
//! directory (CI sets it, see `.ci/conformance.sh`); otherwise it says why it
//! skipped. Prints passed / failed / unsupported counts and the failing names.
//! `tests/conformance/expected_failures.txt` lists the cases expected not to
//! pass; any other case that does not pass fails the test (a regression).
//! `SHAPEJIT_BLESS=1` rewrites the list from this run.
//!
//! Tolerance: `|got - want| <= 1e-7 + 1e-3 * |want|` (the onnx backend tests' default).

use prost::Message;
use shapejit_onnx::OnnxError;
use shapejit_onnx::proto::TensorProto;
use shapejit_onnx::tensor::{ExternalFiles, tensor_from_proto};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SUITES: [&str; 2] = ["pytorch-converted", "pytorch-operator"];

enum Outcome {
    Passed,
    Failed(String),
    Unsupported(String),
}

fn is_unsupported(e: &OnnxError) -> bool {
    match e {
        OnnxError::Unsupported { .. }
        | OnnxError::UnsupportedOp { .. }
        | OnnxError::Opset { .. } => true,
        OnnxError::Value { what, .. } | OnnxError::Tensor { what, .. } => {
            what.contains("unsupported")
        }
        _ => false,
    }
}

fn read_tensor(path: &Path) -> Result<shapejit_ir::Tensor, String> {
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

fn run_case(case: &Path) -> Outcome {
    let graph = match shapejit_onnx::load_path(&case.join("model.onnx")) {
        Ok(g) => g,
        Err(e) if is_unsupported(&e) => return Outcome::Unsupported(e.to_string()),
        Err(e) => return Outcome::Failed(format!("import: {e}")),
    };
    let data = case.join("test_data_set_0");
    let mut inputs = Vec::new();
    for p in numbered(&data, "input") {
        match read_tensor(&p) {
            Ok(t) => inputs.push(t),
            Err(e) if e.contains("unsupported") => return Outcome::Unsupported(e),
            Err(e) => return Outcome::Failed(e),
        }
    }
    let wants = match numbered(&data, "output")
        .iter()
        .map(|p| read_tensor(p))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(w) => w,
        Err(e) if e.contains("unsupported") => return Outcome::Unsupported(e),
        Err(e) => return Outcome::Failed(e),
    };
    let run = std::panic::catch_unwind(move || -> Result<Vec<shapejit_ir::Tensor>, String> {
        let module = shapejit::Module::from_graph(graph, shapejit::Options::default())
            .map_err(|e| format!("compile: {e}"))?;
        module
            .runtime()
            .run(&inputs)
            .map_err(|e| format!("run: {e}"))
    });
    let gots = match run {
        Ok(Ok(g)) => g,
        Ok(Err(e)) => return Outcome::Failed(e),
        Err(_) => return Outcome::Failed("panicked".into()),
    };
    if gots.len() != wants.len() {
        return Outcome::Failed(format!("{} outputs, expected {}", gots.len(), wants.len()));
    }
    for (i, (got, want)) in gots.iter().zip(&wants).enumerate() {
        if got.shape() != want.shape() || got.dtype() != want.dtype() {
            return Outcome::Failed(format!(
                "output {i}: {}{:?} vs expected {}{:?}",
                got.dtype(),
                got.shape(),
                want.dtype(),
                want.shape()
            ));
        }
        for (j, (g, w)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
            let ok = (g - w).abs() <= 1e-7 + 1e-3 * w.abs() || (g.is_nan() && w.is_nan());
            if !ok {
                return Outcome::Failed(format!("output {i}[{j}] = {g}, expected {w}"));
            }
        }
    }
    Outcome::Passed
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

#[test]
fn onnx_backend_conformance() {
    let Ok(root) = std::env::var("SHAPEJIT_ONNX_CONFORMANCE") else {
        println!(
            "skipped: set SHAPEJIT_ONNX_CONFORMANCE to the onnx package's backend/test/data directory"
        );
        return;
    };
    let root = PathBuf::from(root);
    let expected = read_expected();
    let mut not_passing = BTreeSet::new();
    let mut regressions = Vec::new();
    for suite in SUITES {
        let mut cases: Vec<PathBuf> = std::fs::read_dir(root.join(suite))
            .unwrap_or_else(|e| panic!("{}: {e}", root.join(suite).display()))
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.join("model.onnx").exists())
            .collect();
        cases.sort();
        let (mut passed, mut failed, mut unsupported) = (0, 0, 0);
        for case in &cases {
            let name = format!(
                "{suite}/{}",
                case.file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            );
            match run_case(case) {
                Outcome::Passed => {
                    passed += 1;
                    if expected.contains(&name) {
                        println!("now passes (remove it from the expected failures): {name}");
                    }
                    continue;
                }
                Outcome::Failed(why) => {
                    failed += 1;
                    println!("FAILED {name}: {why}");
                }
                Outcome::Unsupported(why) => {
                    unsupported += 1;
                    println!("unsupported {name}: {why}");
                }
            }
            if !expected.contains(&name) {
                regressions.push(name.clone());
            }
            not_passing.insert(name);
        }
        println!(
            "{suite}: {passed} passed, {failed} failed, {unsupported} unsupported (of {})",
            cases.len()
        );
    }
    if std::env::var("SHAPEJIT_BLESS").is_ok_and(|v| v == "1") {
        let mut text = String::from(
            "# ONNX conformance cases expected not to pass (failed or unsupported).\n",
        );
        text.push_str(
            "# Regenerate with SHAPEJIT_BLESS=1 (see crates/shapejit-onnx/tests/conformance.rs).\n",
        );
        for name in &not_passing {
            text.push_str(name);
            text.push('\n');
        }
        std::fs::write(list_path(), text).expect("write the expected-failures list");
        return;
    }
    assert!(
        regressions.is_empty(),
        "cases not in the expected-failures list failed: {regressions:?}"
    );
}
