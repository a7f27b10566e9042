//! `rill-bench`: Rill's benchmark tool. Each subcommand is a workload that
//! prints its figures as it measures them (with the machine named) and ends
//! with one JSON line of all figures; `--quick` runs a short version for CI.

mod aae;
mod child;
mod claim;
mod engine;
mod footprint;
mod handoff;
mod ingest;
mod kv;
mod kv_bound;
mod limit;
mod machine;
mod mixed;
mod plot;
mod report;
mod sensor;
mod stores;
mod tsdb;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "rill-bench", version, about = "Rill's benchmark tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The Bitcask engine alone: put and append MB/s, get ops/s, keydir
    /// bytes per key, restart time with and without hints.
    Engine(engine::Args),
    /// The paper's sensor workload on a loop-mounted filesystem: cyclic
    /// overwrite by M writers of S sensors, per engine side by side.
    Sensor(sensor::Args),
    /// A load on any Riak-compatible PB endpoint: a get/put/delete mix,
    /// key and value generators, concurrency, duration; ops/s and latency
    /// percentiles per interval.
    Kv(kv::Args),
    /// The claim simulator: balance, target_n_val violations and
    /// partitions moved as clusters grow and shrink, per ring size, and
    /// riak_core's typical scenario against its claim v4.
    Claim(claim::Args),
    /// Sequential keys loaded as fast as each backend takes them
    /// (rocksdb, leveldb, bitcask side by side): throughput and maximum
    /// latency per interval, the data larger than the memory allowed.
    Ingest(ingest::Args),
    /// Leveled's volume test (GET : update : 2i range = 100 : 20 : 2 on
    /// 8 KB objects, half the updates replacing four index entries) per
    /// backend side by side: throughput and percentiles over time, bytes
    /// written per byte put, bytes on disk per live byte.
    Mixed(mixed::Args),
    /// The comparison of "Riak – from Bitcask to LevelDB": the same keys
    /// and compressible values in each backend; bytes on disk, restart
    /// time to the first read (page cache dropped), resident memory per
    /// key.
    Footprint(footprint::Args),
    /// The sensor-data service against VictoriaMetrics and InfluxDB, the
    /// same seeded IoT data over HTTP to each: ingest per server
    /// CPU-second, bytes per sample, one-sensor day and month query
    /// latency, answers compared; and the block codecs compared.
    Tsdb(tsdb::Args),
    /// Active anti-entropy: exchanges between two replicas of a vnode
    /// set in sync and out of sync (time, CPU, bytes), and keys repaired
    /// per minute.
    Aae(aae::Args),
    /// Handoff: the memory a sender holds while it reads a partition, a
    /// chunk at a time against the whole listing it held before.
    Handoff(handoff::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Engine(args) => engine::run(args),
        Command::Sensor(args) => sensor::run(args),
        Command::Kv(args) => kv::run(args),
        Command::Claim(args) => claim::run(args),
        Command::Ingest(args) => ingest::run(args),
        Command::Mixed(args) => mixed::run(args),
        Command::Footprint(args) => footprint::run(args),
        Command::Tsdb(args) => tsdb::run(args),
        Command::Aae(args) => aae::run(args),
        Command::Handoff(args) => handoff::run(args),
    }
}
