//! libFuzzer target: `personad::fuzz::tg_export` (see that function for what it checks).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| personad::fuzz::tg_export(data));
