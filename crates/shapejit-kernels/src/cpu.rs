//! CPU feature levels, detected once: the one place that decides which
//! instruction set the hot kernels run.
//!
//! Levels, lowest first: [`Level::Scalar`] (portable Rust; on x86-64 the
//! compiler may still use the SSE2 baseline), [`Level::Avx2`] (AVX2 + FMA) and
//! [`Level::Avx512`] (AVX-512 F + BW + DQ + VL, with AVX2 + FMA). [`detected`]
//! is the highest level the CPU supports. [`level`] is the level in use: the
//! detected one, capped by the environment variable [`ENV`]
//! (`SHAPEJIT_CPU=avx512|avx2|scalar`, case-insensitive), read once per process.
//! A cap above the CPU's level is lowered to what the CPU has; an unknown value
//! is ignored with a warning on stderr (the library cannot fail there), and
//! [`env_cap`] reports it as a typed error so a front end can refuse it (the CLI
//! does).
//!
//! **Invariant:** [`level`] `<=` [`detected`], and [`supported`] is exactly
//! `level <= detected()`: a kernel entered at a level never executes an
//! instruction the CPU lacks.

use crate::error::KernelError;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// Name of the environment variable that caps the level (`avx512|avx2|scalar`).
pub const ENV: &str = "SHAPEJIT_CPU";

/// An instruction-set level, ordered from the lowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// portable code, one f32 per operation in the explicit SIMD kernels
    Scalar,
    /// AVX2 + FMA: 8 f32 lanes
    Avx2,
    /// AVX-512 F + BW + DQ + VL: 16 f32 lanes, masked tails
    Avx512,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 3] = [Level::Scalar, Level::Avx2, Level::Avx512];

    /// The name [`ENV`] accepts and the CLI prints.
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }

    /// f32 lanes per vector register of the level's explicit SIMD kernels.
    pub fn lanes(self) -> usize {
        match self {
            Level::Scalar => 1,
            Level::Avx2 => 8,
            Level::Avx512 => 16,
        }
    }

    /// This level lowered to what the CPU supports.
    pub fn capped(self) -> Level {
        self.min(detected())
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = KernelError;

    fn from_str(s: &str) -> Result<Level, KernelError> {
        Level::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                KernelError::Invalid(format!(
                    "{ENV}={s:?} is not a CPU level (expected avx512, avx2 or scalar)"
                ))
            })
    }
}

/// The highest level this CPU supports (detected on first use, then cached).
pub fn detected() -> Level {
    static DETECTED: OnceLock<Level> = OnceLock::new();
    *DETECTED.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    use std::arch::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("fma");
    if avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
        Level::Avx512
    } else if avx2 {
        Level::Avx2
    } else {
        Level::Scalar
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Scalar
}

/// The cap [`ENV`] asks for: `Ok(None)` when unset or empty, an error naming
/// the value when it is not a level.
pub fn env_cap() -> Result<Option<Level>, KernelError> {
    match std::env::var(ENV) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => v.parse().map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(KernelError::Invalid(format!(
            "{ENV}={v:?} is not a CPU level (expected avx512, avx2 or scalar)"
        ))),
    }
}

/// The level the kernels use: [`detected`] capped by [`ENV`] (read once).
#[inline]
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| match env_cap() {
        Ok(cap) => cap.map_or(detected(), Level::capped),
        Err(e) => {
            eprintln!("shapejit: warning: {e}; using the detected level");
            detected()
        }
    })
}

/// True when kernels may run at `level` on this CPU.
pub fn supported(level: Level) -> bool {
    level <= detected()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_order_is_by_width() {
        for l in Level::ALL {
            assert_eq!(l.name().parse::<Level>(), Ok(l));
            assert_eq!(l.to_string().to_uppercase().parse::<Level>(), Ok(l));
        }
        assert!(Level::Scalar < Level::Avx2 && Level::Avx2 < Level::Avx512);
        let err = "avx-2".parse::<Level>().unwrap_err().to_string();
        assert!(err.contains("avx-2") && err.contains(ENV), "{err}");
    }

    #[test]
    fn level_is_capped_by_the_cpu() {
        assert!(level() <= detected());
        assert!(supported(Level::Scalar));
        assert_eq!(Level::Avx512.capped(), detected());
        for l in Level::ALL {
            assert_eq!(supported(l), l.capped() == l);
        }
    }
}
