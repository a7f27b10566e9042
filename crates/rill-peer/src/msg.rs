//! Messages between the cluster runtimes of two nodes (docs/format.md,
//! "Peer messages"): a two-byte magic, a version and a kind, then the
//! kind's body. Vnode requests and replies carry `rill-node`'s vnode
//! message bytes; gossip carries the cluster state's bytes. Every decoder
//! refuses what it cannot read whole, and is fuzzed.

const MAGIC: &[u8; 2] = b"RP";
const VERSION: u8 = 1;

/// A message between peers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMsg {
    /// The sender's cluster state (its bytes, `rill_cluster::codec`).
    Gossip(Vec<u8>),
    /// A vnode request (`rill_node::wire`).
    VnodeRequest(Vec<u8>),
    /// A vnode reply (`rill_node::wire`).
    VnodeReply(Vec<u8>),
    /// A node asked to join wants the cluster state; `addr` is where to
    /// answer (it is not a member yet, so no state names its address).
    JoinAsk { id: u64, addr: String },
    /// The answer to a join ask.
    JoinState { id: u64, state: Vec<u8> },
    /// An operator's request for the claimant (JSON).
    AdminRequest { id: u64, json: String },
    /// The claimant's answer (JSON).
    AdminReply { id: u64, json: String },
    /// I am alive (failure detection).
    Ping,
    /// A handoff message (`rill_handoff::codec`).
    Handoff(Vec<u8>),
    /// The sender's bucket types and properties (UTF-8 JSON, stamped
    /// entries: cluster metadata).
    Metadata(Vec<u8>),
    /// The partitions the sender holds data of without owning them (as a
    /// fallback, an old owner, or a next owner), found `age_ms` before it
    /// sent this: tombstones of those partitions are not reaped.
    Holdings { age_ms: u64, partitions: Vec<u32> },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MsgError {
    #[error("not a peer message (bad magic bytes)")]
    Magic,
    #[error("peer message version {0}; this node reads 1")]
    Version(u8),
    #[error("unknown peer message kind {0}")]
    Kind(u8),
    #[error("the peer message ends early")]
    Short,
    #[error("the peer message's text is not UTF-8")]
    Text,
    #[error("bytes after the peer message")]
    Trailing,
}

const GOSSIP: u8 = 1;
const VNODE_REQUEST: u8 = 2;
const VNODE_REPLY: u8 = 3;
const JOIN_ASK: u8 = 4;
const JOIN_STATE: u8 = 5;
const ADMIN_REQUEST: u8 = 6;
const ADMIN_REPLY: u8 = 7;
const PING: u8 = 8;
const HANDOFF: u8 = 9;
const METADATA: u8 = 10;
const HOLDINGS: u8 = 11;

/// The first bytes of a vnode request (or reply) message: its body (a
/// vnode message) is written after them, in the same buffer.
pub fn vnode_prefix(reply: bool) -> [u8; 4] {
    let kind = if reply { VNODE_REPLY } else { VNODE_REQUEST };
    [MAGIC[0], MAGIC[1], VERSION, kind]
}

/// Whether `b` is a vnode request (`Some(false)`) or reply
/// (`Some(true)`), whose body starts at byte 4: read in place, without
/// the copy `decode` makes.
pub fn vnode_kind(b: &[u8]) -> Option<bool> {
    if b.len() < 4 || &b[..2] != MAGIC || b[2] != VERSION {
        return None;
    }
    match b[3] {
        VNODE_REQUEST => Some(false),
        VNODE_REPLY => Some(true),
        _ => None,
    }
}

impl PeerMsg {
    pub fn encode(&self) -> Vec<u8> {
        let listed: Vec<u8>;
        let (kind, id, body): (u8, Option<u64>, &[u8]) = match self {
            PeerMsg::Gossip(b) => (GOSSIP, None, b),
            PeerMsg::VnodeRequest(b) => (VNODE_REQUEST, None, b),
            PeerMsg::VnodeReply(b) => (VNODE_REPLY, None, b),
            PeerMsg::JoinAsk { id, addr } => (JOIN_ASK, Some(*id), addr.as_bytes()),
            PeerMsg::JoinState { id, state } => (JOIN_STATE, Some(*id), state),
            PeerMsg::AdminRequest { id, json } => (ADMIN_REQUEST, Some(*id), json.as_bytes()),
            PeerMsg::AdminReply { id, json } => (ADMIN_REPLY, Some(*id), json.as_bytes()),
            PeerMsg::Ping => (PING, None, &[]),
            PeerMsg::Handoff(b) => (HANDOFF, None, b),
            PeerMsg::Metadata(b) => (METADATA, None, b),
            PeerMsg::Holdings { age_ms, partitions } => {
                listed = partitions.iter().flat_map(|p| p.to_be_bytes()).collect();
                (HOLDINGS, Some(*age_ms), &listed)
            }
        };
        let mut out = Vec::with_capacity(4 + 8 + body.len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(kind);
        if let Some(id) = id {
            out.extend_from_slice(&id.to_be_bytes());
        }
        out.extend_from_slice(body);
        out
    }

    /// A message from its bytes; never panics.
    pub fn decode(b: &[u8]) -> Result<PeerMsg, MsgError> {
        if b.len() < 2 || &b[..2] != MAGIC {
            return Err(MsgError::Magic);
        }
        if b.len() < 4 {
            return Err(MsgError::Short);
        }
        if b[2] != VERSION {
            return Err(MsgError::Version(b[2]));
        }
        let kind = b[3];
        let rest = &b[4..];
        let with_id = |rest: &[u8]| -> Result<(u64, Vec<u8>), MsgError> {
            if rest.len() < 8 {
                return Err(MsgError::Short);
            }
            let id = u64::from_be_bytes(rest[..8].try_into().expect("8"));
            Ok((id, rest[8..].to_vec()))
        };
        let text = |b: Vec<u8>| String::from_utf8(b).map_err(|_| MsgError::Text);
        Ok(match kind {
            GOSSIP => PeerMsg::Gossip(rest.to_vec()),
            VNODE_REQUEST => PeerMsg::VnodeRequest(rest.to_vec()),
            VNODE_REPLY => PeerMsg::VnodeReply(rest.to_vec()),
            JOIN_ASK => {
                let (id, b) = with_id(rest)?;
                PeerMsg::JoinAsk { id, addr: text(b)? }
            }
            JOIN_STATE => {
                let (id, state) = with_id(rest)?;
                PeerMsg::JoinState { id, state }
            }
            ADMIN_REQUEST => {
                let (id, b) = with_id(rest)?;
                PeerMsg::AdminRequest { id, json: text(b)? }
            }
            ADMIN_REPLY => {
                let (id, b) = with_id(rest)?;
                PeerMsg::AdminReply { id, json: text(b)? }
            }
            PING if rest.is_empty() => PeerMsg::Ping,
            PING => return Err(MsgError::Trailing),
            HANDOFF => PeerMsg::Handoff(rest.to_vec()),
            METADATA => PeerMsg::Metadata(rest.to_vec()),
            HOLDINGS => {
                let (age_ms, b) = with_id(rest)?;
                if b.len() % 4 != 0 {
                    return Err(MsgError::Trailing);
                }
                let partitions = b
                    .chunks_exact(4)
                    .map(|c| u32::from_be_bytes(c.try_into().expect("4")))
                    .collect();
                PeerMsg::Holdings { age_ms, partitions }
            }
            other => return Err(MsgError::Kind(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_cuts_are_refused() {
        let all = [
            PeerMsg::Gossip(b"RILLCLST".to_vec()),
            PeerMsg::VnodeRequest(b"RV..".to_vec()),
            PeerMsg::VnodeReply(vec![]),
            PeerMsg::JoinAsk {
                id: 7,
                addr: "127.0.0.1:8099".into(),
            },
            PeerMsg::JoinState {
                id: 7,
                state: vec![1, 2],
            },
            PeerMsg::AdminRequest {
                id: u64::MAX,
                json: "{\"op\":\"plan\"}".into(),
            },
            PeerMsg::AdminReply {
                id: 1,
                json: "{}".into(),
            },
            PeerMsg::Ping,
            PeerMsg::Handoff(b"RH".to_vec()),
            PeerMsg::Metadata(b"{}".to_vec()),
            PeerMsg::Holdings {
                age_ms: 250,
                partitions: vec![0, 7, u32::MAX],
            },
            PeerMsg::Holdings {
                age_ms: 0,
                partitions: vec![],
            },
        ];
        for m in &all {
            let b = m.encode();
            assert_eq!(PeerMsg::decode(&b).as_ref(), Ok(m));
            for cut in 0..4 {
                assert!(PeerMsg::decode(&b[..cut]).is_err());
            }
        }
        let b = PeerMsg::JoinAsk {
            id: 1,
            addr: String::new(),
        }
        .encode();
        assert_eq!(PeerMsg::decode(&b[..11]), Err(MsgError::Short));
        let mut v = b.clone();
        v[2] = 2;
        assert_eq!(PeerMsg::decode(&v), Err(MsgError::Version(2)));
        let mut k = b;
        k[3] = 99;
        assert_eq!(PeerMsg::decode(&k), Err(MsgError::Kind(99)));
        let mut bad = PeerMsg::AdminReply {
            id: 1,
            json: "x".into(),
        }
        .encode();
        *bad.last_mut().unwrap() = 0xff;
        assert_eq!(PeerMsg::decode(&bad), Err(MsgError::Text));
        let mut odd = PeerMsg::Holdings {
            age_ms: 1,
            partitions: vec![1],
        }
        .encode();
        odd.push(0);
        assert_eq!(PeerMsg::decode(&odd), Err(MsgError::Trailing));
    }
}
