//! Multicast groups: a group number names a set of output ports, and a packet sent to the group leaves on
//! each of them.

use crate::portset::PortSet;
use crate::SwitchError;

/// Multicast groups a switch holds.
pub const GROUPS: usize = 64;

/// The output ports of every multicast group.
#[derive(Clone, Debug)]
pub struct Multicast {
    ports: [PortSet; GROUPS],
}

impl Default for Multicast {
    fn default() -> Self {
        Multicast {
            ports: [PortSet::EMPTY; GROUPS],
        }
    }
}

impl Multicast {
    /// Set the ports of `group`.
    pub fn set(&mut self, group: u16, ports: PortSet) -> Result<(), SwitchError> {
        *self
            .ports
            .get_mut(usize::from(group))
            .ok_or(SwitchError::NoSuchGroup { group })? = ports;
        Ok(())
    }

    /// The ports of `group`; an error if it has none.
    pub fn get(&self, group: u16) -> Result<PortSet, SwitchError> {
        match self.ports.get(usize::from(group)) {
            Some(p) if !p.is_empty() => Ok(*p),
            _ => Err(SwitchError::NoSuchGroup { group }),
        }
    }
}
