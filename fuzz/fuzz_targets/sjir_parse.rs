//! Fuzz target: the `.sjir` parser on arbitrary UTF-8 never panics, and any
//! text that parses prints to a fixed point (`shapejit_ir::text::check_round_trip`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Err(e) = shapejit_ir::text::check_round_trip(text)
    {
        panic!("{e}");
    }
});
