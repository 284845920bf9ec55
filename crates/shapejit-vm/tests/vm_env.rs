//! `SHAPEJIT_JIT=0` forces the interpreter tier (its own test binary: the
//! environment is process-wide).

use shapejit_bytecode::lower;
use shapejit_ir::{DType, GraphBuilder, shape};
use shapejit_vm::{Module, Options, Tier};

#[test]
fn shapejit_jit_0_forces_the_interpreter() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", DType::F32, shape!["n"]);
    let y = b.relu(x).unwrap();
    b.output("y", y).unwrap();
    let program = lower(&b.finish().unwrap()).unwrap();
    let jit = Options {
        tier: Tier::Jit,
        ..Options::default()
    };
    assert_eq!(
        Module::new(program.clone(), jit.clone())
            .unwrap()
            .options()
            .tier,
        Tier::Jit
    );
    // SAFETY: this test binary has this single test, so no other thread reads the environment.
    unsafe { std::env::set_var("SHAPEJIT_JIT", "0") };
    let mut asked = false;
    let module = Module::with_executor(program, jit, |_| {
        asked = true;
        None
    })
    .unwrap();
    assert_eq!(module.options().tier, Tier::Interp);
    assert!(!asked, "no executor is built for the interpreter tier");
}
