//! A deterministic discrete-event simulator of accelerator fabrics that runs the link stack's own state
//! machines: every link is a pair of `link-dl` data links over a timed channel, every switch runs
//! `switch-fw`, and collectives move real data that is checked at the end.
//!
//! - [`topology`]: built-in systems (mesh, DGX-1, DGX A100, DGX H100, PCIe, a 256-GPU fat tree) and TOML.
//! - [`discover`]: how the fabric manager finds what is wired, through directed-route register reads, and
//!   checks it against a topology.
//! - [`manager`]: the fabric manager: link ganging, endpoint IDs, up*/down* routes, switch programming.
//! - [`net`]: the running fabric and its event loop; [`wire`]: the header fields it routes on.
//! - [`collective`]: collectives that move checked data; [`run`]: sweeps over message sizes.
//! - [`probe`]: a packet between every pair of GPUs, to see what the routes and partitions let through.
//! - [`traffic`]: synthetic traffic patterns at an offered load: accepted throughput and latency.
//! - [`fuzz`]: entry points that fuzz the topology file format.
#![warn(missing_docs)]

pub mod collective;
pub mod discover;
mod events;
pub mod fuzz;
mod hashing;
pub mod manager;
pub mod net;
pub mod probe;
pub mod run;
pub mod topology;
pub mod trace;
pub mod traffic;
pub mod vcd;
pub mod wire;
