//! Partitions: the fabric manager puts endpoints into partitions, and a packet may only travel between
//! endpoints of the same partition (isolation, like NVLink partitions or InfiniBand partition keys).

use crate::{EndpointId, SwitchError, MAX_ENDPOINTS};

/// The partition of every endpoint; all start in partition 0.
#[derive(Clone, Debug)]
pub struct Partitions {
    of: [u8; MAX_ENDPOINTS],
}

impl Default for Partitions {
    fn default() -> Self {
        Partitions {
            of: [0; MAX_ENDPOINTS],
        }
    }
}

impl Partitions {
    /// Put `endpoint` in `partition`.
    pub fn assign(&mut self, endpoint: EndpointId, partition: u8) -> Result<(), SwitchError> {
        *self
            .of
            .get_mut(usize::from(endpoint))
            .ok_or(SwitchError::NoSuchEndpoint { endpoint })? = partition;
        Ok(())
    }

    /// The partition of `endpoint`.
    pub fn of(&self, endpoint: EndpointId) -> Option<u8> {
        self.of.get(usize::from(endpoint)).copied()
    }

    /// Whether `from` may send to `to`.
    pub fn check(&self, from: EndpointId, to: EndpointId) -> Result<(), SwitchError> {
        match (self.of(from), self.of(to)) {
            (Some(a), Some(b)) if a == b => Ok(()),
            (Some(a), Some(b)) => Err(SwitchError::CrossPartition { from: a, to: b }),
            (None, _) => Err(SwitchError::NoSuchEndpoint { endpoint: from }),
            (_, None) => Err(SwitchError::NoSuchEndpoint { endpoint: to }),
        }
    }
}
