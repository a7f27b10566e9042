//! Sensor data sent to the nodes that should hold it: Riak's hinted
//! handoff (a fallback's samples, taken while an owner was down) and
//! ownership handoff (a partition's data after the ring gave it to
//! another node), by two rules over the ring as it is now:
//!
//! - a home partition whose owners (the first `n_val` distinct nodes
//!   walking the ring from it) do not include this node goes to each of them, once
//!   every one is up, and leaves this node whole (its shard deleted, no
//!   merge);
//! - a home partition this node owns and holds that gained an owner
//!   since the last round (a join, a leave, a replace) goes to the new
//!   owners, once they are up. The owners a home had when the service
//!   started are its first known ones: an owner gained while the node
//!   was down is not seen by this rule (anti-entropy's: `exchange`).
//!
//! Each owner keeps only the samples it lacks (`Engine::write_missing`),
//! so sending one what it has already costs reads, not copies. A home is
//! dropped only if no write reached it since its series were read; else
//! the next round sends it again. Nothing here waits for a ring change:
//! the ring as it is now says who owns what.

use crate::msg::{self, Reply, Request, SeriesSamples};
use crate::SensorCluster;
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_ring::{Partition, Ring};
use rill_tsdb::Engine;
use std::collections::BTreeMap;
use std::time::Instant;

/// The owners each held home partition had at the last round, by
/// database and home.
pub(crate) type KnownOwners = BTreeMap<(String, u32), Vec<String>>;

/// Series sent in one message at most.
const BATCH_SERIES: usize = 100;
/// Samples sent in one message at most (a few MiB: far below the
/// transport's largest message).
const BATCH_SAMPLES: usize = 250_000;

/// What a round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandoffReport {
    /// Home partitions sent and dropped.
    pub handed_off: usize,
    /// Home partitions sent to owners they gained (and kept).
    pub shared: usize,
    /// Home partitions whose owners are not all up, or that failed or
    /// were written to meanwhile: tried again next round.
    pub waiting: usize,
    pub samples_sent: u64,
}

/// The nodes that keep `home`'s sensor data: the first `n` distinct
/// nodes walking the ring from it (`Ring::distinct_owners`), so every
/// home lives on `n` machines wherever the cluster has them, also where
/// its `n` partitions wrap around to a node named already.
pub fn owners(ring: &Ring, home: u32, n: u32) -> Vec<String> {
    ring.distinct_owners(Partition(home), n)
        .into_iter()
        .map(str::to_string)
        .collect()
}

impl SensorCluster {
    /// One round of handoff at `now` (ns): every home partition this
    /// node holds and does not own, whose owners are all up.
    pub fn hand_off_round(&self, now: i64) -> HandoffReport {
        let mut report = HandoffReport::default();
        let Some(start_ring) = self.start_ring.get() else {
            return report;
        };
        let view = self.node.cluster_view();
        let n = self.replication.n_val;
        let mut known =
            std::mem::take(&mut *self.known_owners.lock().unwrap_or_else(|e| e.into_inner()));
        let mut next = KnownOwners::new();
        for (db, home) in self.engine.homes() {
            let to = owners(&view.ring, home, n);
            if to.contains(&view.me) {
                let key = (db.clone(), home);
                let before = known
                    .remove(&key)
                    .unwrap_or_else(|| owners(start_ring, home, n));
                let gained: Vec<String> =
                    to.iter().filter(|o| !before.contains(o)).cloned().collect();
                let mut learnt = to.clone();
                if !gained.is_empty() {
                    if gained.iter().all(|o| view.is_up(o)) {
                        let sent =
                            send_home(&self.engine, &db, home, now, &mut self.sender(&gained));
                        match sent {
                            Ok(sent) => {
                                report.shared += 1;
                                report.samples_sent += sent;
                                tracing::info!(db, home, to = ?gained, samples = sent, "sensor data sent to new owners");
                            }
                            Err(e) => {
                                tracing::warn!(db, home, error = %e, "sending sensor data to new owners failed; it is tried again");
                                learnt = before;
                                report.waiting += 1;
                            }
                        }
                    } else {
                        learnt = before;
                        report.waiting += 1;
                    }
                }
                next.insert(key, learnt);
                continue;
            }
            if !to.iter().all(|o| view.is_up(o)) {
                report.waiting += 1;
                continue;
            }
            let handed = hand_off_home(&self.engine, &db, home, now, &mut self.sender(&to));
            match handed {
                Ok(Some(sent)) => {
                    report.handed_off += 1;
                    report.samples_sent += sent;
                    tracing::info!(db, home, owners = ?to, samples = sent, "sensor data handed off");
                }
                Ok(None) => report.waiting += 1,
                Err(e) => {
                    report.waiting += 1;
                    tracing::warn!(db, home, error = %e, "a sensor handoff failed; it is tried again");
                }
            }
        }
        *self.known_owners.lock().unwrap_or_else(|e| e.into_inner()) = next;
        report
    }

    /// Sends a request to every node of `to`, returning once each took
    /// it: how a round's handoff reaches the owners.
    fn sender<'a>(&'a self, to: &'a [String]) -> impl FnMut(&Request) -> Result<(), String> + 'a {
        move |req| self.send_to_all(to, msg::encode_request(req))
    }

    /// Sends `bytes` to every node of `to` and waits until each has
    /// taken them.
    fn send_to_all(&self, to: &[String], bytes: Vec<u8>) -> Result<(), String> {
        let mut calls = self.node.call_nodes(
            to.iter()
                .map(|n| (n.clone(), VnodeRequest::Sensor(bytes.clone())))
                .collect(),
        );
        let deadline = Instant::now() + self.node.request_timeout();
        let mut left = to.len();
        while left > 0 {
            let Some((tag, reply)) = calls.next(deadline) else {
                return Err("no answer in time".into());
            };
            match reply {
                VnodeReply::Sensor(b) => match msg::decode_reply(&b) {
                    Ok(Reply::Written(_)) => left -= 1,
                    Ok(Reply::Failed { text, .. }) => return Err(format!("{}: {text}", to[tag])),
                    other => return Err(format!("{}: {other:?}", to[tag])),
                },
                other => return Err(format!("{}: {other:?}", to[tag])),
            }
        }
        Ok(())
    }
}

/// Sends home `home` of `db` of `engine` through `send` (which returns
/// once every owner took a request) and drops it; the samples sent, or
/// `None` when a write came meanwhile (sent again next round). What a
/// round runs for each home it hands off, and what the simulation runs
/// over its network.
pub fn hand_off_home(
    engine: &Engine,
    db: &str,
    home: u32,
    now: i64,
    send: &mut dyn FnMut(&Request) -> Result<(), String>,
) -> Result<Option<u64>, String> {
    let seen = engine.home_writes(db, home);
    let sent = send_home(engine, db, home, now, send)?;
    match engine.drop_home(db, home, seen) {
        Ok(true) => Ok(Some(sent)),
        Ok(false) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Sends every sample of home `home` of `db` of `engine` through `send`
/// in `Handoff` requests; the samples sent.
pub fn send_home(
    engine: &Engine,
    db: &str,
    home: u32,
    now: i64,
    send: &mut dyn FnMut(&Request) -> Result<(), String>,
) -> Result<u64, String> {
    let series = engine.series_of_home(db, home);
    let mut sent = 0u64;
    let mut out: Vec<SeriesSamples> = Vec::new();
    let mut held = 0usize;
    let mut flush = |out: &mut Vec<SeriesSamples>, held: &mut usize| -> Result<(), String> {
        if out.is_empty() {
            return Ok(());
        }
        *held = 0;
        send(&Request::Handoff {
            db: db.to_string(),
            now,
            series: std::mem::take(out),
        })
    };
    for (key, group) in &series {
        let samples = engine
            .read(db, key, i64::MIN, i64::MAX, now)
            .map_err(|e| e.to_string())?;
        sent += samples.len() as u64;
        // A long history goes in pieces: no message is larger than about
        // BATCH_SAMPLES samples (16 bytes each at most).
        for piece in samples.chunks(BATCH_SAMPLES) {
            out.push(SeriesSamples {
                key: key.clone(),
                group: group.clone(),
                samples: piece.to_vec(),
            });
            held += piece.len();
            if held >= BATCH_SAMPLES || out.len() >= BATCH_SERIES {
                flush(&mut out, &mut held)?;
            }
        }
    }
    flush(&mut out, &mut held)?;
    Ok(sent)
}
