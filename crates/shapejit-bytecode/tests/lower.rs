//! Lowering and verifier tests on small builder graphs.

use shapejit_bytecode::{Instr, Pc, Program, Reg, RegionKind, VerifyError, lower, verify};
use shapejit_ir::{DType, Graph, GraphBuilder, Tensor, shape};

/// `y = tanh(relu(x + 1) * 2) - x` on `x: f32[batch, 8]`, then a matmul with a bias and relu.
fn chain() -> Graph {
    let mut b = GraphBuilder::new("chain");
    let x = b.input("x", DType::F32, shape!["batch", 8]);
    let one = b.const_f32(1.0).unwrap();
    let two = b.const_f32(2.0).unwrap();
    let w = b.constant("w", Tensor::from_vec(vec![0.5f32; 64], &[8, 8]).unwrap());
    let bias = b.constant("bias", Tensor::from_vec(vec![0.1f32; 8], &[8]).unwrap());
    let a = b.add(x, one).unwrap();
    let a = b.relu(a).unwrap();
    let a = b.mul(a, two).unwrap();
    let a = b.tanh(a).unwrap();
    let a = b.sub(a, x).unwrap();
    let m = b.matmul(a, w).unwrap();
    let m = b.add(m, bias).unwrap();
    let m = b.relu(m).unwrap();
    b.output("y", m).unwrap();
    b.finish().unwrap()
}

fn if_graph() -> Graph {
    let branch = |name: &str, neg: bool| {
        let mut b = GraphBuilder::new(name);
        let x = b.input("x", DType::F32, shape!["n"]);
        let y = if neg {
            b.neg(x).unwrap()
        } else {
            b.exp(x).unwrap()
        };
        b.output("out", y).unwrap();
        b.finish().unwrap()
    };
    let mut b = GraphBuilder::new("if");
    let c = b.input("c", DType::Bool, shape![]);
    let x = b.input("x", DType::F32, shape!["n"]);
    let outs = b
        .if_(c, branch("then", true), branch("else", false), &[x])
        .unwrap();
    b.output("y", outs[0]).unwrap();
    b.finish().unwrap()
}

fn op_count(p: &Program) -> usize {
    p.instrs
        .iter()
        .filter(|i| matches!(i, Instr::Op { .. }))
        .count()
}

#[test]
fn chain_forms_regions_and_shares_storage() {
    let p = lower(&chain()).unwrap();
    let kinds: Vec<RegionKind> = p.regions.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        vec![RegionKind::Elementwise, RegionKind::MatmulEpilogue]
    );
    assert_eq!(p.regions[0].len, 5);
    assert_eq!(p.regions[1].len, 3);
    // The elementwise region reads x and the constants, and hands one value on.
    assert_eq!(p.regions[0].outputs.len(), 1);
    assert_eq!(p.regions[1].outputs.len(), 1);
    // 8 computed values on a chain: lifetimes overlap only pairwise.
    assert_eq!(op_count(&p), 8);
    assert!(
        p.memory.n_groups() < op_count(&p),
        "{} groups",
        p.memory.n_groups()
    );
    assert!(p.memory.n_groups() <= 3, "{}", p.memory.n_groups());
    // one slot per op and per region head
    assert_eq!(p.slots.len(), 8 + 2);
}

#[test]
fn registers_are_reused_after_last_use() {
    let p = lower(&chain()).unwrap();
    let n_values = p.instrs.iter().map(|i| i.defs().len()).sum::<usize>();
    assert!(
        (p.n_regs as usize) < n_values,
        "{} regs for {} values",
        p.n_regs,
        n_values
    );
}

#[test]
fn if_lowers_to_jumps() {
    let p = lower(&if_graph()).unwrap();
    assert!(
        p.instrs
            .iter()
            .any(|i| matches!(i, Instr::JumpIfFalse { .. }))
    );
    assert!(p.instrs.iter().any(|i| matches!(i, Instr::Jump { .. })));
    assert_eq!(
        p.instrs
            .iter()
            .filter(|i| matches!(i, Instr::Move { .. }))
            .count(),
        2
    );
}

fn corrupt(mut p: Program, f: impl FnOnce(&mut Program)) -> Result<(), VerifyError> {
    f(&mut p);
    verify(&p)
}

#[test]
fn verifier_rejects_register_out_of_range() {
    let p = lower(&chain()).unwrap();
    let n = p.n_regs;
    let err = corrupt(p, |p| {
        let pc = p
            .instrs
            .iter()
            .position(|i| matches!(i, Instr::Op { .. }))
            .unwrap();
        p.instrs[pc].map_regs(&mut |_| Reg(n + 3));
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::OutOfRange {
                what: "register",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn verifier_rejects_read_before_write() {
    let p = lower(&chain()).unwrap();
    // Make the first op read a register that nothing before it writes.
    let err = corrupt(p, |p| {
        let pc = p
            .instrs
            .iter()
            .position(|i| matches!(i, Instr::Op { .. }))
            .unwrap();
        let defined_before: Vec<Reg> = p.instrs[..pc].iter().flat_map(|i| i.defs()).collect();
        let fresh = (0..p.n_regs)
            .map(Reg)
            .find(|r| !defined_before.contains(r))
            .unwrap();
        if let Instr::Op { srcs, .. } = &mut p.instrs[pc] {
            srcs[0] = fresh;
        }
    })
    .unwrap_err();
    assert!(matches!(err, VerifyError::UndefinedRead { .. }), "{err}");
}

#[test]
fn verifier_rejects_bad_jump_target() {
    let p = lower(&if_graph()).unwrap();
    let len = p.instrs.len() as u32;
    let err = corrupt(p, |p| {
        for i in &mut p.instrs {
            if let Instr::JumpIfFalse { target, .. } = i {
                *target = Pc(len + 10);
            }
        }
    })
    .unwrap_err();
    assert!(matches!(err, VerifyError::BadJumpTarget { .. }), "{err}");
}

#[test]
fn verifier_rejects_inconsistent_region() {
    let p = lower(&chain()).unwrap();
    let err = corrupt(p.clone(), |p| p.regions[0].len += 1).unwrap_err();
    assert!(matches!(err, VerifyError::BadRegion { .. }), "{err}");
    let err = corrupt(p, |p| {
        for i in &mut p.instrs {
            if let Instr::ShapeGuard { skip, .. } = i {
                *skip = 1000;
            }
        }
    })
    .unwrap_err();
    assert!(matches!(err, VerifyError::BadJumpTarget { .. }), "{err}");
}

#[test]
fn verifier_rejects_falling_off_the_end_and_empty() {
    let p = lower(&chain()).unwrap();
    let err = corrupt(p.clone(), |p| {
        p.instrs.pop();
    })
    .unwrap_err();
    assert!(matches!(err, VerifyError::FallsOffEnd { .. }), "{err}");
    let err = corrupt(p, |p| p.instrs.clear()).unwrap_err();
    assert_eq!(err, VerifyError::Empty);
}

#[test]
fn verifier_rejects_shared_slots() {
    let p = lower(&chain()).unwrap();
    let err = corrupt(p, |p| {
        let mut first = None;
        for i in &mut p.instrs {
            if let Instr::Op { slot, .. } = i {
                match first {
                    None => first = Some(*slot),
                    Some(s) => *slot = s,
                }
            }
        }
    })
    .unwrap_err();
    assert!(matches!(err, VerifyError::BadSlot { .. }), "{err}");
}

#[test]
fn listing_shows_slots_regions_and_plan() {
    let p = lower(&chain()).unwrap();
    let text = p.to_string();
    println!("{text}");
    assert!(
        text.contains("shape_guard slot=0 region=0 skip=5"),
        "{text}"
    );
    assert!(text.contains("region 1 matmul_epilogue"), "{text}");
    assert!(text.contains(" = matmul %r"), "{text}");
    assert!(text.contains("memory plan: "), "{text}");
    assert_eq!(
        text,
        lower(&chain()).unwrap().to_string(),
        "the listing is deterministic"
    );
}

#[test]
fn programs_round_trip_through_serde() {
    for g in [chain(), if_graph()] {
        let p = lower(&g).unwrap();
        let json = serde_json::to_string(&p).unwrap();
        let back: Program = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        verify(&back).unwrap();
        assert_eq!(back.to_string(), p.to_string());
    }
}

/// `y = cast_f16(relu(cast_f32(x)) + 1)` on `x: f16[n]`: the casts from and to
/// f16 stay interpreted, and the f32 ops between them form the only region.
#[test]
fn regions_never_read_or_write_other_dtypes() {
    let mut b = GraphBuilder::new("half");
    let x = b.input("x", DType::F16, shape!["n"]);
    let one = b.const_f32(1.0).unwrap();
    let wide = b.cast(x, DType::F32).unwrap();
    let a = b.relu(wide).unwrap();
    let a = b.add(a, one).unwrap();
    let y = b.cast(a, DType::F16).unwrap();
    b.output("y", y).unwrap();
    let p = lower(&b.finish().unwrap()).unwrap();
    assert_eq!(p.regions.len(), 1);
    assert_eq!(p.regions[0].kind, RegionKind::Elementwise);
    assert_eq!(p.regions[0].len, 2, "relu and add only");
}
