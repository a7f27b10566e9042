//! The memory this process may use, for settings given as a share of it
//! (`leveldb.maximum_memory.percent`).

/// The memory this process may use, for settings given as a share of it:
/// the machine's (`MemTotal`), or less when the process runs in a control
/// group with a lower limit, as in a container: the lowest of its group's
/// and every parent's cgroup v2 `memory.max` or cgroup v1
/// `memory.limit_in_bytes`. 4 GiB if nothing can be read.
pub fn machine_memory_bytes() -> u64 {
    let read = |p: &std::path::Path| std::fs::read_to_string(p).ok();
    let total = read("/proc/meminfo".as_ref()).and_then(|m| mem_total(&m));
    let mut limits = Vec::new();
    let groups = read("/proc/self/cgroup".as_ref()).unwrap_or_default();
    for (root, file, group) in memory_groups(&groups) {
        // The group and each parent up to the hierarchy's root.
        let root = std::path::Path::new(root);
        let mut dir = root.join(group.trim_start_matches('/'));
        loop {
            limits.push(read(&dir.join(file)).and_then(|v| limit(&v)));
            if dir == root || !dir.pop() {
                break;
            }
        }
    }
    effective_memory(total, &limits)
}

/// Where this process's memory limits are, from `/proc/self/cgroup`:
/// (hierarchy root, limit file, the process's group) for cgroup v2
/// (`0::/path`) and for a cgroup v1 memory controller (`N:memory:/path`).
fn memory_groups(proc_cgroup: &str) -> Vec<(&'static str, &'static str, String)> {
    let mut out = Vec::new();
    for l in proc_cgroup.lines() {
        let mut f = l.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            out.push(("/sys/fs/cgroup", "memory.max", path.to_string()));
        } else if controllers.split(',').any(|c| c == "memory") {
            out.push((
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                path.to_string(),
            ));
        }
    }
    out
}

fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A limit file's value: a byte count, or none for `max` (and for cgroup
/// v1's "no limit", a number near 2^63).
fn limit(v: &str) -> Option<u64> {
    v.trim().parse::<u64>().ok().filter(|b| *b < 1 << 60)
}

fn effective_memory(total: Option<u64>, limits: &[Option<u64>]) -> u64 {
    limits
        .iter()
        .flatten()
        .copied()
        .chain(total)
        .min()
        .unwrap_or(4 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_group_limit_below_the_machine_wins() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree: 1 kB\n";
        assert_eq!(mem_total(meminfo), Some(24576000 * 1024));
        assert_eq!(
            memory_groups("0::/system.slice/rill.service\n"),
            [(
                "/sys/fs/cgroup",
                "memory.max",
                "/system.slice/rill.service".to_string()
            )]
        );
        assert_eq!(
            memory_groups("5:devices:/\n4:cpu,memory:/api/x\n0::/\n"),
            [
                (
                    "/sys/fs/cgroup/memory",
                    "memory.limit_in_bytes",
                    "/api/x".to_string()
                ),
                ("/sys/fs/cgroup", "memory.max", "/".to_string())
            ]
        );
        assert_eq!(limit("max\n"), None);
        assert_eq!(limit("9223372036854771712\n"), None);
        assert_eq!(limit("2147483648\n"), Some(2 << 30));
        let total = Some(24 << 30);
        assert_eq!(
            effective_memory(total, &[None, Some(2 << 30), Some(8 << 30)]),
            2 << 30
        );
        assert_eq!(effective_memory(total, &[None, None]), 24 << 30);
        assert_eq!(effective_memory(None, &[]), 4 << 30);
    }
}
