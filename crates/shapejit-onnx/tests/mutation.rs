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
    let then_g = graph(
        vec![node("Relu", &["h"], &["t"], vec![])],
        vec![],
        vec![vf("t", &[])],
        vec![],
    );
    let else_g = graph(
        vec![node("Neg", &["h"], &["e"], vec![])],
        vec![],
        vec![vf("e", &[])],
        vec![],
    );
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
        node(
            "If",
            &["cond"],
            &["f"],
            vec![
                a_graph("then_branch", then_g),
                a_graph("else_branch", else_g),
            ],
        ),
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
    let mut rng = SmallRng::seed_from_u64(0x5eed_0_0a);
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
