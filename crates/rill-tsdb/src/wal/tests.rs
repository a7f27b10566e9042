use super::format::{encode_entry, Entry};
use super::*;
use bitcask::vfs::SimVfs;
use rill_sensor::Sample;
use std::collections::BTreeSet;

fn opts(vfs: &SimVfs, segment_bytes: u64) -> WalOptions {
    WalOptions {
        vfs: Arc::new(vfs.clone()),
        segment_bytes,
        sync: true,
    }
}

/// A record of one samples entry: series `id`, one sample at `ts`.
fn record(id: u64, ts: i64) -> Vec<u8> {
    let mut p = Vec::new();
    encode_entry(
        &mut p,
        &Entry::Samples {
            id,
            samples: vec![Sample {
                ts,
                value: ts as f64 / 8.0,
            }],
        },
    )
    .unwrap();
    p
}

/// Every (id, ts) the log replays.
fn replay(vfs: &SimVfs, dir: &Path) -> (BTreeSet<(u64, i64)>, ReplayReport, Wal) {
    let mut seen = BTreeSet::new();
    let (wal, report) = Wal::open(dir, opts(vfs, 4096), |_, e| {
        if let Entry::Samples { id, samples } = e {
            for s in samples {
                assert_eq!(s.value, s.ts as f64 / 8.0);
                seen.insert((id, s.ts));
            }
        }
    })
    .unwrap();
    (seen, report, wal)
}

#[test]
fn records_come_back_in_order_across_segments() {
    let vfs = SimVfs::new();
    let dir = Path::new("/wal");
    let (wal, _) = Wal::open(dir, opts(&vfs, 1024), |_, _| {}).unwrap();
    let mut p = Vec::new();
    encode_entry(
        &mut p,
        &Entry::Series {
            id: 7,
            db: b"db".to_vec(),
            key: b"temp{room=\"a\"}".to_vec(),
            group: 7,
            group_key: Vec::new(),
        },
    )
    .unwrap();
    wal.commit(wal.append(&p).unwrap()).unwrap();
    for ts in 0..200 {
        wal.commit(wal.append(&record(7, ts)).unwrap()).unwrap();
    }
    assert!(wal.segments().len() > 3, "{:?}", wal.segments());
    drop(wal);
    let mut order = Vec::new();
    let mut last_segment = 0;
    let (wal, report) = Wal::open(dir, opts(&vfs, 1024), |seg, e| {
        assert!(seg >= last_segment);
        last_segment = seg;
        order.push(e);
    })
    .unwrap();
    assert_eq!(report.records, 201);
    assert_eq!(report.torn_bytes, 0);
    assert!(matches!(&order[0], Entry::Series { id: 7, .. }));
    let ts: Vec<i64> = order[1..]
        .iter()
        .map(|e| match e {
            Entry::Samples { samples, .. } => samples[0].ts,
            _ => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(ts, (0..200).collect::<Vec<_>>());
    // A new segment at every open, after the others.
    assert_eq!(wal.current_segment(), last_segment + 1);
    // Retiring keeps the current segment.
    let n = wal.segments().len();
    assert_eq!(wal.retire_below(u64::MAX).unwrap(), n - 1);
    assert_eq!(wal.segments(), vec![wal.current_segment()]);
    drop(wal);
    let (seen, report, _) = replay(&vfs, dir);
    assert!(seen.is_empty());
    assert_eq!(report.segments, 1);
}

/// Writers on many threads share writes; what each was told is durable
/// survives any power cut, at any moment, whatever the disk keeps of
/// what was not synced. `RILL_TSDB_SEEDS=N` runs more seeds.
#[test]
fn every_acknowledged_record_survives_a_power_cut() {
    let seeds = std::env::var("RILL_TSDB_SEEDS").map_or(40, |v| v.parse().unwrap());
    for seed in 0..seeds {
        let vfs = SimVfs::new();
        let dir = Path::new("/wal");
        let (wal, _) = Wal::open(dir, opts(&vfs, 2048), |_, _| {}).unwrap();
        vfs.arm_crash(20 + seed * 7 % 150, seed);
        let acked = Mutex::new(BTreeSet::new());
        std::thread::scope(|s| {
            for id in 0..4u64 {
                let (wal, acked) = (&wal, &acked);
                s.spawn(move || {
                    for ts in 0..200 {
                        let Ok(t) = wal.append(&record(id, ts)) else {
                            return;
                        };
                        if wal.commit(t).is_err() {
                            return;
                        }
                        acked.lock().unwrap().insert((id, ts));
                    }
                });
            }
        });
        assert!(vfs.crashed(), "seed {seed}: the power cut came");
        drop(wal);
        let after = vfs.next_boot();
        let (seen, _, _) = replay(&after, dir);
        let acked = acked.into_inner().unwrap();
        let lost: Vec<_> = acked.difference(&seen).collect();
        assert!(lost.is_empty(), "seed {seed}: lost {lost:?}");
        // Each writer's records come back as a prefix of what it wrote.
        for id in 0..4 {
            let mine: Vec<i64> = seen
                .iter()
                .filter(|(i, _)| *i == id)
                .map(|(_, t)| *t)
                .collect();
            assert_eq!(
                mine,
                (0..mine.len() as i64).collect::<Vec<_>>(),
                "seed {seed}"
            );
        }
        // And the log opens again the same way (nothing torn is left).
        let (again, report, _) = replay(&after.next_boot(), dir);
        assert_eq!(again, seen, "seed {seed}");
        assert_eq!(report.torn_bytes, 0);
        assert!(report.damaged_segments.is_empty());
    }
}

/// A full disk fails the commits whose records could not be written and
/// nothing else; once there is room, writes go on, and the log holds
/// exactly what was acknowledged.
#[test]
fn a_full_disk_fails_commits_and_then_recovers() {
    let vfs = SimVfs::new();
    let dir = Path::new("/wal");
    let (wal, _) = Wal::open(dir, opts(&vfs, 1 << 20), |_, _| {}).unwrap();
    let mut acked = BTreeSet::new();
    let (mut failed, mut ts) = (0, 0);
    for round in 0..3 {
        vfs.set_capacity(Some(vfs.used_bytes() + 300));
        for _ in 0..40 {
            ts += 1;
            match wal.append(&record(1, ts)).and_then(|t| wal.commit(t)) {
                Ok(()) => {
                    acked.insert((1, ts));
                }
                Err(WalError::Io(e)) => {
                    failed += 1;
                    assert!(e.to_string().contains("No space"), "{e}");
                }
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        vfs.set_capacity(None);
        ts += 1;
        wal.commit(wal.append(&record(1, ts)).unwrap()).unwrap();
        acked.insert((1, ts));
    }
    assert!(failed > 50, "{failed}");
    drop(wal);
    let (seen, report, _) = replay(&vfs, dir);
    assert_eq!(seen, acked);
    assert!(report.damaged_segments.is_empty());
}

/// A failed fsync stops the log (what the kernel kept is unknown); it
/// opens again, with what was acknowledged before.
#[test]
fn a_failed_sync_stops_the_log_until_it_opens_again() {
    let vfs = SimVfs::new();
    let dir = Path::new("/wal");
    let (wal, _) = Wal::open(dir, opts(&vfs, 1 << 20), |_, _| {}).unwrap();
    wal.commit(wal.append(&record(1, 1)).unwrap()).unwrap();
    vfs.fail_syncs(Some(libc::EIO));
    assert!(wal.commit(wal.append(&record(1, 2)).unwrap()).is_err());
    vfs.fail_syncs(None);
    assert!(matches!(
        wal.append(&record(1, 3)),
        Err(WalError::Poisoned(_))
    ));
    drop(wal);
    let (seen, _, wal) = replay(&vfs, dir);
    assert!(seen.contains(&(1, 1)));
    wal.commit(wal.append(&record(1, 4)).unwrap()).unwrap();
}

/// Bytes after the last whole record of the last segment (a write a
/// crash cut) are cut off once; damage in an earlier segment is reported.
#[test]
fn a_torn_end_is_cut_and_damage_is_reported() {
    let vfs = SimVfs::new();
    let dir = Path::new("/wal");
    let (wal, _) = Wal::open(dir, opts(&vfs, 1 << 20), |_, _| {}).unwrap();
    for ts in 0..10 {
        wal.commit(wal.append(&record(1, ts)).unwrap()).unwrap();
    }
    let seg = wal.current_segment();
    drop(wal);
    let path = segment_path(dir, seg);
    let f = vfs.open(&path, OpenMode::ReadWrite).unwrap();
    let len = f.size().unwrap();
    f.write_all_at(&[9, 0, 0, 0, 1, 2], len).unwrap();
    f.sync_data().unwrap();
    drop(f);
    let (seen, report, wal) = replay(&vfs, dir);
    assert_eq!(seen.len(), 10);
    assert_eq!(report.torn_bytes, 6);
    drop(wal);
    // Flip a byte inside the first record: that segment is now damaged.
    let f = vfs.open(&path, OpenMode::ReadWrite).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, HEADER_BYTES as u64 + 9).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], HEADER_BYTES as u64 + 9)
        .unwrap();
    f.sync_data().unwrap();
    let (seen, report, _) = replay(&vfs, dir);
    // The damaged record is lost, the whole ones after it are read.
    assert_eq!(seen.len(), 9);
    assert!(!seen.contains(&(1, 0)));
    assert_eq!(report.damaged_segments, vec![seg]);
    assert_eq!(report.torn_bytes, 0);
}

/// A crash after a segment's name became durable but before its header
/// did leaves a file of zeros (or nothing): the log opens and drops it.
#[test]
fn a_segment_without_its_header_is_dropped() {
    for header in [&[0u8; HEADER_BYTES][..], &[0u8; 7], &[]] {
        let vfs = SimVfs::new();
        let dir = Path::new("/wal");
        let (wal, _) = Wal::open(dir, opts(&vfs, 1 << 20), |_, _| {}).unwrap();
        wal.commit(wal.append(&record(1, 1)).unwrap()).unwrap();
        let next = wal.current_segment() + 1;
        drop(wal);
        let f = vfs
            .open(&segment_path(dir, next), OpenMode::CreateNew)
            .unwrap();
        f.write_all_at(header, 0).unwrap();
        drop(f);
        let (seen, report, wal) = replay(&vfs, dir);
        assert_eq!(seen, BTreeSet::from([(1, 1)]));
        assert_eq!(report.segments, 1);
        // Its number is used again: no gap below the new segment, so the
        // next open still replays the first.
        assert_eq!(wal.current_segment(), next);
        assert_eq!(wal.segments(), vec![next - 1, next]);
        drop(wal);
        let (seen, report, _) = replay(&vfs, dir);
        assert_eq!(seen, BTreeSet::from([(1, 1)]));
        assert_eq!(report.stale_segments, 0);
    }
}

/// A segment whose deletion a crash undid, below a segment that stayed
/// deleted, is not replayed: its samples are stored, and newer values of
/// theirs may be in the deleted one.
#[test]
fn a_retired_segment_that_comes_back_is_not_replayed() {
    let vfs = SimVfs::new();
    let dir = Path::new("/wal");
    let (wal, _) = Wal::open(dir, opts(&vfs, 1 << 20), |_, _| {}).unwrap();
    let mut kept = Vec::new();
    for ts in 1..=3 {
        wal.commit(wal.append(&record(1, ts)).unwrap()).unwrap();
        kept.push((
            wal.current_segment(),
            vfs.open(&segment_path(dir, wal.current_segment()), OpenMode::Read)
                .unwrap()
                .read_all()
                .unwrap(),
        ));
        assert!(wal.rotate().unwrap());
    }
    wal.commit(wal.append(&record(1, 4)).unwrap()).unwrap();
    let current = wal.current_segment();
    assert_eq!(wal.retire_below(current).unwrap(), 3);
    drop(wal);
    // The first and the third come back, the second does not: only the
    // third is next to the rest.
    for (n, bytes) in [&kept[0], &kept[2]] {
        let f = vfs
            .open(&segment_path(dir, *n), OpenMode::CreateNew)
            .unwrap();
        f.write_all_at(bytes, 0).unwrap();
    }
    let (seen, report, wal) = replay(&vfs, dir);
    assert_eq!(seen, BTreeSet::from([(1, 3), (1, 4)]));
    assert_eq!(report.stale_segments, 1);
    assert!(!vfs.exists(&segment_path(dir, kept[0].0)));
    assert_eq!(wal.segments().first(), Some(&kept[2].0));
}

/// Every writer whose record a failed write carried is told, however late
/// it asks and whatever succeeded since.
#[test]
fn a_failed_commit_is_told_to_each_of_its_writers() {
    let vfs = SimVfs::new();
    let dir = Path::new("/wal");
    let (wal, _) = Wal::open(dir, opts(&vfs, 1 << 20), |_, _| {}).unwrap();
    vfs.set_capacity(Some(vfs.used_bytes()));
    // Several tickets in one failed write: each one's commit says so, in
    // any order, however late.
    let mut tickets: Vec<Ticket> = (0..5)
        .map(|ts| wal.append(&record(1, ts)).unwrap())
        .collect();
    assert!(wal.commit(tickets.pop().unwrap()).is_err());
    vfs.set_capacity(None);
    for _ in 0..3 {
        wal.commit(wal.append(&record(2, 0)).unwrap()).unwrap();
    }
    for t in tickets {
        assert!(wal.commit(t).is_err());
    }
}
