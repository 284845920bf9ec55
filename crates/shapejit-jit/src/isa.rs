//! The one shared native ISA.
//!
//! Built once per process from `cranelift_native` with `opt_level=speed`; every kernel's
//! `JITModule` gets a clone of the same `Arc`.
//!
//! **Invariant:** the ISA exists only on hosts with AVX and FMA, so `fma` lowers to
//! `vfmadd*` and every emitted vector instruction is VEX-encoded. Elsewhere
//! [`native_isa`] returns [`JitError::UnsupportedHost`] and the VM stays on the
//! interpreter.

use std::sync::OnceLock;

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};

use crate::error::JitError;

static NATIVE_ISA: OnceLock<Result<OwnedTargetIsa, JitError>> = OnceLock::new();

/// The shared ISA, or why this host gets no tier-up.
pub fn native_isa() -> Result<OwnedTargetIsa, JitError> {
    NATIVE_ISA.get_or_init(build_isa).clone()
}

/// `Ok(())` when this host can run JIT code (AVX+FMA present and the ISA builds).
pub fn check_host() -> Result<(), JitError> {
    native_isa().map(|_| ())
}

fn build_isa() -> Result<OwnedTargetIsa, JitError> {
    check_features()?;
    let mut flags = settings::builder();
    for (name, value) in [
        ("opt_level", "speed"),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        ("enable_verifier", "true"),
    ] {
        flags
            .set(name, value)
            .map_err(|e| JitError::Isa(format!("{name}={value}: {e}")))?;
    }
    let mut isa_builder = cranelift_native::builder().map_err(|e| JitError::Isa(e.to_string()))?;
    // cranelift_native already inferred these from cpuid; setting them again documents
    // (and checks) what the code generator relies on.
    for feature in ["has_avx", "has_fma"] {
        isa_builder
            .enable(feature)
            .map_err(|e| JitError::Isa(format!("{feature}: {e}")))?;
    }
    isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| JitError::Isa(e.to_string()))
}

#[cfg(target_arch = "x86_64")]
fn check_features() -> Result<(), JitError> {
    let missing: Vec<&str> = [
        ("avx", std::arch::is_x86_feature_detected!("avx")),
        ("fma", std::arch::is_x86_feature_detected!("fma")),
    ]
    .into_iter()
    .filter(|(_, present)| !present)
    .map(|(name, _)| name)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(JitError::UnsupportedHost {
            missing: missing.join("+"),
        })
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn check_features() -> Result<(), JitError> {
    Err(JitError::UnsupportedHost {
        missing: "x86_64 AVX+FMA".to_string(),
    })
}
