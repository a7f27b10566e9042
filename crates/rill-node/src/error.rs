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
    /// Storage failed; nothing was acknowledged.
    #[error("backend error: {0}")]
    Storage(StorageFailure),
    /// A replica's node could not be reached. `sent`: the request had
    /// left (the node went down while it was asked), so it may have been
    /// carried out; else it never left, or (a coordination) the node
    /// never took it. A coordinator may ask another replica instead,
    /// repeating only what is safe to repeat.
    #[error("{node} cannot be reached{why}")]
    Unreachable {
        node: String,
        why: String,
        sent: bool,
    },
    /// Something else failed inside the node or between nodes (a stored
    /// object that does not decode); nothing was acknowledged. The text
    /// names no file.
    #[error("backend error: {0}")]
    Backend(String),
    #[error("timeout")]
    Timeout,
}

/// Seconds a client is asked to wait before retrying a write refused
/// for space (HTTP `Retry-After`, and the PB error's text).
pub const OUT_OF_SPACE_RETRY_SECS: u32 = 2;

/// Why storage failed, in words a client can act on: its kind is kept
/// from the engine to the client's answer, and its text names no file
/// (the node's log has the whole error).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageFailure {
    /// A read or write failed (not for space: that is
    /// [`KvError::OutOfSpace`]).
    #[error("I/O error: {}", io_text(*.kind, *.os_code))]
    Io {
        kind: std::io::ErrorKind,
        os_code: Option<i32>,
    },
    /// A write or sync failed earlier, and the store refuses writes until
    /// the node restarts; `after_disk_full` when that failure was a full
    /// disk.
    #[error("{}", if *.after_disk_full {
        "the storage refuses writes since the disk filled during a sync; free space, then \
         restart the node: a restart recovers what was durably written"
    } else {
        "the storage refuses writes after an I/O failure; the node's log names it, and a \
         restart of the node recovers what was durably written"
    })]
    RefusesWrites { after_disk_full: bool },
    #[error("the storage is locked by another process")]
    Locked,
    /// A stored record or entry failed its checks; other replicas answer.
    #[error("a stored record is damaged")]
    Damaged,
    /// Anything else, in the engine's words.
    #[error("{0}")]
    Other(String),
}

fn io_text(kind: std::io::ErrorKind, os_code: Option<i32>) -> String {
    match os_code {
        Some(code) => std::io::Error::from_raw_os_error(code).to_string(),
        None => std::io::Error::from(kind).to_string(),
    }
}

impl StorageFailure {
    /// An OS error by its kind and code; another (an engine's own) in its
    /// words.
    fn io(e: &std::io::Error) -> StorageFailure {
        match e.raw_os_error() {
            Some(code) => StorageFailure::Io {
                kind: e.kind(),
                os_code: Some(code),
            },
            None => StorageFailure::Other(format!("I/O error: {e}")),
        }
    }
}

impl From<rill_backend::Error> for KvError {
    /// A full disk becomes [`KvError::OutOfSpace`], a busy engine
    /// [`KvError::Busy`]; any other storage error is logged whole and
    /// reaches the client as a [`StorageFailure`] of its kind.
    fn from(e: rill_backend::Error) -> KvError {
        use rill_backend::Error as B;
        let failure = match &e {
            B::Bitcask(b) => match b {
                bitcask::Error::DiskFull { .. } => {
                    return KvError::OutOfSpace {
                        retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
                    }
                }
                bitcask::Error::Io { source, .. } => StorageFailure::io(source),
                bitcask::Error::PreviousIo { cause } => StorageFailure::RefusesWrites {
                    after_disk_full: cause.is_disk_full(),
                },
                bitcask::Error::Locked { .. } => StorageFailure::Locked,
                bitcask::Error::Corrupt { .. } => StorageFailure::Damaged,
                bitcask::Error::Busy(m) => return KvError::Busy(m.clone()),
                other => StorageFailure::Other(other.to_string()),
            },
            B::Corrupt(_) => StorageFailure::Damaged,
            B::Busy(m) => return KvError::Busy(m.clone()),
            B::DiskFull => {
                tracing::error!(error = %e, "storage error");
                return KvError::OutOfSpace {
                    retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
                };
            }
            other => StorageFailure::Other(other.to_string()),
        };
        tracing::error!(error = %e, "storage error");
        KvError::Storage(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store poisoned by a full disk during a sync keeps that kind to the
    /// client's answer; an I/O error keeps its kind and OS code, no path.
    #[test]
    fn a_full_disk_keeps_its_kind_to_the_edge() {
        let path = std::path::PathBuf::from("/data/bitcask/0/000001.data");
        let poisoned = |cause| {
            KvError::from(rill_backend::Error::Bitcask(bitcask::Error::PreviousIo {
                cause: std::sync::Arc::new(cause),
            }))
        };
        assert_eq!(
            poisoned(bitcask::Error::DiskFull { path: path.clone() }),
            KvError::Storage(StorageFailure::RefusesWrites {
                after_disk_full: true
            })
        );
        let eio = || bitcask::Error::Io {
            path: path.clone(),
            source: std::io::Error::from_raw_os_error(5),
        };
        assert_eq!(
            poisoned(eio()),
            KvError::Storage(StorageFailure::RefusesWrites {
                after_disk_full: false
            })
        );
        let e = KvError::from(rill_backend::Error::Bitcask(eio()));
        assert!(
            matches!(
                e,
                KvError::Storage(StorageFailure::Io {
                    os_code: Some(5),
                    ..
                })
            ),
            "{e:?}"
        );
        assert!(!e.to_string().contains("/data"), "{e}");
        assert_eq!(
            KvError::from(rill_backend::Error::Bitcask(bitcask::Error::DiskFull {
                path
            })),
            KvError::OutOfSpace {
                retry_after_secs: OUT_OF_SPACE_RETRY_SECS
            }
        );
    }

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
        let refusing =
            |after_disk_full| KvError::Storage(StorageFailure::RefusesWrites { after_disk_full });
        assert!(refusing(true).to_string().contains("since the disk filled"));
        assert!(refusing(false).to_string().contains("after an I/O failure"));
        let eio = KvError::Storage(StorageFailure::Io {
            kind: std::io::ErrorKind::Other,
            os_code: Some(5),
        });
        assert!(
            eio.to_string().starts_with("backend error: I/O error: "),
            "{eio}"
        );
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
