//! A switch's collective engine (NVLink SHARP, as NCCL's NVLS uses it): a GPU's `ld_reduce` of a packet
//! makes the switch read that packet from every GPU, sum the answers in its reduction engine, and return
//! the sum.

use std::collections::VecDeque;

use link_dl::flit::FLIT_LEN;
use link_dl::{Received, Vc};
use switch_fw::switch::{Destination, Switch};

use super::{inject, HeldPackets, Net, NodeState, REDUCTIONS, SWITCH_SLOTS};
use crate::wire;

impl Nvls {
    /// A packet for the engine: an `ld_reduce` request, or a GPU's answer to one of the engine's reads.
    /// Returns whether the engine took it (an engine that is offline drops it).
    pub(super) fn receive(
        &mut self,
        core: &mut Switch<64, SWITCH_SLOTS, REDUCTIONS>,
        held: &mut HeldPackets,
        port: usize,
        p: Received,
    ) -> bool {
        if self.offline {
            return false;
        }
        let (_, requester, _) = wire::route_fields(p.tl);
        match wire::opcode(p.tl) {
            wire::OP_REDUCE_READ => self.pending.push_back((requester, wire::offset(p.tl))),
            wire::OP_READ_DATA => {
                let skip = usize::from(self.extension);
                let mut data = [0u8; 128];
                let mut len = 0;
                for flit in p.payload.iter().skip(skip).take(8) {
                    data[len..len + FLIT_LEN].copy_from_slice(flit);
                    len += FLIT_LEN;
                }
                let sum = match core
                    .reducer
                    .contribute(port, requester, wire::offset(p.tl), &data[..len])
                {
                    Ok(Some(sum)) => sum,
                    Ok(None) => return true,
                    Err(_) => return false,
                };
                self.active = self.active.saturating_sub(1);
                let mut payload = heapless::Vec::new();
                if self.extension {
                    let _ = payload.push([0; FLIT_LEN]);
                }
                for chunk in sum.data[..usize::from(sum.len)].chunks(FLIT_LEN) {
                    let mut flit = [0u8; FLIT_LEN];
                    flit[..chunk.len()].copy_from_slice(chunk);
                    let _ = payload.push(flit);
                }
                let tl = wire::header(wire::OP_REDUCE_DATA, requester, 0, false, sum.chunk);
                inject(
                    core,
                    held,
                    Received {
                        vc: Vc::Response,
                        tl,
                        payload,
                    },
                    Destination::Unicast(requester),
                    Switch::inject_reduced_to,
                );
            }
            _ => return false,
        }
        true
    }
}

/// A switch's collective engine (NVLink SHARP, as NCCL's NVLS uses it): a GPU's `ld_reduce` of a packet
/// makes the switch read that packet from every GPU, sum the answers in its reduction engine, and return
/// the sum.
#[derive(Debug, Default)]
pub(super) struct Nvls {
    /// Ports that lead to GPUs, and the GPU (endpoint) behind each.
    pub(super) gpu_ports: Vec<(usize, u16)>,
    /// `ld_reduce` requests waiting for a free accumulator: (requester, packet).
    pub(super) pending: VecDeque<(u16, u32)>,
    /// Reductions under way.
    pub(super) active: usize,
    pub(super) extension: bool,
    /// Lost a port to a GPU: takes no more requests or answers.
    pub(super) offline: bool,
    /// The reduction groups' registers (address, value) as they were when the fabric manager removed
    /// them, taking the engine offline: written again when it comes back online.
    pub(super) removed_groups: Vec<(u32, u32)>,
}

impl Net {
    /// Set every switch up for switch reductions: its multicast group [`wire::NVLS_ALL`] reaches all the
    /// GPUs behind it, and one reduction group per GPU sums answers from all of them. `extension` says
    /// whether requests carry NVLink's address-extension flit.
    pub fn configure_nvls(&mut self, extension: bool) -> Result<(), String> {
        use switch_fw::reduce::{Element, ReductionGroup};
        for node in 0..self.nodes.len() {
            let gpu_ports: Vec<(usize, u16)> = (0..self.fabric.port_count(node))
                .filter_map(|p| {
                    let (peer, _) = self.fabric.peer(node, p);
                    self.gpu_of_node[peer].map(|g| (p, g as u16))
                })
                .collect();
            let NodeState::Switch { core, nvls, .. } = &mut self.nodes[node] else {
                continue;
            };
            if gpu_ports.len() < 2 {
                continue;
            }
            let set = gpu_ports
                .iter()
                .fold(switch_fw::PortSet::EMPTY, |s, &(p, _)| s.with(p));
            core.multicast
                .set(wire::NVLS_ALL, set)
                .map_err(|e| e.to_string())?;
            for &(_, g) in &gpu_ports {
                let group = ReductionGroup {
                    contributors: set,
                    result_group: wire::NVLS_ALL,
                    element: Element::U32,
                };
                core.reducer
                    .set(g, Some(group))
                    .map_err(|e| format!("switch reduction: {e}"))?;
            }
            *nvls = Nvls {
                gpu_ports,
                extension,
                ..Nvls::default()
            };
        }
        Ok(())
    }

    /// Start the switch reductions there is room for: read the packet from every GPU.
    #[inline(always)]
    pub(super) fn pump_nvls(&mut self, node: usize) {
        // Called on every packet a switch receives and nearly always with nothing pending: the test
        // stays in the caller, without the set-up of the loop below.
        if matches!(&self.nodes[node], NodeState::Switch { nvls, .. } if !nvls.pending.is_empty()) {
            self.start_nvls(node);
        }
    }

    #[inline(never)]
    fn start_nvls(&mut self, node: usize) {
        let NodeState::Switch { core, held, nvls, .. } = &mut self.nodes[node] else {
            return;
        };
        while !nvls.pending.is_empty()
            && nvls.active < REDUCTIONS
            && core.free_slots() >= 2 * nvls.gpu_ports.len() + nvls.active
        {
            let Some((requester, packet)) = nvls.pending.pop_front() else {
                break;
            };
            nvls.active += 1;
            for &(_, gpu) in &nvls.gpu_ports {
                let tl = wire::header(wire::OP_READ, gpu, requester, false, packet);
                let payload = if nvls.extension {
                    core::iter::once([0; FLIT_LEN]).collect()
                } else {
                    heapless::Vec::new()
                };
                let read = Received {
                    vc: Vc::Request,
                    tl,
                    payload,
                };
                inject(core, held, read, Destination::Unicast(gpu), Switch::inject);
            }
        }
    }
}
