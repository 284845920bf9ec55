//! The project's shared ONNX models (`../shared/models` from the workspace
//! root) import with symbolic batch dims. When the folder is absent the test
//! says why and passes.

use std::path::PathBuf;

fn models_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipped: {} does not exist (the shared models are not checked out here)", dir.display());
        None
    }
}

#[test]
fn shared_models_import_with_symbolic_batch() {
    let Some(dir) = models_dir() else { return };
    let expect = [
        ("transformer", "f32[batch, 32, 256]", "f32[batch, 32, 256]"),
        ("mlp", "f32[batch, 512]", "f32[batch, 10]"),
        ("convnet", "f32[batch, 3, 32, 32]", "f32[batch, 10]"),
        ("elementwise", "f32[batch, 4096]", "f32[batch, 4096]"),
    ];
    for (name, input, output) in expect {
        let g = shapejit_onnx::load_path(&dir.join(format!("{name}.onnx"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g.value(g.inputs[0]).name, "x", "{name}");
        assert_eq!(g.value(g.inputs[0]).ty.to_string(), input, "{name}");
        assert_eq!(g.value(g.outputs[0]).name, "y", "{name}");
        assert_eq!(g.value(g.outputs[0]).ty.to_string(), output, "{name}");
        for node in &g.nodes {
            for &o in &node.outputs {
                let ty = &g.value(o).ty;
                assert!(
                    ty.shape.dims().iter().all(|d| d.symbols().iter().all(|s| s.name() == "batch")),
                    "{name}: node {} has type {ty}, expected only the batch symbol",
                    node.name
                );
            }
        }
    }
}
