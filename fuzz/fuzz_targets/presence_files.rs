//! libFuzzer target: `personad::fuzz::presence_files` (see that function for what it checks).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| personad::fuzz::presence_files(data));
