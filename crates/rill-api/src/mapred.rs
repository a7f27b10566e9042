//! MapReduce jobs on a node, for both APIs: the node as the job's source
//! of keys (listing, 2i) and objects (gets at R = 1, many at once), and a
//! job run on a blocking thread whose kept results arrive as JSON, batch
//! by batch, over a channel.

use rill_mapred::{parse_job, BKey, IndexQuery, Job, JobError, RunError, Source, Term};
use rill_node::{GetAnswer, GetRequest, IndexRequest, IndexSpec, Node, Quorum};
use rill_object::Object;
use std::sync::Arc;
use std::time::Instant;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

struct NodeSource {
    node: Arc<Node>,
    rt: Handle,
}

/// The node's name for a bucket type: empty for the default type.
fn type_bytes(t: Option<&[u8]>) -> Vec<u8> {
    match t {
        None | Some(b"default") => Vec::new(),
        Some(t) => t.to_vec(),
    }
}

fn left(deadline: Instant) -> Option<std::time::Duration> {
    Some(deadline.saturating_duration_since(Instant::now()))
}

impl Source for NodeSource {
    fn list_keys(
        &self,
        bucket_type: Option<&[u8]>,
        bucket: &[u8],
        deadline: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), String> {
        self.node
            .list_keys(&type_bytes(bucket_type), bucket, left(deadline), each)
            .map_err(|e| e.to_string())
    }

    fn index(
        &self,
        bucket_type: Option<&[u8]>,
        bucket: &[u8],
        index: &[u8],
        query: &IndexQuery,
        _deadline: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), String> {
        let req = IndexRequest {
            bucket_type: type_bytes(bucket_type),
            bucket: bucket.to_vec(),
            index: index.to_vec(),
            spec: match query {
                IndexQuery::Eq(v) => IndexSpec::Eq(v.clone()),
                IndexQuery::Range(a, b) => IndexSpec::Range(a.clone(), b.clone()),
            },
            return_terms: false,
            max_results: None,
            continuation: None,
            term_regex: None,
        };
        let plan = self.node.index_plan(&req).map_err(|e| e.to_string())?;
        self.node
            .index_stream(&plan, &mut |hits| {
                each(hits.into_iter().map(|(_, k)| k).collect())
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn fetch(&self, keys: &[BKey], deadline: Instant) -> Result<Vec<Option<Object>>, String> {
        let node = self.node.clone();
        let reqs: Vec<GetRequest> = keys
            .iter()
            .map(|k| GetRequest {
                bucket_type: type_bytes(k.bucket_type.as_deref()),
                bucket: k.bucket.clone(),
                key: k.key.clone(),
                // One replica's answer is enough; a not-found waits for
                // the others in case one of them has it.
                r: Some(Quorum::One),
                pr: None,
                basic_quorum: Some(false),
                notfound_ok: Some(false),
                deletedvclock: false,
                if_modified: None,
                n_val: None,
            })
            .collect();
        self.rt.block_on(async move {
            let gets = reqs.into_iter().map(|r| {
                let node = node.clone();
                tokio::spawn(async move { node.get_task(&r).await })
            });
            let gets: Vec<_> = gets.collect();
            let mut out = Vec::with_capacity(gets.len());
            for g in gets {
                let answer = tokio::time::timeout_at(deadline.into(), g)
                    .await
                    .map_err(|_| "timeout".to_string())?
                    .map_err(|e| format!("a read failed: {e}"))?;
                out.push(match answer.map_err(|e| e.to_string())? {
                    GetAnswer::Found(o) => Some(o),
                    GetAnswer::NotFound | GetAnswer::Deleted(_) | GetAnswer::Unchanged => None,
                });
            }
            Ok(out)
        })
    }
}

/// What a running job sends: a batch of a kept phase's results, or how
/// it ended.
pub(crate) enum Event {
    Results(usize, Vec<Term>),
    Done(Result<(), RunError>),
}

/// Parses a job, or says why it is refused.
pub(crate) fn job(body: &[u8]) -> Result<Job, JobError> {
    parse_job(body)
}

/// Starts a job on a blocking thread; its results come on the channel,
/// `Done` last. Dropping the receiver stops the job at its next batch.
pub(crate) fn start(node: Arc<Node>, job: Job) -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(4);
    let rt = Handle::current();
    tokio::task::spawn_blocking(move || {
        let source = NodeSource { node, rt };
        let end = rill_mapred::run(&job, &source, &mut |phase, items: Vec<Term>| {
            tx.blocking_send(Event::Results(phase, items)).is_ok()
        });
        if let Err(e) = &end {
            tracing::debug!(error = %e.to_json(), "a MapReduce job failed");
        }
        let _ = tx.blocking_send(Event::Done(end));
    });
    rx
}

/// A batch as JSON, or the error a client gets for a result JSON cannot
/// carry (Riak fails the job the same way).
pub(crate) fn encode(phase: usize, items: &[Term]) -> Result<String, RunError> {
    rill_mapred::json::encode(items).map_err(|e| RunError::Phase {
        phase,
        error: e.message,
        input: String::new(),
    })
}
