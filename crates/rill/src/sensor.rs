//! The node's sensor-data service (docs/sensors.md): the engine under
//! `$(platform_data_dir)/sensor` (its log in `wal/`, its stores in
//! `data/`), a thread that ticks it every second, a merge scheduler of
//! its own over the block stores, which deletes the files whose blocks
//! have all expired, and the service on the cluster's ring over them
//! (`rill-sensor-cluster`).

use crate::config::SensorConfig;
use anyhow::{Context, Result};
use merge_control::{MergeScheduler, SchedulerSettings, UsageSource};
use rill_node::Node;
use rill_sensor_cluster::{Replication, SensorCluster};
use rill_tsdb::wal::WalOptions;
use rill_tsdb::{BitcaskStorage, Engine, EngineOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a node looks for sensor data it holds but does not own
/// (anti-entropy's rounds are `sensor.anti_entropy.interval` apart).
const HANDOFF_EVERY: Duration = Duration::from_secs(2);

pub struct Sensors {
    pub engine: Arc<Engine>,
    /// Writes and queries over the cluster's ring.
    pub cluster: Arc<SensorCluster>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
    handoff: Option<JoinHandle<()>>,
    exchange: Option<JoinHandle<()>>,
    _merges: Arc<MergeScheduler>,
}

fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Opens the service, or `None` when `sensor = off`.
pub fn open(node_ref: &Arc<Node>, s: &SensorConfig) -> Result<Option<Sensors>> {
    if !s.enabled {
        return Ok(None);
    }
    let node = node_ref.config();
    if let rill_node::Quorum::N(w) = s.w {
        if w > s.n_val {
            anyhow::bail!(
                "sensor.w = {w} is more than sensor.n_val = {}: no write could be acknowledged",
                s.n_val
            );
        }
    }
    let dir = node.data_dir.join("sensor");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    let merges = Arc::new(MergeScheduler::start(SchedulerSettings {
        usage: match s.capacity_bytes {
            Some(bytes) => UsageSource::Capacity { bytes },
            None => UsageSource::Filesystem(data.clone()),
        },
        policy: node.merge_policy.policy(),
        throttle: node.throttle,
        workers: 1,
        idle_tick: Duration::from_millis(200),
    }));
    let store_opts = bitcask::Options {
        max_file_size_bytes: s.max_file_bytes,
        ..bitcask::Options::default()
    };
    let (registered, unregistered) = (merges.clone(), merges.clone());
    let storage = BitcaskStorage::new(
        &data,
        store_opts,
        Box::new(move |store| {
            registered.add_store(store.clone());
        }),
        Box::new(move |dir| drop(unregistered.remove_store(dir))),
    );
    let mut opts = EngineOptions::new(WalOptions {
        vfs: Arc::new(bitcask::vfs::StdVfs),
        segment_bytes: s.log_segment_bytes,
        sync: s.sync_on_write,
    });
    opts.placer = rill_sensor_cluster::route::placer(node_ref.ring_size());
    opts.window_ns = ns(s.window);
    opts.block_samples = s.block_samples;
    opts.grace_ns = ns(s.grace);
    opts.retention_ns = ns(s.retention);
    opts.block_cache = rill_tsdb::cache::BlockCache::new(
        usize::try_from(s.block_cache_bytes).unwrap_or(usize::MAX),
    );
    opts.retention_of = s
        .retention_of
        .iter()
        .map(|(db, d)| (db.clone(), ns(*d)))
        .collect();
    let (engine, report) = Engine::open(
        &dir.join("wal"),
        opts,
        Arc::new(storage),
        rill_api::unix_now_ns(),
    )
    .map_err(|e| anyhow::anyhow!("cannot open the sensor-data service: {e}"))?;
    tracing::info!(
        series = report.series,
        databases = report.databases,
        replayed_samples = report.replayed_samples,
        log_segments = report.log.segments,
        "sensor-data service ready"
    );
    let engine = Arc::new(engine);
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (engine, stop) = (engine.clone(), stop.clone());
        std::thread::Builder::new()
            .name("rill-sensor-tick".into())
            .spawn(move || {
                let mut failing = false;
                while !stop.load(Ordering::Relaxed) {
                    match engine.tick(rill_api::unix_now_ns()) {
                        Ok(_) if failing => {
                            failing = false;
                            tracing::info!("sensor blocks are stored again");
                        }
                        Ok(_) => {}
                        Err(e) if !failing => {
                            failing = true;
                            tracing::error!(error = %e, "sensor blocks could not be stored; they wait in the log and are retried every second");
                        }
                        Err(_) => {}
                    }
                    std::thread::park_timeout(Duration::from_secs(1));
                }
            })
            .context("cannot start the sensor tick thread")?
    };
    let cluster = SensorCluster::start(
        node_ref.clone(),
        engine.clone(),
        Replication {
            n_val: s.n_val,
            w: s.w,
        },
    );
    let handoff = {
        let (cluster, stop) = (cluster.clone(), stop.clone());
        std::thread::Builder::new()
            .name("rill-sensor-handoff".into())
            .spawn(move || {
                // Alone too: a round learns who owns what held, so the
                // owners a join brings are seen as new.
                while !stop.load(Ordering::Relaxed) {
                    cluster.hand_off_round(rill_api::unix_now_ns());
                    std::thread::park_timeout(HANDOFF_EVERY);
                }
            })
            .context("cannot start the sensor handoff thread")?
    };
    let exchange = if s.anti_entropy {
        let (cluster, stop, every) = (cluster.clone(), stop.clone(), s.anti_entropy_interval);
        Some(
            std::thread::Builder::new()
                .name("rill-sensor-aae".into())
                .spawn(move || {
                    // The first round after one interval: the node's view
                    // of the cluster is set by then.
                    std::thread::park_timeout(every);
                    while !stop.load(Ordering::Relaxed) {
                        cluster.exchange_round(rill_api::unix_now_ns());
                        std::thread::park_timeout(every);
                    }
                })
                .context("cannot start the sensor anti-entropy thread")?,
        )
    } else {
        None
    };
    Ok(Some(Sensors {
        engine,
        cluster,
        handoff: Some(handoff),
        exchange,
        stop,
        ticker: Some(ticker),
        _merges: merges,
    }))
}

impl Sensors {
    /// Starts the collection port and the MQTT subscriber, as configured;
    /// their tasks run until aborted.
    pub async fn start_listeners(
        &self,
        s: &SensorConfig,
        nodename: &str,
    ) -> Result<Vec<tokio::task::JoinHandle<()>>> {
        let mut tasks = Vec::new();
        if let Some(addr) = s.line_listener {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for line protocol on {addr}"))?;
            tracing::info!(%addr, db = %s.line_db, "the collection port takes line protocol");
            let port_cfg = rill_api::line_port::LinePortConfig {
                db: s.line_db.clone(),
                precision: s.line_precision,
            };
            let cluster = self.cluster.clone();
            tasks.push(tokio::spawn(async move {
                if let Err(e) = rill_api::line_port::serve(l, cluster, port_cfg).await {
                    tracing::error!(error = %e, "the collection port stopped");
                }
            }));
        }
        if let Some((host, port)) = &s.mqtt_broker {
            let client_id = s.mqtt_client_id.clone().unwrap_or_else(|| {
                let name: String = nodename
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                    .collect();
                format!("rill-{name}")
            });
            let cfg = rill_api::mqtt::MqttConfig {
                host: host.clone(),
                port: *port,
                topics: s.mqtt_topics.clone(),
                qos: s.mqtt_qos,
                db: s.mqtt_db.clone(),
                precision: s.mqtt_precision,
                client_id,
                username: s.mqtt_username.clone(),
                password: s.mqtt_password.clone(),
            };
            tracing::info!(broker = %format!("{host}:{port}"), topics = ?cfg.topics, db = %cfg.db, client_id = %cfg.client_id, "subscribing to MQTT");
            tasks.push(tokio::spawn(rill_api::mqtt::run(self.cluster.clone(), cfg)));
        }
        Ok(tasks)
    }

    /// Stops ticking and stores every buffered sample (a clean stop).
    pub fn close(mut self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for t in [
            self.ticker.take(),
            self.handoff.take(),
            self.exchange.take(),
        ]
        .into_iter()
        .flatten()
        {
            t.thread().unpark();
            let _ = t.join();
        }
        self.engine.close().map(drop).map_err(|e| {
            anyhow::anyhow!("sensor samples not stored at shutdown (they are in the log): {e}")
        })
    }
}
