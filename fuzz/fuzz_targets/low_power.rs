#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| link_dl::fuzz::low_power(data));
