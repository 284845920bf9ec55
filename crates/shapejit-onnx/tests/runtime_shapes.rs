//! Shapes computed at run time, in ONNX graphs built the way exporters write
//! them (PyTorch's `torch.onnx.export` of Hugging Face BERT / GPT-2 blocks):
//! `Slice` whose ends come from `Shape`, `Reshape` to a computed shape, `Range`
//! over a symbolic length, broadcasts that shape inference cannot prove (one that
//! holds and one that fails at run time with the node and both dims named), a
//! BERT embedding block and a causal mask at several (batch, seq). References
//! are naive float64 loops in the test.

mod common;

use common::reference::{self as r, Arr, assert_close};
use common::*;
use shapejit::{CompileMode, Module, Options, Tensor, Tier};
use shapejit_onnx::proto::{ModelProto, NodeProto, TensorProto, data_type};

const TOL: (f64, f64) = (1e-5, 1e-4);

fn module(m: &ModelProto, options: Options) -> Module {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    Module::from_graph(g, options).unwrap_or_else(|e| panic!("compile: {e}"))
}

fn run(m: &ModelProto, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    module(m, Options::interp())
        .runtime()
        .run(inputs)
        .map_err(|e| e.to_string())
}

/// The number of `shape_check` instructions in the model's program.
fn n_checks(m: &ModelProto) -> usize {
    module(m, Options::interp())
        .program()
        .to_string()
        .matches("shape_check")
        .count()
}

fn scalar_i64(name: &str, v: i64) -> TensorProto {
    ti64(name, &[], &[v])
}

fn f32_init(name: &str, a: &Arr) -> TensorProto {
    let dims: Vec<i64> = a.shape.iter().map(|&d| d as i64).collect();
    let data: Vec<f32> = a.data.iter().map(|&v| v as f32).collect();
    tf32(name, &dims, &data)
}

fn i64_arr(shape: &[usize], data: impl IntoIterator<Item = usize>) -> Arr {
    Arr::new(shape, data.into_iter().map(|v| v as f64).collect())
}

/// `Shape(x)[axis]` as a scalar (`Gather` of a scalar index), the exporters' form.
fn dim_of(x: &str, axis: i64, out: &str) -> (Vec<NodeProto>, TensorProto) {
    let shape = format!("{out}_shape");
    let index = format!("{out}_index");
    (
        vec![
            node("Shape", &[x], &[&shape], vec![]),
            node("Gather", &[&shape, &index], &[out], vec![a_int("axis", 0)]),
        ],
        scalar_i64(&index, axis),
    )
}

/// `y = x + table[:, :seq]` where `seq` is `Shape(x)[1:2]` (a `Slice` of a
/// constant table whose ends come from a dynamic input, as BERT's exported
/// `position_ids[:, :seq_length]`).
fn table_slice_model(rows: usize) -> (ModelProto, Arr) {
    let mut rng = r::rng(11);
    let table = r::random(&mut rng, &[1, rows, 4], -1.0, 1.0);
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Slice", &["s", "one", "two"], &["seq"], vec![]),
        node(
            "Slice",
            &["table", "zero", "seq", "one"],
            &["window"],
            vec![],
        ),
        node("Add", &["x", "window"], &["y"], vec![]),
    ];
    let inits = vec![
        f32_init("table", &table),
        ints("zero", &[0]),
        ints("one", &[1]),
        ints("two", &[2]),
    ];
    let g = graph(
        nodes,
        vec![vf("x", &["batch", "seq", "4"])],
        vec![vf("y", &[])],
        inits,
    );
    (model(17, g), table)
}

#[test]
fn slice_with_ends_from_shape_broadcast_checked_at_run_time() {
    let (m, table) = table_slice_model(16);
    let g = import(&m).unwrap();
    assert_eq!(out_type(&g, 0), "f32[batch, seq, 4]");
    assert_eq!(
        n_checks(&m),
        1,
        "the seq vs window-length broadcast is checked"
    );
    let mut rng = r::rng(12);
    for (batch, seq) in [(1, 1), (2, 5), (3, 16)] {
        let x = r::random(&mut rng, &[batch, seq, 4], -1.0, 1.0);
        let window = r::take(&table, 1, &(0..seq).collect::<Vec<_>>());
        let out = run(&m, &[x.f32_tensor()]).unwrap();
        let what = format!("batch {batch} seq {seq}");
        assert_close(
            &out[0],
            &r::binary(&x, &window, |a, b| a + b),
            TOL.0,
            TOL.1,
            &what,
        );
    }
    // seq 20 > 16 rows: the window has 16 rows, which do not broadcast with 20
    let x = r::random(&mut rng, &[2, 20, 4], -1.0, 1.0);
    assert_eq!(
        run(&m, &[x.f32_tensor()]).unwrap_err(),
        "node 'Add_y': cannot broadcast [batch, seq, 4] with [1, _d0, 4]: dim seq = 20 vs _d0 = 16"
    );
}

#[test]
fn slice_with_bounds_computed_at_run_time() {
    // y = x[:, :seq-1]; z = x[:, start::-1] with `start` a graph input
    let (mut nodes, index) = dim_of("x", 1, "n");
    nodes.extend([
        node("Sub", &["n", "one_s"], &["n1"], vec![]),
        node("Unsqueeze", &["n1", "zero"], &["end"], vec![]),
        node("Slice", &["x", "zero", "end", "one"], &["y"], vec![]),
        node(
            "Slice",
            &["x", "start", "neg_big", "one", "neg_one"],
            &["z"],
            vec![],
        ),
    ]);
    let inits = vec![
        index,
        scalar_i64("one_s", 1),
        ints("zero", &[0]),
        ints("one", &[1]),
        ints("neg_one", &[-1]),
        ints("neg_big", &[i64::MIN]),
    ];
    let g = graph(
        nodes,
        vec![
            vf("x", &["batch", "seq", "3"]),
            vi("start", data_type::INT64, &["1"]),
        ],
        vec![vf("y", &[]), vf("z", &[])],
        inits,
    );
    let m = model(17, g);
    let imported = import(&m).unwrap();
    assert_eq!(out_type(&imported, 0), "f32[batch, _d0, 3]");
    let mut rng = r::rng(13);
    for (batch, seq, start) in [(1, 1, 0), (2, 4, 2), (3, 6, -2), (1, 3, 7)] {
        let x = r::random(&mut rng, &[batch, seq, 3], -1.0, 1.0);
        let start_t = Tensor::from_vec(vec![start], &[1]).unwrap();
        let out = run(&m, &[x.f32_tensor(), start_t]).unwrap();
        let head: Vec<usize> = (0..seq - 1).collect();
        let what = format!("batch {batch} seq {seq}");
        assert_close(&out[0], &r::take(&x, 1, &head), 0.0, 0.0, &what);
        // x[:, start::-1]: from the clamped start down to index 0
        let s = if start < 0 { start + seq as i64 } else { start };
        let s = s.clamp(-1, seq as i64 - 1);
        let back: Vec<usize> = (0..=s).rev().map(|i| i as usize).collect();
        assert_close(&out[1], &r::take(&x, 1, &back), 0.0, 0.0, &what);
    }
}

#[test]
fn reshape_to_computed_shapes() {
    // y = reshape(x, [batch, -1]) from Shape; z = reshape(x, t) with t a graph input
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Slice", &["s", "zero", "one"], &["b"], vec![]),
        node(
            "Concat",
            &["b", "minus_one"],
            &["target"],
            vec![a_int("axis", 0)],
        ),
        node("Reshape", &["x", "target"], &["y"], vec![]),
        node("Reshape", &["x", "t"], &["z"], vec![]),
    ];
    let inits = vec![
        ints("zero", &[0]),
        ints("one", &[1]),
        ints("minus_one", &[-1]),
    ];
    let g = graph(
        nodes,
        vec![
            vf("x", &["batch", "seq", "4"]),
            vi("t", data_type::INT64, &["2"]),
        ],
        vec![vf("y", &[]), vf("z", &[])],
        inits,
    );
    let m = model(17, g);
    let imported = import(&m).unwrap();
    assert_eq!(out_type(&imported, 0), "f32[batch, seq*4]");
    assert_eq!(out_type(&imported, 1), "f32[_d0, _d1]");
    let mut rng = r::rng(14);
    for (batch, seq) in [(1, 1), (2, 3), (4, 7)] {
        let x = r::random(&mut rng, &[batch, seq, 4], -1.0, 1.0);
        let t = Tensor::from_vec(vec![-1i64, 2], &[2]).unwrap();
        let out = run(&m, &[x.f32_tensor(), t]).unwrap();
        assert_close(&out[0], &x.reshape(&[batch, seq * 4]), 0.0, 0.0, "y");
        assert_close(&out[1], &x.reshape(&[batch * seq * 2, 2]), 0.0, 0.0, "z");
    }
}

/// Layer norm over the last axis (epsilon 1e-5) with scale and bias.
fn layer_norm(x: &Arr, gamma: &Arr, beta: &Arr) -> Arr {
    let h = *x.shape.last().unwrap();
    let mut out = x.clone();
    for row in out.data.chunks_mut(h) {
        let mean = row.iter().sum::<f64>() / h as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / h as f64;
        for (j, v) in row.iter_mut().enumerate() {
            *v = (*v - mean) / (var + 1e-5).sqrt() * gamma.data[j] + beta.data[j];
        }
    }
    out
}

struct Embeddings {
    word: Arr,
    pos: Arr,
    tok: Arr,
    gamma: Arr,
    beta: Arr,
}

const VOCAB: usize = 11;
const MAX_POS: usize = 16;
const HIDDEN: usize = 8;

fn embeddings() -> Embeddings {
    let mut rng = r::rng(21);
    Embeddings {
        word: r::random(&mut rng, &[VOCAB, HIDDEN], -1.0, 1.0),
        pos: r::random(&mut rng, &[MAX_POS, HIDDEN], -1.0, 1.0),
        tok: r::random(&mut rng, &[2, HIDDEN], -1.0, 1.0),
        gamma: r::random(&mut rng, &[HIDDEN], 0.5, 1.5),
        beta: r::random(&mut rng, &[HIDDEN], -0.5, 0.5),
    }
}

/// BERT's embedding block as exported: word + position + token-type embeddings,
/// then layer norm. Positions are `Range(0, seq)` (`range_positions`) or a
/// slice of the stored `position_ids` buffer `[1, MAX_POS]` whose ends come
/// from `Shape(input_ids)` (Hugging Face's `position_ids[:, :seq_length]`).
fn bert_embeddings(e: &Embeddings, range_positions: bool) -> ModelProto {
    let mut nodes = vec![node("Gather", &["word_emb", "input_ids"], &["w"], vec![])];
    let mut inits = vec![
        f32_init("word_emb", &e.word),
        f32_init("pos_emb", &e.pos),
        f32_init("tok_emb", &e.tok),
        f32_init("gamma", &e.gamma),
        f32_init("beta", &e.beta),
        ints("zero", &[0]),
        ints("one", &[1]),
        ints("two", &[2]),
    ];
    if range_positions {
        let (dim_nodes, index) = dim_of("input_ids", 1, "seq");
        nodes.extend(dim_nodes);
        nodes.extend([
            node("Range", &["zero_s", "seq", "one_s"], &["positions"], vec![]),
            node(
                "Unsqueeze",
                &["positions", "zero"],
                &["position_ids"],
                vec![],
            ),
        ]);
        inits.extend([index, scalar_i64("zero_s", 0), scalar_i64("one_s", 1)]);
    } else {
        nodes.extend([
            node("Shape", &["input_ids"], &["s"], vec![]),
            node("Slice", &["s", "one", "two"], &["seq"], vec![]),
            node(
                "Slice",
                &["position_buffer", "zero", "seq", "one"],
                &["position_ids"],
                vec![],
            ),
        ]);
        inits.push(ti64(
            "position_buffer",
            &[1, MAX_POS as i64],
            &(0..MAX_POS as i64).collect::<Vec<_>>(),
        ));
    }
    nodes.extend([
        node("Gather", &["pos_emb", "position_ids"], &["p"], vec![]),
        node("Gather", &["tok_emb", "token_type_ids"], &["t"], vec![]),
        node("Add", &["w", "p"], &["wp"], vec![]),
        node("Add", &["wp", "t"], &["sum"], vec![]),
        node(
            "LayerNormalization",
            &["sum", "gamma", "beta"],
            &["y"],
            vec![a_int("axis", -1), a_float("epsilon", 1e-5)],
        ),
    ]);
    let g = graph(
        nodes,
        vec![
            vi("input_ids", data_type::INT64, &["batch", "seq"]),
            vi("token_type_ids", data_type::INT64, &["batch", "seq"]),
        ],
        vec![vf("y", &[])],
        inits,
    );
    model(17, g)
}

fn bert_reference(e: &Embeddings, ids: &Arr, types: &Arr) -> Arr {
    let (batch, seq) = (ids.shape[0], ids.shape[1]);
    let mut sum = Arr::new(&[batch, seq, HIDDEN], vec![0.0; batch * seq * HIDDEN]);
    for b in 0..batch {
        for s in 0..seq {
            let (id, ty) = (ids.at(&[b, s]) as usize, types.at(&[b, s]) as usize);
            for h in 0..HIDDEN {
                sum.data[(b * seq + s) * HIDDEN + h] =
                    e.word.at(&[id, h]) + e.pos.at(&[s, h]) + e.tok.at(&[ty, h]);
            }
        }
    }
    layer_norm(&sum, &e.gamma, &e.beta)
}

#[test]
fn bert_embedding_block_at_several_batch_and_seq() {
    let e = embeddings();
    let jit = Options {
        tier: Tier::Jit,
        compile: CompileMode::Sync,
        promote_threshold: 1,
        ..Options::default()
    };
    for range_positions in [true, false] {
        let m = bert_embeddings(&e, range_positions);
        let g = import(&m).unwrap();
        assert_eq!(out_type(&g, 0), "f32[batch, seq, 8]");
        // Range(0, seq) has length seq: nothing is left to check at run time
        let expected_checks = if range_positions { 0 } else { 1 };
        assert_eq!(n_checks(&m), expected_checks, "range {range_positions}");
        let (interp, jitted) = (module(&m, Options::interp()), module(&m, jit.clone()));
        let (mut ri, mut rj) = (interp.runtime(), jitted.runtime());
        let mut state = 7usize;
        let mut next = |n: usize| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (state >> 8) % n
        };
        for (batch, seq) in [(1, 1), (2, 7), (3, 16), (1, 5), (2, 7)] {
            let ids = i64_arr(&[batch, seq], (0..batch * seq).map(|_| next(VOCAB)));
            let types = i64_arr(&[batch, seq], (0..batch * seq).map(|_| next(2)));
            let inputs = [ids.i64_tensor(), types.i64_tensor()];
            let want = bert_reference(&e, &ids, &types);
            let what = format!("range {range_positions} batch {batch} seq {seq}");
            assert_close(&ri.run(&inputs).unwrap()[0], &want, TOL.0, TOL.1, &what);
            for _ in 0..2 {
                assert_close(&rj.run(&inputs).unwrap()[0], &want, TOL.0, TOL.1, &what);
            }
        }
        // more positions than the table holds: the position gather fails (Range) or
        // the slice stops at MAX_POS and the check names the broadcast (buffer)
        let ids = i64_arr(&[1, MAX_POS + 1], std::iter::repeat_n(0, MAX_POS + 1));
        let err = ri.run(&[ids.i64_tensor(), ids.i64_tensor()]).unwrap_err();
        let expected = if range_positions {
            "node 'Gather_p' (gather)"
        } else {
            "node 'Add_wp': cannot broadcast [batch, seq, 8] with [1, _d0, 8]: dim seq = 17 vs _d0 = 16"
        };
        assert!(err.to_string().starts_with(expected), "{err}");
        if cfg!(target_arch = "x86_64")
            && std::arch::is_x86_feature_detected!("avx")
            && std::arch::is_x86_feature_detected!("fma")
        {
            let hits: u64 = jitted.stats().slots.iter().map(|s| s.kernel_hits).sum();
            assert!(hits > 0, "range {range_positions}: no kernel ran");
        }
    }
}

/// GPT-2's causal mask: `scores = x·xᵀ`, kept where `col <= row` (from two
/// `Range(0, seq)` vectors compared with broadcasting), else -1e9, then softmax.
#[test]
fn causal_mask_from_range_and_compare() {
    let (mut nodes, index) = dim_of("x", 1, "seq");
    nodes.extend([
        node(
            "Transpose",
            &["x"],
            &["xt"],
            vec![a_ints("perm", &[0, 2, 1])],
        ),
        node("MatMul", &["x", "xt"], &["scores"], vec![]),
        node("Range", &["zero_s", "seq", "one_s"], &["r"], vec![]),
        node("Unsqueeze", &["r", "one"], &["rows"], vec![]),
        node("Unsqueeze", &["r", "zero"], &["cols"], vec![]),
        node("LessOrEqual", &["cols", "rows"], &["mask"], vec![]),
        node("Where", &["mask", "scores", "neg"], &["masked"], vec![]),
        node("Softmax", &["masked"], &["y"], vec![a_int("axis", -1)]),
    ]);
    let inits = vec![
        index,
        scalar_i64("zero_s", 0),
        scalar_i64("one_s", 1),
        ints("zero", &[0]),
        ints("one", &[1]),
        tf32("neg", &[], &[-1e9]),
    ];
    let g = graph(
        nodes,
        vec![vf("x", &["batch", "seq", "4"])],
        vec![vf("y", &[])],
        inits,
    );
    let m = model(17, g);
    assert_eq!(out_type(&import(&m).unwrap(), 0), "f32[batch, seq, seq]");
    assert_eq!(n_checks(&m), 0);
    let mut rng = r::rng(31);
    for (batch, seq) in [(1, 1), (2, 3), (3, 8), (1, 13)] {
        let x = r::random(&mut rng, &[batch, seq, 4], -1.0, 1.0);
        let scores = r::matmul(&x, &r::transpose(&x, &[0, 2, 1]));
        let mut masked = scores.clone();
        for (i, v) in masked.data.iter_mut().enumerate() {
            let idx = r::unravel(i, &scores.shape);
            if idx[2] > idx[1] {
                *v = -1e9;
            }
        }
        let out = run(&m, &[x.f32_tensor()]).unwrap();
        let what = format!("batch {batch} seq {seq}");
        assert_close(&out[0], &r::softmax(&masked, 2), 1e-6, 1e-5, &what);
    }
}

#[test]
fn broadcast_of_unrelated_symbols_is_a_run_time_check() {
    let g = graph(
        vec![node("Add", &["x", "y"], &["z"], vec![])],
        vec![vf("x", &["batch", "seq", "4"]), vf("y", &["1", "n", "4"])],
        vec![vf("z", &[])],
        vec![],
    );
    let m = model(17, g);
    assert_eq!(out_type(&import(&m).unwrap(), 0), "f32[batch, seq, 4]");
    let mut rng = r::rng(41);
    for (seq, n) in [(5, 5), (5, 1), (1, 1)] {
        let x = r::random(&mut rng, &[2, seq, 4], -1.0, 1.0);
        let y = r::random(&mut rng, &[1, n, 4], -1.0, 1.0);
        let out = run(&m, &[x.f32_tensor(), y.f32_tensor()]).unwrap();
        assert_close(&out[0], &r::binary(&x, &y, |a, b| a + b), TOL.0, TOL.1, "z");
    }
    let err = |seq: usize, n: usize| {
        let x = Tensor::from_vec(vec![0f32; 2 * seq * 4], &[2, seq, 4]).unwrap();
        let y = Tensor::from_vec(vec![0f32; n * 4], &[1, n, 4]).unwrap();
        run(&m, &[x, y]).unwrap_err()
    };
    assert_eq!(
        err(5, 3),
        "node 'Add_z': cannot broadcast [batch, seq, 4] with [1, n, 4]: dim seq = 5 vs n = 3"
    );
    // NumPy would broadcast seq = 1 against n = 3, but the output is typed with seq
    assert_eq!(
        err(1, 3),
        "node 'Add_z': cannot broadcast [batch, seq, 4] with [1, n, 4]: dim seq = 1 vs n = 3 \
         (the output type keeps seq, so n must equal it or be 1)"
    );
}
