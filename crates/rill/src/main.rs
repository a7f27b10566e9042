//! `rill`: the Rill node and its admin tool.
//!
//!   rill console            run a node in the foreground
//!   rill start | stop       run one in the background (pid file)
//!   rill ping               is the node up?
//!   rill chkconfig          check a configuration file
//!   rill admin ...          bucket types, status
//!   rill planing ...        the largest planing Bitcask rotation size

mod admin;
mod config;
mod size;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use config::Config;
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
    /// Run a node in the background; its pid goes to <data>/rill.pid and
    /// its log to <data>/rill.log.
    Start,
    /// Stop the background node.
    Stop,
    /// Ask the node whether it is up.
    Ping,
    /// Check a configuration file: every problem with its line.
    Chkconfig {
        /// List the settings this build knows.
        #[arg(long)]
        keys: bool,
    },
    /// Administer a running node.
    Admin {
        #[command(subcommand)]
        what: AdminCommand,
    },
    /// The largest Bitcask rotation size R that keeps a node "planing"
    /// (merge only deletes fully dead files): R <= (C_i / n_i)(U_m - V)
    /// (shared/seeds/000, eq. 4).
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
    /// Bucket types: create NAME ['{"props":{...}}'] | activate NAME |
    /// update NAME JSON | list | status NAME.
    BucketType {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The node's statistics.
    Status,
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

fn main() -> Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Planing {
            capacity,
            vnodes,
            live_share,
            target_usage,
        } => planing(capacity, *vnodes, *live_share, *target_usage),
        Command::Chkconfig { keys } => {
            if *keys {
                for (k, what) in config::KEYS {
                    println!("{k:40} {what}");
                }
                return Ok(());
            }
            load(&cli.config)?;
            println!("config is OK");
            Ok(())
        }
        Command::Console => console(load(&cli.config)?),
        Command::Start => start(&cli.config, load(&cli.config)?),
        Command::Stop => stop(load(&cli.config)?),
        Command::Ping => {
            let cfg = load(&cli.config)?;
            let mut c = rill_client::Client::connect(cfg.pb_listener).with_context(|| {
                format!(
                    "cannot reach the node at {} (is it running? `rill start`)",
                    cfg.pb_listener
                )
            })?;
            c.ping()?;
            println!("pong");
            Ok(())
        }
        Command::Admin { what } => {
            let addr = load(&cli.config)?.http_listener;
            match what {
                AdminCommand::BucketType { args } => admin::bucket_type(addr, args),
                AdminCommand::Status => admin::status(addr),
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
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
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
        tracing::info!(
            node = node.nodename(),
            ring_size = node.ring_size(),
            data = %cfg.node.data_dir.display(),
            pb = %cfg.pb_listener,
            http = %cfg.http_listener,
            open_ms = started.elapsed().as_millis() as u64,
            "node ready"
        );
        let pb_stats = Arc::new(rill_api::pb::PbStats::default());
        let pb_cfg = rill_api::pb::PbConfig {
            max_frame_bytes: cfg.pb_max_frame_bytes,
            ..Default::default()
        };
        let pb_task = tokio::spawn(rill_api::pb::serve(
            pb,
            node.clone(),
            pb_cfg,
            pb_stats.clone(),
        ));
        let http_task = tokio::spawn(rill_api::http::serve(http, node.clone(), pb_stats));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: stopping"),
            _ = term.recv() => tracing::info!("terminated: stopping"),
            r = pb_task => tracing::error!(result = ?r, "the PB listener stopped"),
            r = http_task => tracing::error!(result = ?r, "the HTTP listener stopped"),
        }
        let synced = tokio::task::spawn_blocking(move || node.sync()).await?;
        if let Err(e) = synced {
            bail!("could not make every write durable at shutdown: {e}");
        }
        tracing::info!("node stopped");
        Ok(())
    })
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn start(config_arg: &Option<PathBuf>, cfg: Config) -> Result<()> {
    if let Some(pid) = read_pid(&cfg.pid_file) {
        if alive(pid) {
            bail!(
                "a node is already running (pid {pid}, {})",
                cfg.pid_file.display()
            );
        }
    }
    std::fs::create_dir_all(&cfg.node.data_dir)?;
    let log_path = cfg.node.data_dir.join("rill.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
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
    let child = cmd.spawn().context("cannot start the node")?;
    std::fs::write(&cfg.pid_file, format!("{}\n", child.id()))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if admin::request(cfg.http_listener, "GET", "/ping", None).is_ok_and(|r| r.status == 200) {
            println!(
                "rill started (pid {}), log in {}",
                child.id(),
                log_path.display()
            );
            return Ok(());
        }
        if !alive(child.id() as i32) {
            bail!("the node exited during start; see {}", log_path.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!(
        "the node did not answer within 120 s; see {}",
        log_path.display()
    )
}

fn stop(cfg: Config) -> Result<()> {
    let Some(pid) = read_pid(&cfg.pid_file) else {
        bail!(
            "no pid file at {}: is a node running?",
            cfg.pid_file.display()
        );
    };
    if !alive(pid) {
        let _ = std::fs::remove_file(&cfg.pid_file);
        bail!("the node (pid {pid}) is not running");
    }
    // SAFETY: sending SIGTERM to the pid we started.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(pid) {
        bail!("the node (pid {pid}) did not stop within 60 s");
    }
    let _ = std::fs::remove_file(&cfg.pid_file);
    println!("rill stopped");
    Ok(())
}

fn planing(capacity: &str, vnodes: u32, live_share: f64, target_usage: f64) -> Result<()> {
    let capacity_bytes = size::parse(capacity)?;
    if vnodes == 0 {
        bail!("--vnodes must be at least 1");
    }
    if !(0.0..1.0).contains(&live_share) {
        bail!("--live-share must be in [0, 1), found {live_share}");
    }
    if !(0.0..1.0).contains(&target_usage) || target_usage == 0.0 {
        bail!("--target-usage must be in (0, 1), found {target_usage}");
    }
    let advice = merge_control::advise(capacity_bytes, vnodes, target_usage, live_share);
    println!(
        "capacity {} over {vnodes} vnodes, V = {live_share}, U_m = {target_usage}",
        size::show(capacity_bytes)
    );
    println!(
        "live data per vnode: {}",
        size::show(advice.live_bytes_per_vnode)
    );
    match advice.max_file_size_bytes {
        Some(r) => println!(
            "largest planing rotation size: bitcask.max_file_size = {} ({r} bytes)",
            size::show(r)
        ),
        None => println!("no rotation size keeps this node planing"),
    }
    for w in &advice.warnings {
        println!("warning: {w}");
    }
    if advice.max_file_size_bytes.is_none() {
        std::process::exit(2);
    }
    Ok(())
}
