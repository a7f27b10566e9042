//! What a request can fail with, worded as Riak words it (clients and
//! operators match on these texts: riak_pb's protocol definitions and
//! riak_kv's sources).

/// An Erlang binary as Riak prints it with `~p`: `<<"abc">>` when
/// printable, `<<1,2,3>>` otherwise.
pub fn erl_bin(b: &[u8]) -> String {
    let printable = b.iter().all(|c| (0x20..0x7f).contains(c));
    if printable {
        let escaped: String = String::from_utf8_lossy(b)
            .chars()
            .flat_map(|c| match c {
                '"' => vec!['\\', '"'],
                '\\' => vec!['\\', '\\'],
                c => vec![c],
            })
            .collect();
        format!("<<\"{escaped}\">>")
    } else {
        let parts: Vec<String> = b.iter().map(|c| c.to_string()).collect();
        format!("<<{}>>", parts.join(","))
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvError {
    /// A request Riak refuses before doing anything, e.g. "Bucket cannot
    /// be zero-length".
    #[error("{0}")]
    BadRequest(String),
    /// The bucket type does not exist or is not active (KV operations).
    #[error("no_type")]
    NoType,
    /// The bucket type does not exist (listing and properties).
    #[error("No bucket-type named '{0}'")]
    NoSuchType(String),
    #[error("Invalid bucket type: {}", erl_bin(.0.as_bytes()))]
    InvalidType(String),
    #[error("{{n_val_violation,{0}}}")]
    NValViolation(u32),
    #[error("{{{name}_val_violation,{value}}}")]
    QuorumViolation { name: &'static str, value: u32 },
    /// R, PR, W, DW or PW could not be met (Riak's texts).
    #[error(transparent)]
    Quorum(#[from] rill_coord::QuorumError),
    #[error("{{insufficient_vnodes,{have},need,{need}}}")]
    InsufficientVnodes { have: u32, need: u32 },
    /// A coverage query (list buckets, list keys, 2i) finds every replica
    /// of some keys on nodes that are down (riak_core's coverage plan
    /// error).
    #[error("insufficient_vnodes_available")]
    NoCoverage,
    /// if_none_match and the key exists.
    #[error("match_found")]
    MatchFound,
    /// if_not_modified and the stored clock differs.
    #[error("modified")]
    Modified,
    /// if_not_modified and nothing is stored.
    #[error("notfound")]
    NotFound,
    /// A write refused by validation (2i fields).
    #[error("{{precommit_fail,[{0}]}}")]
    PrecommitFail(String),
    #[error(
        "{{too_large,{size_bytes}}}: the object exceeds object.size.maximum = {max_bytes} bytes"
    )]
    TooLarge { size_bytes: usize, max_bytes: usize },
    #[error("{{too_many_siblings,{0}}}: the write would exceed object.siblings.maximum; resolve the siblings")]
    TooManySiblings(usize),
    #[error("{0}")]
    Props(String),
    /// The opaque causal context a client sent does not decode.
    #[error("malformed vclock: {0}")]
    BadVclock(String),
    /// A data type request refused; the text is Riak's.
    #[error("{0}")]
    Datatype(String),
    /// The node's disk is full (or holds back its last headroom for
    /// deletes and merges): writes are refused at once, reads and deletes
    /// go on, and writes resume by themselves once space returns.
    #[error(
        "out_of_space: the node's disk is full; reads and deletes still work, and writes \
         resume once deletes and merges free space (retry after {retry_after_secs} s)"
    )]
    OutOfSpace { retry_after_secs: u32 },
    /// The node is too busy for the request now (a listing overrun by
    /// writes); retrying later may succeed.
    #[error("busy: {0}")]
    Busy(String),
    /// Storage failed; nothing was acknowledged. The text is for clients
    /// and names no file (the node's log has the whole error).
    #[error("backend error: {0}")]
    Backend(String),
    #[error("timeout")]
    Timeout,
}

/// Seconds a client is asked to wait before retrying a write refused
/// for space (HTTP `Retry-After`, and the PB error's text).
pub const OUT_OF_SPACE_RETRY_SECS: u32 = 2;

impl From<rill_backend::Error> for KvError {
    /// A full disk becomes [`KvError::OutOfSpace`]; any other storage
    /// error is logged whole and reaches the client without file names.
    fn from(e: rill_backend::Error) -> KvError {
        use rill_backend::Error as B;
        let client_text = match &e {
            B::Bitcask(b) => match b {
                bitcask::Error::DiskFull { .. } => {
                    return KvError::OutOfSpace {
                        retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
                    }
                }
                bitcask::Error::Io { source, .. } => format!("I/O error: {source}"),
                bitcask::Error::PreviousIo { .. } => "the storage refuses writes after an I/O \
                    failure; the node's log names it, and a restart of the node recovers \
                    what was durably written"
                    .to_string(),
                bitcask::Error::Locked { .. } => "the storage is locked by another process".into(),
                bitcask::Error::Corrupt { .. } => "a stored record is damaged".into(),
                bitcask::Error::Busy(m) => return KvError::Busy(m.clone()),
                other => other.to_string(),
            },
            B::Corrupt(_) => "a stored entry is damaged".into(),
            B::Busy(m) => return KvError::Busy(m.clone()),
            B::DiskFull => {
                tracing::error!(error = %e, "storage error");
                return KvError::OutOfSpace {
                    retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
                };
            }
            other => other.to_string(),
        };
        tracing::error!(error = %e, "storage error");
        KvError::Backend(client_text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn riak_texts() {
        assert_eq!(KvError::NValViolation(3).to_string(), "{n_val_violation,3}");
        assert_eq!(
            KvError::Quorum(rill_coord::QuorumError::RUnsatisfied { need: 2, got: 1 }).to_string(),
            "{r_val_unsatisfied,2,1}"
        );
        assert_eq!(
            KvError::InsufficientVnodes { have: 1, need: 2 }.to_string(),
            "{insufficient_vnodes,1,need,2}"
        );
        assert_eq!(
            KvError::InvalidType("x".into()).to_string(),
            "Invalid bucket type: <<\"x\">>"
        );
        assert_eq!(erl_bin(&[1, 2]), "<<1,2>>");
        assert_eq!(
            KvError::QuorumViolation {
                name: "r",
                value: 9
            }
            .to_string(),
            "{r_val_violation,9}"
        );
    }
}
