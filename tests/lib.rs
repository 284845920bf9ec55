//! Shared helpers for the workspace-level tests (golden-file runner, references,
//! seeded model inputs, the shared models' folder).
//!
//! **Invariant:** a golden test fails on any difference between the computed
//! and the expected text; the expected text is only rewritten on request
//! (`BLESS=1`), never silently.
#![deny(missing_docs)]

/// Golden text tests in the style of Cranelift's filetests.
///
/// A case is one file: the input, then a line that is exactly
/// [`SEPARATOR`](golden::SEPARATOR), then the expected output:
///
/// ```text
/// graph @g(%x: f32[batch, 4]) -> (%y) {
///   %y = relu %x
/// }
/// // ---- expected ----
/// %x: f32[batch, 4]
/// %y: f32[batch, 4]
/// ```
///
/// [`run_dir`](golden::run_dir) runs a function over every case of a
/// directory, prints a unified diff for each mismatch and fails at the end.
/// With the environment variable `BLESS=1` it rewrites the expected sections
/// instead (then read the diff in `git diff` before committing).
pub mod golden {
    use std::fmt::Write as _;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::path::{Path, PathBuf};

    /// The line that separates a case's input from its expected output.
    pub const SEPARATOR: &str = "// ---- expected ----";

    /// A case file split into its input and expected output.
    #[derive(Debug, PartialEq, Eq)]
    pub struct Case {
        /// everything before the separator line
        pub input: String,
        /// everything after it (`None` when the file has no separator)
        pub expected: Option<String>,
    }

    /// Splits a case file at the first [`SEPARATOR`] line.
    pub fn split(text: &str) -> Case {
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            if line.trim_end_matches(['\n', '\r']) == SEPARATOR {
                return Case {
                    input: text[..offset].to_string(),
                    expected: Some(text[offset + line.len()..].to_string()),
                };
            }
            offset += line.len();
        }
        Case {
            input: text.to_string(),
            expected: None,
        }
    }

    /// The text of a case file with `input` and `expected` (ends with one newline).
    pub fn join(input: &str, expected: &str) -> String {
        let mut out = input.trim_end().to_string();
        out.push('\n');
        out.push_str(SEPARATOR);
        out.push('\n');
        out.push_str(&normalize(expected));
        out
    }

    /// Trailing whitespace at the end of the text is not significant;
    /// non-empty output ends with exactly one newline.
    fn normalize(text: &str) -> String {
        let t = text.trim_end();
        if t.is_empty() {
            String::new()
        } else {
            format!("{t}\n")
        }
    }

    /// A unified diff from `expected` to `actual`.
    pub fn diff(expected: &str, actual: &str) -> String {
        similar::TextDiff::from_lines(expected, actual)
            .unified_diff()
            .header("expected", "actual")
            .to_string()
    }

    /// The case files of a directory (not hidden, sorted by name).
    fn case_files(dir: &Path) -> Vec<PathBuf> {
        let entries = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot read golden dir {}: {e}", dir.display()));
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        files.sort();
        files
    }

    /// Runs `f` on the input of every case file in `dir` and compares with the
    /// expected section. Panics (after checking every case) listing the failed
    /// cases, each with a unified diff; `BLESS=1` rewrites them instead.
    /// A directory without cases is an error, so a typo cannot pass.
    pub fn run_dir(dir: &Path, f: impl Fn(&str) -> String) {
        run_cases(dir, f, std::env::var("BLESS").is_ok_and(|v| v == "1"));
    }

    fn run_cases(dir: &Path, f: impl Fn(&str) -> String, bless: bool) {
        let files = case_files(dir);
        assert!(
            !files.is_empty(),
            "golden dir {} has no cases",
            dir.display()
        );
        let mut report = String::new();
        let mut failed = 0;
        for path in &files {
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let case = split(&text);
            let actual = match catch_unwind(AssertUnwindSafe(|| f(&case.input))) {
                Ok(out) => normalize(&out),
                Err(panic) => {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failed += 1;
                    let _ = writeln!(
                        report,
                        "\n=== {}: the function panicked: {msg}",
                        path.display()
                    );
                    continue;
                }
            };
            let expected = case.expected.as_deref().map(normalize);
            if expected.as_deref() == Some(actual.as_str()) {
                continue;
            }
            if bless {
                std::fs::write(path, join(&case.input, &actual))
                    .unwrap_or_else(|e| panic!("cannot bless {}: {e}", path.display()));
                eprintln!("blessed {}", path.display());
                continue;
            }
            failed += 1;
            match expected {
                Some(exp) => {
                    let _ = write!(
                        report,
                        "\n=== {} differs:\n{}",
                        path.display(),
                        diff(&exp, &actual)
                    );
                }
                None => {
                    let _ = write!(
                        report,
                        "\n=== {} has no '{SEPARATOR}' line; the output is:\n{actual}",
                        path.display()
                    );
                }
            }
        }
        if failed > 0 {
            panic!(
                "{failed} of {} golden cases in {} failed (rerun with BLESS=1 to accept the new output):{report}",
                files.len(),
                dir.display()
            );
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn split_and_join_are_inverse() {
            let case = split("a\nb\n// ---- expected ----\nout\n");
            assert_eq!(
                case,
                Case {
                    input: "a\nb\n".into(),
                    expected: Some("out\n".into())
                }
            );
            assert_eq!(
                join(&case.input, "out"),
                "a\nb\n// ---- expected ----\nout\n"
            );
            assert_eq!(split("no separator").expected, None);
            assert_eq!(
                split("x\r\n// ---- expected ----\r\ny").expected.as_deref(),
                Some("y")
            );
        }

        #[test]
        fn run_dir_reports_diffs_and_blesses() {
            let dir = std::env::temp_dir().join(format!("shapejit-golden-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("ok.txt"), "abc\n// ---- expected ----\nABC\n").unwrap();
            std::fs::write(dir.join("bad.txt"), "xyz\n// ---- expected ----\nwrong\n").unwrap();
            let upper = |s: &str| s.trim().to_uppercase();
            let err = catch_unwind(|| run_cases(&dir, upper, false)).unwrap_err();
            let msg = err.downcast_ref::<String>().unwrap();
            assert!(msg.contains("1 of 2 golden cases"), "{msg}");
            assert!(msg.contains("-wrong\n+XYZ"), "{msg}");
            run_cases(&dir, upper, true);
            assert_eq!(
                std::fs::read_to_string(dir.join("bad.txt")).unwrap(),
                "xyz\n// ---- expected ----\nXYZ\n"
            );
            run_cases(&dir, upper, false);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

/// Seeded inputs for a loaded model.
pub mod inputs {
    use shapejit::bytecode::DimCheck;
    use shapejit::{Module, Tensor};

    /// One input per declared input of `module`, every symbolic dim set to `batch`,
    /// values from an LCG seeded with `seed` (and the input's index) in [-1, 1).
    pub fn seeded(module: &Module, batch: usize, seed: u64) -> Vec<Tensor> {
        module
            .inputs()
            .iter()
            .enumerate()
            .map(|(k, spec)| {
                let shape: Vec<usize> = spec
                    .dims
                    .iter()
                    .map(|d| match d {
                        DimCheck::Known(v) => *v as usize,
                        DimCheck::Symbol(_) => batch,
                        DimCheck::Expr(e) => e.eval(&|_| Some(batch as i64)).unwrap_or(1) as usize,
                    })
                    .collect();
                let n: usize = shape.iter().product();
                let mut state = seed.wrapping_mul(6_364_136_223_846_793_005) ^ (k as u64 + 1);
                let data = (0..n)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
                    })
                    .collect();
                Tensor::from_vec(data, &shape).expect("the declared shape holds n elements")
            })
            .collect()
    }
}

/// The project's shared ONNX models (`../shared/models`): SKIP when absent, a
/// failure in CI. The file is `shapejit-onnx`'s test helper, included by path.
#[path = "../crates/shapejit-onnx/tests/common/shared.rs"]
pub mod shared;
