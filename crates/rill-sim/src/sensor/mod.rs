//! The sensor-data service on a cluster, simulated with its real parts:
//! every node runs `rill-tsdb`'s engine on a simulated disk (a sample is
//! acknowledged once its log is durable; a power loss keeps only what
//! was), writes are placed and acknowledged by `rill-sensor-cluster`'s
//! `route` (home partitions, preference lists with fallbacks, W distinct
//! nodes), replicas answer with its `Replica` from the bytes of its
//! messages, queries merge the answers with its `merge` and judge them
//! with `partial`, anti-entropy is its `exchange_home` and handoff its
//! `hand_off_home`. The network loses messages (a write may reach some
//! replicas and not be acknowledged, or be acknowledged with its answer
//! lost) and partitions; nodes stop (a process kill or a power loss) and
//! start.
//!
//! Checked during the run: a query whose answer does not say it may be
//! partial holds every sample acknowledged before it, each once with its
//! value, and nothing never written. After the heal, handoff and
//! anti-entropy run loop after loop (no client reads) until a whole loop
//! finds nothing; then every owner of every home partition holds every
//! acknowledged sample of it, every acknowledged sample is on n_val
//! distinct nodes, and a query through every node answers them all.
//!
//! The membership is fixed (joins and leaves of sensor data are the
//! devrel tests'); a seed runs 3, 4 or 5 nodes on 16 partitions, so
//! some homes' partitions wrap around to a node named already, and with
//! 5 a write may be acknowledged by two fallbacks and reach its owners
//! only by handoff.

use crate::rng::Rng;
use bitcask::vfs::SimVfs;
use rill_node::Quorum;
use rill_promql::value::{Point, Series};
use rill_ring::Ring;
use rill_sensor::Sample;
use rill_sensor_cluster::digest_read::{DigestRead, LocalMine};
use rill_sensor_cluster::msg::{self, MatcherSpec, Part, Reply, Request, SeriesSamples};
use rill_sensor_cluster::route::{self, Acks, Outcome};
use rill_sensor_cluster::{merge, Replica, Replication};
use rill_tsdb::wal::WalOptions;
use rill_tsdb::{BitcaskStorage, Engine, EngineOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

const SEC: i64 = 1_000_000_000;
/// The simulation's clock at tick 0 (ns); a tick is 10 ms.
const T0: i64 = 1_700_000_000 * SEC;
const DB: &str = "sim";

#[derive(Clone, Debug)]
pub struct SensorSimConfig {
    pub seed: u64,
    pub nodes: usize,
    pub ring_size: u32,
    pub n: u32,
    pub w: u32,
    pub series: usize,
    pub steps: usize,
    pub drop_per_mille: u64,
    pub max_settle_loops: usize,
    /// A deliberate fault the check must catch: exchanges compare but
    /// send nothing.
    pub no_repair: bool,
    /// Another: writes are acknowledged by one node (W = 1) while
    /// queries judge what is missing by W.
    pub ack_at_one: bool,
    /// Another: a handoff drops the home without sending it.
    pub hand_off_nothing: bool,
}

impl SensorSimConfig {
    pub fn new(seed: u64) -> SensorSimConfig {
        SensorSimConfig {
            seed,
            // 3, 4 or 5 nodes on 16 partitions: with 3 and 5 the lists
            // at the wrap of the ring name a node twice.
            nodes: 3 + (seed % 3) as usize,
            ring_size: 16,
            n: 3,
            w: 2,
            series: 10,
            steps: 300,
            drop_per_mille: 60,
            max_settle_loops: 6,
            no_repair: false,
            ack_at_one: false,
            hand_off_nothing: false,
        }
    }
}

struct SNode {
    up: bool,
    disk: SimVfs,
    engine: Option<Arc<Engine>>,
}

mod check;
mod repair;

pub use check::SensorViolation;

pub struct SensorSim {
    cfg: SensorSimConfig,
    rng: Rng,
    tick: u64,
    ring: Ring,
    clock: Clock,
    nodes: Vec<SNode>,
    side: Option<BTreeSet<usize>>,
    /// Each series' next sample number.
    next: Vec<i64>,
    /// Samples acknowledged, and every sample a write carried.
    acked: BTreeMap<(String, i64), f64>,
    written: BTreeMap<(String, i64), f64>,
    pub trace: Vec<String>,
}

fn name(i: usize) -> String {
    format!("s{i}@sim")
}

fn key(series: usize) -> String {
    format!("temp{{room=\"r{series}\"}}")
}

/// The stores' clock: the simulation's (block expiry is judged by it).
#[derive(Clone)]
struct Clock(Arc<AtomicI64>);

impl bitcask::Clock for Clock {
    fn now(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.load(Ordering::SeqCst).max(0) as u64)
    }
}

fn open(disk: &SimVfs, clock: &Clock, ring_size: u32, now: i64) -> Arc<Engine> {
    let store_opts = bitcask::Options {
        vfs: Arc::new(disk.clone()),
        clock: Arc::new(clock.clone()),
        max_file_size_bytes: 64 << 10,
        ..bitcask::Options::default()
    };
    let storage = BitcaskStorage::new(
        Path::new("/sensor/data"),
        store_opts,
        Box::new(|_| {}),
        Box::new(|_| {}),
    );
    let mut opts = EngineOptions::new(WalOptions {
        vfs: Arc::new(disk.clone()),
        segment_bytes: 64 << 10,
        sync: true,
    });
    opts.placer = route::placer(ring_size);
    opts.window_ns = 60 * SEC;
    opts.block_samples = 16;
    opts.grace_ns = 0;
    // Three hours of minute slices for anti-entropy to compare.
    opts.retention_ns = 3 * 3600 * SEC;
    let (e, _) = Engine::open(Path::new("/sensor/wal"), opts, Arc::new(storage), now)
        .expect("a sensor engine opens on its simulated disk");
    Arc::new(e)
}

impl SensorSim {
    pub fn new(cfg: SensorSimConfig) -> SensorSim {
        let ring = Ring::new(
            (0..cfg.ring_size as usize)
                .map(|p| name(p % cfg.nodes))
                .collect(),
        )
        .expect("a ring");
        let clock = Clock(Arc::new(AtomicI64::new(T0)));
        let nodes = (0..cfg.nodes)
            .map(|_| {
                let disk = SimVfs::new();
                let engine = Some(open(&disk, &clock, cfg.ring_size, T0));
                SNode {
                    up: true,
                    disk,
                    engine,
                }
            })
            .collect();
        SensorSim {
            rng: Rng::new(cfg.seed),
            next: vec![0; cfg.series],
            cfg,
            tick: 0,
            ring,
            clock,
            nodes,
            side: None,
            acked: BTreeMap::new(),
            written: BTreeMap::new(),
            trace: Vec::new(),
        }
    }

    fn now(&self) -> i64 {
        T0 + self.tick as i64 * 10_000_000
    }

    fn log(&mut self, s: String) {
        self.trace.push(format!("{:>5} {s}", self.tick));
    }

    fn engine(&self, x: usize) -> &Arc<Engine> {
        self.nodes[x]
            .engine
            .as_ref()
            .expect("a running node's engine")
    }

    fn reachable(&self, a: usize, b: usize) -> bool {
        self.nodes[a].up
            && self.nodes[b].up
            && self
                .side
                .as_ref()
                .is_none_or(|s| s.contains(&a) == s.contains(&b))
    }

    fn index(&self, n: &str) -> usize {
        (0..self.cfg.nodes).find(|&i| name(i) == n).expect("a node")
    }

    /// `req` from node `from` to node `to` as bytes, answered by `to`'s
    /// replica; `None` when the request or its answer is lost (the
    /// request may have been done).
    fn call(&mut self, from: usize, to: usize, req: &Request) -> Option<Reply> {
        if !self.reachable(from, to) || (from != to && self.rng.chance(self.cfg.drop_per_mille)) {
            return None;
        }
        let req = msg::decode_request(&msg::encode_request(req)).expect("a request decodes");
        let reply = Replica {
            engine: self.engine(to).clone(),
        }
        .answer(req);
        if from != to && self.rng.chance(self.cfg.drop_per_mille) {
            return None;
        }
        Some(msg::decode_reply(&msg::encode_reply(&reply)).expect("a reply decodes"))
    }

    fn write(&mut self, c: usize) {
        let k = 1 + self.rng.below(3) as usize;
        let mut picked: Vec<usize> = Vec::new();
        for _ in 0..k {
            let s = self.rng.below(self.cfg.series as u64) as usize;
            if !picked.contains(&s) {
                picked.push(s);
            }
        }
        // Samples an hour before now, a second apart: settled at once.
        let series: Vec<(String, Sample)> = picked
            .iter()
            .map(|&s| {
                self.next[s] += 1;
                let ts = T0 - 3600 * SEC + self.next[s] * SEC;
                (
                    key(s),
                    Sample {
                        ts,
                        value: (s * 1_000_000) as f64 + self.next[s] as f64,
                    },
                )
            })
            .collect();
        for (k, s) in &series {
            self.written.insert((k.clone(), s.ts), s.value);
        }
        let up: Vec<bool> = (0..self.cfg.nodes).map(|x| self.reachable(c, x)).collect();
        let plan = route::plan(
            DB,
            series.iter().map(|(k, _)| k.as_str()),
            self.cfg.n,
            &self.ring,
            |n| up[self.index(n)],
        );
        let w = if self.cfg.ack_at_one { 1 } else { self.cfg.w };
        let mut acks = Acks::new(&plan, w);
        let mut held_by = Vec::new();
        let now = self.now();
        for (m, (node, homes)) in plan.messages.iter().enumerate() {
            let parts = homes
                .iter()
                .map(|&h| Part {
                    home: plan.homes[h].partition,
                    series: plan.homes[h]
                        .series
                        .iter()
                        .map(|&i| SeriesSamples {
                            key: series[i].0.clone(),
                            group: None,
                            samples: vec![series[i].1],
                        })
                        .collect(),
                })
                .collect();
            let to = self.index(node);
            let ok = matches!(
                self.call(
                    c,
                    to,
                    &Request::Write {
                        db: DB.into(),
                        now,
                        parts
                    }
                ),
                Some(Reply::Written(_))
            );
            if ok {
                held_by.push(name(to));
            }
            acks.answer(m, ok);
        }
        let done = acks.outcome() == Outcome::Done;
        if done {
            for (k, s) in &series {
                self.acked.insert((k.clone(), s.ts), s.value);
            }
        }
        let what: Vec<String> = series
            .iter()
            .map(|(k, s)| format!("{k}@{}", (s.ts - T0) / SEC))
            .collect();
        self.log(format!(
            "write through {} of {}: {} (answered by {})",
            name(c),
            what.join(" "),
            if done {
                "acknowledged"
            } else {
                "not acknowledged"
            },
            held_by.join(" ")
        ));
    }

    /// A query through `c` of every series, as the service reads it (a
    /// digest read: `c`'s own samples, the others' digests, the samples
    /// of the series whose digests differ); checked against what was
    /// acknowledged unless it says it may be partial.
    fn query(&mut self, c: usize) -> Result<(), SensorViolation> {
        let matchers = vec![MatcherSpec {
            label: "__name__".into(),
            op: "=".into(),
            value: "temp".into(),
        }];
        let (mint, maxt, now) = (
            (T0 - 7200 * SEC) / 1_000_000,
            self.now() / 1_000_000,
            self.now(),
        );
        let mut merged = merge::Merged::default();
        let mut missing = BTreeSet::new();
        // This node's share is a call of its own engine, never dropped.
        let local = match (Replica {
            engine: self.engine(c).clone(),
        })
        .answer(Request::Select {
            matchers: matchers.clone(),
            mint,
            maxt,
            now,
        }) {
            Reply::Series(found) => found,
            other => panic!("a local select failed: {}", other.describe()),
        };
        let local: Vec<Series> = local
            .into_iter()
            .map(|f| Series {
                labels: merge::labels_of_key(&f.key).expect("a stored key parses"),
                points: f.points.iter().map(|&(t, v)| Point { t, v }).collect(),
            })
            .collect();
        let mut plan = DigestRead::default();
        let engine = self.engine(c).clone();
        let mut mine = LocalMine::new(&engine, now, (mint, maxt), &local);
        let digests = Request::SelectDigests {
            matchers,
            mint,
            maxt,
            now,
        };
        for x in (0..self.cfg.nodes).filter(|&x| x != c) {
            match self.call(c, x, &digests) {
                Some(Reply::SeriesDigests { homes, series }) => {
                    plan.offer(&name(x), &homes, series, (mint, maxt), &mut mine)
                }
                _ => {
                    missing.insert(name(x));
                }
            }
        }
        drop(mine);
        merged.add_series(local);
        loop {
            let fetches = plan.fetches();
            if fetches.is_empty() {
                break;
            }
            for (node, items) in fetches {
                let x = self.index(&node);
                match self.call(c, x, &Request::SelectRanges { items, now }) {
                    Some(Reply::Series(found)) => {
                        merged.add_found(found);
                        plan.fetched(&node);
                    }
                    _ => {
                        plan.failed(&node);
                        missing.insert(node);
                    }
                }
            }
        }
        let replication = Replication {
            n_val: self.cfg.n,
            w: Quorum::N(self.cfg.w),
        };
        let partial = merge::partial(&self.ring, replication, &missing).is_some();
        let got = self.judge(c, merged, partial)?;
        self.log(format!(
            "query through {}: {} samples{}",
            name(c),
            got.len(),
            if partial { ", partial" } else { "" }
        ));
        Ok(())
    }

    fn stop_or_start(&mut self) {
        let x = self.rng.below(self.cfg.nodes as u64) as usize;
        let up = self.nodes.iter().filter(|n| n.up).count();
        if self.nodes[x].up && up > 1 {
            let power = self.rng.chance(500);
            self.nodes[x].up = false;
            self.nodes[x].engine = None;
            let seed = self.rng.next_u64();
            let d = &self.nodes[x].disk;
            self.nodes[x].disk = if power {
                d.crash(seed)
            } else {
                d.kill_process()
            };
            self.log(format!(
                "{} stops ({})",
                name(x),
                if power { "power loss" } else { "killed" }
            ));
        } else if !self.nodes[x].up {
            self.start(x);
        }
    }

    /// Node `x` starts: its engine opens on its disk, replaying its log.
    fn start(&mut self, x: usize) {
        self.nodes[x].engine = Some(open(
            &self.nodes[x].disk,
            &self.clock,
            self.cfg.ring_size,
            self.now(),
        ));
        self.nodes[x].up = true;
        self.log(format!("{} starts", name(x)));
    }

    fn step(&mut self) -> Result<(), SensorViolation> {
        self.tick += 1;
        self.clock.0.store(self.now(), Ordering::SeqCst);
        if self.tick.is_multiple_of(10) {
            // Each running node cuts and stores blocks, as its tick
            // thread does every second.
            let now = self.now();
            for n in self.nodes.iter().filter(|n| n.up) {
                let e = n.engine.as_ref().expect("a running node's engine");
                e.tick(now).expect("blocks stored on the simulated disk");
            }
        }
        let up: Vec<usize> = (0..self.cfg.nodes).filter(|&x| self.nodes[x].up).collect();
        let c = *self.rng.pick(&up).expect("a node is up");
        match self.rng.below(100) {
            0..=54 => self.write(c),
            55..=69 => self.query(c)?,
            70..=79 => {
                self.exchange(c, false);
            }
            80..=84 => {
                self.hand_off(c, false);
            }
            85..=94 => self.stop_or_start(),
            _ => {
                if self.side.take().is_some() {
                    self.log("healed".into());
                } else {
                    let side: BTreeSet<usize> = (0..self.cfg.nodes)
                        .filter(|_| self.rng.chance(500))
                        .collect();
                    self.log(format!("partition {side:?}"));
                    self.side = Some(side);
                }
            }
        }
        Ok(())
    }

    pub fn run(&mut self) -> Result<(), SensorViolation> {
        for _ in 0..self.cfg.steps {
            self.step()?;
        }
        self.side = None;
        self.cfg.drop_per_mille = 0;
        for x in 0..self.cfg.nodes {
            if !self.nodes[x].up {
                self.start(x);
            }
        }
        self.log("heal; handoff and anti-entropy only".into());
        let mut quiet = false;
        for _ in 0..self.cfg.max_settle_loops {
            let handed: usize = (0..self.cfg.nodes).map(|x| self.hand_off(x, true)).sum();
            let found: usize = (0..self.cfg.nodes).map(|x| self.exchange(x, true)).sum();
            let found = found + handed;
            if found == 0 {
                quiet = true;
                break;
            }
        }
        let acked = self.acked.len();
        self.log(format!("settled: {acked} samples acknowledged"));
        self.check_owners()?;
        for c in 0..self.cfg.nodes {
            self.query(c)?;
        }
        if !quiet {
            return Err(SensorViolation::NotQuiet(self.cfg.max_settle_loops));
        }
        Ok(())
    }
}

/// Runs one seed; the trace, and the first broken rule if any.
pub fn run(cfg: SensorSimConfig) -> (Vec<String>, Result<(), SensorViolation>) {
    let mut sim = SensorSim::new(cfg);
    let r = sim.run();
    (sim.trace, r)
}
