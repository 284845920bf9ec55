//! Fuzz target: the `.sjb` image loader on arbitrary bytes must return, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = shapejit_bytecode::image::from_bytes(bytes::Bytes::copy_from_slice(data));
});
