//! `.sjb` round trip: ONNX model → lowered program → image file → loaded
//! program; both run the same inputs to bit-identical outputs.

mod common;

use common::reference as r;
use common::*;
use shapejit_bytecode::image;
use shapejit_ir::Tensor;
use std::path::Path;

fn run_program(program: shapejit_bytecode::Program, inputs: &[Tensor]) -> Vec<Tensor> {
    let module = shapejit::vm::Module::new(program, shapejit::Options::default()).unwrap();
    module.runtime().run(inputs).unwrap()
}

fn assert_round_trip(graph: shapejit_ir::Graph, dir: &Path, inputs: &[Vec<Tensor>]) {
    let program = shapejit_bytecode::lower(&graph).unwrap();
    let path = dir.join(format!("{}.image", graph.name));
    image::write(&program, &path).unwrap();
    let loaded = image::load(&path).unwrap();
    assert_eq!(loaded, program, "{}", graph.name);
    for ins in inputs {
        let want = run_program(program.clone(), ins);
        let got = run_program(loaded.clone(), ins);
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.shape(), w.shape());
            assert_eq!(g.bytes(), w.bytes(), "{}: outputs differ", graph.name);
        }
    }
}

#[test]
fn built_models_round_trip_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = vec![
        node("MatMul", &["x", "w"], &["m"], vec![]),
        node("Add", &["m", "b"], &["h"], vec![]),
        if_one_node("c", "y", ("Relu", &["h"]), ("Neg", &["h"])),
    ];
    let mut rng = r::rng(21);
    let w = r::random(&mut rng, &[8, 5], -1.0, 1.0);
    let inits = vec![
        tf32(
            "w",
            &[8, 5],
            &w.data.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        ),
        tf32("b", &[5], &[0.1, 0.2, 0.3, 0.4, 0.5]),
    ];
    let m = model(
        13,
        graph(
            nodes,
            vec![
                vi("c", shapejit_onnx::proto::data_type::BOOL, &[]),
                vf("x", &["batch", "8"]),
            ],
            vec![vf("y", &[])],
            inits,
        ),
    );
    let g = import(&m).unwrap();
    let inputs: Vec<Vec<Tensor>> = [(true, 1), (false, 3), (true, 7)]
        .iter()
        .map(|&(c, batch)| {
            vec![
                Tensor::scalar(c),
                r::random(&mut rng, &[batch, 8], -1.0, 1.0).f32_tensor(),
            ]
        })
        .collect();
    assert_round_trip(g, dir.path(), &inputs);
}

#[test]
fn shared_models_round_trip_bit_for_bit() {
    let Some(models) = common::shared::models_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = r::rng(22);
    for (name, dims) in [
        ("transformer", vec![32, 256]),
        ("mlp", vec![512]),
        ("convnet", vec![3, 32, 32]),
        ("elementwise", vec![4096]),
    ] {
        let g = shapejit_onnx::load_path(&models.join(format!("{name}.onnx"))).unwrap();
        let inputs: Vec<Vec<Tensor>> = [1usize, 4]
            .iter()
            .map(|&batch| {
                let mut shape = vec![batch];
                shape.extend(&dims);
                vec![r::random(&mut rng, &shape, -1.0, 1.0).f32_tensor()]
            })
            .collect();
        assert_round_trip(g, dir.path(), &inputs);
    }
}
