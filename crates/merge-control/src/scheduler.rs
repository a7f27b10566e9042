//! The node-level merge scheduler: one for all Bitcask stores of a node
//! (one store per vnode, all on one filesystem), with a bounded number of
//! merge workers (default 1, as in Riak). Each round it measures usage U,
//! sets the put throttle from it, asks the policy which files to merge and
//! merges the first one not already being merged.

use crate::batch::{batch_for_one_store, merge_budget, merge_need};
use crate::policy::{FileView, Moment, Pick, Policy};
use crate::throttle::{Throttle, ThrottleSettings};
use bitcask::Store;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How filesystem usage U is measured.
#[derive(Clone, Debug, PartialEq)]
pub enum UsageSource {
    /// statvfs of this directory, as `df` reports it.
    Filesystem(PathBuf),
    /// The stores' own bytes against a configured capacity
    /// (`bitcask.capacity`, `sensor.capacity`).
    Capacity { bytes: u64 },
}

pub struct SchedulerSettings {
    pub usage: UsageSource,
    pub policy: Box<dyn Policy>,
    pub throttle: ThrottleSettings,
    /// Merge workers (Riak: 1 per node).
    pub workers: usize,
    /// Pause between rounds when there is nothing to merge.
    pub idle_tick: Duration,
}

/// Running totals an operator can watch.
#[derive(Debug, Default)]
pub struct Metrics {
    usage_ppm: AtomicU64,
    take_threshold_ppm: AtomicU64,
    throttle_us: AtomicU64,
    merges: AtomicU64,
    files_merged: AtomicU64,
    files_deleted_unread: AtomicU64,
    merge_bytes_read: AtomicU64,
    merge_bytes_written: AtomicU64,
    merge_errors: AtomicU64,
}

/// A copy of the metrics at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    pub usage: f64,
    /// D_m of the fisherman (or the classic policy's threshold).
    pub take_threshold: f64,
    pub throttle_delay: Duration,
    pub merges: u64,
    pub files_merged: u64,
    pub files_deleted_unread: u64,
    pub merge_bytes_read: u64,
    pub merge_bytes_written: u64,
    pub merge_errors: u64,
}

fn ppm(x: f64) -> u64 {
    (x.clamp(0.0, 10.0) * 1e6) as u64
}

impl Metrics {
    pub fn snapshot(&self) -> MetricsSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MetricsSnapshot {
            usage: get(&self.usage_ppm) as f64 / 1e6,
            take_threshold: get(&self.take_threshold_ppm) as f64 / 1e6,
            throttle_delay: Duration::from_micros(get(&self.throttle_us)),
            merges: get(&self.merges),
            files_merged: get(&self.files_merged),
            files_deleted_unread: get(&self.files_deleted_unread),
            merge_bytes_read: get(&self.merge_bytes_read),
            merge_bytes_written: get(&self.merge_bytes_written),
            merge_errors: get(&self.merge_errors),
        }
    }
}

struct Shared {
    /// Each store at the index `add_store` gave it; `None` once removed.
    stores: Arc<RwLock<Vec<Option<Arc<Store>>>>>,
    policy: Mutex<Box<dyn Policy>>,
    /// Files merges are working on, with the bytes each merge may write.
    in_flight: Mutex<HashMap<(usize, u32), u64>>,
    usage: UsageSource,
    throttle: Arc<Throttle>,
    metrics: Metrics,
    stop: AtomicBool,
    /// Wakes idle workers when the scheduler stops.
    wake: (Mutex<()>, Condvar),
    idle_tick: Duration,
    started: Instant,
    /// Asked each round whether the node refuses puts for space (its
    /// reserve released): merges then act as at U = 1, whatever U says.
    refusing_puts: OnceLock<PutRefusals>,
    /// For each store, the file last closed early while it may wait for
    /// its merge: a store closes no other early until a merge took it.
    closed_early: Mutex<HashMap<usize, u32>>,
    /// Failed early closings, for a warning that does not repeat each
    /// round.
    close_failures: AtomicU64,
}

/// Whether the node refuses puts for space now, given usage U and the
/// throttle's settings (with them the node may see that space returned
/// and take puts again, whether or not a put arrives).
pub type PutRefusals = Box<dyn Fn(f64, ThrottleSettings) -> bool + Send + Sync>;

/// Runs merges for every store registered with it until dropped.
pub struct MergeScheduler {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl MergeScheduler {
    pub fn start(settings: SchedulerSettings) -> MergeScheduler {
        let stores: Arc<RwLock<Vec<Option<Arc<Store>>>>> = Arc::default();
        let throttle = {
            // Weak: every store holds the throttle (its put gate), so a
            // strong reference back would keep the stores open forever.
            let (source, stores) = (settings.usage.clone(), Arc::downgrade(&stores));
            Arc::new(Throttle::new(
                settings.throttle,
                THROTTLE_REFRESH,
                move || stores.upgrade().map_or(0.0, |s| measure_usage(&source, &s)),
            ))
        };
        let shared = Arc::new(Shared {
            stores,
            policy: Mutex::new(settings.policy),
            in_flight: Mutex::default(),
            usage: settings.usage,
            throttle,
            metrics: Metrics::default(),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
            idle_tick: settings.idle_tick,
            started: Instant::now(),
            refusing_puts: OnceLock::new(),
            closed_early: Mutex::default(),
            close_failures: AtomicU64::new(0),
        });
        let reaps = shared.policy.lock().expect("policy").reaps_dead_files();
        let mut workers: Vec<JoinHandle<()>> = (0..settings.workers.max(1))
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("merge-{i}"))
                    .spawn(move || shared.run())
                    .expect("spawn merge worker")
            })
            .collect();
        if reaps {
            let shared = shared.clone();
            workers.push(
                std::thread::Builder::new()
                    .name("merge-reaper".into())
                    .spawn(move || shared.run_reaper())
                    .expect("spawn merge reaper"),
            );
        }
        MergeScheduler { shared, workers }
    }

    /// The throttle to give every store (`Options::put_gate`).
    pub fn throttle(&self) -> Arc<Throttle> {
        self.shared.throttle.clone()
    }

    /// Asks `refusing` each round whether the node refuses puts for
    /// space. Meanwhile merges act as at U = 1 whatever usage is measured
    /// (a node that released its reserve to deletes and merges may measure
    /// a usage below U_m, where the fisherman would not merge, and never
    /// get back the room puts wait for), taking files at least a quarter
    /// dead, and active files holding dead bytes are closed so merges can
    /// take them (see [`crate::closing`]).
    pub fn watch_put_refusals(&self, refusing: PutRefusals) {
        let _ = self.shared.refusing_puts.set(refusing);
    }

    pub fn add_store(&self, store: Arc<Store>) -> usize {
        let mut stores = self.shared.stores.write().expect("stores");
        stores.push(Some(store));
        stores.len() - 1
    }

    /// Stops merging the store in `dir` (its data is going away) and lets
    /// go of it: no merge starts on it once this is called, and this
    /// returns, with the store, when none runs on it.
    pub fn remove_store(&self, dir: &Path) -> Option<Arc<Store>> {
        let (index, store) = {
            // The slot empties under the in-flight lock, under which every
            // merge is registered after checking its store is still there.
            let _in_flight = self.shared.in_flight.lock().expect("in flight");
            let mut stores = self.shared.stores.write().expect("stores");
            let i = stores
                .iter()
                .position(|s| s.as_ref().is_some_and(|s| s.dir() == dir))?;
            (i, stores[i].take()?)
        };
        while self
            .shared
            .in_flight
            .lock()
            .expect("in flight")
            .keys()
            .any(|&(s, _)| s == index)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(store)
    }

    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.metrics.snapshot()
    }

    /// Usage U now, as the scheduler measures it.
    pub fn usage(&self) -> f64 {
        self.shared.measure_usage()
    }

    /// Bytes merges could give back now: the dead bytes of every sealed
    /// file whose merge fits a merge's budget of the free space (a merge
    /// writes its copies first). Zero means no merge can make room.
    pub fn reclaimable_bytes(&self) -> u64 {
        let stores = self.shared.stores.read().expect("stores").clone();
        let budget = merge_budget(free_bytes(&self.shared.usage, &stores));
        stores
            .iter()
            .flatten()
            .flat_map(|s| s.file_stats())
            .filter(|f| !f.active && merge_need(f) <= budget)
            .map(|f| f.total_bytes.saturating_sub(f.live_bytes))
            .sum()
    }

    /// Runs one decision and merge on the calling thread (tests, tools).
    pub fn run_once(&self) -> bool {
        self.shared.round()
    }
}

impl Drop for MergeScheduler {
    fn drop(&mut self) {
        {
            let _g = self.shared.wake.0.lock().expect("wake");
            self.shared.stop.store(true, Ordering::Relaxed);
        }
        self.shared.wake.1.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            if !self.round() {
                self.idle();
            }
        }
    }

    fn measure_usage(&self) -> f64 {
        measure_usage(&self.usage, &self.stores)
    }

    /// Waits one idle tick, or less when the scheduler stops.
    fn idle(&self) {
        let g = self.wake.0.lock().expect("wake");
        if !self.stop.load(Ordering::Relaxed) {
            let _ = self.wake.1.wait_timeout(g, self.idle_tick);
        }
    }

    /// Deletes fully dead files while the merge workers are busy with
    /// other files: a dead file costs an unlink, not a read, so it must not
    /// wait behind a long merge (the sensor-data paper, §3.0.3).
    fn run_reaper(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            if !self.reap() {
                self.idle();
            }
        }
    }

    /// Deletes the fully dead files of every store no worker is merging.
    /// True when any was deleted.
    fn reap(&self) -> bool {
        let stores = self.stores.read().expect("stores").clone();
        let mut any = false;
        for (i, store) in live(&stores) {
            let dead: Vec<(u32, u64)> = store
                .file_stats()
                .into_iter()
                .filter(|f| !f.active && f.live_bytes == 0)
                .map(|f| (f.file_id, merge_need(&f)))
                .collect();
            if dead.is_empty() {
                continue;
            }
            let picks: Vec<Pick> = {
                let mut in_flight = self.in_flight.lock().expect("in flight");
                if in_flight.keys().any(|&(s, _)| s == i) || !self.present(i) {
                    continue; // a worker holds this store, or it was removed
                }
                // Expired records may need tombstones: only what fits.
                let mut budget = self.budget(&stores, &in_flight);
                let mut fits = Vec::new();
                for &(file_id, need) in &dead {
                    if need <= budget {
                        budget -= need;
                        fits.push((file_id, need));
                    }
                }
                if fits.is_empty() {
                    continue;
                }
                fits.iter()
                    .map(|&(file_id, need)| {
                        in_flight.insert((i, file_id), need);
                        Pick {
                            store: i,
                            file_id,
                            dead_share: 1.0,
                        }
                    })
                    .collect()
            };
            {
                let mut policy = self.policy.lock().expect("policy");
                for p in &picks {
                    policy.merged(p);
                }
            }
            self.merge(store, &picks);
            let mut in_flight = self.in_flight.lock().expect("in flight");
            for p in &picks {
                in_flight.remove(&(i, p.file_id));
            }
            any = true;
        }
        any
    }

    /// One round: measure, throttle, decide, merge one file. True when a
    /// merge ran.
    fn round(&self) -> bool {
        let usage = self.throttle.update();
        let delay = self.throttle.current();
        let m = &self.metrics;
        m.usage_ppm.store(ppm(usage), Ordering::Relaxed);
        m.throttle_us
            .store(delay.as_micros() as u64, Ordering::Relaxed);
        let stores = self.stores.read().expect("stores").clone();
        let settings = self.throttle.settings();
        let refusing = self.refusing_puts.get().is_some_and(|f| f(usage, settings));
        let short = refusing || usage >= settings.low_usage;
        let usage = if refusing { usage.max(1.0) } else { usage };
        if short {
            let threshold = self.policy.lock().expect("policy").take_threshold(usage);
            self.close_early(&stores, threshold);
        }
        let mut needs: HashMap<(usize, u32), u64> = HashMap::new();
        let files: Vec<FileView> = live(&stores)
            .flat_map(|(i, s)| {
                s.file_stats()
                    .into_iter()
                    .filter(|f| !f.active)
                    .map(move |f| (i, f))
            })
            .map(|(i, f)| {
                needs.insert((i, f.file_id), merge_need(&f));
                FileView {
                    store: i,
                    file_id: f.file_id,
                    total_bytes: f.total_bytes,
                    total_keys: f.total_keys,
                    live_bytes: f.live_bytes,
                    live_keys: f.live_keys,
                }
            })
            .collect();
        let batch = {
            let mut policy = self.policy.lock().expect("policy");
            m.take_threshold_ppm
                .store(ppm(policy.take_threshold(usage)), Ordering::Relaxed);
            let mut picks = policy.decide(
                usage,
                &files,
                Moment::new(local_hour(), self.started.elapsed()),
            );
            if refusing {
                // At U = 1 any dead byte would do: not worth a rewrite.
                picks.retain(|p| p.dead_share >= crate::closing::MIN_DEAD_SHARE);
            }
            let mut in_flight = self.in_flight.lock().expect("in flight");
            let budget = self.budget(&stores, &in_flight);
            let room = |i: usize| {
                stores[i]
                    .as_ref()
                    .map_or(0, |s| s.options().max_file_size_bytes)
            };
            let need = |p: &Pick| needs.get(&(p.store, p.file_id)).copied().unwrap_or(0);
            let mut batch = batch_for_one_store(&picks, need, room, budget, &in_flight);
            batch.retain(|p| self.present(p.store));
            for p in &batch {
                in_flight.insert((p.store, p.file_id), need(p));
                policy.merged(p);
            }
            batch
        };
        let Some(first) = batch.first() else {
            return false;
        };
        if let Some(store) = &stores[first.store] {
            self.merge(store, &batch);
        }
        let mut in_flight = self.in_flight.lock().expect("in flight");
        for p in &batch {
            in_flight.remove(&(p.store, p.file_id));
        }
        true
    }

    /// Closes each store's active file that holds dead bytes worth a
    /// merge at `take_threshold` (see [`crate::closing`]), unless the
    /// store's last file closed so still waits for its merge.
    fn close_early(&self, stores: &[Option<Arc<Store>>], take_threshold: f64) {
        let mut closed = self.closed_early.lock().expect("closed early");
        for (i, store) in live(stores) {
            let files = store.file_stats();
            let waiting = closed
                .get(&i)
                .is_some_and(|id| files.iter().any(|f| f.file_id == *id));
            let Some(active) = files.iter().find(|f| f.active) else {
                continue;
            };
            if waiting
                || !crate::closing::worth_closing(
                    active.total_bytes,
                    active.live_bytes,
                    take_threshold,
                )
            {
                continue;
            }
            match store.close_active_file() {
                Ok(true) => {
                    closed.insert(i, active.file_id);
                    tracing::debug!(store = %store.dir().display(), file = active.file_id,
                        "space is short: the active file, holding dead bytes, is closed so a merge can take it");
                }
                Ok(false) => {}
                Err(e) => {
                    let n = self.close_failures.fetch_add(1, Ordering::Relaxed) + 1;
                    if n.is_power_of_two() {
                        tracing::warn!(store = %store.dir().display(), error = %e, failures = n,
                            "space is short: cannot close an active file for a merge");
                    }
                }
            }
        }
    }

    /// Whether store `i` is still registered (checked under the in-flight
    /// lock before a merge of it is registered).
    fn present(&self, i: usize) -> bool {
        self.stores
            .read()
            .expect("stores")
            .get(i)
            .is_some_and(Option::is_some)
    }

    /// What a new merge may write: the free space's budget less what the
    /// merges already running may still write.
    fn budget(&self, stores: &[Option<Arc<Store>>], in_flight: &HashMap<(usize, u32), u64>) -> u64 {
        let running: u64 = in_flight.values().sum();
        merge_budget(free_bytes(&self.usage, stores).saturating_sub(running))
    }

    fn merge(&self, store: &Store, batch: &[Pick]) {
        let m = &self.metrics;
        let ids: Vec<u32> = batch.iter().map(|p| p.file_id).collect();
        match store.merge(&ids) {
            Ok(report) => {
                m.merges.fetch_add(1, Ordering::Relaxed);
                m.files_merged
                    .fetch_add(report.files_deleted.len() as u64, Ordering::Relaxed);
                m.files_deleted_unread
                    .fetch_add(report.files_deleted_unread as u64, Ordering::Relaxed);
                m.merge_bytes_read
                    .fetch_add(report.bytes_read, Ordering::Relaxed);
                m.merge_bytes_written
                    .fetch_add(report.bytes_written, Ordering::Relaxed);
            }
            Err(e) => {
                m.merge_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(store = %store.dir().display(), files = ?ids,
                    error = %e, "merge failed; will try again");
                self.idle();
            }
        }
    }
}

/// How often puts re-measure usage for the throttle, at most.
const THROTTLE_REFRESH: Duration = Duration::from_millis(2);

/// The stores not removed, with their indexes.
fn live(stores: &[Option<Arc<Store>>]) -> impl Iterator<Item = (usize, &Arc<Store>)> {
    stores
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
}

fn measure_usage(source: &UsageSource, stores: &RwLock<Vec<Option<Arc<Store>>>>) -> f64 {
    match source {
        UsageSource::Filesystem(dir) => filesystem_usage(dir).unwrap_or(0.0),
        UsageSource::Capacity { bytes } => {
            let used: u64 = stores
                .read()
                .expect("stores")
                .iter()
                .flatten()
                .map(|s| s.disk_bytes())
                .sum();
            used as f64 / (*bytes).max(1) as f64
        }
    }
}

/// Bytes still free for the stores: what statvfs gives unprivileged
/// users, or the configured capacity less the stores' bytes.
fn free_bytes(source: &UsageSource, stores: &[Option<Arc<Store>>]) -> u64 {
    match source {
        UsageSource::Filesystem(dir) => filesystem_free_bytes(dir).unwrap_or(0),
        UsageSource::Capacity { bytes } => {
            let used: u64 = stores.iter().flatten().map(|s| s.disk_bytes()).sum();
            bytes.saturating_sub(used)
        }
    }
}

/// Bytes available to unprivileged users on the filesystem of `dir`, as
/// `df` shows them.
pub fn filesystem_free_bytes(dir: &Path) -> std::io::Result<u64> {
    let st = statvfs(dir)?;
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

fn statvfs(dir: &Path) -> std::io::Result<libc::statvfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs writes only into the struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Bytes the filesystem of `dir` holds for unprivileged users, used and
/// free (its size less the blocks kept for root): the C_i of eq. 4.
pub fn filesystem_capacity_bytes(dir: &Path) -> std::io::Result<u64> {
    let st = statvfs(dir)?;
    let blocks = (st.f_blocks - st.f_bfree) + st.f_bavail;
    Ok(blocks as u64 * st.f_frsize as u64)
}

/// Usage as `df` shows it: used / (used + available to unprivileged users).
pub fn filesystem_usage(dir: &Path) -> std::io::Result<f64> {
    let st = statvfs(dir)?;
    let used = (st.f_blocks - st.f_bfree) as f64;
    let usable = used + st.f_bavail as f64;
    Ok(if usable > 0.0 { used / usable } else { 1.0 })
}

fn local_hour() -> u8 {
    // SAFETY: time and localtime_r only write into the values we pass.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return 0;
        }
        tm.tm_hour.clamp(0, 23) as u8
    }
}
