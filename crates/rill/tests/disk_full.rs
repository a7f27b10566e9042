//! A node on a small, loop-mounted ext4 filled to the last block, through
//! the real binary: puts over HTTP and PB are refused with the documented
//! out-of-space errors (no internal paths), reads go on, the node starts
//! again after `kill -9` on the full disk, every acknowledged write reads
//! back, deletes work and free space, and puts resume without a restart.

mod common;

use common::Node;
use rill_client::Client;
use std::path::Path;
use std::time::{Duration, Instant};

const VALUE_BYTES: usize = 48 << 10;

fn value(i: usize) -> Vec<u8> {
    common::numbered_value(i, VALUE_BYTES)
}

fn config(data: &Path) -> String {
    format!(
        "ring_size = 8\nplatform_data_dir = {}\nbitcask.max_file_size = 2MB\n\
         bitcask.reserve = 4MB\ndelete_mode = immediate\n",
        data.display()
    )
}

fn http_put(n: &Node, key: &str, body: &[u8]) -> common::HttpReply {
    n.put_octets("sensors", key, body)
}

/// Deletes key `k{i}` through HTTP; it must be acknowledged.
fn http_delete_ok(n: &Node, i: usize) {
    let r = n
        .http("DELETE", &format!("/buckets/sensors/keys/k{i}"), &[], b"")
        .unwrap();
    assert_eq!(
        r.status,
        204,
        "delete k{i}: {}",
        String::from_utf8_lossy(&r.body)
    );
}

#[test]
fn a_full_disk_refuses_puts_clearly_keeps_reads_restarts_and_recovers() {
    let Some(fs) = testkit::LoopFs::mount_or_skip(64) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let data = fs.path().join("data");
    let n = Node::start(home.path(), &config(&data));
    let data_path = data.display().to_string();

    // Fill through HTTP until refused.
    let mut acked: Vec<usize> = Vec::new();
    let refusal = loop {
        let i = acked.len();
        assert!(i < 5000, "a 64 MiB disk never filled");
        let r = http_put(&n, &format!("k{i}"), &value(i));
        match r.status {
            204 => acked.push(i),
            _ => break r,
        }
    };
    let body = String::from_utf8_lossy(&refusal.body).into_owned();
    assert_eq!(refusal.status, 503, "{body}");
    assert!(body.starts_with("out_of_space"), "{body}");
    assert!(
        !body.contains(&data_path) && !body.contains("/bitcask"),
        "no internal path: {body}"
    );
    let retry: u64 = refusal
        .header("Retry-After")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(retry >= 1);
    assert!(
        acked.len() > 100,
        "only {} puts before the refusal",
        acked.len()
    );

    // PB is refused too, at once and with the same words.
    let mut pb = Client::connect(n.pb).unwrap();
    let err = pb
        .put(b"sensors", b"pb-key", &value(0), "application/octet-stream")
        .expect_err("a put at a full disk is refused");
    let msg = err.to_string();
    assert!(msg.contains("out_of_space"), "{msg}");
    assert!(!msg.contains(&data_path), "{msg}");

    // Reads go on.
    for &i in acked.iter().step_by(37) {
        let got = pb.get(b"sensors", format!("k{i}").as_bytes()).unwrap();
        assert_eq!(got.unwrap().values, vec![value(i)], "k{i}");
    }

    // Something else takes whatever room is left, then the node crashes.
    let filler = common::fill_up(&fs.path().join("filler"));
    eprintln!(
        "{} puts acknowledged, then {filler} bytes of filler",
        acked.len()
    );
    n.kill();

    // It starts again on the full disk.
    let n = Node::start(home.path(), &config(&data));
    assert!(
        n.log().contains("starting on a full disk"),
        "the start found the disk full: {}",
        n.log()
    );
    let mut pb = Client::connect(n.pb).unwrap();
    for &i in &acked {
        let got = pb.get(b"sensors", format!("k{i}").as_bytes()).unwrap();
        assert_eq!(got.map(|g| g.values), Some(vec![value(i)]), "k{i} lost");
    }
    let r = http_put(&n, "after-restart", b"x");
    assert_eq!(
        r.status,
        503,
        "still full: {}",
        String::from_utf8_lossy(&r.body)
    );

    // Deletes work on the full disk, and free its space (the filler stays).
    let (gone, kept) = acked.split_at(acked.len() * 2 / 3);
    for &i in gone {
        http_delete_ok(&n, i);
    }

    // Puts resume by themselves once merges have given the space back.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut attempt = 0;
    loop {
        let r = http_put(&n, &format!("new{attempt}"), &value(attempt));
        if r.status == 204 {
            break;
        }
        assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
        assert!(
            Instant::now() < deadline,
            "puts did not resume within 120 s of deleting {} keys",
            gone.len()
        );
        attempt += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("puts resumed after {attempt} refusals");
    for &i in gone.iter().step_by(11) {
        let got = pb.get(b"sensors", format!("k{i}").as_bytes()).unwrap();
        assert!(got.is_none(), "deleted k{i} came back");
    }
    for &i in kept {
        let got = pb.get(b"sensors", format!("k{i}").as_bytes()).unwrap();
        assert_eq!(got.map(|g| g.values), Some(vec![value(i)]), "k{i} lost");
    }
    n.stop();
}

/// Something other than the node fills the disk while no put is refused
/// yet (the reserve is still held): the very first deletes must succeed,
/// because the write that meets the full disk releases the reserve and
/// the delete then retries into its room.
#[test]
fn deletes_succeed_on_a_disk_something_else_filled() {
    let Some(fs) = testkit::LoopFs::mount_or_skip(64) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let data = fs.path().join("data");
    let n = Node::start(home.path(), &config(&data));
    let keys = 300;
    for i in 0..keys {
        let r = http_put(&n, &format!("k{i}"), &value(i));
        assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    }
    let filler = common::fill_up(&fs.path().join("filler"));
    eprintln!("{keys} puts, then {filler} bytes of filler");
    // Hundreds of tombstones on three replicas each cross block boundaries
    // of the stores' active files: some of them meet ENOSPC.
    let gone = keys * 2 / 3;
    for i in 0..gone {
        http_delete_ok(&n, i);
    }
    let mut pb = Client::connect(n.pb).unwrap();
    for i in 0..keys {
        let got = pb.get(b"sensors", format!("k{i}").as_bytes()).unwrap();
        if i < gone {
            assert!(got.is_none(), "deleted k{i} came back");
        } else {
            assert_eq!(got.map(|g| g.values), Some(vec![value(i)]), "k{i} lost");
        }
    }
    n.stop();
}
