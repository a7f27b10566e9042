//! The memory a benchmark run may use: a memory cgroup the process joins,
//! so the data outgrows what the stores may cache, as on a full node.

use crate::machine::Machine;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// A run's memory limit and the cgroup that holds it to it.
pub(crate) struct Limit {
    /// The limit asked for (`None`: none).
    pub bytes: Option<u64>,
    /// The cgroup joined (`None`: none could be, or no limit).
    pub cgroup: Option<PathBuf>,
}

impl Limit {
    /// `--memory-limit-mib` (0: none; unset: 2 GiB, none with
    /// `--quick`): makes the scratch and output directories, prints the
    /// machine, and joins a memory cgroup named `name`.
    pub(crate) fn prepare(
        dir: &Path,
        out: &Path,
        mib: Option<u64>,
        quick: bool,
        name: &str,
    ) -> Result<Limit> {
        let bytes = match mib {
            Some(0) => None,
            Some(mib) => Some(mib << 20),
            None if quick => None,
            None => Some(2 << 30),
        };
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        Machine::describe(dir).print();
        let cgroup = bytes.and_then(|b| join_memory_cgroup(b, name));
        Ok(Limit { bytes, cgroup })
    }

    /// The limit in force, 0 for none (for the report).
    pub(crate) fn joined_bytes(&self) -> u64 {
        match self.cgroup {
            Some(_) => self.bytes.unwrap_or(0),
            None => 0,
        }
    }

    /// "limited to ... : data/memory ..." for `data` bytes, or "not limited".
    pub(crate) fn describe(&self, data: u64) -> String {
        match (self.bytes, &self.cgroup) {
            (Some(l), Some(cg)) => format!(
                "limited to {:.2} GB (cgroup {}): data/memory {:.1}",
                l as f64 / 1e9,
                cg.display(),
                data as f64 / l as f64
            ),
            _ => "not limited".into(),
        }
    }
}

/// Joins a fresh memory cgroup limited to `bytes` (page cache counts);
/// `None`, with a warning, where that is not possible here.
fn join_memory_cgroup(bytes: u64, name: &str) -> Option<PathBuf> {
    let tries = [
        ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
        ("/sys/fs/cgroup", "memory.max"),
    ];
    for (root, file) in tries {
        let dir = Path::new(root).join(name);
        if !Path::new(root).join(file).exists() && !Path::new(root).join("cgroup.procs").exists() {
            continue;
        }
        let joined = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(file), bytes.to_string()))
            .and_then(|()| {
                std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
            });
        if joined.is_ok() {
            return Some(dir);
        }
    }
    eprintln!("warning: no memory cgroup could be joined (not root, or no memory controller): the data may sit in the page cache");
    None
}
