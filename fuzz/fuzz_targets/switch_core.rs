#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| switch_fw::fuzz::switch_core(data));
