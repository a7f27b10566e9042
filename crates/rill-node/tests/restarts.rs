//! Replica identities across restarts: a vnode keeps its actor id and
//! continues its counter, so clocks and data types do not grow with
//! restarts (clean ones and crashes of the process alike); after a stop
//! that may have lost writes, clocks grow by at most one entry per key and
//! restart, and vclock pruning bounds them.

use rill_node::crdt::{Crdt, Op};
use rill_node::vnode::lease::LeaseFile;
use rill_node::{
    BackendKind, Content, DtFetchAnswer, DtFetchRequest, DtUpdateRequest, GetAnswer, GetRequest,
    Metadata, Node, NodeConfig, Object, PutRequest,
};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn open(dir: &Path) -> Arc<Node> {
    open_with(dir, |_| {}).unwrap()
}

fn get(n: &Node, bucket: &str, key: &str) -> Option<Object> {
    match n
        .get(&GetRequest {
            bucket: bucket.into(),
            key: key.into(),
            ..GetRequest::default()
        })
        .unwrap()
    {
        GetAnswer::Found(o) => Some(o),
        _ => None,
    }
}

/// A read-modify-write, as a client does: the value read is the context.
fn put(n: &Node, bucket: &str, key: &str, value: &str) {
    let vclock = get(n, bucket, key).map(|o| rill_object::encode_vclock(&o.clock));
    n.put(PutRequest {
        bucket: bucket.into(),
        key: Some(key.into()),
        vclock,
        content: Content::new(value.as_bytes().to_vec(), Metadata::default()),
        ..PutRequest::default()
    })
    .unwrap();
}

fn dt(n: &Node, t: &str, key: &str, op: Op) {
    n.dt_update(DtUpdateRequest {
        bucket_type: t.into(),
        bucket: b"b".to_vec(),
        key: Some(key.into()),
        context: None,
        op,
        w: None,
        dw: None,
        pw: None,
        node_confirms: None,
        n_val: None,
    })
    .unwrap();
}

fn fetch(n: &Node, t: &str, key: &str) -> Crdt {
    match n
        .dt_fetch(&DtFetchRequest {
            bucket_type: t.into(),
            bucket: b"b".to_vec(),
            key: key.into(),
            ..Default::default()
        })
        .unwrap()
    {
        DtFetchAnswer::Found { value } => value,
        other => panic!("{other:?}"),
    }
}

fn make_types(n: &Node) {
    for (name, dt) in [("counters", "counter"), ("sets", "set")] {
        n.buckets()
            .create_type(name, json!({ "datatype": dt }).as_object().unwrap())
            .unwrap();
        n.buckets().activate_type(name).unwrap();
    }
}

const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const RESTARTS: usize = 200;

#[test]
fn clocks_and_data_types_do_not_grow_with_restarts() {
    let dir = tempfile::tempdir().unwrap();
    make_types(&open(dir.path()));
    for round in 0..RESTARTS {
        let n = open(dir.path());
        for k in KEYS {
            put(&n, "b", k, &format!("{k} in round {round}"));
        }
        dt(&n, "counters", "c", Op::Counter(1));
        dt(
            &n,
            "sets",
            "s",
            Op::Set {
                adds: vec![format!("e{}", round % 5).into_bytes()],
                removes: vec![],
            },
        );
        // Half the runs end as a crash of the process would.
        if round % 2 == 1 {
            n.stop_as_if_killed();
        }
    }
    let n = open(dir.path());
    for k in KEYS {
        let o = get(&n, "b", k).unwrap();
        assert_eq!(o.contents.len(), 1, "{k}: no siblings");
        assert_eq!(
            o.contents[0].value,
            format!("{k} in round {}", RESTARTS - 1).into_bytes()
        );
        // One node coordinates every put of a key: one writer.
        assert_eq!(o.clock.len(), 1, "{k}: clock {:?}", o.clock);
        let (_, count, _) = o.clock.entries().next().unwrap();
        assert_eq!(count, RESTARTS as u64, "{k}: every put counted once");
    }
    match fetch(&n, "counters", "c") {
        Crdt::Counter(c) => {
            assert_eq!(c.value(), RESTARTS as i64);
            assert_eq!(c.actors(), 1, "one actor counted across {RESTARTS} runs");
        }
        other => panic!("{other:?}"),
    }
    let set = fetch(&n, "sets", "s");
    assert_eq!(
        set.context().unwrap().0.len(),
        1,
        "one actor in the set's clock"
    );
    let object = match n
        .get(&GetRequest {
            bucket_type: "sets".into(),
            bucket: "b".into(),
            key: "s".into(),
            ..GetRequest::default()
        })
        .unwrap()
    {
        GetAnswer::Found(o) => o,
        other => panic!("the set's object: {other:?}"),
    };
    assert_eq!(object.clock.len(), 1, "{:?}", object.clock);
}

/// Marks the last run as one that may have lost writes (another boot, no
/// clean stop), as after a power loss.
fn as_if_power_was_lost(dir: &Path) {
    let (f, _) = LeaseFile::open(&dir.join("meta"), 8).unwrap().unwrap();
    f.write(|t| {
        t.clean = false;
        t.boot_id = [0xee; 16];
    })
    .unwrap();
}

#[test]
fn after_possible_loss_each_key_takes_one_new_epoch_and_pruning_bounds_clocks() {
    let dir = tempfile::tempdir().unwrap();
    {
        let n = open(dir.path());
        // Prune whatever exceeds 3 entries, however young.
        n.buckets()
            .set_bucket_props(
                "default",
                b"p",
                json!({"small_vclock": 3, "big_vclock": 3, "young_vclock": 0})
                    .as_object()
                    .unwrap(),
            )
            .unwrap();
    }
    let mut lens = Vec::new();
    for round in 0..12 {
        let n = open(dir.path());
        for b in ["b", "p"] {
            put(&n, b, "k", &format!("round {round}"));
            // A second write in the same run keeps the new epoch.
            put(&n, b, "k", &format!("round {round}, again"));
        }
        let o = get(&n, "p", "k").unwrap();
        assert_eq!(
            o.contents[0].value,
            format!("round {round}, again").into_bytes()
        );
        assert!(o.clock.len() <= 3, "pruned to small_vclock: {:?}", o.clock);
        lens.push(get(&n, "b", "k").unwrap().clock.len());
        drop(n);
        as_if_power_was_lost(dir.path());
    }
    // Default pruning keeps young entries: one entry per run that may
    // have lost writes, never more.
    assert_eq!(lens, (1..=12).collect::<Vec<_>>());
}

#[test]
fn a_lost_lease_file_means_new_ids_not_reused_counters() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let n = open(dir.path());
        put(&n, "b", "k", "v1");
        get(&n, "b", "k").unwrap().clock
    };
    std::fs::remove_file(dir.path().join("meta/leases")).unwrap();
    let n = open(dir.path());
    put(&n, "b", "k", "v2");
    let o = get(&n, "b", "k").unwrap();
    assert_eq!(o.contents.len(), 1);
    assert_eq!(o.contents[0].value, &b"v2"[..]);
    assert_eq!(o.clock.len(), 2, "a new actor: {:?}", o.clock);
    assert!(o.clock.descends(&first));
}

fn open_with(
    dir: &Path,
    change: impl FnOnce(&mut NodeConfig),
) -> Result<Arc<Node>, rill_node::OpenError> {
    let mut c = NodeConfig::new(dir);
    c.ring_size = 8;
    c.backend = BackendKind::Bitcask;
    c.reserve_bytes = 0;
    change(&mut c);
    Node::open(c)
}

/// A run with a write buffer writes `k` ("v1") and ends as a crash of
/// the process would.
fn crash_a_buffered_run_after_writing_k(dir: &Path) {
    let n = open_with(dir, |c| c.bitcask.write_buffer_bytes = 1 << 20).unwrap();
    put(&n, "b", "k", "v1");
    n.stop_as_if_killed();
}

/// Every (vnode id, key epoch) pair in a key's clock.
fn actors(n: &Node, bucket: &str, key: &str) -> Vec<Vec<u8>> {
    let o = get(n, bucket, key).unwrap();
    o.clock.entries().map(|(a, _, _)| a.to_vec()).collect()
}

#[test]
fn whether_clocks_are_trusted_follows_how_the_last_run_wrote() {
    let dir = tempfile::tempdir().unwrap();
    // A run with a write buffer, ended by a crash of the process: it may
    // have lost puts it acknowledged.
    crash_a_buffered_run_after_writing_k(dir.path());
    // This run has no write buffer, on the same boot: that says nothing
    // of what the last run may have lost.
    let n = open_with(dir.path(), |c| c.bitcask.write_buffer_bytes = 0).unwrap();
    put(&n, "b", "k", "v2");
    assert_eq!(
        actors(&n, "b", "k").len(),
        2,
        "the key takes a new epoch after a run that may have lost writes"
    );
    n.stop_as_if_killed();
    drop(n);
    // And a run without a buffer, killed on the same boot, lost nothing.
    let n = open_with(dir.path(), |_| {}).unwrap();
    put(&n, "b", "k", "v3");
    assert_eq!(actors(&n, "b", "k").len(), 2, "no epoch after a safe kill");
}

#[test]
fn a_start_that_fails_after_losing_its_leases_never_reissues_counters() {
    let dir = tempfile::tempdir().unwrap();
    let keys = ["a", "b", "c", "d"];
    let before: Vec<Vec<u8>> = {
        let n = open(dir.path());
        for k in keys {
            put(&n, "b", k, "old");
        }
        keys.iter().flat_map(|k| actors(&n, "b", k)).collect()
    };
    std::fs::remove_file(dir.path().join("meta/leases")).unwrap();
    // The start that makes new ids cannot write node.json (as a crash
    // there would leave it).
    let blocker = dir.path().join("meta/node.json.tmp");
    std::fs::create_dir(&blocker).unwrap();
    let err = open_with(dir.path(), |_| {})
        .err()
        .expect("node.json cannot be written");
    assert!(
        matches!(
            &err,
            rill_node::OpenError::Identity(rill_node::IdentityError::Meta(
                rill_node::MetaError::Write {
                    name: "node.json",
                    ..
                }
            ))
        ),
        "{err}"
    );
    assert!(err.to_string().contains("node.json"), "{err}");
    std::fs::remove_dir(&blocker).unwrap();
    let n = open(dir.path());
    for k in ["e", "f", "g", "h"] {
        put(&n, "b", k, "new");
        for a in actors(&n, "b", k) {
            assert!(
                !before.contains(&a),
                "{k}: actor {a:02x?} was issued before, to another write"
            );
        }
    }
}

#[test]
fn a_trusted_start_after_an_untrusted_one_remembers_which_epochs_may_have_lost_writes() {
    let dir = tempfile::tempdir().unwrap();
    // A run that may lose acknowledged writes, ended by a crash.
    crash_a_buffered_run_after_writing_k(dir.path());
    {
        // The next run does not write k, and stops cleanly.
        let n = open_with(dir.path(), |_| {}).unwrap();
        put(&n, "b", "other", "x");
    }
    // The run after it is trusted (a clean stop), but k's epoch is still
    // one the crashed run may have lost writes of: it takes a new one.
    let n = open_with(dir.path(), |_| {}).unwrap();
    put(&n, "b", "k", "v2");
    assert_eq!(actors(&n, "b", "k").len(), 2, "k takes a new epoch");
}
