//! Data types through the node: Riak's refusals, context-aware removes,
//! survival across a restart.

use rill_node::crdt::{Op, Value};
use rill_node::{
    BackendKind, DeleteMode, DtFetchAnswer, DtFetchRequest, DtUpdateRequest, Node, NodeConfig,
};
use serde_json::json;

fn node(dir: &std::path::Path) -> std::sync::Arc<Node> {
    let mut c = NodeConfig::new(dir);
    c.ring_size = 8;
    c.backend = BackendKind::Bitcask;
    c.delete_mode = DeleteMode::Immediate;
    Node::open(c).unwrap()
}

fn update(
    n: &Node,
    t: &str,
    key: &str,
    op: Op,
    context: Option<Vec<u8>>,
) -> Result<rill_node::DtUpdateAnswer, String> {
    n.dt_update(DtUpdateRequest {
        bucket_type: t.into(),
        bucket: b"b".to_vec(),
        key: Some(key.into()),
        context,
        op,
        w: None,
        dw: None,
        pw: None,
        node_confirms: None,
        n_val: None,
    })
    .map_err(|e| e.to_string())
}

fn fetch(n: &Node, t: &str, key: &str) -> DtFetchAnswer {
    n.dt_fetch(&DtFetchRequest {
        bucket_type: t.into(),
        bucket: b"b".to_vec(),
        key: key.into(),
        ..Default::default()
    })
    .unwrap()
}

fn set_op(adds: &[&str], removes: &[&str]) -> Op {
    Op::Set {
        adds: adds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        removes: removes.iter().map(|s| s.as_bytes().to_vec()).collect(),
    }
}

#[test]
fn refusals_use_riaks_words() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    n.buckets()
        .create_type("sets", json!({"datatype": "set"}).as_object().unwrap())
        .unwrap();
    n.buckets().activate_type("sets").unwrap();
    n.buckets()
        .create_type("plain", json!({}).as_object().unwrap())
        .unwrap();
    n.buckets().activate_type("plain").unwrap();
    n.buckets()
        .create_type("nomult", json!({"allow_mult": false}).as_object().unwrap())
        .unwrap();
    n.buckets().activate_type("nomult").unwrap();
    assert_eq!(
        update(&n, "sets", "k", Op::Counter(1), None).unwrap_err(),
        "Operation type is `counter` but  bucket type is `set`."
    );
    assert_eq!(
        update(&n, "plain", "k", Op::Counter(1), None).unwrap_err(),
        "Bucket datatype `undefined` is not a supported type"
    );
    assert_eq!(
        update(&n, "nomult", "k", Op::Counter(1), None).unwrap_err(),
        "\"Bucket must be allow_mult=true\""
    );
    assert_eq!(
        update(&n, "nope", "k", Op::Counter(1), None).unwrap_err(),
        "Error no bucket type `<<\"nope\">>`"
    );
    assert_eq!(
        update(&n, "sets", "k", set_op(&[], &["x"]), None).unwrap_err(),
        "{precondition,{not_present,<<\"x\">>}}"
    );
    assert_eq!(
        update(&n, "", "k", Op::Counter(1), None).unwrap_err(),
        "\"Counters require bucket property 'allow_mult=true'\""
    );
    assert_eq!(
        fetch(&n, "sets", "k"),
        DtFetchAnswer::NotFound {
            datatype: "set".into()
        }
    );
}

#[test]
fn sets_remove_what_the_context_saw_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let n = node(dir.path());
        n.buckets()
            .create_type("sets", json!({"datatype": "set"}).as_object().unwrap())
            .unwrap();
        n.buckets().activate_type("sets").unwrap();
        let a = update(&n, "sets", "k", set_op(&["a", "b"], &[]), None).unwrap();
        let ctx = a.value.context().unwrap().encode();
        update(&n, "sets", "k", set_op(&["c"], &[]), None).unwrap();
        // Removing c with a context that never saw it leaves c.
        update(&n, "sets", "k", set_op(&[], &["a", "c"]), Some(ctx)).unwrap();
    }
    let n = node(dir.path());
    match fetch(&n, "sets", "k") {
        DtFetchAnswer::Found { value } => {
            assert_eq!(
                value.value(),
                Value::Set(vec![b"b".to_vec(), b"c".to_vec()])
            )
        }
        other => panic!("{other:?}"),
    }
}
