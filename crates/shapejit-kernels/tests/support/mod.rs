//! Helpers shared by the kernel tests.

/// `n` deterministic f32 in `[lo, hi)` from an xorshift seeded by `seed`.
pub fn data(n: usize, seed: u32, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            lo + (s >> 8) as f32 / (1u32 << 24) as f32 * (hi - lo)
        })
        .collect()
}
