//! Sizes a model, an input or an option decides never abort the process: each
//! one that cannot be met is an error naming what needed the memory (issue 12,
//! "no abort, no panic").

use shapejit::{DType, Error, GraphBuilder, Module, Options, Tensor, Tier, shape};

/// `y = expand(x, s)` (a view, copied out at return) and `z = y + 1` (an arena
/// buffer), with the target shape `s` a run-time input.
fn expand_module(options: Options, add: bool) -> Module {
    let mut b = GraphBuilder::new("expand");
    let x = b.input("x", DType::F32, shape![1, 1]);
    let s = b.input("s", DType::I64, shape![2]);
    let y = b.expand(x, s).unwrap();
    let out = if add {
        let one = b.const_f32(1.0).unwrap();
        b.add(y, one).unwrap()
    } else {
        y
    };
    b.output("y", out).unwrap();
    Module::from_graph(b.finish().unwrap(), options).unwrap()
}

fn run_expand(module: &Module, rows: i64, cols: i64) -> Result<Vec<Tensor>, Error> {
    let x = Tensor::from_vec(vec![2f32], &[1, 1]).unwrap();
    let s = Tensor::from_vec(vec![rows, cols], &[2]).unwrap();
    module.runtime().run(&[x, s])
}

fn interp(max_memory: usize) -> Options {
    Options {
        tier: Tier::Interp,
        max_memory,
        ..Options::default()
    }
}

#[test]
fn a_64_gb_output_is_an_error_naming_the_output() {
    let module = expand_module(interp(1 << 30), false);
    let err = run_expand(&module, 1 << 18, 1 << 16)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "output 'y' (f32[262144, 65536]) needs 68719476736 bytes, over the memory limit of \
         1073741824 bytes (Options::max_memory)"
    );
    // Small runs still work on the same module and runtime.
    let out = run_expand(&module, 2, 3).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[2.0; 6]);
}

#[test]
fn an_arena_buffer_over_the_limit_names_the_node() {
    let module = expand_module(interp(1 << 30), true);
    let err = run_expand(&module, 1 << 18, 1 << 16)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "node 'add_0' (add) needs 68719476736 bytes, over the memory limit of 1073741824 \
         bytes (Options::max_memory)"
    );
    // The limit counts what the arena holds beside the output: 600 MB in the
    // arena plus 600 MB out is over 1 GiB.
    let err = run_expand(&module, 150, 1_000_000).unwrap_err().to_string();
    assert!(
        err.starts_with("output 'y' (f32[150, 1000000]) needs 600000000 bytes"),
        "{err}"
    );
}

#[test]
fn the_default_limit_is_physical_memory() {
    let module = expand_module(Options::interp(), true);
    assert_eq!(
        module.vm().options().max_memory,
        shapejit::vm::options::physical_memory()
    );
    // 2^62 bytes: more than any machine has.
    let err = run_expand(&module, 1 << 30, 1 << 30)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "node 'add_0' (add) needs 4611686018427387904 bytes, over the memory limit"
        ),
        "{err}"
    );
}

#[test]
fn a_size_the_allocator_refuses_is_an_error() {
    // No limit: the allocator itself refuses 2^50 bytes (more than RAM + swap
    // and, with overcommit, more than the address space allows).
    let module = expand_module(interp(usize::MAX), true);
    let err = run_expand(&module, 1 << 24, 1 << 24)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "node 'add_0' (add) needs 1125899906842624 bytes and the allocator refused them (out of \
         memory)"
    );
    let module = expand_module(interp(usize::MAX), false);
    let err = run_expand(&module, 1 << 24, 1 << 24)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "output 'y' (f32[16777216, 16777216]) needs 1125899906842624 bytes and the allocator \
         refused them (out of memory)"
    );
}

#[test]
fn tensor_zeros_never_panics_or_aborts() {
    // The element count fits, the byte count does not.
    let err = Tensor::zeros(DType::F32, &[usize::MAX / 2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("tensor shape [{}] has too many elements", usize::MAX / 2)
    );
    // Fits usize, but no allocator gives 2^50 bytes.
    let err = Tensor::zeros(DType::I64, &[1 << 47]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot allocate 1125899906842624 bytes for a tensor of shape [140737488355328] (out of \
         memory)"
    );
}

#[test]
fn options_out_of_range_are_errors() {
    let graph = || {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", DType::F32, shape!["n"]);
        let y = b.relu(x).unwrap();
        b.output("y", y).unwrap();
        b.finish().unwrap()
    };
    let cases = [
        (
            Options {
                window: usize::MAX,
                ..Options::default()
            },
            format!(
                "option `window` = {} is out of range: 1..=65536 executions",
                usize::MAX
            ),
        ),
        (
            Options {
                window: 0,
                ..Options::default()
            },
            "option `window` = 0 is out of range: 1..=65536 executions".to_string(),
        ),
        (
            Options {
                promote_threshold: 0,
                ..Options::default()
            },
            "option `promote_threshold` = 0 is out of range: at least 1".to_string(),
        ),
        (
            Options {
                cache_capacity: usize::MAX,
                ..Options::default()
            },
            format!(
                "option `cache_capacity` = {} is out of range: at most 4096 kernels per slot",
                usize::MAX
            ),
        ),
        (
            Options {
                threads: usize::MAX,
                ..Options::default()
            },
            format!(
                "option `threads` = {} is out of range: at most 1024 threads",
                usize::MAX
            ),
        ),
        (
            Options {
                max_memory: 0,
                ..Options::default()
            },
            "option `max_memory` = 0 is out of range: at least 1 byte".to_string(),
        ),
    ];
    for (options, expected) in cases {
        let err = Module::from_graph(graph(), options).unwrap_err();
        assert!(matches!(err, Error::Options(_)), "{err:?}");
        assert_eq!(err.to_string(), expected);
    }
}
