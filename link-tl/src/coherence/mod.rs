//! Directory-based MESI cache coherence between caching agents and the home agent that owns a memory
//! range, with a message set modelled on CXL.cache. `docs/spec.md` section 3.9 is the normative
//! description: messages, channels, state machines and the wire format.
//!
//! - [`message`]: the messages (requests, snoops, snoop responses, GO, write-back data) and states.
//! - [`agent`]: [`CachingAgent`], per-line MESI with a request in flight and a queue of core operations.
//! - [`home`]: [`HomeAgent`], the directory (Invalid, Shared with a sharer bitmap, Owned) and memory.
//! - [`wire`]: the messages as data-link packets on the coherence opcodes.
//!
//! Both engines are sans-IO and never allocate; they exchange [`Message`]s and know nothing of links.
//! Requests travel on the request channel, snoops on the snoop channel, everything else on the response
//! channel, and both ends consume every channel unconditionally, so none can block another.
//!
//! A GO travels on the response channel and a later snoop to the same line on the snoop channel, so the
//! snoop can overtake it. Each snoop carries the parity of the GOs the home has sent that agent for that
//! line; an agent whose own count of GOs received differs holds the snoop until the GO arrives.
//!
#![cfg_attr(
    feature = "std",
    doc = "With `std`: [`explore`] checks every interleaving of a small system exhaustively, [`stress`] \
           runs a seeded random workload over real data links with faults injected, and [`crate::fuzz`] \
           holds the decoder's fuzz entry point."
)]
#![cfg_attr(
    not(feature = "std"),
    doc = "With the `std` feature, `explore` checks every interleaving of a small system exhaustively, \
           `stress` runs a seeded random workload over real data links with faults injected, and \
           `link_tl::fuzz` holds the decoder's fuzz entry point."
)]

pub mod agent;
pub mod home;
pub mod message;
pub mod wire;

#[cfg(feature = "std")]
pub mod explore;
#[cfg(feature = "std")]
pub mod stress;

pub use agent::{AgentCounters, CachingAgent, Completion, CoreOp};
pub use home::{Directory, HomeAgent, HomeCounters};
pub use message::{CacheState, ForwardKind, LeftIn, Message, RequestKind, SnoopKind, SnoopResponseKind};
pub use wire::{decode, encode, CoherencePacket, Envelope};

/// `items` with item `i` moved to place `to[i]`, `to` a permutation: how the model checker renames agents
/// and lines.
#[cfg(feature = "std")]
pub(crate) fn permuted<T: Copy, const N: usize>(items: [T; N], to: &[usize; N]) -> [T; N] {
    let mut out = items;
    for (item, &place) in items.into_iter().zip(to) {
        if let Some(slot) = out.get_mut(place) {
            *slot = item;
        }
    }
    out
}
