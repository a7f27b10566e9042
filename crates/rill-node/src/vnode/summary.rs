//! What Riak 3's aae_fold `find_keys` and `object_stats` read of each
//! object: its siblings (tombstones included), its size as stored, and
//! when it was last modified (the newest sibling's time, whole seconds).
//! A vnode answers a page of them for the keys of a coverage query.

use super::msg::{KeysQuery, VnodeReply};
use super::Vnode;
use crate::error::KvError;
use rill_backend::BKey;

/// One object's summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySummary {
    pub key: Vec<u8>,
    /// Contents, tombstones included (as stored on this vnode).
    pub siblings: u32,
    /// Bytes of the object as stored.
    pub bytes: u64,
    /// The newest sibling's last-modified time, in seconds.
    pub modified_s: u64,
}

impl Vnode {
    /// The summaries of the keys a `Keys` query with `q` would answer (a
    /// key gone since it was listed is left out, and so is an object that
    /// does not decode, with a warning); with more to come, the last key
    /// listed, where the next page starts.
    pub(crate) fn summaries(&self, q: &KeysQuery) -> Result<VnodeReply, KvError> {
        let (keys, more) = self.keys(q)?;
        let next = if more { keys.last().cloned() } else { None };
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            let k = BKey::new(&q.bucket_type, &q.bucket, &key);
            let Some(stored) = self.backend().get(&k)? else {
                continue;
            };
            let bytes = stored.len() as u64;
            let o = match self.decoded(Some(stored)) {
                Ok(Some(o)) => o,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(partition = self.partition.0, error = %e, "an object that does not decode is left out of an aae_fold");
                    continue;
                }
            };
            rows.push(KeySummary {
                key,
                siblings: o.contents.len() as u32,
                bytes,
                modified_s: o
                    .contents
                    .iter()
                    .map(|c| c.meta.last_modified_us / 1_000_000)
                    .max()
                    .unwrap_or(0),
            });
        }
        Ok(VnodeReply::Summaries { rows, next })
    }
}
