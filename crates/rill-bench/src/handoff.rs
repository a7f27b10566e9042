//! `rill-bench handoff`: what a sender holds in memory while it hands
//! off one partition. One node (Bitcask, anti-entropy off) holds `--keys`
//! keys in one vnode. First a pass of `rill_handoff::pass` over the
//! vnode's handoff reader reads every batch as a sender does (a chunk of
//! keys at a time, a 16-byte record of each key sent); then, as the
//! baseline, the way a sender held a partition before: every key listed
//! and sorted, and each key read kept with its clock. Reported: the peak
//! resident memory each adds (the kernel's high-water mark, reset before
//! each) and its time; the pass runs first and the allocator gives back
//! what it freed between the two, so neither is flattered by the other's
//! freed pages.

use crate::report::Report;
use anyhow::{bail, Context, Result};
use rill_handoff::pass::{Pass, SentRecord, CHUNK_MIN};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_node::{BKey, BackendKind, Content, Metadata, Node, NodeConfig, Object, VClock};
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Keys in the partition handed off.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Bytes of each value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Where the node keeps its data (a temporary directory if not
    /// given; cleared first).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Keys a chunk holds at least (a sender's: 65,536).
    #[arg(long, default_value_t = CHUNK_MIN)]
    chunk_min: usize,
    /// 50,000 keys in chunks of 4,096 at least, so the quick run reads
    /// more than one chunk.
    #[arg(long)]
    quick: bool,
}

/// A field of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    let line = s
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let kb: u64 = line.split_whitespace().nth(1).context("a size")?.parse()?;
    Ok(kb * 1024)
}

/// Gives freed memory back and resets the high-water mark; the resident
/// bytes then.
fn reset_peak() -> Result<u64> {
    unsafe { libc::malloc_trim(0) };
    std::fs::write("/proc/self/clear_refs", "5").context("resetting the peak RSS")?;
    status_bytes("VmRSS:")
}

fn object(i: u64, value_bytes: usize) -> Object {
    let mut clock = VClock::new();
    let dot = clock.increment(&[9u8; 16], 1_700_000_000 + i % 1000);
    let mut c = Content::new(vec![b'v'; value_bytes], Metadata::default());
    c.dot = Some(dot);
    Object {
        clock,
        contents: vec![c],
    }
}

pub fn run(a: Args) -> Result<()> {
    let keys = if a.quick { 50_000 } else { a.keys };
    let chunk_min = if a.quick { 4096 } else { a.chunk_min };
    let tmp = tempfile::tempdir()?;
    let dir = match &a.dir {
        Some(d) => {
            let _ = std::fs::remove_dir_all(d);
            d.clone()
        }
        None => tmp.path().to_path_buf(),
    };
    let mut c = NodeConfig::new(dir.join("node"));
    c.nodename = "handoff@127.0.0.1".into();
    c.ring_size = 8;
    c.backend = BackendKind::Bitcask;
    c.tictacaae.active = false;
    let node = Node::open(c).context("opening the node")?;
    let started = Instant::now();
    for i in 0..keys {
        let k = BKey::new(b"", b"bench", format!("k{i:09}").as_bytes());
        let r = node.vnodes().serve(
            0,
            VnodeRequest::Merge {
                key: k,
                object: object(i, a.value_bytes),
                allow_mult: false,
                prune: None,
                return_object: false,
            },
        );
        if let VnodeReply::Failed(e) = r {
            bail!("writing key {i}: {e}");
        }
    }
    println!(
        "{keys} keys of {} bytes written in {:.1} s",
        a.value_bytes,
        started.elapsed().as_secs_f64()
    );
    let mut report = Report::new("handoff", a.quick);
    report.int("keys", keys, "keys in the partition");
    report.int("chunk_min", chunk_min as u64, "keys a chunk holds at least");

    // The pass, as a sender reads its batches.
    let before = reset_peak()?;
    let t = Instant::now();
    let reader = node.vnodes().reader(0, None)?;
    let mut pass = Pass::new(chunk_min, SentRecord::default(), false, true);
    let mut after: Option<Vec<u8>> = None;
    let mut sent = 0u64;
    loop {
        let b = pass
            .read(&reader, after.as_deref(), 1000, 1 << 20)
            .map_err(anyhow::Error::msg)?;
        pass.record(&b);
        sent += b.items.len() as u64;
        if !b.more {
            break;
        }
        after = b.cursor;
    }
    let record = pass.into_sent();
    let pass_s = t.elapsed().as_secs_f64();
    let pass_bytes = status_bytes("VmHWM:")?.saturating_sub(before);
    if sent != keys || record.len() as u64 != keys {
        bail!("the pass sent {sent} keys and recorded {}", record.len());
    }
    drop(record);

    // The baseline: the whole partition listed, and each key read kept
    // with its clock.
    let before = reset_peak()?;
    let t = Instant::now();
    let listed = node.vnodes().handoff_keys(0)?;
    let mut kept: BTreeMap<Vec<u8>, (BKey, VClock)> = BTreeMap::new();
    for (enc, k) in listed.iter() {
        match node.vnodes().serve(0, VnodeRequest::Get { key: k.clone() }) {
            VnodeReply::Found(Some(o)) => {
                let _value = rill_node::encode_object(&o);
                kept.insert(enc.clone(), (k.clone(), o.clock));
            }
            other => bail!("reading {k:?}: {other:?}"),
        }
    }
    let listing_s = t.elapsed().as_secs_f64();
    let listing_bytes = status_bytes("VmHWM:")?.saturating_sub(before);
    if kept.len() as u64 != keys {
        bail!("the listing kept {} keys", kept.len());
    }
    drop(kept);
    drop(listed);

    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    report.num(
        "pass_peak_mb",
        mb(pass_bytes),
        "chunked pass: peak memory added (MB)",
    );
    report.num("pass_s", pass_s, "chunked pass: time (s)");
    report.num(
        "listing_peak_mb",
        mb(listing_bytes),
        "whole listing and kept clocks: peak memory added (MB)",
    );
    report.num(
        "listing_s",
        listing_s,
        "whole listing and kept clocks: time (s)",
    );
    report.num(
        "peak_ratio",
        pass_bytes as f64 / listing_bytes.max(1) as f64,
        "pass / listing, peak memory",
    );
    report.num(
        "pass_bytes_per_key",
        pass_bytes as f64 / keys as f64,
        "chunked pass: bytes per key",
    );
    println!("{}", report.json());
    Ok(())
}
