//! Fuzz target: any `.sjir` text that parses and lowers runs, on the interpreter
//! and on the JIT tier (sync compiles, every key hot at once), to outputs or a
//! typed error, never a panic; and both tiers agree on which.
//!
//! Inputs: every symbol binds to 1..=3 (by its name), floats follow a fixed
//! pattern in [-2, 2), integers lie in 0..3, bools alternate. Graphs with a loop
//! or a value whose static size passes 2^16 elements are skipped: they would
//! test the allocator's limits and the clock, not the VM.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shapejit_ir::{DType, Graph, Symbol, Tensor};
use shapejit_vm::{CompileMode, Module, Options, jit::jit_module};

const MAX_ELEMENTS: i64 = 1 << 16;

fn bind(symbol: &Symbol) -> Option<i64> {
    Some(1 + symbol.name().bytes().map(i64::from).sum::<i64>() % 3)
}

fn small_enough(graph: &Graph) -> bool {
    let no_loop = graph.nodes.iter().all(|n| n.op.name() != "loop");
    let bounded = graph.values.iter().all(|v| {
        v.ty.shape.dims().iter().try_fold(1i64, |acc, d| {
            let n = d.eval(&bind).unwrap_or(1);
            (0..=MAX_ELEMENTS).contains(&n).then(|| acc.saturating_mul(n))
        })
        .is_some_and(|n| n <= MAX_ELEMENTS)
    });
    no_loop && bounded
}

fn input(graph: &Graph, index: usize) -> Option<Tensor> {
    let ty = &graph.value(graph.inputs[index]).ty;
    let shape = ty
        .shape
        .dims()
        .iter()
        .map(|d| d.eval(&bind).and_then(|n| usize::try_from(n).ok()))
        .collect::<Option<Vec<usize>>>()?;
    let n: usize = shape.iter().product();
    let at = |i: usize| (i * 7 + index * 3) % 16;
    match ty.dtype {
        DType::F32 => {
            let data = (0..n).map(|i| at(i) as f32 / 4.0 - 2.0).collect();
            Tensor::from_vec::<f32>(data, &shape).ok()
        }
        DType::I64 => Tensor::from_vec((0..n).map(|i| (at(i) % 3) as i64).collect(), &shape).ok(),
        DType::I32 => Tensor::from_vec((0..n).map(|i| (at(i) % 3) as i32).collect(), &shape).ok(),
        DType::Bool => Tensor::from_vec((0..n).map(|i| i % 2 == 0).collect(), &shape).ok(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(graph) = shapejit_ir::text::parse(text) else {
        return;
    };
    if !small_enough(&graph) {
        return;
    }
    let Some(inputs) = (0..graph.inputs.len())
        .map(|i| input(&graph, i))
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let Ok(program) = shapejit_bytecode::lower(&graph) else {
        return;
    };
    let interp = Module::new(program.clone(), Options::interp()).expect("lowered programs verify");
    let want = interp.runtime().run(&inputs);
    let options = Options {
        compile: CompileMode::Sync,
        promote_threshold: 1,
        ..Options::default()
    };
    let (jit, _handle) = jit_module(program, options).expect("lowered programs verify");
    let mut rt = jit.runtime();
    for _ in 0..2 {
        let got = rt.run(&inputs);
        assert_eq!(got.is_ok(), want.is_ok(), "tiers disagree: {got:?} vs {want:?}");
    }
});
