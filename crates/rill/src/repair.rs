//! `rill admin leveldb verify | repair`: with the node stopped, reads
//! every entry of the node's leveldb and leveled partitions and lists the
//! damaged ranges, or rebuilds the damaged partitions without them (as
//! Basho's leveldb repair sets damaged blocks aside in `lost/`).

use crate::config::Config;
use crate::daemon;
use anyhow::{bail, Result};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Action {
    /// List what is damaged (exit status 1 if anything is).
    Verify,
    /// Rebuild each damaged partition from what is readable.
    Repair,
}

pub fn run(cfg: Config, action: Action) -> Result<()> {
    // The node's own lock: none may start meanwhile, and one running is
    // named.
    daemon::lock(&cfg.pid_file).map_err(|e| match e {
        daemon::LockError::Held { pid: Some(pid) } => anyhow::anyhow!(
            "a node is running on {} (pid {pid}): stop it first (rill stop)",
            cfg.node.data_dir.display()
        ),
        daemon::LockError::Held { pid: None } => anyhow::anyhow!(
            "a node is running on {}: stop it first (rill stop)",
            cfg.node.data_dir.display()
        ),
        daemon::LockError::Io(e) => {
            anyhow::anyhow!("cannot lock {}: {e}", cfg.pid_file.display())
        }
    })?;
    let repair = matches!(action, Action::Repair);
    let checks = rill_node::check_leveldb(&cfg.node, repair).map_err(anyhow::Error::msg)?;
    if checks.is_empty() {
        bail!("this node keeps no leveldb or leveled data (storage_backend)");
    }
    let mut damaged = 0usize;
    for db in &checks {
        let name = if db.backend.is_empty() {
            String::new()
        } else {
            format!(" (multi backend {})", db.backend)
        };
        let entries: u64 = db.partitions.iter().map(|p| p.entries).sum();
        println!(
            "{}{name}: {} partitions, {entries} entries read",
            db.dir.display(),
            db.partitions.len()
        );
        for p in db.partitions.iter().filter(|p| !p.lost.is_empty()) {
            damaged += 1;
            println!(
                "  {}: {} damaged range(s), {} entries readable",
                p.keyspace,
                p.lost.len(),
                p.entries
            );
            for r in &p.lost {
                println!(
                    "    lost: after {} before {}",
                    r.after
                        .as_deref()
                        .map_or("the start".into(), rill_backend::describe_key),
                    r.before
                        .as_deref()
                        .map_or("the end".into(), rill_backend::describe_key)
                );
            }
            if repair {
                println!(
                    "    repaired: the readable entries kept, {} unmatched entries dropped (index entries without their object, heads without values); the ranges are recorded in {}",
                    p.unmatched,
                    db.dir.join("lost/damaged-ranges").display()
                );
            }
        }
    }
    match (damaged, repair) {
        (0, _) => println!("nothing is damaged"),
        (n, false) => bail!(
            "{n} partition(s) damaged: `rill admin leveldb repair` (node stopped) rebuilds them without the damaged ranges; replicas on other nodes hold those keys, and read repair brings them back"
        ),
        (n, true) => println!("{n} partition(s) repaired"),
    }
    Ok(())
}
