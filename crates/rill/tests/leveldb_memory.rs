//! leveldb's memory budget (`leveldb.maximum_memory.percent`, 70 % by
//! default) is a share of the memory the node may use: in a control
//! group with a memory limit (a container), of that limit, not of the
//! machine. Through the real binary, started inside a memory cgroup.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A fresh memory cgroup limited to `bytes` (cgroup v2 or v1); `None`,
/// with the reason printed, where none can be made (not root).
fn memory_cgroup(bytes: u64) -> Option<PathBuf> {
    let name = format!("rill-test-{}", std::process::id());
    for (root, file) in [
        ("/sys/fs/cgroup", "memory.max"),
        ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
    ] {
        let root = PathBuf::from(root);
        if !root.join(file).exists() && !root.join("cgroup.subtree_control").exists() {
            continue;
        }
        let dir = root.join(&name);
        if std::fs::create_dir_all(&dir).is_ok()
            && std::fs::write(dir.join(file), bytes.to_string()).is_ok()
        {
            return Some(dir);
        }
        let _ = std::fs::remove_dir(&dir);
    }
    eprintln!("skipped: no memory cgroup can be made here (needs root and a memory controller)");
    None
}

#[test]
fn the_leveldb_budget_is_a_share_of_the_cgroup_limit() {
    let limit: u64 = 512 << 20;
    let Some(group) = memory_cgroup(limit) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (pb, http) = common::free_ports();
    let conf = common::write_config(dir.path(), "storage_backend = leveldb", pb, http);
    let log_path = dir.path().join("console.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec {} -c {} console",
            group.display(),
            env!("CARGO_BIN_EXE_rill"),
            conf.display()
        ))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let budget = || {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let line = text
            .lines()
            .find(|l| l.contains("leveldb memory budget"))?
            .to_string();
        let v = line
            .split("budget_bytes=")
            .nth(1)?
            .split_whitespace()
            .next()?;
        v.parse::<u64>().ok()
    };
    common::until(
        "the node logs its leveldb budget",
        Duration::from_secs(60),
        || budget().is_some() || child.try_wait().unwrap().is_some(),
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir(&group);
    let got = budget().unwrap_or_else(|| {
        panic!(
            "no budget logged: {}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        )
    });
    assert_eq!(
        got,
        limit / 100 * 70,
        "70 % of the cgroup's 512 MiB, not of the machine"
    );
}
