//! The cluster simulated with its real parts: every node holds
//! `rill-node`'s vnodes (`StandaloneVnodes`: the stores, key epochs,
//! anti-entropy trees and request handling a node serves), clients' gets,
//! puts and deletes are coordinated by `rill-coord`'s machines over
//! preference lists with fallbacks (sloppy quorum) as each node knows the
//! ring, `rill-aae`'s exchanges compare replicas' trees and repair what
//! differs by a read. The ring changes as `rill-cluster` changes it:
//! nodes gossip their states, an operator at the claimant commits joins
//! and leaves, the claimant's step switches owners (`ring`). Handoff is
//! `rill-handoff`'s planner driving its sender and receiver machines:
//! ownership transfers with top-ups and data retained until the switch,
//! writes during a move sent to the next owner too, hinted handoff of
//! what a node holds without owning it (`handoff`). Nodes ping each
//! other with their holdings reports, which the claimant's step and the
//! reaper read late as the runtime's do (`holdings`, `reap`). Messages
//! are the vnode requests and replies, handoff messages and cluster
//! states a node sends, crossing as the bytes of their wire formats, and
//! the holdings reports, over a
//! network that delays (so they reorder), loses and partitions; nodes
//! stop and start with their data.
//!
//! After the events, everything heals, clients send again the writes that
//! were not acknowledged (as clients retry), the ring settles (gossip,
//! claimant steps, joins committed, handoffs finished), and then only
//! anti-entropy runs, loop after loop until a whole loop finds nothing:
//! no client reads anything. The check is strict (`check`).
//!
//! One seed gives one run: the only randomness is [`Rng`], the only time
//! the simulation's ticks, every collection is ordered, and nothing the
//! vnodes do depends on the clock they read (pruning is off, the memory
//! store has no time to live), so [`ClusterSim::trace`] is the same on
//! every replay.

mod aae;
mod check;
mod client;
mod disk;
mod handoff;
mod holdings;
mod net;
mod put;
mod reap;
mod ring;
#[cfg(test)]
mod scripted;

pub use check::ClusterViolation;

use crate::rng::Rng;
use rill_cluster::{ClusterState, Staged};
use rill_node::vnode::standalone::StandaloneVnodes;
use rill_node::BKey;
use rill_object::Object;
use rill_ring::{key_hash, Ring};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub seed: u64,
    /// Nodes that may ever take part.
    pub nodes: usize,
    /// Nodes in the cluster at the start (the others may join).
    pub members: usize,
    pub ring_size: u32,
    pub n: u32,
    pub r: u32,
    pub w: u32,
    pub keys: usize,
    pub steps: usize,
    pub drop_per_mille: u64,
    pub max_delay_ticks: u64,
    pub timeout_ticks: u64,
    /// Ticks an exchange waits between its questions (Riak's exchange
    /// pause: a write in flight at the first look has landed by the
    /// second).
    pub exchange_pause_ticks: u64,
    /// Anti-entropy loops after the heal before the check gives up on
    /// convergence.
    pub max_settle_loops: usize,
    pub faults: Faults,
}

/// Deliberate faults, each making the check fail on some seed: they show
/// the check sees what it is for.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Exchanges find differences but repair nothing.
    pub no_repair: bool,
    /// A fallback drops its hinted data instead of handing it off.
    pub drop_hinted_data: bool,
    /// Tombstones are reaped while fallbacks hold data of their
    /// partitions (the resurrection `rill-node`'s reap rule prevents).
    pub reap_despite_fallbacks: bool,
    /// A handoff receiver acknowledges batches without storing them.
    pub handoff_stores_nothing: bool,
    /// A vnode that dropped what it handed off, or that merges in a
    /// version counting further in one of its epochs than it stores (it
    /// reaped or lost the key), continues its epochs (no retirement at
    /// the drop, no new epoch for the key at the merge).
    pub keep_lost_epochs: bool,
    /// A node's start trusts the stored clocks whatever its last run
    /// left (no epoch floors after a power loss).
    pub trust_stored_clocks: bool,
    /// Handoff's drop removes every key it sent, also those written
    /// since (the record keeps each key's clock for this).
    pub drop_ignores_clocks: bool,
    /// Puts are answered without counting distinct nodes
    /// (`node_confirms` not given to the put machine).
    pub ignore_node_confirms: bool,
    /// A put's coordinator that took the request and was lost before it
    /// answered is passed over as if it had not (one write made twice).
    pub retry_after_accepted: bool,
    /// A node takes an ownership transfer its ring does not know of, and
    /// a hinted transfer's drop ignores that the partition is moving or
    /// is the node's own (a node whose ring was behind hands off and
    /// drops what the ring's transfer brought it).
    pub hinted_drop_ignores_ring: bool,
}

impl ClusterConfig {
    pub fn new(seed: u64) -> ClusterConfig {
        ClusterConfig {
            seed,
            nodes: 5,
            members: 4,
            ring_size: 16,
            n: 3,
            r: 2,
            w: 2,
            keys: 12,
            steps: 600,
            drop_per_mille: 50,
            max_delay_ticks: 5,
            timeout_ticks: 30,
            exchange_pause_ticks: 8,
            max_settle_loops: 8,
            faults: Faults::default(),
        }
    }
}

struct Node {
    up: bool,
    /// In the cluster: a member at the start, or a node that asked to
    /// join since.
    joined: bool,
    /// Removed from the cluster (it left): it serves no client, but
    /// hands off what it holds.
    removed: bool,
    /// Always there; taken only while a stop opens them again.
    vnodes: Option<StandaloneVnodes>,
    /// Where the vnodes' data is (`disk`).
    disk: disk::NodeDisk,
    /// The cluster as this node knows it.
    state: ClusterState,
    /// Changes an operator staged at this node.
    staged: Staged,
    /// `state`'s ring, as the node routes by it.
    ring: Ring,
    /// Holdings reports and waiting reaps, lost when it stops.
    memory: holdings::NodeMemory,
}

impl Node {
    fn vnodes(&self) -> &StandaloneVnodes {
        self.vnodes.as_ref().expect("a node's vnodes")
    }
}

/// A replica of a preference list: node, partition, primary.
type Target = (usize, u32, bool);

pub struct ClusterSim {
    cfg: ClusterConfig,
    rng: Rng,
    now: u64,
    nodes: Vec<Node>,
    /// Holds the nodes' bucket registries (removed with the
    /// simulation).
    _dir: tempfile::TempDir,
    /// Writes whose every trace a power loss took (`disk`).
    lost_to_power: Vec<disk::LostRange>,
    /// Messages on their way, by (due tick, sequence).
    net: BTreeMap<(u64, u64), net::Envelope>,
    seq: u64,
    next_id: u64,
    side: Option<BTreeSet<usize>>,
    /// Nodes that hear no gossip, so their ring stays behind (a scripted
    /// run's tool; the seeded runs leave it empty).
    deaf: BTreeSet<usize>,
    clients: client::Clients,
    exchanges: BTreeMap<u64, aae::Running>,
    handoffs: handoff::Handoffs,
    counts: Counts,
    pub trace: Vec<String>,
}

/// What happened, for the trace's last line and the tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub acked: usize,
    pub exchanges: usize,
    pub deltas: usize,
    pub handed_off: usize,
    pub reaps: usize,
}

fn node_name(i: usize) -> String {
    format!("n{i}@sim")
}

/// The node `name` names ([`node_name`]'s inverse), if it is one of
/// `nodes`.
fn node_index(name: &str, nodes: usize) -> Option<usize> {
    let i: usize = name.strip_prefix('n')?.strip_suffix("@sim")?.parse().ok()?;
    (i < nodes && node_name(i) == name).then_some(i)
}

/// Where bucket registries go: memory where the machine has it (a seed
/// opens a directory per node).
fn scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new().prefix("rill-sim").tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("a temporary directory")
}

pub(crate) fn bkey(key: &str) -> BKey {
    BKey::new(b"", b"b", key.as_bytes())
}

impl ClusterSim {
    pub fn new(cfg: ClusterConfig) -> ClusterSim {
        let formed = ring::formed(cfg.members, cfg.ring_size, cfg.n);
        let ring = Ring::new(formed.owners().to_vec()).expect("a ring");
        let dir = scratch();
        let mut rng = Rng::new(cfg.seed);
        let nodes = (0..cfg.nodes)
            .map(|i| {
                let meta = dir.path().join(node_name(i));
                std::fs::create_dir(&meta).expect("a node directory");
                let joined = i < cfg.members;
                let (state, ring) = if joined {
                    (formed.clone(), ring.clone())
                } else {
                    // Not in the cluster yet: a cluster of its own.
                    let me = node_name(i);
                    let s = ClusterState::new("sim", &me, cfg.ring_size);
                    let r = Ring::new(s.owners().to_vec()).expect("a ring");
                    (s, r)
                };
                let disk = disk::NodeDisk {
                    disk: bitcask::vfs::SimVfs::new(),
                    boots: 0,
                    o_sync: rng.chance(500),
                    meta,
                };
                let vnodes = disk.open(i, cfg.ring_size, 0, &cfg.faults);
                Node {
                    up: true,
                    joined,
                    removed: false,
                    vnodes: Some(vnodes),
                    disk,
                    state,
                    staged: Staged::default(),
                    ring,
                    memory: holdings::NodeMemory::default(),
                }
            })
            .collect();
        let mut sim = ClusterSim {
            rng,
            lost_to_power: Vec::new(),
            clients: client::Clients::default(),
            cfg,
            now: 0,
            nodes,
            _dir: dir,
            net: BTreeMap::new(),
            seq: 0,
            next_id: 0,
            side: None,
            deaf: BTreeSet::new(),
            exchanges: BTreeMap::new(),
            handoffs: handoff::Handoffs::default(),
            counts: Counts::default(),
            trace: Vec::new(),
        };
        for x in 0..sim.nodes.len() {
            sim.note_released(x);
        }
        sim
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    fn log(&mut self, s: String) {
        self.trace.push(format!("{:>5} {s}", self.now));
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn reachable(&self, a: usize, b: usize) -> bool {
        self.nodes[a].up
            && self.nodes[b].up
            && self
                .side
                .as_ref()
                .is_none_or(|s| s.contains(&a) == s.contains(&b))
    }

    fn index_of(&self, name: &str) -> usize {
        node_index(name, self.cfg.nodes).expect("a node")
    }

    /// The node whose ring the check reads: a member (after the heal,
    /// every member knows the same ring).
    fn reference(&self) -> usize {
        (0..self.nodes.len())
            .find(|&x| self.in_cluster(x))
            .expect("a member")
    }

    /// The preference list as node `c` sees the cluster.
    fn preflist(&self, c: usize, key: &str) -> Vec<Target> {
        self.preflist_avoiding(c, key, &[])
    }

    /// [`ClusterSim::preflist`] with the nodes of `avoid` taken for down
    /// (as a node's `preflist_avoiding`: fallbacks replace them).
    fn preflist_avoiding(&self, c: usize, key: &str, avoid: &[usize]) -> Vec<Target> {
        let h = key_hash(b"", b"b", key.as_bytes());
        self.ring_of(c)
            .preflist(
                &h,
                self.cfg.n,
                |n| {
                    let x = self.index_of(n);
                    !avoid.contains(&x) && self.up_in_view(c, x)
                },
                true,
            )
            .into_iter()
            .map(|e| (self.index_of(&e.node), e.partition.0, e.primary))
            .collect()
    }

    /// The primaries of `key` in the settled ring.
    fn primaries(&self, key: &str) -> Vec<Target> {
        let h = key_hash(b"", b"b", key.as_bytes());
        let x = self.reference();
        self.ring_of(x)
            .primaries(&h, self.cfg.n)
            .into_iter()
            .map(|p| (self.owner_in(x, p.0), p.0, true))
            .collect()
    }

    fn step_time(&mut self) {
        self.now += 1;
        if self.now.is_multiple_of(disk::WRITEBACK_TICKS) {
            self.writeback();
        }
        self.deliver();
        self.timeouts();
        self.exchange_timeouts();
        self.handoff_ticks();
        self.ping_ticks();
        self.reap_ticks();
    }

    fn tick(&mut self) {
        self.step_time();
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].up && self.in_cluster(i))
            .collect();
        let Some(&c) = self.rng.pick(&up) else {
            return;
        };
        let key = format!("k{}", self.rng.below(self.cfg.keys as u64));
        match self.rng.below(120) {
            0..=34 => self.start_put(c, key, false),
            35..=59 => self.start_get(c, key),
            60..=67 => self.start_put(c, key, true),
            68..=75 => {
                if let Some(x) = self.pick_joined() {
                    self.hand_off(x);
                }
            }
            76..=85 => self.start_exchange(c),
            86..=93 => self.stop_or_start(),
            100..=114 => {
                if let Some(x) = self.pick_joined() {
                    self.gossip(x);
                }
            }
            115..=116 => self.join(c),
            117..=119 => self.operate(c, true),
            _ => {
                if self.side.take().is_some() {
                    self.log("healed".into());
                } else {
                    let side: BTreeSet<usize> = (0..self.nodes.len())
                        .filter(|_| self.rng.chance(500))
                        .collect();
                    self.log(format!("partition {side:?}"));
                    self.side = Some(side);
                    self.coordinators_lost();
                }
            }
        }
    }

    /// A running node that ever joined, at random: handoff rounds and
    /// gossip run on every such node, one removed from the cluster too.
    fn pick_joined(&mut self) -> Option<usize> {
        let joined: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].up && self.nodes[i].joined)
            .collect();
        self.rng.pick(&joined).copied()
    }

    fn stop_or_start(&mut self) {
        let x = self.rng.below(self.nodes.len() as u64) as usize;
        let up_count = self.nodes.iter().filter(|n| n.up).count();
        if self.nodes[x].up && up_count > 1 {
            let how = self.pick_stop();
            self.node_down(x);
            self.log(format!("{} stops ({how:?})", node_name(x)));
            self.stop_vnodes(x, how);
        } else if !self.nodes[x].up {
            self.nodes[x].up = true;
            // As a start does, it notes the owners its ring names.
            self.note_released(x);
            self.log(format!("{} starts", node_name(x)));
        }
    }

    /// Node `x` stops: what it coordinated, exchanged or handed off dies
    /// with it (its data and cluster state stay on its disk).
    fn node_down(&mut self, x: usize) {
        self.nodes[x].up = false;
        self.clients.node_stopped(x);
        self.exchanges.retain(|_, e| e.node != x);
        self.handoffs.node_stopped(x);
        self.nodes[x].memory = holdings::NodeMemory::default();
        self.coordinators_lost();
    }

    /// Runs the ticks until nothing is in flight (bounded) but holdings
    /// pings: nodes send those every few ticks for as long as they run,
    /// so waiting for a moment with none on the wire would only wait for
    /// luck in their delays (they go on arriving while later loops run).
    fn quiesce(&mut self) {
        for _ in 0..10_000 {
            if self.net.values().all(net::Envelope::is_ping)
                && self.clients.idle()
                && self.exchanges.is_empty()
                && self.handoffs.idle()
            {
                return;
            }
            self.step_time();
        }
        panic!("the simulation did not quiesce");
    }

    pub fn run(&mut self) -> Result<(), ClusterViolation> {
        for _ in 0..self.cfg.steps {
            self.tick();
        }
        // Heal: every node up, no more losses; what is open ends.
        self.side = None;
        for x in 0..self.nodes.len() {
            if !self.nodes[x].up {
                self.nodes[x].up = true;
                self.note_released(x);
            }
        }
        self.cfg.drop_per_mille = 0;
        self.log("heal".into());
        self.quiesce();
        self.retry_unacknowledged();
        // Gossip, the claimant's steps and handoff rounds, as nodes run
        // them every second, until the ring settles and no node holds
        // data it does not own: a transfer that resumed after a cursor
        // kept from an abandoned one sent only the keys after it; the
        // next round sends the rest.
        let settled = self.settle_ring();
        self.log("anti-entropy only".into());
        let mut quiet = false;
        for _ in 0..self.cfg.max_settle_loops {
            let found = self.exchange_loop();
            if found == 0 {
                quiet = true;
                break;
            }
        }
        let c = self.counts.clone();
        self.log(format!(
            "settled: {} writes acknowledged, {} exchanges, {} keys found by them, {} objects handed off, {} tombstones reaped",
            c.acked, c.exchanges, c.deltas, c.handed_off, c.reaps
        ));
        check::check(self, settled, quiet)
    }

    /// The objects `key`'s primaries hold.
    pub(crate) fn replicas(&self, key: &str) -> Vec<Option<Object>> {
        self.primaries(key)
            .into_iter()
            .map(|(node, p, _)| {
                self.nodes[node]
                    .vnodes()
                    .get(p, &bkey(key))
                    .expect("a store of the simulated disk reads")
            })
            .collect()
    }

    pub(crate) fn keys(&self) -> Vec<String> {
        (0..self.cfg.keys).map(|k| format!("k{k}")).collect()
    }

    /// Objects held by vnodes of partitions their node does not own in
    /// the settled ring (a node removed from the cluster owns nothing).
    pub(crate) fn hinted_left(&self) -> usize {
        let r = self.reference();
        let mut left = 0;
        for (x, n) in self.nodes.iter().enumerate() {
            for p in 0..self.cfg.ring_size {
                if self.owner_in(r, p) != x {
                    left += n.vnodes().keys(p).map_or(0, |k| k.len());
                }
            }
        }
        left
    }
}
