//! Golden text tests: one runner ([`shapejit_tests::golden::run_dir`]) over
//! `tests/golden/<dir>/`. Each file is an input, a `// ---- expected ----`
//! line, and the expected output. Run with `BLESS=1` to rewrite the expected
//! sections, then review them with `git diff`.
//!
//! To add a directory, add one line to the `golden_dirs!` table below:
//! `name => function,` where `function: fn(&str) -> String` maps a case's
//! input to its output; the test is called `name` and reads `tests/golden/name/`.

use shapejit::ir::{self as ir, Graph};
use shapejit_tests::golden::run_dir;
use std::fmt::Write as _;
use std::path::Path;

macro_rules! golden_dirs {
    ($($name:ident => $f:expr,)*) => {$(
        #[test]
        fn $name() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden").join(stringify!($name));
            run_dir(&dir, $f);
        }
    )*};
}

golden_dirs! {
    roundtrip => print_round_trip,
    infer => infer_listing,
    verify => verify_error,
    parse_errors => parse_error,
    listing => bytecode_listing,
}

/// Parse, print; the printed text must parse and print back to itself.
fn print_round_trip(input: &str) -> String {
    let printed = match ir::parse(input) {
        Ok(g) => g.to_string(),
        Err(e) => return format!("parse error: {e}"),
    };
    let again = ir::parse(&printed)
        .unwrap_or_else(|e| panic!("printed text does not parse: {e}\n{printed}"));
    assert_eq!(
        again.to_string(),
        printed,
        "print(parse(print(g))) != print(g)"
    );
    printed
}

/// The type (and known contents) of every value, sub-graphs indented; then
/// the verifier's verdict.
fn infer_listing(input: &str) -> String {
    let g = match ir::parse(input) {
        Ok(g) => g,
        Err(e) => return format!("parse error: {e}"),
    };
    let mut out = String::new();
    list_values(&g, 0, &mut out);
    match ir::verify(&g) {
        Ok(()) => out.push_str("verify: ok\n"),
        Err(e) => {
            let _ = writeln!(out, "verify: {e}");
        }
    }
    out
}

fn list_values(g: &Graph, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    for v in &g.values {
        let _ = write!(out, "{pad}%{}: {}", v.name, v.ty);
        if let Some(known) = &v.known {
            let items: Vec<String> = known.iter().map(|d| d.to_string()).collect();
            let _ = write!(out, " = [{}]", items.join(", "));
        }
        out.push('\n');
    }
    for node in &g.nodes {
        for sub in node.op.subgraphs() {
            let _ = writeln!(out, "{pad}{} @{}:", node.name, sub.name);
            list_values(sub, depth + 1, out);
        }
    }
}

/// The verifier's error (these graphs parse but are invalid).
fn verify_error(input: &str) -> String {
    match ir::parse(input) {
        Ok(g) => match ir::verify(&g) {
            Ok(()) => "verify: ok (expected an error)".to_string(),
            Err(e) => e.to_string(),
        },
        Err(e) => format!("parse error: {e}"),
    }
}

/// The parser's line:column error.
fn parse_error(input: &str) -> String {
    match ir::parse(input) {
        Ok(_) => "parsed ok (expected an error)".to_string(),
        Err(e) => e.to_string(),
    }
}

/// The bytecode listing of the lowered graph (owned by the VM helper).
fn bytecode_listing(input: &str) -> String {
    match ir::parse(input) {
        Ok(g) => match shapejit::bytecode::lower(&g) {
            Ok(p) => p.to_string(),
            Err(e) => format!("lower error: {e}"),
        },
        Err(e) => format!("parse error: {e}"),
    }
}

/// The built-in models survive `.sjir`: print, parse, and get the same graph
/// back (types, known contents and constant bytes included), which verifies.
#[test]
fn builtin_models_round_trip_through_sjir() {
    for name in ["mlp", "elementwise", "transformer"] {
        let graph = shapejit::builtin::by_name(name).unwrap_or_else(|| panic!("no builtin:{name}"));
        ir::verify(&graph).unwrap_or_else(|e| panic!("builtin:{name}: {e}"));
        let text = graph.to_string();
        let parsed = ir::parse(&text).unwrap_or_else(|e| panic!("builtin:{name}: {e}"));
        ir::verify(&parsed).unwrap_or_else(|e| panic!("builtin:{name} after parsing: {e}"));
        assert!(parsed == graph, "builtin:{name} changed in the round trip");
    }
}
