//! Mutation testing of the `.sjir` parser, the stable-toolchain twin of the
//! `sjir_parse` fuzz target (`fuzz/fuzz_targets/sjir_parse.rs`): the golden
//! cases, mutated with a seeded RNG, must never panic the parser, inference,
//! verifier or printer, and whatever parses must print to a fixed point.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shapejit_ir::text::check_round_trip;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// Fragments spliced into inputs: the grammar's tokens and nasty numbers.
const FRAGMENTS: &[&str] = &[
    "%x",
    "%y",
    "@n",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    ",",
    ":",
    "=",
    "->",
    "-",
    "+",
    "*",
    "\"",
    "\\u{7f}",
    "graph",
    "if",
    "then",
    "else",
    "loop",
    "body",
    "constant",
    "f32",
    "i64",
    "bool",
    "i32",
    "hex\"00\"",
    "-1",
    "0",
    "1",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e39",
    "nan",
    "inf",
    "batch",
    "(a+b)*(a+b)",
    "axis = ",
    "{axis = -1}",
    "%x, %x",
    "f32[]",
    "[0]",
    "//",
    "reshape",
    "slice",
    "concat",
    "gather",
    "matmul",
    "split",
    "expand",
    "range",
    "pad",
    "tile",
    "\n",
];

/// The inputs of the golden cases (everything before the separator line).
fn seeds() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden");
    let mut out = Vec::new();
    for dir in ["roundtrip", "infer", "verify"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                out.push(
                    text.split("// ---- expected ----")
                        .next()
                        .unwrap_or("")
                        .to_string(),
                );
            }
        }
    }
    out.sort();
    out
}

fn mutate(rng: &mut SmallRng, text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..rng.random_range(1..=4) {
        let len = chars.len();
        let at = rng.random_range(0..=len);
        let span = rng.random_range(0..=8).min(len - at);
        match rng.random_range(0..5) {
            0 => {
                chars.drain(at..at + span);
            }
            1 => {
                let copy: Vec<char> = chars[at..at + span].to_vec();
                chars.splice(at..at, copy);
            }
            2 | 3 => {
                let frag = FRAGMENTS[rng.random_range(0..FRAGMENTS.len())];
                chars.splice(at..at, frag.chars());
            }
            _ => {
                if at < len {
                    chars[at] = char::from(rng.random_range(0x20u8..0x7f));
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_golden_inputs_never_panic_and_round_trip() {
    let seeds = seeds();
    assert!(
        seeds.len() >= 18,
        "expected the golden cases as seeds, found {}",
        seeds.len()
    );
    let mut rng = SmallRng::seed_from_u64(0x5a1e);
    // SJIR_MUTANTS=N runs more cases (for a longer local hunt).
    let total = std::env::var("SJIR_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000usize);
    let mut parsed = 0usize;
    for i in 0..total {
        let input = mutate(&mut rng, &seeds[i % seeds.len()]);
        match catch_unwind(AssertUnwindSafe(|| check_round_trip(&input))) {
            Ok(Ok(Some(_))) => parsed += 1,
            Ok(Ok(None)) => {}
            Ok(Err(e)) => panic!("round trip failed on case {i}: {e}\n---- input ----\n{input}"),
            Err(_) => panic!("panic on case {i}\n---- input ----\n{input}"),
        }
    }
    // Some mutants must still parse, or the test only exercises error paths.
    assert!(
        parsed * 20 > total,
        "only {parsed} of {total} mutants parsed"
    );
    eprintln!("{parsed} of {total} mutants parsed");
}

#[test]
fn golden_inputs_parse_and_round_trip() {
    for seed in seeds() {
        assert!(
            check_round_trip(&seed).unwrap().is_some(),
            "seed does not parse:\n{seed}"
        );
    }
}
