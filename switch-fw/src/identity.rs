//! Who a node is, and who is at the other end of each of its ports: the read-only registers a fabric
//! manager reads to discover the fabric (`docs/spec.md` section 5). Switches and endpoints both have them,
//! so that a manager can walk the whole fabric port by port, as InfiniBand's subnet manager does.
//!
//! A node's firmware fills a port's peer when the port's link comes up (the two ends have learned each
//! other's node ID and port number) and clears it when the link goes down.
//!
//! | address | register |
//! |---|---|
//! | `0x0004_0000` | ports |
//! | `0x0004_0004` | node type: 1 switch, 2 endpoint |
//! | `0x0004_0008` | node ID, bits 31:0 |
//! | `0x0004_000C` | node ID, bits 63:32 |
//! | `0x0005_0000 + 16p` | port `p`'s peer: node ID, bits 31:0 |
//! | `0x0005_0004 + 16p` | port `p`'s peer: node ID, bits 63:32 |
//! | `0x0005_0008 + 16p` | port `p`: bit 31 link up, bits 15:8 links ganged, bits 7:0 the peer's port |
//! | `0x0005_000C + 16p` | port `p`: data rate of each direction, MB/s |
//!
//! A port whose link is down reads 0 in all four.

use crate::SwitchError;

/// The read-only port count.
pub const PORT_COUNT: u32 = 0x0004_0000;
/// The node type.
pub const NODE_TYPE: u32 = 0x0004_0004;
/// The node ID, low half (the high half follows).
pub const NODE_ID: u32 = 0x0004_0008;
/// Base of the port peers, 16 bytes per port.
pub const PEERS: u32 = 0x0005_0000;
/// End of the identity registers.
pub const END: u32 = 0x0006_0000;
/// Bit 31 of a port's third peer register: the link is up.
pub const LINK_UP: u32 = 1 << 31;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NodeType {
    /// Forwards packets between its ports.
    Switch = 1,
    /// Sends and receives packets (a GPU): never forwards.
    Endpoint = 2,
}

impl NodeType {
    /// The type whose register code is `code`.
    pub const fn from_code(code: u32) -> Option<NodeType> {
        match code {
            1 => Some(NodeType::Switch),
            2 => Some(NodeType::Endpoint),
            _ => None,
        }
    }
}

/// The node at the other end of a port whose link is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PortPeer {
    /// The peer's node ID.
    pub node: u64,
    /// The peer's port.
    pub port: u8,
    /// Physical links ganged into this port (1 to 255).
    pub links: u8,
    /// Data rate of each direction, MB/s, after line coding.
    pub mbps: u32,
}

impl PortPeer {
    /// The four registers of a port with this peer.
    pub const fn registers(&self) -> [u32; 4] {
        [
            self.node as u32,
            (self.node >> 32) as u32,
            LINK_UP | (self.links as u32) << 8 | self.port as u32,
            self.mbps,
        ]
    }

    /// The peer described by a port's four registers; `None` if its link is down.
    pub const fn from_registers(r: [u32; 4]) -> Option<PortPeer> {
        if r[2] & LINK_UP == 0 {
            return None;
        }
        Some(PortPeer {
            node: r[0] as u64 | (r[1] as u64) << 32,
            port: r[2] as u8,
            links: (r[2] >> 8) as u8,
            mbps: r[3],
        })
    }
}

/// A node's identity registers.
#[derive(Clone, Debug)]
pub struct Identity<const PORTS: usize> {
    /// The node's ID (unique in the fabric, like a GUID).
    pub node: u64,
    /// What the node is.
    pub kind: NodeType,
    /// Ports the node has (at most `PORTS`).
    ports: usize,
    peers: [Option<PortPeer>; PORTS],
}

impl<const PORTS: usize> Identity<PORTS> {
    /// A node of `PORTS` ports, every link down.
    pub const fn new(node: u64, kind: NodeType) -> Self {
        Identity {
            node,
            kind,
            ports: PORTS,
            peers: [None; PORTS],
        }
    }

    /// The same node with only its first `ports` ports (a switch core sized for more than its board
    /// wires); `None` if that is more than `PORTS`.
    pub const fn with_ports(self, ports: usize) -> Option<Self> {
        if ports > PORTS {
            return None;
        }
        Some(Identity { ports, ..self })
    }

    /// Its port count.
    pub const fn ports(&self) -> usize {
        self.ports
    }

    /// Record that `port`'s link came up to `peer` (`Some`) or went down (`None`).
    pub fn set_peer(&mut self, port: usize, peer: Option<PortPeer>) -> Result<(), SwitchError> {
        if port >= self.ports {
            return Err(SwitchError::NoSuchPort { port });
        }
        self.peers[port] = peer;
        Ok(())
    }

    /// The peer at `port`, if its link is up.
    pub fn peer(&self, port: usize) -> Option<PortPeer> {
        self.peers.get(port).copied().flatten()
    }

    /// Read an identity register (`PORT_COUNT` to `END`); every other address is refused.
    pub fn read_register(&self, address: u32) -> Result<u32, SwitchError> {
        let bad = SwitchError::BadRegister { address };
        if address % 4 != 0 {
            return Err(bad);
        }
        match address {
            PORT_COUNT => Ok(self.ports as u32),
            NODE_TYPE => Ok(self.kind as u32),
            NODE_ID => Ok(self.node as u32),
            a if a == NODE_ID + 4 => Ok((self.node >> 32) as u32),
            a if (PEERS..END).contains(&a) => {
                let port = ((a - PEERS) / 16) as usize;
                if port >= self.ports {
                    return Err(bad);
                }
                let word = ((a - PEERS) % 16 / 4) as usize;
                Ok(self.peers[port].map_or(0, |p| p.registers()[word]))
            }
            _ => Err(bad),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_reads_back_through_its_registers_and_a_down_port_reads_zero() {
        let mut id: Identity<4> = Identity::new(0x0123_4567_89AB_CDEF, NodeType::Switch);
        let peer = PortPeer {
            node: 0xFEDC_BA98_7654_3210,
            port: 17,
            links: 5,
            mbps: 125_000,
        };
        id.set_peer(2, Some(peer)).unwrap();
        let r = |a| id.read_register(a).unwrap();
        assert_eq!((r(PORT_COUNT), r(NODE_TYPE)), (4, 1));
        assert_eq!((r(NODE_ID), r(NODE_ID + 4)), (0x89AB_CDEF, 0x0123_4567));
        let regs = [0, 4, 8, 12].map(|w| r(PEERS + 32 + w));
        assert_eq!(regs, [0x7654_3210, 0xFEDC_BA98, 0x8000_0511, 125_000]);
        assert_eq!(PortPeer::from_registers(regs), Some(peer));
        assert_eq!([0, 4, 8, 12].map(|w| r(PEERS + 16 + w)), [0; 4]);
        assert_eq!(PortPeer::from_registers([0; 4]), None);
        id.set_peer(2, None).unwrap();
        assert_eq!(id.peer(2), None);
        assert_eq!(
            id.set_peer(4, Some(peer)),
            Err(SwitchError::NoSuchPort { port: 4 })
        );
    }

    #[test]
    fn addresses_outside_the_block_or_beyond_the_ports_are_refused() {
        let id: Identity<8> = Identity::new(1, NodeType::Endpoint).with_ports(4).unwrap();
        assert_eq!(id.read_register(PORT_COUNT), Ok(4));
        assert!(Identity::<8>::new(1, NodeType::Switch).with_ports(9).is_none());
        for a in [NODE_ID + 8, PEERS + 64, PEERS + 2, END, 0] {
            assert_eq!(
                id.read_register(a),
                Err(SwitchError::BadRegister { address: a }),
                "{a:#x}"
            );
        }
        assert_eq!(
            NodeType::from_code(id.read_register(NODE_TYPE).unwrap()),
            Some(NodeType::Endpoint)
        );
        assert_eq!(NodeType::from_code(3), None);
    }
}
