//! MapReduce jobs on a node, for both APIs: the node as the job's source
//! of keys (listing, 2i) and objects (gets at R = 1, many at once), and a
//! job run on a blocking thread whose kept results arrive as JSON, batch
//! by batch, over a channel.

use bytes::Bytes;
use rill_mapred::{parse_job, BKey, IndexQuery, Job, JobError, PhaseError, Source, Term};
use rill_node::{GetAnswer, GetRequest, IndexRequest, IndexSpec, KvError, Node, Quorum};
use rill_object::Object;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

struct NodeSource {
    node: Arc<Node>,
    rt: Handle,
}

/// Why the node could not give a job its keys or objects (the client
/// sees the text in Riak's `{"error": ...}`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error(transparent)]
    Kv(#[from] KvError),
    /// A read did not answer before the job's deadline.
    #[error("timeout")]
    Timeout,
    /// A read's task ended without an answer (it panicked).
    #[error("a read failed: {0}")]
    Read(#[from] tokio::task::JoinError),
}

/// Why a job on this node stopped.
pub(crate) type RunError = rill_mapred::RunError<SourceError>;

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
    type Error = SourceError;

    fn list_keys(
        &self,
        bucket_type: Option<&[u8]>,
        bucket: &[u8],
        deadline: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), SourceError> {
        Ok(self
            .node
            .list_keys(&type_bytes(bucket_type), bucket, left(deadline), each)?)
    }

    fn index(
        &self,
        bucket_type: Option<&[u8]>,
        bucket: &[u8],
        index: &[u8],
        query: &IndexQuery,
        _deadline: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), SourceError> {
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
        let plan = self.node.index_plan(&req)?;
        self.node.index_stream(&plan, &mut |hits| {
            each(hits.into_iter().map(|(_, k)| k).collect())
        })?;
        Ok(())
    }

    fn fetch(&self, keys: &[BKey], deadline: Instant) -> Result<Vec<Option<Object>>, SourceError> {
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
                node_confirms: None,
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
                    .map_err(|_| SourceError::Timeout)??;
                out.push(match answer? {
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

/// Jobs a node runs at once, at most: each holds a blocking thread while
/// it runs, and its reads need more of them.
pub(crate) const MAX_JOBS: usize = 32;

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// A place among the running jobs, given back when dropped.
pub(crate) struct Slot(());

impl Drop for Slot {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a job was not started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error(transparent)]
    Job(JobError),
    /// [`MAX_JOBS`] are running.
    #[error("overload: {MAX_JOBS} MapReduce jobs are running on this node; retry later")]
    Busy,
}

/// Parses a job (off the async threads: key filters compile regular
/// expressions) and takes a place for it among the running jobs.
pub(crate) async fn admit(body: Bytes) -> Result<(Job, Slot), Refused> {
    let job = crate::blocking(move || parse_job(&body))
        .await
        .map_err(Refused::Job)?;
    if RUNNING.fetch_add(1, Ordering::AcqRel) >= MAX_JOBS {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        return Err(Refused::Busy);
    }
    Ok((job, Slot(())))
}

/// The job's side of the channel: results wait for the client at most
/// until the job's deadline (then the job ends with a timeout, never as
/// if its results were all sent), and a client gone away cancels the job.
struct Relay {
    tx: mpsc::Sender<Event>,
    rt: Handle,
    deadline: Instant,
    timed_out: bool,
}

impl Relay {
    fn send(&self, e: Event, until: Instant) -> bool {
        let tx = self.tx.clone();
        self.rt
            .block_on(async move { tokio::time::timeout_at(until.into(), tx.send(e)).await })
            .is_ok_and(|sent| sent.is_ok())
    }
}

impl rill_mapred::Sink for Relay {
    fn results(&mut self, phase: usize, items: Vec<Term>) -> bool {
        let sent = self.send(Event::Results(phase, items), self.deadline);
        if !sent && !self.tx.is_closed() {
            self.timed_out = true;
        }
        sent
    }

    fn cancelled(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Starts a job on a blocking thread; its results come on the channel,
/// `Done` last. Dropping the receiver stops the job at its next input.
pub(crate) fn start(node: Arc<Node>, job: Job, slot: Slot) -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(4);
    let rt = Handle::current();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let deadline = Instant::now() + job.timeout;
        let source = NodeSource {
            node,
            rt: rt.clone(),
        };
        let mut relay = Relay {
            tx,
            rt,
            deadline,
            timed_out: false,
        };
        let end = match rill_mapred::run(&job, &source, &mut relay) {
            Ok(()) if relay.timed_out => Err(RunError::Timeout),
            end => end,
        };
        if let Err(e) = &end {
            tracing::debug!(error = %e.to_json(), "a MapReduce job failed");
        }
        // A client that reads nothing more is not waited for long.
        let last = Instant::now().max(deadline) + Duration::from_secs(5);
        relay.send(Event::Done(end), last);
    });
    rx
}

/// The most JSON one answer part holds (one larger result goes alone).
const PART_BYTES: usize = 8 << 20;

/// A list of results as one JSON array (or object), or the error a
/// client gets for a result JSON cannot carry (Riak fails the job the
/// same way).
pub(crate) fn encode_whole(phase: usize, items: &[Term]) -> Result<String, RunError> {
    rill_mapred::json::encode(items).map_err(|e| encode_failed(phase, e))
}

fn encode_failed(phase: usize, e: rill_mapred::EncodeError) -> RunError {
    RunError::Phase {
        phase,
        error: PhaseError::Encode(e),
        input: String::new(),
    }
}

/// A batch as JSON arrays of at most [`PART_BYTES`] each (a list of
/// `{Key, Value}` pairs, a JSON object, whole).
pub(crate) fn encode(phase: usize, items: &[Term]) -> Result<Vec<String>, RunError> {
    if matches!(items.first(), Some(Term::Tuple(p)) if p.len() == 2) {
        return Ok(vec![encode_whole(phase, items)?]);
    }
    let mut parts = Vec::new();
    let mut part = String::from("[");
    for t in items {
        let one = rill_mapred::json::encode_term(t).map_err(|e| encode_failed(phase, e))?;
        if part.len() > 1 && part.len() + one.len() > PART_BYTES {
            part.push(']');
            parts.push(std::mem::replace(&mut part, String::from("[")));
        }
        if part.len() > 1 {
            part.push(',');
        }
        part.push_str(&one);
    }
    part.push(']');
    if part.len() > 2 || parts.is_empty() {
        parts.push(part);
    }
    Ok(parts)
}
