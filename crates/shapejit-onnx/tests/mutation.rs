//! Seeded mutations of a valid model (truncations, byte flips, insertions,
//! deletions, varint smashing): the loader returns errors, never panics.

mod common;

use bytes::Bytes;
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shapejit_onnx::proto::data_type;

/// A model touching many importer paths: initializers (raw and typed), Conv,
/// Reshape from a shape chain, Split, Slice, an If with captures and a Loop.
fn rich_model() -> Bytes {
    let body = graph(
        vec![
            node("Add", &["acc_in", "h"], &["acc_out"], vec![]),
            node("Identity", &["c_in"], &["c_out"], vec![]),
        ],
        vec![
            vi("i", data_type::INT64, &[]),
            vi("c_in", data_type::BOOL, &[]),
            vf("acc_in", &[]),
        ],
        vec![vi("c_out", data_type::BOOL, &[]), vf("acc_out", &[])],
        vec![],
    );
    let nodes = vec![
        node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![
                a_ints("pads", &[1, 1, 1, 1]),
                a_ints("kernel_shape", &[3, 3]),
            ],
        ),
        node("Shape", &["c"], &["s"], vec![]),
        node("Gather", &["s", "i0"], &["n"], vec![]),
        node("Unsqueeze", &["n", "ax0"], &["nu"], vec![]),
        node("Concat", &["nu", "m1"], &["shape"], vec![a_int("axis", 0)]),
        node("Reshape", &["c", "shape"], &["h"], vec![]),
        node("Split", &["h", "sp"], &["h1", "h2"], vec![a_int("axis", 1)]),
        node("Slice", &["h1", "st", "en", "sa"], &["hs"], vec![]),
        if_one_node("cond", "f", ("Relu", &["h"]), ("Neg", &["h"])),
        node(
            "Loop",
            &["trip", "", "f"],
            &["l"],
            vec![a_graph("body", body)],
        ),
        node("Gemm", &["hs", "gw"], &["y"], vec![a_int("transB", 1)]),
    ];
    let inits = vec![
        tf32("w", &[2, 1, 3, 3], &[0.25; 18]),
        tf32_typed("b", &[2], &[0.5, -0.5]),
        ti64("i0", &[], &[0]),
        ints("ax0", &[0]),
        ints("m1", &[-1]),
        ints("sp", &[16, 16]),
        ints("st", &[0]),
        ints("en", &[8]),
        ints("sa", &[1]),
        ti64("trip", &[], &[2]),
        tf32("gw", &[3, 8], &[0.1; 24]),
    ];
    let inputs = vec![
        vf("x", &["batch", "1", "4", "4"]),
        vi("cond", data_type::BOOL, &[]),
    ];
    let m = model(
        13,
        graph(nodes, inputs, vec![vf("y", &[]), vf("l", &[])], inits),
    );
    encode(&m)
}

#[test]
fn the_rich_model_imports() {
    let g = shapejit_onnx::load_bytes(rich_model(), None).unwrap();
    assert_eq!(out_type(&g, 0), "f32[batch, 3]");
    assert_eq!(out_type(&g, 1), "f32[batch, 32]");
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = rich_model();
    for len in 0..bytes.len() {
        let res = shapejit_onnx::load_bytes(bytes.slice(..len), None);
        assert!(res.is_err(), "prefix of {len} bytes imported");
    }
}

#[test]
fn random_mutations_never_panic() {
    let bytes = rich_model();
    let mut rng = SmallRng::seed_from_u64(0x5eed_d00a);
    let mut errors = 0;
    let rounds = 3000;
    for _ in 0..rounds {
        let mut m = bytes.to_vec();
        for _ in 0..rng.random_range(1..4) {
            let pos = rng.random_range(0..m.len());
            match rng.random_range(0..5) {
                0 => m[pos] ^= 1 << rng.random_range(0..8),
                1 => m[pos] = rng.random(),
                2 => m.insert(pos, rng.random()),
                3 => {
                    m.remove(pos);
                }
                _ => {
                    let end = (pos + 5).min(m.len());
                    m[pos..end].fill(0xff);
                }
            }
            if m.is_empty() {
                break;
            }
        }
        if shapejit_onnx::load_bytes(Bytes::from(m), None).is_err() {
            errors += 1;
        }
    }
    // Most mutations break the model; some (a flipped weight bit) do not.
    assert!(
        errors > rounds / 2,
        "only {errors} of {rounds} mutations were rejected"
    );
}

/// Values that tend to break integer arithmetic.
const NASTY: [i64; 10] = [-1, 0, 1, 2, 3, -3, 1 << 40, -(1 << 40), i64::MAX, i64::MIN];

/// One random structural edit of a decoded model (a field a valid protobuf
/// can hold, but a meaningless value): the importer must reject or accept it
/// without panicking.
fn mutate(m: &mut shapejit_onnx::proto::ModelProto, rng: &mut SmallRng) -> String {
    let g = m.graph.as_mut().unwrap();
    let pick = |rng: &mut SmallRng| NASTY[rng.random_range(0..NASTY.len())];
    match rng.random_range(0..7) {
        0 => {
            let n = rng.random_range(0..g.node.len());
            let node = &mut g.node[n];
            if node.attribute.is_empty() {
                return "no-op".into();
            }
            let a = rng.random_range(0..node.attribute.len());
            let attr = &mut node.attribute[a];
            attr.i = pick(rng);
            if let Some(v) = attr.ints.iter_mut().next() {
                *v = pick(rng);
            }
            format!(
                "node {n} attribute {} = {} / {:?}",
                attr.name, attr.i, attr.ints
            )
        }
        1 => {
            let t = rng.random_range(0..g.initializer.len());
            let init = &mut g.initializer[t];
            if let Some(v) = init.int64_data.iter_mut().next() {
                *v = pick(rng);
            }
            format!("initializer {} data {:?}", init.name, init.int64_data)
        }
        2 => {
            let t = rng.random_range(0..g.initializer.len());
            let init = &mut g.initializer[t];
            init.dims = (0..rng.random_range(0..3)).map(|_| pick(rng)).collect();
            format!("initializer {} dims {:?}", init.name, init.dims)
        }
        3 => {
            let dims = &mut g.input[0]
                .r#type
                .as_mut()
                .unwrap()
                .tensor_type
                .as_mut()
                .unwrap()
                .shape
                .as_mut()
                .unwrap()
                .dim;
            let d = rng.random_range(0..dims.len());
            dims[d].dim_value = Some(pick(rng));
            format!("input dim {d} = {:?}", dims[d].dim_value)
        }
        4 => {
            let n = rng.random_range(0..g.node.len());
            let node = g.node.remove(n);
            format!("removed node {}", node.name)
        }
        5 => {
            let n = rng.random_range(0..g.node.len());
            let i = rng.random_range(0..g.node[n].input.len().max(1));
            let other = rng.random_range(0..g.node.len());
            let name = g.node[other].output.first().cloned().unwrap_or_default();
            if let Some(slot) = g.node[n].input.get_mut(i) {
                *slot = name.clone();
            }
            format!("node {n} input {i} = '{name}'")
        }
        _ => {
            let n = rng.random_range(0..g.node.len());
            let dup = g.node[n].clone();
            g.node.insert(rng.random_range(0..g.node.len()), dup);
            format!("duplicated node {n}")
        }
    }
}

#[test]
fn structural_mutations_never_panic() {
    use prost::Message;
    let original = shapejit_onnx::decode_model(rich_model()).unwrap();
    let mut rng = SmallRng::seed_from_u64(77);
    for round in 0..1500 {
        let mut m = original.clone();
        let edits: Vec<String> = (0..rng.random_range(1..3))
            .map(|_| mutate(&mut m, &mut rng))
            .collect();
        let bytes = Bytes::from(m.encode_to_vec());
        let res = std::panic::catch_unwind(|| shapejit_onnx::load_bytes(bytes, None).map(|_| ()));
        assert!(
            res.is_ok(),
            "round {round}: the importer panicked after {edits:?}"
        );
    }
}
