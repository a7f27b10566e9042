//! The figures of `rill-bench mixed`: latencies per interval, what each
//! engine did over the mix, and the targets of the volume test.

use super::Op;
use crate::report::Report;
use anyhow::{bail, Result};
use hdrhistogram::Histogram;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One interval's latencies per operation, µs.
pub(super) struct Interval {
    get: Histogram<u64>,
    put: Histogram<u64>,
    query: Histogram<u64>,
}

impl Interval {
    pub(super) fn new() -> Interval {
        let h = || Histogram::new_with_bounds(1, 60_000_000, 2).expect("histogram bounds");
        Interval {
            get: h(),
            put: h(),
            query: h(),
        }
    }
    pub(super) fn of(&mut self, op: Op) -> &mut Histogram<u64> {
        match op {
            Op::Get => &mut self.get,
            Op::Update => &mut self.put,
            Op::Query => &mut self.query,
        }
    }
    pub(super) fn ops(&self) -> u64 {
        self.get.len() + self.put.len() + self.query.len()
    }
    pub(super) fn add(&mut self, o: &Interval) {
        self.get.add(&o.get).expect("same bounds");
        self.put.add(&o.put).expect("same bounds");
        self.query.add(&o.query).expect("same bounds");
    }
}

/// What one interval's background looked like: the disk traffic of the
/// process (reads are page-cache misses) and the engine's write pressure
/// at its highest.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sampled {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub l0_runs: usize,
    pub sealed: usize,
    /// Clock ticks (1/100 s): this process's CPU time, and the machine's
    /// idle and I/O-wait time (all cores).
    pub cpu_ticks: u64,
    pub idle_ticks: u64,
    pub iowait_ticks: u64,
    /// This process's major page faults.
    pub major_faults: u64,
    /// The memory cgroup's page cache at its lowest (bytes; 0 without a
    /// cgroup) and the pages it gave back (reclaimed or freed).
    pub cache_min: u64,
    pub pages_out: u64,
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1000.0
    }
}

/// One engine's figures.
#[derive(Debug, PartialEq)]
pub(super) struct Figures {
    engine: String,
    ops_per_s: f64,
    last_third_ops_per_s: f64,
    p99_ms: [f64; 3],
    write_amp: f64,
    space_amp: f64,
}

impl Figures {
    /// The figures as numbers (how an engine's process hands them to the
    /// run).
    pub(super) fn numbers(&self) -> [f64; 7] {
        [
            self.ops_per_s,
            self.last_third_ops_per_s,
            self.p99_ms[0],
            self.p99_ms[1],
            self.p99_ms[2],
            self.write_amp,
            self.space_amp,
        ]
    }

    pub(super) fn from_numbers(engine: &str, n: &[f64]) -> Result<Figures> {
        let [ops, last, get, put, query, write_amp, space_amp] = n[..] else {
            bail!("{} numbers, not 7", n.len());
        };
        Ok(Figures {
            engine: engine.to_string(),
            ops_per_s: ops,
            last_third_ops_per_s: last,
            p99_ms: [get, put, query],
            write_amp,
            space_amp,
        })
    }
}

pub(super) fn figures(
    engine: &str,
    iv: &[Interval],
    every: Duration,
    written: u64,
    put: u64,
    disk: u64,
    live: u64,
) -> Figures {
    let secs = every.as_secs_f64();
    let total: u64 = iv.iter().map(Interval::ops).sum();
    // At least the last interval, however short the run.
    let third = iv.len() - (iv.len() / 3).max(1);
    let last: u64 = iv[third..].iter().map(Interval::ops).sum();
    let mut whole = Interval::new();
    for i in iv {
        whole.add(i);
    }
    Figures {
        engine: engine.to_string(),
        ops_per_s: total as f64 / (iv.len() as f64 * secs),
        last_third_ops_per_s: last as f64 / ((iv.len() - third).max(1) as f64 * secs),
        p99_ms: [
            ms(&whole.get, 0.99),
            ms(&whole.put, 0.99),
            ms(&whole.query, 0.99),
        ],
        write_amp: written as f64 / put.max(1) as f64,
        space_amp: disk as f64 / live.max(1) as f64,
    }
}

pub(super) fn write_csv(
    out: &Path,
    engine: &str,
    iv: &[Interval],
    sampled: &[Sampled],
    every: Duration,
) -> Result<PathBuf> {
    let csv = out.join(format!("mixed-{engine}.csv"));
    let mut f = std::fs::File::create(&csv)?;
    writeln!(
        f,
        "t_s,ops_per_s,get_p50_ms,get_p99_ms,put_p50_ms,put_p99_ms,query_p50_ms,query_p99_ms,disk_read_mb_s,disk_write_mb_s,l0_runs_max,sealed_memtables_max,cpu_cores,machine_idle_cores,machine_iowait_cores,major_faults_per_s,cgroup_cache_min_mb,cgroup_pages_out_mb_s"
    )?;
    for (i, x) in iv.iter().enumerate() {
        let b = sampled.get(i).copied().unwrap_or_default();
        let mb_s = |bytes: u64| bytes as f64 / 1e6 / every.as_secs_f64();
        // Ticks are 1/100 s (USER_HZ on Linux).
        let cores = |ticks: u64| ticks as f64 / 100.0 / every.as_secs_f64();
        writeln!(
            f,
            "{:.0},{:.0},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.1},{:.1},{},{},{:.2},{:.2},{:.2},{:.0},{:.1},{:.1}",
            (i as f64 + 1.0) * every.as_secs_f64(),
            x.ops() as f64 / every.as_secs_f64(),
            ms(&x.get, 0.5),
            ms(&x.get, 0.99),
            ms(&x.put, 0.5),
            ms(&x.put, 0.99),
            ms(&x.query, 0.5),
            ms(&x.query, 0.99),
            mb_s(b.read_bytes),
            mb_s(b.write_bytes),
            b.l0_runs,
            b.sealed,
            cores(b.cpu_ticks),
            cores(b.idle_ticks),
            cores(b.iowait_ticks),
            b.major_faults as f64 / every.as_secs_f64(),
            b.cache_min as f64 / 1e6,
            mb_s(b.pages_out * 4096)
        )?;
    }
    Ok(csv)
}

pub(super) fn report(r: &mut Report, f: &Figures) {
    let e = &f.engine;
    r.num(
        &format!("{e}_ops_per_s"),
        f.ops_per_s,
        &format!("{e}: operations/s over the mix"),
    );
    r.num(
        &format!("{e}_last_third_ops_per_s"),
        f.last_third_ops_per_s,
        &format!("{e}: operations/s in the last third"),
    );
    for (i, op) in ["get", "put", "query"].iter().enumerate() {
        r.num(
            &format!("{e}_{op}_p99_ms"),
            f.p99_ms[i],
            &format!("{e}: {op} p99, ms"),
        );
    }
    r.num(
        &format!("{e}_write_amp"),
        f.write_amp,
        &format!("{e}: bytes written to the disk per byte put during the mix"),
    );
    r.num(
        &format!("{e}_space_amp"),
        f.space_amp,
        &format!("{e}: bytes on disk per live byte at the end"),
    );
}

/// The targets of leveled's volume test ("Riak + leveled - volume testing
/// with 2i"): leveled against leveldb.
pub(super) fn compare(r: &mut Report, all: &[Figures]) {
    let get = |n: &str| all.iter().find(|f| f.engine == n);
    if let (Some(v), Some(l)) = (get("leveled"), get("leveldb")) {
        let tp = v.last_third_ops_per_s / l.last_third_ops_per_s.max(1e-9);
        let put = v.p99_ms[1] / l.p99_ms[1].max(1e-9);
        let q = v.p99_ms[2] / l.p99_ms[2].max(1e-9);
        r.num(
            "leveled_over_leveldb_last_third",
            tp,
            "leveled / leveldb, operations/s in the last third (target >= 1.0)",
        );
        r.num(
            "leveled_over_leveldb_put_p99",
            put,
            "leveled / leveldb, update p99 (target <= 0.5)",
        );
        r.num(
            "leveled_over_leveldb_query_p99",
            q,
            "leveled / leveldb, 2i p99 (target <= 1.0)",
        );
        let ok = tp >= 1.0 && put <= 0.5 && q <= 1.0;
        println!("target (leveled >= 1.0x leveldb in the last third, update p99 <= 0.5x, 2i p99 <= 1.0x): {}", if ok { "met" } else { "NOT met" });
    }
    // Against the comparison engine, for scale (no target).
    if let Some(k) = get("rocksdb") {
        for f in all.iter().filter(|f| f.engine != "rocksdb") {
            let e = &f.engine;
            r.num(
                &format!("{e}_over_rocksdb_last_third"),
                f.last_third_ops_per_s / k.last_third_ops_per_s.max(1e-9),
                &format!("{e} / rocksdb, operations/s in the last third"),
            );
            r.num(
                &format!("{e}_over_rocksdb_put_p99"),
                f.p99_ms[1] / k.p99_ms[1].max(1e-9),
                &format!("{e} / rocksdb, update p99"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_survive_their_numbers() {
        let f = Figures {
            engine: "leveled".into(),
            ops_per_s: 20729.5,
            last_third_ops_per_s: 20371.25,
            p99_ms: [0.6, 1.15, 1.375],
            write_amp: 1.64,
            space_amp: 1.13,
        };
        assert_eq!(Figures::from_numbers("leveled", &f.numbers()).unwrap(), f);
        assert!(Figures::from_numbers("leveled", &[1.0, 2.0]).is_err());
    }
}
