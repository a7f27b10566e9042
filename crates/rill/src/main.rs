//! `rill`: the Rill node and its admin tool.
//!
//!   rill console            run a node in the foreground
//!   rill start | stop       run one in the background (pid file, see daemon.rs)
//!   rill ping               is the node up?
//!   rill chkconfig          check a configuration file
//!   rill admin ...          bucket types, status
//!   rill planing ...        the largest planing Bitcask rotation size

mod admin;
mod config;
mod daemon;
mod devrel;
mod planing;
mod repair;
mod sensor;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use config::Config;
use daemon::Status;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "rill",
    version,
    about = "Rill, a Riak-compatible key-value database"
)]
struct Cli {
    /// A riak.conf-style configuration file (default: $RILL_CONF, else
    /// ./rill.conf if present, else built-in defaults: 127.0.0.1, data
    /// under ./data).
    #[arg(short, long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node in the foreground (Ctrl-C or SIGTERM stops it cleanly).
    Console,
    /// Run a node in the background, its log in <data>/rill.log. A node
    /// (background or console) holds a lock on <data>/rill.pid, with its
    /// pid in it; a pid file nobody holds is stale and ignored.
    Start,
    /// Stop the node running on the configured data directory.
    Stop,
    /// Ask the node running on the configured data directory whether it
    /// answers.
    Ping,
    /// Check a configuration file: every problem with its line.
    Chkconfig {
        /// List the settings this build knows: what each takes, its
        /// default and what it does.
        #[arg(long)]
        keys: bool,
        /// The same list as a Markdown table (docs/settings.md).
        #[arg(long)]
        markdown: bool,
    },
    /// A cluster of N nodes on this machine (dev1..devN under --dir, as
    /// Riak's devrel), started, joined and settled; --stop stops them.
    Devrel {
        /// Nodes in the cluster.
        #[arg(default_value_t = 3)]
        nodes: u32,
        #[arg(long, default_value = "dev")]
        dir: PathBuf,
        #[arg(long, default_value_t = 64)]
        ring_size: u32,
        /// Node K listens on base + 10K + 7 (PB), + 8 (HTTP), + 9 (cluster).
        #[arg(long, default_value_t = 10000)]
        base_port: u16,
        #[arg(long, default_value = "bitcask")]
        backend: String,
        /// A `key=value` setting for every node's configuration, such as
        /// `memory_backend.max_memory_per_vnode=64MB` or (test only)
        /// `test.link.delay=10ms`; repeatable. Written when a node's
        /// configuration is made (an existing one is kept).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = setting)]
        settings: Vec<(String, String)>,
        /// Stop the devrel's nodes instead.
        #[arg(long)]
        stop: bool,
    },
    /// Administer a running node.
    Admin {
        #[command(subcommand)]
        what: AdminCommand,
    },
    /// The largest Bitcask rotation size R that keeps a node "planing"
    /// (merge only deletes fully dead files): R <= (C_i / n_i)(U_m - V)
    /// (the sensor-data paper, "Riak KV performance in sensor data storage
    /// application", eq. 4).
    Planing {
        /// Filesystem capacity of the node's data directory, C_i
        /// (bytes, or with a unit: 100GB, 8GiB, 512MB).
        #[arg(long)]
        capacity: String,
        /// Vnodes on the node, n_i.
        #[arg(long, default_value_t = 64)]
        vnodes: u32,
        /// Planned live data as a share of capacity, V (0..1).
        #[arg(long)]
        live_share: f64,
        /// Merge target usage U_m.
        #[arg(long, default_value_t = 0.8)]
        target_usage: f64,
    },
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Move this node's data to another backend while it serves, one
    /// partition at a time: TO is bitcask, leveldb or leveled (the same
    /// TO resumes a stopped move); `status` shows how far it is.
    BackendMigrate {
        /// bitcask, leveldb, leveled, or `status`.
        target: String,
        /// Copy at most this many keys per second (0: as fast as it goes).
        #[arg(long, default_value_t = 0)]
        keys_per_second: u64,
        /// Follow the move until it is done.
        #[arg(long)]
        wait: bool,
    },
    /// Bucket types: create NAME ['{"props":{...}}'] | activate NAME |
    /// update NAME JSON | list | status NAME.
    BucketType {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The node's statistics.
    Status,
    /// Cluster membership, as riak-admin's: join NODE | leave [NODE] |
    /// force-remove NODE | replace NODE NEW | force-replace NODE NEW |
    /// plan | commit | clear | status. NODE for join is a member's
    /// cluster listener (host:port) or name@host (port 8099).
    Cluster {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Each member's status and share of the ring.
    MemberStatus,
    /// The claimant, whether the ring is ready, pending ownership changes
    /// and unreachable nodes.
    RingStatus,
    /// Ownership transfers pending and handoffs running.
    Transfers,
    /// Mark an unreachable member down, so the cluster converges without
    /// it.
    Down { node: String },
    /// Set how many handoffs may leave this node at once (Riak's
    /// transfer_limit; default 2).
    TransferLimit { limit: u64 },
    /// Rebuild one partition this node owns from its neighbours on the
    /// ring (PARTITION: its number, or its index as ring-status prints
    /// it); progress in `transfers`.
    RepairPartition { partition: String },
    /// Rebuild every partition this node owns from its neighbours.
    RepairNode,
    /// Active anti-entropy, as Riak 3.4's: treestatus [--format
    /// table|json] | rebuild-now | exchangetick|rebuildtick|maxresults|
    /// rangeboost|repairloops [VALUE] (show, or set while the node runs).
    Tictacaae {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// With the node stopped: `verify` reads every entry of its leveldb
    /// and leveled partitions and lists damaged ranges (exit status 1 if
    /// any); `repair` rebuilds the damaged partitions without them and
    /// records the ranges in lost/damaged-ranges.
    Leveldb {
        #[arg(value_enum)]
        action: repair::Action,
    },
}

fn config_path(cli: &Option<PathBuf>) -> Option<PathBuf> {
    cli.clone()
        .or_else(|| std::env::var_os("RILL_CONF").map(PathBuf::from))
        .or_else(|| {
            Path::new("rill.conf")
                .exists()
                .then(|| PathBuf::from("rill.conf"))
        })
}

fn load(cli: &Option<PathBuf>) -> Result<Config> {
    match config_path(cli) {
        None => Ok(Config::defaults()),
        Some(p) => Config::load(&p).map_err(|errs| {
            let lines: Vec<String> = errs
                .iter()
                .map(|e| format!("{}: {e}", p.display()))
                .collect();
            anyhow::anyhow!("{}", lines.join("\n"))
        }),
    }
}

/// `key=value` for `rill devrel --set`.
fn setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected key=value, found {s:?}")),
    }
}

/// glibc's malloc serves each large buffer (a value of megabytes, and
/// the messages carrying it) from fresh pages the kernel must zero, and
/// hands them back when freed: with values of 8 MB that page-fault work
/// took more CPU than copying the values (measured, docs/benchmarks.md).
/// Buffers up to 32 MB (glibc's largest threshold) come from the heap
/// instead, and freed memory is kept for reuse up to 1 GiB.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets malloc parameters; called before any
    // thread is started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

/// Stops a runtime without waiting for its tasks when dropped (after the
/// node's own runtime is done).
struct ShutdownOnDrop(Option<tokio::runtime::Runtime>);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

fn main() -> Result<()> {
    tune_allocator();
    let cli = Cli::parse();
    match &cli.command {
        Command::Planing {
            capacity,
            vnodes,
            live_share,
            target_usage,
        } => planing::advise(capacity, *vnodes, *live_share, *target_usage),
        Command::Chkconfig { keys, markdown } => {
            if *markdown || *keys {
                let text = if *markdown {
                    config::setting::markdown()
                } else {
                    config::setting::listing()
                };
                // A reader that stops early (`| head`) is no error.
                use std::io::Write;
                return match std::io::stdout().lock().write_all(text.as_bytes()) {
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                    _ => Ok(()),
                };
            }
            load(&cli.config)?;
            println!("config is OK");
            Ok(())
        }
        Command::Devrel {
            nodes,
            dir,
            ring_size,
            base_port,
            backend,
            settings,
            stop,
        } => {
            let d = devrel::Devrel {
                nodes: *nodes,
                dir: dir.clone(),
                ring_size: *ring_size,
                base_port: *base_port,
                backend: backend.clone(),
                settings: settings.clone(),
            };
            if *stop {
                d.stop()
            } else {
                d.up()
            }
        }
        Command::Console => console(load(&cli.config)?),
        Command::Start => start(&cli.config, load(&cli.config)?),
        Command::Stop => stop(load(&cli.config)?),
        Command::Ping => ping(load(&cli.config)?),
        Command::Admin {
            what: AdminCommand::Leveldb { action },
        } => repair::run(load(&cli.config)?, *action),
        Command::Admin { what } => {
            let addr = load(&cli.config)?.http_listener;
            match what {
                AdminCommand::BucketType { args } => admin::bucket_type(addr, args),
                AdminCommand::Status => admin::status(addr),
                AdminCommand::BackendMigrate {
                    target,
                    keys_per_second,
                    wait,
                } => admin::backend_migrate(addr, target, *keys_per_second, *wait),
                AdminCommand::Cluster { args } => admin::cluster(addr, args),
                AdminCommand::MemberStatus => {
                    admin::cluster_op(addr, serde_json::json!({"op": "member-status"}))
                }
                AdminCommand::RingStatus => {
                    admin::cluster_op(addr, serde_json::json!({"op": "ring-status"}))
                }
                AdminCommand::Transfers => {
                    admin::cluster_op(addr, serde_json::json!({"op": "transfers"}))
                }
                AdminCommand::TransferLimit { limit } => admin::cluster_op(
                    addr,
                    serde_json::json!({"op": "transfer-limit", "limit": limit}),
                ),
                AdminCommand::RepairPartition { partition } => admin::cluster_op(
                    addr,
                    serde_json::json!({"op": "repair-partition", "partition": partition}),
                ),
                AdminCommand::RepairNode => {
                    admin::cluster_op(addr, serde_json::json!({"op": "repair-node"}))
                }
                AdminCommand::Tictacaae { args } => admin::tictacaae(addr, args),
                AdminCommand::Down { node } => {
                    admin::cluster_op(addr, serde_json::json!({"op": "down", "node": node}))
                }
                AdminCommand::Leveldb { .. } => unreachable!("handled above"),
            }
        }
    }
}

fn console(cfg: Config) -> Result<()> {
    let level = match cfg.log_level.as_str() {
        "debug" => tracing::Level::DEBUG,
        "warn" => tracing::Level::WARN,
        "error" => tracing::Level::ERROR,
        _ => tracing::Level::INFO,
    };
    // Colour only for a person at a terminal: `rill start` sends this to
    // <data>/rill.log, which must stay plain text.
    let colour = std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false)
        .with_ansi(colour)
        .init();
    let data = &cfg.node.data_dir;
    std::fs::create_dir_all(data)
        .with_context(|| format!("cannot create the data directory {}", data.display()))?;
    // First, before binding a port or touching the data: only one node per
    // data directory. Held until the process exits.
    daemon::lock(&cfg.pid_file).map_err(|e| match e {
        daemon::LockError::Held { pid: Some(pid) } => anyhow::anyhow!(
            "a node is already running on {} (pid {pid})",
            data.display()
        ),
        daemon::LockError::Held { pid: None } => {
            anyhow::anyhow!("a node is already running on {}", data.display())
        }
        daemon::LockError::Io(e) => {
            anyhow::anyhow!("cannot lock {}: {e}", cfg.pid_file.display())
        }
    })?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cfg.worker_threads {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build()?;
    // Client connections that carry large values move to these threads,
    // at a lower CPU priority (`rill_api::pb::PbConfig::bulk`).
    let bulk_io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rill-pb-bulk")
        .on_thread_start(rill_node::bulk::lower_priority)
        .enable_all()
        .build()?;
    let bulk_handle = bulk_io.handle().clone();
    let _stop_bulk_io_last = ShutdownOnDrop(Some(bulk_io));
    runtime.block_on(async move {
        let pb = tokio::net::TcpListener::bind(cfg.pb_listener)
            .await
            .with_context(|| format!("cannot listen for PB on {}", cfg.pb_listener))?;
        let http = tokio::net::TcpListener::bind(cfg.http_listener)
            .await
            .with_context(|| format!("cannot listen for HTTP on {}", cfg.http_listener))?;
        let started = Instant::now();
        let node_cfg = cfg.node.clone();
        let node = tokio::task::spawn_blocking(move || rill_node::Node::open(node_cfg))
            .await?
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        // The key-value service runs whatever happens to the sensor one
        // (a full disk can keep its log from starting a segment).
        let sensors = tokio::task::spawn_blocking({
            let (node, sensor_cfg) = (node.clone(), cfg.sensor.clone());
            move || sensor::open(&node, &sensor_cfg)
        })
        .await?
        .unwrap_or_else(|e| {
            tracing::error!(error = %format!("{e:#}"), "the sensor-data service did not start; the node serves without it until it restarts");
            None
        });
        let pb_stats = Arc::new(rill_api::pb::PbStats::default());
        let pb_cfg = rill_api::pb::PbConfig {
            max_frame_bytes: cfg.pb_max_frame_bytes,
            bulk: Some(bulk_handle),
            ..Default::default()
        };
        let pb_task = tokio::spawn(rill_api::pb::serve(
            pb,
            node.clone(),
            pb_cfg,
            pb_stats.clone(),
        ));
        let mut peer_cfg = rill_peer::PeerConfig::new(cfg.cluster_listener);
        peer_cfg.advertise = Some(cfg.cluster_advertised().map_err(anyhow::Error::msg)?);
        peer_cfg.target_n_val = 4;
        peer_cfg.handoff.transfer_limit = cfg.transfer_limit;
        peer_cfg.down_after = cfg.down_after;
        peer_cfg.suspect_after = cfg.down_after / 2;
        peer_cfg.handoff.sender.batch_items = cfg.handoff_batch_items;
        peer_cfg.handoff.sender.ack_timeout_ms = cfg.handoff_timeout.as_millis() as u64;
        peer_cfg.handoff.sender.keepalive_ms = (cfg.handoff_timeout.as_millis() as u64 / 3).max(1);
        peer_cfg.handoff.receiver.idle_timeout_ms = 2 * cfg.handoff_timeout.as_millis() as u64;
        if !cfg.test_link_delay.is_zero() || cfg.test_link_loss > 0.0 {
            tracing::warn!(
                delay = ?cfg.test_link_delay,
                loss = cfg.test_link_loss,
                "test.link.* is set: messages to other nodes are delayed or lost on purpose (for tests and benchmarks only)"
            );
            let seed = cfg.node.nodename.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            peer_cfg.hook = Some(std::sync::Arc::new(rill_peer::FixedLink::new(
                cfg.test_link_delay,
                cfg.test_link_loss,
                seed,
            )));
        }
        let peer = rill_peer::Peer::start(node.clone(), peer_cfg)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(s) = &sensors {
            s.cluster.cluster_attached();
        }
        // The collection port listens before HTTP answers, so a node that
        // answers `/ping` takes lines on every port it was given.
        let sensor_tasks = match &sensors {
            Some(s) => s.start_listeners(&cfg.sensor, &cfg.node.nodename).await?,
            None => Vec::new(),
        };
        let http_task = tokio::spawn(rill_api::http::serve(
            http,
            node.clone(),
            pb_stats,
            Some(peer.clone()),
            sensors.as_ref().map(|s| s.cluster.clone()),
        ));
        // Last of the start's lines: everything it names answers now.
        tracing::info!(
            node = node.nodename(),
            ring_size = node.ring_size(),
            data = %cfg.node.data_dir.display(),
            pb = %cfg.pb_listener,
            http = %cfg.http_listener,
            cluster = %peer.local_addr(),
            sensor = sensors.is_some(),
            open_ms = started.elapsed().as_millis() as u64,
            "node ready"
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: stopping"),
            _ = term.recv() => tracing::info!("terminated: stopping"),
            r = pb_task => tracing::error!(result = ?r, "the PB listener stopped"),
            r = http_task => tracing::error!(result = ?r, "the HTTP listener stopped"),
        }
        // Anti-entropy's exchanges and the reaper stop first, while the
        // runtime whose timers their waits use runs, on a thread that may
        // block: the node's last holder may go only as the runtime shuts
        // down, on one of its workers, where joining a thread that waits
        // for those timers would never end.
        let background = node.clone();
        tokio::task::spawn_blocking(move || background.stop_background()).await?;
        drop(peer);
        for t in sensor_tasks {
            t.abort();
        }
        if let Some(s) = sensors {
            if let Err(e) = tokio::task::spawn_blocking(move || s.close()).await? {
                tracing::error!(error = %e, "the sensor-data service did not stop cleanly");
            }
        }
        let synced = tokio::task::spawn_blocking(move || node.sync()).await?;
        if let Err(e) = synced {
            bail!("could not make every write durable at shutdown: {e}");
        }
        tracing::info!("node stopped");
        Ok(())
    })
}

/// What `rill ping` asks: a PB ping, giving up after `timeout`.
fn pb_ping(addr: SocketAddr, timeout: Duration) -> Result<()> {
    rill_client::Client::connect_timeout(&addr, timeout)?.ping()?;
    Ok(())
}

fn status(cfg: &Config) -> Result<Status> {
    daemon::status(&cfg.pid_file).with_context(|| format!("cannot read {}", cfg.pid_file.display()))
}

fn ping(cfg: Config) -> Result<()> {
    let Status::Running { pid } = status(&cfg)? else {
        bail!("the node is not running");
    };
    pb_ping(cfg.pb_listener, Duration::from_secs(10)).map_err(|e| {
        anyhow::anyhow!(
            "the node (pid {pid}) is running but does not answer on {}: {e}",
            cfg.pb_listener
        )
    })?;
    println!("pong");
    Ok(())
}

fn start(config_arg: &Option<PathBuf>, cfg: Config) -> Result<()> {
    match status(&cfg)? {
        Status::Running { pid } => bail!("a node is already running (pid {pid})"),
        Status::NotRunning {
            stale_pid: Some(pid),
        } => println!("ignoring a stale pid file (pid {pid} is not running)"),
        Status::NotRunning { stale_pid: None } => {}
    }
    std::fs::create_dir_all(&cfg.node.data_dir).with_context(|| {
        format!(
            "cannot create the data directory {}",
            cfg.node.data_dir.display()
        )
    })?;
    let log_path = cfg.node.data_dir.join("rill.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open the log {}", log_path.display()))?;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    if let Some(p) = config_path(config_arg) {
        cmd.arg("--config").arg(std::fs::canonicalize(&p)?);
    }
    cmd.arg("console")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // A new session, so the node outlives the shell that started it.
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no Rust state.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    // The node writes the pid file itself (daemon.rs); it is our child
    // until we exit, so `try_wait` sees it die (a zombie included).
    let mut child = cmd.spawn().context("cannot start the node")?;
    let pid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(st) = child.try_wait()? {
            let how = match st.code() {
                Some(code) => format!("status {code}"),
                None => st.to_string(),
            };
            bail!(
                "the node exited during start ({how}); see {}",
                log_path.display()
            );
        }
        // Ready: our child holds the lock and the PB listener answers.
        if status(&cfg)? == (Status::Running { pid })
            && pb_ping(cfg.pb_listener, Duration::from_secs(2)).is_ok()
        {
            println!("rill started (pid {pid}), log in {}", log_path.display());
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "the node (pid {pid}) did not answer on {} within 120 s; see {}",
                cfg.pb_listener,
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stop(cfg: Config) -> Result<()> {
    let Status::Running { pid } = status(&cfg)? else {
        // Leave the file alone: a node starting now may have just locked it.
        bail!("the node is not running");
    };
    // SAFETY: kill has no memory effects; `pid` is the lock holder (> 0).
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        let e = std::io::Error::last_os_error();
        // ESRCH: it exited just now; the loop below sees the lock gone.
        if e.raw_os_error() != Some(libc::ESRCH) {
            bail!("cannot signal the node (pid {pid}): {e}");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if matches!(status(&cfg)?, Status::NotRunning { .. }) {
            println!("rill stopped");
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("the node (pid {pid}) did not stop within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
