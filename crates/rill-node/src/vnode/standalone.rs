//! A node's vnodes without the node, as the seeded simulation (rill-sim)
//! runs them: the same `Vnode` code a node serves (its store, key epochs
//! and their lease, anti-entropy trees, the requests of `msg`, the
//! handoff's drop), on the memory backend, with the default bucket
//! properties and ids the caller chooses, so a seed gives the same run.
//! Nothing here starts a thread; the clocks the vnode code reads (for
//! clock pruning, for the memory store's time to live) change nothing
//! when pruning is off and there is no time to live.

use crate::buckets::Buckets;
use crate::config::{BackendKind, NodeConfig};
use crate::error::KvError;
use crate::meta::MetaDir;
use crate::vnode::aae::{KeyPlace, VnodeAae};
use crate::vnode::lease::{LeaseFile, LeaseTable};
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnode::{Epochs, Limits, Vnode};
use rill_backend::{BKey, MemoryBackend, MemoryOptions};
use rill_object::Object;
use rill_ring::Partition;
use std::path::Path;
use std::sync::Arc;

/// One vnode per partition of a ring of `ring_size`, as on a node.
pub struct StandaloneVnodes {
    vnodes: Vec<Vnode>,
    limits: Limits,
}

impl StandaloneVnodes {
    /// Opens fresh vnodes: their counter lease and bucket registry in
    /// `dir` (which must be empty), vnode `p`'s id `ids(p)`, anti-entropy
    /// trees kept (`aae`), built over the empty stores at `now_ms`.
    pub fn open(
        dir: &Path,
        ring_size: u32,
        ids: impl Fn(u32) -> [u8; 8],
        aae: bool,
        now_ms: u64,
    ) -> Result<StandaloneVnodes, KvError> {
        let io = |e: std::io::Error| KvError::Backend(format!("standalone vnodes: {e}"));
        let mut config = NodeConfig::new(dir);
        config.ring_size = ring_size;
        config.backend = BackendKind::Memory;
        let meta = MetaDir::open(dir).map_err(io)?;
        let buckets =
            Arc::new(Buckets::load(meta, &config).map_err(|e| KvError::Backend(e.to_string()))?);
        let n = ring_size as usize;
        let leases = Arc::new(LeaseFile::create(dir, &LeaseTable::fresh(n, 0, false)).map_err(io)?);
        let place = Arc::new(KeyPlace { ring_size, buckets });
        let vnodes = (0..ring_size)
            .map(|p| {
                let trees =
                    aae.then(|| VnodeAae::new(rill_aae::Trees::empty(now_ms), place.clone()));
                Vnode::new(
                    Partition(p),
                    ids(p),
                    Epochs {
                        next: 0,
                        lease_end: 0,
                        fresh_from: 0,
                        leases: leases.clone(),
                    },
                    Box::new(MemoryBackend::new(MemoryOptions {
                        max_memory_bytes: None,
                        ttl: None,
                    })),
                    trees,
                )
            })
            .collect();
        Ok(StandaloneVnodes {
            vnodes,
            limits: Limits {
                size_warning_bytes: config.object_size_warning_bytes,
                size_max_bytes: config.object_size_max_bytes,
                siblings_warning: config.siblings_warning,
                siblings_max: config.siblings_max,
            },
        })
    }

    fn of(&self, partition: u32) -> &Vnode {
        &self.vnodes[partition as usize]
    }

    /// What partition `partition`'s vnode answers to `request`.
    pub fn handle(&self, partition: u32, request: VnodeRequest) -> VnodeReply {
        self.of(partition).handle(request, &self.limits)
    }

    /// Every key the vnode holds, sorted.
    pub fn keys(&self, partition: u32) -> Result<Vec<BKey>, KvError> {
        self.of(partition).all_keys()
    }

    /// The vnode of `partition` as handoff reads it.
    pub fn reader(&self, partition: u32) -> crate::vnode::handoff::PartitionReader<'_> {
        crate::vnode::handoff::PartitionReader {
            vnode: self.of(partition),
            keep: None,
            retire: true,
        }
    }

    /// [`StandaloneVnodes::reader`] whose drops do not retire the
    /// vnode's epochs first: the simulation's fault that replays the bug
    /// the retirement prevents (a vnode that dropped a key takes an
    /// older copy back by a merge and continues that copy's count,
    /// issuing a dot twice).
    pub fn reader_keeping_epochs(
        &self,
        partition: u32,
    ) -> crate::vnode::handoff::PartitionReader<'_> {
        crate::vnode::handoff::PartitionReader {
            retire: false,
            ..self.reader(partition)
        }
    }

    /// The object stored under `k`.
    pub fn get(&self, partition: u32, k: &BKey) -> Result<Option<Object>, KvError> {
        self.of(partition).get(k)
    }
}
