//! Each vnode's identity across runs: its id in `meta/node.json` and its
//! key-epoch counter in `meta/leases` (docs/format.md).
//!
//! A start reads both, leases the next [`LEASE_SIZE`] epochs of every
//! vnode in place (no new space: a node starts on a full disk), records
//! how this run writes, and decides whether the stored clocks can be
//! trusted, from how the last run wrote: they can after a clean shutdown,
//! when that run was `o_sync`, or when the machine did not restart since
//! (same boot id) and that run acknowledged every put only once it
//! reached the kernel (no write buffer). Otherwise a power loss may have taken
//! writes the vnode made, so each key starts a new epoch at its first
//! write (see `Vnode::actor_for`).
//!
//! Format 1 of `node.json` kept a run epoch, raised at every start, in
//! each actor (`id | epoch (4) | incarnation (4)`). It is migrated by
//! starting each vnode's counter at `(epoch + 1) << 32`, above every actor
//! it wrote, and rewriting `node.json` as format 2.

use crate::config::NodeConfig;
use crate::meta::{MetaDir, MetaError};
use crate::vnode::lease::{boot_id, LeaseFile, LeaseTable, LEASE_SIZE};
use crate::vnode::Epochs;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// The version of `meta/node.json` this build writes.
pub(crate) const NODE_FORMAT_VERSION: u64 = 2;

/// Why the vnodes' identities could not be read or recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(
        "meta/node.json has format {found}; this build reads formats 1 and {NODE_FORMAT_VERSION}"
    )]
    UnknownFormat { found: u64 },
    /// The data was written with another ring size: each vnode's data
    /// and id belong to a partition of that ring.
    #[error(
        "the data in {} was written with ring_size = {written}, but ring_size = {configured} \
         is configured; set ring_size back to {written} (changing it needs a fresh data directory)",
        .data_dir.display()
    )]
    RingSizeChanged {
        data_dir: PathBuf,
        written: u64,
        configured: u32,
    },
}

pub(crate) struct NodeIds {
    pub ids: Vec<[u8; 8]>,
    pub run: RunEpochs,
}

/// How a run writes, as its lease records it for the next start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunWrites {
    /// Every write synced before it is acknowledged.
    pub o_sync: bool,
    /// No write buffer: every acknowledged write reached the kernel.
    pub unbuffered: bool,
    /// The kernel's boot id (the simulation numbers its boots).
    pub boot_id: [u8; 16],
}

/// Whether the clocks stored by the run that wrote `t` can be trusted
/// by a start on boot `boot`: that run stopped cleanly, synced every
/// write, or wrote every write to the kernel of a machine that has not
/// restarted since.
pub(crate) fn trusted_after(t: &LeaseTable, boot: [u8; 16]) -> bool {
    t.clean || t.o_sync || (t.boot_id == boot && t.boot_id != [0; 16] && t.unbuffered)
}

/// Each vnode's epochs in this run: where they start, below which they
/// may have lost writes, and the lease that covers them.
pub(crate) struct RunEpochs {
    pub leases: Arc<LeaseFile>,
    /// Per vnode: the first epoch of this run.
    starts: Vec<u64>,
    /// Per vnode: epochs below this may have lost writes.
    floors: Vec<u64>,
}

impl RunEpochs {
    /// Starts a run on the lease file `leases` whose current table is
    /// `table`: leases this run's first epochs of every vnode (in place,
    /// durably, before any is used), records how this run writes, and
    /// raises the floors to this run's starts when the last run's clocks
    /// are not `trusted` (a power loss may have taken writes it made).
    /// The floor is kept in the lease file, so a later trusted start does
    /// not forget it.
    pub(crate) fn begin(
        leases: LeaseFile,
        table: &LeaseTable,
        trusted: bool,
        how: RunWrites,
    ) -> std::io::Result<RunEpochs> {
        let starts = table.ends.clone();
        let floors: Vec<u64> = if trusted {
            table.floors.clone()
        } else {
            starts.clone()
        };
        leases.write(|t| {
            t.ends = starts
                .iter()
                .map(|s| s.saturating_add(LEASE_SIZE))
                .collect();
            t.floors = floors.clone();
            t.clean = false;
            t.boot_id = how.boot_id;
            t.o_sync = how.o_sync;
            t.unbuffered = how.unbuffered;
        })?;
        Ok(RunEpochs {
            leases: Arc::new(leases),
            starts,
            floors,
        })
    }

    /// Where vnode `i`'s epochs start in this run.
    pub fn epochs(&self, i: usize) -> Epochs {
        let start = self.starts[i];
        Epochs {
            next: start,
            lease_end: start.saturating_add(LEASE_SIZE),
            fresh_from: self.floors[i],
            leases: self.leases.clone(),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex8(s: &str) -> Option<[u8; 8]> {
    if s.len() != 16 {
        return None;
    }
    let mut out = [0u8; 8];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn random_ids(n: u32) -> Vec<[u8; 8]> {
    (0..n)
        .map(|_| crate::ids::random_u64().to_be_bytes())
        .collect()
}

impl NodeIds {
    pub fn load(meta: &MetaDir, config: &NodeConfig) -> Result<NodeIds, IdentityError> {
        let n = config.ring_size as usize;
        let node_meta = meta.read("node.json")?;
        let mut ids: Option<Vec<[u8; 8]>> = None;
        let mut old_epoch: Option<u64> = None;
        let mut write_meta = node_meta.is_none();
        if let Some(m) = &node_meta {
            let version = m["format"].as_u64().unwrap_or(0);
            if version != 1 && version != NODE_FORMAT_VERSION {
                return Err(IdentityError::UnknownFormat { found: version });
            }
            let size = m["ring_size"].as_u64().unwrap_or(0);
            if size != u64::from(config.ring_size) {
                return Err(IdentityError::RingSizeChanged {
                    data_dir: config.data_dir.clone(),
                    written: size,
                    configured: config.ring_size,
                });
            }
            let read: Vec<[u8; 8]> = m["actors"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().and_then(unhex8))
                        .collect()
                })
                .unwrap_or_default();
            if read.len() == n {
                ids = Some(read);
            }
            if version == 1 {
                old_epoch = Some(m["epoch"].as_u64().unwrap_or(0));
                write_meta = true;
            }
        }
        let lease_dir = meta.dir();
        let opened = LeaseFile::open(lease_dir, n).map_err(|source| MetaError::ReadNamed {
            name: "leases",
            source,
        })?;
        // A lease file to create, once node.json names the ids it belongs
        // to: created first, a crash before node.json was written would
        // pair fresh counters with the old ids, and issue their counters
        // again.
        enum Lease {
            Open(LeaseFile),
            Create,
        }
        let (leases, table, trusted) = match (opened, ids.as_ref(), old_epoch) {
            (Some((file, t)), Some(_), _) => {
                // Whether the last run could have lost writes is decided by
                // how that run wrote, as it recorded, not by this run's
                // configuration.
                let trusted = trusted_after(&t, boot_id());
                (Lease::Open(file), t, trusted)
            }
            (None, Some(_), Some(epoch)) => {
                // Format 1: continue above every actor the old runs wrote.
                let start = (epoch + 1) << 32;
                let t = LeaseTable::fresh(n, start, false);
                (Lease::Create, t, false)
            }
            (_, had_ids, _) => {
                if had_ids.is_some() {
                    tracing::warn!(
                        "meta/leases is missing or damaged: the vnodes take new ids, so no counter is issued twice"
                    );
                }
                ids = Some(random_ids(config.ring_size));
                write_meta = true;
                let t = LeaseTable::fresh(n, 0, true);
                (Lease::Create, t, true)
            }
        };
        let ids = ids.expect("set above");
        if write_meta {
            let v = json!({
                "format": NODE_FORMAT_VERSION,
                "ring_size": config.ring_size,
                "nodename": config.nodename,
                "actors": ids.iter().map(|a| hex(a)).collect::<Vec<_>>(),
            });
            meta.write("node.json", &v)
                .map_err(|source| MetaError::Write {
                    name: "node.json",
                    source,
                })?;
        }
        let leases = match leases {
            Lease::Open(file) => file,
            Lease::Create => {
                LeaseFile::create(lease_dir, &table).map_err(|source| MetaError::Write {
                    name: "leases",
                    source,
                })?
            }
        };
        let how = RunWrites {
            o_sync: config.bitcask.sync == bitcask::SyncStrategy::OSync,
            unbuffered: config.bitcask.write_buffer_bytes == 0,
            boot_id: boot_id(),
        };
        let run =
            RunEpochs::begin(leases, &table, trusted, how).map_err(|source| MetaError::Write {
                name: "leases",
                source,
            })?;
        if !trusted {
            tracing::info!("the last run did not stop cleanly and writes may have been lost: each key starts a new epoch at its next write");
        }
        Ok(NodeIds { ids, run })
    }
}
