//! Which files to merge, and in what order: pure decisions from file
//! statistics and filesystem usage U (the sensor-data paper, sections 2-3).
//!
//! - [`Classic`]: Riak's Bitcask triggers and thresholds with Riak's
//!   defaults, kept so the difference can be measured.
//! - [`Fisherman`] (the default): merge only when U > U_m, highest dead
//!   share D first, files with D = 1 at any U, and take a file when
//!   D >= D_m = min(1 - H, ewma(D taken)) with hunger H = (U - U_m)/(1 - U_m).

use std::collections::BTreeMap;
use std::time::Duration;

/// One closed data file as the policies see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FileView {
    /// Which store (vnode) the file belongs to.
    pub store: usize,
    pub file_id: u32,
    pub total_bytes: u64,
    pub total_keys: u64,
    /// Live bytes and keys, expired records excluded.
    pub live_bytes: u64,
    pub live_keys: u64,
}

impl FileView {
    /// Dead share D in [0, 1]; an empty file is fully dead.
    pub fn dead_share(&self) -> f64 {
        if self.total_bytes == 0 {
            1.0
        } else {
            1.0 - self.live_bytes as f64 / self.total_bytes as f64
        }
    }

    pub fn dead_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.live_bytes)
    }

    /// Riak's fragmentation: dead keys as a percentage of all keys.
    pub fn fragmentation_percent(&self) -> f64 {
        if self.total_keys == 0 {
            100.0
        } else {
            100.0 * (self.total_keys - self.live_keys.min(self.total_keys)) as f64
                / self.total_keys as f64
        }
    }

    pub fn fully_dead(&self) -> bool {
        self.live_bytes == 0
    }
}

/// A file chosen for merge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pick {
    pub store: usize,
    pub file_id: u32,
    pub dead_share: f64,
}

impl Pick {
    fn of(f: &FileView) -> Pick {
        Pick {
            store: f.store,
            file_id: f.file_id,
            dead_share: f.dead_share(),
        }
    }
}

/// When a decision is made: the local hour (for merge windows) and the
/// time since the scheduler started (for check intervals).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moment {
    pub hour: u8,
    pub elapsed: Duration,
}

impl Moment {
    pub fn new(hour: u8, elapsed: Duration) -> Moment {
        Moment { hour, elapsed }
    }
}

/// A merge policy: given usage U (0..=1) and every closed file of the node,
/// the files to merge now, first first. `merged` tells the policy what was
/// actually taken, so it can learn.
pub trait Policy: Send {
    fn decide(&mut self, usage: f64, files: &[FileView], at: Moment) -> Vec<Pick>;
    fn merged(&mut self, _pick: &Pick) {}
    /// The current take threshold D_m, for metrics (1 when not merging).
    fn take_threshold(&self, usage: f64) -> f64;
    fn name(&self) -> &'static str;
    /// Whether fully dead files are deleted at once, at any U and without
    /// waiting for a merge worker (the scheduler's reaper does it).
    fn reaps_dead_files(&self) -> bool {
        false
    }
}

/// When Riak allows merging (`bitcask.merge_window`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeWindow {
    Always,
    Never,
    /// Hours `start..=end` of the local day (wrapping past midnight).
    Hours {
        start: u8,
        end: u8,
    },
}

impl MergeWindow {
    pub fn allows(&self, hour: u8) -> bool {
        match *self {
            MergeWindow::Always => true,
            MergeWindow::Never => false,
            MergeWindow::Hours { start, end } if start <= end => (start..=end).contains(&hour),
            MergeWindow::Hours { start, end } => hour >= start || hour <= end,
        }
    }
}

/// Riak's Bitcask merge settings, with its names and defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassicSettings {
    /// A store merges when any file has at least this fragmentation (%).
    pub frag_merge_trigger: f64,
    /// ... or at least this many dead bytes.
    pub dead_bytes_merge_trigger: u64,
    /// Then every file of that store with at least this fragmentation ...
    pub frag_threshold: f64,
    /// ... or this many dead bytes ...
    pub dead_bytes_threshold: u64,
    /// ... or smaller than this is merged.
    pub small_file_threshold: u64,
    pub merge_window: MergeWindow,
    /// How often each store is checked (`bitcask.merge_check_interval`,
    /// Riak's default 3 minutes) ...
    pub merge_check_interval: Duration,
    /// ... varied by up to this share either way
    /// (`bitcask.merge_check_jitter`, default 30%).
    pub merge_check_jitter: f64,
}

impl Default for ClassicSettings {
    fn default() -> Self {
        ClassicSettings {
            frag_merge_trigger: 60.0,
            dead_bytes_merge_trigger: 512 << 20,
            frag_threshold: 40.0,
            dead_bytes_threshold: 128 << 20,
            small_file_threshold: 10 << 20,
            merge_window: MergeWindow::Always,
            merge_check_interval: Duration::from_secs(180),
            merge_check_jitter: 0.3,
        }
    }
}

/// Riak's Bitcask merge policy: each store is checked every
/// `merge_check_interval`; a check that finds a trigger reached queues the
/// store's files past the thresholds, and the queue is merged first come,
/// first served.
#[derive(Clone, Debug, PartialEq)]
pub struct Classic {
    pub settings: ClassicSettings,
    /// When each store is next checked.
    next_check: BTreeMap<usize, Duration>,
    /// Files found at a check and not merged yet, first found first
    /// (Riak's merge worker queue).
    queue: Vec<(usize, u32)>,
    /// State of the jitter's xorshift.
    rng: u64,
}

impl Default for Classic {
    fn default() -> Self {
        Classic::new(ClassicSettings::default())
    }
}

impl Classic {
    pub fn new(settings: ClassicSettings) -> Classic {
        Classic {
            settings,
            next_check: BTreeMap::new(),
            queue: Vec::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// The interval until a store's next check, jittered.
    fn next_interval(&mut self) -> Duration {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        let unit = (x >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let j = self.settings.merge_check_jitter.clamp(0.0, 1.0);
        self.settings
            .merge_check_interval
            .mul_f64(1.0 - j + 2.0 * j * unit)
    }

    /// Riak's `needs_merge` for one store: its files to merge, if a trigger
    /// is reached.
    fn check_store(&self, store: usize, files: &[FileView]) -> Vec<u32> {
        let mine = || files.iter().filter(move |f| f.store == store);
        let triggered = mine().any(|f| {
            f.fragmentation_percent() >= self.settings.frag_merge_trigger
                || f.dead_bytes() >= self.settings.dead_bytes_merge_trigger
        });
        if !triggered {
            return Vec::new();
        }
        let mut ids: Vec<u32> = mine()
            .filter(|f| {
                f.fragmentation_percent() >= self.settings.frag_threshold
                    || f.dead_bytes() >= self.settings.dead_bytes_threshold
                    || f.total_bytes < self.settings.small_file_threshold
            })
            .map(|f| f.file_id)
            .collect();
        ids.sort_unstable();
        ids
    }
}

impl Policy for Classic {
    fn decide(&mut self, _usage: f64, files: &[FileView], at: Moment) -> Vec<Pick> {
        // Files merged or deleted since they were queued leave the queue.
        self.queue
            .retain(|&(s, id)| files.iter().any(|f| f.store == s && f.file_id == id));
        if !self.settings.merge_window.allows(at.hour) {
            return Vec::new();
        }
        let mut stores: Vec<usize> = files.iter().map(|f| f.store).collect();
        stores.sort_unstable();
        stores.dedup();
        for store in stores {
            // A store seen for the first time is checked at once.
            let due = self.next_check.get(&store).is_none_or(|&t| t <= at.elapsed);
            if !due {
                continue;
            }
            let next = at.elapsed + self.next_interval();
            self.next_check.insert(store, next);
            for id in self.check_store(store, files) {
                if !self.queue.contains(&(store, id)) {
                    self.queue.push((store, id));
                }
            }
        }
        // Riak's merge worker takes queued stores first come, first
        // served; within a store, files by id.
        self.queue
            .iter()
            .filter_map(|&(s, id)| files.iter().find(|f| f.store == s && f.file_id == id))
            .map(Pick::of)
            .collect()
    }

    fn merged(&mut self, pick: &Pick) {
        self.queue
            .retain(|&(s, id)| (s, id) != (pick.store, pick.file_id));
    }

    fn take_threshold(&self, _usage: f64) -> f64 {
        self.settings.frag_threshold / 100.0
    }

    fn name(&self) -> &'static str {
        "classic"
    }
}

/// The Fisherman (the sensor-data paper, §3.0.4).
#[derive(Clone, Debug, PartialEq)]
pub struct Fisherman {
    /// Target usage U_m: no merging below it but of fully dead files.
    pub target_usage: f64,
    /// Weight of the newest taken D in the moving average (alpha = 1/n).
    pub ewma_weight: f64,
    /// Memory of the fish eaten: ewma of the D of files taken. Starts at 1
    /// (no experience: only big fish are good).
    pub ewma: f64,
}

impl Default for Fisherman {
    fn default() -> Self {
        Fisherman {
            target_usage: 0.8,
            ewma_weight: 0.1,
            ewma: 1.0,
        }
    }
}

impl Fisherman {
    /// Hunger H = (U - U_m) / (1 - U_m).
    pub fn hunger(&self, usage: f64) -> f64 {
        (usage - self.target_usage) / (1.0 - self.target_usage)
    }
}

impl Policy for Fisherman {
    fn decide(&mut self, usage: f64, files: &[FileView], _at: Moment) -> Vec<Pick> {
        let threshold = self.take_threshold(usage);
        let mut picks: Vec<Pick> = files
            .iter()
            // A file with nothing dead is never worth a merge: past U = 1
            // the threshold reaches 0, and copying such a file would only
            // spend the space that is short.
            .filter(|f| f.fully_dead() || (f.dead_share() > 0.0 && f.dead_share() >= threshold))
            .map(Pick::of)
            .collect();
        // Highest D first; ties by store and file for a stable order.
        picks.sort_by(|a, b| {
            b.dead_share
                .total_cmp(&a.dead_share)
                .then(a.store.cmp(&b.store))
                .then(a.file_id.cmp(&b.file_id))
        });
        picks
    }

    fn merged(&mut self, pick: &Pick) {
        self.ewma += self.ewma_weight * (pick.dead_share - self.ewma);
    }

    fn take_threshold(&self, usage: f64) -> f64 {
        let h = self.hunger(usage);
        if h > 0.0 {
            (1.0 - h).clamp(0.0, 1.0).min(self.ewma)
        } else {
            1.0
        }
    }

    fn name(&self) -> &'static str {
        "fisherman"
    }

    fn reaps_dead_files(&self) -> bool {
        true
    }
}
