//! A new user's node on a small disk, every setting at its default (the
//! ring's 64 partitions, the default rotation size, the 64 MB reserve,
//! `delete_mode = 3s`), through the real binary on a loop-mounted ext4 of
//! a few hundred MiB: filled until puts are refused, two thirds of the
//! keys deleted, and puts must succeed again without a restart, with
//! every acknowledged write readable and no deleted key back.
//!
//! With a rotation size that ignored the disk (Riak's 2 GB) every byte
//! stayed in the stores' active files, which no merge may take, and with
//! the reserve released the measured usage fell below the merge target,
//! where the fisherman does not merge: deletes freed nothing and puts
//! stayed refused.

mod common;

use common::Node;
use rill_client::Client;
use std::path::Path;
use std::time::{Duration, Instant};

const DISK_MIB: u64 = 272;
const VALUE_BYTES: usize = 256 << 10;

fn value(i: usize) -> Vec<u8> {
    common::numbered_value(i, VALUE_BYTES)
}

/// Only what a test must set: where the data lives (the harness adds the
/// listeners); the ring's size back to its default of 64.
fn config(data: &Path) -> String {
    format!("ring_size = 64\nplatform_data_dir = {}\n", data.display())
}

fn http_put(n: &Node, key: &str, body: &[u8]) -> common::HttpReply {
    n.put_octets("readings", key, body)
}

#[test]
fn a_full_disk_at_the_defaults_takes_puts_again_after_deletes() {
    let Some(fs) = testkit::LoopFs::mount_or_skip(DISK_MIB) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let data = fs.path().join("data");
    let n = Node::start(home.path(), &config(&data));

    // Fill until refused.
    let mut acked: Vec<usize> = Vec::new();
    loop {
        let i = acked.len();
        assert!(i < 2000, "a {DISK_MIB} MiB disk never filled");
        let r = http_put(&n, &format!("k{i}"), &value(i));
        match r.status {
            204 => acked.push(i),
            503 => break,
            s => panic!("put k{i}: {s} {}", String::from_utf8_lossy(&r.body)),
        }
    }
    assert!(
        acked.len() > 100,
        "only {} puts before the refusal",
        acked.len()
    );
    eprintln!("{} puts acknowledged before the disk filled", acked.len());

    // Delete two thirds of the keys.
    let (gone, kept) = acked.split_at(acked.len() * 2 / 3);
    for &i in gone {
        let r = n
            .http("DELETE", &format!("/buckets/readings/keys/k{i}"), &[], b"")
            .unwrap();
        assert_eq!(
            r.status,
            204,
            "delete k{i}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }

    // Puts succeed again by themselves, without a restart.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut refusals = 0;
    let mut new_keys = Vec::new();
    while new_keys.len() < 10 {
        let key = format!("new{}", new_keys.len());
        let r = http_put(&n, &key, &value(new_keys.len()));
        match r.status {
            204 => new_keys.push(key),
            503 => {
                assert!(
                    Instant::now() < deadline,
                    "puts still refused 240 s after deleting {} of {} keys ({refusals} refusals): {}",
                    gone.len(),
                    acked.len(),
                    String::from_utf8_lossy(&r.body)
                );
                refusals += 1;
                std::thread::sleep(Duration::from_millis(250));
            }
            s => panic!("put {key}: {s} {}", String::from_utf8_lossy(&r.body)),
        }
    }
    eprintln!("puts resumed after {refusals} refusals");

    // Nothing acknowledged lost, nothing deleted back.
    let mut pb = Client::connect(n.pb).unwrap();
    for &i in gone {
        let got = pb.get(b"readings", format!("k{i}").as_bytes()).unwrap();
        assert!(got.is_none(), "deleted k{i} came back");
    }
    for &i in kept {
        let got = pb.get(b"readings", format!("k{i}").as_bytes()).unwrap();
        assert_eq!(got.map(|g| g.values), Some(vec![value(i)]), "k{i} lost");
    }
    for (j, key) in new_keys.iter().enumerate() {
        let got = pb.get(b"readings", key.as_bytes()).unwrap();
        assert_eq!(got.map(|g| g.values), Some(vec![value(j)]), "{key} lost");
    }
    assert!(
        n.log().contains("max_file_size_from"),
        "the start says where the rotation size came from: {}",
        n.log()
    );
    n.stop();
}
