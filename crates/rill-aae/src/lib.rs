//! Active anti-entropy after Riak 3's Tictac AAE (leveled's
//! `leveled_tictac`, kv_index_tictactree): every vnode keeps, per
//! preference list it is in (n of them for each n_val), a tree of hashes over its keys and their clocks, updated on every
//! write; two replicas compare trees root first, then the branches that
//! differ, then the keys and clocks of the segments that differ, and
//! repair what differs. Pure: no I/O, no clock (docs/cluster.md, "Active
//! anti-entropy"; docs/format.md, "Tictac tree").
//!
//! - [`tree`]: the tree (Riak's "large" size: 4,096 branches of 256
//!   segments), changed by XOR so the order of writes does not matter,
//!   compared level by level, and its persisted form.
//! - [`exchange`]: one exchange between two replicas, root to keys.
//! - [`trees`]: a vnode's trees, one per preference list, rebuilt
//!   while writes go on.
//! - [`schedule`]: which replicas a vnode exchanges with, per n_val.
//!
//! Invariants:
//! - a tree is the XOR over its keys of `hash(key, clock)`, so two
//!   replicas holding the same keys at the same clocks have equal trees
//!   whatever the order they were written in;
//! - a write changes exactly one segment, its branch and nothing else.

pub mod exchange;
pub mod schedule;
#[cfg(test)]
mod testing;
pub mod tree;
pub mod trees;

pub use exchange::{Answer, Ask, Exchange, Outcome, Stage, Step, WrongAnswer};
pub use schedule::{pairwise, FollowUps, IndexN, Pair, MAX_BOOST};
pub use tree::{
    clock_hash, segment_of, sorted_clock_hash, Contribution, DecodeError, TictacTree, BRANCHES,
    SEGMENTS, SEGMENTS_PER_BRANCH,
};
pub use trees::{Status, Trees};
