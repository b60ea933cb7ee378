#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| link_phy::fuzz::code128b130b::decode_128b130b(data));
