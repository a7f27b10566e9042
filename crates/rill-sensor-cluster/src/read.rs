//! Reads that every node answers for its share: a select (a digest
//! read), the series a set of matchers selects, the databases.
//!
//! A select is a digest read (`digest_read`): the others send digests,
//! and samples only where they differ from this node's.

use crate::digest_read::{DigestRead, LocalMine};
use crate::merge::Merged;
use crate::msg::{self, FailKind, Reply, Request};
use crate::service::{specs, Selected, SensorCluster};
use rill_node::replicas::ClusterView;
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_promql::eval::Source;
use rill_promql::Matcher;
use rill_tsdb::prom_source::PromSource;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// Requests on their way to other nodes.
struct Asked {
    view: Arc<ClusterView>,
    calls: rill_node::NodeCalls,
    /// The nodes asked, by the tag of their call.
    asked: Vec<String>,
    /// Nodes that may hold sensor data, not asked: down.
    down: Vec<String>,
}

/// The nodes whose answers a read lacks (down, not answering in time,
/// failing), and the view they were asked in.
struct Missing {
    view: Arc<ClusterView>,
    nodes: BTreeSet<String>,
}

impl SensorCluster {
    /// The series `matchers` select with their samples from `mint` to
    /// `maxt` ms, from every node that may hold some, merged (a sample
    /// several replicas hold, once): a digest read (module doc).
    pub fn select(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        now: i64,
    ) -> Result<Selected, String> {
        let asked = self.ask_others(&Request::SelectDigests {
            matchers: specs(matchers),
            mint,
            maxt,
            now,
        });
        let src = PromSource {
            engine: &self.engine,
            now,
            budget: None,
            one_core: false,
        };
        let local = src.select(matchers, mint, maxt)?;
        let mut plan = DigestRead::default();
        let mut missing = {
            let mut mine = LocalMine::new(&self.engine, now, (mint, maxt), &local);
            self.gather(asked, |node, reply| match reply {
                Reply::SeriesDigests { homes, series } => {
                    plan.offer(node, &homes, series, (mint, maxt), &mut mine);
                    true
                }
                _ => false,
            })?
        };
        let mut merged = Merged::default();
        merged.add_series(local);
        // Each round asks the nodes still owing samples; a node that
        // does not send them is as one that did not answer, and what it
        // offered is asked of another node that offered the same.
        loop {
            let fetches = plan.fetches();
            if fetches.is_empty() {
                break;
            }
            let requests = fetches
                .into_iter()
                .map(|(node, items)| (node, Request::SelectRanges { items, now }))
                .collect();
            let asked = self.ask_each(missing.view.clone(), requests);
            let failed = self.gather(asked, |node, reply| match reply {
                Reply::Series(found) => {
                    merged.add_found(found);
                    plan.fetched(node);
                    true
                }
                _ => false,
            })?;
            for node in failed.nodes {
                plan.failed(&node);
                missing.nodes.insert(node);
            }
        }
        Ok(Selected {
            series: merged.into_series(),
            partial: self.partial(&missing),
        })
    }

    /// The series (every database) that one of `sets` selects, whatever
    /// their samples' times, sorted, each once; and why the answer may
    /// lack some, if it may.
    pub fn series(
        &self,
        sets: &[Vec<Matcher>],
    ) -> Result<(Vec<rill_sensor::Series>, Option<String>), String> {
        let asked = self.ask_others(&Request::Keys {
            sets: sets.iter().map(|m| specs(m)).collect(),
        });
        let mut keys: BTreeSet<String> = crate::replica::local_keys(&self.engine, sets)
            .into_iter()
            .collect();
        let missing = self.gather(asked, |_, reply| match reply {
            Reply::Keys(k) => {
                keys.extend(k);
                true
            }
            _ => false,
        })?;
        let series = keys
            .iter()
            .filter_map(|k| rill_sensor::Series::parse_key(k))
            .collect();
        Ok((series, self.partial(&missing)))
    }

    /// The databases of every node, sorted, each once; and why the answer
    /// may lack some, if it may.
    pub fn databases(&self) -> Result<(Vec<String>, Option<String>), String> {
        if self.alone() {
            return Ok((self.engine.databases(), None));
        }
        let asked = self.ask_others(&Request::Databases);
        let mut names: BTreeSet<String> = self.engine.databases().into_iter().collect();
        let missing = self.gather(asked, |_, reply| match reply {
            Reply::Keys(k) => {
                names.extend(k);
                true
            }
            _ => false,
        })?;
        Ok((names.into_iter().collect(), self.partial(&missing)))
    }

    /// Asks `request` of every other node that may hold sensor data
    /// (owners of partitions and nodes up); this node's share is the
    /// caller's to do meanwhile.
    fn ask_others(&self, request: &Request) -> Asked {
        let view = self.node.cluster_view();
        let mut nodes: BTreeSet<String> = view
            .ring
            .partitions()
            .map(|p| view.ring.owner(p).to_string())
            .collect();
        nodes.extend(view.up.iter().cloned());
        let (up, down): (Vec<String>, Vec<String>) = nodes.into_iter().partition(|n| view.is_up(n));
        let bytes = msg::encode_request(request);
        let requests = up
            .into_iter()
            .filter(|n| n != &view.me)
            .map(|n| (n, VnodeRequest::Sensor(bytes.clone())))
            .collect();
        self.ask_encoded(view, requests, down)
    }

    /// Asks each node its request.
    fn ask_each(&self, view: Arc<ClusterView>, requests: Vec<(String, Request)>) -> Asked {
        let requests = requests
            .into_iter()
            .map(|(n, r)| (n, VnodeRequest::Sensor(msg::encode_request(&r))))
            .collect();
        self.ask_encoded(view, requests, Vec::new())
    }

    fn ask_encoded(
        &self,
        view: Arc<ClusterView>,
        requests: Vec<(String, VnodeRequest)>,
        down: Vec<String>,
    ) -> Asked {
        let asked = requests.iter().map(|(n, _)| n.clone()).collect();
        Asked {
            view,
            calls: self.node.call_nodes(requests),
            asked,
            down,
        }
    }

    /// Gives each answer of `asked` to `take` with the node that sent it
    /// (false: not the answer asked for); answers the nodes missing (down
    /// or not answering in time). A replica that calls the request
    /// invalid fails it.
    fn gather(
        &self,
        asked: Asked,
        mut take: impl FnMut(&str, Reply) -> bool,
    ) -> Result<Missing, String> {
        let Asked {
            view,
            mut calls,
            asked,
            down,
        } = asked;
        let deadline = Instant::now() + self.node.request_timeout();
        let mut missing: BTreeSet<String> = asked.iter().cloned().collect();
        while !missing.is_empty() {
            let Some((tag, reply)) = calls.next(deadline) else {
                break;
            };
            let node = &asked[tag];
            match reply {
                VnodeReply::Sensor(bytes) => match msg::decode_reply(&bytes) {
                    Ok(Reply::Failed {
                        kind: FailKind::Invalid,
                        text,
                    }) => return Err(text),
                    Ok(reply) => {
                        // Described before it is taken, in a few words:
                        // a Debug of a month of samples costs more than
                        // the query.
                        let what = reply.describe();
                        if take(node, reply) {
                            missing.remove(node);
                        } else {
                            tracing::warn!(node, reply = %what, "a sensor request failed");
                        }
                    }
                    Err(e) => tracing::warn!(node, error = %e, "a malformed sensor answer"),
                },
                other => tracing::warn!(node, ?other, "a sensor request failed"),
            }
        }
        missing.extend(down);
        Ok(Missing {
            view,
            nodes: missing,
        })
    }

    /// Why an answer may lack samples when `missing` did not answer, if
    /// it may.
    fn partial(&self, missing: &Missing) -> Option<String> {
        crate::merge::partial(&missing.view.ring, self.replication, &missing.nodes)
    }
}
