#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| link_phy::fuzz::code128b130b::parse_framing_token(data));
