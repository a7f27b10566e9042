//! What machine and filesystem a benchmark ran on, read from /proc.

use std::path::Path;

pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub filesystem: String,
}

impl Machine {
    pub fn describe(dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_else(|| "unknown cpu".into());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpu,
            cores,
            memory_gib: memory_kib / (1 << 20) as f64,
            filesystem: filesystem_of(dir),
        }
    }

    pub fn print(&self) {
        println!(
            "machine: {} ({} cores), {:.1} GiB RAM; filesystem: {}",
            self.cpu, self.cores, self.memory_gib, self.filesystem
        );
    }
}

/// "device type mountpoint" of the mount holding `dir` (longest prefix).
fn filesystem_of(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (dev, mnt, ty) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(mnt)
                .then(|| (mnt.len(), format!("{dev} {ty} on {mnt}")))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown".into(), |(_, s)| s)
}

/// Resident memory of this process in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page
}
