//! Every setting of the config file with a line on what it does
//! (`rill chkconfig --keys`).

/// The keys this build understands, with what each takes; `rill
/// chkconfig` and the docs list them.
pub const KEYS: &[(&str, &str)] = &[
    (
        "nodename",
        "the node's name, name@host (default riak@127.0.0.1, as Riak)",
    ),
    (
        "ring_size",
        "partitions of the ring, a power of two (default 64)",
    ),
    (
        "storage_backend",
        "bitcask, leveldb, leveled, memory or multi (default bitcask)",
    ),
    ("platform_data_dir", "where data lives (default ./data)"),
    (
        "listener.protobuf.internal",
        "PB address (default 127.0.0.1:8087)",
    ),
    (
        "listener.http.internal",
        "HTTP address (default 127.0.0.1:8098)",
    ),
    (
        "listener.cluster.internal",
        "address other nodes reach this one on: gossip, replicas, handoff (default 127.0.0.1:8099; port 0 picks a free one)",
    ),
    (
        "listener.cluster.advertise",
        "address other nodes are told to reach this one at (default: the cluster listener's; when that listens on every interface, the nodename's host at its port)",
    ),
    (
        "transfer_limit",
        "handoffs leaving this node at once (default 2, as Riak)",
    ),
    (
        "handoff.batch_items",
        "objects per handoff batch at most (default 1000)",
    ),
    (
        "handoff.timeout",
        "a handoff batch unacknowledged this long resumes in a new session (default 15s)",
    ),
    (
        "test.link.delay",
        "TEST ONLY: added to every message sent to another node, e.g. 10ms for a 20 ms round trip, 500us for 1 ms (default none)",
    ),
    (
        "test.link.loss",
        "TEST ONLY: share of messages to other nodes lost, 0 to 1 (default 0)",
    ),
    (
        "protobuf.max_message_size",
        "largest PB frame accepted (default 64MB)",
    ),
    (
        "delete_mode",
        "keep, immediate or a delay such as 3s (default 3s)",
    ),
    (
        "object.size.warning_threshold",
        "log objects larger than this (default 5MB)",
    ),
    (
        "object.size.maximum",
        "refuse objects larger than this (default 50MB)",
    ),
    (
        "object.siblings.warning_threshold",
        "log objects with more siblings (default 25)",
    ),
    (
        "object.siblings.maximum",
        "refuse writes making more siblings (default 100)",
    ),
    (
        "bitcask.max_file_size",
        "rotation size R of data files, or auto (default auto: eq. 4 of the sensor-data paper, R = (C_i/n_i)(U_m/2) from the disk's capacity C_i and ring_size stores n_i, from 1MB to 2GB)",
    ),
    (
        "bitcask.sync.strategy",
        "none, o_sync or interval (default none)",
    ),
    (
        "bitcask.sync.interval",
        "fsync period with strategy interval (default 1s)",
    ),
    (
        "bitcask.expiry",
        "off or a time to live such as 1d (default off)",
    ),
    (
        "bitcask.merge.policy",
        "fisherman or classic (default fisherman)",
    ),
    (
        "bitcask.merge.target_usage",
        "U_m: fisherman merges above this usage (default 0.8)",
    ),
    (
        "bitcask.capacity",
        "capacity for usage U instead of the filesystem's (default off)",
    ),
    (
        "bitcask.throttle.low_usage",
        "U_l: puts slow down above this usage (default 0.95)",
    ),
    (
        "bitcask.throttle.high_usage",
        "U_h: puts wait a full second at this usage (default 1.0)",
    ),
    (
        "bitcask.reserve",
        "disk space held back from puts for deletes, merges and a start at a full disk; with leveldb, the free space below which puts are refused (default 64MB; 0 for none)",
    ),
    (
        "leveldb.data_root",
        "where the leveldb backend keeps its database (default $(platform_data_dir)/leveldb)",
    ),
    (
        "leveldb.maximum_memory.percent",
        "share of the node's memory (the machine's, or its control group's limit) for leveldb's block cache and write buffers, all vnodes together (default 70, as Riak)",
    ),
    (
        "leveldb.maximum_memory",
        "the same as a size, instead of the percentage (default off)",
    ),
    (
        "leveldb.sync_on_write",
        "on: each write reaches the disk before it is acknowledged (default off: in the kernel, safe from a crash of the process)",
    ),
    (
        "leveldb.compression",
        "on or off: LZ4 compression of table blocks (default on)",
    ),
    (
        "leveldb.bloomfilter",
        "on or off: bloom filters on tables (default on)",
    ),
    (
        "leveled.data_root",
        "where the leveled backend keeps its ledgers and journals (default $(platform_data_dir)/leveled)",
    ),
    (
        "leveled.maximum_memory.percent",
        "share of the node's memory for leveled's block cache and write buffers, all vnodes together (default 70, as leveldb's); also leveled.maximum_memory as a size",
    ),
    (
        "leveled.sync_strategy",
        "none: writes are in the kernel when acknowledged (default); sync or riak_sync: on the disk",
    ),
    (
        "leveled.compression_method",
        "native or lz4: values compressed with LZ4 in the journal (default native); none",
    ),
    (
        "leveled.compression_point",
        "on_receipt or on_compact: accepted for Riak's configs; values are compressed as they are written to a journal file",
    ),
    (
        "leveled.journal_size",
        "a journal file is closed near this size (default 64MB; Riak's default is 1GB per vnode journal file)",
    ),
    (
        "leveled.singlefile_compactionpercentage",
        "a journal file whose live share falls below this percentage may have its live values moved out when the ledger tables pointing into it are compacted; a file with none live is deleted (default 30, as Riak)",
    ),
    (
        "multi_backend.default",
        "with storage_backend = multi: the backend of buckets whose backend property names none",
    ),
    (
        "multi_backend.NAME.storage_backend",
        "with storage_backend = multi: bitcask, leveldb, leveled or memory for the backend NAME (a bucket chooses it with its backend property)",
    ),
    (
        "multi_backend.NAME.bitcask.data_root",
        "where NAME keeps its Bitcask stores (default $(platform_data_dir)/multi/NAME)",
    ),
    (
        "multi_backend.NAME.leveldb.data_root",
        "where NAME keeps its leveldb database (default $(platform_data_dir)/multi/NAME)",
    ),
    (
        "multi_backend.NAME.leveled.data_root",
        "where NAME keeps its leveled database (default $(platform_data_dir)/multi/NAME)",
    ),
    (
        "multi_backend.NAME.leveled.journal_size",
        "NAME's journal file size; also .leveled.maximum_memory(.percent), .sync_strategy, .compression_method, .compression_point, .singlefile_compactionpercentage",
    ),
    (
        "multi_backend.NAME.leveldb.maximum_memory.percent",
        "NAME's share of the machine's memory (default 70 divided among the multi's leveldb and leveled backends); also .maximum_memory, .sync_on_write, .compression, .bloomfilter",
    ),
    (
        "multi_backend.NAME.memory_backend.max_memory_per_vnode",
        "NAME's memory cap per vnode (default off); also .memory_backend.ttl",
    ),
    (
        "memory_backend.max_memory_per_vnode",
        "memory backend cap per vnode (default off)",
    ),
    (
        "memory_backend.ttl",
        "memory backend time to live (default off)",
    ),
    (
        "runtime.worker_threads",
        "threads serving connections and the cluster runtime (default one per core; rill devrel splits the cores among its nodes)",
    ),
    (
        "log.console.level",
        "debug, info, warning or error (default info)",
    ),
    ("sensor", "on or off: the sensor-data service (InfluxDB line protocol on /write and /api/v2/write, export on /api/v1/export; default on)"),
    ("sensor.window", "sensor blocks never span two windows of this length; windows expire whole, so a database keeps up to one window beyond its storage period (default 1d)"),
    ("sensor.block_samples", "samples of a full sensor block, the sensor-data paper's B (default 2048)"),
    ("sensor.grace", "a window is cut into blocks this long after it ends, for late samples (default 5m)"),
    ("sensor.retention", "how long a sensor database keeps samples, the paper's Y (default 30d)"),
    ("sensor.retention.DB", "database DB's own storage period (e.g. sensor.retention.telegraf = 90d)"),
    ("sensor.sync_on_write", "on: a sample is acknowledged once on the disk (one fsync shared by writers arriving together); off: once in the kernel (default on)"),
    ("sensor.max_file_size", "a sensor block store's data file is closed past this size (default 64MB)"),
    ("sensor.block_cache", "memory for sensor blocks written or read lately, so a dashboard's refresh reads its blocks from memory; 0 keeps none (default 64MB)"),
    ("sensor.log_segment_size", "a sensor write-ahead log segment is closed past this size; segments are deleted once their samples are in stored blocks, at most 16 kept (default 64MB)"),
    ("sensor.listener.line", "the collection port: InfluxDB line protocol over TCP, an address such as 127.0.0.1:8089, or off (default off)"),
    ("sensor.listener.line.db", "the database the collection port's lines go to (default sensors)"),
    ("sensor.listener.line.precision", "the collection port's timestamp unit: ns, us, ms, s, m or h (default ns)"),
    ("sensor.mqtt.broker", "the MQTT broker the sensor service subscribes to, host:port such as 127.0.0.1:1883, or off (default off)"),
    ("sensor.mqtt.topics", "the MQTT topic filters subscribed to, comma-separated (default #: every topic)"),
    ("sensor.mqtt.qos", "the subscription's QoS, 1 or 2; a message is acknowledged once its samples are durable (default 1)"),
    ("sensor.mqtt.db", "the database MQTT samples go to (default sensors)"),
    ("sensor.mqtt.precision", "the timestamp unit of line protocol in MQTT messages: ns, us, ms, s, m or h (default ns)"),
    ("sensor.mqtt.client_id", "the MQTT client id, fixed so the broker keeps the session across restarts (default rill- and the node's name)"),
    ("sensor.mqtt.username", "the MQTT user name (default none)"),
    ("sensor.mqtt.password", "the MQTT password (default none)"),
];
