//! A node's vnodes without the node, as the seeded simulation (rill-sim)
//! runs them: the same `Vnode` code a node serves (its store, key epochs
//! and their lease, anti-entropy trees, the requests of `msg`, the
//! handoff's store and drop), with the default bucket properties and ids
//! the caller chooses, so a seed gives the same run. Their stores are
//! Bitcask stores on a filesystem the caller gives, with the lease file
//! beside them ([`StandaloneVnodes::open_on_disk`]): on the simulation's
//! disk, which loses power, a reopen continues the epochs as a node's
//! start does (`identity`) and builds the trees again from the stores.
//! The clocks the vnode code reads (for clock pruning, for a store's
//! time to live) change nothing when pruning is off and there is no
//! time to live.

use crate::buckets::Buckets;
use crate::config::NodeConfig;
use crate::error::KvError;
use crate::meta::MetaDir;
use crate::vnode::aae::{KeyPlace, VnodeAae};
use crate::vnode::identity::{trusted_after, RunEpochs, RunWrites};
use crate::vnode::lease::{LeaseFile, LeaseTable};
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnode::{Limits, Vnode};
use bitcask::vfs::{create_dir_durably, Vfs};
use rill_backend::{BKey, BitcaskBackend};
use rill_object::Object;
use rill_ring::Partition;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where [`StandaloneVnodes::open_on_disk`] keeps the vnodes' data, and
/// how they write it.
#[derive(Clone)]
pub struct Disk {
    pub vfs: Arc<dyn Vfs>,
    /// The data directory on `vfs`: the lease file, and each vnode's
    /// Bitcask store in a directory named by its partition.
    pub dir: PathBuf,
    /// Every put synced before it is acknowledged (`o_sync`); else
    /// written to the kernel (Rill's default, unbuffered).
    pub o_sync: bool,
    /// The machine's boot id: a start on another boot than the last run
    /// wrote on cannot trust what that run left in the page cache.
    pub boot_id: [u8; 16],
    /// The simulation's fault: trust the stored clocks whatever the last
    /// run left (the bug the epoch floors prevent: after a power loss
    /// took writes a vnode made, it continues a key's epoch from the
    /// older count it still holds and issues a dot a second time).
    pub trust_stored_clocks: bool,
    /// The simulation's fault: a vnode that merges in a version counting
    /// further in one of its own epochs than it stores (it reaped or lost
    /// the key) continues that epoch, and issues a dot a second time.
    pub continue_lost_epochs: bool,
}

/// One vnode per partition of a ring of `ring_size`, as on a node.
pub struct StandaloneVnodes {
    vnodes: Vec<Vnode>,
    limits: Limits,
}

impl StandaloneVnodes {
    /// Opens vnodes whose stores are Bitcask stores on `disk`, with the
    /// bucket registry in `meta_dir` (on the machine's filesystem): fresh
    /// ones when `disk` holds no lease file, else what the last run left.
    /// As a node's start does, a reopen leases each vnode's next epochs
    /// and, when the last run did not stop cleanly and could have lost
    /// writes (not `o_sync`, and a power loss since or a write buffer),
    /// makes each key start a new epoch at its next write. The trees are
    /// built from the stores at `now_ms`.
    pub fn open_on_disk(
        meta_dir: &Path,
        disk: &Disk,
        ring_size: u32,
        ids: impl Fn(u32) -> [u8; 8],
        aae: bool,
        now_ms: u64,
    ) -> Result<StandaloneVnodes, KvError> {
        let io = |e: std::io::Error| KvError::Backend(format!("standalone vnodes: {e}"));
        let mut config = NodeConfig::new(meta_dir);
        config.ring_size = ring_size;
        let meta = MetaDir::open(meta_dir).map_err(io)?;
        let buckets =
            Arc::new(Buckets::load(meta, &config).map_err(|e| KvError::Backend(e.to_string()))?);
        let place = Arc::new(KeyPlace { ring_size, buckets });
        let vfs = disk.vfs.as_ref();
        create_dir_durably(vfs, &disk.dir).map_err(io)?;
        let n = ring_size as usize;
        let (leases, table, trusted) = match LeaseFile::open_on(vfs, &disk.dir, n).map_err(io)? {
            Some((file, t)) => {
                let trusted = disk.trust_stored_clocks || trusted_after(&t, disk.boot_id);
                (file, t, trusted)
            }
            None if (0..ring_size).any(|p| vfs.exists(&disk.dir.join(p.to_string()))) => {
                // A node takes new vnode ids here; these vnodes' ids are
                // the caller's, so their counters would be issued again.
                return Err(KvError::Backend(
                    "standalone vnodes: the stores are there but the lease file is missing or damaged".into(),
                ));
            }
            None => {
                let t = LeaseTable::fresh(n, 0, true);
                let file = LeaseFile::create_on(vfs, &disk.dir, &t).map_err(io)?;
                (file, t, true)
            }
        };
        let how = RunWrites {
            o_sync: disk.o_sync,
            unbuffered: true,
            boot_id: disk.boot_id,
        };
        let run = RunEpochs::begin(leases, &table, trusted, how).map_err(io)?;
        let opts = bitcask::Options {
            vfs: disk.vfs.clone(),
            sync: if disk.o_sync {
                bitcask::SyncStrategy::OSync
            } else {
                bitcask::SyncStrategy::None
            },
            write_buffer_bytes: 0,
            ..bitcask::Options::default()
        };
        let mut vnodes = Vec::with_capacity(n);
        for p in 0..ring_size {
            let store = bitcask::Store::open(disk.dir.join(p.to_string()), opts.clone())
                .map_err(|e| KvError::Backend(format!("standalone vnodes: {e}")))?;
            let backend = BitcaskBackend::open(Arc::new(store))?;
            let trees = aae.then(|| VnodeAae::new(rill_aae::Trees::empty(now_ms), place.clone()));
            let mut v = Vnode::new(
                Partition(p),
                ids(p),
                run.epochs(p as usize),
                Box::new(backend),
                trees,
            );
            v.continue_lost_epochs = disk.continue_lost_epochs;
            v.rebuild_trees(|| now_ms, || true)?;
            vnodes.push(v);
        }
        Ok(StandaloneVnodes {
            vnodes,
            limits: Limits::of(&config),
        })
    }

    /// Makes every store's writes durable (as the kernel's writeback
    /// does by itself now and then).
    pub fn sync(&self) -> Result<(), KvError> {
        for v in &self.vnodes {
            v.backend().sync()?;
        }
        Ok(())
    }

    /// Stops cleanly, as a node's shutdown does: every store synced, then
    /// each vnode's next epoch recorded exactly in a lease marked clean.
    pub fn stop_cleanly(self) -> Result<(), KvError> {
        self.sync()?;
        let Some(first) = self.vnodes.first() else {
            return Ok(());
        };
        let next: Vec<u64> = self.vnodes.iter().map(Vnode::next_epoch).collect();
        first
            .leases
            .write(|t| {
                t.ends = next;
                t.clean = true;
            })
            .map_err(|e| KvError::Backend(format!("standalone vnodes: {e}")))?;
        Ok(())
    }

    /// Merges handed-off objects into the vnode of `partition` and makes
    /// them durable, as a node's handoff receiver stores a batch.
    pub fn handoff_store(&self, partition: u32, items: Vec<(BKey, Object)>) -> Result<(), KvError> {
        self.of(partition).store_handed_off(items, &self.limits)
    }

    fn of(&self, partition: u32) -> &Vnode {
        &self.vnodes[partition as usize]
    }

    /// What partition `partition`'s vnode answers to `request`.
    pub fn handle(&self, partition: u32, request: VnodeRequest) -> VnodeReply {
        self.of(partition).handle(request, &self.limits)
    }

    /// Whether the vnode holds any key, as a node's holdings report asks.
    pub fn holds_data(&self, partition: u32) -> Result<bool, KvError> {
        self.of(partition).holds_data()
    }

    /// Every key the vnode holds, sorted.
    pub fn keys(&self, partition: u32) -> Result<Vec<BKey>, KvError> {
        self.of(partition).all_keys()
    }

    /// The vnode of `partition` as handoff reads it.
    pub fn reader(&self, partition: u32) -> crate::vnode::handoff::PartitionReader<'_> {
        crate::vnode::handoff::PartitionReader {
            vnode: self.of(partition),
            keep: None,
            retire: true,
        }
    }

    /// [`StandaloneVnodes::reader`] whose drops do not retire the
    /// vnode's epochs first: the simulation's fault that replays the bug
    /// the retirement prevents (a vnode that dropped a key takes an
    /// older copy back by a merge and continues that copy's count,
    /// issuing a dot twice).
    pub fn reader_keeping_epochs(
        &self,
        partition: u32,
    ) -> crate::vnode::handoff::PartitionReader<'_> {
        crate::vnode::handoff::PartitionReader {
            retire: false,
            ..self.reader(partition)
        }
    }

    /// The object stored under `k`.
    pub fn get(&self, partition: u32, k: &BKey) -> Result<Option<Object>, KvError> {
        self.of(partition).get(k)
    }
}
