//! The promotion rule: when a shape key is hot enough to compile.
//!
//! A key is promoted once it was seen `K` times in the slot's window, where `K`
//! shrinks from the configured threshold toward 2 as the region gets more expensive to
//! interpret: `K = clamp(⌈compile cost / mean interpreted time⌉, 2, threshold)`, with
//! the compile cost estimated from the region's size (≈ 0.15 ms + 30 µs per op, the
//! measured compile times of small kernels). A region that costs as much as its
//! compilation is compiled on its second sighting; a cheap one waits for the full
//! threshold. Requests are ordered by benefit = count in window × mean time.
//!
//! **Invariant:** `K ≤ threshold`, so `--compile sync` compiles a hot key within
//! `threshold` executions, deterministically.

/// Estimated compile time of a region of `n_ops` instructions, ns.
pub fn compile_cost_ns(n_ops: u32) -> u64 {
    150_000 + 30_000 * u64::from(n_ops)
}

/// The promotion count for a region of `n_ops` whose key takes `mean_ns` interpreted.
pub fn promote_count(threshold: u32, n_ops: u32, mean_ns: u64) -> u32 {
    let threshold = threshold.max(1);
    let pay_back = compile_cost_ns(n_ops).div_ceil(mean_ns.max(1));
    let pay_back = u32::try_from(pay_back).unwrap_or(u32::MAX);
    pay_back.clamp(threshold.min(2), threshold)
}

/// Benefit of compiling a key: its interpreted time in the current window, ns.
pub fn benefit(in_window: u32, mean_ns: u64) -> u64 {
    u64::from(in_window).saturating_mul(mean_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expensive_regions_promote_sooner() {
        assert_eq!(promote_count(8, 3, 100), 8);
        assert_eq!(promote_count(8, 3, 10_000_000), 2);
        assert_eq!(promote_count(8, 3, 60_000), 4);
        assert_eq!(promote_count(1, 3, 100), 1);
        assert!(promote_count(8, 3, 0) <= 8);
    }
}
