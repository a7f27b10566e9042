//! Storage whose block stores run hooks, set later: before each put,
//! before each get, and when a store is dropped (tests of what a read or
//! a stop does meanwhile).

use super::*;
use crate::storage::{BlockStore, Storage};
use std::sync::OnceLock;

pub(super) type Hook = Arc<OnceLock<Box<dyn Fn() + Send + Sync>>>;

#[derive(Clone, Default)]
pub(super) struct Hooks {
    pub before_put: Hook,
    pub before_get: Hook,
    pub on_drop: Hook,
    /// Set: every read that must not wait would (a cold page cache).
    pub would_block: Arc<OnceLock<()>>,
}

fn run(h: &Hook) {
    if let Some(f) = h.get() {
        f();
    }
}

struct HookedStorage {
    inner: BitcaskStorage,
    hooks: Hooks,
}

struct HookedStore {
    inner: Arc<dyn BlockStore>,
    hooks: Hooks,
}

impl Drop for HookedStore {
    fn drop(&mut self) {
        run(&self.hooks.on_drop);
    }
}

impl BlockStore for HookedStore {
    fn put(&self, key: &[u8], value: &[u8], expires_at_s: Option<u64>) -> io::Result<()> {
        run(&self.hooks.before_put);
        self.inner.put(key, value, expires_at_s)
    }
    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        run(&self.hooks.before_get);
        self.inner.get(key)
    }
    fn try_get(&self, key: &[u8]) -> Option<io::Result<Option<Vec<u8>>>> {
        if self.hooks.would_block.get().is_some() {
            return None;
        }
        run(&self.hooks.before_get);
        self.inner.try_get(key)
    }
    fn contains(&self, key: &[u8]) -> bool {
        self.inner.contains(key)
    }
    fn fold(&self, visit: &mut dyn FnMut(&[u8], &[u8])) -> io::Result<()> {
        self.inner.fold(visit)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    fn seal(&self) -> io::Result<()> {
        self.inner.seal()
    }
}

impl Storage for HookedStorage {
    fn catalog(&self) -> io::Result<Arc<dyn BlockStore>> {
        self.inner.catalog()
    }
    fn shard(&self, db: &str, home: u32) -> io::Result<Arc<dyn BlockStore>> {
        Ok(Arc::new(HookedStore {
            inner: self.inner.shard(db, home)?,
            hooks: self.hooks.clone(),
        }))
    }
    fn shards(&self) -> io::Result<Vec<(String, u32)>> {
        self.inner.shards()
    }
    fn create(&self, db: &str) -> io::Result<()> {
        self.inner.create(db)
    }
    fn databases(&self) -> io::Result<Vec<String>> {
        self.inner.databases()
    }
    fn remove_shard(&self, db: &str, home: u32) -> io::Result<()> {
        self.inner.remove_shard(db, home)
    }
}

/// An engine on `rig`'s disk whose databases' stores run `Hooks`.
pub(super) fn hooked(rig: &Rig) -> (Engine, Hooks) {
    let store_opts = bitcask::Options {
        vfs: Arc::new(rig.vfs.clone()),
        clock: Arc::new(rig.clock.clone()),
        max_file_size_bytes: 8192,
        ..bitcask::Options::default()
    };
    let hooks = Hooks::default();
    let storage = HookedStorage {
        inner: BitcaskStorage::new(
            Path::new("/sensor/data"),
            store_opts,
            Box::new(|_| {}),
            Box::new(|_| {}),
        ),
        hooks: hooks.clone(),
    };
    let (e, _) = Engine::open(
        Path::new("/sensor/wal"),
        rig.opts.clone(),
        Arc::new(storage),
        T0,
    )
    .unwrap();
    (e, hooks)
}
