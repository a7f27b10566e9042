//! The settings of the storage backends beyond Bitcask: `multi_backend.*`
//! (several named backends, chosen per bucket), `leveldb.*` and
//! `leveled.*`.

use crate::config::{bytesize, duration};
use rill_node::{BackendKind, NamedBackend, NodeConfig};
use std::path::PathBuf;

/// `multi_backend.REST = v`: the default, or one named backend's setting.
pub(crate) fn set_multi(n: &mut NodeConfig, rest: &str, v: &str) -> Result<(), String> {
    if rest == "default" {
        n.multi_default = Some(v.to_string());
        return Ok(());
    }
    let (name, setting) = rest
        .split_once('.')
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| format!("unknown setting \"multi_backend.{rest}\" (multi_backend.default, or multi_backend.NAME.storage_backend and NAME's settings)"))?;
    let key = format!("multi_backend.{rest}");
    if !n.multi.iter().any(|b| b.name == name) {
        // Unset: Riak's 70 % of the machine, shared by the leveldb
        // backends (set when the whole file is read).
        let leveldb = rill_backend::LeveldbOptions {
            max_memory_bytes: u64::MAX,
            ..rill_backend::LeveldbOptions::default()
        };
        n.multi.push(NamedBackend {
            name: name.to_string(),
            // Until `storage_backend` is read: a named backend without one
            // is refused when the whole file has been read.
            kind: BackendKind::Multi,
            data_root: None,
            leveldb,
            journal: rill_backend::JournalOptions::default(),
            memory_max_bytes: None,
            memory_ttl: None,
        });
    }
    let b = n
        .multi
        .iter_mut()
        .find(|b| b.name == name)
        .expect("added above");
    if let Some(r) = set_leveldb(&mut b.leveldb, setting, &key, v) {
        return r;
    }
    if let Some(r) = set_leveled(&mut b.leveldb, &mut b.journal, setting, &key, v) {
        return r;
    }
    if let Some(r) = set_memory(&mut b.memory_max_bytes, &mut b.memory_ttl, setting, v) {
        return r;
    }
    match setting {
        "storage_backend" => {
            b.kind = match v {
                "bitcask" => BackendKind::Bitcask,
                "leveldb" => BackendKind::Leveldb,
                "leveled" => BackendKind::Leveled,
                "memory" => BackendKind::Memory,
                _ => {
                    return Err(format!(
                        "{key} must be bitcask, leveldb, leveled or memory, found {v:?}"
                    ))
                }
            }
        }
        "bitcask.data_root" | "leveldb.data_root" | "leveled.data_root" => {
            b.data_root = Some(PathBuf::from(v))
        }
        _ => {
            return Err(format!(
            "unknown setting {key:?} (`rill chkconfig --keys` lists the settings this build knows)"
        ))
        }
    }
    Ok(())
}

/// A `leveldb.*` setting (`setting`, as named after any
/// `multi_backend.NAME.`) into `opts`; `None` when it is not one of
/// those. `key` is the whole name, for errors.
pub(crate) fn set_leveldb(
    opts: &mut rill_backend::LeveldbOptions,
    setting: &str,
    key: &str,
    v: &str,
) -> Option<Result<(), String>> {
    Some(match setting {
        "leveldb.maximum_memory.percent" => v
            .parse::<u64>()
            .ok()
            .filter(|p| (1..=100).contains(p))
            .map(|pct| opts.max_memory_bytes = machine_memory_bytes() / 100 * pct)
            .ok_or_else(|| format!("{key} must be an integer from 1 to 100, found {v:?}")),
        "leveldb.maximum_memory" => bytesize(v).map(|b| opts.max_memory_bytes = b.max(16 << 20)),
        "leveldb.sync_on_write" => on_off(key, v).map(|on| opts.sync_on_write = on),
        "leveldb.compression" => on_off(key, v).map(|on| opts.compression = on),
        "leveldb.bloomfilter" => on_off(key, v).map(|on| opts.bloom_filter = on),
        _ => return None,
    })
}

/// A `leveled.*` setting (`setting`, as named after any
/// `multi_backend.NAME.`) into the engine's options and the journal's;
/// `None` when it is not one of those. Riak's names where the concept is
/// the same; the memory budget is Rill's, named as leveldb's.
pub(crate) fn set_leveled(
    opts: &mut rill_backend::LeveldbOptions,
    journal: &mut rill_backend::JournalOptions,
    setting: &str,
    key: &str,
    v: &str,
) -> Option<Result<(), String>> {
    let rest = setting.strip_prefix("leveled.")?;
    Some(match rest {
        "maximum_memory.percent" | "maximum_memory" => {
            return set_leveldb(opts, &format!("leveldb.{rest}"), key, v);
        }
        "sync_strategy" => match v {
            "none" => Ok(false),
            // leveled syncs each journal write under both.
            "sync" | "riak_sync" => Ok(true),
            _ => Err(format!("{key} must be none, riak_sync or sync, found {v:?}")),
        }
        .map(|on| opts.sync_on_write = on),
        "compression_method" => match v {
            "native" | "lz4" => Ok(true),
            "none" => Ok(false),
            "zstd" => Err(format!("{key} = zstd is not offered by this build; use lz4 (or native, the same here) or none")),
            _ => Err(format!("{key} must be native, lz4 or none, found {v:?}")),
        }
        .map(|on| journal.compression = on),
        // Values are compressed as they are written to a journal file,
        // whichever point is named.
        "compression_point" => match v {
            "on_receipt" | "on_compact" => Ok(()),
            _ => Err(format!("{key} must be on_receipt or on_compact, found {v:?}")),
        },
        "journal_size" => bytesize(v).map(|b| journal.file_bytes = b.max(1 << 20)),
        "singlefile_compactionpercentage" => v
            .parse::<f64>()
            .ok()
            .filter(|p| (0.0..=100.0).contains(p))
            .map(|p| journal.compaction_percent = p.round() as u8)
            .ok_or_else(|| format!("{key} must be a percentage from 0 to 100, found {v:?}")),
        _ => return None,
    })
}

/// A `memory_backend.*` setting into a memory backend's cap and time to
/// live; `None` when `setting` is not one of those.
pub(crate) fn set_memory(
    max_bytes: &mut Option<u64>,
    ttl: &mut Option<std::time::Duration>,
    setting: &str,
    v: &str,
) -> Option<Result<(), String>> {
    let off = v == "off";
    Some(match setting {
        "memory_backend.max_memory_per_vnode" if off => {
            *max_bytes = None;
            Ok(())
        }
        "memory_backend.max_memory_per_vnode" => bytesize(v).map(|b| *max_bytes = Some(b)),
        "memory_backend.ttl" if off => {
            *ttl = None;
            Ok(())
        }
        "memory_backend.ttl" => duration(v).map(|d| *ttl = Some(d)),
        _ => return None,
    })
}

pub(crate) fn on_off(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err(format!("{key} must be on or off, found {v:?}")),
    }
}

/// The memory this process may use, for settings given as a share of it:
/// the machine's (`MemTotal`), or less when the process runs in a control
/// group with a lower limit, as in a container: the lowest of its group's
/// and every parent's cgroup v2 `memory.max` or cgroup v1
/// `memory.limit_in_bytes`. 4 GiB if nothing can be read.
pub(crate) fn machine_memory_bytes() -> u64 {
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
