//! `storage_backend = multi` through the real binary: buckets land in the
//! backend their `backend` property names (Riak's
//! `multi_backend.NAME.*` settings), the default takes the rest, a
//! restart keeps what the disk backends hold and forgets the memory
//! one's, a property naming no backend is refused, and a configuration
//! without a default says so.

mod common;

use common::Node;

const CONF: &str = "storage_backend = multi\n\
    multi_backend.default = bc\n\
    multi_backend.bc.storage_backend = bitcask\n\
    multi_backend.lsm.storage_backend = leveldb\n\
    multi_backend.lsm.leveldb.maximum_memory = 32MB\n\
    multi_backend.mem.storage_backend = memory\n";

fn put(n: &Node, bucket: &str, key: &str) {
    let r = n
        .http(
            "PUT",
            &format!("/buckets/{bucket}/keys/{key}"),
            &[("Content-Type", "text/plain"), ("x-riak-index-n_int", "5")],
            format!("{bucket}/{key}").as_bytes(),
        )
        .unwrap();
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
}

fn get(n: &Node, bucket: &str, key: &str) -> Option<String> {
    let r = n
        .http("GET", &format!("/buckets/{bucket}/keys/{key}"), &[], b"")
        .unwrap();
    (r.status == 200).then(|| String::from_utf8(r.body).unwrap())
}

fn set_backend(n: &Node, bucket: &str, backend: &str) -> common::HttpReply {
    n.http(
        "PUT",
        &format!("/buckets/{bucket}/props"),
        &[("Content-Type", "application/json")],
        format!("{{\"props\":{{\"backend\":\"{backend}\"}}}}").as_bytes(),
    )
    .unwrap()
}

fn files_under(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[test]
fn buckets_go_to_the_backend_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), CONF);
    let stats = n.stats();
    assert_eq!(stats["storage_backend"], "riak_kv_multi_backend");
    assert_eq!(set_backend(&n, "ordered", "lsm").status, 204);
    assert_eq!(set_backend(&n, "cache", "mem").status, 204);
    let r = set_backend(&n, "lost", "nosuch");
    let body = String::from_utf8_lossy(&r.body).to_string();
    assert_eq!(r.status, 400, "{body}");
    assert!(
        body.contains("undefined_backend") && body.contains("bc, lsm, mem"),
        "{body}"
    );
    for bucket in ["plain", "ordered", "cache"] {
        for k in 0..20 {
            put(&n, bucket, &format!("k{k}"));
        }
    }
    for bucket in ["plain", "ordered", "cache"] {
        assert_eq!(
            get(&n, bucket, "k3").as_deref(),
            Some(&*format!("{bucket}/k3"))
        );
        let r = n
            .http("GET", &format!("/buckets/{bucket}/index/n_int/5"), &[], b"")
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["keys"].as_array().unwrap().len(), 20, "{bucket}: {v}");
    }
    let r = n.http("GET", "/buckets?buckets=true", &[], b"").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let mut buckets: Vec<&str> = v["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    buckets.sort();
    assert_eq!(buckets, ["cache", "ordered", "plain"]);
    // Each disk backend has its own directory.
    let multi = dir.path().join("data").join("multi");
    assert!(files_under(&multi.join("bc")) > 0, "no Bitcask stores");
    assert!(
        multi.join("lsm").join("keyspaces").is_dir(),
        "no leveldb database"
    );
    n.stop();

    let n = Node::start(dir.path(), CONF);
    assert_eq!(get(&n, "plain", "k7").as_deref(), Some("plain/k7"));
    assert_eq!(get(&n, "ordered", "k7").as_deref(), Some("ordered/k7"));
    // The memory backend starts empty, as Riak's does.
    assert_eq!(get(&n, "cache", "k7"), None);
    n.stop();
}

#[test]
fn a_multi_configuration_without_its_default_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let conf = common::write_config(
        dir.path(),
        "storage_backend = multi\nmulti_backend.a.storage_backend = memory\n",
        18087,
        18098,
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rill"))
        .args(["-c", conf.to_str().unwrap(), "chkconfig"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("multi_backend.default"), "{text}");
}
