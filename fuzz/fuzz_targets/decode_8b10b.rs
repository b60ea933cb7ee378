#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| link_phy::fuzz::code8b10b::decode_8b10b(data));
