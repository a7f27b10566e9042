//! The node's own settings: its name, ring, backend choice, data
//! directory, client listeners, object limits, threads and logging.

use super::setting::{Initial, Kind, Setting};
use rill_node::{BackendKind, DeleteMode};
use std::path::PathBuf;
use std::time::Duration;

pub static SETTINGS: &[Setting] = &[
    Setting {
        key: "nodename",
        kind: Kind::Text,
        words: &[],
        default: Initial::Value("riak@127.0.0.1"),
        help: "the node's name, name@host (as Riak)",
        apply: |c, a| {
            if !a.text().contains('@') {
                return Err(format!("nodename must be name@host, found {:?}", a.text()));
            }
            c.node.nodename = a.text().to_string();
            Ok(())
        },
    },
    Setting {
        key: "ring_size",
        kind: Kind::Count { min: 1, max: 16384 },
        words: &[],
        default: Initial::Value("64"),
        help: "partitions of the ring, a power of two",
        apply: |c, a| {
            let n = a.count();
            if !n.is_power_of_two() {
                return Err(format!(
                    "ring_size must be a power of two between 1 and 16384, found {n}"
                ));
            }
            c.node.ring_size = n as u32;
            Ok(())
        },
    },
    Setting {
        key: "storage_backend",
        kind: Kind::Choice(&["bitcask", "leveldb", "leveled", "memory", "multi"]),
        words: &[],
        default: Initial::Value("bitcask"),
        help: "where the node keeps its objects (docs/backends.md)",
        apply: |c, a| {
            c.node.backend = BackendKind::from_name(a.text()).expect("one of the choices");
            Ok(())
        },
    },
    Setting {
        key: "platform_data_dir",
        kind: Kind::Path,
        words: &[],
        default: Initial::Value("./data"),
        help: "where data lives (and the pid file, rill.pid)",
        apply: |c, a| {
            c.node.data_dir = PathBuf::from(a.text());
            c.pid_file = c.node.data_dir.join("rill.pid");
            Ok(())
        },
    },
    Setting {
        key: "listener.protobuf.internal",
        kind: Kind::Address,
        words: &[],
        default: Initial::Value("127.0.0.1:8087"),
        help: "the Protocol Buffers listener",
        apply: |c, a| {
            c.pb_listener = a.address();
            Ok(())
        },
    },
    Setting {
        key: "listener.http.internal",
        kind: Kind::Address,
        words: &[],
        default: Initial::Value("127.0.0.1:8098"),
        help: "the HTTP listener",
        apply: |c, a| {
            c.http_listener = a.address();
            Ok(())
        },
    },
    Setting {
        key: "protobuf.max_message_size",
        kind: Kind::Size {
            min: 1 << 10,
            max: 4 << 30,
        },
        words: &[],
        default: Initial::Value("64MB"),
        help: "the largest PB frame accepted",
        apply: |c, a| {
            c.pb_max_frame_bytes = a.bytes() as usize;
            Ok(())
        },
    },
    Setting {
        key: "delete_mode",
        kind: Kind::Duration {
            min: Duration::ZERO,
            max: Duration::MAX,
        },
        words: &["keep", "immediate"],
        default: Initial::Value("3s"),
        help: "what becomes of a delete's tombstone: kept, reaped at once, or reaped after this delay (as Riak)",
        apply: |c, a| {
            c.node.delete_mode = match a.word() {
                Some("keep") => DeleteMode::Keep,
                Some(_) => DeleteMode::Immediate,
                None => DeleteMode::After(a.duration()),
            };
            Ok(())
        },
    },
    Setting {
        key: "object.size.warning_threshold",
        kind: Kind::Size { min: 0, max: 4 << 30 },
        words: &[],
        default: Initial::Value("5MB"),
        help: "objects larger than this are logged",
        apply: |c, a| {
            c.node.object_size_warning_bytes = a.bytes() as usize;
            Ok(())
        },
    },
    Setting {
        key: "object.size.maximum",
        kind: Kind::Size {
            min: 1,
            max: 4 << 30,
        },
        words: &[],
        default: Initial::Value("50MB"),
        help: "objects larger than this are refused",
        apply: |c, a| {
            c.node.object_size_max_bytes = a.bytes() as usize;
            Ok(())
        },
    },
    Setting {
        key: "object.siblings.warning_threshold",
        kind: Kind::Count {
            min: 0,
            max: 1 << 20,
        },
        words: &[],
        default: Initial::Value("25"),
        help: "objects with more siblings than this are logged",
        apply: |c, a| {
            c.node.siblings_warning = a.count() as usize;
            Ok(())
        },
    },
    Setting {
        key: "object.siblings.maximum",
        kind: Kind::Count {
            min: 1,
            max: 1 << 20,
        },
        words: &[],
        default: Initial::Value("100"),
        help: "writes that would make more siblings than this are refused",
        apply: |c, a| {
            c.node.siblings_max = a.count() as usize;
            Ok(())
        },
    },
    Setting {
        key: "runtime.worker_threads",
        kind: Kind::Count { min: 1, max: 1024 },
        words: &["auto"],
        default: Initial::Value("auto"),
        help: "threads serving connections and the cluster runtime; auto: one per core (rill devrel splits the cores among its nodes)",
        apply: |c, a| {
            c.worker_threads = match a.word() {
                Some(_) => None,
                None => Some(a.count() as usize),
            };
            Ok(())
        },
    },
    Setting {
        key: "log.console.level",
        kind: Kind::Choice(&["debug", "info", "warning", "error"]),
        words: &[],
        default: Initial::Value("info"),
        help: "the least severe messages logged",
        apply: |c, a| {
            c.log_level = a.text().replace("warning", "warn");
            Ok(())
        },
    },
];
