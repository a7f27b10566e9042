//! A flipped byte in one of a leveldb node's table files, or in one of a
//! leveled node's journal files, through the real binary: the node
//! starts, every key is still read right (the damaged replica answers
//! with an error, the others with the value), never a wrong value, and
//! /stats counts the damaged reads.

mod common;

use common::Node;

/// At least 1,600 bytes (a leveled journal keeps values from 1 KiB).
fn value(i: u32) -> String {
    format!("value {i} ").repeat(200)
}

/// A node of `conf` in `dir` is loaded with `keys` keys and stopped, the
/// largest file in a `folder` directory is damaged, and the node started
/// again: every key reads right, and damaged reads are counted.
fn damaged_and_served(conf: &str, keys: u32, folder: &str) -> (tempfile::TempDir, Node) {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), conf);
    for i in 0..keys {
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
    flip_a_byte_in_the_largest(dir.path(), folder);

    let n = Node::start(dir.path(), conf);
    every_key_read_right(&n, keys);
    let stats = n.stats();
    assert!(
        stats["leveldb_damaged_reads_total"].as_u64().unwrap() > 0,
        "no damaged read counted"
    );
    (dir, n)
}

#[test]
fn a_damaged_table_block_gives_no_wrong_data_and_the_node_serves() {
    // Small memtables (1 MiB per vnode), so the data reaches table files.
    let conf = "storage_backend = leveldb\nleveldb.maximum_memory = 16MB\n";
    let (_dir, n) = damaged_and_served(conf, 6000, "tables");
    assert!(n.log().contains("damaged"), "{}", n.log());
}

/// `rill admin leveldb verify | repair`: refused while the node runs;
/// with it stopped, verify lists the damaged range (exit status 1) and
/// repair rebuilds the partition without it; the node then answers every
/// key from its replicas, read repair puts the lost ones back, and the
/// index answers every key again.
#[test]
fn admin_leveldb_verify_and_repair_set_a_damaged_block_aside() {
    let dir = tempfile::tempdir().unwrap();
    let conf = "storage_backend = leveldb\nleveldb.maximum_memory = 16MB\n";
    let n = Node::start(dir.path(), conf);
    const KEYS: u32 = 6000;
    for i in 0..KEYS {
        let term = format!("t{i:05}");
        let r = n
            .http(
                "PUT",
                &format!("/buckets/d/keys/k{i}"),
                &[
                    ("Content-Type", "text/plain"),
                    ("x-riak-index-f_bin", &term),
                ],
                value(i).as_bytes(),
            )
            .unwrap();
        assert_eq!(r.status, 204);
    }
    let admin = |action: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rill"))
            .args(["-c", dir.path().join("rill.conf").to_str().unwrap()])
            .args(["admin", "leveldb", action])
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let (code, text) = admin("verify");
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("stop it first"), "{text}");
    n.stop();
    let (code, text) = admin("verify");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("nothing is damaged"), "{text}");

    flip_a_byte_in_the_largest(dir.path(), "tables");

    let (code, text) = admin("verify");
    eprintln!("{text}");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("damaged range") && text.contains("lost: after"),
        "{text}"
    );
    assert!(text.contains("rill admin leveldb repair"), "{text}");
    let (code, text) = admin("repair");
    eprintln!("{text}");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 partition(s) repaired"), "{text}");
    let lost =
        std::fs::read_to_string(dir.path().join("data/leveldb/lost/damaged-ranges")).unwrap();
    assert!(!lost.is_empty());
    let (code, text) = admin("verify");
    assert_eq!(code, Some(0), "{text}");

    let n = Node::start(dir.path(), conf);
    every_key_read_right(&n, KEYS);
    let stats = n.stats();
    assert_eq!(stats["leveldb_damaged_reads_total"].as_u64(), Some(0));
    // Read repair has put the lost objects back with their index entries:
    // a coverage query (one replica per partition) finds every key.
    common::until(
        "the index answers every key",
        std::time::Duration::from_secs(60),
        || {
            let r = n
                .http("GET", "/buckets/d/index/f_bin/t00000/t99999", &[], b"")
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            body["keys"].as_array().map_or(0, Vec::len) == KEYS as usize
        },
    );
}

/// Reads keys `k0` .. `k{keys - 1}`: each answered with its value.
fn every_key_read_right(n: &Node, keys: u32) {
    for i in 0..keys {
        let r = n
            .http("GET", &format!("/buckets/d/keys/k{i}"), &[], b"")
            .unwrap();
        assert_eq!(r.status, 200, "k{i}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, value(i).as_bytes(), "a wrong value for k{i}");
    }
}

/// Flips the middle byte of the largest file in a `folder` directory
/// (fjall's `tables`, or `blobs`: a leveled journal's) of the node whose
/// data is under `dir` (at least 100 kB).
fn flip_a_byte_in_the_largest(dir: &std::path::Path, folder: &str) {
    let all = testkit::files_under(&dir.join("data"));
    let file = all
        .iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with(folder)))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap_or_else(|| panic!("a file in {folder}/"));
    let mut bytes = std::fs::read(file).unwrap();
    assert!(bytes.len() > 100_000, "{} bytes", bytes.len());
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(file, &bytes).unwrap();
}

/// A leveled node: a flipped byte in the largest file of a partition's
/// journal (values of 1 KiB and more live there, apart from the ledger).
#[test]
fn a_damaged_leveled_journal_gives_no_wrong_data_and_the_node_serves() {
    let conf = "storage_backend = leveled\nleveled.maximum_memory = 16MB\nleveled.compression_method = none\n";
    damaged_and_served(conf, 3000, "blobs");
}
