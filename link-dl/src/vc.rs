//! Virtual channels: independent flow-controlled queues over one link, so that one kind of traffic
//! cannot block another (a coherence protocol deadlocks if snoops wait behind the requests they answer).

/// A virtual channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Vc {
    /// Non-posted requests: reads, non-posted writes, atomics, coherence requests.
    Request = 0,
    /// Posted writes and messages.
    Posted = 1,
    /// Completions and coherence responses.
    Response = 2,
    /// Coherence snoops from the home agent.
    Snoop = 3,
}

/// Virtual channels on every link.
pub const VC_COUNT: usize = 4;

impl Vc {
    /// Every channel, by number.
    pub const ALL: [Vc; VC_COUNT] = [Vc::Request, Vc::Posted, Vc::Response, Vc::Snoop];

    /// The channel numbered `n` (two bits on the wire).
    pub const fn from_bits(n: u8) -> Vc {
        match n & 3 {
            0 => Vc::Request,
            1 => Vc::Posted,
            2 => Vc::Response,
            _ => Vc::Snoop,
        }
    }

    /// The channel's number.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short lower-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Vc::Request => "request",
            Vc::Posted => "posted",
            Vc::Response => "response",
            Vc::Snoop => "snoop",
        }
    }
}
