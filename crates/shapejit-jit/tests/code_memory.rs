//! Kernels free their code on drop (`JITModule::free_memory`; a plain drop would leak):
//! the live-code counter returns to zero and the process's mapped memory does not grow
//! with the number of kernels compiled. One test per binary, so no other test's
//! kernels are alive meanwhile.

use std::sync::Arc;

use shapejit_jit::{
    ElementwiseSpec, InputLayout, Program, ShapeMode, UnaryOp, compile_elementwise,
    live_code_bytes, live_kernels,
};

fn spec(n: usize) -> ElementwiseSpec {
    let mut p = Program::new();
    let x = p.input(0);
    let y = p.unary(UnaryOp::Tanh, x);
    p.output(y);
    ElementwiseSpec {
        name: format!("tanh{n}"),
        shape: vec![n],
        mode: ShapeMode::Exact,
        inputs: vec![InputLayout::contiguous(&[n])],
        program: p,
    }
}

/// Virtual memory size of this process in KiB (Linux).
fn vm_size_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .expect("VmSize line");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmSize value")
}

#[test]
fn dropping_kernels_frees_their_code() {
    assert_eq!(live_code_bytes(), 0);
    // Warm up allocator arenas and the shared ISA.
    for n in 1..20 {
        drop(compile_elementwise(&spec(n)).expect("compiles"));
    }
    assert_eq!(live_code_bytes(), 0);
    let before = vm_size_kib();
    let mut total = 0usize;
    for round in 0..1000 {
        let kernel = Arc::new(compile_elementwise(&spec(17 + round % 50)).expect("compiles"));
        let bytes = kernel.code().code_bytes();
        assert!(bytes > 0);
        assert_eq!(live_code_bytes(), bytes);
        assert_eq!(live_kernels(), 1);
        // A clone held "while calling" keeps the code alive after the owner lets go.
        let running = Arc::clone(&kernel);
        drop(kernel);
        assert_eq!(live_code_bytes(), bytes);
        let n = 17 + round % 50;
        let input = vec![0.5f32; n];
        let mut out = vec![0.0f32; n];
        running.run(&[&input], &mut [&mut out], 0).expect("runs");
        assert!((out[n - 1] - 0.5f32.tanh()).abs() < 1e-6);
        drop(running);
        assert_eq!(live_code_bytes(), 0);
        total += bytes;
    }
    let after = vm_size_kib();
    // Each leaked module would keep at least one 4 KiB code mapping: 1000 leaks ≥ 4 MiB.
    assert!(
        after <= before + 1024,
        "VmSize grew from {before} KiB to {after} KiB over 1000 kernels ({total} code bytes)"
    );
}
