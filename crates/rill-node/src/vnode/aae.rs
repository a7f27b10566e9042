//! A vnode's anti-entropy trees (`rill_aae::Trees`): changed by every
//! write of the vnode under the key's lock, answering exchanges (root,
//! branches, and the keys and clocks of segments), rebuilt from the
//! store while writes go on, kept on disk only across a clean stop
//! (docs/cluster.md, "Active anti-entropy").

use crate::buckets::Buckets;
use crate::error::KvError;
use crate::vnode::Vnode;
use rill_aae::{segment_of, sorted_clock_hash, Answer, Ask, IndexN, Trees};
use rill_backend::BKey;
use rill_object::{Object, VClock};
use rill_ring::Ring;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// Where a key's tree is: its preference list (first partition, n_val)
/// and its ring hash.
pub(crate) struct KeyPlace {
    pub ring_size: u32,
    pub buckets: Arc<Buckets>,
}

impl KeyPlace {
    fn with_n(&self, k: &BKey, n: u32) -> (IndexN, [u8; 20]) {
        let hash = rill_ring::key_hash(&k.bucket_type, &k.bucket, &k.key);
        let first = Ring::responsible_in(self.ring_size, &hash).0;
        let n = n.clamp(1, self.ring_size.min(255));
        (IndexN { first, n: n as u8 }, hash)
    }
}

/// The n_vals of the buckets a vnode was last written in, while the
/// bucket registry does not change: a write looks its bucket up here
/// instead of in the registry.
#[derive(Default)]
struct NvalMemo {
    generation: u64,
    entries: Vec<(Vec<u8>, Vec<u8>, u32)>,
}

/// Buckets a memo keeps (then it starts again).
const MEMO_BUCKETS: usize = 32;

impl KeyPlace {
    fn of_memo(&self, k: &BKey, memo: &Mutex<NvalMemo>) -> (IndexN, [u8; 20]) {
        let generation = self.buckets.generation();
        let mut m = memo.lock().unwrap_or_else(|e| e.into_inner());
        if m.generation != generation {
            m.generation = generation;
            m.entries.clear();
        }
        let n = match m
            .entries
            .iter()
            .find(|(t, b, _)| *t == k.bucket_type && *b == k.bucket)
        {
            Some((_, _, n)) => *n,
            None => {
                let n = self.buckets.n_val_of(&k.bucket_type, &k.bucket);
                if m.entries.len() >= MEMO_BUCKETS {
                    m.entries.clear();
                }
                m.entries.push((k.bucket_type.clone(), k.bucket.clone(), n));
                n
            }
        };
        drop(m);
        self.with_n(k, n)
    }
}

/// A clock's hash as the trees take it (a clock keeps its entries in
/// actor order).
pub(crate) fn clock_of(c: &VClock) -> u32 {
    sorted_clock_hash(c.entries().map(|(a, n, _)| (a.as_slice(), n)))
}

/// A vnode's trees and how it places keys in them.
pub(crate) struct VnodeAae {
    trees: Mutex<Trees>,
    place: Arc<KeyPlace>,
    /// Where the trees were written at a stop; a write after that (a
    /// read repair finishing late) removes the file, which no longer
    /// matches the store.
    saved: Mutex<Option<std::path::PathBuf>>,
    any_saved: std::sync::atomic::AtomicBool,
    nvals: Mutex<NvalMemo>,
}

impl VnodeAae {
    pub fn new(trees: Trees, place: Arc<KeyPlace>) -> VnodeAae {
        VnodeAae {
            trees: Mutex::new(trees),
            place,
            saved: Mutex::new(None),
            any_saved: Default::default(),
            nvals: Mutex::default(),
        }
    }

    /// The trees were written to `path` at a stop.
    pub fn saved_to(&self, path: std::path::PathBuf) {
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
        self.any_saved
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn trees(&self) -> MutexGuard<'_, Trees> {
        self.trees.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `k` changed from `old` to `new` in the store (called under the
    /// key's lock, after the store took it).
    /// Where `k` is: its preference list and ring hash.
    fn place(&self, k: &BKey) -> (IndexN, [u8; 20]) {
        self.place.of_memo(k, &self.nvals)
    }

    pub fn changed(&self, k: &BKey, old: Option<&VClock>, new: Option<&VClock>) {
        let (index_n, hash) = self.place(k);
        let mut trees = self.trees();
        // The key's identity matters only to a running build.
        let id = if trees.rebuilding() {
            crate::wire::encode_key(k)
        } else {
            Vec::new()
        };
        trees.write(&id, index_n, &hash, old.map(clock_of), new.map(clock_of));
        drop(trees);
        if self.any_saved.load(std::sync::atomic::Ordering::SeqCst) {
            if let Some(p) = self.saved.lock().unwrap_or_else(|e| e.into_inner()).take() {
                tracing::info!(file = %p.display(), "a write after the anti-entropy trees were kept: they are removed and built again at the next start");
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

impl Vnode {
    /// Tells the trees, if kept, that `k` changed.
    pub(crate) fn tree_changed(&self, k: &BKey, old: Option<&Object>, new: Option<&Object>) {
        if let Some(a) = &self.aae {
            a.changed(k, old.map(|o| &o.clock), new.map(|o| &o.clock));
        }
    }

    /// The vnode's trees, when anti-entropy is active.
    pub(crate) fn aae(&self) -> Option<&VnodeAae> {
        self.aae.as_ref()
    }

    /// An exchange's question; `None` when anti-entropy is not active
    /// here or the trees are not built yet (Riak's `not_supported`).
    pub(crate) fn aae_answer(&self, index_n: IndexN, ask: &Ask) -> Result<Option<Answer>, KvError> {
        let Some(a) = &self.aae else { return Ok(None) };
        match ask {
            Ask::Root => Ok(a.trees().root(index_n).map(Answer::Root)),
            Ask::Branches(ids) => Ok(a.trees().branches(index_n, ids).map(Answer::Branches)),
            Ask::Clocks(segments) => Ok(self.segment_clocks(index_n, segments)?.map(|keys| {
                Answer::Clocks(
                    keys.iter()
                        .map(|(k, c)| (crate::wire::encode_key(k), clock_of(c)))
                        .collect(),
                )
            })),
        }
    }

    /// The keys of `index_n`'s tree in `segments`, with their clocks,
    /// sorted; `None` when anti-entropy is not active here or the trees
    /// are not built yet. A scan of the vnode's keys.
    pub(crate) fn segment_clocks(
        &self,
        index_n: IndexN,
        segments: &[u32],
    ) -> Result<Option<Vec<(BKey, VClock)>>, KvError> {
        let Some(a) = &self.aae else { return Ok(None) };
        if !a.trees().is_built() {
            return Ok(None);
        }
        let wanted: HashSet<u32> = segments.iter().copied().collect();
        let mut out = Vec::new();
        for k in self.all_keys()? {
            let (i, hash) = a.place(&k);
            if i != index_n || !wanted.contains(&segment_of(&hash)) {
                continue;
            }
            if let Some(clock) = self.stored_clock(&k)? {
                out.push((k, clock));
            }
        }
        Ok(Some(out))
    }

    /// Builds the trees again from the store while writes go on; the
    /// old trees answer meanwhile (if built). `now_ms` stamps the build;
    /// the build is given up (false) when `keep_going` says so.
    pub(crate) fn rebuild_trees(
        &self,
        now_ms: impl FnOnce() -> u64,
        keep_going: impl Fn() -> bool,
    ) -> Result<bool, KvError> {
        let Some(a) = &self.aae else { return Ok(false) };
        a.trees().start_rebuild();
        let keys = match self.all_keys() {
            Ok(k) => k,
            Err(e) => {
                a.trees().abandon_rebuild();
                return Err(e);
            }
        };
        for k in keys {
            if !keep_going() {
                a.trees().abandon_rebuild();
                return Ok(false);
            }
            let (index_n, hash) = a.place(&k);
            let _guard = self.lock(&k);
            let clock = match self.stored_clock(&k) {
                Ok(c) => c,
                Err(e) => {
                    a.trees().abandon_rebuild();
                    return Err(e);
                }
            };
            let id = crate::wire::encode_key(&k);
            a.trees()
                .rebuild_visit(&id, index_n, &hash, clock.as_ref().map(clock_of));
        }
        a.trees().finish_rebuild(now_ms());
        Ok(true)
    }

    /// Every key the vnode holds, bucket by bucket, in the backend's
    /// order (a multi-backend may visit a key twice).
    pub(crate) fn each_key(&self, mut visit: impl FnMut(BKey)) -> Result<(), KvError> {
        let b = self.backend();
        let mut buckets = Vec::new();
        b.fold_buckets(&mut |t, bucket| {
            buckets.push((t.to_vec(), bucket.to_vec()));
            true
        })?;
        for (t, bucket) in buckets {
            b.fold_keys(&t, &bucket, &mut |k| {
                visit(BKey::new(&t, &bucket, k));
                true
            })?;
        }
        Ok(())
    }

    /// Every key the vnode holds, each once.
    pub(crate) fn all_keys(&self) -> Result<Vec<BKey>, KvError> {
        let mut keys = Vec::new();
        self.each_key(|k| keys.push(k))?;
        keys.sort_unstable_by(|a, b| {
            (&a.bucket_type, &a.bucket, &a.key).cmp(&(&b.bucket_type, &b.bucket, &b.key))
        });
        keys.dedup();
        Ok(keys)
    }

    /// A stored key's clock, from its head where the backend keeps one.
    /// An object that does not decode is left out of the trees (with a
    /// warning): its clock is unknown, and a read of it fails as it
    /// would without anti-entropy.
    fn stored_clock(&self, k: &BKey) -> Result<Option<VClock>, KvError> {
        if let Some(read) = self.backend().get_head(k) {
            match read? {
                None => return Ok(None),
                Some(bytes) if bytes.is_empty() => {}
                Some(bytes) => {
                    if let Ok(h) = rill_object::decode_head(&bytes) {
                        return Ok(Some(h.object.clock));
                    }
                }
            }
        }
        let Some(bytes) = self.backend().get(k)? else {
            return Ok(None);
        };
        match rill_object::decode_object_shared(&bytes) {
            Ok(o) => Ok(Some(o.clock)),
            Err(e) => {
                tracing::warn!(partition = self.partition.0, error = %e, "a stored object that does not decode is left out of the anti-entropy trees");
                Ok(None)
            }
        }
    }
}
