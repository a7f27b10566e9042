//! Shards by home partition: each series' blocks in the shard of its
//! database and home, and stores of the layout before homes moved into
//! shards when the engine opens.

use super::*;
use crate::catalog::Placer;
use bitcask::vfs::Vfs;

/// Homes by the digit of `a{k="D"}`: three partitions.
fn by_digit() -> Placer {
    Placer::new(|_, k| {
        k.len()
            .checked_sub(3)
            .map_or(0, |i| u32::from(k.as_bytes()[i]) % 3)
    })
}

fn storage_on(rig: &Rig) -> BitcaskStorage {
    let store_opts = bitcask::Options {
        vfs: Arc::new(rig.vfs.clone()),
        clock: Arc::new(rig.clock.clone()),
        max_file_size_bytes: 8192,
        ..bitcask::Options::default()
    };
    BitcaskStorage::new(
        Path::new("/sensor/data"),
        store_opts,
        Box::new(|_| {}),
        Box::new(|_| {}),
    )
}

fn write_three(e: &Engine) {
    for key in ["a{k=\"1\"}", "a{k=\"2\"}", "a{k=\"3\"}"] {
        every_3s(e, key, 40);
    }
}

#[test]
fn a_series_blocks_are_in_the_shard_of_its_home() {
    let mut rig = Rig::new(30 * SEC, 8);
    rig.opts.placer = by_digit();
    let e = rig.open(T0);
    write_three(&e);
    e.close().unwrap();
    let storage = storage_on(&rig);
    let shards = storage.shards().unwrap();
    assert_eq!(shards.len(), 3, "{shards:?}");
    let st = e.lock();
    for (db, home) in &shards {
        let keys = block_keys(st.dbs[db].stores[home].as_ref()).unwrap();
        assert!(!keys.is_empty());
        for (group, _, _) in keys {
            assert_eq!(st.catalog.home(group), Some(*home));
        }
    }
}

#[test]
fn a_store_of_the_layout_before_homes_is_moved_into_shards() {
    let mut rig = Rig::new(30 * SEC, 8);
    rig.opts.placer = by_digit();
    let e = rig.open(T0);
    write_three(&e);
    e.close().unwrap();
    let want: Vec<_> = ["a{k=\"1\"}", "a{k=\"2\"}", "a{k=\"3\"}"]
        .iter()
        .map(|k| all_of(&e, k))
        .collect();
    drop(e);
    // The blocks as a build before homes kept them: one store of the
    // database, no shards.
    let storage = storage_on(&rig);
    let legacy = storage.legacy("db").unwrap();
    let mut blocks = 0;
    for (db, home) in storage.shards().unwrap() {
        let shard = storage.shard(&db, home).unwrap();
        let mut all = Vec::new();
        shard
            .fold(&mut |k, v| all.push((k.to_vec(), v.to_vec())))
            .unwrap();
        for (k, v) in all {
            legacy.put(&k, &v, None).unwrap();
            blocks += 1;
        }
    }
    legacy.sync().unwrap();
    // A database made and never written: a store without blocks.
    let empty = storage.legacy("empty").unwrap();
    empty.sync().unwrap();
    drop((legacy, empty, storage));
    for dir in rig
        .vfs
        .list_dir(Path::new("/sensor/data/shards/6462"))
        .unwrap()
    {
        bitcask::vfs::remove_dir_durably(&rig.vfs, &dir).unwrap();
    }
    assert!(blocks > 10);
    let (e, report) = rig.open_on(&rig.vfs, T0);
    assert_eq!(report.legacy_blocks_moved, blocks);
    for (k, want) in ["a{k=\"1\"}", "a{k=\"2\"}", "a{k=\"3\"}"].iter().zip(&want) {
        assert_eq!(&all_of(&e, k), want, "{k}");
    }
    drop(e);
    let storage = storage_on(&rig);
    assert!(storage.legacy_databases().unwrap().is_empty());
    assert_eq!(storage.shards().unwrap().len(), 3);
    assert!(!rig.vfs.exists(Path::new("/sensor/data/db")));
    assert_eq!(
        e_databases(&rig),
        vec!["db".to_string(), "empty".to_string()]
    );
    // Opened again: nothing left to move, the same samples.
    let (e, report) = rig.open_on(&rig.vfs, T0);
    assert_eq!(report.legacy_blocks_moved, 0);
    assert_eq!(all_of(&e, "a{k=\"2\"}"), want[1]);
}

#[test]
fn a_home_dropped_leaves_whole_and_only_if_nothing_came_since() {
    let mut rig = Rig::new(30 * SEC, 8);
    rig.opts.placer = by_digit();
    let e = rig.open(T0);
    write_three(&e);
    // Some of each series still buffered, some stored.
    let home_of_2 = u32::from(b'2') % 3;
    let seen = e.home_writes("db", home_of_2);
    assert!(seen > 0);
    assert_eq!(
        e.series_of_home("db", home_of_2),
        vec![("a{k=\"2\"}".to_string(), None)]
    );
    // A write since: refused.
    let t = T0 + 200 * SEC;
    e.write("db", &one("a{k=\"2\"}", vec![s(t, 1.0)]), t)
        .unwrap();
    assert!(!e.drop_home("db", home_of_2, seen).unwrap());
    let seen = e.home_writes("db", home_of_2);
    assert!(e.drop_home("db", home_of_2, seen).unwrap());
    assert!(all_of(&e, "a{k=\"2\"}").is_empty());
    assert_eq!(all_of(&e, "a{k=\"1\"}").len(), 40);
    assert_eq!(e.homes().len(), 2);
    assert!(!rig
        .vfs
        .exists(Path::new(&format!("/sensor/data/shards/6462/{home_of_2}"))));
    e.close().unwrap();
    drop(e);
    // Gone after a restart too; a new series gets an id never given.
    let (e, report) = rig.open_on(&rig.vfs, t);
    assert_eq!(report.orphan_samples, 0);
    assert!(all_of(&e, "a{k=\"2\"}").is_empty());
    assert_eq!(all_of(&e, "a{k=\"3\"}").len(), 40);
    e.write("db", &one("b", vec![s(t, 2.0)]), t).unwrap();
    let st = e.lock();
    let (id, _) = st.catalog.lookup("db", "b").unwrap();
    assert!(id >= 3, "id {id} given before");
}

// A fallback hands a home off and drops it, takes writes for it again
// (another outage), and restarts while its log still names the series
// by the id dropped: the series is read by its new id, with the samples
// written since.
#[test]
fn a_series_written_again_after_its_home_left_keeps_its_new_samples_over_a_restart() {
    let mut rig = Rig::new(30 * SEC, 8);
    rig.opts.placer = by_digit();
    let e = rig.open(T0);
    let key = "a{k=\"2\"}";
    let home = u32::from(b'2') % 3;
    e.write("db", &one(key, vec![s(T0, 1.0)]), T0).unwrap();
    let seen = e.home_writes("db", home);
    assert!(e.drop_home("db", home, seen).unwrap());
    let t = T0 + 5 * SEC;
    e.write("db", &one(key, vec![s(t, 2.0)]), t).unwrap();
    let want: BTreeMap<i64, f64> = [(t, 2.0)].into();
    assert_eq!(all_of(&e, key), want);
    // The new id's record stored in the catalog (as a tick does): read
    // back before the log that names the old id.
    e.tick(t).unwrap();
    drop(e);
    let (e, report) = rig.open_on(&rig.vfs, t);
    assert_eq!(report.orphan_samples, 0);
    assert_eq!(
        all_of(&e, key).get(&t),
        Some(&2.0),
        "the sample written since"
    );
    assert_eq!(e.series_of_home("db", home), vec![(key.to_string(), None)]);
    let t2 = t + SEC;
    e.write("db", &one(key, vec![s(t2, 3.0)]), t2).unwrap();
    assert_eq!(all_of(&e, key).get(&t2), Some(&3.0));
    drop(e);
    let (e, _) = rig.open_on(&rig.vfs, t2);
    let got = all_of(&e, key);
    assert_eq!((got.get(&t), got.get(&t2)), (Some(&2.0), Some(&3.0)));
}

// The list of series a query selects from is made again when a home
// leaves, even if as many new series came since.
#[test]
fn a_query_sees_new_series_after_a_home_left_and_as_many_came() {
    let mut rig = Rig::new(30 * SEC, 8);
    rig.opts.placer = by_digit();
    let e = rig.open(T0);
    write_three(&e);
    let all = |e: &Engine| -> Vec<String> {
        e.select_where(|_| true)
            .into_iter()
            .map(|(_, s)| s.key())
            .collect()
    };
    assert_eq!(all(&e).len(), 3);
    let home = u32::from(b'2') % 3;
    let seen = e.home_writes("db", home);
    assert!(e.drop_home("db", home, seen).unwrap());
    let t = T0 + 200 * SEC;
    e.write("db", &one("b{k=\"4\"}", vec![s(t, 1.0)]), t)
        .unwrap();
    assert_eq!(
        all(&e),
        ["a{k=\"1\"}", "a{k=\"3\"}", "b{k=\"4\"}"],
        "the new series, not the one that left"
    );
}

#[test]
fn a_replica_takes_only_the_samples_it_lacks() {
    let rig = Rig::new(30 * SEC, 8);
    let e = rig.open(T0);
    let key = "x";
    e.write("db", &one(key, vec![s(T0, 1.0), s(T0 + SEC, 5.0)]), T0)
        .unwrap();
    let offered = vec![s(T0, 1.0), s(T0 + SEC, 4.0), s(T0 + 2 * SEC, 7.0)];
    let r = e
        .write_missing("db", &one(key, offered.clone()), &[], T0)
        .unwrap();
    assert_eq!(r.written, 1, "only the new time");
    let larger = vec![s(T0 + SEC, 6.0)];
    let r = e.write_missing("db", &one(key, larger), &[], T0).unwrap();
    assert_eq!(r.written, 1, "a larger value for a time held");
    let want: BTreeMap<i64, f64> = [(T0, 1.0), (T0 + SEC, 6.0), (T0 + 2 * SEC, 7.0)].into();
    assert_eq!(all_of(&e, key), want);
    let r = e
        .write_missing("db", &one("new", offered), &[], T0)
        .unwrap();
    assert_eq!(r.written, 3);
}

/// The databases an engine opened on `rig`'s disk lists.
fn e_databases(rig: &Rig) -> Vec<String> {
    rig.open_on(&rig.vfs, T0).0.databases()
}
