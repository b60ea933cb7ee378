#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fabric_sim::fuzz::trace_write(data));
