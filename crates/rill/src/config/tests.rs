//! The parser through whole files, and the tables walked: every key
//! parses its default, is documented, and is listed in docs/settings.md.

use super::*;
use bitcask::SyncStrategy;
use rill_node::{BackendKind, DeleteMode};

#[test]
fn every_default_parses_and_gives_the_defaults() {
    let mut keys = std::collections::HashSet::new();
    for s in setting::all() {
        assert!(keys.insert(s.key), "{} is in the tables twice", s.key);
        assert!(!s.help.trim().is_empty(), "{} has no help", s.key);
        assert!(
            !s.kind.describe().is_empty(),
            "{} says not what it takes",
            s.key
        );
        let Initial::Value(v) = s.default else {
            assert!(s.is_pattern() || !s.default_text().is_empty(), "{}", s.key);
            continue;
        };
        let c = Config::parse(&format!("{} = {v}", s.key))
            .unwrap_or_else(|e| panic!("{} = {v}: {e:?}", s.key));
        // The default written out changes nothing.
        assert_eq!(
            format!("{:?}", Summary(&c)),
            format!("{:?}", Summary(&Config::defaults())),
            "{} = {v}",
            s.key
        );
    }
    assert!(keys.len() > 60, "{} keys", keys.len());
}

#[test]
fn every_word_of_every_key_parses_or_is_refused_in_words() {
    for s in setting::all() {
        let key = s.key.replace("NAME", "x").replace("DB", "telegraf");
        for w in s.words {
            match Config::parse(&format!("{key} = {w}")) {
                Ok(_) => {}
                Err(e) => assert!(
                    e.iter().all(|e| !e.message.is_empty()),
                    "{key} = {w}: {e:?}"
                ),
            }
        }
        let e = Config::parse(&format!("{key} = \u{1}nonsense\u{1}"));
        if s.kind.describe() != "text" && s.kind.describe() != "a path" {
            let e = e.err().unwrap_or_else(|| panic!("{key} took nonsense"));
            assert!(e[0].message.contains(&key), "{key}: {e:?}");
        }
    }
}

#[test]
fn docs_settings_md_lists_every_key_as_the_tables_do() {
    let doc = include_str!("../../../../docs/settings.md");
    let table = setting::markdown();
    assert!(
        doc.contains(&table),
        "docs/settings.md is not the tables' listing: regenerate its table with `rill chkconfig --markdown`"
    );
}

#[test]
fn named_backends_take_the_per_backend_keys() {
    let c = Config::parse(
        "storage_backend = multi\nmulti_backend.default = fast\n\
         multi_backend.fast.storage_backend = memory\n\
         multi_backend.fast.memory_backend.max_memory_per_vnode = 8MB\n\
         multi_backend.slow.storage_backend = leveled\n\
         multi_backend.slow.leveled.data_root = /srv/slow\n\
         multi_backend.slow.leveled.maximum_memory = 64MB\n",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let (fast, slow) = (&c.node.multi[0], &c.node.multi[1]);
    assert_eq!(fast.memory_max_bytes, Some(8 << 20));
    assert_eq!(slow.kind, BackendKind::Leveled);
    assert_eq!(slow.data_root.as_deref(), Some(Path::new("/srv/slow")));
    assert_eq!(slow.leveldb.max_memory_bytes, 64 << 20);
    assert_eq!(c.node.memory_max_bytes, None, "the node's own is untouched");
    let e = Config::parse(
        "multi_backend.x.bitcask.max_file_size = 1MB\nmulti_backend..leveldb.compression = on\n",
    )
    .err()
    .expect("refused");
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].message.contains("unknown setting"), "{e:?}");
}

#[test]
fn sensor_keys_are_read_and_checked() {
    let c = Config::parse(
        "sensor.retention = 90d\nsensor.retention.telegraf = 2h\nsensor = off\n\
         sensor.block_samples = 4096\nsensor.block_cache = 256MB\n\
         sensor.mqtt.broker = broker.local:1883\nsensor.mqtt.topics = plant/+/temp, lab/#\n",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let s = &c.sensor;
    assert_eq!(s.retention, Duration::from_secs(90 * 86_400));
    assert_eq!(s.retention_of["telegraf"], Duration::from_secs(7200));
    assert!(!s.enabled);
    assert_eq!(s.block_samples, 4096);
    assert_eq!(s.block_cache_bytes, 256 << 20);
    assert_eq!(s.mqtt_broker, Some(("broker.local".to_string(), 1883)));
    assert_eq!(s.mqtt_topics, vec!["plant/+/temp", "lab/#"]);
    assert_eq!(Config::defaults().sensor.block_cache_bytes, 64 << 20);
    for bad in [
        "sensor.window = 0s",
        "sensor.block_samples = 3",
        "sensor.max_file_size = 1KB",
        "sensor.block_cache = lots",
        "sensor.mqtt.broker = 1883",
        "sensor.mqtt.topics = a/#/b",
        "sensor.mqtt.qos = 0",
        "sensor.mqtt.password =",
    ] {
        assert!(Config::parse(bad).is_err(), "{bad}");
    }
    let c = Config::parse("sensor.block_cache = 0\n").unwrap();
    assert_eq!(c.sensor.block_cache_bytes, 0);
}

/// What the parser before the tables took, it takes still.
#[test]
fn values_the_earlier_parser_took_are_taken() {
    let c = Config::parse(
        "sensor.listener.line.precision = u\nsensor.mqtt.precision = n\n\
         sensor.listener.line =\nsensor.mqtt.broker =\nsensor.mqtt.username =\n\
         sensor.retention.plant.north = 2d\nsensor.grace = 30d\n\
         leveldb.maximum_memory = 1MB\nleveled.journal_size = 64KB\n\
         bitcask.max_file_size = 3GB\ntransfer_limit = 5000\n",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let s = &c.sensor;
    assert_eq!(s.line_precision, rill_sensor::Precision::Us);
    assert_eq!(s.mqtt_precision, rill_sensor::Precision::Ns);
    assert_eq!((s.line_listener, s.mqtt_broker.as_ref()), (None, None));
    assert_eq!(s.mqtt_username.as_deref(), Some(""));
    assert_eq!(
        s.retention_of["plant.north"],
        Duration::from_secs(2 * 86_400)
    );
    assert_eq!(s.grace, Duration::from_secs(30 * 86_400));
    assert_eq!(c.node.leveldb.max_memory_bytes, 16 << 20, "raised to 16MB");
    assert_eq!(c.node.leveled_journal.file_bytes, 1 << 20, "raised to 1MB");
    assert_eq!(c.node.bitcask_max_file_size, Some(3 << 30));
    assert_eq!(c.transfer_limit, 5000);
    // A named backend's name holds no dot.
    assert!(Config::parse("multi_backend.a.b.storage_backend = memory\n").is_err());
}

#[test]
fn the_rotation_size_is_auto_unless_set() {
    assert_eq!(Config::defaults().node.bitcask_max_file_size, None);
    let c = Config::parse("bitcask.max_file_size = 256MB\n").unwrap();
    assert_eq!(c.node.bitcask_max_file_size, Some(256 << 20));
    let c = Config::parse("bitcask.max_file_size = 256MB\nbitcask.max_file_size = auto\n").unwrap();
    assert_eq!(c.node.bitcask_max_file_size, None);
    let e = Config::parse("bitcask.max_file_size = 1KB\n")
        .err()
        .unwrap();
    assert!(e[0].message.contains("or auto"), "{e:?}");
}

/// The parts of a config that defaults can change, comparable.
struct Summary<'a>(&'a Config);

impl std::fmt::Debug for Summary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.0;
        let n = &c.node;
        let node = (
            (
                &n.nodename,
                n.ring_size,
                n.backend,
                &n.data_dir,
                n.delete_mode,
            ),
            (
                n.bitcask_max_file_size,
                n.bitcask.sync,
                n.bitcask.default_ttl,
            ),
            (
                n.bitcask.write_buffer_bytes,
                n.reserve_bytes,
                n.merge_policy,
            ),
            (
                n.throttle.low_usage,
                n.throttle.high_usage,
                n.bitcask_capacity_bytes,
            ),
        );
        let lsm = (
            (n.leveldb.max_memory_bytes, n.leveldb.sync_on_write),
            (n.leveldb.compression, n.leveldb.bloom_filter),
            (n.leveled.max_memory_bytes, n.leveled.sync_on_write),
            (
                n.leveled_journal.file_bytes,
                n.leveled_journal.compaction_percent,
            ),
            n.leveled_journal.compression,
            (
                &n.leveldb_dir,
                &n.leveled_dir,
                n.multi.len(),
                &n.multi_default,
            ),
        );
        let limits = (
            (n.memory_max_bytes, n.memory_ttl),
            (n.object_size_warning_bytes, n.object_size_max_bytes),
            (n.siblings_warning, n.siblings_max),
            &n.tictacaae,
        );
        let binary = (
            (
                c.pb_listener,
                c.http_listener,
                c.cluster_listener,
                c.cluster_advertise,
            ),
            (c.transfer_limit, c.handoff_batch_items, c.handoff_timeout),
            (c.test_link_delay, c.test_link_loss, c.pb_max_frame_bytes),
            (
                c.worker_threads,
                &c.log_level,
                &c.pid_file,
                c.bitcask_sync_interval,
            ),
        );
        write!(f, "{node:?} {lsm:?} {limits:?} {binary:?} {:?}", c.sensor)
    }
}

#[test]
fn comments_start_at_a_line_or_after_a_space() {
    let c = Config::parse(
        "# a comment\nsensor.mqtt.topics = plant/#,lab/# # two trees\n\tsensor.mqtt.password = p#ss\n",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(c.sensor.mqtt_topics, vec!["plant/#", "lab/#"]);
    assert_eq!(c.sensor.mqtt_password.as_deref(), Some("p#ss"));
    let c = Config::parse("sensor.mqtt.topics = #  # every topic\nsensor.mqtt.password = #x\n")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(c.sensor.mqtt_topics, vec!["#"]);
    assert_eq!(c.sensor.mqtt_password.as_deref(), Some("#x"));
    assert!(Config::parse("sensor.mqtt.password =\n").is_err());
}

#[test]
fn leveled_settings_use_riaks_names() {
    let c = Config::parse(
        "storage_backend = leveled\nleveled.data_root = /tmp/lv\nleveled.journal_size = 8MB\n\
         leveled.singlefile_compactionpercentage = 40.0\nleveled.compression_method = none\n\
         leveled.sync_strategy = sync\nleveled.maximum_memory = 64MB\n\
         multi_backend.x.storage_backend = leveled\nmulti_backend.x.leveled.journal_size = 2MB\n",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(c.node.backend, BackendKind::Leveled);
    assert_eq!(c.node.leveled_dir.as_deref(), Some(Path::new("/tmp/lv")));
    let j = &c.node.leveled_journal;
    assert_eq!(
        (j.file_bytes, j.compaction_percent, j.compression),
        (8 << 20, 40, false)
    );
    assert!(c.node.leveled.sync_on_write);
    assert_eq!(c.node.leveled.max_memory_bytes, 64 << 20);
    assert_eq!(c.node.multi[0].journal.file_bytes, 2 << 20);
    let c =
        Config::parse("leveled.sync_strategy = riak_sync\n").unwrap_or_else(|e| panic!("{e:?}"));
    assert!(
        c.node.leveled.sync_on_write,
        "riak_sync syncs each write, as leveled's"
    );
    let e = Config::parse("leveled.compression_method = zstd\nleveled.sync_strategy = maybe\n")
        .err()
        .expect("refused");
    assert!(e[0].message.contains("zstd is not offered"), "{e:?}");
    assert!(e[1].message.contains("none, riak_sync or sync"), "{e:?}");
}

#[test]
fn multi_backends_are_checked_and_share_leveldb_memory() {
    let e = Config::parse(
        "storage_backend = multi\nmulti_backend.default = a\n\
         multi_backend.a.storage_backend = leveldb\nmulti_backend.b.leveldb.maximum_memory = 64MB\n",
    )
    .err().expect("refused");
    assert!(
        e.iter().any(|e| e
            .message
            .contains("multi_backend.b.storage_backend is not set")),
        "{e:?}"
    );
    let c = Config::parse(
        "storage_backend = multi\nmulti_backend.default = a\n\
         multi_backend.a.storage_backend = leveldb\nmulti_backend.b.storage_backend = leveldb\n",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let (a, b) = (&c.node.multi[0].leveldb, &c.node.multi[1].leveldb);
    assert_eq!(a.max_memory_bytes, b.max_memory_bytes);
    assert_eq!(
        a.max_memory_bytes,
        memory::machine_memory_bytes() / 100 * 70 / 2
    );
    let e = Config::parse("storage_backend = multi\nmulti_backend.a.storage_backend = memory\n")
        .err()
        .expect("refused");
    assert!(
        e.iter()
            .any(|e| e.message.contains("multi_backend.default")),
        "{e:?}"
    );
}

#[test]
fn a_file_with_riak_names() {
    let c = Config::parse(
        "## comment\nnodename = rill@127.0.0.1\nring_size = 32\nstorage_backend = memory\n\
         listener.protobuf.internal = 127.0.0.1:10017\nbitcask.max_file_size = 64MB\n\
         bitcask.sync.strategy = interval\nbitcask.sync.interval = 250ms\ndelete_mode = immediate\n",
    )
    .unwrap();
    assert_eq!(c.node.ring_size, 32);
    assert_eq!(c.node.backend, BackendKind::Memory);
    assert_eq!(c.pb_listener.port(), 10017);
    assert_eq!(c.node.bitcask_max_file_size, Some(64 << 20));
    assert_eq!(
        c.node.bitcask.sync,
        SyncStrategy::Interval { interval_ms: 250 }
    );
    assert_eq!(c.node.delete_mode, DeleteMode::Immediate);
}

#[test]
fn every_bad_line_is_named() {
    let errs = Config::parse(
        "ring_size = 48\nbogus = 1\nno equals sign\nbitcask.max_file_size = 2 furlongs\n",
    )
    .err()
    .unwrap();
    let lines: Vec<usize> = errs.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![1, 2, 3, 4]);
    assert!(errs[0].to_string().contains("power of two"), "{}", errs[0]);
    assert!(
        errs[1].to_string().contains("unknown setting \"bogus\""),
        "{}",
        errs[1]
    );
}

#[test]
fn the_test_only_link_settings() {
    let c = Config::parse(
        "test.link.delay = 500us
test.link.loss = 0.25
",
    )
    .unwrap();
    assert_eq!(c.test_link_delay, Duration::from_micros(500));
    assert_eq!(c.test_link_loss, 0.25);
    let d = Config::parse("").unwrap();
    assert!(
        d.test_link_delay.is_zero() && d.test_link_loss == 0.0,
        "off by default"
    );
    let errs = Config::parse(
        "test.link.delay = soon
test.link.loss = 2
",
    )
    .err()
    .unwrap();
    assert_eq!(errs.iter().map(|e| e.line).collect::<Vec<_>>(), vec![1, 2]);
    assert!(
        errs[1].to_string().contains("between 0 and 1"),
        "{}",
        errs[1]
    );
}

#[test]
fn the_advertised_cluster_address() {
    let c = Config::parse("").unwrap();
    assert_eq!(c.cluster_advertised().unwrap(), c.cluster_listener);
    let c = Config::parse("nodename = rill@10.1.2.3\nlistener.cluster.internal = 0.0.0.0:8099\n")
        .unwrap();
    assert_eq!(
        c.cluster_advertised().unwrap(),
        "10.1.2.3:8099".parse().unwrap()
    );
    let c = Config::parse(
        "nodename = rill@db1\nlistener.cluster.internal = 0.0.0.0:0\nlistener.cluster.advertise = 192.0.2.7:0\n",
    )
    .unwrap();
    assert_eq!(
        c.cluster_advertised().unwrap(),
        "192.0.2.7:0".parse().unwrap()
    );
    let errs = Config::parse("nodename = rill@db1\nlistener.cluster.internal = [::]:8099\n")
        .err()
        .unwrap();
    assert!(
        errs[0].message.contains("listener.cluster.advertise"),
        "{}",
        errs[0]
    );
    let errs = Config::parse("listener.cluster.advertise = 0.0.0.0:8099\n")
        .err()
        .unwrap();
    assert!(errs[0].message.contains("can reach"), "{}", errs[0]);
}

#[test]
fn worker_threads() {
    assert_eq!(Config::parse("").unwrap().worker_threads, None);
    let c = Config::parse("runtime.worker_threads = 3\n").unwrap();
    assert_eq!(c.worker_threads, Some(3));
    let errs = Config::parse("runtime.worker_threads = 0\nruntime.worker_threads = many\n")
        .err()
        .unwrap();
    assert_eq!(errs.iter().map(|e| e.line).collect::<Vec<_>>(), vec![1, 2]);
    assert!(
        errs[0].to_string().contains("from 1 to 1024"),
        "{}",
        errs[0]
    );
}
