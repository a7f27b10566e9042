//! The map (riak_dt_map): named, typed fields, each an embedded data
//! type, present while some unremoved update's dot says so. A remove
//! takes away the dots it observed; removing then updating a field in one
//! operation starts the field afresh.

use crate::clock::{Clock, Dot};
use crate::counter::PnCounter;
use crate::orset::{show, OrSet};
use crate::{CrdtError, MapValue};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FieldKind {
    Counter,
    Flag,
    Map,
    Register,
    Set,
}

impl FieldKind {
    /// Riak's module for the kind, as its error texts name it.
    fn module(self) -> &'static str {
        match self {
            FieldKind::Counter => "riak_dt_emcntr",
            FieldKind::Flag => "riak_dt_od_flag",
            FieldKind::Map => "riak_dt_map",
            FieldKind::Register => "riak_dt_lwwreg",
            FieldKind::Set => "riak_dt_orswot",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Field {
    pub name: Vec<u8>,
    pub kind: FieldKind,
}

/// A last-writer-wins register.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Register {
    pub timestamp_us: u64,
    pub value: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Embedded {
    Counter(PnCounter),
    Set(OrSet),
    Register(Register),
    /// Enabled while it holds a dot no disable has observed.
    Flag(BTreeSet<Dot>),
    Map(OrMap),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmbeddedOp {
    Counter(i64),
    Set {
        adds: Vec<Vec<u8>>,
        removes: Vec<Vec<u8>>,
    },
    Register(Vec<u8>),
    Flag(bool),
    Map(MapOp),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapOp {
    pub removes: Vec<Field>,
    pub updates: Vec<(Field, EmbeddedOp)>,
}

impl MapOp {
    /// How deeply the operation nests maps (1 for a flat map).
    pub fn depth(&self) -> usize {
        1 + self
            .updates
            .iter()
            .map(|(_, op)| match op {
                EmbeddedOp::Map(m) => m.depth(),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }
}

/// Each field keeps one embedded value per unremoved update (dot), as
/// riak_dt_map does: a remove drops exactly the updates it observed, and
/// the field reads as the merge of what is left.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrMap {
    pub(crate) clock: Clock,
    pub(crate) entries: BTreeMap<Field, BTreeMap<Dot, Embedded>>,
}

impl Embedded {
    fn new(kind: FieldKind) -> Embedded {
        match kind {
            FieldKind::Counter => Embedded::Counter(PnCounter::default()),
            FieldKind::Set => Embedded::Set(OrSet::default()),
            FieldKind::Register => Embedded::Register(Register::default()),
            FieldKind::Flag => Embedded::Flag(BTreeSet::new()),
            FieldKind::Map => Embedded::Map(OrMap::default()),
        }
    }

    /// Applies a field's operation under the map's event `dot` (embedded
    /// sets, flags and maps record their adds with it).
    fn apply(
        &mut self,
        op: &EmbeddedOp,
        dot: &Dot,
        ctx: Option<&Clock>,
        now_us: u64,
    ) -> Result<(), CrdtError> {
        match (self, op) {
            (Embedded::Counter(c), EmbeddedOp::Counter(n)) => c.increment(&dot.0, *n),
            (Embedded::Set(s), EmbeddedOp::Set { adds, removes }) => {
                s.update_with_dot(adds, removes, dot, ctx)?
            }
            (Embedded::Register(r), EmbeddedOp::Register(v)) => {
                let ts = now_us.max(r.timestamp_us + 1);
                *r = Register {
                    timestamp_us: ts,
                    value: v.clone(),
                };
            }
            (Embedded::Flag(dots), EmbeddedOp::Flag(true)) => {
                dots.clear();
                dots.insert(dot.clone());
            }
            (Embedded::Flag(dots), EmbeddedOp::Flag(false)) => match ctx {
                None => dots.clear(),
                Some(c) => dots.retain(|d| !c.covers(d)),
            },
            (Embedded::Map(m), EmbeddedOp::Map(op)) => m.apply_with_dot(op, dot, ctx, now_us)?,
            // The field's kind fixes the op's kind (the codec pairs them).
            _ => {}
        }
        Ok(())
    }

    fn merge(&mut self, other: &Embedded, self_clock: &Clock, other_clock: &Clock) {
        match (self, other) {
            (Embedded::Counter(a), Embedded::Counter(b)) => a.merge(b),
            (Embedded::Set(a), Embedded::Set(b)) => a.merge(b),
            (Embedded::Register(a), Embedded::Register(b))
                if (b.timestamp_us, &b.value) > (a.timestamp_us, &a.value) =>
            {
                *a = b.clone();
            }
            (Embedded::Flag(a), Embedded::Flag(b)) => {
                let kept: BTreeSet<Dot> = a
                    .intersection(b)
                    .cloned()
                    .chain(a.difference(b).filter(|d| !other_clock.covers(d)).cloned())
                    .chain(b.difference(a).filter(|d| !self_clock.covers(d)).cloned())
                    .collect();
                *a = kept;
            }
            (Embedded::Map(a), Embedded::Map(b)) => a.merge(b),
            _ => {}
        }
    }

    fn value(&self) -> MapValue {
        match self {
            Embedded::Counter(c) => MapValue::Counter(c.value()),
            Embedded::Set(s) => MapValue::Set(s.value()),
            Embedded::Register(r) => MapValue::Register(r.value.clone()),
            Embedded::Flag(d) => MapValue::Flag(!d.is_empty()),
            Embedded::Map(m) => MapValue::Map(m.value()),
        }
    }
}

impl OrMap {
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// A field's value: its concurrent versions joined (an enable seen by
    /// no disable wins, hence the empty clocks).
    fn field_state(f: &Field, versions: &BTreeMap<Dot, Embedded>) -> Embedded {
        let none = Clock::default();
        let mut it = versions.values();
        let mut acc = it.next().cloned().unwrap_or_else(|| Embedded::new(f.kind));
        for e in it {
            acc.merge(e, &none, &none);
        }
        acc
    }

    pub fn value(&self) -> Vec<(Field, MapValue)> {
        self.entries
            .iter()
            .map(|(f, v)| (f.clone(), OrMap::field_state(f, v).value()))
            .collect()
    }

    /// Removes first, then updates (Riak's order), all under one new
    /// event of `actor`; all or nothing.
    pub fn update(
        &mut self,
        op: &MapOp,
        actor: &[u8],
        ctx: Option<&Clock>,
        now_us: u64,
    ) -> Result<(), CrdtError> {
        let dot = self.clock.next_dot(actor);
        self.apply_with_dot(op, &dot, ctx, now_us)
    }

    fn apply_with_dot(
        &mut self,
        op: &MapOp,
        dot: &Dot,
        ctx: Option<&Clock>,
        now_us: u64,
    ) -> Result<(), CrdtError> {
        self.clock.add_dot(dot);
        for f in &op.removes {
            match ctx {
                None => {
                    if self.entries.remove(f).is_none() {
                        return Err(CrdtError::NotPresent(format!(
                            "{{{},{}}}",
                            show(&f.name),
                            f.kind.module()
                        )));
                    }
                }
                Some(c) => {
                    if let Some(versions) = self.entries.get_mut(f) {
                        versions.retain(|d, _| !c.covers(d));
                        if versions.is_empty() {
                            self.entries.remove(f);
                        }
                    }
                }
            }
        }
        for (f, fop) in &op.updates {
            let mut state = match self.entries.get(f) {
                Some(v) => OrMap::field_state(f, v),
                None => Embedded::new(f.kind),
            };
            state.apply(fop, dot, ctx, now_us)?;
            self.entries
                .insert(f.clone(), BTreeMap::from([(dot.clone(), state)]));
        }
        Ok(())
    }

    pub fn merge(&mut self, other: &OrMap) {
        let fields: BTreeSet<Field> = self
            .entries
            .keys()
            .chain(other.entries.keys())
            .cloned()
            .collect();
        let empty = BTreeMap::new();
        let mut out = BTreeMap::new();
        for f in fields {
            let a = self.entries.get(&f).unwrap_or(&empty);
            let b = other.entries.get(&f).unwrap_or(&empty);
            let mut versions = BTreeMap::new();
            for (d, e) in a {
                match b.get(d) {
                    Some(eb) => {
                        let mut m = e.clone();
                        m.merge(eb, &self.clock, &other.clock);
                        versions.insert(d.clone(), m);
                    }
                    None if !other.clock.covers(d) => {
                        versions.insert(d.clone(), e.clone());
                    }
                    None => {}
                }
            }
            for (d, e) in b {
                if !a.contains_key(d) && !self.clock.covers(d) {
                    versions.insert(d.clone(), e.clone());
                }
            }
            if !versions.is_empty() {
                out.insert(f, versions);
            }
        }
        self.entries = out;
        self.clock.merge(&other.clock);
    }
}
