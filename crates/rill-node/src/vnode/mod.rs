//! One partition's replica on this node: its objects in a backend (which
//! a backend migration may switch, `switch`), read-merge-write under a
//! striped lock, its id and key epochs (`identity`, `lease`), the
//! requests it answers (`msg`), the coordinating write it computes
//! (`step`) and the fingerprints a read sends instead of a large value
//! (`head`).

pub(crate) mod aae;
#[cfg(test)]
mod epochs_test;
pub mod handoff;
pub(crate) mod head;
#[cfg(test)]
mod holds_test;
pub(crate) mod identity;
pub mod lease;
pub mod msg;
pub mod standalone;
pub mod step;
pub mod summary;
pub(crate) mod switch;

use crate::error::KvError;
use crate::vnode::lease::LeaseFile;
use rill_backend::{BKey, Backend, IndexEntry, Term};
use rill_object::{decode_object_shared, encode_object, Object, PruneRules, VClock};
use rill_ring::Partition;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use switch::Switchable;

const STRIPES: usize = 64;

/// Size and sibling limits applied to every stored object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub size_warning_bytes: usize,
    pub size_max_bytes: usize,
    pub siblings_warning: usize,
    pub siblings_max: usize,
}

impl Limits {
    /// The limits `config` sets.
    pub(crate) fn of(config: &crate::config::NodeConfig) -> Limits {
        Limits {
            size_warning_bytes: config.object_size_warning_bytes,
            size_max_bytes: config.object_size_max_bytes,
            siblings_warning: config.siblings_warning,
            siblings_max: config.siblings_max,
        }
    }
}

pub(crate) struct Vnode {
    pub partition: Partition,
    /// The vnode's id: the first 8 bytes of every actor it writes as.
    id: [u8; 8],
    /// The next key epoch to start (the actor's last 8 bytes).
    next_epoch: AtomicU64,
    /// No epoch at or above this is leased yet.
    lease_end: AtomicU64,
    /// A key whose newest own epoch is below this starts a new epoch at
    /// its next write (0: never). Set after a stop that may have lost
    /// writes this vnode made (see `Node::open`), and raised after a
    /// handoff removed data (`retire_epochs`).
    fresh_from: AtomicU64,
    leases: Arc<LeaseFile>,
    /// The backend, which a backend migration may replace while it serves.
    backend: Switchable,
    /// False only when the backend was found empty and nothing was
    /// written since (`Vnodes::holds_data` then needs no look at it).
    may_hold: std::sync::atomic::AtomicBool,
    stripes: Vec<Mutex<()>>,
    /// The anti-entropy trees, when `tictacaae_active` is on.
    aae: Option<aae::VnodeAae>,
    /// The simulation's fault (`standalone::Disk`): a merge that shows
    /// the vnode lost a key does not renew its epoch.
    continue_lost_epochs: bool,
}

/// The key a vnode stores `key` of `bucket` of `bucket_type` under (the
/// default type stored as the empty one).
pub(crate) fn bkey(bucket_type: &[u8], bucket: &[u8], key: &[u8]) -> BKey {
    let t: &[u8] = if bucket_type == b"default" {
        b""
    } else {
        bucket_type
    };
    BKey::new(t, bucket, key)
}

/// Bytes of an actor: vnode id (8) and key epoch (8, big-endian).
pub(crate) const ACTOR_BYTES: usize = 16;

/// An object's index metadata as backend entries.
pub(crate) fn index_terms(o: &Object) -> Vec<IndexEntry> {
    o.index_entries()
        .into_iter()
        .map(|(field, term)| {
            let t = if field.ends_with(b"_int") {
                std::str::from_utf8(&term)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .map(Term::Int)
                    .unwrap_or(Term::Bin(term))
            } else {
                Term::Bin(term)
            };
            (field, t)
        })
        .collect()
}

/// Where a vnode's key epochs start in this run.
pub(crate) struct Epochs {
    pub next: u64,
    pub lease_end: u64,
    pub fresh_from: u64,
    pub leases: Arc<LeaseFile>,
}

impl Vnode {
    pub fn new(
        partition: Partition,
        id: [u8; 8],
        epochs: Epochs,
        backend: Box<dyn Backend>,
        aae: Option<aae::VnodeAae>,
    ) -> Vnode {
        Vnode {
            partition,
            id,
            next_epoch: AtomicU64::new(epochs.next),
            lease_end: AtomicU64::new(epochs.lease_end),
            fresh_from: AtomicU64::new(epochs.fresh_from),
            leases: epochs.leases,
            backend: Switchable::new(backend),
            may_hold: std::sync::atomic::AtomicBool::new(true),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            aae,
            continue_lost_epochs: false,
        }
    }

    /// The next key epoch this vnode would start (for a clean shutdown's
    /// lease record).
    pub fn next_epoch(&self) -> u64 {
        self.next_epoch.load(Ordering::SeqCst)
    }

    /// The actor this vnode coordinates a write of `stored` as.
    ///
    /// An actor's counter must never be issued twice, or a replica would
    /// take a new write for one it has seen (Riak's per-key epochs). So a
    /// vnode writes a key as `vnode id | key epoch`: a new epoch whenever
    /// it holds nothing for the key (it may have lost or reaped it while
    /// other replicas kept it), else the newest of its own epochs in the
    /// stored clock, whose count is then complete. Epochs come from a
    /// counter leased ahead of use (`lease.rs`), so the same vnode id
    /// serves every run and clocks do not grow with restarts. After a stop
    /// that may have lost writes (a power loss without `o_sync`), a key's
    /// first write starts a new epoch, since its stored count may be
    /// behind what the vnode issued.
    pub fn actor_for(&self, stored: Option<&Object>) -> Result<Vec<u8>, KvError> {
        let own = stored.and_then(|o| {
            o.clock
                .entries()
                .map(|(a, _, _)| a)
                .filter(|a| a.len() == ACTOR_BYTES && a[..8] == self.id)
                .max()
                .cloned()
        });
        match own {
            Some(a) if epoch_of(&a) >= self.fresh_from.load(Ordering::SeqCst) => Ok(a),
            _ => self.new_actor(),
        }
    }

    /// This vnode's actor in a new key epoch.
    fn new_actor(&self) -> Result<Vec<u8>, KvError> {
        let epoch = self.new_epoch()?;
        let mut a = self.id.to_vec();
        a.extend_from_slice(&epoch.to_be_bytes());
        Ok(a)
    }

    /// Whether `incoming`, merged into `stored`, counts further than
    /// `stored` in the epoch of this vnode that the key's next write
    /// would continue (`actor_for`). The vnode stores every version it
    /// makes before any other replica sees it, so it made that count and
    /// has since lost the key (reaped its tombstone, or the key expired or
    /// was evicted): the count it would continue from may be behind what
    /// it issued, and continuing would give a dot a second time (the
    /// seeded simulation found it: a tombstone reaped, then a version
    /// older than it written back through another replica).
    pub(crate) fn lost_own_count(&self, stored: Option<&Object>, incoming: &Object) -> bool {
        if self.continue_lost_epochs {
            return false;
        }
        let fresh = self.fresh_from.load(Ordering::SeqCst);
        let own = |c: &VClock| {
            c.entries()
                .map(|(a, _, _)| a)
                .filter(|a| a.len() == ACTOR_BYTES && a[..8] == self.id && epoch_of(a) >= fresh)
                .max()
                .cloned()
        };
        let next = own(&incoming.clock).max(stored.and_then(|s| own(&s.clock)));
        next.is_some_and(|a| incoming.clock.counter(&a) > stored.map_or(0, |s| s.clock.counter(&a)))
    }

    /// Gives `merged` (a version `lost_own_count` found) an entry of a new
    /// epoch of this vnode, counted once and naming no value: the key's
    /// next write continues that epoch instead of the one whose count the
    /// vnode lost. The other replicas take the entry by read repair or
    /// anti-entropy, like any newer clock.
    pub(crate) fn renew_epoch(&self, merged: &mut Object) -> Result<(), KvError> {
        let actor = self.new_actor()?;
        merged
            .clock
            .increment(&actor, crate::ids::now_us() / 1_000_000);
        Ok(())
    }

    fn new_epoch(&self) -> Result<u64, KvError> {
        let e = self.next_epoch.fetch_add(1, Ordering::SeqCst);
        if e >= self.lease_end.load(Ordering::SeqCst) {
            let end = self
                .leases
                .cover(self.partition.0 as usize, e + 1)
                .map_err(|err| {
                    tracing::error!(file = %self.leases.path().display(), error = %err, "cannot extend the counter lease");
                    KvError::Backend(format!("cannot extend the vnode's counter lease: {err}"))
                })?;
            self.lease_end.fetch_max(end, Ordering::SeqCst);
        }
        Ok(e)
    }

    /// Merges handed-off objects (siblings kept, as riak_kv's handoff
    /// merges), then makes them durable: the receiver acknowledges the
    /// batch, and the sender may drop its copy, only after this.
    pub fn store_handed_off(
        &self,
        items: Vec<(BKey, Object)>,
        limits: &Limits,
    ) -> Result<(), KvError> {
        for (key, object) in items {
            let request = msg::VnodeRequest::Merge {
                key,
                object,
                allow_mult: true,
                prune: None,
                return_object: false,
            };
            if let msg::VnodeReply::Failed(e) = self.handle(request, limits) {
                return Err(e);
            }
        }
        self.backend().sync()?;
        Ok(())
    }

    pub fn backend(&self) -> &dyn Backend {
        &self.backend
    }

    pub(crate) fn switchable(&self) -> &Switchable {
        &self.backend
    }

    /// Copies `k` as stored now to `to` (a backend migration), with its
    /// index entries and head, under the key's lock so no write of it
    /// runs meanwhile (writes after this also reach `to`). Returns the
    /// bytes copied (0 when the key is gone).
    pub fn copy_key(&self, k: &BKey, to: &dyn Backend) -> Result<u64, KvError> {
        let _guard = self.lock(k);
        let Some(bytes) = self.backend.get(k)? else {
            return Ok(0);
        };
        match decode_object_shared(&bytes) {
            Ok(o) => {
                let terms = index_terms(&o);
                if to.keeps_heads() {
                    let head = rill_object::encode_head(&o);
                    to.put_with_head(k, &bytes, &head, &terms, &[])?;
                } else {
                    to.put(k, &bytes, &terms, &[])?;
                }
            }
            Err(e) => {
                // Kept as stored (a get reports it as it does today).
                tracing::warn!(partition = self.partition.0, error = %e, "a stored object that does not decode is copied as it is, without index entries");
                to.put(k, &bytes, &[], &[])?;
            }
        }
        Ok(bytes.len() as u64)
    }

    fn lock(&self, k: &BKey) -> MutexGuard<'_, ()> {
        let mut h = 0xcbf29ce484222325u64;
        for b in k.bucket.iter().chain(k.key.iter()) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
        }
        self.stripes[(h % STRIPES as u64) as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, k: &BKey) -> Result<Option<Object>, KvError> {
        self.decoded(self.backend.get(k)?)
    }

    /// [`Vnode::get`] if the backend can answer without waiting.
    pub fn try_get(&self, k: &BKey) -> Option<Result<Option<Object>, KvError>> {
        Some(
            self.backend
                .try_get(k)?
                .map_err(KvError::from)
                .and_then(|b| self.decoded(b)),
        )
    }

    fn decoded(&self, stored: Option<bytes::Bytes>) -> Result<Option<Object>, KvError> {
        match stored {
            None => Ok(None),
            // The values share the bytes read (no second copy).
            Some(bytes) => decode_object_shared(&bytes).map(Some).map_err(|e| {
                tracing::error!(partition = self.partition.0, error = %e, "stored object does not decode");
                KvError::Backend(format!("stored object does not decode: {e}"))
            }),
        }
    }

    /// Reads the key, lets `update` compute the new object from what is
    /// stored, checks limits, and writes it with its index changes.
    /// Returns what was stored, or `None` when `update` chose not to write.
    /// A write (not a read repair) prunes the new object's clock by the
    /// bucket's `prune` rules first.
    ///
    /// Where the backend keeps heads apart from values (leveled) and
    /// `head_will_do` says, given the stored head, that the new version
    /// keeps none of the stored values (its clock has seen the stored
    /// one), `update` is given the head (the object with empty values) and
    /// no value is read: a write then reads only the ledger, as Riak's
    /// vnode fetches a clock and index data by a head before a put.
    /// `None`: the write needs the stored values whatever they are (no
    /// head is read).
    pub fn update(
        &self,
        k: &BKey,
        limits: &Limits,
        prune: Option<&PruneRules>,
        head_will_do: Option<impl FnOnce(&Object) -> bool>,
        update: impl FnOnce(Option<&Object>) -> Result<Option<Object>, KvError>,
    ) -> Result<Option<Object>, KvError> {
        let _guard = self.lock(k);
        let (stored, from_head) = self.stored_for_write(k, head_will_do)?;
        let Some(mut new) = update(stored.as_ref())? else {
            return Ok(None);
        };
        if let Some(rules) = prune {
            new.prune_clock(crate::ids::now_us() / 1_000_000, rules);
        }
        // (A head has no values to compare; a new version whose clock has
        // seen the stored one is written.)
        if !from_head && stored.as_ref() == Some(&new) {
            return Ok(Some(new));
        }
        let bytes = encode_object(&new);
        let size = bytes.len();
        if size > limits.size_max_bytes {
            return Err(KvError::TooLarge {
                size_bytes: size,
                max_bytes: limits.size_max_bytes,
            });
        }
        if size > limits.size_warning_bytes {
            tracing::warn!(bucket = %String::from_utf8_lossy(&k.bucket), key = %String::from_utf8_lossy(&k.key), size, "object larger than object.size.warning_threshold");
        }
        let n = new.contents.len();
        if n > limits.siblings_max {
            return Err(KvError::TooManySiblings(n));
        }
        if n > limits.siblings_warning {
            tracing::warn!(bucket = %String::from_utf8_lossy(&k.bucket), key = %String::from_utf8_lossy(&k.key), siblings = n, "more siblings than object.siblings.warning_threshold");
        }
        let old_terms = stored.as_ref().map(index_terms).unwrap_or_default();
        let new_terms = index_terms(&new);
        let add: Vec<IndexEntry> = new_terms
            .iter()
            .filter(|e| !old_terms.contains(e))
            .cloned()
            .collect();
        let remove: Vec<IndexEntry> = old_terms
            .iter()
            .filter(|e| !new_terms.contains(e))
            .cloned()
            .collect();
        if self.backend.keeps_heads() {
            let head = rill_object::encode_head(&new);
            self.backend
                .put_with_head(k, &bytes, &head, &add, &remove)?;
        } else {
            self.backend.put(k, &bytes, &add, &remove)?;
        }
        self.may_hold.store(true, Ordering::SeqCst);
        self.tree_changed(k, stored.as_ref(), Some(&new));
        Ok(Some(new))
    }

    /// Whether the vnode holds any key. A vnode found empty and not
    /// written since answers without a look at its backend (the handoff
    /// round asks every second for the partitions a node does not own).
    pub fn holds_data(&self) -> Result<bool, KvError> {
        if !self.may_hold.load(Ordering::SeqCst) {
            return Ok(false);
        }
        // Cleared before the look: a write meanwhile sets it again after
        // it stored, so it is never lost. A look that fails sets it again:
        // the next ask looks instead of answering "empty".
        self.may_hold.store(false, Ordering::SeqCst);
        let holds = self.backend().holds_objects().inspect_err(|_| {
            self.may_hold.store(true, Ordering::SeqCst);
        })?;
        if holds {
            self.may_hold.store(true, Ordering::SeqCst);
        }
        Ok(holds)
    }

    /// What a write starts from: the stored head where the backend keeps
    /// one and `head_will_do` accepts it (then `true`), else the object.
    fn stored_for_write(
        &self,
        k: &BKey,
        head_will_do: Option<impl FnOnce(&Object) -> bool>,
    ) -> Result<(Option<Object>, bool), KvError> {
        let Some(head_will_do) = head_will_do else {
            return Ok((self.get(k)?, false));
        };
        if let Some(read) = self.backend.get_head(k) {
            match read? {
                None => return Ok((None, false)),
                // Empty: written without a head (read the object).
                Some(bytes) if bytes.is_empty() => {}
                Some(bytes) => match rill_object::decode_head(&bytes) {
                    Ok(h) if head_will_do(&h.object) => return Ok((Some(h.object), true)),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(partition = self.partition.0, error = %e, "a stored head does not decode; the write reads the object");
                    }
                },
            }
        }
        Ok((self.get(k)?, false))
    }

    /// Every epoch issued so far is retired: a key's next write starts a
    /// new one. Done (durably) before a handoff removes data: a vnode
    /// that dropped a key and later takes an older copy of it back by a
    /// merge must not continue that copy's count (Riak gives such a
    /// vnode a new id; the seeded simulation found the dot reissued).
    pub fn retire_epochs(&self) -> Result<(), KvError> {
        let floor = self.next_epoch.load(Ordering::SeqCst);
        let i = self.partition.0 as usize;
        self.leases
            .write(|t| {
                if let Some(f) = t.floors.get_mut(i) {
                    *f = (*f).max(floor);
                }
            })
            .map_err(|e| KvError::Backend(format!("cannot record the vnode's epoch floor: {e}")))?;
        self.fresh_from.fetch_max(floor, Ordering::SeqCst);
        Ok(())
    }

    /// Removes a tombstone whose clock is still `clock`; true if removed.
    pub fn reap(&self, k: &BKey, clock: &VClock) -> Result<bool, KvError> {
        let _guard = self.lock(k);
        match self.get(k)? {
            Some(o) if o.is_tombstone() && &o.clock == clock => {
                self.backend.delete(k, &index_terms(&o))?;
                self.tree_changed(k, Some(&o), None);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The key epoch of an actor of [`ACTOR_BYTES`] (the last 8 bytes).
/// Actors written before format 2 (`id | run epoch (4) | incarnation
/// (4)`) read as `run epoch << 32 | incarnation`, below every epoch a
/// migrated vnode issues.
pub(crate) fn epoch_of(actor: &[u8]) -> u64 {
    actor
        .get(8..16)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}
