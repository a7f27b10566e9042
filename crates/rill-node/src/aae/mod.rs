//! Active anti-entropy on this node (Riak 3's Tictac AAE): the vnodes
//! keep their trees (`vnode::aae`); this part builds them when they are
//! missing or due, runs each owned vnode's exchanges with its neighbours
//! on `tictacaae_exchangetick` (`run`), repairs what they find by a read
//! with read repair, keeps the trees on disk across a clean stop
//! (`files`), and answers `rill admin tictacaae` (docs/cluster.md,
//! "Active anti-entropy").

pub(crate) mod files;
mod fold;
mod run;

pub use fold::{FoldAnswer, FoldQuery};

use crate::config::TictacConfig;
use crate::coordinate::Coordinator;
use crate::replicas::Replicas;
use crate::vnodes::Vnodes;
use rill_aae::Pair;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a stop waits for the schedule's threads (an exchange sees
/// the stop within 200 ms of its wait, a build between two keys).
const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Exchanges running at once on a node, at most (each on its own
/// thread, at most one per vnode).
/// Exchanges mostly wait (the pauses between stages, the other
/// replica); what they cost is the repairs they find.
const MAX_RUNNING: usize = 8;

/// The first exchanges after a start are spread over at most this (or
/// the tick, if shorter): an exchange between replicas in sync reads two
/// 16 KiB roots, and a replica that lost data (a wiped or replaced disk)
/// is found at once instead of a tick later.
const FIRST_WITHIN: Duration = Duration::from_secs(60);

/// What `/stats` shows of anti-entropy (Riak's `tictacaae_*` names).
#[derive(Default)]
pub(crate) struct AaeCounters {
    pub root_compare: AtomicU64,
    pub branch_compare: AtomicU64,
    pub clock_compare: AtomicU64,
    pub not_supported: AtomicU64,
    pub error: AtomicU64,
    /// Keys found different by exchanges (each read to repair it).
    pub exchange_deltas: AtomicU64,
    /// Trees built or built again.
    pub rebuilds: AtomicU64,
    /// Exchanges running now.
    pub running: AtomicU64,
}

/// A vnode's place in the exchange schedule.
struct Plan {
    /// The loop's exchanges still to run (shuffled; refilled when empty).
    queue: Vec<Pair>,
    next_at: Option<Instant>,
    running: bool,
    /// The follow-ups of an exchange that found differences, and the
    /// pair they repeat.
    follow: Option<(Pair, rill_aae::FollowUps)>,
    /// An exchange found differences: the rest of the loop runs at the
    /// pause instead of the tick, until a whole loop finds none.
    catch_up: bool,
    /// Whether this loop found differences so far.
    loop_found: bool,
    /// Whether a loop ran before this one.
    looped: bool,
}

impl Default for Plan {
    /// The first loop after a start runs at the pause: a vnode that lost
    /// data (a wiped disk) compares itself with every neighbour at once,
    /// not one neighbour a tick (its first might be on the same node,
    /// as empty as itself).
    fn default() -> Self {
        Plan {
            queue: Vec::new(),
            next_at: None,
            running: false,
            follow: None,
            catch_up: true,
            loop_found: false,
            looped: false,
        }
    }
}

/// What the schedule last read of the bucket registry.
#[derive(Clone)]
struct RegistrySeen {
    generation: u64,
    /// `Registry::n_val_digest`.
    digest: u64,
    /// The n_vals in use (one loop of pairs per n_val).
    n_vals: Vec<u8>,
}

struct State {
    plans: Vec<Plan>,
    running: usize,
    /// A vnode whose build failed is tried again after this.
    build_retry_at: Vec<Option<Instant>>,
    /// The bucket registry as last seen.
    registry_seen: RegistrySeen,
    /// Partitions asked to rebuild (`rebuild-now`, an n_val changed).
    rebuild_asked: Vec<u32>,
    rebuilding: bool,
    next_rebuild_check: Instant,
    rng: u64,
}

/// This node's anti-entropy (`Node::tictacaae`).
pub struct Aae {
    config: Mutex<TictacConfig>,
    vnodes: Arc<Vnodes>,
    replicas: Arc<Replicas>,
    coordinator: Weak<Coordinator>,
    pub(crate) counters: AaeCounters,
    state: Mutex<State>,
    wake: Condvar,
    stop: AtomicBool,
    /// Where the trees are kept across a clean stop.
    pub(crate) dir: PathBuf,
    /// The schedule's threads, joined when the node stops (they hold
    /// vnodes, whose stores must be closed when `Node` is gone).
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Aae {
    pub(crate) fn new(
        config: TictacConfig,
        vnodes: Arc<Vnodes>,
        replicas: Arc<Replicas>,
        coordinator: Weak<Coordinator>,
        dir: PathBuf,
    ) -> Arc<Aae> {
        let n = vnodes.len();
        let seed = crate::ids::now_us() ^ (std::process::id() as u64) << 32;
        Arc::new(Aae {
            config: Mutex::new(config),
            vnodes,
            replicas,
            coordinator,
            counters: AaeCounters::default(),
            state: Mutex::new(State {
                plans: (0..n).map(|_| Plan::default()).collect(),
                running: 0,
                build_retry_at: vec![None; n],
                registry_seen: RegistrySeen {
                    generation: u64::MAX,
                    digest: 0,
                    n_vals: Vec::new(),
                },
                rebuild_asked: Vec::new(),
                rebuilding: false,
                next_rebuild_check: Instant::now(),
                rng: seed | 1,
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            dir,
            threads: Mutex::new(Vec::new()),
        })
    }

    /// The settings in force.
    pub fn config(&self) -> TictacConfig {
        self.config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the schedule and waits for its threads (an exchange ends at
    /// its next stage or key, a build at its next key), at most
    /// [`STOP_WITHIN`]: a thread still waiting then (a wait whose timer
    /// no runtime drives any more, or a scan of a very large vnode) is
    /// left behind with a warning rather than holding up the node's stop
    /// for ever.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_all();
        let deadline = std::time::Instant::now() + STOP_WITHIN;
        loop {
            let taken =
                std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
            if taken.is_empty() {
                return;
            }
            for t in taken {
                while !t.is_finished() && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                if t.is_finished() {
                    let _ = t.join();
                } else {
                    tracing::warn!(thread = ?t.thread().name(), "an anti-entropy thread did not stop in time; the node stops without it");
                }
            }
        }
    }

    /// Runs `f` on a thread of the schedule, `stop` joins it.
    pub(crate) fn spawn_thread(
        &self,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<()> {
        let h = std::thread::Builder::new().name(name.into()).spawn(f)?;
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        threads.retain(|t| !t.is_finished());
        threads.push(h);
        Ok(())
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Asks every vnode holding data to build its trees again now
    /// (`rill admin tictacaae rebuild-now`); returns how many.
    pub fn rebuild_now(&self) -> usize {
        let parts: Vec<u32> = self
            .vnodes
            .iter()
            .filter(|v| v.aae().is_some())
            .filter(|v| v.holds_data().unwrap_or(true))
            .map(|v| v.partition.0)
            .collect();
        let n = parts.len();
        let mut s = self.state();
        for p in parts {
            if !s.rebuild_asked.contains(&p) {
                s.rebuild_asked.push(p);
            }
        }
        drop(s);
        self.wake.notify_all();
        n
    }

    /// Changes a setting while the node runs (`rill admin tictacaae
    /// exchangetick VAL` and the like); every vnode's next exchange is
    /// spread again as after a start (within a minute, or the tick).
    pub fn set(&self, name: &str, value: u64) -> Result<(), String> {
        let mut c = self.config.lock().unwrap_or_else(|e| e.into_inner());
        match name {
            "exchangetick" if value > 0 => c.exchange_tick = Duration::from_millis(value),
            "rebuildtick" if value > 0 => c.rebuild_tick = Duration::from_millis(value),
            "maxresults" if value > 0 => c.max_results = value.min(1 << 20) as u32,
            "rangeboost" if value > 0 => c.range_boost = value.min(1024) as u32,
            "repairloops" => c.repair_loops = value.min(1024) as u32,
            "exchangetick" | "rebuildtick" | "maxresults" | "rangeboost" => {
                return Err(format!("tictacaae_{name} must be above 0"))
            }
            other => return Err(format!("no tictacaae setting {other:?} (exchangetick, rebuildtick, maxresults, rangeboost, repairloops)")),
        }
        drop(c);
        let mut s = self.state();
        for p in &mut s.plans {
            p.next_at = None;
        }
        drop(s);
        self.wake.notify_all();
        Ok(())
    }

    /// A setting's value, as `set` names it.
    pub fn get(&self, name: &str) -> Option<u64> {
        let c = self.config();
        Some(match name {
            "exchangetick" => c.exchange_tick.as_millis() as u64,
            "rebuildtick" => c.rebuild_tick.as_millis() as u64,
            "maxresults" => u64::from(c.max_results),
            "rangeboost" => u64::from(c.range_boost),
            "repairloops" => u64::from(c.repair_loops),
            _ => return None,
        })
    }

    /// Each vnode's trees: partition, status, when last built, which
    /// preference lists they cover (`treestatus`).
    pub fn tree_status(&self) -> Vec<TreeStatus> {
        self.vnodes
            .iter()
            .filter_map(|v| {
                let a = v.aae()?;
                let t = a.trees();
                let status = t.status();
                let built_at_ms = match status {
                    rill_aae::Status::Built { at_ms } | rill_aae::Status::Rebuilding { at_ms } => {
                        Some(at_ms)
                    }
                    _ => None,
                };
                Some(TreeStatus {
                    partition: v.partition.0,
                    status: status.name(),
                    built_at_ms,
                    trees: t.index_ns().len(),
                })
            })
            .collect()
    }
}

/// One vnode's line of `treestatus`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeStatus {
    pub partition: u32,
    pub status: &'static str,
    pub built_at_ms: Option<u64>,
    /// Trees kept (one per preference list with keys).
    pub trees: usize,
}

impl Aae {
    /// Writes every vnode's built trees for the next start (a clean
    /// stop, after every write is durable).
    pub(crate) fn save_trees(&self, ring: &rill_ring::Ring) {
        for v in self.vnodes.iter() {
            let Some(a) = v.aae() else { continue };
            let index = ring.index_decimal(v.partition);
            let saved = files::save(&self.dir, &index, &a.trees());
            match saved {
                Ok(Some(path)) => a.saved_to(path),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(partition = v.partition.0, error = %e, "cannot keep the anti-entropy trees; the next start builds them again");
                }
            }
        }
        if let Err(e) = files::sync_dir(&self.dir) {
            tracing::warn!(error = %e, "cannot sync the anti-entropy trees' directory; the next start may build them again");
        }
    }
}

/// The running thread of the schedule.
pub(crate) fn spawn(aae: &Arc<Aae>) -> std::io::Result<()> {
    let weak = Arc::downgrade(aae);
    aae.spawn_thread("rill-aae", move || run::schedule(weak))
}
