//! Backend migration, not partition migration: a node's data moves to
//! another storage backend (`rill admin backend-migrate TO`), one
//! partition at a time while the node serves; partitions moving between
//! nodes are handoff's. The operators of "Riak – from Bitcask to LevelDB"
//! moved their Bitcask nodes to LevelDB by hand.
//!
//! For each partition: the target's leftovers are dropped and its backend
//! opened; from then on every write of the vnode reaches both backends
//! (`Switchable`); each key is copied as stored under the key's lock, so
//! no write races the copy; the target is synced; the partition is
//! recorded as moved in `meta/backend_migration.json` (written atomically)
//! at the moment the target takes over, no request being inside the
//! vnode's backend then; and the source's data of the partition is
//! dropped. A crash before the record leaves the partition on the source
//! (the attempt starts over); after it, on the target (the source's
//! leftovers are dropped when the migration resumes at the next start).
//! When every partition has moved the record says `done`, and the node
//! opens the target backend from then on, whatever `storage_backend`
//! says (a warning asks to change it).

mod error;
mod record;

pub use crate::vnode::switch::CopyError;
pub(crate) use crate::vnode::switch::SwitchError;
pub use error::MigrateError;
pub(crate) use record::Record;
pub use record::RecordError;

use crate::backends::{Opening, Resources};
use crate::buckets::Buckets;
use crate::config::{BackendKind, NodeConfig};
use crate::error::KvError;
use crate::meta::MetaDir;
use crate::vnodes::Vnodes;
use rill_backend::{BKey, Backend};
use rill_ring::Partition;
use rill_ring::Ring;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The node's configuration for its vnodes' backends and, while a
/// migration runs, the target's: partitions not yet moved open
/// `from`'s backend, moved ones `to`'s. After a finished migration the
/// node opens `to`'s.
pub(crate) fn effective(
    mut config: NodeConfig,
    record: Option<&Record>,
) -> Result<(NodeConfig, Option<NodeConfig>), RecordError> {
    let Some(r) = record else {
        return Ok((config, None));
    };
    let (from, to) = (r.source_kind()?, r.target_kind()?);
    if r.done {
        if config.backend != to {
            tracing::warn!(storage_backend = config.backend.name(), data_on = to.name(),
                "this node's data was moved to {} by a backend migration and is served from there; set storage_backend = {} in the config file", to.name(), to.name());
        }
        config.backend = to;
        return Ok((config, None));
    }
    if config.backend != from && config.backend != to {
        tracing::warn!(storage_backend = config.backend.name(),
            "a backend migration from {} to {} is under way: the node serves from those two, whatever storage_backend says", from.name(), to.name());
    }
    config.backend = from;
    let mut target = config.clone();
    target.backend = to;
    Ok((config, Some(target)))
}

/// How far a migration is, for `rill admin backend-migrate status`.
#[derive(Clone, Debug)]
pub struct MigrationStatus {
    /// `none`, `running`, `done`, `failed`, or `stopped` (unfinished,
    /// not running, no error: before a resume starts).
    pub state: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub partitions: u32,
    pub partitions_moved: u32,
    /// The partition being copied now (its number on the ring).
    pub copying: Option<u32>,
    /// Keys and bytes copied in this run of the node.
    pub keys_copied: u64,
    pub bytes_copied: u64,
    pub error: Option<String>,
}

impl MigrationStatus {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "state": self.state,
            "from": self.from,
            "to": self.to,
            "partitions": self.partitions,
            "partitions_moved": self.partitions_moved,
            "copying": self.copying,
            "keys_copied": self.keys_copied,
            "bytes_copied": self.bytes_copied,
            "error": self.error,
        })
    }
}

#[derive(Default)]
struct Progress {
    keys: AtomicU64,
    bytes: AtomicU64,
}

#[derive(Default)]
struct State {
    record: Option<Record>,
    running: bool,
    /// The partition being copied now.
    copying: Option<u32>,
    error: Option<String>,
}

/// The node's backend migration: its record, progress, and the target's
/// resources once opened.
pub(crate) struct Migrations {
    state: Mutex<State>,
    progress: Progress,
    target: OnceLock<(NodeConfig, Resources)>,
    /// Keys per second at most (0: as fast as it goes).
    rate: AtomicU64,
}

impl Migrations {
    pub fn new(record: Option<Record>, target: Option<(NodeConfig, Resources)>) -> Migrations {
        Migrations {
            state: Mutex::new(State {
                record,
                ..State::default()
            }),
            progress: Progress::default(),
            target: target.map_or_else(OnceLock::new, OnceLock::from),
            rate: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admission of writes by the target's free space.
    pub fn admit_write(&self) -> Result<(), KvError> {
        match self.target.get() {
            Some((_, res)) => res.admit_write(),
            None => Ok(()),
        }
    }

    pub fn status(&self, partitions: u32) -> MigrationStatus {
        let s = self.state();
        let r = s.record.as_ref();
        MigrationStatus {
            state: match (r, s.running, &s.error) {
                (None, _, _) => "none",
                (Some(r), _, _) if r.done => "done",
                (_, true, _) => "running",
                (_, false, Some(_)) => "failed",
                _ => "stopped",
            }
            .into(),
            from: r.map(|r| r.from.clone()),
            to: r.map(|r| r.to.clone()),
            partitions,
            partitions_moved: r.map_or(0, |r| r.moved.len() as u32),
            copying: s.copying,
            keys_copied: self.progress.keys.load(Ordering::Relaxed),
            bytes_copied: self.progress.bytes.load(Ordering::Relaxed),
            error: s.error.clone(),
        }
    }
}

/// Moves this node's data to another backend while it serves (`rill
/// admin backend-migrate`), partition by partition.
pub(crate) struct Migrator {
    config: NodeConfig,
    ring: Ring,
    meta: MetaDir,
    buckets: Arc<Buckets>,
    vnodes: Arc<Vnodes>,
}

impl Migrator {
    pub fn new(
        config: NodeConfig,
        ring: Ring,
        meta: MetaDir,
        buckets: Arc<Buckets>,
        vnodes: Arc<Vnodes>,
    ) -> Arc<Migrator> {
        Arc::new(Migrator {
            config,
            ring,
            meta,
            buckets,
            vnodes,
        })
    }

    /// Starts moving this node's data to backend `to`; `keys_per_second`
    /// paces the copy (0: unpaced).
    pub fn start_backend_migration(
        self: &Arc<Self>,
        to: &str,
        keys_per_second: u64,
    ) -> Result<MigrationStatus, KvError> {
        let bad = |m: String| Err(KvError::BadRequest(m));
        let Some(kind) = BackendKind::from_name(to) else {
            return bad(format!(
                "no backend {to:?}: a node's data can move to bitcask, leveldb or leveled"
            ));
        };
        match kind {
            BackendKind::Memory => {
                return bad("the memory backend keeps nothing across a restart: a node's data does not move there".into())
            }
            BackendKind::Multi => {
                return bad("a node's data moves to one backend (bitcask, leveldb or leveled), not to multi".into())
            }
            _ => {}
        }
        let mut s = self.vnodes.migration.state();
        if s.running {
            return bad("a backend migration is already running on this node".into());
        }
        // The target opened in this run and its migration done.
        if self.vnodes.migration.target.get().is_some() && s.record.as_ref().is_some_and(|r| r.done)
        {
            return bad("a backend migration finished on this node since it started: restart the node before moving its data again".into());
        }
        let resume = s.record.as_ref().is_some_and(|r| !r.done && r.to == to);
        if !resume {
            if s.record.as_ref().is_some_and(|r| !r.done) {
                return bad("a backend migration to another backend is unfinished on this node: resume it first".into());
            }
            if self.config.backend == kind {
                return bad(format!("this node's data is already on {to}"));
            }
            let mut target = self.config.clone();
            target.backend = kind;
            let sources = crate::backends::data_dirs(&self.config);
            if let Some(shared) = crate::backends::data_dirs(&target)
                .into_iter()
                .find(|t| sources.iter().any(|s| s.starts_with(t) || t.starts_with(s)))
            {
                let name = shared.file_name().unwrap_or_default().to_string_lossy();
                return bad(format!("{to} would keep its data where this node's backends keep theirs ({name:?} in the data directory or its configured root): set {to}'s data_root apart first"));
            }
            let res = Resources::open(&target).map_err(|e| KvError::Backend(e.to_string()))?;
            let _ = self.vnodes.migration.target.set((target, res));
            s.record = Some(Record::new(self.config.backend.name(), to));
        }
        if let Some(r) = s.record.as_mut() {
            r.keys_per_second = keys_per_second;
            r.save(&self.meta)
                .map_err(|e| KvError::Backend(e.to_string()))?;
        }
        self.vnodes
            .migration
            .rate
            .store(keys_per_second, Ordering::Relaxed);
        s.running = true;
        s.error = None;
        drop(s);
        self.spawn_migration()?;
        Ok(self.backend_migration_status())
    }

    pub fn backend_migration_status(&self) -> MigrationStatus {
        self.vnodes.migration.status(self.ring.size())
    }

    /// Resumes an unfinished migration found at start.
    pub(crate) fn resume_backend_migration(self: &Arc<Self>) -> Result<(), KvError> {
        {
            let mut s = self.vnodes.migration.state();
            let Some(r) = s.record.as_ref().filter(|r| !r.done) else {
                return Ok(());
            };
            self.vnodes
                .migration
                .rate
                .store(r.keys_per_second, Ordering::Relaxed);
            s.running = true;
        }
        tracing::info!("resuming the backend migration found at start");
        self.spawn_migration()
    }

    fn spawn_migration(self: &Arc<Self>) -> Result<(), KvError> {
        let node = self.clone();
        std::thread::Builder::new()
            .name("rill-migrate".into())
            .spawn(move || {
                let result = node.run_migration();
                let mut s = node.vnodes.migration.state();
                s.running = false;
                s.copying = None;
                match result {
                    Ok(()) => tracing::info!("backend migration done: every partition moved"),
                    Err(e) => {
                        tracing::error!(error = %e, "backend migration stopped; `rill admin backend-migrate TO` resumes it");
                        s.error = Some(e.to_string());
                    }
                }
            })
            .map(|_| ())
            .map_err(|e| KvError::Backend(format!("cannot start the migration thread: {e}")))
    }

    fn run_migration(&self) -> Result<(), MigrateError> {
        let (tc, tr) = self
            .vnodes
            .migration
            .target
            .get()
            .ok_or(MigrateError::TargetNotOpen)?;
        let source = Opening {
            config: &self.config,
            ring: &self.ring,
            res: &self.vnodes.res,
            registry: &self.buckets.registry,
        };
        let target = Opening {
            config: tc,
            ring: &self.ring,
            res: tr,
            registry: &self.buckets.registry,
        };
        for p in self.ring.partitions() {
            let moved = self
                .vnodes
                .migration
                .state()
                .record
                .as_ref()
                .is_some_and(|r| r.moved.contains(&p.0));
            if moved {
                // What a crash may have left after the partition moved.
                source.drop_data(p)?;
                continue;
            }
            self.vnodes.migration.state().copying = Some(p.0);
            self.migrate_partition(p, &source, &target)?;
        }
        let mut s = self.vnodes.migration.state();
        let r = s.record.as_mut().ok_or(MigrateError::NoRecord)?;
        r.done = true;
        Ok(r.save(&self.meta)?)
    }

    fn migrate_partition(
        &self,
        p: Partition,
        source: &Opening,
        target: &Opening,
    ) -> Result<(), MigrateError> {
        let vnode = self.vnodes.at_partition(p).clone();
        let sw = vnode.switchable();
        // A copy left attached by a failed commit, and the target's
        // leftovers of an attempt that did not finish, are not this copy.
        sw.abandon_copy();
        target.drop_data(p)?;
        let to: Arc<dyn Backend> = Arc::from(target.backend(p)?);
        sw.begin_copy(to.clone());
        if let Err(e) = self.copy_partition(&vnode, to.as_ref()) {
            sw.abandon_copy();
            drop(to);
            target.drop_data(p)?;
            return Err(e);
        }
        drop(to);
        let meta = &self.meta;
        let old = sw.switch_to_copy(|| {
            let mut s = self.vnodes.migration.state();
            let mut next = s.record.clone().ok_or(MigrateError::NoRecord)?;
            next.moved.insert(p.0);
            next.save(meta)?;
            s.record = Some(next);
            Ok::<_, MigrateError>(())
        });
        let old = match old {
            Ok(old) => old,
            Err(SwitchError::Copy(source)) => {
                sw.abandon_copy();
                target.drop_data(p)?;
                return Err(MigrateError::Copy {
                    partition: p.0,
                    source,
                });
            }
            Err(SwitchError::Commit(e)) => {
                return Err(MigrateError::Commit {
                    partition: p.0,
                    source: Box::new(e),
                })
            }
        };
        // Requests that took the old backend before the switch (a slow
        // listing) finish first; if one does not, the migration stops and
        // its next run drops this partition's old data.
        let deadline = Instant::now() + Duration::from_secs(600);
        while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if Arc::strong_count(&old) > 1 {
            return Err(MigrateError::OldBackendInUse { partition: p.0 });
        }
        drop(old);
        source.drop_data(p)?;
        tracing::info!(partition = p.0, "partition moved to the new backend");
        Ok(())
    }

    /// Copies every key of the vnode's serving backend to `to`.
    fn copy_partition(
        &self,
        vnode: &crate::vnode::Vnode,
        to: &dyn Backend,
    ) -> Result<(), MigrateError> {
        let partition = vnode.partition.0;
        let serving = vnode.switchable().serving();
        let mut buckets = Vec::new();
        serving
            .fold_buckets(&mut |t, b| {
                buckets.push((t.to_vec(), b.to_vec()));
                true
            })
            .map_err(|source| MigrateError::ListBuckets { partition, source })?;
        let progress = &self.vnodes.migration.progress;
        let started = Instant::now();
        let start_keys = progress.keys.load(Ordering::Relaxed);
        for (t, b) in buckets {
            let mut failed = None;
            serving
                .fold_keys(
                    &t,
                    &b,
                    &mut |key| match vnode.copy_key(&BKey::new(&t, &b, key), to) {
                        Ok(bytes) => {
                            progress.keys.fetch_add(1, Ordering::Relaxed);
                            progress.bytes.fetch_add(bytes, Ordering::Relaxed);
                            self.pace(started, progress.keys.load(Ordering::Relaxed) - start_keys);
                            true
                        }
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                    },
                )
                .map_err(|source| MigrateError::ListKeys { partition, source })?;
            if let Some(source) = failed {
                return Err(MigrateError::CopyKey { partition, source });
            }
            if !vnode.switchable().copy_complete() {
                return Err(MigrateError::CopyIncomplete { partition });
            }
        }
        Ok(())
    }

    /// Waits as long as `keys` copied since `started` run ahead of the rate.
    fn pace(&self, started: Instant, keys: u64) {
        let rate = self.vnodes.migration.rate.load(Ordering::Relaxed);
        if rate == 0 {
            return;
        }
        let due = Duration::from_secs_f64(keys as f64 / rate as f64);
        if let Some(ahead) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
}
