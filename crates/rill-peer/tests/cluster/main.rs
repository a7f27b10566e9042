//! Nodes in one process on loopback, each with its runtime: joins, the
//! plan and its commit at the claimant, gossip converging, and keys
//! written through one node read through another.
//!
//! One scenario family per file; `common` starts members and forms
//! clusters.

mod advertise;
mod common;
mod coverage;
mod handoff;
mod join;
mod large_values;
