//! Every acknowledged write survives a restart of the real binary, after
//! a clean stop and after SIGKILL.

mod common;

use common::Node;
use rill_client::Client;

fn write_many(n: &Node, round: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut c = Client::connect(n.pb).unwrap();
    let mut acked = Vec::new();
    for i in 0..300u32 {
        let key = format!("k{i}").into_bytes();
        let value = format!(
            "round {round} value {i} {}",
            "x".repeat((i % 7) as usize * 100)
        )
        .into_bytes();
        c.put(b"sensors", &key, &value, "text/plain").unwrap();
        acked.push((key, value));
    }
    // Some through HTTP too.
    for i in 0..20u32 {
        let path = format!("/buckets/http/keys/h{i}");
        let value = format!("http {round} {i}");
        let r = n
            .http(
                "PUT",
                &path,
                &[("Content-Type", "text/plain")],
                value.as_bytes(),
            )
            .unwrap();
        assert_eq!(r.status, 204);
        acked.push((format!("http/h{i}").into_bytes(), value.into_bytes()));
    }
    acked
}

fn check(n: &Node, acked: &[(Vec<u8>, Vec<u8>)]) {
    let mut c = Client::connect(n.pb).unwrap();
    for (k, v) in acked {
        if let Some(rest) = k.strip_prefix(b"http/") {
            let got = c
                .get(b"http", rest)
                .unwrap()
                .expect("acknowledged HTTP write lost");
            assert_eq!(&got.values, std::slice::from_ref(v));
        } else {
            let got = c
                .get(b"sensors", k)
                .unwrap()
                .expect("acknowledged write lost");
            assert_eq!(
                &got.values,
                std::slice::from_ref(v),
                "key {}",
                String::from_utf8_lossy(k)
            );
        }
    }
}

#[test]
fn clean_stop_and_crash_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let (pb, http) = (n.pb.port(), n.http.port());
    let acked = write_many(&n, 1);
    n.stop();
    let n = Node::start_on(dir.path(), "", pb, http);
    check(&n, &acked);
    let acked = write_many(&n, 2);
    n.kill();
    let n = Node::start_on(dir.path(), "", pb, http);
    check(&n, &acked);
    // Bucket types persist too.
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_rill"))
        .args([
            "-c",
            dir.path().join("rill.conf").to_str().unwrap(),
            "admin",
            "bucket-type",
            "create",
            "maps",
        ])
        .arg(r#"{"props":{"datatype":"map"}}"#)
        .status()
        .unwrap();
    assert!(st.success());
    n.stop();
    let n = Node::start_on(dir.path(), "", pb, http);
    let r = n.http("GET", "/rill/bucket-types/maps", &[], b"").unwrap();
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("\"datatype\":\"map\""));
    n.stop();
}
