//! A flipped byte in one of a leveldb node's table files, through the
//! real binary: the node starts, every key is still read right (the
//! damaged replica answers with an error, the others with the value),
//! never a wrong value, and /stats counts the damaged reads.

mod common;

use common::Node;

fn value(i: u32) -> String {
    format!("value {i} ").repeat(100)
}

#[test]
fn a_damaged_table_block_gives_no_wrong_data_and_the_node_serves() {
    let dir = tempfile::tempdir().unwrap();
    // Small memtables (1 MiB per vnode), so the data reaches table files.
    let conf = "storage_backend = leveldb\nleveldb.maximum_memory = 16MB\n";
    let n = Node::start(dir.path(), conf);
    const KEYS: u32 = 6000;
    for i in 0..KEYS {
        let r = n
            .http(
                "PUT",
                &format!("/buckets/d/keys/k{i}"),
                &[("Content-Type", "text/plain")],
                value(i).as_bytes(),
            )
            .unwrap();
        assert_eq!(r.status, 204);
    }
    n.stop();
    let all = testkit::files_under(&dir.path().join("data").join("leveldb"));
    let table = all
        .iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("tables")))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("a table file")
        .clone();
    let mut bytes = std::fs::read(&table).unwrap();
    assert!(bytes.len() > 100_000, "{} bytes", bytes.len());
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&table, &bytes).unwrap();

    let n = Node::start(dir.path(), conf);
    for i in 0..KEYS {
        let r = n
            .http("GET", &format!("/buckets/d/keys/k{i}"), &[], b"")
            .unwrap();
        assert_eq!(r.status, 200, "k{i}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, value(i).as_bytes(), "a wrong value for k{i}");
    }
    let stats = n.http("GET", "/stats", &[], b"").unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
    assert!(
        stats["leveldb_damaged_reads_total"].as_u64().unwrap() > 0,
        "no damaged read counted"
    );
    assert!(n.log().contains("damaged"), "{}", n.log());
}
