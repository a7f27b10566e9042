//! Queries that cover a whole ring: list buckets, list keys and
//! secondary-index queries, each answered by a covering set of vnodes
//! (every partition once, `coverage`) or, on a node that owns every
//! partition, by its own vnodes in place.

pub(crate) mod coverage;
pub(crate) mod index;
mod index_scan;
mod listing;
pub mod summaries;

use crate::buckets::Buckets;
use crate::replicas::Replicas;
use crate::stats::Counters;
use crate::vnodes::Vnodes;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct Queries {
    pub vnodes: Arc<Vnodes>,
    pub replicas: Arc<Replicas>,
    pub buckets: Arc<Buckets>,
    pub counters: Arc<Counters>,
    /// How long a coverage request waits for another node's vnode.
    request_timeout: Duration,
}

impl Queries {
    pub fn new(
        replicas: Arc<Replicas>,
        buckets: Arc<Buckets>,
        counters: Arc<Counters>,
        request_timeout: Duration,
    ) -> Queries {
        Queries {
            vnodes: replicas.vnodes.clone(),
            replicas,
            buckets,
            counters,
            request_timeout,
        }
    }
}
