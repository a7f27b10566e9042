//! `rill planing`: the largest Bitcask rotation size R that keeps a node
//! "planing" (merge only deletes fully dead files), R <= (C_i/n_i)(U_m - V)
//! (the sensor-data paper, "Riak KV performance in sensor data storage
//! application", eq. 4). Sizes are read as the config file reads them
//! (`GB` is 2^30, as in riak.conf).

use crate::config::units::{bytesize, show_bytes};
use anyhow::{bail, Result};

pub fn advise(capacity: &str, vnodes: u32, live_share: f64, target_usage: f64) -> Result<()> {
    let capacity_bytes = bytesize(capacity).map_err(anyhow::Error::msg)?;
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
        show_bytes(capacity_bytes)
    );
    println!(
        "live data per vnode: {}",
        show_bytes(advice.live_bytes_per_vnode)
    );
    match advice.max_file_size_bytes {
        Some(r) => println!(
            "largest planing rotation size: bitcask.max_file_size = {} ({r} bytes)",
            show_bytes(r)
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
