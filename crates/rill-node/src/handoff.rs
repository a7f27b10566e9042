//! What handoff needs of the node's vnodes: their keys in a stable order,
//! their objects, taking objects in, and, once the receiver has them,
//! removing what was handed off unchanged. The protocol is
//! `rill-handoff`'s; the runtime (`rill-peer`) carries it.

use crate::error::KvError;
use crate::node::Node;
use crate::vnode::Vnode;
use crate::vnode_msg::{VnodeReply, VnodeRequest};
use rill_backend::BKey;
use rill_object::{Object, VClock};
use std::sync::Arc;

impl Node {
    fn vnode_of(&self, partition: u32) -> Result<&Arc<Vnode>, KvError> {
        self.vnodes
            .get(partition as usize)
            .ok_or_else(|| KvError::Backend(format!("no partition {partition} on this ring")))
    }

    /// Whether this node's vnode of `partition` holds any key.
    pub fn holds_data(&self, partition: u32) -> Result<bool, KvError> {
        Ok(self.vnode_of(partition)?.backend().holds_objects()?)
    }

    /// Every key the vnode of `partition` holds, sorted by their wire
    /// encoding (`wire::encode_key`), the order handoff cursors follow.
    pub fn handoff_keys(&self, partition: u32) -> Result<Vec<(Vec<u8>, BKey)>, KvError> {
        let b = self.vnode_of(partition)?.backend();
        let mut buckets = Vec::new();
        b.fold_buckets(&mut |t, bucket| {
            buckets.push((t.to_vec(), bucket.to_vec()));
            true
        })?;
        let mut keys = Vec::new();
        for (t, bucket) in buckets {
            b.fold_keys(&t, &bucket, &mut |k| {
                let key = BKey::new(&t, &bucket, k);
                keys.push((crate::wire::encode_key(&key), key));
                true
            })?;
        }
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        keys.dedup_by(|a, b| a.0 == b.0);
        Ok(keys)
    }

    /// The stored objects of `keys` (keys gone since are left out).
    pub fn handoff_read(
        &self,
        partition: u32,
        keys: &[BKey],
    ) -> Result<Vec<(BKey, Object)>, KvError> {
        let v = self.vnode_of(partition)?;
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            if let Some(o) = v.get(k)? {
                out.push((k.clone(), o));
            }
        }
        Ok(out)
    }

    /// Merges handed-off objects into the vnode of `partition` (siblings
    /// kept, as riak_kv's handoff merges), then makes them durable.
    pub fn handoff_store(&self, partition: u32, items: Vec<(BKey, Object)>) -> Result<(), KvError> {
        let v = self.vnode_of(partition)?;
        for (key, object) in items {
            let request = VnodeRequest::Merge {
                key,
                object,
                allow_mult: true,
                prune: None,
                return_object: false,
            };
            if let VnodeReply::Failed(e) = v.handle(request, &self.limits) {
                if matches!(e, KvError::OutOfSpace { .. }) {
                    self.disk_full();
                }
                return Err(e);
            }
        }
        v.backend().sync()?;
        Ok(())
    }

    /// After the receiver stored them: retires the vnode's epochs
    /// (durably), then removes each key still stored with the clock it
    /// was handed off with. Returns how many were removed.
    pub fn handoff_drop(&self, partition: u32, sent: &[(BKey, VClock)]) -> Result<usize, KvError> {
        let v = self.vnode_of(partition)?;
        if sent.is_empty() {
            return Ok(0);
        }
        v.retire_epochs()?;
        let mut removed = 0;
        for (k, clock) in sent {
            if v.drop_if_unchanged(k, clock)? {
                removed += 1;
            }
        }
        Ok(removed)
    }
}
