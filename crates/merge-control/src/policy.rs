//! Which files to merge, and in what order: pure decisions from file
//! statistics and filesystem usage U (seed 000, sections 2-3).
//!
//! - [`Classic`]: Riak's Bitcask triggers and thresholds with Riak's
//!   defaults, kept so the difference can be measured.
//! - [`Fisherman`] (the default): merge only when U > U_m, highest dead
//!   share D first, files with D = 1 at any U, and take a file when
//!   D >= D_m = min(1 - H, ewma(D taken)) with hunger H = (U - U_m)/(1 - U_m).

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

/// A merge policy: given usage U (0..=1) and every closed file of the node,
/// the files to merge now, first first. `merged` tells the policy what was
/// actually taken, so it can learn.
pub trait Policy: Send {
    fn decide(&mut self, usage: f64, files: &[FileView], hour: u8) -> Vec<Pick>;
    fn merged(&mut self, _pick: &Pick) {}
    /// The current take threshold D_m, for metrics (1 when not merging).
    fn take_threshold(&self, usage: f64) -> f64;
    fn name(&self) -> &'static str;
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

/// Riak's Bitcask merge policy, with its names and defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Classic {
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
}

impl Default for Classic {
    fn default() -> Self {
        Classic {
            frag_merge_trigger: 60.0,
            dead_bytes_merge_trigger: 512 << 20,
            frag_threshold: 40.0,
            dead_bytes_threshold: 128 << 20,
            small_file_threshold: 10 << 20,
            merge_window: MergeWindow::Always,
        }
    }
}

impl Policy for Classic {
    fn decide(&mut self, _usage: f64, files: &[FileView], hour: u8) -> Vec<Pick> {
        if !self.merge_window.allows(hour) {
            return Vec::new();
        }
        let mut stores: Vec<usize> = files
            .iter()
            .filter(|f| {
                f.fragmentation_percent() >= self.frag_merge_trigger
                    || f.dead_bytes() >= self.dead_bytes_merge_trigger
            })
            .map(|f| f.store)
            .collect();
        stores.sort_unstable();
        stores.dedup();
        // Riak queues whole stores first come, first served; file order
        // within a store is by id.
        let mut picks: Vec<&FileView> = files
            .iter()
            .filter(|f| stores.contains(&f.store))
            .filter(|f| {
                f.fragmentation_percent() >= self.frag_threshold
                    || f.dead_bytes() >= self.dead_bytes_threshold
                    || f.total_bytes < self.small_file_threshold
            })
            .collect();
        picks.sort_by_key(|f| (f.store, f.file_id));
        picks.into_iter().map(Pick::of).collect()
    }

    fn take_threshold(&self, _usage: f64) -> f64 {
        self.frag_threshold / 100.0
    }

    fn name(&self) -> &'static str {
        "classic"
    }
}

/// The Fisherman (seed 000 §3.0.4).
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
    fn decide(&mut self, usage: f64, files: &[FileView], _hour: u8) -> Vec<Pick> {
        let threshold = self.take_threshold(usage);
        let mut picks: Vec<Pick> = files
            .iter()
            .filter(|f| f.fully_dead() || f.dead_share() >= threshold)
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
            (1.0 - h).min(self.ewma)
        } else {
            1.0
        }
    }

    fn name(&self) -> &'static str {
        "fisherman"
    }
}
