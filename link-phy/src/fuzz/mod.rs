//! Entry points for fuzzing the decoders with hostile input.
//!
//! Each function takes arbitrary bytes, drives one decoder with them and checks the properties that must
//! hold for any input (no panic, typed errors, round trips where the input decodes). The cargo-fuzz
//! targets in `fuzz/` call these, and the ordinary test suite replays the committed corpora and a bounded
//! number of seeded random inputs through the same functions, so CI needs no nightly toolchain.
//!
//! A property that does not hold is reported by panicking: that is what a fuzzer looks for.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

pub mod code128b130b;
pub mod code8b10b;
pub mod link_monitor;
pub mod ltssm;

/// Every fuzz entry point, by the name of its cargo-fuzz target.
#[allow(clippy::type_complexity)]
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("decode_128b130b", code128b130b::decode_128b130b),
    ("parse_ordered_set_block", code128b130b::parse_ordered_set_block),
    ("parse_framing_token", code128b130b::parse_framing_token),
    ("decode_8b10b", code8b10b::decode_8b10b),
    ("align_8b10b", code8b10b::align_8b10b),
    ("parse_training_set", ltssm::parse_training_set),
    ("port_receive", ltssm::port_receive),
    ("link_monitor", link_monitor::link_monitor),
];
