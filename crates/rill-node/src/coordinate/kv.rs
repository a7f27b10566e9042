//! Get, put and delete, coordinated over the key's preference list with
//! Riak's quorum rules.

use crate::config::DeleteMode;
use crate::coordinate::reaper::Job;
use crate::coordinate::{Read, ReadMode, WriteKind};
use crate::error::KvError;
use crate::ids;
use crate::params::{
    check_names, n_val, normalise_indexes, prop_bool, put_mode, read_quorum, request_n,
    write_quorum, ReadQuorum,
};
use crate::replicas::distinct_nodes;
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnode::step::CoordinateStep;
use rill_backend::BKey;
use rill_bucket::Quorum;
use rill_coord::QuorumError;
use rill_object::{decode_vclock, Content, Object, VClock};
use rill_ring::PreflistEntry;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Default)]
pub struct GetRequest {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
    pub r: Option<Quorum>,
    pub pr: Option<Quorum>,
    /// Distinct physical nodes that must answer (Riak's node_confirms).
    pub node_confirms: Option<Quorum>,
    pub basic_quorum: Option<bool>,
    pub notfound_ok: Option<bool>,
    /// Answer `Deleted` with the tombstone's clock instead of `NotFound`.
    pub deletedvclock: bool,
    /// Answer `Unchanged` when the stored clock equals this one.
    pub if_modified: Option<Vec<u8>>,
    pub n_val: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum GetAnswer {
    Found(Object),
    NotFound,
    /// Every sibling is a tombstone; here is its clock.
    Deleted(VClock),
    Unchanged,
}

#[derive(Clone, Debug, Default)]
pub struct PutRequest {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    /// `None`: the server makes a key and returns it.
    pub key: Option<Vec<u8>>,
    /// The client's causal context (opaque vclock), if any.
    pub vclock: Option<Vec<u8>>,
    /// The value and its metadata; vtag and last-modified are set here.
    pub content: Content,
    pub w: Option<Quorum>,
    pub dw: Option<Quorum>,
    pub pw: Option<Quorum>,
    /// Distinct physical nodes that must store it (Riak's node_confirms).
    pub node_confirms: Option<Quorum>,
    pub return_body: bool,
    pub if_not_modified: bool,
    pub if_none_match: bool,
    pub n_val: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PutAnswer {
    pub key: Vec<u8>,
    pub generated_key: bool,
    /// The object after the write (always set; the API decides whether to
    /// return it).
    pub object: Object,
}

/// What a delete did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteAnswer {
    /// A tombstone was written through the write quorum.
    Deleted,
    /// Sent without a vclock, its read found no value (not found, or a
    /// tombstone): nothing was written. Riak's HTTP API answers 404, its
    /// PB API success.
    NotFound,
}

#[derive(Clone, Debug, Default)]
pub struct DeleteRequest {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
    pub vclock: Option<Vec<u8>>,
    pub rw: Option<Quorum>,
    pub r: Option<Quorum>,
    pub w: Option<Quorum>,
    pub pr: Option<Quorum>,
    pub pw: Option<Quorum>,
    pub dw: Option<Quorum>,
    pub n_val: Option<u32>,
}

/// A get's answer from what the replicas read.
fn get_answer(req: &GetRequest, read: Result<Read, KvError>) -> Result<GetAnswer, KvError> {
    let obj = match read? {
        Read::Found(o) => o,
        Read::NotFound => return Ok(GetAnswer::NotFound),
        Read::Deleted(clock) => return Ok(GetAnswer::Deleted(clock)),
    };
    if let Some(vc) = &req.if_modified {
        let asked = decode_vclock(vc).map_err(|e| KvError::BadVclock(e.to_string()))?;
        if asked == obj.clock {
            return Ok(GetAnswer::Unchanged);
        }
    }
    Ok(GetAnswer::Found(obj))
}

/// How often, and how many times, a reap waits for the cluster to say
/// that no other node holds data of the key's partitions.
const REAP_RETRY: Duration = Duration::from_secs(1);
/// How long after a delete's answer the node reads the key to reap it:
/// several times a replica write's round trip on a healthy network.
const READ_AFTER_DELETE: Duration = Duration::from_millis(200);
/// Reads after deletes waiting or running at once, at most (each a task
/// of the runtime holding its request until the read ends).
const MAX_READS_AFTER_DELETE: usize = 4096;
const REAP_TRIES: u32 = 60;

/// Refuses a read its preference list cannot satisfy before any replica
/// is asked (riak_kv_get_fsm's checks, in its order).
fn check_read_quorum(preflist: &[PreflistEntry], q: ReadQuorum) -> Result<(), KvError> {
    let primaries = preflist.iter().filter(|e| e.primary).count() as u32;
    if primaries < q.pr {
        return Err(KvError::Quorum(QuorumError::PrUnsatisfied {
            need: q.pr,
            got: primaries,
        }));
    }
    if (preflist.len() as u32) < q.r {
        return Err(KvError::InsufficientVnodes {
            have: preflist.len() as u32,
            need: q.r,
        });
    }
    let nodes = distinct_nodes(preflist);
    if nodes < q.node_confirms {
        return Err(KvError::Quorum(QuorumError::InsufficientNodes {
            need: q.node_confirms,
            got: nodes,
        }));
    }
    Ok(())
}

impl super::Coordinator {
    fn record<T>(&self, r: &Result<T, KvError>) {
        if r.is_err() {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn get(&self, req: &GetRequest) -> Result<GetAnswer, KvError> {
        let start = Instant::now();
        let r = self.get_inner(req);
        self.count_get(start, &r);
        r
    }

    /// A get's figures for `/stats`.
    fn count_get(&self, start: Instant, r: &Result<GetAnswer, KvError>) {
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        self.counters
            .get_us
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.record(r);
    }

    /// [`Self::get`] as a task of the runtime: it never waits for the
    /// disk on the calling thread (reads that would go to a blocking
    /// thread), and needs no thread hand-off when the replicas answer
    /// from memory or the page cache.
    pub async fn get_task(&self, req: &GetRequest) -> Result<GetAnswer, KvError> {
        let start = Instant::now();
        let r = match self.get_plan(req) {
            Ok((k, preflist, q, mode)) => {
                let read = self.coordinate_get_task(&k, &preflist, q, mode).await;
                get_answer(req, read)
            }
            Err(e) => Err(e),
        };
        self.count_get(start, &r);
        r
    }

    fn get_inner(&self, req: &GetRequest) -> Result<GetAnswer, KvError> {
        let (k, preflist, q, mode) = self.get_plan(req)?;
        get_answer(req, self.coordinate_get(&k, &preflist, q, mode))
    }

    /// What a get reads: the key, its replicas, the quorum and the mode.
    fn get_plan(
        &self,
        req: &GetRequest,
    ) -> Result<(BKey, Vec<PreflistEntry>, ReadQuorum, ReadMode), KvError> {
        check_names(&req.bucket_type, &req.bucket, Some(&req.key))?;
        let props = self.buckets.props_for_kv(&req.bucket_type, &req.bucket)?;
        let n = request_n(&props, req.n_val)?;
        let q = read_quorum(&props, n, req.r, req.pr, req.node_confirms, req.notfound_ok)?;
        let k = crate::vnode::bkey(&req.bucket_type, &req.bucket, &req.key);
        let preflist = self
            .replicas
            .preflist(&k.bucket_type, &req.bucket, &req.key, n);
        check_read_quorum(&preflist, q)?;
        let mode = ReadMode {
            basic_quorum: req
                .basic_quorum
                .unwrap_or_else(|| prop_bool(&props, "basic_quorum")),
            allow_mult: put_mode(&props).allow_mult,
            deletedvclock: req.deletedvclock,
            may_reap: req.n_val.is_none_or(|v| v == n_val(&props)),
        };
        Ok((k, preflist, q, mode))
    }

    /// Reads the key keeping every sibling (allow_mult), tombstones read
    /// as not found (data types).
    pub(crate) fn read_replicas_merged(
        &self,
        k: &BKey,
        preflist: &[PreflistEntry],
        q: ReadQuorum,
    ) -> Result<Option<Object>, KvError> {
        let mode = ReadMode {
            basic_quorum: false,
            allow_mult: true,
            deletedvclock: false,
            may_reap: false,
        };
        match self.coordinate_get(k, preflist, q, mode)? {
            Read::Found(o) => Ok(Some(o)),
            Read::NotFound | Read::Deleted(_) => Ok(None),
        }
    }

    /// Takes a tombstone out of the replicas per `delete_mode`, if it is
    /// still the same tombstone then.
    pub(crate) fn reap_later(&self, k: &BKey, clock: &VClock, preflist: &[PreflistEntry]) {
        if !self.may_ask_reap(preflist) {
            return;
        }
        let now = Instant::now();
        let job = |due| Job {
            due,
            key: k.clone(),
            clock: clock.clone(),
            replicas: preflist.to_vec(),
            asked: now,
            tries: 0,
        };
        match self.delete_mode {
            DeleteMode::Keep => {}
            // At once where it may be (a node alone); else the reaper
            // tries again when the other nodes' reports are newer.
            DeleteMode::Immediate => self.reap_job(job(now)),
            DeleteMode::After(d) => self.reaper.schedule_job(job(now + d)),
        }
    }

    /// Whether a tombstone on `preflist` may be reaped at all now: a
    /// `delete_mode` that reaps, every replica a primary and none of their
    /// partitions moving (a next owner or a fallback that missed the
    /// delete would otherwise bring the value back).
    fn may_ask_reap(&self, preflist: &[PreflistEntry]) -> bool {
        let view = self.replicas.view();
        !matches!(self.delete_mode, DeleteMode::Keep)
            && preflist
                .iter()
                .all(|e| e.primary && !view.moving.contains_key(&e.partition.0))
    }

    /// A reap whose time has come: done only when no node other than the
    /// owners holds data of the key's partitions, as every member reported
    /// since the reap was asked (a fallback or an old owner holding the
    /// value would hand it back after the tombstone is gone, and the value
    /// would come back). Not yet: tried again each second, for a minute;
    /// then the tombstone stays (harmless: the next delete or read of the
    /// key asks again).
    pub(crate) fn reap_job(&self, mut job: Job) {
        let partitions: Vec<u32> = job.replicas.iter().map(|e| e.partition.0).collect();
        if self.replicas.may_reap(&partitions, job.asked) {
            for e in &job.replicas {
                self.reap(&job.key, &job.clock, e);
            }
            self.counters
                .tombstones_reaped
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.counters.reaps_put_off.fetch_add(1, Ordering::Relaxed);
        job.tries += 1;
        if job.tries >= REAP_TRIES {
            self.counters.reaps_given_up.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(bucket = %String::from_utf8_lossy(&job.key.bucket), key = %String::from_utf8_lossy(&job.key.key), "tombstone kept: other nodes hold data of its partitions");
            return;
        }
        job.due = Instant::now() + REAP_RETRY;
        self.reaper.schedule_job(job);
    }

    /// Asks replica `e` to drop the tombstone if it is still `clock`'s
    /// (another node's answer is not awaited).
    pub(crate) fn reap(&self, k: &BKey, clock: &VClock, e: &PreflistEntry) {
        let request = VnodeRequest::Reap {
            key: k.clone(),
            clock: clock.clone(),
        };
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        if let Some(VnodeReply::Failed(err)) = self.replicas.ask(e, request, 0, &tx) {
            if matches!(err, KvError::OutOfSpace { .. }) {
                self.vnodes.disk_full();
            }
            tracing::warn!(partition = e.partition.0, error = %err, "tombstone not reaped");
        }
    }

    pub fn put(&self, req: PutRequest) -> Result<PutAnswer, KvError> {
        let start = Instant::now();
        let r = self.put_inner(req);
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        self.counters
            .put_us
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.record(&r);
        r
    }

    fn put_inner(&self, mut req: PutRequest) -> Result<PutAnswer, KvError> {
        check_names(&req.bucket_type, &req.bucket, req.key.as_deref())?;
        let props = self.buckets.props_for_kv(&req.bucket_type, &req.bucket)?;
        let n = request_n(&props, req.n_val)?;
        let wq = write_quorum(&props, n, req.w, req.dw, req.pw, req.node_confirms)?;
        normalise_indexes(&mut req.content)?;
        let (key, generated_key) = match req.key.take() {
            Some(k) => (k, false),
            None => (ids::generated_key(), true),
        };
        let context = match &req.vclock {
            Some(v) => decode_vclock(v).map_err(|e| KvError::BadVclock(e.to_string()))?,
            None => VClock::new(),
        };
        if req.if_none_match || req.if_not_modified {
            let current = self.get_inner(&GetRequest {
                bucket_type: req.bucket_type.clone(),
                bucket: req.bucket.clone(),
                key: key.clone(),
                n_val: req.n_val,
                ..GetRequest::default()
            });
            if req.if_none_match && matches!(current, Ok(GetAnswer::Found(_))) {
                return Err(KvError::MatchFound);
            }
            if req.if_not_modified {
                match current {
                    Ok(GetAnswer::Found(o)) if o.clock == context => {}
                    Ok(GetAnswer::Found(_)) => return Err(KvError::Modified),
                    Ok(_) => return Err(KvError::NotFound),
                    Err(e) => return Err(e),
                }
            }
        }
        let mut content = req.content;
        content.meta.last_modified_us = ids::now_us();
        content.meta.vtag = Some(ids::vtag());
        content.dot = None;
        let k = crate::vnode::bkey(&req.bucket_type, &req.bucket, &key);
        let how = WriteKind {
            adds: true,
            return_body: req.return_body,
        };
        let step = CoordinateStep::Put {
            context,
            content,
            mode: put_mode(&props),
        };
        let (object, _) = self.write_replicas(&k, n, wq, &props, how, step)?;
        Ok(PutAnswer {
            key,
            generated_key,
            object,
        })
    }

    pub fn delete(&self, req: &DeleteRequest) -> Result<DeleteAnswer, KvError> {
        let r = self.delete_inner(req);
        self.counters.deletes.fetch_add(1, Ordering::Relaxed);
        self.record(&r);
        r
    }

    fn delete_inner(&self, req: &DeleteRequest) -> Result<DeleteAnswer, KvError> {
        check_names(&req.bucket_type, &req.bucket, Some(&req.key))?;
        let props = self.buckets.props_for_kv(&req.bucket_type, &req.bucket)?;
        let n = request_n(&props, req.n_val)?;
        let context = match &req.vclock {
            Some(v) if !v.is_empty() => {
                decode_vclock(v).map_err(|e| KvError::BadVclock(e.to_string()))?
            }
            _ => {
                let r = req.r.or(req.rw);
                match self.get_inner(&GetRequest {
                    bucket_type: req.bucket_type.clone(),
                    bucket: req.bucket.clone(),
                    key: req.key.clone(),
                    r,
                    pr: req.pr,
                    n_val: req.n_val,
                    deletedvclock: true,
                    ..GetRequest::default()
                })? {
                    GetAnswer::Found(o) => o.clock,
                    // Nothing to delete: writing a tombstone without the
                    // clock of a value it should cover would cover none.
                    GetAnswer::Deleted(_) | GetAnswer::NotFound | GetAnswer::Unchanged => {
                        return Ok(DeleteAnswer::NotFound)
                    }
                }
            }
        };
        // Riak's delete takes node_confirms from the bucket alone.
        let wq = write_quorum(&props, n, req.w.or(req.rw), req.dw, req.pw, None)?;
        let k = crate::vnode::bkey(&req.bucket_type, &req.bucket, &req.key);
        let tombstone = Content::tombstone(ids::now_us(), ids::vtag());
        let write = || {
            let how = WriteKind {
                adds: false,
                return_body: false,
            };
            let step = CoordinateStep::Put {
                context: context.clone(),
                content: tombstone.clone(),
                mode: put_mode(&props),
            };
            self.write_replicas(&k, n, wq, &props, how, step)
        };
        // A delete that meets a full disk gets the reserve's room: deletes
        // are how an operator frees space. The write itself releases the
        // reserve when a replica meets the full disk, so the retry follows
        // any release since the delete began, not only its own.
        let releases = self.vnodes.space_releases();
        let (object, everywhere) = match write() {
            Err(KvError::OutOfSpace { .. })
                if self.vnodes.space_releases() != releases || self.vnodes.disk_full() =>
            {
                write()?
            }
            r => r?,
        };
        // Only a tombstone every replica holds may go; a replica that
        // missed it would bring the value back. A delete with a smaller
        // n_val never reaps (as in Riak): the other replicas keep the value.
        if object.is_tombstone() && req.n_val.is_none_or(|v| v == n) && n == n_val(&props) {
            let preflist = self.replicas.preflist(&k.bucket_type, &k.bucket, &k.key, n);
            if everywhere {
                self.reap_later(&k, &object.clock, &preflist);
            } else if self.may_ask_reap(&preflist) {
                self.read_after_delete(req);
            }
        }
        Ok(DeleteAnswer::Deleted)
    }

    /// A delete answered before every replica did: as Riak's delete does,
    /// the key is read afterwards, off the client's path, once the
    /// tombstone's last writes have had time to land
    /// ([`READ_AFTER_DELETE`]; a replica still without it is repaired by
    /// the read instead, and its tombstone waits for a later read). The
    /// read collects every replica's answer after its own and asks for
    /// the reap when all hold the same tombstone (`finish_get`). At most
    /// [`MAX_READS_AFTER_DELETE`] wait or run at once; past that a
    /// tombstone waits for a client's read.
    fn read_after_delete(&self, req: &DeleteRequest) {
        let (Some(remote), Some(node)) = (self.replicas.remote(), self.this.upgrade()) else {
            return;
        };
        let count = self.reads_after_delete.clone();
        if count.fetch_add(1, Ordering::Relaxed) >= MAX_READS_AFTER_DELETE {
            count.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let get = GetRequest {
            bucket_type: req.bucket_type.clone(),
            bucket: req.bucket.clone(),
            key: req.key.clone(),
            deletedvclock: true,
            ..GetRequest::default()
        };
        remote.runtime().spawn(async move {
            tokio::time::sleep(READ_AFTER_DELETE).await;
            let read = match node.get_plan(&get) {
                Ok((k, preflist, q, mode)) => node
                    .coordinate_get_task(&k, &preflist, q, mode)
                    .await
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            count.fetch_sub(1, Ordering::Relaxed);
            if let Err(e) = read {
                tracing::debug!(error = %e, "the read after a delete failed; its tombstone stays until a later read");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Node;
    use rill_object::Metadata;

    fn put(n: &Node, v: &str) {
        n.put(PutRequest {
            bucket: b"b".to_vec(),
            key: Some(b"k".to_vec()),
            content: Content::new(v.as_bytes().to_vec(), Metadata::default()),
            ..PutRequest::default()
        })
        .unwrap();
    }

    fn values(n: &Node) -> Vec<Vec<u8>> {
        match n
            .get(&GetRequest {
                bucket: b"b".to_vec(),
                key: b"k".to_vec(),
                ..GetRequest::default()
            })
            .unwrap()
        {
            GetAnswer::Found(o) => o.contents.into_iter().map(|c| c.value.to_vec()).collect(),
            other => panic!("{other:?}"),
        }
    }

    // Regression: a coordinator that lost a key its replicas kept wrote
    // the next put with a counter already issued; a replica then merged
    // the two to nothing, or dropped the new write as old.
    #[test]
    fn a_coordinator_that_lost_a_key_writes_as_a_new_actor() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::memory_node(dir.path());
        for v in ["v1", "v2", "v3", "v4", "v5"] {
            put(&n, v);
        }
        // The coordinator loses the key (eviction, expiry); the replicas
        // keep v5 with the coordinator's count at 5.
        let k = crate::vnode::bkey(b"", b"b", b"k");
        let first = &n.preflist(b"", b"b", b"k", 3)[0];
        n.vnodes.at(first).backend().delete(&k, &[]).unwrap();
        put(&n, "v6");
        assert_eq!(
            values(&n),
            vec![b"v6".to_vec()],
            "the acknowledged write is what reads see"
        );
        put(&n, "v7");
        assert_eq!(values(&n), vec![b"v7".to_vec()]);
    }
}
