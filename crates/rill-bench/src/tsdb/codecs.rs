//! The value codecs of Rill's sensor blocks compared on the benchmark's
//! data (its first 20 sensors, every field) and on real-shaped series
//! that the benchmark's rounded random walks do not cover: a gauge at
//! full float precision, a float counter with binary rounding error (as
//! node_exporter's CPU seconds), an integer counter, and a 0/1 state,
//! each scraped every 15 s with jitter. Per data set and choice: bytes
//! per sample in blocks of 1,024, and encode and decode time per sample.

use super::gen::Rng;
use crate::report::Report;
use rill_sensor::block::{self, Choice, Sample};
use std::collections::BTreeMap;
use std::time::Instant;

const BLOCK: usize = 1024;

/// Series of the benchmark's first 20 sensors, by sensor and field.
fn from_batches(batches: &[(String, u64)]) -> Vec<Vec<Sample>> {
    let mut by: BTreeMap<String, BTreeMap<i64, f64>> = BTreeMap::new();
    for (body, _) in batches {
        for line in body.lines() {
            // Sensors s00000 to s00019 only.
            let Some(at) = line.find("sensor=s000") else {
                continue;
            };
            if !matches!(line.as_bytes().get(at + 11), Some(b'0' | b'1')) {
                continue;
            }
            let (points, _) = rill_sensor::line::parse(line);
            for p in points {
                let Some(ts) = p.timestamp else { continue };
                let sensor = p
                    .tags
                    .iter()
                    .find(|(k, _)| k == "sensor")
                    .map(|t| t.1.to_string());
                for (f, v) in &p.fields {
                    let value = match v {
                        rill_sensor::line::FieldValue::Float(x) => *x,
                        rill_sensor::line::FieldValue::Int(i) => *i as f64,
                        rill_sensor::line::FieldValue::UInt(u) => *u as f64,
                        _ => continue,
                    };
                    by.entry(format!("{sensor:?}/{f}"))
                        .or_default()
                        .insert(ts * 1_000_000, value);
                }
            }
        }
    }
    by.into_values()
        .map(|m| {
            m.into_iter()
                .map(|(ts, value)| Sample { ts, value })
                .collect()
        })
        .collect()
}

/// Real-shaped series: four of 100,000 samples each.
fn real_shaped() -> Vec<(&'static str, Vec<Sample>)> {
    let mut rng = Rng::new(0x7265_616c);
    let n = 100_000;
    let t0 = 1_700_000_000_000_000_000i64;
    // Scraped every 15 s, stamped in ms with up to 10 ms of jitter.
    let ts = |k: usize, rng: &mut Rng| {
        t0 + k as i64 * 15_000_000_000 + (rng.next() % 10) as i64 * 1_000_000
    };
    let (mut gauge, mut counter, mut ints, mut state) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut c, mut i, mut on) = (12_345.67f64, 1_000u64, 0.0);
    for k in 0..n {
        let t = ts(k, &mut rng);
        let g = 20.0 + 5.0 * (k as f64 / 240.0).sin() + (rng.unit() - 0.5) * 1e-3;
        c += 0.01 * (rng.next() % 100) as f64;
        i += rng.next() % 50;
        if rng.unit() < 0.001 {
            on = 1.0 - on;
        }
        gauge.push(Sample { ts: t, value: g });
        counter.push(Sample { ts: t, value: c });
        ints.push(Sample {
            ts: t,
            value: i as f64,
        });
        state.push(Sample { ts: t, value: on });
    }
    vec![
        ("full-precision gauge", gauge),
        ("float counter", counter),
        ("integer counter", ints),
        ("0/1 state", state),
    ]
}

/// Bytes per sample and ns per sample to encode and to decode.
fn measure(series: &[Vec<Sample>], choice: Choice) -> (f64, f64, f64) {
    let (mut bytes, mut n) = (0usize, 0usize);
    let mut blocks = Vec::new();
    let began = Instant::now();
    for s in series {
        for chunk in s.chunks(BLOCK) {
            let b = block::encode(chunk, choice).expect("a block");
            bytes += b.len();
            n += chunk.len();
            blocks.push(b);
        }
    }
    let enc = began.elapsed().as_secs_f64();
    let began = Instant::now();
    for b in &blocks {
        std::hint::black_box(block::decode(b).expect("decodes"));
    }
    let dec = began.elapsed().as_secs_f64();
    let n = n.max(1) as f64;
    (bytes as f64 / n, enc * 1e9 / n, dec * 1e9 / n)
}

/// As [`measure`], the fields of each sensor (`fields` series in a row,
/// sharing their timestamps) in group blocks of `BLOCK` rows; decoding
/// takes each series alone, as a query of one series does.
fn measure_groups(series: &[Vec<Sample>], fields: usize, choice: Choice) -> (f64, f64, f64) {
    let (mut bytes, mut n) = (0usize, 0usize);
    let mut blocks = Vec::new();
    let began = Instant::now();
    for sensor in series.chunks(fields) {
        for rows in sensor[0].chunks(BLOCK) {
            let (lo, hi) = (rows[0].ts, rows[rows.len() - 1].ts);
            let columns: Vec<(u64, &[Sample])> = sensor
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let a = s.partition_point(|x| x.ts < lo);
                    let b = s.partition_point(|x| x.ts <= hi);
                    (i as u64, &s[a..b])
                })
                .filter(|(_, c)| !c.is_empty())
                .collect();
            let b = block::group::encode(&columns, choice).expect("a group block");
            bytes += b.len();
            n += columns.iter().map(|(_, c)| c.len()).sum::<usize>();
            blocks.push((b, columns.len()));
        }
    }
    let enc = began.elapsed().as_secs_f64();
    let began = Instant::now();
    for (b, columns) in &blocks {
        for c in 0..*columns as u64 {
            std::hint::black_box(block::group::decode_series(b, c).expect("decodes"));
        }
    }
    let dec = began.elapsed().as_secs_f64();
    let n = n.max(1) as f64;
    (bytes as f64 / n, enc * 1e9 / n, dec * 1e9 / n)
}

pub fn run(batches: &[(String, u64)], r: &mut Report) {
    let bench = from_batches(batches);
    let mut sets: Vec<(&str, Vec<Vec<Sample>>)> = vec![("benchmark data", bench)];
    for (name, s) in real_shaped() {
        sets.push((name, vec![s]));
    }
    println!("codecs: bytes per sample in blocks of {BLOCK} (header and checksum included), encode and decode ns per sample");
    for (name, series) in &sets {
        let key = name.replace([' ', '/', '-'], "_");
        for (choice, cname) in [
            (Choice::Auto, "auto"),
            (Choice::Smallest, "smallest"),
            (Choice::Gorilla, "gorilla"),
        ] {
            let (b, enc, dec) = measure(series, choice);
            println!("  {name:<22} {cname:<9} {b:>7.3} bytes/sample  encode {enc:>6.1} ns  decode {dec:>6.1} ns");
            r.record(&format!("codec_{key}_{cname}_bytes_per_sample"), b);
        }
    }
    // The benchmark's sensors' five fields in group blocks, as the engine
    // stores line protocol.
    let (b, enc, dec) = measure_groups(&sets[0].1, super::gen::FIELDS.len(), Choice::Auto);
    println!(
        "  {:<22} {:<9} {b:>7.3} bytes/sample  encode {enc:>6.1} ns  decode {dec:>6.1} ns",
        "benchmark data", "grouped"
    );
    r.record("codec_benchmark_data_grouped_bytes_per_sample", b);
}
