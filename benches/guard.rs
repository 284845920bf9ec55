//! Guard checks in isolation, on the region inputs of a `[16, 4096]` elementwise
//! region (two operands):
//! - `strong_hit`: the interpreter's memo holds the interned key and the inputs
//!   match it (dims and strides compared) — the path of every guard hit;
//! - `ptr_hit`: the interned-key fast path alone (`Arc::ptr_eq`);
//! - `strong_miss`: the inputs changed batch: the memo check fails, a new key is
//!   built and interned in the slot's profile (what a guard miss costs before the
//!   interpreter falls through into the region, i.e. the deoptimization itself is
//!   only this plus a program-counter change).

use criterion::{Criterion, criterion_group, criterion_main};
use shapejit::DType;
use shapejit::vm::profile::SlotProfile;
use shapejit::vm::shape_key::ShapeKey;
use shapejit::vm::tensor::{Layout, TensorRef};
use std::hint::black_box;
use std::sync::Arc;

fn guard(c: &mut Criterion) {
    let data = vec![0u8; 16 * 4096 * 4];
    let hot = Layout::contiguous(&[16, 4096]);
    let cold = Layout::contiguous(&[15, 4096]);
    let refs_hot = [
        TensorRef::new(DType::F32, &hot, &data).unwrap(),
        TensorRef::new(DType::F32, &hot, &data).unwrap(),
    ];
    let refs_cold = [
        TensorRef::new(DType::F32, &cold, &data).unwrap(),
        TensorRef::new(DType::F32, &cold, &data).unwrap(),
    ];
    let profile = SlotProfile::new(64);
    let (key, _) = profile.intern(ShapeKey::of(&refs_hot));
    let same = key.clone();
    let mut group = c.benchmark_group("guard");
    group.bench_function("strong_hit", |b| {
        b.iter(|| black_box(&key).matches(black_box(&refs_hot)))
    });
    group.bench_function("ptr_hit", |b| {
        b.iter(|| Arc::ptr_eq(black_box(&key), black_box(&same)))
    });
    group.bench_function("strong_miss", |b| {
        b.iter(|| {
            let refs = black_box(&refs_cold);
            if !key.matches(refs) {
                black_box(profile.intern(ShapeKey::of(refs)));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, guard);
criterion_main!(benches);
