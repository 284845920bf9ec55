//! End-to-end tests of the `shapejit` binary: outputs, files, and errors.

use std::path::Path;
use std::process::{Command, Output};

fn shapejit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shapejit"))
        .args(args)
        .env_remove("SHAPEJIT_JIT")
        .output()
        .expect("the binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a clean failure: non-zero exit, one `error:` line, no panic.
fn assert_fails(args: &[&str], needle: &str) {
    let out = shapejit(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
    assert_eq!(
        err.matches(needle).count(),
        1,
        "{args:?}: '{needle}' repeated in: {err}"
    );
}

fn write_npy_f32(path: &Path, data: &[f32], shape: &[u64]) {
    use npyz::WriterBuilder;
    let file = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(file)
        .begin_nd()
        .unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

fn read_npy_f32(path: &Path) -> (Vec<f32>, Vec<u64>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    (npy.into_vec::<f32>().unwrap(), shape)
}

#[test]
fn run_reads_inputs_and_writes_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let width = shapejit::builtin::ELEMENTWISE_WIDTH;
    let x: Vec<f32> = (0..2 * width)
        .map(|i| ((i % 97) as f32 - 48.0) / 16.0)
        .collect();
    let input = dir.path().join("x.npy");
    write_npy_f32(&input, &x, &[2, width as u64]);
    let out_dir = dir.path().join("out");
    let out = shapejit(&[
        "run",
        "builtin:elementwise",
        "--input",
        &format!("x={}", input.display()),
        "--output-dir",
        out_dir.to_str().unwrap(),
        "--iters",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("y: f32[2, 4096]  min"),
        "{}",
        stdout(&out)
    );
    let (y, shape) = read_npy_f32(&out_dir.join("y.npy"));
    assert_eq!(shape, [2, width as u64]);
    // Independent reference from the graph's own weights: y = sigmoid(v)*v - c,
    // v = tanh(x*w + b)*(x*w + b) + x.
    let graph = shapejit::builtin::elementwise();
    let constant = |name: &str| -> Vec<f64> {
        let node = graph
            .nodes
            .iter()
            .find(|n| graph.value(n.outputs[0]).name == name)
            .unwrap();
        match &node.op {
            shapejit::Op::Constant { value } => value.to_f64_vec(),
            other => panic!("{name} is a {}", other.name()),
        }
    };
    let (w, b, c) = (constant("w"), constant("b"), constant("c")[0]);
    for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
        let xi = xi as f64;
        let a = xi * w[i % width] + b[i % width];
        let v = a.tanh() * a + xi;
        let want = v / (1.0 + (-v).exp()) - c;
        assert!(
            (want - yi as f64).abs() <= 1e-5 * (1.0 + want.abs()),
            "element {i}: {yi} vs {want}"
        );
    }
}

#[test]
fn run_prints_stats_and_profile() {
    let out = shapejit(&[
        "run",
        "builtin:mlp",
        "--dim",
        "batch=3",
        "--stats",
        "--profile",
        "--iters",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "y: f32[3, 10]",
        "op matmul",
        "time per op type",
        "time per slot",
        "first iteration",
        "allocated in",
    ] {
        assert!(text.contains(needle), "missing '{needle}' in:\n{text}");
    }
    let out = shapejit(&[
        "run",
        "builtin:mlp",
        "--dim",
        "batch=2",
        "--profile",
        "--json",
        "--tier",
        "interp",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["outputs"][0]["shape"], serde_json::json!([2, 10]));
    let by_op = doc["profile"]["by_op"].as_array().unwrap();
    let linear = by_op.iter().find(|o| o["op"] == "matmul_bias").unwrap();
    assert_eq!(
        linear["count"], 4,
        "four linear layers (bias fused), one run"
    );
}

#[test]
fn dump_prints_graph_bytecode_and_memory_plan() {
    let out = shapejit(&["dump", "builtin:mlp"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "graph @mlp",
        "<elided 524288 x f32>",
        "shape_assert",
        "slot",
        "memory plan",
    ] {
        assert!(text.contains(needle), "missing '{needle}'");
    }
    let out = shapejit(&["dump", "builtin:elementwise", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["inputs"][0]["type"], "f32[batch, 4096]");
    assert!(doc["bytecode"].as_str().unwrap().contains("silu"));
    assert!(!doc["memory_plan"].as_array().unwrap().is_empty());
    assert!(!doc["slots"].as_array().unwrap().is_empty());
}

#[test]
fn bad_inputs_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("bad.sjir");
    std::fs::write(
        &garbage,
        "graph @g(%x: f32[2]) -> (%y) {\n  %y = frobnicate %x\n}\n",
    )
    .unwrap();
    let mismatched = dir.path().join("mismatch.sjir");
    std::fs::write(
        &mismatched,
        "graph @g(%x: f32[2], %z: f32[3]) -> (%y) {\n  %y = add %x, %z\n}\n",
    )
    .unwrap();
    let mismatch = mismatched.display().to_string();
    let not_npy = dir.path().join("x.npy");
    std::fs::write(&not_npy, b"hello").unwrap();
    let trace = dir.path().join("trace.txt");
    std::fs::write(&trace, "1\n4\nsixteen\n").unwrap();
    let g = garbage.to_str().unwrap();
    let x = format!("x={}", not_npy.display());
    let t = format!("trace:{}", trace.display());
    let cases: &[(&[&str], &str)] = &[
        (&["run", "builtin:nope"], "unknown built-in model 'nope'"),
        (
            &["run", "/nonexistent/model.sjir"],
            "/nonexistent/model.sjir",
        ),
        (&["run", "model.txt"], "unknown model format"),
        (&["run", g], "bad.sjir:2:"),
        (&["run", &mismatch], "cannot broadcast [2] with [3]"),
        (&["run", "builtin:mlp"], "--dim batch=N"),
        (&["run", "builtin:mlp", "--dim", "batch"], "is not SYMBOL=N"),
        (
            &[
                "run",
                "builtin:mlp",
                "--dim",
                "batch=2",
                "--input",
                "z=a.npy",
            ],
            "no input 'z'",
        ),
        (&["run", "builtin:mlp", "--input", &x], "not a valid .npy"),
        (
            &["run", "builtin:mlp", "--dim", "batch=2", "--iters", "0"],
            "--iters",
        ),
        (&["run", "builtin:mlp", "--tier", "turbo"], "turbo"),
        (
            &["bench", "builtin:mlp", "--workload", "walk:1,2"],
            "unknown workload kind",
        ),
        (&["bench", "builtin:mlp", "--workload", &t], "line 3"),
        (
            &["bench", "builtin:mlp", "--iters", "5", "--warmup", "5"],
            "--warmup",
        ),
        (&["bench", "builtin:mlp", "--tiers", "interp,fast"], "fast"),
        (
            &["bench", "builtin:mlp", "--compare", "/nonexistent.json"],
            "/nonexistent.json",
        ),
        (
            &["compile", "builtin:mlp", "-o", "/nonexistent/dir/out.sjb"],
            "/nonexistent/dir/out.sjb",
        ),
        (&["compile", "builtin:mlp"], "--output"),
        (&["frobnicate"], "frobnicate"),
        (&[], "a command is needed"),
    ];
    for (args, needle) in cases {
        assert_fails(args, needle);
    }
}

#[test]
fn compile_writes_an_image_that_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mlp.sjb");
    let out = shapejit(&["compile", "builtin:mlp", "-o", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("wrote "), "{}", stdout(&out));
    let loaded = shapejit::bytecode::image::load(&path).unwrap();
    let module = shapejit::Module::load("builtin:mlp", shapejit::Options::interp()).unwrap();
    assert_eq!(
        loaded.to_string(),
        module.program().to_string(),
        "same listing after the round trip"
    );
    assert_eq!(loaded.constants, module.program().constants, "same weights");
}

#[test]
fn wrong_input_shape_names_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.npy");
    write_npy_f32(&input, &[0.0; 6], &[2, 3]);
    assert_fails(
        &[
            "run",
            "builtin:mlp",
            "--input",
            &format!("x={}", input.display()),
        ],
        "'x'",
    );
}

#[test]
fn sizes_past_the_memory_limit_are_errors_not_aborts() {
    assert_fails(
        &["run", "builtin:mlp", "--dim", "batch=100000000000"],
        "input 'x' (f32[100000000000, 512]) needs 204800000000000 bytes",
    );
    assert_fails(
        &[
            "bench",
            "builtin:mlp",
            "--workload",
            "jitter:1..1000000",
            "--tiers",
            "interp",
        ],
        "over the memory limit of",
    );
}

#[test]
fn special_files_are_rejected_without_reading_them() {
    assert_fails(
        &["run", "builtin:mlp", "--input", "x=/dev/zero"],
        "'/dev/zero': a character device, expected a regular file",
    );
    let dir = tempfile::tempdir().unwrap();
    assert_fails(
        &["run", dir.path().to_str().unwrap()],
        "unknown model format",
    );
    let sjir = dir.path().join("d.sjir");
    std::fs::create_dir(&sjir).unwrap();
    assert_fails(
        &["run", sjir.to_str().unwrap()],
        "a directory, expected a regular file",
    );
}

#[test]
fn compile_replaces_a_mapped_image_without_disturbing_its_reader() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.sjb");
    let p = path.to_str().unwrap();
    let out = shapejit(&["compile", "builtin:mlp", "-o", p]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reference = shapejit(&[
        "run", p, "--tier", "interp", "--dim", "batch=4", "--iters", "20",
    ]);
    assert!(reference.status.success(), "{}", stderr(&reference));
    let inode = std::fs::metadata(&path).unwrap().ino();
    // A long run keeps the image mapped while compile writes another model over
    // it: about 5 s of runs at the reference's per-run time (a fixed count is
    // minutes on a slow machine and milliseconds on a fast one).
    let mean_us = stdout(&reference)
        .split("µs, mean ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .expect("run prints the mean time per run");
    let iters = (5e6 / mean_us.max(1.0)).ceil().clamp(50.0, 1e7) as u64;
    let mut child = Command::new(env!("CARGO_BIN_EXE_shapejit"))
        .args(["run", p, "--tier", "interp", "--dim", "batch=4", "--iters"])
        .arg(iters.to_string())
        .env_remove("SHAPEJIT_JIT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Rewrite only once the reader has the image mapped (its /proc maps list it).
    let maps = format!("/proc/{}/maps", child.id());
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&maps).is_ok_and(|m| m.contains(p)) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the reader never mapped {p}"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the reader ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = shapejit(&[
        "compile",
        "builtin:transformer",
        "-o",
        p,
        "--checksum-weights",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_ne!(
        std::fs::metadata(&path).unwrap().ino(),
        inode,
        "not a new file"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "inconclusive: the reader ({iters} runs at {mean_us} µs) ended before the rewrite"
    );
    let done = child.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "the reader died: {:?} {}",
        done.status,
        stderr(&done)
    );
    // Same outputs as before the rewrite (the summary line; timings differ).
    let first_line = |o: &Output| stdout(o).lines().next().unwrap_or_default().to_string();
    assert_eq!(first_line(&done), first_line(&reference));
    // The new image loads, with its weight checksum.
    let out = shapejit(&["run", p, "--tier", "interp", "--dim", "batch=1"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
