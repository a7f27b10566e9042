//! Series of one group (the fields of a line protocol measurement and tag
//! set): one block per window holds them all, the timestamps once; each
//! reads back as written, gaps included, across a kill and a restart.

use super::*;

/// The fields of sensor `n` at `ts`, each its own value; `fields` of the
/// five.
fn line(n: u32, ts: i64, fields: &[usize]) -> Vec<(String, Vec<Sample>)> {
    fields
        .iter()
        .map(|&f| {
            let value = f64::from(n) * 100.0 + f as f64 + (ts / SEC % 1000) as f64 / 10.0;
            (format!("iot_f{f}{{sensor=\"{n}\"}}"), vec![s(ts, value)])
        })
        .collect()
}

fn group_keys(n: u32, count: usize) -> Vec<String> {
    vec![format!("iot{{sensor=\"{n}\"}}"); count]
}

fn write(e: &Engine, n: u32, ts: i64, fields: &[usize], want: &mut BTreeMap<(String, i64), f64>) {
    let series = line(n, ts, fields);
    let keys = group_keys(n, series.len());
    let groups: Vec<Option<&str>> = keys.iter().map(|k| Some(k.as_str())).collect();
    e.write_grouped("db", &series, &groups, T0).unwrap();
    for (key, samples) in series {
        want.insert((key, samples[0].ts), samples[0].value);
    }
}

fn check(e: &Engine, want: &BTreeMap<(String, i64), f64>) {
    let keys: std::collections::BTreeSet<&String> = want.keys().map(|(k, _)| k).collect();
    for key in keys {
        let got = all_of(e, key);
        let expect: BTreeMap<i64, f64> = want
            .iter()
            .filter(|((k, _), _)| k == key)
            .map(|((_, ts), v)| (*ts, *v))
            .collect();
        assert_eq!(got, expect, "{key}");
    }
}

#[test]
fn the_fields_of_a_line_share_one_block_per_window() {
    let rig = Rig::new(100 * SEC, 8);
    let e = rig.open(T0);
    let mut want = BTreeMap::new();
    // Two sensors, five fields, 30 lines each over three windows; every
    // seventh line lacks field 3 (a gap in its column).
    for i in 0..30i64 {
        for n in 0..2 {
            let fields: Vec<usize> = (0..5).filter(|&f| f != 3 || i % 7 != 0).collect();
            write(&e, n, T0 + i * 10 * SEC, &fields, &mut want);
        }
    }
    check(&e, &want);
    e.close().unwrap();
    check(&e, &want);
    // One group per sensor: block keys name two groups, never a field.
    let st = e.lock();
    let d = &st.dbs["db"];
    let keys = block_keys(d.stores[&0].as_ref()).unwrap();
    let groups: std::collections::BTreeSet<u64> = keys.iter().map(|k| k.0).collect();
    assert_eq!(groups.len(), 2, "{keys:?}");
    // Windows of 100 s hold 10 lines: full blocks of 8, then the rest.
    let windows: std::collections::BTreeSet<(u64, i64)> = keys.iter().map(|k| (k.0, k.1)).collect();
    assert_eq!(windows.len(), 6, "{keys:?}");
    drop(st);
    // A restart reads them from the catalog store's member records.
    drop(e);
    let (e, report) = rig.open_on(&rig.vfs.kill_process(), T0);
    assert_eq!(report.series, 10);
    assert_eq!(report.replayed_samples, 0);
    check(&e, &want);
    // A field new to a sensor joins its group.
    let mut more = BTreeMap::new();
    write(&e, 0, T0 + 500 * SEC, &[0, 7], &mut more);
    e.close().unwrap();
    want.extend(more);
    check(&e, &want);
    let st = e.lock();
    let keys = block_keys(st.dbs["db"].stores[&0].as_ref()).unwrap();
    let groups: std::collections::BTreeSet<u64> = keys.iter().map(|k| k.0).collect();
    assert_eq!(
        groups.len(),
        2,
        "the new field joined its sensor's group: {keys:?}"
    );
}

#[test]
fn a_kill_replays_groups_from_the_log() {
    let rig = Rig::new(1000 * SEC, 16);
    let e = rig.open(T0);
    let mut want = BTreeMap::new();
    for i in 0..40i64 {
        let fields: Vec<usize> = if i % 5 == 0 { vec![1] } else { vec![0, 1, 2] };
        write(&e, 9, T0 + i * SEC, &fields, &mut want);
        if i == 20 {
            e.tick(T0 + i * SEC).unwrap();
        }
    }
    // Killed with samples in the buffers and blocks in the store.
    drop(e);
    let after = rig.vfs.kill_process();
    let (e, report) = rig.open_on(&after, T0);
    assert!(report.replayed_samples > 0);
    check(&e, &want);
    // The replayed fields are still one group: a stop stores one block
    // per window part.
    e.close().unwrap();
    check(&e, &want);
    let st = e.lock();
    let keys = block_keys(st.dbs["db"].stores[&0].as_ref()).unwrap();
    let groups: std::collections::BTreeSet<u64> = keys.iter().map(|k| k.0).collect();
    assert_eq!(groups.len(), 1, "{keys:?}");
}

#[test]
fn a_group_past_a_blocks_columns_is_stored_in_several_parts() {
    // One line of more fields than a group block holds columns: its
    // window is stored as two parts, and every field reads back.
    let rig = Rig::new(1000 * SEC, 16);
    let e = rig.open(T0);
    let fields = rill_sensor::block::group::MAX_COLUMNS + 5;
    let series: Vec<(String, Vec<Sample>)> = (0..fields)
        .map(|f| (format!("wide_f{f}"), vec![s(T0 + SEC, f as f64)]))
        .collect();
    let groups = vec![Some("wide"); fields];
    e.write_grouped("db", &series, &groups, T0).unwrap();
    let t = e.close().unwrap();
    assert_eq!(t.blocks_stored, 2, "one cut, two blocks");
    // Each read decodes its part whole: the fields at both ends of each
    // part and every 97th between them (all of them would take minutes).
    let max = rill_sensor::block::group::MAX_COLUMNS;
    let edges = [0, 1, max - 2, max - 1, max, max + 1, fields - 1];
    for (i, (key, samples)) in series.iter().enumerate() {
        if !edges.contains(&i) && i % 97 != 0 {
            continue;
        }
        assert_eq!(
            e.read("db", key, i64::MIN, i64::MAX, T0).unwrap(),
            *samples,
            "{key}"
        );
    }
    let st = e.lock();
    let keys = block_keys(st.dbs["db"].stores[&0].as_ref()).unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!((keys[0].2, keys[1].2), (0, 1), "consecutive parts");
}
