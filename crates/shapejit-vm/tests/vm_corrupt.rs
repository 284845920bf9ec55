//! Corrupted programs: the verifier rejects them when a module is built, and
//! any mutation the verifier accepts runs to a result or a typed error, never
//! a panic.

use shapejit_bytecode::{GroupId, Instr, Pc, Program, Reg, lower};
use shapejit_ir::{DType, GraphBuilder, Tensor, shape};
use shapejit_vm::{Module, Options};

fn program() -> Program {
    let mut b = GraphBuilder::new("p");
    let x = b.input("x", DType::F32, shape!["batch", 4]);
    let c = b.input("c", DType::Bool, shape![]);
    let w = b.constant(
        "w",
        Tensor::from_vec((0..16).map(|i| i as f32 / 16.0).collect(), &[4, 4]).unwrap(),
    );
    let scale = b.constant("scale", Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap());
    let h = b.matmul(x, w).unwrap();
    let h = b.relu(h).unwrap();
    let t = b.transpose(h, &[1, 0]).unwrap();
    let s = b.softmax(t, 0).unwrap();
    let n = b.layer_norm(x, scale, Some(scale), -1, 1e-5).unwrap();
    let branch = |name: &str, neg: bool| {
        let mut g = GraphBuilder::new(name);
        let v = g.input("v", DType::F32, shape!["batch", 4]);
        let o = if neg {
            g.neg(v).unwrap()
        } else {
            g.exp(v).unwrap()
        };
        g.output("o", o).unwrap();
        g.finish().unwrap()
    };
    let r = b
        .if_(c, branch("t", true), branch("e", false), &[n])
        .unwrap();
    b.output("s", s).unwrap();
    b.output("r", r[0]).unwrap();
    lower(&b.finish().unwrap()).unwrap()
}

fn inputs() -> Vec<Tensor> {
    vec![
        Tensor::from_vec((0..12).map(|i| i as f32 - 5.0).collect(), &[3, 4]).unwrap(),
        Tensor::scalar(true),
    ]
}

#[test]
fn module_new_rejects_corrupt_programs() {
    let mut p = program();
    let n = p.n_regs;
    if let Some(Instr::Op { srcs, .. }) =
        p.instrs.iter_mut().find(|i| matches!(i, Instr::Op { .. }))
    {
        srcs[0] = Reg(n);
    }
    assert!(Module::new(p, Options::interp()).is_err());
    let mut p = program();
    let len = p.instrs.len() as u32;
    if let Some(Instr::JumpIfFalse { target, .. }) = p
        .instrs
        .iter_mut()
        .find(|i| matches!(i, Instr::JumpIfFalse { .. }))
    {
        *target = Pc(len);
    }
    assert!(Module::new(p, Options::interp()).is_err());
}

/// xorshift64: a deterministic stream for the mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn mutate(p: &mut Program, rng: &mut Rng) {
    let pc = rng.below(p.instrs.len() as u64) as usize;
    let n_regs = p.n_regs as u64;
    let n_groups = p.memory.n_groups() as u64;
    let len = p.instrs.len() as u64;
    match rng.below(4) {
        0 => {
            // re-point one register operand or destination (sometimes out of range)
            let pick = rng.below(8);
            let to = Reg(rng.below(n_regs + 2) as u32);
            let mut k = 0;
            p.instrs[pc].map_regs(&mut |r| {
                k += 1;
                if k - 1 == pick { to } else { r }
            });
        }
        1 => {
            let to = GroupId(rng.below(n_groups + 1) as u32);
            p.instrs[pc].map_groups(&mut |_, g| if rng.below(2) == 0 { to } else { g });
        }
        2 => match &mut p.instrs[pc] {
            Instr::Jump { target } | Instr::JumpIfFalse { target, .. } => {
                *target = Pc(rng.below(len + 2) as u32)
            }
            Instr::ShapeGuard { skip, .. } => *skip = rng.below(6) as u32,
            _ => {}
        },
        _ => {
            let other = rng.below(p.instrs.len() as u64) as usize;
            p.instrs.swap(pc, other);
        }
    }
}

#[test]
fn mutated_programs_are_rejected_or_run_without_panicking() {
    let base = program();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut rejected, mut ran) = (0, 0);
    for _ in 0..3000 {
        let mut p = base.clone();
        for _ in 0..1 + rng.below(2) {
            mutate(&mut p, &mut rng);
        }
        match Module::new(p, Options::interp()) {
            Err(_) => rejected += 1,
            Ok(m) => {
                ran += 1;
                // Either outputs or a typed error; a panic fails the test.
                let _ = m.runtime().run(&inputs());
            }
        }
    }
    assert!(rejected > 1000, "rejected {rejected}, ran {ran}");
    assert!(ran > 100, "rejected {rejected}, ran {ran}");
}
