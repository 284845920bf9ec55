//! The interpreter's per-instruction op plans (result types and splits kept
//! while an op's inputs keep their dtypes and layouts): a change of input
//! shapes, or of the contents an op's types are read from, is never served by
//! a stale plan. References are computed in the test with plain loops.

use shapejit_bytecode::lower;
use shapejit_ir::{DType, GraphBuilder, Tensor, shape};
use shapejit_vm::{Module, Options};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.bytes()
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `x: f32[batch, 4]` through alternating `+1` and `*0.5`, as the dispatch bench.
#[test]
fn a_chain_follows_its_input_shapes() {
    let mut b = GraphBuilder::new("chain");
    let x = b.input("x", DType::F32, shape!["batch", 4]);
    let one = b.const_f32(1.0).unwrap();
    let half = b.const_f32(0.5).unwrap();
    let mut v = x;
    for i in 0..9 {
        v = if i % 2 == 0 {
            b.add(v, one).unwrap()
        } else {
            b.mul(v, half).unwrap()
        };
    }
    b.output("y", v).unwrap();
    let module = Module::new(lower(&b.finish().unwrap()).unwrap(), Options::interp()).unwrap();
    let mut rt = module.runtime();
    for batch in [1usize, 3, 3, 1, 5, 1] {
        let data: Vec<f32> = (0..batch * 4).map(|i| i as f32 * 0.25 - 1.0).collect();
        let x = Tensor::from_vec(data.clone(), &[batch, 4]).unwrap();
        let out = rt.run(&[x]).unwrap();
        let want: Vec<f32> = data
            .iter()
            .map(|&e| (0..9).fold(e, |v, i| if i % 2 == 0 { v + 1.0 } else { v * 0.5 }))
            .collect();
        assert_eq!(out[0].shape(), &[batch, 4]);
        assert_eq!(f32s(&out[0]), want, "batch {batch}");
    }
}

/// `tile` reads its repeats from an input of a fixed shape: new contents give a
/// new result shape, which the `add` after it (a reusable plan) must follow.
#[test]
fn types_read_from_contents_are_recomputed() {
    let mut b = GraphBuilder::new("tile");
    let x = b.input("x", DType::F32, shape![2, 2]);
    let reps = b.input("reps", DType::I64, shape![2]);
    let t = b.tile(x, reps).unwrap();
    let one = b.const_f32(1.0).unwrap();
    let y = b.add(t, one).unwrap();
    b.output("y", y).unwrap();
    let module = Module::new(lower(&b.finish().unwrap()).unwrap(), Options::interp()).unwrap();
    let mut rt = module.runtime();
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    for (r0, r1) in [(1usize, 1usize), (2, 3), (2, 3), (1, 2), (1, 1)] {
        let reps = Tensor::from_vec(vec![r0 as i64, r1 as i64], &[2]).unwrap();
        let out = rt.run(&[x.clone(), reps]).unwrap();
        let (rows, cols) = (2 * r0, 2 * r1);
        let want: Vec<f32> = (0..rows * cols)
            .map(|i| {
                let (r, c) = (i / cols % 2, i % cols % 2);
                [1.0f32, 2.0, 3.0, 4.0][r * 2 + c] + 1.0
            })
            .collect();
        assert_eq!(out[0].shape(), &[rows, cols], "repeats ({r0}, {r1})");
        assert_eq!(f32s(&out[0]), want, "repeats ({r0}, {r1})");
    }
}

/// Views (a transpose, and a slice with an offset) feeding reusable plans: a
/// plan is reused only while its inputs' values are unchanged (the runtime
/// compares their stamps first), so batch 1, 4, 1, ... never runs on a stale
/// layout.
#[test]
fn plans_on_views_follow_changing_shapes() {
    let mut b = GraphBuilder::new("views");
    let x = b.input("x", DType::F32, shape!["batch", 4]);
    let t = b.transpose(x, &[1, 0]).unwrap();
    let two = b.const_f32(2.0).unwrap();
    let a = b.mul(t, two).unwrap();
    let s = b.slice(x, &[1], &[3], &[1], &[]).unwrap();
    let one = b.const_f32(1.0).unwrap();
    let c = b.add(s, one).unwrap();
    b.output("a", a).unwrap();
    b.output("c", c).unwrap();
    let module = Module::new(lower(&b.finish().unwrap()).unwrap(), Options::interp()).unwrap();
    let mut rt = module.runtime();
    for batch in [1usize, 4, 1, 4, 4, 2, 1] {
        let data: Vec<f32> = (0..batch * 4).map(|i| i as f32 - 3.0).collect();
        let x = Tensor::from_vec(data.clone(), &[batch, 4]).unwrap();
        let out = rt.run(&[x]).unwrap();
        let want_a: Vec<f32> = (0..4 * batch)
            .map(|i| data[(i % batch) * 4 + i / batch] * 2.0)
            .collect();
        let want_c: Vec<f32> = (0..batch * 2)
            .map(|i| data[(i / 2) * 4 + 1 + i % 2] + 1.0)
            .collect();
        assert_eq!(out[0].shape(), &[4, batch], "batch {batch}");
        assert_eq!(f32s(&out[0]), want_a, "batch {batch}");
        assert_eq!(out[1].shape(), &[batch, 2], "batch {batch}");
        assert_eq!(f32s(&out[1]), want_c, "batch {batch}");
    }
}
