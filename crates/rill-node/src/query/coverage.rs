//! Coverage queries across a cluster (list buckets, list keys, secondary
//! indexes), as riak_core's coverage plans: every partition is read at
//! its owner when the owner is up, and for key listings each key is
//! reported by one vnode only (the first of its preference list whose
//! owner is up, by a filter on the key's first partition), so keys
//! stream without a set of those seen. A cluster of one reads its own
//! vnodes directly (`listing`, `index_scan`).

use crate::error::KvError;
use crate::vnode::msg::{KeysQuery, VnodeReply, VnodeRequest};
use rill_backend::{IndexQuery, Term};
use rill_ring::{Partition, PreflistEntry};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// A round of a sorted key scan: the keys, and the bound up to which
/// they are complete.
pub(crate) type KeysRound = (BTreeSet<Vec<u8>>, Option<Vec<u8>>);

/// A page of index entries, and whether it is full.
pub(crate) type EntriesPage = (Vec<(Term, Vec<u8>)>, bool);

/// Keys asked of one vnode at a time.
pub(crate) const KEYS_PAGE: u32 = 10_000;

impl super::Queries {
    /// Whether this node owns every partition (a cluster of one): then
    /// its own vnodes answer coverage queries.
    pub(crate) fn owns_all(&self) -> bool {
        let view = self.replicas.view();
        view.ring
            .partitions()
            .all(|p| view.ring.owner(p) == view.me)
    }

    /// Each partition at its owner, when the owner is up. A partition
    /// whose owner is down is covered by the next partitions (which
    /// hold replicas of its keys); when all `n` partitions holding some
    /// keys have their owners down, the query cannot be answered whole:
    /// an error, as riak_core's coverage plan gives, never a short answer.
    pub(crate) fn coverage(&self, n: u32) -> Result<Vec<PreflistEntry>, KvError> {
        let view = self.replicas.view();
        plan_keys(&view, n)?;
        Ok(view
            .ring
            .partitions()
            .filter(|p| view.is_up(view.ring.owner(*p)))
            .map(|p| PreflistEntry {
                partition: p,
                node: view.ring.owner(p).to_string(),
                primary: true,
            })
            .collect())
    }

    /// The n_val of a bucket (of its type's defaults for an empty
    /// bucket name), for a coverage plan.
    pub(crate) fn coverage_n(&self, t: &[u8], bucket: &[u8]) -> Result<u32, KvError> {
        let t: &[u8] = if t.is_empty() { b"default" } else { t };
        Ok(crate::params::n_val(&self.buckets.props_for_kv(t, bucket)?))
    }

    /// For keys of n_val `n`: which vnode reports the keys starting at
    /// each partition (the first of the n whose owner is up), grouped;
    /// an error when all n are down for some partition.
    pub(crate) fn key_plan(&self, n: u32) -> Result<Vec<(PreflistEntry, Vec<u32>)>, KvError> {
        plan_keys(&self.replicas.view(), n)
    }

    /// One request to one vnode, waiting for its answer (another node's
    /// within the request timeout).
    pub(crate) fn ask_one(
        &self,
        e: &PreflistEntry,
        request: VnodeRequest,
    ) -> Result<VnodeReply, KvError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let reply = match self.replicas.ask(e, request, 0, &tx) {
            Some(r) => r,
            None => {
                let deadline = Instant::now() + self.request_timeout;
                self.replicas
                    .wait_one(&mut rx, deadline)
                    .ok_or(KvError::Timeout)?
            }
        };
        match reply {
            VnodeReply::Failed(err) => Err(err),
            r => Ok(r),
        }
    }

    /// The buckets of a type, from every partition's owner.
    pub(crate) fn cover_buckets(
        &self,
        t: &[u8],
        deadline: Option<Instant>,
    ) -> Result<BTreeSet<Vec<u8>>, KvError> {
        let mut out = BTreeSet::new();
        for e in self.coverage(self.coverage_n(t, b"")?)? {
            if deadline.is_some_and(|d| Instant::now() > d) {
                return Err(KvError::Timeout);
            }
            let request = VnodeRequest::Buckets {
                bucket_type: t.to_vec(),
            };
            match self.ask_one(&e, request)? {
                VnodeReply::Buckets(list) => out.extend(list),
                other => return Err(wrong_reply(other)),
            }
        }
        Ok(out)
    }

    /// Keys of a bucket in `lo..=hi` past `after`, each once, handed to
    /// `take` (in order within each vnode's share) until it returns false.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cover_keys(
        &self,
        t: &[u8],
        bucket: &[u8],
        n_val: u32,
        lo: &[u8],
        hi: Option<&[u8]>,
        deadline: Option<Instant>,
        take: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), KvError> {
        let size = self.replicas.view().ring.size();
        for (e, firsts) in self.key_plan(n_val)? {
            let mut after: Option<Vec<u8>> = None;
            loop {
                if deadline.is_some_and(|d| Instant::now() > d) {
                    return Err(KvError::Timeout);
                }
                let q = KeysQuery {
                    bucket_type: t.to_vec(),
                    bucket: bucket.to_vec(),
                    lo: lo.to_vec(),
                    hi: hi.map(<[u8]>::to_vec),
                    after: after.take(),
                    limit: KEYS_PAGE,
                    first_of: Some((size, firsts.clone())),
                };
                let (keys, more) = match self.ask_one(&e, VnodeRequest::Keys(Box::new(q)))? {
                    VnodeReply::Keys { keys, more } => (keys, more),
                    other => return Err(wrong_reply(other)),
                };
                for k in &keys {
                    if !take(k) {
                        return Ok(());
                    }
                }
                match (more, keys.last()) {
                    (true, Some(last)) => after = Some(last.clone()),
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// One round of a sorted key scan: the smallest `page` keys of each
    /// owner past `cursor`, and the bound up to which the merge of them
    /// is complete (`None`: every owner gave all it had).
    pub(crate) fn cover_keys_round(&self, q: &KeysQuery) -> Result<KeysRound, KvError> {
        let mut round = BTreeSet::new();
        let mut bound: Option<Vec<u8>> = None;
        for e in self.coverage(self.coverage_n(&q.bucket_type, &q.bucket)?)? {
            match self.ask_one(&e, VnodeRequest::Keys(Box::new(q.clone())))? {
                VnodeReply::Keys { keys, more } => {
                    if let (true, Some(last)) = (more, keys.last()) {
                        if bound.as_ref().is_none_or(|b| last < b) {
                            bound = Some(last.clone());
                        }
                    }
                    round.extend(keys);
                }
                other => return Err(wrong_reply(other)),
            }
        }
        Ok((round, bound))
    }

    /// One page of index entries from the owner of a partition.
    pub(crate) fn cover_index_page(
        &self,
        e: &PreflistEntry,
        query: &IndexQuery,
        page: u32,
    ) -> Result<EntriesPage, KvError> {
        let request = VnodeRequest::IndexPage {
            query: query.clone(),
            page,
        };
        match self.ask_one(e, request)? {
            VnodeReply::Entries { entries, filled } => Ok((entries, filled)),
            other => Err(wrong_reply(other)),
        }
    }
}

/// [`Node::key_plan`] over one view of the cluster.
fn plan_keys(
    view: &crate::replicas::ClusterView,
    n: u32,
) -> Result<Vec<(PreflistEntry, Vec<u32>)>, KvError> {
    let size = view.ring.size();
    let mut plan: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for first in 0..size {
        let at = (0..n.clamp(1, size))
            .map(|i| (first + i) % size)
            .find(|p| view.is_up(view.ring.owner(Partition(*p))))
            .ok_or(KvError::NoCoverage)?;
        plan.entry(at).or_default().push(first);
    }
    Ok(plan
        .into_iter()
        .map(|(p, firsts)| {
            let e = PreflistEntry {
                partition: Partition(p),
                node: view.ring.owner(Partition(p)).to_string(),
                primary: true,
            };
            (e, firsts)
        })
        .collect())
}

fn wrong_reply(r: VnodeReply) -> KvError {
    tracing::error!(
        ?r,
        "a vnode answered a coverage request with the wrong reply"
    );
    KvError::Backend("internal error: a replica answered out of turn".into())
}

#[cfg(test)]
mod tests {
    use crate::error::KvError;
    use crate::replicas::ClusterView;
    use rill_ring::Ring;

    /// A coverage plan needs, for every partition, one of the n
    /// partitions holding its keys with its owner up; else the query
    /// fails instead of giving a short answer.
    #[test]
    fn coverage_needs_a_replica_of_every_key_up() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::memory_node(dir.path());
        crate::testing::put_v(&n);
        let me = n.nodename().to_string();
        // Eight partitions owned me, a, b, me, a, b, me, a.
        let names = [me.clone(), "a".into(), "b".into()];
        let owners: Vec<String> = (0..8).map(|i| names[i % 3].clone()).collect();
        let view = |up: &[&str]| ClusterView {
            me: me.clone(),
            ring: Ring::new(owners.clone()).unwrap(),
            up: up.iter().map(|s| s.to_string()).collect(),
            moving: Default::default(),
        };
        n.set_cluster_view(view(&[&me, "a", "b"]));
        assert_eq!(n.queries.coverage(1).unwrap().len(), 8);
        // a and b down: partitions 1 and 2 together hold no replica up.
        n.set_cluster_view(view(&[&me]));
        assert!(matches!(n.queries.coverage(1), Err(KvError::NoCoverage)));
        assert!(matches!(n.queries.key_plan(2), Err(KvError::NoCoverage)));
        let plan = n.queries.key_plan(3).unwrap();
        assert_eq!(plan.iter().map(|(_, f)| f.len()).sum::<usize>(), 8);
        assert!(plan.iter().all(|(e, _)| e.node == me));
        // Through the node's API: n_val 3 is answered from this node's
        // vnodes, n_val 1 is refused.
        let mut keys = Vec::new();
        n.list_keys(b"", b"b", None, &mut |batch| {
            keys.extend(batch);
            true
        })
        .unwrap();
        assert_eq!(keys, vec![b"k".to_vec()]);
        let mut props = rill_bucket::Props::new();
        props.insert("n_val".into(), 1.into());
        n.buckets
            .set_bucket_props("default", b"one", &props)
            .unwrap();
        let r = n.list_keys(b"", b"one", None, &mut |_| true);
        assert!(matches!(r, Err(KvError::NoCoverage)), "{r:?}");
        assert!(n.list_buckets(b"", None).is_ok());
    }
}
