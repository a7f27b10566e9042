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
    #[error("{{r_val_unsatisfied,{need},{got}}}")]
    RUnsatisfied { need: u32, got: u32 },
    #[error("{{pr_val_unsatisfied,{need},{got}}}")]
    PrUnsatisfied { need: u32, got: u32 },
    #[error("{{w_val_unsatisfied,{need},{got}}}")]
    WUnsatisfied { need: u32, got: u32 },
    #[error("{{pw_val_unsatisfied,{need},{got}}}")]
    PwUnsatisfied { need: u32, got: u32 },
    #[error("{{dw_val_unsatisfied,{need},{got}}}")]
    DwUnsatisfied { need: u32, got: u32 },
    #[error("{{insufficient_vnodes,{have},need,{need}}}")]
    InsufficientVnodes { have: u32, need: u32 },
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
    /// Storage failed (a full disk among others); nothing was acknowledged.
    #[error("backend error: {0}")]
    Backend(String),
    #[error("timeout")]
    Timeout,
}

impl From<rill_backend::Error> for KvError {
    fn from(e: rill_backend::Error) -> KvError {
        KvError::Backend(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn riak_texts() {
        assert_eq!(KvError::NValViolation(3).to_string(), "{n_val_violation,3}");
        assert_eq!(
            KvError::RUnsatisfied { need: 2, got: 1 }.to_string(),
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
