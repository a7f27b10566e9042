//! The service on one node: writes placed on the ring and sent to their
//! replicas, selects asked of every node and merged, and this node's
//! answers to other nodes' requests ([`Replica`]).
//!
//! This node's own share of a request is done by a call, not a message
//! (no bytes made and read), so a cluster of one does what the engine
//! alone did.

use crate::msg::{self, FailKind, MatcherSpec, Reply, Request, Written};
use crate::replica::Replica;
use crate::route::{self, Acks, Outcome, Plan};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_node::{KvError, Node, Quorum};
use rill_promql::value::Series;
use rill_promql::{MatchOp, Matcher};
use rill_sensor::Sample;
use rill_tsdb::{Engine, EngineError, WriteReport};
use std::sync::Arc;
use std::time::Instant;

/// How many copies of each series the cluster keeps, and how many must
/// hold a write before it is acknowledged (Riak's `n_val` and `w`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replication {
    pub n_val: u32,
    pub w: Quorum,
}

impl Default for Replication {
    fn default() -> Replication {
        Replication {
            n_val: 3,
            w: Quorum::Quorum,
        }
    }
}

impl Replication {
    /// W as a number of distinct nodes.
    pub fn w(&self) -> u32 {
        self.w
            .resolve(self.n_val, Quorum::Quorum)
            .clamp(1, self.n_val)
    }
}

/// Why a write was not acknowledged.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WriteError {
    /// The write is wrong; sending it again will not help.
    #[error("{0}")]
    Invalid(String),
    /// Not enough replicas took it now (stores behind, a full disk,
    /// nodes unreachable); the same write may be sent again.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Failed(String),
}

/// What a select found, and whether some of the cluster did not answer.
pub struct Selected {
    pub series: Vec<Series>,
    /// Why the answer may lack samples (nodes that did not answer).
    pub partial: Option<String>,
}

pub struct SensorCluster {
    pub(crate) node: Arc<Node>,
    pub(crate) engine: Arc<Engine>,
    pub(crate) replication: Replication,
    /// The owners of each home partition held, at the last handoff round.
    pub(crate) known_owners: std::sync::Mutex<crate::handoff::KnownOwners>,
    /// The ring when the node joined its cluster at start (set by
    /// [`SensorCluster::cluster_attached`]): a home's owners then are its
    /// first known ones. No handoff round runs before.
    pub(crate) start_ring: std::sync::OnceLock<rill_ring::Ring>,
    /// Anti-entropy's counters.
    pub(crate) exchange: crate::exchange::Counters,
}

/// An engine's refusal as a replica reports it: its kind, and words a
/// client may read (a store's own error may name its files: those go to
/// the log only).
pub(crate) fn failure(e: &EngineError) -> (FailKind, String) {
    match e {
        EngineError::Invalid(m) => (FailKind::Invalid, m.clone()),
        EngineError::Busy(_) => (FailKind::Busy, e.to_string()),
        EngineError::Wal(rill_tsdb::wal::WalError::TooLarge(_)) => {
            (FailKind::Invalid, e.to_string())
        }
        EngineError::Store(_) | EngineError::Wal(rill_tsdb::wal::WalError::Io(_)) => {
            tracing::warn!(error = %e, "the sensor stores refuse a write");
            (
                FailKind::Busy,
                "the sensor stores cannot take writes now (a full disk?)".into(),
            )
        }
        other => {
            tracing::error!(error = %other, "a sensor write failed");
            (
                FailKind::Failed,
                "a sensor write failed: see the node's log".into(),
            )
        }
    }
}

impl From<EngineError> for WriteError {
    fn from(e: EngineError) -> WriteError {
        match failure(&e) {
            (FailKind::Invalid, m) => WriteError::Invalid(m),
            (FailKind::Busy, m) => WriteError::Busy(m),
            (FailKind::Failed, m) => WriteError::Failed(m),
        }
    }
}

pub(crate) fn written(r: WriteReport) -> Written {
    Written {
        written: r.written,
        too_old: r.too_old,
        too_new: r.too_new,
        bad_series: r.bad_series,
    }
}

fn report(w: Written) -> WriteReport {
    WriteReport {
        written: w.written,
        too_old: w.too_old,
        too_new: w.too_new,
        bad_series: w.bad_series,
    }
}

/// The matchers of a select as a message carries them.
pub fn specs(matchers: &[Matcher]) -> Vec<MatcherSpec> {
    matchers
        .iter()
        .map(|m| {
            let (op, value) = match &m.op {
                MatchOp::Eq(v) => ("=", v),
                MatchOp::Ne(v) => ("!=", v),
                MatchOp::Re(_, v) => ("=~", v),
                MatchOp::NotRe(_, v) => ("!~", v),
            };
            MatcherSpec {
                label: m.label.clone(),
                op: op.into(),
                value: value.clone(),
            }
        })
        .collect()
}

impl SensorCluster {
    /// The service over `node` and its `engine`; answers other nodes'
    /// sensor requests from now on.
    pub fn start(node: Arc<Node>, engine: Arc<Engine>, replication: Replication) -> Arc<Self> {
        node.vnodes().attach_sensors(Arc::new(Replica {
            engine: engine.clone(),
        }));
        Arc::new(SensorCluster {
            node,
            engine,
            replication,
            known_owners: Default::default(),
            start_ring: std::sync::OnceLock::new(),
            exchange: Default::default(),
        })
    }

    /// The node's cluster runtime has set its view of the cluster (the
    /// ring kept on disk): handoff rounds may run from now on.
    pub fn cluster_attached(&self) {
        let _ = self.start_ring.set(self.node.cluster_view().ring.clone());
    }

    /// This node's engine (what it holds of the cluster's sensor data).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn replication(&self) -> Replication {
        self.replication
    }

    /// Whether this node is the whole cluster (it owns every partition
    /// and knows no other node).
    pub fn alone(&self) -> bool {
        alone(&self.node.cluster_view())
    }

    /// Writes series (keys as [`rill_sensor::Series::key`] gives them,
    /// each in the group `groups` names for it by position) of database
    /// `db`: each home partition's series to the nodes of its preference
    /// list, acknowledged once W distinct nodes hold every one durably.
    /// On an error nothing was acknowledged, though some replicas may
    /// hold some samples: a write is safe to repeat.
    pub fn write_grouped(
        &self,
        db: &str,
        series: &[(String, Vec<Sample>)],
        groups: &[Option<&str>],
        now: i64,
    ) -> Result<WriteReport, WriteError> {
        let view = self.node.cluster_view();
        if alone(&view) {
            return self
                .engine
                .write_grouped(db, series, groups, now)
                .map_err(|e| self.not_acknowledged(&[failure(&e)], true));
        }
        let placing = (0..series.len()).map(|i| {
            groups
                .get(i)
                .copied()
                .flatten()
                .unwrap_or(series[i].0.as_str())
        });
        let plan = route::plan(db, placing, self.replication.n_val, &view.ring, |n| {
            view.is_up(n)
        });
        let mut acks = Acks::new(&plan, self.replication.w());
        let me = &view.me;
        let deadline = Instant::now() + self.node.request_timeout();
        let asks: Vec<(String, VnodeRequest)> = plan
            .messages
            .iter()
            .filter(|(node, _)| node != me)
            .map(|(node, homes)| {
                let bytes =
                    msg::encode_request(&write_request(db, now, &plan, homes, series, groups));
                (node.clone(), VnodeRequest::Sensor(bytes))
            })
            .collect();
        let remote_index: Vec<usize> = (0..plan.messages.len())
            .filter(|&m| &plan.messages[m].0 != me)
            .collect();
        let mut calls = self.node.call_nodes(asks);
        let mut first: Option<WriteReport> = None;
        let mut failures: Vec<(FailKind, String)> = Vec::new();
        if let Some(m) = plan.messages.iter().position(|(node, _)| node == me) {
            let r = self.write_local(db, &plan, &plan.messages[m].1, series, groups, now);
            match r {
                Ok(w) => {
                    first = Some(w);
                    acks.answer(m, true);
                }
                Err(e) => {
                    failures.push(failure(&e));
                    acks.answer(m, false);
                }
            }
        }
        while acks.outcome() == Outcome::Open {
            let Some((tag, reply)) = calls.next(deadline) else {
                break;
            };
            let m = remote_index[tag];
            let node = &plan.messages[m].0;
            match reply {
                VnodeReply::Sensor(bytes) => match msg::decode_reply(&bytes) {
                    Ok(Reply::Written(w)) => {
                        first.get_or_insert(report(w));
                        acks.answer(m, true);
                    }
                    Ok(Reply::Failed { kind, text }) => {
                        failures.push((kind, format!("{node}: {text}")));
                        acks.answer(m, false);
                    }
                    Ok(other) => {
                        tracing::warn!(
                            node,
                            reply = %other.describe(),
                            "a sensor write was answered with something else"
                        );
                        acks.answer(m, false);
                    }
                    Err(e) => {
                        tracing::warn!(node, error = %e, "a malformed sensor answer");
                        acks.answer(m, false);
                    }
                },
                VnodeReply::Failed(e) => {
                    // A replica out of reach or slow is a reason to
                    // retry (Riak answers 503 for an unmet W), not a
                    // failure of the write.
                    let kind = match e {
                        KvError::Busy(_)
                        | KvError::OutOfSpace { .. }
                        | KvError::Unreachable { .. }
                        | KvError::Timeout => FailKind::Busy,
                        _ => FailKind::Failed,
                    };
                    failures.push((kind, format!("{node}: {e}")));
                    acks.answer(m, false);
                }
                other => {
                    tracing::warn!(
                        node,
                        ?other,
                        "a sensor write was answered with something else"
                    );
                    acks.answer(m, false);
                }
            }
        }
        match acks.outcome() {
            Outcome::Done => Ok(first.unwrap_or_default()),
            _ => Err(self.not_acknowledged(&failures, plan.messages.len() == 1)),
        }
    }

    /// Why a write was not acknowledged; `alone`: one node was asked.
    fn not_acknowledged(&self, failures: &[(FailKind, String)], alone: bool) -> WriteError {
        if let Some((_, text)) = failures.iter().find(|(k, _)| *k == FailKind::Invalid) {
            return WriteError::Invalid(text.clone());
        }
        if let ([(kind, why)], true) = (failures, alone) {
            let text = format!("{why}; nothing of this write was acknowledged, retry later");
            return match kind {
                FailKind::Failed => WriteError::Failed(text),
                _ => WriteError::Busy(text),
            };
        }
        let w = self.replication.w();
        let why = if failures.is_empty() {
            "no answer in time".to_string()
        } else {
            failures
                .iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        };
        let text = format!(
            "fewer than w = {w} replicas took the write ({why}); nothing of it was acknowledged, retry later"
        );
        if failures.iter().any(|(k, _)| *k == FailKind::Failed) {
            WriteError::Failed(text)
        } else {
            WriteError::Busy(text)
        }
    }

    /// This node's share of a write, into its engine.
    fn write_local(
        &self,
        db: &str,
        plan: &Plan,
        homes: &[usize],
        series: &[(String, Vec<Sample>)],
        groups: &[Option<&str>],
        now: i64,
    ) -> Result<WriteReport, EngineError> {
        if homes.len() == plan.homes.len() {
            return self.engine.write_grouped(db, series, groups, now);
        }
        let picked: Vec<usize> = homes
            .iter()
            .flat_map(|&h| plan.homes[h].series.iter().copied())
            .collect();
        let some: Vec<(String, Vec<Sample>)> = picked.iter().map(|&i| series[i].clone()).collect();
        let some_groups: Vec<Option<&str>> = picked
            .iter()
            .map(|&i| groups.get(i).copied().flatten())
            .collect();
        self.engine.write_grouped(db, &some, &some_groups, now)
    }
}

/// Whether the node of `view` is the whole cluster.
fn alone(view: &rill_node::replicas::ClusterView) -> bool {
    view.up.iter().all(|n| n == &view.me)
        && view
            .ring
            .partitions()
            .all(|p| view.ring.owner(p) == view.me)
}

/// The write message for the homes `homes` of `plan`.
fn write_request(
    db: &str,
    now: i64,
    plan: &Plan,
    homes: &[usize],
    series: &[(String, Vec<Sample>)],
    groups: &[Option<&str>],
) -> Request {
    Request::Write {
        db: db.to_string(),
        now,
        parts: homes
            .iter()
            .map(|&h| msg::Part {
                home: plan.homes[h].partition,
                series: plan.homes[h]
                    .series
                    .iter()
                    .map(|&i| msg::SeriesSamples {
                        key: series[i].0.clone(),
                        group: groups.get(i).copied().flatten().map(str::to_string),
                        samples: series[i].1.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}
