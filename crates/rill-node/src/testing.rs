//! Helpers for the crate's unit tests.

use crate::config::{BackendKind, NodeConfig};
use crate::Node;
use std::sync::Arc;

/// A node of 8 partitions on the memory backend, its data under `dir`.
pub(crate) fn memory_node(dir: &std::path::Path) -> Arc<Node> {
    node(dir, BackendKind::Memory)
}

/// A node of 8 partitions on `backend`, its data under `dir`.
pub(crate) fn node(dir: &std::path::Path, backend: BackendKind) -> Arc<Node> {
    let mut c = NodeConfig::new(dir);
    c.ring_size = 8;
    c.backend = backend;
    Node::open(c).unwrap()
}

/// Puts `v` under b/k (default type and quorums).
pub(crate) fn put_v(n: &Node) {
    put_kv(n, b"k", b"v");
}

/// Puts `value` under b/`key` (default type and quorums).
pub(crate) fn put_kv(n: &Node, key: &[u8], value: &[u8]) {
    n.put(crate::PutRequest {
        bucket: b"b".to_vec(),
        key: Some(key.to_vec()),
        content: crate::Content::new(value.to_vec(), crate::Metadata::default()),
        ..crate::PutRequest::default()
    })
    .unwrap();
}
