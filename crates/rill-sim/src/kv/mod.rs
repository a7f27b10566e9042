//! The key-value layer simulated: clients' gets, puts and deletes to an
//! `allow_mult` bucket, coordinated by `rill-coord`'s machines over
//! preference lists with fallbacks (sloppy quorum), replicas as message
//! handlers over per-partition stores, a network that delays, loses and
//! partitions, nodes that stop and start (their stores kept), hinted data
//! handed back to owners when they are reachable again.
//!
//! After the events everything heals, hinted data goes home, every key is
//! read at R = N (read repair), and then:
//! - the primaries of every key hold the same object (they converged);
//! - every acknowledged write is there, as the value or a sibling, unless
//!   a later acknowledged write's context had seen it;
//! - nothing an acknowledged write's context had seen (deleted or
//!   overwritten) is there;
//! - nothing is there that no client wrote.

mod requests;

use crate::kv_check::KvViolation;
use crate::rng::Rng;
use rill_coord::{GetFsm, GetReply, PutFsm, PutReply};
use rill_object::{Object, PutMode, VClock};
use rill_ring::{key_hash, Ring};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
pub struct KvConfig {
    pub seed: u64,
    pub nodes: usize,
    pub ring_size: u32,
    pub n: u32,
    pub r: u32,
    pub w: u32,
    pub keys: usize,
    pub steps: usize,
    pub drop_per_mille: u64,
    pub max_delay_ticks: u64,
    pub timeout_ticks: u64,
    /// A deliberate fault, for the test that the checks catch a lost
    /// write: hinted data is dropped instead of handed off.
    pub drop_hinted_data: bool,
    /// A deliberate fault: a vnode that handed its data off continues its
    /// old epochs (the bug seed 3285 found), for the regression test.
    pub keep_epochs_after_handoff: bool,
}

impl KvConfig {
    pub fn new(seed: u64) -> KvConfig {
        KvConfig {
            seed,
            nodes: 5,
            ring_size: 16,
            n: 3,
            r: 2,
            w: 2,
            keys: 6,
            steps: 500,
            drop_per_mille: 50,
            max_delay_ticks: 5,
            timeout_ticks: 30,
            drop_hinted_data: false,
            keep_epochs_after_handoff: false,
        }
    }
}

const MODE: PutMode = PutMode {
    allow_mult: true,
    last_write_wins: false,
};

#[derive(Clone, Debug)]
enum Msg {
    Get {
        op: u64,
        idx: usize,
        partition: u32,
        primary: bool,
        key: String,
    },
    GetReply {
        op: u64,
        idx: usize,
        reply: GetReply,
    },
    Put {
        op: Option<u64>,
        idx: usize,
        partition: u32,
        primary: bool,
        key: String,
        object: Object,
    },
    PutReply {
        op: u64,
        idx: usize,
        reply: PutReply,
    },
}

struct Envelope {
    at: u64,
    seq: u64,
    to: usize,
    msg: Msg,
}

#[derive(Default)]
struct Node {
    up: bool,
    /// (partition, key) -> object, for partitions this node owns.
    primary: BTreeMap<(u32, String), Object>,
    /// Hinted data held as a fallback for another node's partition.
    hinted: BTreeMap<(u32, String), Object>,
    /// Per partition: the next key epoch this node's vnode issues.
    epochs: BTreeMap<u32, u64>,
    /// Per partition: epochs below this are not continued (raised when the
    /// node hands hinted data off and drops it).
    floors: BTreeMap<u32, u64>,
}

enum Op {
    Get {
        fsm: GetFsm,
        key: String,
        deadline: u64,
        coordinator: usize,
    },
    Put {
        fsm: PutFsm,
        write: Write,
        deadline: u64,
        coordinator: usize,
    },
}

/// A client's write: a value (or a delete) with the context it read.
#[derive(Clone, Debug)]
struct Write {
    key: String,
    value: Option<String>,
    context: VClock,
    /// Where each replica of the preference list lives.
    targets: Vec<(usize, u32, bool)>,
}

/// An acknowledged write, as the model keeps it.
#[derive(Clone, Debug)]
struct Acked {
    key: String,
    value: Option<String>,
    dot: Option<rill_object::Dot>,
    context: VClock,
}

pub struct KvSim {
    cfg: KvConfig,
    rng: Rng,
    now: u64,
    ring: Ring,
    nodes: Vec<Node>,
    net: Vec<Envelope>,
    seq: u64,
    ops: BTreeMap<u64, Op>,
    next_op: u64,
    side: Option<BTreeSet<usize>>,
    /// The last clock a client read for each key.
    contexts: BTreeMap<String, VClock>,
    acked: Vec<Acked>,
    /// Every write's context, acknowledged or not (one not acknowledged
    /// may still have reached some replicas).
    attempted: Vec<(String, VClock)>,
    written: BTreeSet<String>,
    pub trace: Vec<String>,
}

fn node_name(i: usize) -> String {
    format!("n{i}@sim")
}

impl KvSim {
    pub fn new(cfg: KvConfig) -> KvSim {
        let names: Vec<String> = (0..cfg.nodes).map(node_name).collect();
        let owners = vec![names[0].clone(); cfg.ring_size as usize];
        let c = rill_ring::claim(&owners, &names, cfg.n).expect("a claim");
        let ring = Ring::new(c.owners).expect("a ring");
        let nodes = (0..cfg.nodes)
            .map(|_| Node {
                up: true,
                ..Node::default()
            })
            .collect();
        KvSim {
            rng: Rng::new(cfg.seed),
            cfg,
            now: 0,
            ring,
            nodes,
            net: Vec::new(),
            seq: 0,
            ops: BTreeMap::new(),
            next_op: 0,
            side: None,
            contexts: BTreeMap::new(),
            acked: Vec::new(),
            attempted: Vec::new(),
            written: BTreeSet::new(),
            trace: Vec::new(),
        }
    }

    fn log(&mut self, s: String) {
        self.trace.push(format!("{:>5} {s}", self.now));
    }

    fn reachable(&self, a: usize, b: usize) -> bool {
        self.nodes[b].up
            && self
                .side
                .as_ref()
                .is_none_or(|s| s.contains(&a) == s.contains(&b))
    }

    fn index_of(&self, name: &str) -> usize {
        (0..self.cfg.nodes)
            .find(|&i| node_name(i) == name)
            .expect("a node")
    }

    fn send(&mut self, from: usize, to: usize, msg: Msg, reliable: bool) {
        if !reliable && (self.rng.chance(self.cfg.drop_per_mille) || !self.reachable(from, to)) {
            return;
        }
        let delay = if reliable {
            0
        } else {
            self.rng.below(self.cfg.max_delay_ticks)
        };
        self.seq += 1;
        self.net.push(Envelope {
            at: self.now + delay,
            seq: self.seq,
            to,
            msg,
        });
    }

    /// The preference list as node `c` sees the cluster: (node, partition,
    /// primary) per replica.
    fn preflist(&self, c: usize, key: &str) -> Vec<(usize, u32, bool)> {
        let h = key_hash(b"default", b"b", key.as_bytes());
        self.ring
            .preflist(
                &h,
                self.cfg.n,
                |n| self.reachable(c, self.index_of(n)),
                true,
            )
            .into_iter()
            .map(|e| (self.index_of(&e.node), e.partition.0, e.primary))
            .collect()
    }

    fn store(&mut self, node: usize, primary: bool) -> &mut BTreeMap<(u32, String), Object> {
        let n = &mut self.nodes[node];
        if primary {
            &mut n.primary
        } else {
            &mut n.hinted
        }
    }

    /// A replica merges `object` into what it holds.
    fn merge_into(
        &mut self,
        node: usize,
        partition: u32,
        primary: bool,
        key: &str,
        object: &Object,
    ) -> Object {
        let store = self.store(node, primary);
        let k = (partition, key.to_string());
        let next = match store.get(&k) {
            Some(s) => s.merge(object),
            None => object.clone(),
        };
        store.insert(k, next.clone());
        next
    }

    fn deliver(&mut self) {
        self.net.sort_by_key(|m| (m.at, m.seq));
        while self.net.first().is_some_and(|m| m.at <= self.now) {
            let env = self.net.remove(0);
            if !self.nodes[env.to].up {
                continue;
            }
            self.handle(env.to, env.msg);
        }
    }

    fn handle(&mut self, at: usize, msg: Msg) {
        match msg {
            Msg::Get {
                op,
                idx,
                partition,
                primary,
                key,
            } => {
                let reply = match self.store(at, primary).get(&(partition, key)) {
                    Some(o) => GetReply::Found(o.clone()),
                    None => GetReply::NotFound,
                };
                if let Some(c) = self.coordinator_of(op) {
                    self.send(at, c, Msg::GetReply { op, idx, reply }, false);
                }
            }
            Msg::Put {
                op,
                idx,
                partition,
                primary,
                key,
                object,
            } => {
                let stored = self.merge_into(at, partition, primary, &key, &object);
                if let Some(op) = op {
                    if let Some(c) = self.coordinator_of(op) {
                        self.send(
                            at,
                            c,
                            Msg::PutReply {
                                op,
                                idx,
                                reply: PutReply::W,
                            },
                            false,
                        );
                        let reply = PutReply::Dw(Some(stored));
                        self.send(at, c, Msg::PutReply { op, idx, reply }, false);
                    }
                }
            }
            Msg::GetReply { op, idx, reply } => {
                let (effects, key, c) = match self.ops.get_mut(&op) {
                    Some(Op::Get {
                        fsm,
                        key,
                        coordinator,
                        ..
                    }) if *coordinator == at => (fsm.reply(idx, reply), key.clone(), *coordinator),
                    _ => return,
                };
                self.get_effects(c, &key, effects);
            }
            Msg::PutReply { op, idx, reply } => {
                let effects = match self.ops.get_mut(&op) {
                    Some(Op::Put {
                        fsm, coordinator, ..
                    }) if *coordinator == at => fsm.reply(idx, reply),
                    _ => return,
                };
                self.put_effects(op, at, effects);
            }
        }
    }

    fn coordinator_of(&self, op: u64) -> Option<usize> {
        match self.ops.get(&op)? {
            Op::Get { coordinator, .. } | Op::Put { coordinator, .. } => Some(*coordinator),
        }
    }

    /// Hinted data goes to its partition's owner once the owner is
    /// reachable (hinted handoff, whole).
    fn hand_off(&mut self) {
        for x in 0..self.nodes.len() {
            if !self.nodes[x].up || self.nodes[x].hinted.is_empty() {
                continue;
            }
            let hinted: Vec<((u32, String), Object)> = self.nodes[x]
                .hinted
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for ((p, key), obj) in hinted {
                let owner = self.index_of(self.ring.owner(rill_ring::Partition(p)));
                if self.reachable(x, owner) {
                    if !self.cfg.drop_hinted_data {
                        self.merge_into(owner, p, true, &key, &obj);
                    }
                    self.nodes[x].hinted.remove(&(p, key));
                    if !self.cfg.keep_epochs_after_handoff {
                        let next = self.nodes[x].epochs.get(&p).copied().unwrap_or(0) + 1;
                        self.nodes[x].floors.insert(p, next);
                    }
                }
            }
        }
    }

    fn tick(&mut self) {
        self.now += 1;
        self.deliver();
        self.timeouts();
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].up)
            .collect();
        let Some(&c) = self.rng.pick(&up) else {
            return;
        };
        let key = format!("k{}", self.rng.below(self.cfg.keys as u64));
        match self.rng.below(100) {
            0..=39 => self.start_put(c, key, false),
            40..=69 => self.start_get(c, key),
            70..=77 => self.start_put(c, key, true),
            78..=87 => self.hand_off(),
            88..=94 => {
                let x = self.rng.below(self.nodes.len() as u64) as usize;
                let up_count = self.nodes.iter().filter(|n| n.up).count();
                if self.nodes[x].up && up_count > 1 {
                    self.nodes[x].up = false;
                    // Requests it coordinated die with it.
                    self.ops.retain(|_, o| match o {
                        Op::Get { coordinator, .. } | Op::Put { coordinator, .. } => {
                            *coordinator != x
                        }
                    });
                    self.log(format!("{} stops", node_name(x)));
                } else if !self.nodes[x].up {
                    self.nodes[x].up = true;
                    self.log(format!("{} starts", node_name(x)));
                }
            }
            _ => {
                if self.side.take().is_some() {
                    self.log("healed".into());
                } else {
                    let side: BTreeSet<usize> = (0..self.nodes.len())
                        .filter(|_| self.rng.chance(500))
                        .collect();
                    self.log(format!("partition {side:?}"));
                    self.side = Some(side);
                }
            }
        }
    }

    pub fn run(&mut self) -> Result<(), KvViolation> {
        for _ in 0..self.cfg.steps {
            self.tick();
        }
        // Heal: every node up, nothing in flight is lost any more, the
        // requests still open end, hinted data goes home.
        self.side = None;
        for n in &mut self.nodes {
            n.up = true;
        }
        for _ in 0..(self.cfg.timeout_ticks + self.cfg.max_delay_ticks + 2) {
            self.now += 1;
            self.deliver();
            self.timeouts();
        }
        self.net.clear();
        self.ops.clear();
        self.hand_off();
        self.log("settle".into());
        self.read_everything();
        crate::kv_check::check(self)
    }

    /// Reads every key at R = N from the first node, reliably, applying
    /// the read repairs; twice, so the second read sees converged
    /// replicas.
    fn read_everything(&mut self) {
        self.cfg.drop_per_mille = 0;
        let saved_r = self.cfg.r;
        self.cfg.r = self.cfg.n;
        for _ in 0..2 {
            for k in 0..self.cfg.keys {
                self.start_get(0, format!("k{k}"));
                for _ in 0..(2 * self.cfg.max_delay_ticks + 4) {
                    self.now += 1;
                    self.deliver();
                }
                self.timeouts();
            }
        }
        self.cfg.r = saved_r;
    }

    pub(crate) fn replicas(&self, key: &str) -> Vec<Option<&Object>> {
        let h = key_hash(b"default", b"b", key.as_bytes());
        self.ring
            .primaries(&h, self.cfg.n)
            .into_iter()
            .map(|p| {
                let owner = self.index_of(self.ring.owner(p));
                self.nodes[owner].primary.get(&(p.0, key.to_string()))
            })
            .collect()
    }

    pub(crate) fn keys(&self) -> Vec<String> {
        (0..self.cfg.keys).map(|k| format!("k{k}")).collect()
    }

    pub(crate) fn acked_for<'a>(
        &'a self,
        key: &'a str,
    ) -> impl Iterator<Item = (&'a Option<String>, &'a Option<rill_object::Dot>, &'a VClock)> + 'a
    {
        self.acked
            .iter()
            .filter(move |a| a.key == key)
            .map(|a| (&a.value, &a.dot, &a.context))
    }

    pub(crate) fn all_acked_contexts<'a>(
        &'a self,
        key: &'a str,
    ) -> impl Iterator<Item = &'a VClock> + 'a {
        self.acked
            .iter()
            .filter(move |a| a.key == key)
            .map(|a| &a.context)
    }

    pub(crate) fn all_attempted_contexts<'a>(
        &'a self,
        key: &'a str,
    ) -> impl Iterator<Item = &'a VClock> + 'a {
        self.attempted
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, c)| c)
    }

    pub(crate) fn was_written(&self, value: &[u8]) -> bool {
        std::str::from_utf8(value).is_ok_and(|v| self.written.contains(v))
    }

    pub(crate) fn hinted_left(&self) -> usize {
        self.nodes.iter().map(|n| n.hinted.len()).sum()
    }
}
