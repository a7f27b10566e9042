//! Why a request failed, in Riak's terms (the API layer renders Riak's
//! texts).

/// A quorum a request could not meet: Riak's `*_val_unsatisfied` errors,
/// needed and got. The node's own error type carries these as they are.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuorumError {
    #[error("{{r_val_unsatisfied,{need},{got}}}")]
    RUnsatisfied { need: u32, got: u32 },
    #[error("{{pr_val_unsatisfied,{need},{got}}}")]
    PrUnsatisfied { need: u32, got: u32 },
    #[error("{{w_val_unsatisfied,{need},{got}}}")]
    WUnsatisfied { need: u32, got: u32 },
    #[error("{{dw_val_unsatisfied,{need},{got}}}")]
    DwUnsatisfied { need: u32, got: u32 },
    #[error("{{pw_val_unsatisfied,{need},{got}}}")]
    PwUnsatisfied { need: u32, got: u32 },
    /// A put stored on fewer distinct physical nodes than `node_confirms`.
    #[error("{{node_confirms_val_unsatisfied,{need},{got}}}")]
    NodeConfirmsUnsatisfied { need: u32, got: u32 },
    /// A get answered by fewer distinct physical nodes than
    /// `node_confirms` (Riak's words for it on a get).
    #[error("{{insufficient_nodes,{got},need,{need}}}")]
    InsufficientNodes { need: u32, got: u32 },
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoordError {
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    #[error("timeout")]
    Timeout,
    /// A replica refused for load (riak's `overload`).
    #[error("overload")]
    Overload,
    /// Every replica failed; the last one's reason.
    #[error("{0}")]
    Failed(String),
}
