//! MapReduce as Riak KV 3 offers it, for Rill: a job in Riak's JSON
//! (`{"inputs": ..., "query": [...], "timeout": ms}`) over a bucket, a
//! bucket through key filters, listed keys or a secondary index query,
//! through map, reduce and link phases that run the built-in Erlang
//! functions of `riak_kv_mapreduce`. JavaScript phases are refused, as
//! Riak 3 refuses them; so is Erlang source.
//!
//! Pure logic: keys and objects come through [`Source`], results go to a
//! sink as `(phase, terms)` and become JSON with [`json::encode`].

pub mod builtins;
pub mod filters;
pub mod job;
pub mod json;
pub mod run;
pub mod term;

pub use builtins::BuiltinError;
pub use filters::{ApplyError, FilterError};
pub use job::{parse_job, IndexQuery, Inputs, Job, JobError, Phase, PhaseKind};
pub use json::EncodeError;
pub use run::{run, BKey, PhaseError, RunError, Sink, Source, BATCH};
pub use term::{Fetched, Term};
