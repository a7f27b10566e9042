//! Runs a job: inputs are listed or queried in batches and pass through
//! the phases in order; a map or link phase fetches each batch's objects
//! at once; a reduce phase calls its function again every `batch` inputs
//! on its earlier output and the new inputs, and once more at the end
//! (once on nothing if nothing came). Kept phases' results go to the
//! sink as they are made, so memory holds a batch, not the job, except
//! what a reduce keeps.

use crate::builtins::{self, BuiltinError, MapInput};
use crate::filters::{self, ApplyError};
use crate::job::{IndexQuery, Inputs, Job, PhaseKind};
use crate::term::{show, Fetched, Term};
use rill_object::Object;
use std::sync::Arc;
use std::time::Instant;

/// A key to fetch: its bucket type (`None`: the default type), bucket and key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BKey {
    pub bucket_type: Option<Vec<u8>>,
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
}

/// Where a job's keys and objects come from (a node; a map in tests).
pub trait Source {
    /// Why a listing, a query or a read failed; its text is what the
    /// client is shown (Riak's `{"error": ...}`).
    type Error: std::error::Error;

    /// Every key of a bucket, in batches; `each` returns false to stop.
    fn list_keys(
        &self,
        bucket_type: Option<&[u8]>,
        bucket: &[u8],
        deadline: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), Self::Error>;

    /// The keys an index query finds, in batches.
    fn index(
        &self,
        bucket_type: Option<&[u8]>,
        bucket: &[u8],
        index: &[u8],
        query: &IndexQuery,
        deadline: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), Self::Error>;

    /// The objects under `keys`, in order; `None` where there is none.
    /// Tombstones may be returned: they count as missing.
    fn fetch(&self, keys: &[BKey], deadline: Instant) -> Result<Vec<Option<Object>>, Self::Error>;
}

/// Why a phase failed on an input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PhaseError {
    #[error(transparent)]
    Builtin(#[from] BuiltinError),
    /// A result JSON cannot carry: Riak fails the job the same way.
    #[error(transparent)]
    Encode(#[from] crate::json::EncodeError),
    #[error(
        "a map or link phase takes bucket/key inputs ([B, K], [B, K, KeyData] \
         or [B, K, KeyData, Type])"
    )]
    NotBucketKey,
}

/// Why a job stopped; `E` is its source's error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunError<E> {
    /// A phase failed on an input (Riak's `{"phase":N,"error":...,"input":...}`).
    Phase {
        phase: usize,
        error: PhaseError,
        input: String,
    },
    /// A key filter failed on a listed key.
    KeyFilter(ApplyError),
    /// The inputs could not be listed or queried, or objects read.
    Source(E),
    /// The job's time ran out.
    Timeout,
}

impl<E: std::fmt::Display> RunError<E> {
    /// The error as Riak reports it to clients: a JSON object, its
    /// fields in Riak's order.
    pub fn to_json(&self) -> String {
        let s = |t: &str| serde_json::Value::from(t).to_string();
        match self {
            RunError::Phase {
                phase,
                error,
                input,
            } => format!(
                r#"{{"phase":{phase},"error":{},"input":{},"type":"error","stack":"[]"}}"#,
                s(&error.to_string()),
                s(input)
            ),
            RunError::KeyFilter(e) => format!(r#"{{"error":{}}}"#, s(&e.to_string())),
            RunError::Source(e) => format!(r#"{{"error":{}}}"#, s(&e.to_string())),
            RunError::Timeout => r#"{"error":"timeout"}"#.into(),
        }
    }
}

/// Where a kept phase's results go.
pub trait Sink {
    /// A batch of phase `phase`'s results; false when no one is listening
    /// any more, which ends the job.
    fn results(&mut self, phase: usize, items: Vec<Term>) -> bool;

    /// True once no one listens (the client went away): the job stops at
    /// its next input, kept results or not.
    fn cancelled(&self) -> bool {
        false
    }
}

impl<F: FnMut(usize, Vec<Term>) -> bool> Sink for F {
    fn results(&mut self, phase: usize, items: Vec<Term>) -> bool {
        self(phase, items)
    }
}

/// Inputs handed on at a time, at most.
pub const BATCH: usize = 100;

struct Reducing {
    acc: Vec<Term>,
    pending: Vec<Term>,
    any_input: bool,
}

struct Runner<'a, S: Source + ?Sized> {
    job: &'a Job,
    source: &'a S,
    sink: &'a mut dyn Sink,
    deadline: Instant,
    reducing: Vec<Reducing>,
    stopped: bool,
}

/// Runs `job` over `source`, its kept results to `sink`.
pub fn run<S: Source + ?Sized>(
    job: &Job,
    source: &S,
    sink: &mut dyn Sink,
) -> Result<(), RunError<S::Error>> {
    let deadline = Instant::now() + job.timeout;
    let mut r = Runner {
        job,
        source,
        sink,
        deadline,
        reducing: job
            .phases
            .iter()
            .map(|_| Reducing {
                acc: Vec::new(),
                pending: Vec::new(),
                any_input: false,
            })
            .collect(),
        stopped: false,
    };
    r.inputs()?;
    for i in 0..job.phases.len() {
        if r.stopped {
            break;
        }
        r.finish(i)?;
    }
    Ok(())
}

impl<S: Source + ?Sized> Runner<'_, S> {
    /// Whether to go on: the job's time is not up (an error if it is),
    /// and someone still listens (`stopped` is set if not).
    fn check_time(&mut self) -> Result<(), RunError<S::Error>> {
        if Instant::now() >= self.deadline {
            return Err(RunError::Timeout);
        }
        if !self.stopped && self.sink.cancelled() {
            self.stopped = true;
        }
        Ok(())
    }

    /// A source's error: the job's timeout if its time is up (the source
    /// gave up for that reason), else the source's words.
    fn source_failed(&self, e: S::Error) -> RunError<S::Error> {
        if Instant::now() >= self.deadline {
            RunError::Timeout
        } else {
            RunError::Source(e)
        }
    }

    fn inputs(&mut self) -> Result<(), RunError<S::Error>> {
        let mut failed: Option<RunError<S::Error>> = None;
        let (job, source, deadline) = (self.job, self.source, self.deadline);
        match &job.inputs {
            Inputs::Keys(items) => {
                for chunk in items.chunks(BATCH) {
                    self.push(0, chunk.to_vec())?;
                    if self.stopped {
                        break;
                    }
                }
                return Ok(());
            }
            Inputs::Bucket {
                bucket_type,
                bucket,
                filters,
            } => {
                let bt = bucket_type.as_deref();
                let r = source.list_keys(bt, bucket, deadline, &mut |keys| {
                    let mut items = Vec::with_capacity(keys.len());
                    for k in keys {
                        if !filters.is_empty() {
                            match filters::keeps(filters, &k) {
                                Ok(true) => {}
                                Ok(false) => continue,
                                Err(e) => {
                                    failed = Some(RunError::KeyFilter(e));
                                    return false;
                                }
                            }
                        }
                        items.push(listed(bt, bucket, &k));
                    }
                    self.batch(items, &mut failed)
                });
                r.map_err(|e| self.source_failed(e))?;
            }
            Inputs::Index {
                bucket_type,
                bucket,
                index,
                query,
            } => {
                let bt = bucket_type.as_deref();
                let r = source.index(bt, bucket, index, query, deadline, &mut |keys| {
                    let items = keys.iter().map(|k| listed(bt, bucket, k)).collect();
                    self.batch(items, &mut failed)
                });
                r.map_err(|e| self.source_failed(e))?;
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Hands a listed batch on; false (with the error kept) stops the listing.
    fn batch(&mut self, items: Vec<Term>, failed: &mut Option<RunError<S::Error>>) -> bool {
        for chunk in items.chunks(BATCH) {
            if let Err(e) = self.push(0, chunk.to_vec()) {
                *failed = Some(e);
                return false;
            }
            if self.stopped {
                return false;
            }
        }
        true
    }

    fn emit(&mut self, phase: usize, items: Vec<Term>) {
        if !items.is_empty() && !self.stopped && !self.sink.results(phase, items) {
            self.stopped = true;
        }
    }

    /// Phase `i`'s results: to the client if kept, and on to phase `i + 1`,
    /// [`BATCH`] at a time. Results that JSON writes as one object (a
    /// list of `{Key, Value}` pairs, as `reduce_plist_sum` gives) go to
    /// the client whole.
    fn forward(&mut self, i: usize, out: Vec<Term>) -> Result<(), RunError<S::Error>> {
        let object = matches!(out.first(), Some(Term::Tuple(p)) if p.len() == 2);
        if self.job.phases[i].keep && object {
            self.emit(i, out.clone());
        }
        for chunk in out.chunks(BATCH) {
            if self.job.phases[i].keep && !object {
                self.emit(i, chunk.to_vec());
            }
            self.push(i + 1, chunk.to_vec())?;
        }
        Ok(())
    }

    /// Calls a reduce function, naming its inputs only if it fails.
    fn reduce(
        &self,
        i: usize,
        f: builtins::ReduceFun,
        all: Vec<Term>,
    ) -> Result<Vec<Term>, RunError<S::Error>> {
        builtins::reduce(f, &all).map_err(|error| RunError::Phase {
            phase: i,
            error: error.into(),
            input: show(&Term::List(all), 500),
        })
    }

    /// Gives phase `i` some inputs (`i` past the last phase: nothing).
    /// Each phase calls the next for its output, so the depth of calls is
    /// the number of phases, which the job's parser bounds.
    fn push(&mut self, i: usize, items: Vec<Term>) -> Result<(), RunError<S::Error>> {
        self.check_time()?;
        if self.stopped {
            return Ok(());
        }
        if self.job.phases.is_empty() {
            let items = items.iter().map(phaseless).collect();
            self.emit(0, items);
            return Ok(());
        }
        let Some(phase) = self.job.phases.get(i) else {
            return Ok(());
        };
        match &phase.kind {
            PhaseKind::Map(..) | PhaseKind::Link { .. } => self.map_batch(i, &items),
            PhaseKind::Reduce(f, arg) => {
                self.reducing[i].any_input = true;
                self.reducing[i].pending.extend(items);
                // Riak's re-reduce: every `n` inputs, the earlier output
                // and those `n`.
                if let Some(n) = builtins::reduce_batch(arg) {
                    while self.reducing[i].pending.len() >= n {
                        let r = &mut self.reducing[i];
                        let mut all = std::mem::take(&mut r.acc);
                        all.extend(r.pending.drain(..n));
                        self.reducing[i].acc = self.reduce(i, *f, all)?;
                        self.check_time()?;
                    }
                }
                Ok(())
            }
        }
    }

    /// A map or link phase over a batch: every object fetched at once;
    /// results handed on every [`BATCH`], so one input that gives many
    /// (a `{"sub": [...]}` arg) does not pile up.
    fn map_batch(&mut self, i: usize, items: &[Term]) -> Result<(), RunError<S::Error>> {
        let mut keys = Vec::with_capacity(items.len());
        let mut keydata = Vec::with_capacity(items.len());
        for t in items {
            let (k, kd) = bkey(t).ok_or_else(|| RunError::Phase {
                phase: i,
                error: PhaseError::NotBucketKey,
                input: show(t, 500),
            })?;
            keys.push(k);
            keydata.push(kd);
        }
        let objects = self
            .source
            .fetch(&keys, self.deadline)
            .map_err(|e| self.source_failed(e))?;
        let mut out = Vec::new();
        for (((k, kd), item), o) in keys.into_iter().zip(keydata).zip(items).zip(objects) {
            self.check_time()?;
            if self.stopped {
                return Ok(());
            }
            let input = match o {
                Some(object) if !object.is_tombstone() && !object.contents.is_empty() => {
                    MapInput::Found(Arc::new(Fetched {
                        bucket_type: k.bucket_type,
                        bucket: k.bucket,
                        key: k.key,
                        object,
                    }))
                }
                _ => MapInput::NotFound(item.clone()),
            };
            match &self.job.phases[i].kind {
                PhaseKind::Map(f, arg) => {
                    let r =
                        builtins::map(*f, &input, &kd, arg).map_err(|error| RunError::Phase {
                            phase: i,
                            error: error.into(),
                            input: show(item, 500),
                        })?;
                    out.extend(r);
                }
                PhaseKind::Link { bucket, tag } => {
                    if let MapInput::Found(o) = &input {
                        out.extend(builtins::links(o, bucket.as_deref(), tag.as_deref()));
                    }
                }
                PhaseKind::Reduce(..) => unreachable!("reduce phases do not fetch"),
            }
            if out.len() >= BATCH {
                self.forward(i, std::mem::take(&mut out))?;
            }
        }
        if !out.is_empty() {
            self.forward(i, out)?;
        }
        Ok(())
    }

    /// The end of phase `i`'s inputs: a reduce gives its result.
    fn finish(&mut self, i: usize) -> Result<(), RunError<S::Error>> {
        self.check_time()?;
        let PhaseKind::Reduce(f, _) = &self.job.phases[i].kind else {
            return Ok(());
        };
        let r = &mut self.reducing[i];
        let out = if !r.pending.is_empty() || !r.any_input {
            let mut all = std::mem::take(&mut r.acc);
            all.append(&mut r.pending);
            self.reduce(i, *f, all)?
        } else {
            std::mem::take(&mut r.acc)
        };
        self.forward(i, out)
    }
}

/// A listed key as the pipe carries it: `{B, K}`, or `{{{T, B}, K},
/// undefined}` in a bucket type.
fn listed(bucket_type: Option<&[u8]>, bucket: &[u8], key: &[u8]) -> Term {
    match bucket_type {
        None => Term::pair(Term::bin(bucket), Term::bin(key)),
        Some(t) => Term::pair(
            Term::pair(Term::pair(Term::bin(t), Term::bin(bucket)), Term::bin(key)),
            Term::Atom("undefined"),
        ),
    }
}

/// An input's bucket/key and key data, in every form Riak's fetch takes:
/// `{{B, K}, KD}`, `{B, K}`, `[B, K]`, `[B, K, KD]`, `[B, K, KD, T]`, with
/// `B` a name or `{T, B}`.
fn bkey(t: &Term) -> Option<(BKey, Term)> {
    let undefined = Term::Atom("undefined");
    let null2undefined = |kd: &Term| {
        if kd.is_atom("null") {
            undefined.clone()
        } else {
            kd.clone()
        }
    };
    let (b, k, kd, ty) = match t {
        Term::Tuple(v) if v.len() == 2 => match &v[0] {
            Term::Tuple(bk) if bk.len() == 2 => (&bk[0], &bk[1], v[1].clone(), None),
            _ => (&v[0], &v[1], undefined, None),
        },
        Term::List(v) => match v.len() {
            2 => (&v[0], &v[1], undefined, None),
            3 => (&v[0], &v[1], null2undefined(&v[2]), None),
            4 => (&v[0], &v[1], null2undefined(&v[2]), Some(&v[3])),
            _ => return None,
        },
        _ => return None,
    };
    let (bucket_type, bucket) = match (b, ty) {
        (Term::Tuple(tb), None) if tb.len() == 2 => {
            (Some(tb[0].as_bin()?.to_vec()), tb[1].as_bin()?.to_vec())
        }
        (Term::Bin(b), Some(t)) => (Some(t.as_bin()?.to_vec()), b.to_vec()),
        (Term::Bin(b), None) => (None, b.to_vec()),
        _ => return None,
    };
    Some((
        BKey {
            bucket_type,
            bucket,
            key: k.as_bin()?.to_vec(),
        },
        kd,
    ))
}

/// A phaseless job's result for an input: `[B, K]`, `[B, K, KD]` or
/// `[B, K, KD|null, T]`.
fn phaseless(t: &Term) -> Term {
    let Some((k, kd)) = bkey(t) else {
        return t.clone();
    };
    let given = !kd.is_atom("undefined") || matches!(t, Term::List(v) if v.len() >= 3);
    let mut v = vec![Term::bin(&k.bucket), Term::bin(&k.key)];
    match k.bucket_type {
        Some(ty) => {
            v.push(if kd.is_atom("undefined") {
                Term::Atom("null")
            } else {
                kd
            });
            v.push(Term::bin(ty));
        }
        None if given => v.push(if kd.is_atom("undefined") {
            Term::Atom("null")
        } else {
            kd
        }),
        None => {}
    }
    Term::List(v)
}

#[cfg(test)]
mod tests;
