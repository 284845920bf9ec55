//! The project's shared ONNX models (`../shared/models` from the workspace
//! root) import with symbolic batch dims and match their references. When the
//! folder is absent the tests print SKIP and pass, except in CI (`CI=true`), where
//! they fail (`common::shared`).

mod common;

use common::shared::models_dir;

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
        let g = shapejit_onnx::load_path(&dir.join(format!("{name}.onnx")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g.value(g.inputs[0]).name, "x", "{name}");
        assert_eq!(g.value(g.inputs[0]).ty.to_string(), input, "{name}");
        assert_eq!(g.value(g.outputs[0]).name, "y", "{name}");
        assert_eq!(g.value(g.outputs[0]).ty.to_string(), output, "{name}");
        for node in &g.nodes {
            for &o in &node.outputs {
                let ty = &g.value(o).ty;
                assert!(
                    ty.shape
                        .dims()
                        .iter()
                        .all(|d| d.symbols().iter().all(|s| s.name() == "batch")),
                    "{name}: node {} has type {ty}, expected only the batch symbol",
                    node.name
                );
            }
        }
    }
}

/// Reads an f32 array from an npz archive.
fn npz_tensor(
    archive: &mut npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>,
    name: &str,
) -> shapejit_ir::Tensor {
    let npy = archive
        .by_name(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .unwrap_or_else(|| panic!("{name} missing"));
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let data: Vec<f32> = npy.into_vec().unwrap_or_else(|e| panic!("{name}: {e}"));
    shapejit_ir::Tensor::from_vec(data, &shape).unwrap()
}

#[test]
fn shared_models_match_their_references() {
    let Some(dir) = models_dir() else { return };
    for name in ["transformer", "mlp", "convnet", "elementwise"] {
        let graph = shapejit_onnx::load_path(&dir.join(format!("{name}.onnx"))).unwrap();
        let module = shapejit::Module::from_graph(graph, shapejit::Options::default()).unwrap();
        let mut rt = module.runtime();
        let mut archive = npyz::npz::NpzArchive::open(dir.join(format!("{name}.ref.npz"))).unwrap();
        for batch in [1, 4, 16, 64] {
            let input = npz_tensor(&mut archive, &format!("input_b{batch}"));
            let want = npz_tensor(&mut archive, &format!("output_b{batch}"));
            let got = rt
                .run(&[input])
                .unwrap_or_else(|e| panic!("{name} b{batch}: {e}"));
            assert_eq!(got[0].shape(), want.shape(), "{name} b{batch}");
            let (g, w) = (got[0].to_f64_vec(), want.to_f64_vec());
            let max_ref = w.iter().fold(0f64, |m, v| m.max(v.abs()));
            let max_err = g
                .iter()
                .zip(&w)
                .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                max_err <= 1e-4 * max_ref,
                "{name} b{batch}: max abs error {max_err} > 1e-4 * {max_ref}"
            );
        }
    }
}
