//! `rill-bench aae`: what active anti-entropy costs. Two replicas of the
//! same vnode set (two nodes opened in this process, every key written
//! to both with the same clock) are compared by the exchange machine
//! over rill-node's vnode messages, each exchange as the schedule runs
//! it between two vnodes (one preference list). First in sync, then with
//! `--diffs` keys newer on one side: every exchange of the loop runs and
//! repairs what it finds (the newer object merged into the replica
//! behind, as read repair does) until a whole loop finds nothing.
//! Reported: per exchange, wall time and CPU of this thread (both
//! replicas answer on it) and bytes of the messages as they would cross
//! the wire; for each difference, exchanges, time and keys repaired per
//! minute with no pauses or ticks. The pauses between an exchange's
//! stages add wall time, not work.

use crate::machine::Machine;
use crate::report::Report;
use anyhow::{bail, Context, Result};
use rill_aae::{Answer, Ask, Exchange, IndexN, Step};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_node::wire::{encode_reply, encode_request, Route};
use rill_node::{BKey, BackendKind, Content, Metadata, Node, NodeConfig, Object, VClock};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Keys of the vnode set (each on n_val = 3 vnodes of both nodes).
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Bytes of each value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Keys newer on one replica, each a run of its own.
    #[arg(long, value_delimiter = ',', default_value = "10,1000,100000")]
    diffs: Vec<u64>,
    /// `tictacaae_maxresults`.
    #[arg(long, default_value_t = 64)]
    max_results: usize,
    /// Partitions of the ring.
    #[arg(long, default_value_t = 64)]
    ring_size: u32,
    /// bitcask or memory.
    #[arg(long, default_value = "bitcask")]
    backend: String,
    /// Where the two nodes keep their data, in `a/` and `b/`, cleared
    /// first (a temporary directory if not given).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// 20,000 keys, differences of 10 and 1,000.
    #[arg(long)]
    quick: bool,
}

const N_VAL: u8 = 3;

/// CPU seconds this thread has used.
fn thread_cpu_s() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// What a run of exchanges cost.
#[derive(Default, Clone, Copy)]
struct Cost {
    exchanges: u64,
    wall_s: f64,
    cpu_s: f64,
    bytes: u64,
    repaired: u64,
    repair_s: f64,
}

struct Pair {
    a: Arc<Node>,
    b: Arc<Node>,
    ring_size: u32,
}

fn open(dir: &std::path::Path, name: &str, a: &Args) -> Result<Arc<Node>> {
    let mut c = NodeConfig::new(dir.join(name));
    c.nodename = format!("{name}@127.0.0.1");
    c.ring_size = a.ring_size;
    c.backend = match a.backend.as_str() {
        "bitcask" => BackendKind::Bitcask,
        "memory" => BackendKind::Memory,
        other => bail!("--backend {other}: bitcask or memory"),
    };
    c.tictacaae.active = true;
    // The node's own schedule stays out of the way: the benchmark runs
    // the exchanges.
    c.tictacaae.exchange_tick = Duration::from_secs(86_400 * 365);
    Node::open(c).with_context(|| format!("opening node {name}"))
}

/// The object of key `i` at `version` (the same bytes on both replicas).
fn object(i: u64, version: u64, value_bytes: usize) -> Object {
    let mut clock = VClock::new();
    let mut dot = None;
    for _ in 0..version {
        dot = Some(clock.increment(&[7u8; 16], 1_700_000_000));
    }
    let mut value = vec![b'v'; value_bytes];
    value[..8.min(value_bytes)].copy_from_slice(&i.to_be_bytes()[..8.min(value_bytes)]);
    let mut c = Content::new(
        value,
        Metadata {
            last_modified_us: 1_700_000_000_000_000 + version,
            ..Metadata::default()
        },
    );
    c.dot = dot;
    Object {
        clock,
        contents: vec![c],
    }
}

fn key(i: u64) -> BKey {
    BKey::new(b"", b"bench", format!("k{i:09}").as_bytes())
}

/// The partitions of a key's preference list.
fn partitions(k: &BKey, ring_size: u32) -> Vec<u32> {
    let h = rill_ring::key_hash(&k.bucket_type, &k.bucket, &k.key);
    let first = rill_ring::Ring::responsible_in(ring_size, &h).0;
    (0..u32::from(N_VAL))
        .map(|i| (first + i) % ring_size)
        .collect()
}

fn store(n: &Node, k: &BKey, o: &Object, ring_size: u32) -> Result<()> {
    for p in partitions(k, ring_size) {
        let r = n.vnodes().serve(
            p,
            VnodeRequest::Merge {
                key: k.clone(),
                object: o.clone(),
                allow_mult: false,
                prune: None,
                return_object: false,
            },
        );
        if let VnodeReply::Failed(e) = r {
            bail!("storing {k:?}: {e}");
        }
    }
    Ok(())
}

impl Pair {
    fn ask(&self, n: &Node, p: u32, index_n: IndexN, ask: &Ask, bytes: &mut u64) -> Result<Answer> {
        let req = VnodeRequest::Aae {
            index_n,
            ask: ask.clone(),
        };
        let route = Route {
            request_id: 1,
            partition: p,
        };
        *bytes += encode_request(route, &req).len() as u64;
        let reply = n.vnodes().serve(p, req);
        *bytes += encode_reply(route, &reply).len() as u64;
        match reply {
            VnodeReply::Aae(Some(a)) => Ok(a),
            other => bail!("vnode {p} answered {other:?}"),
        }
    }

    /// One exchange between A's and B's vnode `p` over `index_n`, and
    /// the repair of what it finds (A's objects into B).
    fn exchange(
        &self,
        p: u32,
        index_n: IndexN,
        max_results: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<u64> {
        let (wall, cpu) = (Instant::now(), thread_cpu_s());
        let (mut x, mut ask) = Exchange::new(max_results, seed);
        let outcome = loop {
            let a = self.ask(&self.a, p, index_n, &ask, &mut cost.bytes)?;
            let b = self.ask(&self.b, p, index_n, &ask, &mut cost.bytes)?;
            match x.answered(a, b)? {
                Step::Ask(next) => ask = next,
                Step::Done(o) => break o,
            }
        };
        cost.exchanges += 1;
        cost.wall_s += wall.elapsed().as_secs_f64();
        cost.cpu_s += thread_cpu_s() - cpu;
        let repair = Instant::now();
        for id in &outcome.deltas {
            let k = rill_node::wire::decode_key(id).context("a key from an exchange")?;
            let newest = match self
                .a
                .vnodes()
                .serve(p, VnodeRequest::Get { key: k.clone() })
            {
                VnodeReply::Found(Some(o)) => o,
                other => bail!("reading {k:?} from A: {other:?}"),
            };
            store(&self.b, &k, &newest, self.ring_size)?;
        }
        cost.repair_s += repair.elapsed().as_secs_f64();
        cost.repaired += outcome.deltas.len() as u64;
        Ok(outcome.deltas.len() as u64)
    }

    /// Every exchange of the vnode set once: each partition with each
    /// preference list it is in.
    fn full_loop(&self, max_results: usize, seed: u64, cost: &mut Cost) -> Result<u64> {
        let mut found = 0;
        for p in 0..self.ring_size {
            for index_n in IndexN::of_partition(p, N_VAL, self.ring_size) {
                found += self.exchange(p, index_n, max_results, seed ^ u64::from(p), cost)?;
            }
        }
        Ok(found)
    }
}

pub fn run(mut a: Args) -> Result<()> {
    if a.quick {
        a.keys = 20_000;
        a.diffs = vec![10, 1000];
    }
    if let Some(d) = a.diffs.iter().find(|d| **d > a.keys) {
        bail!("--diffs {d} is more than --keys {}", a.keys);
    }
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    Machine::describe(&dir).print();
    // The two nodes start empty (a run before left its data).
    for name in ["a", "b"] {
        let d = dir.join(name);
        if d.exists() {
            std::fs::remove_dir_all(&d).with_context(|| format!("clearing {}", d.display()))?;
        }
    }
    let mut report = Report::new("aae", a.quick);
    let pair = Pair {
        a: open(&dir, "a", &a)?,
        b: open(&dir, "b", &a)?,
        ring_size: a.ring_size,
    };
    let load = Instant::now();
    for i in 0..a.keys {
        let (k, o) = (key(i), object(i, 1, a.value_bytes));
        store(&pair.a, &k, &o, a.ring_size)?;
        store(&pair.b, &k, &o, a.ring_size)?;
    }
    println!(
        "{} keys of {} bytes written to both replicas (n_val 3, ring {}) in {:.1} s",
        a.keys,
        a.value_bytes,
        a.ring_size,
        load.elapsed().as_secs_f64()
    );
    report.int("keys", a.keys, "keys");

    // In sync: whole loops, for at least a second (an exchange takes
    // microseconds, below the resolution of the CPU clock).
    let mut cost = Cost::default();
    while cost.wall_s < 1.0 {
        let found = pair.full_loop(a.max_results, 1, &mut cost)?;
        if found != 0 {
            bail!("replicas written alike differ in {found} keys");
        }
    }
    let per = |x: f64| x / cost.exchanges as f64;
    report.num(
        "insync_exchange_us",
        per(cost.wall_s) * 1e6,
        "in sync: wall time per exchange (µs)",
    );
    report.num(
        "insync_exchange_cpu_us",
        per(cost.cpu_s) * 1e6,
        "in sync: CPU per exchange, both replicas (µs)",
    );
    report.num(
        "insync_exchange_bytes",
        per(cost.bytes as f64),
        "in sync: bytes per exchange",
    );
    // At the default tick each owned vnode starts one exchange per 480 s;
    // a node of a 3-node cluster owns a third of the ring, and answers as
    // many exchanges again for its neighbours.
    let owned = f64::from(a.ring_size) / 3.0;
    let cpu_share = 2.0 * owned * per(cost.cpu_s) / 480.0;
    report.num(
        "insync_cpu_share_ppm",
        cpu_share * 1e6,
        "in sync at the default tick: millionths of one core (target < 10,000)",
    );

    let mut version = 1;
    for &d in &a.diffs {
        version += 1;
        for i in 0..d {
            // Spread over the key space.
            let i = i * (a.keys / d.max(1));
            store(
                &pair.a,
                &key(i),
                &object(i, version, a.value_bytes),
                a.ring_size,
            )?;
        }
        let mut cost = Cost::default();
        let mut loops = 0;
        loop {
            loops += 1;
            if pair.full_loop(a.max_results, 1000 + loops, &mut cost)? == 0 {
                break;
            }
            if loops > 100_000 {
                bail!("{d} differences not repaired after {loops} loops");
            }
        }
        if cost.repaired < d {
            bail!("{d} keys differ but {} were repaired", cost.repaired);
        }
        let total_s = cost.wall_s + cost.repair_s;
        println!("{d} keys behind on one replica:");
        report.int(
            &format!("diff{d}_exchanges"),
            cost.exchanges,
            "  exchanges until a loop finds nothing",
        );
        report.num(
            &format!("diff{d}_exchange_s"),
            cost.wall_s,
            "  exchanges' wall time (s)",
        );
        report.num(
            &format!("diff{d}_exchange_cpu_s"),
            cost.cpu_s,
            "  exchanges' CPU (s)",
        );
        report.num(
            &format!("diff{d}_mib"),
            cost.bytes as f64 / (1 << 20) as f64,
            "  exchanges' messages (MiB)",
        );
        report.num(
            &format!("diff{d}_repair_s"),
            cost.repair_s,
            "  repairs' wall time (s)",
        );
        report.num(
            &format!("diff{d}_keys_per_min"),
            cost.repaired as f64 / total_s * 60.0,
            "  keys repaired per minute, no pauses or ticks",
        );
    }
    println!("{}", report.json());
    Ok(())
}
