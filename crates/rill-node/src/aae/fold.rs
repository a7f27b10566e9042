//! Riak 3's aae_fold queries over the whole cluster, answered from the
//! trees: each preference list of an n_val asked once, of the first of
//! its partitions whose owner is up, and the answers merged (trees by
//! XOR: the lists hold different keys). `merge_root_nval`,
//! `merge_branch_nval`, `fetch_clocks_nval` (riak_kv_clusteraae_fsm).

use super::Aae;
use crate::error::KvError;
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use rill_aae::{Answer, Ask, IndexN, BRANCHES, SEGMENTS_PER_BRANCH};
use rill_backend::BKey;
use rill_object::VClock;
use rill_ring::{Partition, PreflistEntry};
use std::time::{Duration, Instant};

/// How long the replicas of a fold may take.
const FOLD_TIMEOUT: Duration = Duration::from_secs(600);

/// A fold's question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FoldQuery {
    /// The root of every tree of this n_val, merged.
    MergeRoot { n_val: u32 },
    /// These branches of every tree of this n_val, merged.
    MergeBranches { n_val: u32, branches: Vec<u32> },
    /// The keys (and clocks) of these segments in every tree of this
    /// n_val.
    FetchClocks { n_val: u32, segments: Vec<u32> },
}

/// A fold's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum FoldAnswer {
    /// 4,096 branch hashes.
    Root(Vec<u32>),
    /// Each asked branch with its 256 segment hashes.
    Branches(Vec<(u32, Vec<u32>)>),
    Clocks(Vec<(BKey, VClock)>),
}

impl Aae {
    /// Runs a fold over the cluster's trees (blocking: waits for other
    /// nodes' vnodes).
    pub fn fold(&self, q: &FoldQuery) -> Result<FoldAnswer, KvError> {
        let view = self.replicas.view();
        let size = view.ring.size();
        let n_val = match q {
            FoldQuery::MergeRoot { n_val }
            | FoldQuery::MergeBranches { n_val, .. }
            | FoldQuery::FetchClocks { n_val, .. } => *n_val,
        };
        if n_val == 0 || n_val > size.min(255) {
            return Err(KvError::BadRequest(format!(
                "n_val {n_val} is not between 1 and the ring size ({size})"
            )));
        }
        if let FoldQuery::MergeBranches { branches, .. } = q {
            if let Some(b) = branches.iter().find(|b| **b as usize >= BRANCHES) {
                return Err(KvError::BadRequest(format!(
                    "branch {b} is out of range (a tree has {BRANCHES})"
                )));
            }
        }
        let mut asks = Vec::with_capacity(size as usize);
        for first in 0..size {
            let index_n = IndexN {
                first,
                n: n_val as u8,
            };
            let Some(p) = index_n
                .partitions(size)
                .find(|p| view.is_up(view.ring.owner(Partition(*p))))
            else {
                return Err(KvError::Backend(format!(
                    "no replica of the preference list at partition {first} can be reached"
                )));
            };
            let e = PreflistEntry {
                partition: Partition(p),
                node: view.ring.owner(Partition(p)).to_string(),
                primary: true,
            };
            let request = match q {
                FoldQuery::MergeRoot { .. } => VnodeRequest::Aae {
                    index_n,
                    ask: Ask::Root,
                },
                FoldQuery::MergeBranches { branches, .. } => VnodeRequest::Aae {
                    index_n,
                    ask: Ask::Branches(branches.clone()),
                },
                FoldQuery::FetchClocks { segments, .. } => VnodeRequest::AaeClocks {
                    index_n,
                    segments: segments.clone(),
                },
            };
            asks.push((e, request));
        }
        let answers = self
            .replicas
            .ask_all(asks, Instant::now() + FOLD_TIMEOUT, || true)
            .ok_or(KvError::Timeout)?;
        let mut root = vec![0u32; BRANCHES];
        let mut branches: Vec<(u32, Vec<u32>)> = match q {
            FoldQuery::MergeBranches { branches, .. } => branches
                .iter()
                .map(|b| (*b, vec![0; SEGMENTS_PER_BRANCH]))
                .collect(),
            _ => Vec::new(),
        };
        let mut clocks = Vec::new();
        for a in answers {
            match a {
                VnodeReply::Aae(Some(Answer::Root(r))) => {
                    for (x, y) in root.iter_mut().zip(r) {
                        *x ^= y;
                    }
                }
                VnodeReply::Aae(Some(Answer::Branches(list))) => {
                    for (id, segs) in list {
                        if let Some((_, acc)) = branches.iter_mut().find(|(b, _)| *b == id) {
                            for (x, y) in acc.iter_mut().zip(segs) {
                                *x ^= y;
                            }
                        }
                    }
                }
                VnodeReply::Clocks(list) => clocks.extend(list),
                VnodeReply::Aae(None) => {
                    return Err(KvError::Busy(
                        "a replica's anti-entropy trees are not built yet (or tictacaae is passive there): try again later".into(),
                    ))
                }
                VnodeReply::Failed(e) => return Err(e),
                other => {
                    return Err(KvError::Backend(format!(
                        "unexpected answer to a fold: {other:?}"
                    )))
                }
            }
        }
        Ok(match q {
            FoldQuery::MergeRoot { .. } => FoldAnswer::Root(root),
            FoldQuery::MergeBranches { .. } => FoldAnswer::Branches(branches),
            FoldQuery::FetchClocks { .. } => {
                clocks.sort_by(|a, b| {
                    (&a.0.bucket_type, &a.0.bucket, &a.0.key).cmp(&(
                        &b.0.bucket_type,
                        &b.0.bucket,
                        &b.0.key,
                    ))
                });
                FoldAnswer::Clocks(clocks)
            }
        })
    }
}
