//! Riak's data types (riak_dt): a counter (PN-counter), a set (ORSWOT:
//! observed-remove, add wins), a map of named fields (counters, sets,
//! registers, flags, maps), a HyperLogLog and a grow-only set.
//!
//! Each update is applied by one actor (the coordinating vnode) to its
//! state; replicas converge by merging states. Invariants, tested with
//! proptest: merge is commutative, associative and idempotent; a remove
//! with a context removes only what that context saw, so a concurrent
//! add wins; a remove without context of something absent is refused
//! (Riak's precondition error) and changes nothing.

mod clock;
mod codec;
mod counter;
mod hll;
mod map;
mod orset;

pub use clock::{Actor, Clock, Dot};
pub use codec::DecodeError;
pub use counter::PnCounter;
pub use hll::Hll;
pub use map::{Embedded, EmbeddedOp, Field, FieldKind, MapOp, OrMap, Register};
pub use orset::OrSet;

use std::collections::BTreeSet;

/// Why an operation was refused; the texts are Riak's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CrdtError {
    /// Removing, without a context, what is not there:
    /// `{precondition,{not_present,<<"x">>}}`.
    #[error("{{precondition,{{not_present,{0}}}}}")]
    NotPresent(String),
    #[error("Operation type is `{op}` but  bucket type is `{bucket}`.")]
    WrongType {
        op: &'static str,
        bucket: &'static str,
    },
    #[error("maps may nest at most {max} deep; this operation nests {depth}")]
    TooDeep { depth: usize, max: usize },
}

/// An operation on a top-level data type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Counter(i64),
    Set {
        adds: Vec<Vec<u8>>,
        removes: Vec<Vec<u8>>,
    },
    Map(MapOp),
    Hll {
        adds: Vec<Vec<u8>>,
    },
    GSet {
        adds: Vec<Vec<u8>>,
    },
}

impl Op {
    pub fn type_name(&self) -> &'static str {
        match self {
            Op::Counter(_) => "counter",
            Op::Set { .. } => "set",
            Op::Map(_) => "map",
            Op::Hll { .. } => "hll",
            Op::GSet { .. } => "gset",
        }
    }
}

/// A top-level data type's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Crdt {
    Counter(PnCounter),
    Set(OrSet),
    Map(OrMap),
    Hll(Hll),
    GSet(BTreeSet<Vec<u8>>),
}

/// What a client reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Counter(i64),
    Set(Vec<Vec<u8>>),
    Map(Vec<(Field, MapValue)>),
    Hll(u64),
    GSet(Vec<Vec<u8>>),
}

/// A map field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum MapValue {
    Counter(i64),
    Set(Vec<Vec<u8>>),
    Register(Vec<u8>),
    Flag(bool),
    Map(Vec<(Field, MapValue)>),
}

impl Crdt {
    /// An empty value of a bucket's datatype (`counter`, `set`, `map`,
    /// `hll`, `gset`).
    pub fn new(datatype: &str, hll_precision: u8) -> Option<Crdt> {
        Some(match datatype {
            "counter" => Crdt::Counter(PnCounter::default()),
            "set" => Crdt::Set(OrSet::default()),
            "map" => Crdt::Map(OrMap::default()),
            "hll" => Crdt::Hll(Hll::new(hll_precision)),
            "gset" => Crdt::GSet(BTreeSet::new()),
            _ => return None,
        })
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Crdt::Counter(_) => "counter",
            Crdt::Set(_) => "set",
            Crdt::Map(_) => "map",
            Crdt::Hll(_) => "hll",
            Crdt::GSet(_) => "gset",
        }
    }

    /// Applies `op` as `actor`; `context` is the client's context (only
    /// sets and maps use it). All or nothing.
    pub fn apply(
        &mut self,
        op: &Op,
        actor: &[u8],
        context: Option<&Clock>,
        now_us: u64,
    ) -> Result<(), CrdtError> {
        if let Op::Map(m) = op {
            let depth = m.depth();
            if depth > codec::MAX_DEPTH {
                return Err(CrdtError::TooDeep {
                    depth,
                    max: codec::MAX_DEPTH,
                });
            }
        }
        let mut next = self.clone();
        match (&mut next, op) {
            (Crdt::Counter(c), Op::Counter(n)) => c.increment(actor, *n),
            (Crdt::Set(s), Op::Set { adds, removes }) => s.update(adds, removes, actor, context)?,
            (Crdt::Map(m), Op::Map(op)) => m.update(op, actor, context, now_us)?,
            (Crdt::Hll(h), Op::Hll { adds }) => adds.iter().for_each(|a| h.insert(a)),
            (Crdt::GSet(g), Op::GSet { adds }) => g.extend(adds.iter().cloned()),
            (s, op) => {
                return Err(CrdtError::WrongType {
                    op: op.type_name(),
                    bucket: s.type_name(),
                })
            }
        }
        *self = next;
        Ok(())
    }

    /// Joins another replica's state (of the same type; a different type
    /// leaves this one unchanged).
    pub fn merge(&mut self, other: &Crdt) {
        match (self, other) {
            (Crdt::Counter(a), Crdt::Counter(b)) => a.merge(b),
            (Crdt::Set(a), Crdt::Set(b)) => a.merge(b),
            (Crdt::Map(a), Crdt::Map(b)) => a.merge(b),
            (Crdt::Hll(a), Crdt::Hll(b)) => a.merge(b),
            (Crdt::GSet(a), Crdt::GSet(b)) => a.extend(b.iter().cloned()),
            _ => {}
        }
    }

    pub fn value(&self) -> Value {
        match self {
            Crdt::Counter(c) => Value::Counter(c.value()),
            Crdt::Set(s) => Value::Set(s.value()),
            Crdt::Map(m) => Value::Map(m.value()),
            Crdt::Hll(h) => Value::Hll(h.estimate()),
            Crdt::GSet(g) => Value::GSet(g.iter().cloned().collect()),
        }
    }

    /// The causal context handed to clients (sets and maps only).
    pub fn context(&self) -> Option<&Clock> {
        match self {
            Crdt::Set(s) => Some(s.clock()),
            Crdt::Map(m) => Some(m.clock()),
            _ => None,
        }
    }

    /// The MIME type Riak stores data types under.
    pub fn content_type(&self) -> &'static str {
        match self {
            Crdt::Counter(_) => "application/riak_counter",
            Crdt::Set(_) => "application/riak_set",
            Crdt::Map(_) => "application/riak_map",
            Crdt::Hll(_) => "application/riak_hll",
            Crdt::GSet(_) => "application/riak_gset",
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Crdt, DecodeError> {
        codec::decode(bytes)
    }
}
