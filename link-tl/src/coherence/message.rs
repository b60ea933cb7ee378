//! The coherence message set, modelled on CXL.cache: device requests, host snoops, snoop responses, GO
//! (global observation, carrying the granted state) and write-back data.
//!
//! A [`Message`] says nothing about who sent it or where it goes: the engines learn that from the link it
//! arrived on, and [`super::wire`] carries source and destination endpoints on the wire. `B` is the size
//! of a line's data in bytes (64 on the wire; the model checker uses 1).

use link_dl::Vc;

/// The state of a line in a cache, and the state a GO grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CacheState {
    /// Not present.
    Invalid = 0,
    /// Present, clean, possibly in other caches too: readable.
    Shared = 1,
    /// Present, clean, in no other cache: readable, and writable without asking (it becomes Modified).
    Exclusive = 2,
    /// Present, dirty, in no other cache: readable and writable; memory is stale.
    Modified = 3,
}

impl CacheState {
    /// The state numbered `bits` (two bits, so every value is one).
    pub const fn from_bits(bits: u8) -> CacheState {
        match bits & 3 {
            0 => CacheState::Invalid,
            1 => CacheState::Shared,
            2 => CacheState::Exclusive,
            _ => CacheState::Modified,
        }
    }

    /// Whether the line's data may be read.
    pub const fn is_valid(self) -> bool {
        !matches!(self, CacheState::Invalid)
    }

    /// Whether this cache is the only one that may hold the line (Exclusive or Modified).
    pub const fn is_owned(self) -> bool {
        matches!(self, CacheState::Exclusive | CacheState::Modified)
    }

    /// The one-letter name.
    pub const fn letter(self) -> char {
        match self {
            CacheState::Invalid => 'I',
            CacheState::Shared => 'S',
            CacheState::Exclusive => 'E',
            CacheState::Modified => 'M',
        }
    }
}

/// A caching agent's request to the home (request channel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RequestKind {
    /// Read the current value without caching it: GO-I with data.
    RdCurr = 0,
    /// Read to share: GO-S with data.
    RdShared = 1,
    /// Read, exclusively if nobody else holds the line: GO-E or GO-S with data.
    RdAny = 2,
    /// Read for ownership, to write: every other copy is invalidated; GO-E, with data unless the
    /// requester still holds the line Shared.
    RdOwn = 3,
    /// Give up a clean (Shared or Exclusive) line: GO-I.
    CleanEvict = 4,
    /// Give up a Modified line: GO_WritePull, then the data goes home (GO-I if the line was taken meanwhile).
    DirtyEvict = 5,
}

impl RequestKind {
    /// Every request, by code.
    pub const ALL: [RequestKind; 6] = [
        RequestKind::RdCurr,
        RequestKind::RdShared,
        RequestKind::RdAny,
        RequestKind::RdOwn,
        RequestKind::CleanEvict,
        RequestKind::DirtyEvict,
    ];

    /// The request with code `code`, if any.
    pub const fn from_code(code: u8) -> Option<RequestKind> {
        match code {
            0 => Some(RequestKind::RdCurr),
            1 => Some(RequestKind::RdShared),
            2 => Some(RequestKind::RdAny),
            3 => Some(RequestKind::RdOwn),
            4 => Some(RequestKind::CleanEvict),
            5 => Some(RequestKind::DirtyEvict),
            _ => None,
        }
    }

    /// Whether it gives a line up (an eviction) rather than asks for it.
    pub const fn is_evict(self) -> bool {
        matches!(self, RequestKind::CleanEvict | RequestKind::DirtyEvict)
    }
}

/// A snoop from the home (snoop channel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SnoopKind {
    /// Another agent wants to read: keep at most a Shared copy, forward dirty data.
    SnpData = 0,
    /// Another agent wants to write: invalidate, forward dirty data.
    SnpInv = 1,
    /// Another agent wants the current value: forward dirty data, keep any state.
    SnpCur = 2,
}

impl SnoopKind {
    /// The snoop with code `code`, if any.
    pub const fn from_code(code: u8) -> Option<SnoopKind> {
        match code {
            0 => Some(SnoopKind::SnpData),
            1 => Some(SnoopKind::SnpInv),
            2 => Some(SnoopKind::SnpCur),
            _ => None,
        }
    }
}

/// A snoop response without data (response channel). The first letter is the state the line is left
/// in (I, S, or V: unchanged), "Hit" what it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SnoopResponseKind {
    /// Was Invalid, is Invalid.
    RspIHitI = 0,
    /// Was Shared or Exclusive, is Invalid.
    RspIHitSE = 1,
    /// Was Shared or Exclusive, is Shared.
    RspSHitSE = 2,
    /// Was valid and clean, unchanged.
    RspVHitV = 3,
}

impl SnoopResponseKind {
    /// The response with code `code`, if any.
    pub const fn from_code(code: u8) -> Option<SnoopResponseKind> {
        match code {
            0 => Some(SnoopResponseKind::RspIHitI),
            1 => Some(SnoopResponseKind::RspIHitSE),
            2 => Some(SnoopResponseKind::RspSHitSE),
            3 => Some(SnoopResponseKind::RspVHitV),
            _ => None,
        }
    }

    /// The state the responder is left in.
    pub const fn left_in(self) -> LeftIn {
        match self {
            SnoopResponseKind::RspIHitI | SnoopResponseKind::RspIHitSE => LeftIn::Invalid,
            SnoopResponseKind::RspSHitSE => LeftIn::Shared,
            SnoopResponseKind::RspVHitV => LeftIn::Unchanged,
        }
    }
}

/// A snoop response that forwards the line's dirty data (response channel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ForwardKind {
    /// Was Modified, is Invalid.
    RspIFwdM = 0,
    /// Was Modified, is Shared.
    RspSFwdM = 1,
    /// Was Modified, unchanged (still Modified).
    RspVFwdV = 2,
}

impl ForwardKind {
    /// The response with code `code`, if any.
    pub const fn from_code(code: u8) -> Option<ForwardKind> {
        match code {
            0 => Some(ForwardKind::RspIFwdM),
            1 => Some(ForwardKind::RspSFwdM),
            2 => Some(ForwardKind::RspVFwdV),
            _ => None,
        }
    }

    /// The state the responder is left in.
    pub const fn left_in(self) -> LeftIn {
        match self {
            ForwardKind::RspIFwdM => LeftIn::Invalid,
            ForwardKind::RspSFwdM => LeftIn::Shared,
            ForwardKind::RspVFwdV => LeftIn::Unchanged,
        }
    }
}

/// What a snoop response says the responder kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LeftIn {
    /// Nothing.
    Invalid,
    /// A Shared copy.
    Shared,
    /// Whatever it had.
    Unchanged,
}

/// One coherence message. Lines are numbered from 0 within the home agent's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Message<const B: usize> {
    /// Agent to home, request channel.
    Request {
        /// The line.
        line: u32,
        /// What the agent asks.
        kind: RequestKind,
    },
    /// Home to agent, snoop channel.
    Snoop {
        /// The line.
        line: u32,
        /// What the home asks.
        kind: SnoopKind,
        /// The parity of the GOs the home has sent this agent for this line: a snoop whose phase differs
        /// from the agent's count of GOs received follows a GO still in flight, and waits for it.
        phase: bool,
    },
    /// Agent to home, response channel: a snoop response without data.
    SnoopResponse {
        /// The line.
        line: u32,
        /// What the agent had and kept.
        kind: SnoopResponseKind,
    },
    /// Agent to home, response channel: a snoop response forwarding dirty data.
    SnoopResponseData {
        /// The line.
        line: u32,
        /// What the agent kept.
        kind: ForwardKind,
        /// The line's data.
        data: [u8; B],
    },
    /// Home to agent, response channel: GO without data (an eviction's GO-I, or an upgrade's GO-E for a
    /// requester that still holds the data).
    Go {
        /// The line.
        line: u32,
        /// The state granted.
        state: CacheState,
    },
    /// Home to agent, response channel: GO with the line's data.
    GoData {
        /// The line.
        line: u32,
        /// The state granted (I for RdCurr: the data is used once, not cached).
        state: CacheState,
        /// The line's data.
        data: [u8; B],
    },
    /// Home to agent, response channel: GO-I for a dirty eviction, and send the data (CXL GO_WritePull).
    GoWritePull {
        /// The line.
        line: u32,
    },
    /// Agent to home, response channel: the dirty data a GO_WritePull asked for.
    WriteBack {
        /// The line.
        line: u32,
        /// The line's data.
        data: [u8; B],
    },
}

impl<const B: usize> Message<B> {
    /// Every data byte it carries, in order (the model checker renames stored values through it).
    #[cfg(feature = "std")]
    pub(crate) fn visit_data(&mut self, f: &mut impl FnMut(&mut u8)) {
        if let Message::SnoopResponseData { data, .. }
        | Message::GoData { data, .. }
        | Message::WriteBack { data, .. } = self
        {
            data.iter_mut().for_each(f);
        }
    }

    /// The same message about line `to(line)` instead (the model checker renames lines through it).
    #[cfg(feature = "std")]
    pub(crate) fn rename_line(&mut self, to: impl Fn(u32) -> u32) {
        match self {
            Message::Request { line, .. }
            | Message::Snoop { line, .. }
            | Message::SnoopResponse { line, .. }
            | Message::SnoopResponseData { line, .. }
            | Message::Go { line, .. }
            | Message::GoData { line, .. }
            | Message::GoWritePull { line }
            | Message::WriteBack { line, .. } => *line = to(*line),
        }
    }

    /// The line it is about.
    pub const fn line(&self) -> u32 {
        match *self {
            Message::Request { line, .. }
            | Message::Snoop { line, .. }
            | Message::SnoopResponse { line, .. }
            | Message::SnoopResponseData { line, .. }
            | Message::Go { line, .. }
            | Message::GoData { line, .. }
            | Message::GoWritePull { line }
            | Message::WriteBack { line, .. } => line,
        }
    }

    /// The virtual channel it travels on: requests on request, snoops on snoop, everything else (which
    /// both ends always consume) on response.
    pub const fn vc(&self) -> Vc {
        match self {
            Message::Request { .. } => Vc::Request,
            Message::Snoop { .. } => Vc::Snoop,
            _ => Vc::Response,
        }
    }

    /// Its opcode on the wire (section 3.9 of the spec).
    pub const fn opcode(&self) -> u8 {
        match self {
            Message::Request { .. } => super::wire::opcode::REQUEST,
            Message::Snoop { .. } => super::wire::opcode::SNOOP,
            Message::SnoopResponse { .. } => super::wire::opcode::SNOOP_RESPONSE,
            Message::SnoopResponseData { .. } => super::wire::opcode::SNOOP_RESPONSE_DATA,
            Message::Go { .. } | Message::GoWritePull { .. } => super::wire::opcode::GO,
            Message::GoData { .. } => super::wire::opcode::GO_DATA,
            Message::WriteBack { .. } => super::wire::opcode::WRITE_BACK,
        }
    }

    /// Whether it goes from a caching agent to the home (the others go from the home to an agent).
    pub const fn is_to_home(&self) -> bool {
        matches!(
            self,
            Message::Request { .. }
                | Message::SnoopResponse { .. }
                | Message::SnoopResponseData { .. }
                | Message::WriteBack { .. }
        )
    }
}
