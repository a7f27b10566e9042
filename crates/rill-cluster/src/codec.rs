//! The cluster state's bytes, as nodes gossip them and keep them on disk
//! (docs/format.md, "Cluster state"). Big-endian; node names are written
//! once, in a table, and referred to by index, so a ring of 1024
//! partitions costs 2 bytes a partition.
//!
//! ```text
//! magic "RILLCLST" | version u8 (2)
//! names: u16 count, then each: u8 length, UTF-8 bytes
//! cluster name: u8 length, bytes
//! members: u16 count, then each: name u16, status u8, version u64, writer u16
//! ring: version u64, writer u16, claimant u16,
//!       u16 partitions, owner u16 each,
//!       u32 transfers, each: partition u32, from u16, to u16, id u64
//! done: u32 count, each: partition u32, id u64, from u16, to u16
//! seen: u16 count, each: name u16, counter u64, digest u64,
//!       address: u8 length, UTF-8 bytes
//! crc32 of everything before it
//! ```

use crate::member::{Member, Status};
use crate::state::{ClusterState, RingRegister, Seen, Transfer};
use std::collections::{BTreeMap, BTreeSet};

const MAGIC: &[u8; 8] = b"RILLCLST";
/// Version 1 never left development builds (it had no addresses).
const VERSION: u8 = 2;
/// Partitions a ring has at most (rill-ring's limit).
const MAX_PARTITIONS: usize = 1 << 14;

/// Why bytes are not a cluster state.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    #[error("not a cluster state (bad magic bytes)")]
    Magic,
    #[error("cluster state format {0}; this build reads 2")]
    Version(u8),
    #[error("the cluster state ends early")]
    Short,
    #[error("the cluster state's checksum does not match")]
    Checksum,
    #[error("the cluster state is malformed: {0}")]
    Malformed(&'static str),
}

fn status_code(s: Status) -> u8 {
    Status::ALL
        .iter()
        .position(|x| *x == s)
        .expect("every status is in ALL") as u8
}

fn status_of(c: u8) -> Option<Status> {
    Status::ALL.get(usize::from(c)).copied()
}

struct Names<'a> {
    index: BTreeMap<&'a str, u16>,
    list: Vec<&'a str>,
}

impl<'a> Names<'a> {
    fn add(&mut self, n: &'a str) {
        if !self.index.contains_key(n) {
            self.index.insert(n, self.list.len() as u16);
            self.list.push(n);
        }
    }

    fn of(&self, n: &str) -> [u8; 2] {
        self.index[n].to_be_bytes()
    }
}

fn short_str(out: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(255)];
    out.push(b.len() as u8);
    out.extend_from_slice(b);
}

/// The state's bytes.
pub fn encode(s: &ClusterState) -> Vec<u8> {
    let mut names = Names {
        index: BTreeMap::new(),
        list: Vec::new(),
    };
    for (n, m) in &s.members {
        names.add(n);
        names.add(&m.writer);
    }
    names.add(&s.ring.writer);
    names.add(&s.ring.claimant);
    for o in &s.ring.owners {
        names.add(o);
    }
    for t in &s.ring.next {
        names.add(&t.from);
        names.add(&t.to);
    }
    for (_, _, from, to) in &s.ring.done {
        names.add(from);
        names.add(to);
    }
    for n in s.seen.keys() {
        names.add(n);
    }
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(names.list.len() as u16).to_be_bytes());
    for n in &names.list {
        short_str(&mut out, n);
    }
    short_str(&mut out, &s.name);
    out.extend_from_slice(&(s.members.len() as u16).to_be_bytes());
    for (n, m) in &s.members {
        out.extend_from_slice(&names.of(n));
        out.push(status_code(m.status));
        out.extend_from_slice(&m.version.to_be_bytes());
        out.extend_from_slice(&names.of(&m.writer));
    }
    let r = &s.ring;
    out.extend_from_slice(&r.version.to_be_bytes());
    out.extend_from_slice(&names.of(&r.writer));
    out.extend_from_slice(&names.of(&r.claimant));
    out.extend_from_slice(&(r.owners.len() as u16).to_be_bytes());
    for o in &r.owners {
        out.extend_from_slice(&names.of(o));
    }
    out.extend_from_slice(&(r.next.len() as u32).to_be_bytes());
    for t in &r.next {
        out.extend_from_slice(&t.partition.to_be_bytes());
        out.extend_from_slice(&names.of(&t.from));
        out.extend_from_slice(&names.of(&t.to));
        out.extend_from_slice(&t.id.to_be_bytes());
    }
    out.extend_from_slice(&(r.done.len() as u32).to_be_bytes());
    for (p, id, from, to) in &r.done {
        out.extend_from_slice(&p.to_be_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&names.of(from));
        out.extend_from_slice(&names.of(to));
    }
    out.extend_from_slice(&(s.seen.len() as u16).to_be_bytes());
    for (n, seen) in &s.seen {
        out.extend_from_slice(&names.of(n));
        out.extend_from_slice(&seen.counter.to_be_bytes());
        out.extend_from_slice(&seen.digest.to_be_bytes());
        short_str(&mut out, &seen.addr);
    }
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Wraps arbitrary bytes as a state's body (magic, version, checksum), so
/// a fuzzer reaches the decoder past the checksum.
#[doc(hidden)]
pub fn sealed_for_fuzzing(body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(VERSION);
    out.extend_from_slice(body);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

fn crc32(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

struct Reader<'a> {
    b: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], CodecError> {
        if self.b.len() < n {
            return Err(CodecError::Short);
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn str(&mut self) -> Result<String, CodecError> {
        let n = usize::from(self.u8()?);
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| CodecError::Malformed("a name is not UTF-8"))
    }
}

/// A state from its bytes; never panics on any input.
pub fn decode(b: &[u8]) -> Result<ClusterState, CodecError> {
    if b.len() < MAGIC.len() + 1 || &b[..MAGIC.len()] != MAGIC {
        return Err(CodecError::Magic);
    }
    if b[MAGIC.len()] != VERSION {
        return Err(CodecError::Version(b[MAGIC.len()]));
    }
    if b.len() < MAGIC.len() + 1 + 4 {
        return Err(CodecError::Short);
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32(body) != u32::from_be_bytes(crc.try_into().expect("4")) {
        return Err(CodecError::Checksum);
    }
    let mut r = Reader {
        b: &body[MAGIC.len() + 1..],
    };
    let count = r.u16()?;
    let names: Vec<String> = (0..count).map(|_| r.str()).collect::<Result<_, _>>()?;
    let name = |i: u16| -> Result<String, CodecError> {
        names
            .get(usize::from(i))
            .cloned()
            .ok_or(CodecError::Malformed("a name index past the table"))
    };
    let cluster = r.str()?;
    let mut members = BTreeMap::new();
    for _ in 0..r.u16()? {
        let n = name(r.u16()?)?;
        let status = status_of(r.u8()?).ok_or(CodecError::Malformed("an unknown status"))?;
        let version = r.u64()?;
        let writer = name(r.u16()?)?;
        members.insert(
            n,
            Member {
                status,
                version,
                writer,
            },
        );
    }
    let version = r.u64()?;
    let writer = name(r.u16()?)?;
    let claimant = name(r.u16()?)?;
    let partitions = usize::from(r.u16()?);
    if partitions == 0 || partitions > MAX_PARTITIONS || !partitions.is_power_of_two() {
        return Err(CodecError::Malformed(
            "a ring size that is not a power of two up to 16384",
        ));
    }
    let owners = (0..partitions)
        .map(|_| name(r.u16()?))
        .collect::<Result<Vec<_>, _>>()?;
    let transfers = r.u32()? as usize;
    if transfers > partitions {
        return Err(CodecError::Malformed("more transfers than partitions"));
    }
    let mut next = Vec::with_capacity(transfers);
    for _ in 0..transfers {
        let partition = r.u32()?;
        if partition as usize >= partitions {
            return Err(CodecError::Malformed(
                "a transfer of a partition past the ring",
            ));
        }
        let from = name(r.u16()?)?;
        let to = name(r.u16()?)?;
        let id = r.u64()?;
        next.push(Transfer {
            partition,
            from,
            to,
            id,
        });
    }
    let done_count = r.u32()? as usize;
    if done_count > r.b.len() / 16 {
        return Err(CodecError::Short);
    }
    let mut done = BTreeSet::new();
    for _ in 0..done_count {
        let (p, id) = (r.u32()?, r.u64()?);
        done.insert((p, id, name(r.u16()?)?, name(r.u16()?)?));
    }
    let mut seen = BTreeMap::new();
    for _ in 0..r.u16()? {
        let n = name(r.u16()?)?;
        let counter = r.u64()?;
        let digest = r.u64()?;
        let addr = r.str()?;
        seen.insert(
            n,
            Seen {
                counter,
                digest,
                addr,
            },
        );
    }
    if !r.b.is_empty() {
        return Err(CodecError::Malformed("bytes after the state"));
    }
    Ok(ClusterState {
        name: cluster,
        members,
        ring: RingRegister {
            version,
            writer,
            claimant,
            owners,
            next,
            done,
        },
        seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ClusterState {
        let mut s = ClusterState::new("rill", "a@h", 8);
        s.set_status("b@h", "b@h", Status::Joining).unwrap();
        s.set_status("a@h", "b@h", Status::Valid).unwrap();
        s.write_ring("a@h", |r| {
            r.next.push(Transfer {
                partition: 3,
                from: "a@h".into(),
                to: "b@h".into(),
                id: 2,
            })
        });
        let t = s.ring().next[0].clone();
        s.mark_done(&t);
        s.see("a@h");
        s.see("b@h");
        s.set_address("b@h", "127.0.0.1:8199");
        s
    }

    #[test]
    fn states_round_trip() {
        let s = sample();
        let b = encode(&s);
        assert_eq!(decode(&b), Ok(s.clone()));
        assert_eq!(
            decode(&encode(&ClusterState::new("c", "x", 1024)))
                .unwrap()
                .ring_size(),
            1024
        );
    }

    #[test]
    fn damage_and_cuts_are_refused_never_misread() {
        let b = encode(&sample());
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x41;
            assert!(decode(&bad).is_err(), "byte {i} flipped");
        }
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }
}
