//! Lanes: kinds of traffic that must not wait for each other.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// Gossip, failure detection, cluster changes.
    Control,
    /// Requests and replies without large values: gets, heads, acks.
    Small,
    /// Requests and replies carrying values (puts, fetched objects).
    Bulk,
    /// Handoff and repair traffic in the background.
    Handoff,
}

impl Lane {
    pub const ALL: [Lane; 4] = [Lane::Control, Lane::Small, Lane::Bulk, Lane::Handoff];

    /// Bulk values and handoff: moved by the transport's background
    /// threads, at a lower CPU priority than the rest.
    pub fn is_background(self) -> bool {
        matches!(self, Lane::Bulk | Lane::Handoff)
    }

    pub fn code(self) -> u8 {
        match self {
            Lane::Control => 0,
            Lane::Small => 1,
            Lane::Bulk => 2,
            Lane::Handoff => 3,
        }
    }

    pub fn from_code(c: u8) -> Option<Lane> {
        Lane::ALL.get(usize::from(c)).copied()
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lane::Control => "control",
            Lane::Small => "small",
            Lane::Bulk => "bulk",
            Lane::Handoff => "handoff",
        })
    }
}
