//! The stored form of data types (docs/format.md, "Data types"): a magic
//! byte, a format version, a type tag, then the state. Decoding bounds
//! every count by the bytes left and nesting by [`MAX_DEPTH`].

use crate::clock::{Clock, Dot};
use crate::counter::PnCounter;
use crate::hll::Hll;
use crate::map::{Embedded, Field, FieldKind, OrMap, Register};
use crate::orset::OrSet;
use crate::Crdt;
use std::collections::{BTreeMap, BTreeSet};

const MAGIC: u8 = 0xD7;
const VERSION: u8 = 1;
/// Maps nest at most this deep.
pub const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("data type: expected magic byte {MAGIC:#04x}, found {0:#04x}")]
    BadMagic(u8),
    #[error("data type: format version {0} is not known (this build reads {VERSION})")]
    UnknownVersion(u8),
    #[error("data type: ends inside {0}")]
    Truncated(&'static str),
    #[error("data type: unknown {what} tag {tag}")]
    UnknownTag { what: &'static str, tag: u8 },
    #[error("data type: {0} items cannot fit in what is left")]
    BadCount(u64),
    #[error("data type: maps nested deeper than {MAX_DEPTH}")]
    TooDeep,
    #[error("data type: HLL precision {0} outside 4..=16")]
    BadPrecision(u8),
    #[error("data type: {0} bytes left over")]
    Trailing(usize),
}

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: usize) {
        self.0.extend_from_slice(&(v as u32).to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len());
        self.0.extend_from_slice(b);
    }
    fn actor(&mut self, a: &[u8]) {
        let a = &a[..a.len().min(255)];
        self.u8(a.len() as u8);
        self.0.extend_from_slice(a);
    }
    fn clock(&mut self, c: &Clock) {
        self.u32(c.0.len());
        for (a, n) in &c.0 {
            self.actor(a);
            self.u64(*n);
        }
    }
    fn dots(&mut self, d: &BTreeSet<Dot>) {
        self.u32(d.len());
        for (a, n) in d {
            self.actor(a);
            self.u64(*n);
        }
    }
    fn counter(&mut self, c: &PnCounter) {
        self.u32(c.entries.len());
        for (a, (p, n)) in &c.entries {
            self.actor(a);
            self.u64(*p);
            self.u64(*n);
        }
    }
    fn orset(&mut self, s: &OrSet) {
        self.clock(&s.clock);
        self.u32(s.entries.len());
        for (e, d) in &s.entries {
            self.bytes(e);
            self.dots(d);
        }
        self.u32(s.deferred.len());
        for (c, elems) in &s.deferred {
            self.clock(c);
            self.u32(elems.len());
            for e in elems {
                self.bytes(e);
            }
        }
    }
    fn map(&mut self, m: &OrMap) {
        self.clock(&m.clock);
        self.u32(m.entries.len());
        for (f, versions) in &m.entries {
            self.bytes(&f.name);
            self.u8(kind_tag(f.kind));
            self.u32(versions.len());
            for ((actor, n), e) in versions {
                self.actor(actor);
                self.u64(*n);
                match e {
                    Embedded::Counter(c) => self.counter(c),
                    Embedded::Set(s) => self.orset(s),
                    Embedded::Register(r) => {
                        self.u64(r.timestamp_us);
                        self.bytes(&r.value);
                    }
                    Embedded::Flag(d) => self.dots(d),
                    Embedded::Map(m) => self.map(m),
                }
            }
        }
    }
}

fn kind_tag(k: FieldKind) -> u8 {
    match k {
        FieldKind::Counter => 1,
        FieldKind::Set => 2,
        FieldKind::Register => 3,
        FieldKind::Flag => 4,
        FieldKind::Map => 5,
    }
}

pub fn encode(c: &Crdt) -> Vec<u8> {
    let mut w = W(vec![MAGIC, VERSION]);
    match c {
        Crdt::Counter(x) => {
            w.u8(1);
            w.counter(x);
        }
        Crdt::Set(x) => {
            w.u8(2);
            w.orset(x);
        }
        Crdt::Map(x) => {
            w.u8(3);
            w.map(x);
        }
        Crdt::Hll(h) => {
            w.u8(4);
            w.u8(h.precision);
            w.0.extend_from_slice(&h.registers);
        }
        Crdt::GSet(g) => {
            w.u8(5);
            w.u32(g.len());
            for e in g {
                w.bytes(e);
            }
        }
    }
    w.0
}

struct R<'a>(&'a [u8]);

impl<'a> R<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated(what));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }
    fn count(&mut self, min_item: usize, what: &'static str) -> Result<usize, DecodeError> {
        let n = u32::from_be_bytes(self.take(4, what)?.try_into().expect("4")) as usize;
        if n.saturating_mul(min_item) > self.0.len() {
            return Err(DecodeError::BadCount(n as u64));
        }
        Ok(n)
    }
    fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>, DecodeError> {
        let n = self.count(1, what)?;
        Ok(self.take(n, what)?.to_vec())
    }
    fn actor(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u8("actor")? as usize;
        Ok(self.take(n, "actor")?.to_vec())
    }
    fn clock(&mut self) -> Result<Clock, DecodeError> {
        let n = self.count(9, "clock")?;
        let mut c = BTreeMap::new();
        for _ in 0..n {
            let a = self.actor()?;
            c.insert(a, self.u64("clock")?);
        }
        Ok(Clock(c))
    }
    fn dots(&mut self) -> Result<BTreeSet<Dot>, DecodeError> {
        let n = self.count(9, "dots")?;
        let mut d = BTreeSet::new();
        for _ in 0..n {
            let a = self.actor()?;
            d.insert((a, self.u64("dot")?));
        }
        Ok(d)
    }
    fn counter(&mut self) -> Result<PnCounter, DecodeError> {
        let n = self.count(17, "counter")?;
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let a = self.actor()?;
            let p = self.u64("counter")?;
            entries.insert(a, (p, self.u64("counter")?));
        }
        Ok(PnCounter { entries })
    }
    fn orset(&mut self) -> Result<OrSet, DecodeError> {
        let clock = self.clock()?;
        let n = self.count(8, "set entries")?;
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let e = self.bytes("set element")?;
            entries.insert(e, self.dots()?);
        }
        let n = self.count(8, "deferred removes")?;
        let mut deferred = BTreeMap::new();
        for _ in 0..n {
            let c = self.clock()?;
            let m = self.count(4, "deferred elements")?;
            let mut elems = BTreeSet::new();
            for _ in 0..m {
                elems.insert(self.bytes("deferred element")?);
            }
            deferred.insert(c, elems);
        }
        Ok(OrSet {
            clock,
            entries,
            deferred,
        })
    }
    fn map(&mut self, depth: usize) -> Result<OrMap, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        let clock = self.clock()?;
        let n = self.count(9, "map entries")?;
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let name = self.bytes("field name")?;
            let tag = self.u8("field kind")?;
            let kind = match tag {
                1 => FieldKind::Counter,
                2 => FieldKind::Set,
                3 => FieldKind::Register,
                4 => FieldKind::Flag,
                5 => FieldKind::Map,
                t => {
                    return Err(DecodeError::UnknownTag {
                        what: "field kind",
                        tag: t,
                    })
                }
            };
            let nv = self.count(9, "field versions")?;
            let mut versions = BTreeMap::new();
            for _ in 0..nv {
                let actor = self.actor()?;
                let dot = (actor, self.u64("dot")?);
                let e = match kind {
                    FieldKind::Counter => Embedded::Counter(self.counter()?),
                    FieldKind::Set => Embedded::Set(self.orset()?),
                    FieldKind::Register => Embedded::Register(Register {
                        timestamp_us: self.u64("register")?,
                        value: self.bytes("register")?,
                    }),
                    FieldKind::Flag => Embedded::Flag(self.dots()?),
                    FieldKind::Map => Embedded::Map(self.map(depth + 1)?),
                };
                versions.insert(dot, e);
            }
            entries.insert(Field { name, kind }, versions);
        }
        Ok(OrMap { clock, entries })
    }
}

pub fn decode(bytes: &[u8]) -> Result<Crdt, DecodeError> {
    let mut r = R(bytes);
    let m = r.u8("magic")?;
    if m != MAGIC {
        return Err(DecodeError::BadMagic(m));
    }
    let v = r.u8("version")?;
    if v != VERSION {
        return Err(DecodeError::UnknownVersion(v));
    }
    let c = match r.u8("type")? {
        1 => Crdt::Counter(r.counter()?),
        2 => Crdt::Set(r.orset()?),
        3 => Crdt::Map(r.map(0)?),
        4 => {
            let p = r.u8("hll precision")?;
            if !(4..=16).contains(&p) {
                return Err(DecodeError::BadPrecision(p));
            }
            Crdt::Hll(Hll {
                precision: p,
                registers: r.take(1 << p, "hll registers")?.to_vec(),
            })
        }
        5 => {
            let n = r.count(4, "gset")?;
            let mut g = BTreeSet::new();
            for _ in 0..n {
                g.insert(r.bytes("gset element")?);
            }
            Crdt::GSet(g)
        }
        t => {
            return Err(DecodeError::UnknownTag {
                what: "type",
                tag: t,
            })
        }
    };
    if !r.0.is_empty() {
        return Err(DecodeError::Trailing(r.0.len()));
    }
    Ok(c)
}
