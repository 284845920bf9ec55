//! Fuzz target: the ONNX loader on arbitrary bytes must return, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = shapejit_onnx::load_bytes(bytes::Bytes::copy_from_slice(data), None);
});
