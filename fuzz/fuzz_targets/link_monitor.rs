#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| link_phy::fuzz::link_monitor::link_monitor(data));
