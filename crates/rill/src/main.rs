//! `rill`: the Rill binary. The node (console, start, stop, admin) comes
//! with the node issue; today it offers the operator's planing advice.

mod size;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rill",
    version,
    about = "Rill, a Riak-compatible key-value database"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Planing {
            capacity,
            vnodes,
            live_share,
            target_usage,
        } => planing(&capacity, vnodes, live_share, target_usage),
    }
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
