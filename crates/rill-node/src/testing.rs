//! Helpers for the crate's unit tests.

use crate::config::{BackendKind, NodeConfig};
use crate::Node;
use std::sync::Arc;

/// A node of 8 partitions on the memory backend, its data under `dir`.
pub(crate) fn memory_node(dir: &std::path::Path) -> Arc<Node> {
    let mut c = NodeConfig::new(dir);
    c.ring_size = 8;
    c.backend = BackendKind::Memory;
    Node::open(c).unwrap()
}
