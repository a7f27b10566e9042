//! A data-type operation as bytes, inside a coordinating write sent to
//! another node (docs/format.md, "Vnode messages").

use super::{put_long, Reader, WireError};
use rill_crdt::{EmbeddedOp, Field, FieldKind, MapOp, Op};

/// Maps nest at most this deep in a message (Riak's own limit is lower).
const MAX_DEPTH: usize = 32;

pub(super) fn put_list(b: &mut Vec<u8>, items: &[Vec<u8>]) {
    b.extend_from_slice(&(items.len() as u32).to_be_bytes());
    for i in items {
        put_long(b, i);
    }
}

fn kind_code(k: FieldKind) -> u8 {
    match k {
        FieldKind::Counter => 0,
        FieldKind::Flag => 1,
        FieldKind::Map => 2,
        FieldKind::Register => 3,
        FieldKind::Set => 4,
    }
}

fn put_field(b: &mut Vec<u8>, f: &Field) {
    b.push(kind_code(f.kind));
    put_long(b, &f.name);
}

fn put_map(b: &mut Vec<u8>, m: &MapOp) {
    b.extend_from_slice(&(m.removes.len() as u32).to_be_bytes());
    for f in &m.removes {
        put_field(b, f);
    }
    b.extend_from_slice(&(m.updates.len() as u32).to_be_bytes());
    for (f, op) in &m.updates {
        put_field(b, f);
        match op {
            EmbeddedOp::Counter(n) => {
                b.push(0);
                b.extend_from_slice(&n.to_be_bytes());
            }
            EmbeddedOp::Set { adds, removes } => {
                b.push(1);
                put_list(b, adds);
                put_list(b, removes);
            }
            EmbeddedOp::Register(v) => {
                b.push(2);
                put_long(b, v);
            }
            EmbeddedOp::Flag(on) => {
                b.push(3);
                b.push(u8::from(*on));
            }
            EmbeddedOp::Map(m) => {
                b.push(4);
                put_map(b, m);
            }
        }
    }
}

pub(super) fn put_op(b: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Counter(n) => {
            b.push(0);
            b.extend_from_slice(&n.to_be_bytes());
        }
        Op::Set { adds, removes } => {
            b.push(1);
            put_list(b, adds);
            put_list(b, removes);
        }
        Op::Map(m) => {
            b.push(2);
            put_map(b, m);
        }
        Op::Hll { adds } => {
            b.push(3);
            put_list(b, adds);
        }
        Op::GSet { adds } => {
            b.push(4);
            put_list(b, adds);
        }
    }
}

impl Reader<'_> {
    /// A count of items each at least `min_bytes` long, checked against
    /// what is left (so a forged count cannot make a huge allocation).
    pub(super) fn count(&mut self, min_bytes: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_bytes) > self.0.len() {
            return Err(WireError::Short);
        }
        Ok(n)
    }

    pub(super) fn list(&mut self) -> Result<Vec<Vec<u8>>, WireError> {
        let n = self.count(4)?;
        (0..n).map(|_| Ok(self.long()?.to_vec())).collect()
    }

    fn field(&mut self) -> Result<Field, WireError> {
        let kind = match self.u8()? {
            0 => FieldKind::Counter,
            1 => FieldKind::Flag,
            2 => FieldKind::Map,
            3 => FieldKind::Register,
            4 => FieldKind::Set,
            x => return Err(WireError::Malformed(format!("map field kind {x}"))),
        };
        Ok(Field {
            kind,
            name: self.long()?.to_vec(),
        })
    }

    fn map_op(&mut self, depth: usize) -> Result<MapOp, WireError> {
        if depth > MAX_DEPTH {
            return Err(WireError::Malformed("maps nested too deep".into()));
        }
        let removes = (0..self.count(5)?)
            .map(|_| self.field())
            .collect::<Result<Vec<_>, _>>()?;
        let mut updates = Vec::new();
        for _ in 0..self.count(6)? {
            let f = self.field()?;
            let op = match self.u8()? {
                0 => EmbeddedOp::Counter(self.u64()? as i64),
                1 => EmbeddedOp::Set {
                    adds: self.list()?,
                    removes: self.list()?,
                },
                2 => EmbeddedOp::Register(self.long()?.to_vec()),
                3 => match self.u8()? {
                    x @ (0 | 1) => EmbeddedOp::Flag(x == 1),
                    x => return Err(WireError::Malformed(format!("flag value {x}"))),
                },
                4 => EmbeddedOp::Map(self.map_op(depth + 1)?),
                x => return Err(WireError::Malformed(format!("map field operation {x}"))),
            };
            updates.push((f, op));
        }
        Ok(MapOp { removes, updates })
    }

    pub(super) fn op(&mut self) -> Result<Op, WireError> {
        Ok(match self.u8()? {
            0 => Op::Counter(self.u64()? as i64),
            1 => Op::Set {
                adds: self.list()?,
                removes: self.list()?,
            },
            2 => Op::Map(self.map_op(1)?),
            3 => Op::Hll { adds: self.list()? },
            4 => Op::GSet { adds: self.list()? },
            x => return Err(WireError::Malformed(format!("data type operation {x}"))),
        })
    }
}
