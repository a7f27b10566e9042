//! The stored form of an object (docs/format.md, "Riak object") and the
//! opaque vclock handed to clients. Both start with a magic byte and a
//! format version.

use crate::clock::{Dot, VClock};
use crate::object::{Content, Link, Metadata, Object};
use bytes::Bytes;

/// Version of the stored object format.
pub const OBJECT_FORMAT_VERSION: u8 = 1;
const OBJECT_MAGIC: u8 = 0xB0;
const VCLOCK_MAGIC: u8 = 0xC1;
const VCLOCK_VERSION: u8 = 1;

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

const F_DELETED: u8 = 1;
const F_DOT: u8 = 1 << 1;
const F_CONTENT_TYPE: u8 = 1 << 2;
const F_CHARSET: u8 = 1 << 3;
const F_CONTENT_ENCODING: u8 = 1 << 4;
const F_VTAG: u8 = 1 << 5;
const F_KNOWN: u8 = (1 << 6) - 1;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("{what}: expected magic byte {expected:#04x}, found {found:#04x}")]
    BadMagic {
        what: &'static str,
        expected: u8,
        found: u8,
    },
    #[error("{what}: format version {found} is not known (this build reads up to {known})")]
    UnknownVersion {
        what: &'static str,
        found: u8,
        known: u8,
    },
    #[error("{what}: ends after {at} bytes, inside {field}")]
    Truncated {
        what: &'static str,
        field: &'static str,
        at: usize,
    },
    #[error("{what}: {count} {field} cannot fit in the {left} bytes left")]
    BadCount {
        what: &'static str,
        field: &'static str,
        count: u64,
        left: usize,
    },
    #[error("{what}: unknown flag bits {flags:#04x}")]
    UnknownFlags { what: &'static str, flags: u8 },
    #[error("{what}: {left} bytes left over after the end")]
    TrailingBytes { what: &'static str, left: usize },
    #[error("{what}: clock actors out of order or repeated")]
    UnsortedClock { what: &'static str },
    #[error("object: a stored object has no siblings")]
    NoContents,
}

impl DecodeError {
    fn version(what: &'static str, found: u8, known: u8) -> DecodeError {
        DecodeError::UnknownVersion { what, found, known }
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn actor(&mut self, a: &[u8]) {
        self.u8(a.len().min(255) as u8);
        self.0.extend_from_slice(&a[..a.len().min(255)]);
    }
    fn clock(&mut self, c: &VClock) {
        self.u32(c.len() as u32);
        for (actor, counter, ts) in c.entries() {
            self.actor(actor);
            self.u64(counter);
            self.u64(ts);
        }
    }
}

struct Reader<'a> {
    what: &'static str,
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.at < n {
            return Err(DecodeError::Truncated {
                what: self.what,
                field,
                at: self.buf.len(),
            });
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn left(&self) -> usize {
        self.buf.len() - self.at
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, field)?[0])
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take(4, field)?.try_into().unwrap()))
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take(8, field)?.try_into().unwrap()))
    }
    fn bytes(&mut self, field: &'static str) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32(field)? as usize;
        Ok(self.take(n, field)?.to_vec())
    }
    /// A count of items each at least `min_item_bytes` long, checked
    /// against what is left so a corrupt count cannot make us allocate.
    fn count(&mut self, field: &'static str, min_item_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u32(field)? as usize;
        if n.saturating_mul(min_item_bytes) > self.left() {
            return Err(DecodeError::BadCount {
                what: self.what,
                field,
                count: n as u64,
                left: self.left(),
            });
        }
        Ok(n)
    }
    fn actor(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u8("actor length")? as usize;
        Ok(self.take(n, "actor")?.to_vec())
    }
    fn clock(&mut self) -> Result<VClock, DecodeError> {
        let n = self.count("clock entries", 17)?;
        let mut c = VClock::new();
        let mut last: Option<Vec<u8>> = None;
        for _ in 0..n {
            let a = self.actor()?;
            let counter = self.u64("clock counter")?;
            let ts = self.u64("clock timestamp")?;
            // Written in actor order, each once: anything else is damage.
            if last.as_ref().is_some_and(|l| *l >= a) {
                return Err(DecodeError::UnsortedClock { what: self.what });
            }
            last = Some(a.clone());
            c.set(a, counter, ts);
        }
        Ok(c)
    }
    fn header(&mut self, magic: u8, known: u8) -> Result<(), DecodeError> {
        let m = self.u8("magic")?;
        if m != magic {
            return Err(DecodeError::BadMagic {
                what: self.what,
                expected: magic,
                found: m,
            });
        }
        let v = self.u8("version")?;
        if v == 0 || v > known {
            return Err(DecodeError::version(self.what, v, known));
        }
        Ok(())
    }
    fn end(&self) -> Result<(), DecodeError> {
        if self.left() != 0 {
            return Err(DecodeError::TrailingBytes {
                what: self.what,
                left: self.left(),
            });
        }
        Ok(())
    }
}

/// The bytes a backend stores for an object.
pub fn encode_object(o: &Object) -> Vec<u8> {
    let mut out = Vec::new();
    encode_object_into(&mut out, o);
    out
}

/// At least the bytes `encode_object` makes of `o` (so one reservation
/// holds them: a large value is copied once).
fn encoded_size_bound(o: &Object) -> usize {
    let pairs =
        |v: &[(Vec<u8>, Vec<u8>)]| v.iter().map(|(k, v)| 8 + k.len() + v.len()).sum::<usize>();
    let contents: usize = o
        .contents
        .iter()
        .map(|c| {
            let m = &c.meta;
            let opt = |x: &Option<Vec<u8>>| x.as_ref().map_or(0, |b| 4 + b.len());
            1 + 17
                + 256
                + opt(&m.content_type)
                + opt(&m.charset)
                + opt(&m.content_encoding)
                + opt(&m.vtag)
                + 8
                + 4
                + m.links
                    .iter()
                    .map(|l| 12 + l.bucket.len() + l.key.len() + l.tag.len())
                    .sum::<usize>()
                + 4
                + pairs(&m.usermeta)
                + 4
                + pairs(&m.indexes)
                + 4
                + c.value.len()
        })
        .sum();
    2 + 4 + o.clock.len() * (1 + 255 + 16) + 4 + contents
}

/// Appends the bytes of [`encode_object`] to `out`.
pub fn encode_object_into(out: &mut Vec<u8>, o: &Object) {
    out.reserve(encoded_size_bound(o));
    let mut w = Writer(std::mem::take(out));
    w.u8(OBJECT_MAGIC);
    w.u8(OBJECT_FORMAT_VERSION);
    w.clock(&o.clock);
    w.u32(o.contents.len() as u32);
    for c in &o.contents {
        let m = &c.meta;
        let mut flags = 0;
        for (set, bit) in [
            (m.deleted, F_DELETED),
            (c.dot.is_some(), F_DOT),
            (m.content_type.is_some(), F_CONTENT_TYPE),
            (m.charset.is_some(), F_CHARSET),
            (m.content_encoding.is_some(), F_CONTENT_ENCODING),
            (m.vtag.is_some(), F_VTAG),
        ] {
            if set {
                flags |= bit;
            }
        }
        w.u8(flags);
        if let Some(d) = &c.dot {
            w.actor(&d.actor);
            w.u64(d.counter);
            w.u64(d.timestamp_secs);
        }
        for s in [&m.content_type, &m.charset, &m.content_encoding, &m.vtag]
            .into_iter()
            .flatten()
        {
            w.bytes(s);
        }
        w.u64(m.last_modified_us);
        w.u32(m.links.len() as u32);
        for l in &m.links {
            w.bytes(&l.bucket);
            w.bytes(&l.key);
            w.bytes(&l.tag);
        }
        for pairs in [&m.usermeta, &m.indexes] {
            w.u32(pairs.len() as u32);
            for (k, v) in pairs {
                w.bytes(k);
                w.bytes(v);
            }
        }
        w.bytes(&c.value);
    }
    *out = w.0;
}

/// An object from its stored bytes; its values are copied out.
pub fn decode_object(bytes: &[u8]) -> Result<Object, DecodeError> {
    decode_object_from(bytes, None)
}

/// An object from its stored bytes, its values sharing `bytes` (no copy).
pub fn decode_object_shared(bytes: &Bytes) -> Result<Object, DecodeError> {
    decode_object_from(bytes, Some(bytes))
}

fn decode_object_from(bytes: &[u8], shared: Option<&Bytes>) -> Result<Object, DecodeError> {
    let mut r = Reader {
        what: "object",
        buf: bytes,
        at: 0,
    };
    r.header(OBJECT_MAGIC, OBJECT_FORMAT_VERSION)?;
    let clock = r.clock()?;
    let n = r.count("siblings", 26)?;
    if n == 0 {
        return Err(DecodeError::NoContents);
    }
    let mut contents = Vec::with_capacity(n);
    for _ in 0..n {
        let flags = r.u8("sibling flags")?;
        if flags & !F_KNOWN != 0 {
            return Err(DecodeError::UnknownFlags {
                what: "object",
                flags: flags & !F_KNOWN,
            });
        }
        let dot = if flags & F_DOT != 0 {
            Some(Dot {
                actor: r.actor()?,
                counter: r.u64("dot counter")?,
                timestamp_secs: r.u64("dot timestamp")?,
            })
        } else {
            None
        };
        let mut opt = |bit: u8, field| -> Result<Option<Vec<u8>>, DecodeError> {
            if flags & bit != 0 {
                r.bytes(field).map(Some)
            } else {
                Ok(None)
            }
        };
        let content_type = opt(F_CONTENT_TYPE, "content type")?;
        let charset = opt(F_CHARSET, "charset")?;
        let content_encoding = opt(F_CONTENT_ENCODING, "content encoding")?;
        let vtag = opt(F_VTAG, "vtag")?;
        let last_modified_us = r.u64("last modified")?;
        let nl = r.count("links", 12)?;
        let mut links = Vec::with_capacity(nl);
        for _ in 0..nl {
            links.push(Link {
                bucket: r.bytes("link bucket")?,
                key: r.bytes("link key")?,
                tag: r.bytes("link tag")?,
            });
        }
        let mut pairs = |field| -> Result<Pairs, DecodeError> {
            let n = r.count(field, 8)?;
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                out.push((r.bytes(field)?, r.bytes(field)?));
            }
            Ok(out)
        };
        let usermeta = pairs("usermeta")?;
        let indexes = pairs("indexes")?;
        let n = r.u32("value")? as usize;
        let raw = r.take(n, "value")?;
        let value = match shared {
            Some(b) => b.slice_ref(raw),
            None => Bytes::copy_from_slice(raw),
        };
        contents.push(Content {
            value,
            dot,
            meta: Metadata {
                content_type,
                charset,
                content_encoding,
                vtag,
                links,
                last_modified_us,
                usermeta,
                indexes,
                deleted: flags & F_DELETED != 0,
            },
        });
    }
    r.end()?;
    Ok(Object { clock, contents })
}

/// The opaque causal context handed to clients (PB `vclock`, HTTP
/// `X-Riak-Vclock` in base64).
pub fn encode_vclock(c: &VClock) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(8 + c.len() * 24));
    w.u8(VCLOCK_MAGIC);
    w.u8(VCLOCK_VERSION);
    w.clock(c);
    w.0
}

/// A client's causal context back; empty bytes are "no context".
pub fn decode_vclock(bytes: &[u8]) -> Result<VClock, DecodeError> {
    if bytes.is_empty() {
        return Ok(VClock::new());
    }
    let mut r = Reader {
        what: "vclock",
        buf: bytes,
        at: 0,
    };
    r.header(VCLOCK_MAGIC, VCLOCK_VERSION)?;
    let c = r.clock()?;
    r.end()?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::PutMode;

    fn sample() -> Object {
        let mut meta = Metadata {
            content_type: Some(b"text/plain".to_vec()),
            charset: Some(b"utf-8".to_vec()),
            vtag: Some(b"abc".to_vec()),
            last_modified_us: 1_700_000_000_123_456,
            ..Metadata::default()
        };
        meta.links.push(Link {
            bucket: b"b".to_vec(),
            key: b"k".to_vec(),
            tag: b"t".to_vec(),
        });
        meta.usermeta.push((b"m".to_vec(), b"v".to_vec()));
        meta.indexes.push((b"f_int".to_vec(), b"42".to_vec()));
        let mode = PutMode {
            allow_mult: true,
            last_write_wins: false,
        };
        let o = Object::coordinate_put(
            None,
            &VClock::new(),
            Content::new(b"hello".to_vec(), meta),
            &b"actor-1".to_vec(),
            mode,
        );
        Object::coordinate_put(
            Some(&o),
            &VClock::new(),
            Content::tombstone(5, b"t".to_vec()),
            &b"actor-2".to_vec(),
            mode,
        )
    }

    #[test]
    fn objects_round_trip() {
        let o = sample();
        assert_eq!(o.contents.len(), 2);
        assert_eq!(decode_object(&encode_object(&o)).unwrap(), o);
    }

    #[test]
    fn vclocks_round_trip_and_empty_is_no_context() {
        let o = sample();
        assert_eq!(decode_vclock(&encode_vclock(&o.clock)).unwrap(), o.clock);
        assert_eq!(decode_vclock(b"").unwrap(), VClock::new());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode_object(&sample());
        for cut in 0..bytes.len() {
            assert!(decode_object(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            decode_object(&longer),
            Err(DecodeError::TrailingBytes { .. })
        ));
    }

    // Found by fuzz/object_decoders: a clock naming one actor twice.
    #[test]
    fn repeated_clock_actors_are_refused() {
        let mut b = vec![0xC1, 1, 0, 0, 0, 2];
        for _ in 0..2 {
            b.push(0);
            b.extend_from_slice(&[0; 16]);
        }
        assert_eq!(
            decode_vclock(&b),
            Err(DecodeError::UnsortedClock { what: "vclock" })
        );
    }

    #[test]
    fn bad_headers_are_named() {
        let mut bytes = encode_object(&sample());
        bytes[1] = 9;
        let e = decode_object(&bytes).unwrap_err();
        assert!(e.to_string().contains("version 9"), "{e}");
        assert!(matches!(
            decode_vclock(b"garbage"),
            Err(DecodeError::BadMagic { .. })
        ));
    }
}
