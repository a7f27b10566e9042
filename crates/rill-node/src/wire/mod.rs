//! Vnode requests and replies as bytes, for when a coordinator's replica
//! lives on another node (docs/format.md, "Vnode messages"). Big-endian;
//! objects and clocks in their stored formats. Every decoder refuses
//! what it cannot read whole, and is fuzzed.

mod aae;
mod coverage;
mod op;

use crate::error::KvError;
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnode::step::CoordinateStep;
use bytes::Bytes;
use rill_backend::BKey;
use rill_crdt::Clock;
use rill_object::{
    decode_object, decode_object_shared, decode_vclock, encode_vclock, Object, PruneRules, PutMode,
    VClock,
};

const MAGIC: &[u8; 2] = b"RV";
const VERSION: u8 = 1;

const GET: u8 = 1;
const MERGE: u8 = 2;
const REAP: u8 = 3;
const COORDINATE: u8 = 4;
const BUCKETS: u8 = 5;
const KEYS: u8 = 6;
const INDEX_PAGE: u8 = 7;
const HEAD: u8 = 8;
const AAE: u8 = 9;
const AAE_CLOCKS: u8 = 10;
const SUMMARIES: u8 = 11;
const SENSOR: u8 = 12;
const FOUND: u8 = 16;
const STORED: u8 = 17;
const REAPED: u8 = 18;
const FAILED: u8 = 19;
const BUCKET_LIST: u8 = 20;
const KEY_LIST: u8 = 21;
const ENTRIES: u8 = 22;
const HEAD_CLOCK: u8 = 23;
const MERGED: u8 = 24;
const AAE_ANSWER: u8 = 25;
const CLOCK_LIST: u8 = 26;
const ACCEPTED: u8 = 27;
const SUMMARY_LIST: u8 = 28;
const SENSOR_ANSWER: u8 = 29;

// Error kinds a replica's failure keeps across the wire.
const ERR_BACKEND: u8 = 0;
const ERR_OUT_OF_SPACE: u8 = 1;
const ERR_BUSY: u8 = 2;
const ERR_TOO_LARGE: u8 = 3;
const ERR_TOO_MANY_SIBLINGS: u8 = 4;
const ERR_DATATYPE: u8 = 5;

/// Why bytes are not a vnode message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    #[error("not a vnode message (bad magic bytes)")]
    Magic,
    #[error("vnode message version {0}; this node reads 1")]
    Version(u8),
    #[error("unknown vnode message kind {0}")]
    Kind(u8),
    #[error("the vnode message ends early")]
    Short,
    #[error("the vnode message is malformed: {0}")]
    Malformed(String),
}

/// The routing of a message: which request it is or answers, and which
/// partition's vnode it is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub request_id: u64,
    pub partition: u32,
}

/// A message's bytes begin with `prefix` (the envelope of whoever
/// carries it), so the message is built in one buffer.
fn head(prefix: &[u8], kind: u8, route: Route) -> Vec<u8> {
    let mut b = Vec::with_capacity(prefix.len() + 64);
    b.extend_from_slice(prefix);
    b.extend_from_slice(MAGIC);
    b.push(VERSION);
    b.push(kind);
    b.extend_from_slice(&route.request_id.to_be_bytes());
    b.extend_from_slice(&route.partition.to_be_bytes());
    b
}

fn put_short(b: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len().min(u16::MAX as usize);
    b.extend_from_slice(&(n as u16).to_be_bytes());
    b.extend_from_slice(&bytes[..n]);
}

/// An object as a long (its length, then its stored format), encoded in
/// place.
fn put_object(b: &mut Vec<u8>, o: &Object) {
    let at = b.len();
    b.extend_from_slice(&[0; 4]);
    rill_object::encode_object_into(b, o);
    let n = (b.len() - at - 4) as u32;
    b[at..at + 4].copy_from_slice(&n.to_be_bytes());
}

fn put_long(b: &mut Vec<u8>, bytes: &[u8]) {
    b.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    b.extend_from_slice(bytes);
}

fn put_prune(b: &mut Vec<u8>, p: &PruneRules) {
    b.extend_from_slice(&(p.small as u64).to_be_bytes());
    b.extend_from_slice(&(p.big as u64).to_be_bytes());
    b.extend_from_slice(&p.young_secs.to_be_bytes());
    b.extend_from_slice(&p.old_secs.to_be_bytes());
}

/// A key's bytes (bucket type, bucket, key, each with a u16 length), as
/// handoff items and cursors carry it.
pub fn encode_key(k: &BKey) -> Vec<u8> {
    let mut b = Vec::with_capacity(6 + k.bucket_type.len() + k.bucket.len() + k.key.len());
    put_key(&mut b, k);
    b
}

/// A key from [`encode_key`]'s bytes.
pub fn decode_key(b: &[u8]) -> Result<BKey, WireError> {
    let mut r = Reader(b, None);
    let k = r.key()?;
    r.end()?;
    Ok(k)
}

fn put_key(b: &mut Vec<u8>, k: &BKey) {
    put_short(b, &k.bucket_type);
    put_short(b, &k.bucket);
    put_short(b, &k.key);
}

pub fn encode_request(route: Route, r: &VnodeRequest) -> Vec<u8> {
    encode_request_after(&[], route, r)
}

/// `prefix`, then the request's bytes, in one buffer.
pub fn encode_request_after(prefix: &[u8], route: Route, r: &VnodeRequest) -> Vec<u8> {
    match r {
        VnodeRequest::Get { key } => {
            let mut b = head(prefix, GET, route);
            put_key(&mut b, key);
            b
        }
        VnodeRequest::Head { key } => {
            let mut b = head(prefix, HEAD, route);
            put_key(&mut b, key);
            b
        }
        VnodeRequest::Merge {
            key,
            object,
            allow_mult,
            prune,
            return_object,
        } => {
            let mut b = head(prefix, MERGE, route);
            put_key(&mut b, key);
            b.push(
                u8::from(*allow_mult)
                    | if prune.is_some() { 2 } else { 0 }
                    | if *return_object { 0 } else { 4 },
            );
            if let Some(p) = prune {
                put_prune(&mut b, p);
            }
            put_object(&mut b, object);
            b
        }
        VnodeRequest::Buckets { bucket_type } => {
            let mut b = head(prefix, BUCKETS, route);
            put_short(&mut b, bucket_type);
            b
        }
        VnodeRequest::Keys(q) => {
            let mut b = head(prefix, KEYS, route);
            coverage::put_keys_query(&mut b, q);
            b
        }
        VnodeRequest::IndexPage { query, page } => {
            let mut b = head(prefix, INDEX_PAGE, route);
            coverage::put_index_query(&mut b, query, *page);
            b
        }
        VnodeRequest::Coordinate { key, step, prune } => {
            let mut b = head(prefix, COORDINATE, route);
            put_key(&mut b, key);
            put_prune(&mut b, prune);
            match &**step {
                CoordinateStep::Put {
                    context,
                    content,
                    mode,
                } => {
                    b.push(0);
                    b.push(u8::from(mode.allow_mult) | (u8::from(mode.last_write_wins) << 1));
                    put_long(&mut b, &encode_vclock(context));
                    let one = Object {
                        clock: VClock::new(),
                        contents: vec![content.clone()],
                    };
                    put_object(&mut b, &one);
                }
                CoordinateStep::Dt {
                    datatype,
                    hll_precision,
                    op,
                    context,
                } => {
                    b.push(1);
                    put_short(&mut b, datatype.as_bytes());
                    b.push(*hll_precision);
                    match context {
                        Some(c) => {
                            b.push(1);
                            put_long(&mut b, &c.encode());
                        }
                        None => b.push(0),
                    }
                    op::put_op(&mut b, op);
                }
            }
            b
        }
        VnodeRequest::Reap { key, clock } => {
            let mut b = head(prefix, REAP, route);
            put_key(&mut b, key);
            put_long(&mut b, &encode_vclock(clock));
            b
        }
        VnodeRequest::Aae { index_n, ask } => {
            let mut b = head(prefix, AAE, route);
            aae::put_ask(&mut b, *index_n, ask);
            b
        }
        VnodeRequest::AaeClocks { index_n, segments } => {
            let mut b = head(prefix, AAE_CLOCKS, route);
            aae::put_segments(&mut b, *index_n, segments);
            b
        }
        VnodeRequest::Summaries(q) => {
            let mut b = head(prefix, SUMMARIES, route);
            coverage::put_keys_query(&mut b, q);
            b
        }
        VnodeRequest::Sensor(bytes) => {
            let mut b = head(prefix, SENSOR, route);
            put_long(&mut b, bytes);
            b
        }
    }
}

pub fn encode_reply(route: Route, r: &VnodeReply) -> Vec<u8> {
    encode_reply_after(&[], route, r)
}

/// `prefix`, then the reply's bytes, in one buffer.
pub fn encode_reply_after(prefix: &[u8], route: Route, r: &VnodeReply) -> Vec<u8> {
    match r {
        VnodeReply::Found(o) => {
            let mut b = head(prefix, FOUND, route);
            b.push(u8::from(o.is_some()));
            if let Some(o) = o {
                put_object(&mut b, o);
            }
            b
        }
        VnodeReply::Stored(o) => {
            let mut b = head(prefix, STORED, route);
            put_object(&mut b, o);
            b
        }
        VnodeReply::Merged => head(prefix, MERGED, route),
        VnodeReply::Sensor(bytes) => {
            let mut b = head(prefix, SENSOR_ANSWER, route);
            put_long(&mut b, bytes);
            b
        }
        VnodeReply::Accepted => head(prefix, ACCEPTED, route),
        VnodeReply::Aae(a) => {
            let mut b = head(prefix, AAE_ANSWER, route);
            aae::put_answer(&mut b, a);
            b
        }
        VnodeReply::Summaries { rows, next } => {
            let mut b = head(prefix, SUMMARY_LIST, route);
            coverage::put_summaries(&mut b, rows, next.as_deref());
            b
        }
        VnodeReply::Clocks(list) => {
            let mut b = head(prefix, CLOCK_LIST, route);
            b.extend_from_slice(&(list.len() as u32).to_be_bytes());
            for (k, c) in list {
                put_key(&mut b, k);
                put_long(&mut b, &encode_vclock(c));
            }
            b
        }
        VnodeReply::Head { clock, fingerprint } => {
            let mut b = head(prefix, HEAD_CLOCK, route);
            put_long(&mut b, &encode_vclock(clock));
            b.extend_from_slice(&fingerprint.to_be_bytes());
            b
        }
        VnodeReply::Buckets(list) => {
            let mut b = head(prefix, BUCKET_LIST, route);
            op::put_list(&mut b, list);
            b
        }
        VnodeReply::Keys { keys, more } => {
            let mut b = head(prefix, KEY_LIST, route);
            b.push(u8::from(*more));
            op::put_list(&mut b, keys);
            b
        }
        VnodeReply::Entries { entries, filled } => {
            let mut b = head(prefix, ENTRIES, route);
            b.push(u8::from(*filled));
            coverage::put_entries(&mut b, entries);
            b
        }
        VnodeReply::Reaped(done) => {
            let mut b = head(prefix, REAPED, route);
            b.push(u8::from(*done));
            b
        }
        VnodeReply::Failed(e) => {
            let mut b = head(prefix, FAILED, route);
            let (kind, n, m) = match e {
                KvError::OutOfSpace { retry_after_secs } => {
                    (ERR_OUT_OF_SPACE, u64::from(*retry_after_secs), 0)
                }
                KvError::Busy(_) => (ERR_BUSY, 0, 0),
                KvError::TooLarge {
                    size_bytes,
                    max_bytes,
                } => (ERR_TOO_LARGE, *size_bytes as u64, *max_bytes as u64),
                KvError::TooManySiblings(n) => (ERR_TOO_MANY_SIBLINGS, *n as u64, 0),
                KvError::Datatype(_) => (ERR_DATATYPE, 0, 0),
                _ => (ERR_BACKEND, 0, 0),
            };
            b.push(kind);
            b.extend_from_slice(&n.to_be_bytes());
            b.extend_from_slice(&m.to_be_bytes());
            let text = match e {
                KvError::Busy(t) | KvError::Backend(t) | KvError::Datatype(t) => t.clone(),
                // Its kind stays on this node; another reads its words.
                KvError::Storage(f) => f.to_string(),
                other => other.to_string(),
            };
            put_long(&mut b, text.as_bytes());
            b
        }
    }
}

/// The bytes left, and the message they are part of when it is shared
/// (objects' values then share it instead of being copied).
struct Reader<'a>(&'a [u8], Option<&'a Bytes>);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Short);
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn short(&mut self) -> Result<Vec<u8>, WireError> {
        let n = usize::from(self.u16()?);
        Ok(self.take(n)?.to_vec())
    }
    fn long(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn key(&mut self) -> Result<BKey, WireError> {
        let (t, b, k) = (self.short()?, self.short()?, self.short()?);
        Ok(BKey::new(&t, &b, &k))
    }
    fn prune(&mut self) -> Result<PruneRules, WireError> {
        let small = r_usize(self.u64()?, "small_vclock")?;
        let big = r_usize(self.u64()?, "big_vclock")?;
        Ok(PruneRules {
            small,
            big,
            young_secs: self.u64()?,
            old_secs: self.u64()?,
        })
    }
    fn object(&mut self) -> Result<rill_object::Object, WireError> {
        let long = self.long()?;
        match self.1 {
            Some(src) => decode_object_shared(&src.slice_ref(long)),
            None => decode_object(long),
        }
        .map_err(|e| WireError::Malformed(format!("object: {e}")))
    }
    fn end(&self) -> Result<(), WireError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(WireError::Malformed("bytes after the message".into()))
        }
    }
}

fn r_usize(v: u64, what: &str) -> Result<usize, WireError> {
    usize::try_from(v).map_err(|_| WireError::Malformed(what.into()))
}

fn open<'a>(b: &'a [u8], shared: Option<&'a Bytes>) -> Result<(u8, Route, Reader<'a>), WireError> {
    let mut r = Reader(b, shared);
    if r.take(2).map_err(|_| WireError::Magic)? != MAGIC {
        return Err(WireError::Magic);
    }
    let v = r.u8()?;
    if v != VERSION {
        return Err(WireError::Version(v));
    }
    let kind = r.u8()?;
    let route = Route {
        request_id: r.u64()?,
        partition: r.u32()?,
    };
    Ok((kind, route, r))
}

pub fn decode_request(b: &[u8]) -> Result<(Route, VnodeRequest), WireError> {
    decode_request_in(b, None)
}

/// [`decode_request`], objects' values sharing `b`.
pub fn decode_request_shared(b: &Bytes) -> Result<(Route, VnodeRequest), WireError> {
    decode_request_in(b, Some(b))
}

fn decode_request_in(b: &[u8], shared: Option<&Bytes>) -> Result<(Route, VnodeRequest), WireError> {
    let (kind, route, mut r) = open(b, shared)?;
    let req = match kind {
        GET => VnodeRequest::Get { key: r.key()? },
        HEAD => VnodeRequest::Head { key: r.key()? },
        AAE => {
            let (index_n, ask) = r.aae_ask()?;
            VnodeRequest::Aae { index_n, ask }
        }
        AAE_CLOCKS => {
            let (index_n, segments) = r.aae_segments()?;
            VnodeRequest::AaeClocks { index_n, segments }
        }
        MERGE => {
            let key = r.key()?;
            let flags = r.u8()?;
            if flags & !7 != 0 {
                return Err(WireError::Malformed(format!("merge flags {flags:#x}")));
            }
            let prune = if flags & 2 != 0 {
                Some(r.prune()?)
            } else {
                None
            };
            VnodeRequest::Merge {
                key,
                allow_mult: flags & 1 != 0,
                return_object: flags & 4 == 0,
                prune,
                object: r.object()?,
            }
        }
        REAP => {
            let key = r.key()?;
            let clock = decode_vclock(r.long()?)
                .map_err(|e| WireError::Malformed(format!("clock: {e}")))?;
            VnodeRequest::Reap { key, clock }
        }
        BUCKETS => VnodeRequest::Buckets {
            bucket_type: r.short()?,
        },
        KEYS => VnodeRequest::Keys(Box::new(r.keys_query()?)),
        SUMMARIES => VnodeRequest::Summaries(Box::new(r.keys_query()?)),
        SENSOR => VnodeRequest::Sensor(r.long()?.to_vec()),
        INDEX_PAGE => {
            let (query, page) = r.index_query()?;
            VnodeRequest::IndexPage { query, page }
        }
        COORDINATE => {
            let key = r.key()?;
            let prune = r.prune()?;
            let step = match r.u8()? {
                0 => {
                    let flags = r.u8()?;
                    if flags & !3 != 0 {
                        return Err(WireError::Malformed(format!("put mode {flags:#x}")));
                    }
                    let context = decode_vclock(r.long()?)
                        .map_err(|e| WireError::Malformed(format!("context: {e}")))?;
                    let mut one = r.object()?;
                    if one.contents.len() != 1 {
                        return Err(WireError::Malformed("a put carries one content".into()));
                    }
                    CoordinateStep::Put {
                        context,
                        content: one.contents.remove(0),
                        mode: PutMode {
                            allow_mult: flags & 1 != 0,
                            last_write_wins: flags & 2 != 0,
                        },
                    }
                }
                1 => {
                    let datatype = String::from_utf8(r.short()?)
                        .map_err(|_| WireError::Malformed("datatype is not UTF-8".into()))?;
                    let hll_precision = r.u8()?;
                    let context = match r.u8()? {
                        0 => None,
                        1 => Some(
                            Clock::decode(r.long()?)
                                .ok_or_else(|| WireError::Malformed("data type context".into()))?,
                        ),
                        x => return Err(WireError::Malformed(format!("context flag {x}"))),
                    };
                    CoordinateStep::Dt {
                        datatype,
                        hll_precision,
                        context,
                        op: r.op()?,
                    }
                }
                x => return Err(WireError::Malformed(format!("coordinating step {x}"))),
            };
            VnodeRequest::Coordinate {
                key,
                step: Box::new(step),
                prune,
            }
        }
        other => return Err(WireError::Kind(other)),
    };
    r.end()?;
    Ok((route, req))
}

pub fn decode_reply(b: &[u8]) -> Result<(Route, VnodeReply), WireError> {
    decode_reply_in(b, None)
}

/// [`decode_reply`], objects' values sharing `b`.
pub fn decode_reply_shared(b: &Bytes) -> Result<(Route, VnodeReply), WireError> {
    decode_reply_in(b, Some(b))
}

fn decode_reply_in(b: &[u8], shared: Option<&Bytes>) -> Result<(Route, VnodeReply), WireError> {
    let (kind, route, mut r) = open(b, shared)?;
    let reply = match kind {
        FOUND => match r.u8()? {
            0 => VnodeReply::Found(None),
            1 => VnodeReply::Found(Some(r.object()?)),
            x => return Err(WireError::Malformed(format!("found flag {x}"))),
        },
        STORED => VnodeReply::Stored(r.object()?),
        MERGED => VnodeReply::Merged,
        SENSOR_ANSWER => VnodeReply::Sensor(r.long()?.to_vec()),
        ACCEPTED => VnodeReply::Accepted,
        AAE_ANSWER => VnodeReply::Aae(r.aae_answer()?),
        CLOCK_LIST => {
            let n = r.count(10)?;
            let mut list = Vec::with_capacity(n);
            for _ in 0..n {
                let k = r.key()?;
                let c = decode_vclock(r.long()?)
                    .map_err(|e| WireError::Malformed(format!("clock: {e}")))?;
                list.push((k, c));
            }
            VnodeReply::Clocks(list)
        }
        HEAD_CLOCK => VnodeReply::Head {
            clock: decode_vclock(r.long()?)
                .map_err(|e| WireError::Malformed(format!("clock: {e}")))?,
            fingerprint: r.u64()?,
        },
        BUCKET_LIST => VnodeReply::Buckets(r.list()?),
        SUMMARY_LIST => {
            let (rows, next) = r.summaries()?;
            VnodeReply::Summaries { rows, next }
        }
        KEY_LIST => {
            let more = r.bool_flag()?;
            VnodeReply::Keys {
                more,
                keys: r.list()?,
            }
        }
        ENTRIES => {
            let filled = r.bool_flag()?;
            VnodeReply::Entries {
                filled,
                entries: r.entries()?,
            }
        }
        REAPED => match r.u8()? {
            x @ (0 | 1) => VnodeReply::Reaped(x == 1),
            x => return Err(WireError::Malformed(format!("reaped flag {x}"))),
        },
        FAILED => {
            let kind = r.u8()?;
            let n = r.u64()?;
            let m = r.u64()?;
            let text = String::from_utf8(r.long()?.to_vec())
                .map_err(|_| WireError::Malformed("error text is not UTF-8".into()))?;
            let e = match kind {
                ERR_BACKEND => KvError::Backend(text),
                ERR_OUT_OF_SPACE => KvError::OutOfSpace {
                    retry_after_secs: u32::try_from(n).unwrap_or(u32::MAX),
                },
                ERR_BUSY => KvError::Busy(text),
                ERR_DATATYPE => KvError::Datatype(text),
                ERR_TOO_LARGE => KvError::TooLarge {
                    size_bytes: usize::try_from(n).unwrap_or(usize::MAX),
                    max_bytes: usize::try_from(m).unwrap_or(usize::MAX),
                },
                ERR_TOO_MANY_SIBLINGS => {
                    KvError::TooManySiblings(usize::try_from(n).unwrap_or(usize::MAX))
                }
                x => return Err(WireError::Malformed(format!("error kind {x}"))),
            };
            VnodeReply::Failed(e)
        }
        other => return Err(WireError::Kind(other)),
    };
    r.end()?;
    Ok((route, reply))
}

#[cfg(test)]
mod tests;
