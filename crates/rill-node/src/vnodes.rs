//! This node's vnodes, one per partition of the ring, and what they
//! share: the size limits of objects, the backends' resources (merge
//! scheduler, disk space, LSM databases) and a backend migration's
//! target. Other nodes' coordinators reach a vnode through `serve`;
//! handoff reads and drops a vnode's data through its `reader`
//! (`vnode::handoff`) and takes data in through `handoff_store` (the
//! protocol is `rill-handoff`'s; the cluster runtime, `rill-peer`,
//! carries it).

use crate::backends::Resources;
use crate::error::KvError;
use crate::migrate::Migrations;
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnode::{Limits, Vnode};
use rill_backend::BKey;
use rill_object::Object;
use rill_ring::PreflistEntry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

pub struct Vnodes {
    list: Vec<Arc<Vnode>>,
    pub(crate) limits: Limits,
    /// What the backends share (merge scheduler, space, LSM databases).
    pub(crate) res: Resources,
    /// A backend migration of this node, if one was asked.
    pub(crate) migration: Migrations,
    /// Reads answered in place when a backend can without waiting (on
    /// by default; tests turn it off to take the path of reads that
    /// wait).
    pub(crate) quick_reads: AtomicBool,
    /// The sensor-data service, once the node's owner attaches it.
    sensors: OnceLock<Arc<dyn SensorHandler>>,
}

/// The sensor-data service as the node carries it: requests of other
/// nodes' coordinators arrive as bytes only the service reads, for the
/// node as a whole (the service keeps its own data by partition).
pub trait SensorHandler: Send + Sync {
    /// Answers a request; an `Err` goes back as a replica's failure.
    fn serve(&self, request: &[u8]) -> Result<Vec<u8>, KvError>;
}

impl Vnodes {
    pub(crate) fn new(
        list: Vec<Arc<Vnode>>,
        limits: Limits,
        res: Resources,
        migration: Migrations,
    ) -> Vnodes {
        Vnodes {
            list,
            limits,
            res,
            migration,
            quick_reads: AtomicBool::new(true),
            sensors: OnceLock::new(),
        }
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Arc<Vnode>> {
        self.list.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The vnode of `partition`.
    pub(crate) fn of(&self, partition: u32) -> Result<&Arc<Vnode>, KvError> {
        self.list
            .get(partition as usize)
            .ok_or_else(|| KvError::Backend(format!("no partition {partition} on this ring")))
    }

    /// The vnode of a preference list entry of this node.
    pub(crate) fn at(&self, e: &PreflistEntry) -> &Arc<Vnode> {
        &self.list[e.partition.0 as usize]
    }

    /// The vnode of a partition of this node's ring.
    pub(crate) fn at_partition(&self, p: rill_ring::Partition) -> &Arc<Vnode> {
        &self.list[p.0 as usize]
    }

    /// A request of a coordinator of this node.
    pub(crate) fn handle(&self, e: &PreflistEntry, request: VnodeRequest) -> VnodeReply {
        if let VnodeRequest::Sensor(bytes) = &request {
            return self.serve_sensor(bytes);
        }
        self.at(e).handle(request, &self.limits)
    }

    /// Attaches the sensor-data service (once; later calls are ignored).
    pub fn attach_sensors(&self, handler: Arc<dyn SensorHandler>) {
        let _ = self.sensors.set(handler);
    }

    fn serve_sensor(&self, request: &[u8]) -> VnodeReply {
        match self.sensors.get() {
            Some(h) => match h.serve(request) {
                Ok(answer) => VnodeReply::Sensor(answer),
                Err(e) => VnodeReply::Failed(e),
            },
            None => VnodeReply::Failed(KvError::Backend(
                "the sensor-data service is off on this node (sensor = off)".into(),
            )),
        }
    }

    /// A request of another node's coordinator for one of this node's
    /// vnodes (or, for a sensor request, for the node).
    pub fn serve(&self, partition: u32, request: VnodeRequest) -> VnodeReply {
        if let VnodeRequest::Sensor(bytes) = &request {
            return self.serve_sensor(bytes);
        }
        let Some(vnode) = self.list.get(partition as usize) else {
            return VnodeReply::Failed(KvError::Backend(format!(
                "no partition {partition} on this node's ring"
            )));
        };
        let reply = vnode.handle(request, &self.limits);
        if let VnodeReply::Failed(KvError::OutOfSpace { .. }) = &reply {
            self.disk_full();
        }
        reply
    }

    /// [`Vnodes::serve`] for a read the vnode can answer without waiting
    /// (from memory or the page cache); `None` when it would wait or is
    /// not a read: then `serve` it on a thread that may block.
    pub fn try_serve(&self, partition: u32, request: &VnodeRequest) -> Option<VnodeReply> {
        if !self.quick_reads.load(Ordering::Relaxed) {
            return None;
        }
        self.list.get(partition as usize)?.try_handle(request)
    }

    /// Makes every acknowledged write durable.
    pub fn sync(&self) -> Result<(), KvError> {
        for v in &self.list {
            v.backend().sync()?;
        }
        Ok(())
    }

    /// Bytes the vnodes' backends hold.
    pub(crate) fn storage_bytes(&self) -> u64 {
        self.list.iter().map(|v| v.backend().size_bytes()).sum()
    }

    /// Admits a write that adds data, or refuses it for space (the
    /// space of the backends a migration copies to as well).
    pub(crate) fn admit_write(&self) -> Result<(), KvError> {
        self.res.admit_write()?;
        self.migration.admit_write()
    }

    /// A write met a full disk; true when room was released for a retry.
    pub(crate) fn disk_full(&self) -> bool {
        self.res.space.as_ref().is_some_and(|s| s.disk_full())
    }

    /// How many times the space reserve has been released.
    pub(crate) fn space_releases(&self) -> u64 {
        self.res.space.as_ref().map_or(0, |s| s.releases())
    }

    /// Whether this node's vnode of `partition` holds any key.
    pub fn holds_data(&self, partition: u32) -> Result<bool, KvError> {
        self.of(partition)?.holds_data()
    }

    /// Every key the vnode of `partition` holds, sorted by their wire
    /// encoding (`wire::encode_key`), the order handoff cursors follow.
    pub fn handoff_keys(&self, partition: u32) -> Result<Vec<(Vec<u8>, BKey)>, KvError> {
        let mut keys: Vec<(Vec<u8>, BKey)> = self
            .of(partition)?
            .all_keys()?
            .into_iter()
            .map(|k| (crate::wire::encode_key(&k), k))
            .collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(keys)
    }

    /// The vnode of `partition` as handoff reads it: the keys `keep`
    /// keeps (all when `None`).
    pub fn reader<'a>(
        &'a self,
        partition: u32,
        keep: Option<crate::vnode::handoff::KeyFilter<'a>>,
    ) -> Result<crate::vnode::handoff::PartitionReader<'a>, KvError> {
        Ok(crate::vnode::handoff::PartitionReader {
            vnode: self.of(partition)?,
            keep,
            retire: true,
        })
    }

    /// Merges handed-off objects into the vnode of `partition` (siblings
    /// kept, as riak_kv's handoff merges), then makes them durable.
    pub fn handoff_store(&self, partition: u32, items: Vec<(BKey, Object)>) -> Result<(), KvError> {
        let stored = self.of(partition)?.store_handed_off(items, &self.limits);
        if let Err(KvError::OutOfSpace { .. }) = &stored {
            self.disk_full();
        }
        stored
    }
}
