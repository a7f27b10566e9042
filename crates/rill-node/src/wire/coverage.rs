//! The bytes of coverage requests and replies (list buckets, list keys,
//! index pages, key summaries): docs/format.md, "Vnode messages".

use super::{put_long, put_short, Reader, WireError};
use crate::vnode::msg::KeysQuery;
use crate::vnode::summary::KeySummary;
use rill_backend::{IndexQuery, IndexRange, Term};

fn put_term(b: &mut Vec<u8>, t: &Term) {
    match t {
        Term::Int(i) => {
            b.push(1);
            b.extend_from_slice(&i.to_be_bytes());
        }
        Term::Bin(v) => {
            b.push(2);
            put_long(b, v);
        }
    }
}

fn put_opt(b: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(v) => {
            b.push(1);
            put_long(b, v);
        }
        None => b.push(0),
    }
}

pub(super) fn put_keys_query(b: &mut Vec<u8>, q: &KeysQuery) {
    put_short(b, &q.bucket_type);
    put_short(b, &q.bucket);
    put_long(b, &q.lo);
    put_opt(b, q.hi.as_deref());
    put_opt(b, q.after.as_deref());
    b.extend_from_slice(&q.limit.to_be_bytes());
    match &q.first_of {
        Some((size, parts)) => {
            b.push(1);
            b.extend_from_slice(&size.to_be_bytes());
            b.extend_from_slice(&(parts.len() as u32).to_be_bytes());
            for p in parts {
                b.extend_from_slice(&p.to_be_bytes());
            }
        }
        None => b.push(0),
    }
}

pub(super) fn put_summaries(b: &mut Vec<u8>, rows: &[KeySummary], next: Option<&[u8]>) {
    put_opt(b, next);
    b.extend_from_slice(&(rows.len() as u32).to_be_bytes());
    for r in rows {
        put_long(b, &r.key);
        b.extend_from_slice(&r.siblings.to_be_bytes());
        b.extend_from_slice(&r.bytes.to_be_bytes());
        b.extend_from_slice(&r.modified_s.to_be_bytes());
    }
}

pub(super) fn put_index_query(b: &mut Vec<u8>, q: &IndexQuery, page: u32) {
    put_short(b, &q.bucket_type);
    put_short(b, &q.bucket);
    put_short(b, &q.field);
    match &q.range {
        IndexRange::Eq(t) => {
            b.push(0);
            put_term(b, t);
        }
        IndexRange::Range(lo, hi) => {
            b.push(1);
            put_term(b, lo);
            put_term(b, hi);
        }
    }
    match &q.after {
        Some((t, k)) => {
            b.push(1);
            put_term(b, t);
            put_long(b, k);
        }
        None => b.push(0),
    }
    b.extend_from_slice(&page.to_be_bytes());
}

pub(super) fn put_entries(b: &mut Vec<u8>, entries: &[(Term, Vec<u8>)]) {
    b.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (t, k) in entries {
        put_term(b, t);
        put_long(b, k);
    }
}

impl Reader<'_> {
    fn flag(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            x => Err(WireError::Malformed(format!("flag {x}"))),
        }
    }

    fn term(&mut self) -> Result<Term, WireError> {
        match self.u8()? {
            1 => Ok(Term::Int(self.u64()? as i64)),
            2 => Ok(Term::Bin(self.long()?.to_vec())),
            x => Err(WireError::Malformed(format!("term kind {x}"))),
        }
    }

    pub(super) fn keys_query(&mut self) -> Result<KeysQuery, WireError> {
        let bucket_type = self.short()?;
        let bucket = self.short()?;
        let lo = self.long()?.to_vec();
        let hi = if self.flag()? {
            Some(self.long()?.to_vec())
        } else {
            None
        };
        let after = if self.flag()? {
            Some(self.long()?.to_vec())
        } else {
            None
        };
        let limit = self.u32()?;
        let first_of = if self.flag()? {
            let size = self.u32()?;
            let n = self.count(4)?;
            let parts = (0..n).map(|_| self.u32()).collect::<Result<Vec<_>, _>>()?;
            Some((size, parts))
        } else {
            None
        };
        Ok(KeysQuery {
            bucket_type,
            bucket,
            lo,
            hi,
            after,
            limit,
            first_of,
        })
    }

    pub(super) fn index_query(&mut self) -> Result<(IndexQuery, u32), WireError> {
        let bucket_type = self.short()?;
        let bucket = self.short()?;
        let field = self.short()?;
        let range = match self.u8()? {
            0 => IndexRange::Eq(self.term()?),
            1 => IndexRange::Range(self.term()?, self.term()?),
            x => return Err(WireError::Malformed(format!("index range kind {x}"))),
        };
        let after = if self.flag()? {
            Some((self.term()?, self.long()?.to_vec()))
        } else {
            None
        };
        let page = self.u32()?;
        Ok((
            IndexQuery {
                bucket_type,
                bucket,
                field,
                range,
                after,
            },
            page,
        ))
    }

    pub(super) fn entries(&mut self) -> Result<Vec<(Term, Vec<u8>)>, WireError> {
        let n = self.count(9)?;
        (0..n)
            .map(|_| Ok((self.term()?, self.long()?.to_vec())))
            .collect()
    }

    pub(super) fn summaries(&mut self) -> Result<(Vec<KeySummary>, Option<Vec<u8>>), WireError> {
        let next = if self.flag()? {
            Some(self.long()?.to_vec())
        } else {
            None
        };
        let n = self.count(24)?;
        let rows = (0..n)
            .map(|_| {
                Ok(KeySummary {
                    key: self.long()?.to_vec(),
                    siblings: self.u32()?,
                    bytes: self.u64()?,
                    modified_s: self.u64()?,
                })
            })
            .collect::<Result<_, WireError>>()?;
        Ok((rows, next))
    }

    pub(super) fn bool_flag(&mut self) -> Result<bool, WireError> {
        self.flag()
    }
}
