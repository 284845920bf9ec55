//! The project's shared ONNX models, `../shared/models` next to the workspace root,
//! for the tests that run them (`shapejit-onnx`'s, and the workspace tests', which
//! include this file by path: one rule, one place).
//!
//! **Invariant:** a skip is loud. When the data is absent a test prints `SKIP` with
//! the path and the reason, and passes — except in CI (`CI=true`), where missing data
//! fails the test.

use std::path::{Path, PathBuf};

/// `../shared/models` next to the workspace root (the first ancestor of the crate
/// that holds `Cargo.lock`), or `None` after printing SKIP (a panic in CI).
pub fn models_dir() -> Option<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap_or(manifest);
    let dir = root.join("../shared/models");
    if dir.is_dir() {
        Some(dir)
    } else {
        absent(&dir);
        None
    }
}

/// The shared model `NAME.onnx`, or `None` after printing SKIP (a panic in CI).
pub fn model(name: &str) -> Option<PathBuf> {
    let path = models_dir()?.join(format!("{name}.onnx"));
    if path.is_file() {
        Some(path)
    } else {
        absent(&path);
        None
    }
}

fn absent(path: &Path) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "FAIL: {} is absent and CI=true: in CI missing test data is a failure \
             (check out the project's shared folder next to the workspace)",
            path.display()
        );
    }
    println!(
        "SKIP: {} is absent (the project's shared folder is not checked out next to \
         the workspace)",
        path.display()
    );
}
