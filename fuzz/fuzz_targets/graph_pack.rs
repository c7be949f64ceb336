//! libFuzzer target: `personad::fuzz::graph_pack` (see that function for what it checks).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| personad::fuzz::graph_pack(data));
