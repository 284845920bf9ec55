//! Fuzz target: any `.sjir` text that parses and lowers runs, on the interpreter
//! and on the JIT tier (sync compiles, every key hot at once), to outputs or a
//! typed error, never a panic; and both tiers agree on which. Each output has
//! its declared dtype and rank, every declared dim that names a size (symbols
//! bound as below) equals the returned one, and a dim shape inference left
//! unknown (`_dN`) has one value across the outputs.
//!
//! Inputs: every input symbol binds to 1..=3 (by its name), floats follow a fixed
//! pattern in [-2, 2), integers lie in 0..3, bools alternate. Graphs with a loop
//! or a value whose static size passes 2^16 elements are skipped: they would
//! test the allocator's limits and the clock, not the VM.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shapejit_ir::{DType, Graph, Symbol, Tensor};
use shapejit_jit::jit_module;
use shapejit_vm::{CompileMode, Module, Options};
use std::collections::{HashMap, HashSet};

const MAX_ELEMENTS: i64 = 1 << 16;

/// Sizes for the symbols of the graph's inputs (each in 1..=3, by its name);
/// dims shape inference made up (`_dN`) stay unbound.
fn binder(graph: &Graph) -> impl Fn(&Symbol) -> Option<i64> {
    let bound: HashSet<Symbol> = graph
        .inputs
        .iter()
        .flat_map(|&v| {
            graph
                .value(v)
                .ty
                .shape
                .dims()
                .iter()
                .flat_map(|d| d.symbols())
        })
        .collect();
    move |symbol| {
        bound
            .contains(symbol)
            .then(|| 1 + symbol.name().bytes().map(i64::from).sum::<i64>() % 3)
    }
}

fn small_enough(graph: &Graph, bind: &dyn Fn(&Symbol) -> Option<i64>) -> bool {
    let no_loop = graph.nodes.iter().all(|n| n.op.name() != "loop");
    let bounded = graph.values.iter().all(|v| {
        v.ty.shape
            .dims()
            .iter()
            .try_fold(1i64, |acc, d| {
                let n = d.eval(bind).unwrap_or(1);
                (0..=MAX_ELEMENTS)
                    .contains(&n)
                    .then(|| acc.saturating_mul(n))
            })
            .is_some_and(|n| n <= MAX_ELEMENTS)
    });
    no_loop && bounded
}

/// Asserts that the outputs agree with the types the graph declares for them.
fn check_declared_types(graph: &Graph, bind: &dyn Fn(&Symbol) -> Option<i64>, outputs: &[Tensor]) {
    let mut unknown: HashMap<Symbol, usize> = HashMap::new();
    for (&id, out) in graph.outputs.iter().zip(outputs) {
        let info = graph.value(id);
        let what = format!(
            "output '{}' declared {} returned {:?}",
            info.name,
            info.ty.shape,
            out.shape()
        );
        assert_eq!(out.dtype(), info.ty.dtype, "{what}");
        assert_eq!(out.shape().len(), info.ty.shape.rank(), "{what}");
        for (dim, &size) in info.ty.shape.dims().iter().zip(out.shape()) {
            match dim.eval(bind) {
                Some(n) => assert_eq!(usize::try_from(n).ok(), Some(size), "{what}"),
                None => {
                    if let Some(sym) = dim.as_symbol() {
                        let first = *unknown.entry(sym.clone()).or_insert(size);
                        assert_eq!(first, size, "{what}: {sym} has two values");
                    }
                }
            }
        }
    }
}

fn input(graph: &Graph, bind: &dyn Fn(&Symbol) -> Option<i64>, index: usize) -> Option<Tensor> {
    let ty = &graph.value(graph.inputs[index]).ty;
    let shape = ty
        .shape
        .dims()
        .iter()
        .map(|d| d.eval(bind).and_then(|n| usize::try_from(n).ok()))
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
        // the other dtypes: the i64 pattern converted by the cast rule
        other => Tensor::from_vec((0..n).map(|i| (at(i) % 3) as i64).collect(), &shape)
            .and_then(|t| t.cast(other))
            .ok(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(graph) = shapejit_ir::text::parse(text) else {
        return;
    };
    let bind = binder(&graph);
    if !small_enough(&graph, &bind) {
        return;
    }
    let Some(inputs) = (0..graph.inputs.len())
        .map(|i| input(&graph, &bind, i))
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let Ok(program) = shapejit_bytecode::lower(&graph) else {
        return;
    };
    let interp = Module::new(program.clone(), Options::interp()).expect("lowered programs verify");
    let want = interp.runtime().run(&inputs);
    if let Ok(outputs) = &want {
        check_declared_types(&graph, &bind, outputs);
    }
    let options = Options {
        compile: CompileMode::Sync,
        promote_threshold: 1,
        ..Options::default()
    };
    let (jit, _handle) = jit_module(program, options).expect("lowered programs verify");
    let mut rt = jit.runtime();
    for _ in 0..2 {
        let got = rt.run(&inputs);
        assert_eq!(
            got.is_ok(),
            want.is_ok(),
            "tiers disagree: {got:?} vs {want:?}"
        );
    }
});
