//! Writing several puts and deletes as one ([`Store::write_batch`]): one
//! append, one fsync under `o_sync`, consecutive sequence numbers in one
//! file, and after a crash all of them or none (recovery drops a batch that
//! is not whole on disk; docs/format.md, "Data record"). Rill's Bitcask
//! backend writes an object and its secondary-index changes this way.

use crate::error::{Error, Result};
use crate::store::{Rec, Store};

/// One change of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Stores `value` under `key`, with the store's default time to live.
    Put { key: &'a [u8], value: &'a [u8] },
    /// Deletes `key` (a tombstone is written whether or not it exists).
    Delete { key: &'a [u8] },
}

impl Store {
    /// Applies `ops` as one write. Every key and size is checked before
    /// anything is written; on any error nothing of the batch is written.
    pub fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let o = self.options();
        let expiry_s = o.default_ttl.map(|ttl| {
            (o.clock.now() + ttl)
                .as_secs()
                .clamp(1, u64::from(u32::MAX)) as u32
        });
        let mut recs = Vec::with_capacity(ops.len());
        for op in ops {
            let (key, value, tombstone) = match *op {
                BatchOp::Put { key, value } => (key, value, false),
                BatchOp::Delete { key } => (key, &[][..], true),
            };
            crate::error::check_key(key, o.max_key_bytes)?;
            if value.len() > o.max_value_bytes {
                return Err(Error::ValueTooLarge {
                    len: value.len(),
                    max: o.max_value_bytes,
                });
            }
            recs.push(Rec {
                key,
                value,
                expiry_s: if tombstone { None } else { expiry_s },
                tombstone,
            });
        }
        if recs.is_empty() {
            return Ok(());
        }
        self.inner.write_records(&recs)
    }
}
