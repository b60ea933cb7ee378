#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| link_phy::fuzz::code128b130b::parse_ordered_set_block(data));
