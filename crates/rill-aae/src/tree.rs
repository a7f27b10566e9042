//! One Tictac tree: 2^20 segments in 4,096 branches of 256 (Riak 3's
//! "large" tree). A segment holds the XOR of its keys' contributions; a
//! branch the XOR of its segments; the root is the 4,096 branch hashes
//! (16 KiB), compared whole, as kv_index_tictactree exchanges it.
//!
//! A key's segment comes from the key's ring hash (SHA-1, already made to
//! find its partition): the ring takes its first bits, so a partition's
//! keys differ in its later bytes, and bytes 12..16 give the segment. A
//! clock hashes (xxh3, its entries in actor order, counters only) to 32
//! bits, and the key's contribution is one hash (xxh3) of its ring hash
//! and its clock's. Riak hashes the key with MD5 and the clock with
//! Erlang's `phash2` and XORs the two; Rill's trees are compared only
//! with Rill's, so it keeps the shape and uses what it has.

/// Branches of a tree.
pub const BRANCHES: usize = 4096;
/// Segments of a branch.
pub const SEGMENTS_PER_BRANCH: usize = 256;
/// Segments of a tree (2^20).
pub const SEGMENTS: usize = BRANCHES * SEGMENTS_PER_BRANCH;

/// The segment of a key, from its ring hash.
pub fn segment_of(key_hash: &[u8; 20]) -> u32 {
    let b = &key_hash[12..16];
    u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & (SEGMENTS as u32 - 1)
}

/// The hash of a clock from its entries (actor, counter), in any order:
/// they are sorted by actor first, so replicas agree however their
/// clocks list them. An empty clock hashes to 0 (an absent key adds
/// nothing to a tree).
pub fn clock_hash<'a>(entries: impl IntoIterator<Item = (&'a [u8], u64)>) -> u32 {
    let mut e: Vec<(&[u8], u64)> = entries.into_iter().collect();
    e.sort_unstable();
    sorted_clock_hash(e)
}

/// [`clock_hash`] of entries already in actor order (a clock kept
/// sorted), without copying them: the put path's.
pub fn sorted_clock_hash<'a>(entries: impl IntoIterator<Item = (&'a [u8], u64)>) -> u32 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut any = false;
    for (actor, counter) in entries {
        any = true;
        h.update(&(actor.len() as u32).to_be_bytes());
        h.update(actor);
        h.update(&counter.to_be_bytes());
    }
    if any {
        h.digest() as u32
    } else {
        0
    }
}

/// What one key at one clock adds to its segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contribution {
    pub segment: u32,
    pub hash: u32,
}

impl Contribution {
    /// A key (by its ring hash) at a clock (by [`clock_hash`]): one hash
    /// of both, so that two keys moved from one clock to another change
    /// their segments by different amounts. (Riak XORs a hash of the key
    /// with one of the clock, so such changes cancel in a branch or a
    /// segment holding both: a bulk rewrite of keys by one actor can hide
    /// from its trees.)
    pub fn of(key_hash: &[u8; 20], clock_hash: u32) -> Contribution {
        let mut b = [0u8; 24];
        b[..20].copy_from_slice(key_hash);
        b[20..].copy_from_slice(&clock_hash.to_be_bytes());
        Contribution {
            segment: segment_of(key_hash),
            hash: xxhash_rust::xxh3::xxh3_64(&b) as u32,
        }
    }
}

/// A Tictac tree. A branch's segments are made on its first use, so a
/// tree over few keys is small; one over many is 4 MiB of segments and
/// 16 KiB of branches. The segments of used branches lie in one growing
/// array rather than an allocation each: a node holds hundreds of trees,
/// and a million long-lived 1 KiB allocations made between the put
/// path's own fragmented the allocator's heap (a 3-node devrel's puts
/// spent 6 % more of their CPU in malloc and free with trees kept than
/// without).
#[derive(Clone, Debug)]
pub struct TictacTree {
    branches: Vec<u32>,
    /// Per branch: 0 when unused, else 1 + its place in `segments`.
    slot: Vec<u16>,
    segments: Vec<[u32; SEGMENTS_PER_BRANCH]>,
}

impl PartialEq for TictacTree {
    /// Equal branches and equal segments, wherever they lie.
    fn eq(&self, o: &TictacTree) -> bool {
        self.branches == o.branches
            && (0..BRANCHES)
                .all(|b| (self.slot[b] == 0) == (o.slot[b] == 0) && self.branch(b) == o.branch(b))
    }
}

impl Eq for TictacTree {}

impl Default for TictacTree {
    fn default() -> Self {
        TictacTree::new()
    }
}

impl TictacTree {
    pub fn new() -> TictacTree {
        TictacTree {
            branches: vec![0; BRANCHES],
            slot: vec![0; BRANCHES],
            segments: Vec::new(),
        }
    }

    /// Branch `b`'s segments, made if unused.
    fn leaves_mut(&mut self, b: usize) -> &mut [u32; SEGMENTS_PER_BRANCH] {
        if self.slot[b] == 0 {
            self.segments.push([0; SEGMENTS_PER_BRANCH]);
            self.slot[b] = self.segments.len() as u16;
        }
        &mut self.segments[usize::from(self.slot[b]) - 1]
    }

    fn leaves(&self, b: usize) -> Option<&[u32; SEGMENTS_PER_BRANCH]> {
        match self.slot.get(b) {
            None | Some(0) => None,
            Some(&at) => Some(&self.segments[usize::from(at) - 1]),
        }
    }

    /// XORs `c` in: a key written (or, the same again, removed).
    pub fn toggle(&mut self, c: Contribution) {
        let s = c.segment as usize % SEGMENTS;
        let (b, i) = (s / SEGMENTS_PER_BRANCH, s % SEGMENTS_PER_BRANCH);
        self.leaves_mut(b)[i] ^= c.hash;
        self.branches[b] ^= c.hash;
    }

    /// A key's clock changed from `old` to `new` (`None`: absent): one
    /// segment and its branch change.
    pub fn replace(&mut self, key_hash: &[u8; 20], old: Option<u32>, new: Option<u32>) {
        if let Some(o) = old {
            self.toggle(Contribution::of(key_hash, o));
        }
        if let Some(n) = new {
            self.toggle(Contribution::of(key_hash, n));
        }
    }

    /// The root: every branch's hash.
    pub fn root(&self) -> &[u32] {
        &self.branches
    }

    /// The segments of branch `b`.
    pub fn branch(&self, b: usize) -> [u32; SEGMENTS_PER_BRANCH] {
        self.leaves(b).copied().unwrap_or([0; SEGMENTS_PER_BRANCH])
    }

    /// A segment's hash.
    pub fn segment(&self, segment: u32) -> u32 {
        let s = segment as usize % SEGMENTS;
        self.leaves(s / SEGMENTS_PER_BRANCH)
            .map_or(0, |l| l[s % SEGMENTS_PER_BRANCH])
    }

    /// The branches whose hashes differ between two roots.
    pub fn dirty_branches(mine: &[u32], theirs: &[u32]) -> Vec<u32> {
        (0..mine.len().max(theirs.len()))
            .filter(|&b| mine.get(b).copied().unwrap_or(0) != theirs.get(b).copied().unwrap_or(0))
            .map(|b| b as u32)
            .collect()
    }

    /// The segments (tree-wide numbers) of branch `b` whose hashes differ.
    pub fn dirty_segments(
        b: u32,
        mine: &[u32; SEGMENTS_PER_BRANCH],
        theirs: &[u32; SEGMENTS_PER_BRANCH],
    ) -> Vec<u32> {
        (0..SEGMENTS_PER_BRANCH)
            .filter(|&i| mine[i] != theirs[i])
            .map(|i| b * SEGMENTS_PER_BRANCH as u32 + i as u32)
            .collect()
    }

    /// The tree's persisted form (docs/format.md, "Tictac tree"): magic,
    /// version, the branches that hold anything with their segments, and
    /// a CRC32 of all before it.
    pub fn encode(&self) -> Vec<u8> {
        let used: Vec<usize> = (0..BRANCHES).filter(|&b| self.slot[b] != 0).collect();
        let mut out = Vec::with_capacity(16 + used.len() * (4 + SEGMENTS_PER_BRANCH * 4));
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&(used.len() as u32).to_be_bytes());
        for b in used {
            out.extend_from_slice(&(b as u32).to_be_bytes());
            for s in self.leaves(b).expect("used").iter() {
                out.extend_from_slice(&s.to_be_bytes());
            }
        }
        seal(&mut out);
        out
    }

    /// A tree from its persisted form; the branch hashes are made again
    /// from the segments. Refuses anything not whole and exact.
    pub fn decode(b: &[u8]) -> Result<TictacTree, DecodeError> {
        let body = framed_body(b, MAGIC, VERSION, 9)?;
        let count = u32::from_be_bytes(body[5..9].try_into().expect("4")) as usize;
        let per = 4 + SEGMENTS_PER_BRANCH * 4;
        if count > BRANCHES || body.len() != 9 + count * per {
            return Err(DecodeError::Length);
        }
        let mut t = TictacTree::new();
        let mut last = None;
        for chunk in body[9..].chunks_exact(per) {
            let b = u32::from_be_bytes(chunk[..4].try_into().expect("4")) as usize;
            if b >= BRANCHES || last.is_some_and(|l| b <= l) {
                return Err(DecodeError::Branch(b as u32));
            }
            last = Some(b);
            let leaves = t.leaves_mut(b);
            for (i, s) in chunk[4..].chunks_exact(4).enumerate() {
                leaves[i] = u32::from_be_bytes(s.try_into().expect("4"));
            }
            t.branches[b] = leaves.iter().fold(0, |a, x| a ^ x);
        }
        Ok(t)
    }
}

const MAGIC: &[u8; 4] = b"RTTT";
const VERSION: u8 = 1;

/// Appends the CRC32 of everything in `out` (the files' last 4 bytes).
pub(crate) fn seal(out: &mut Vec<u8>) {
    let crc = crc32fast::hash(out);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// The bytes of a sealed file before its CRC, after checking its magic,
/// its CRC and its version (byte 4); `min_body` bytes at least.
pub(crate) fn framed_body<'a>(
    b: &'a [u8],
    magic: &[u8; 4],
    version: u8,
    min_body: usize,
) -> Result<&'a [u8], DecodeError> {
    if b.len() < min_body + 4 || &b[..4] != magic {
        return Err(DecodeError::NotATree);
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32fast::hash(body) != u32::from_be_bytes(crc.try_into().expect("4")) {
        return Err(DecodeError::Checksum);
    }
    if body[4] != version {
        return Err(DecodeError::Version(body[4]));
    }
    Ok(body)
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a Tictac tree (bad magic bytes or too short)")]
    NotATree,
    #[error("the Tictac tree's checksum does not match (damaged)")]
    Checksum,
    #[error("Tictac tree version {0}; this release reads 1")]
    Version(u8),
    #[error("the Tictac tree's length does not match its branch count")]
    Length,
    #[error("branch {0} is out of range or out of order")]
    Branch(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> [u8; 20] {
        crate::testing::spread_hash(i)
    }

    fn clock(n: u64) -> u32 {
        clock_hash([(&b"actor-a"[..], n), (&b"actor-b"[..], 1)])
    }

    #[test]
    fn the_order_of_writes_does_not_matter_and_removal_undoes() {
        let mut a = TictacTree::new();
        let mut b = TictacTree::new();
        for i in 0..1000 {
            a.replace(&key(i), None, Some(clock(1)));
        }
        for i in (0..1000).rev() {
            b.replace(&key(i), None, Some(clock(1)));
        }
        assert_eq!(a, b);
        for i in 0..1000 {
            a.replace(&key(i), Some(clock(1)), None);
        }
        assert!(a.root().iter().all(|h| *h == 0));
    }

    #[test]
    fn a_clock_hash_ignores_the_order_of_entries() {
        let one = clock_hash([(&b"x"[..], 3), (&b"y"[..], 4)]);
        let other = clock_hash([(&b"y"[..], 4), (&b"x"[..], 3)]);
        assert_eq!(one, other);
        assert_ne!(one, clock_hash([(&b"x"[..], 3), (&b"y"[..], 5)]));
        assert_eq!(clock_hash(std::iter::empty::<(&[u8], u64)>()), 0);
    }

    #[test]
    fn a_changed_key_shows_in_its_branch_and_segment_only() {
        let mut a = TictacTree::new();
        for i in 0..5000 {
            a.replace(&key(i), None, Some(clock(1)));
        }
        let mut b = a.clone();
        b.replace(&key(77), Some(clock(1)), Some(clock(2)));
        let branches = TictacTree::dirty_branches(a.root(), b.root());
        let seg = segment_of(&key(77));
        assert_eq!(branches, vec![seg / SEGMENTS_PER_BRANCH as u32]);
        let segs = TictacTree::dirty_segments(
            branches[0],
            &a.branch(branches[0] as usize),
            &b.branch(branches[0] as usize),
        );
        assert_eq!(segs, vec![seg]);
        assert_ne!(a.segment(seg), b.segment(seg));
    }

    #[test]
    fn a_sorted_clock_hashes_as_it_would_sorted_anew() {
        let e = [(&b"a"[..], 3u64), (&b"bb"[..], 1), (&b"c"[..], 9)];
        assert_eq!(sorted_clock_hash(e), clock_hash(e.iter().rev().copied()));
        // The streamed bytes are the documented ones.
        let mut bytes = Vec::new();
        for (a, c) in e {
            bytes.extend_from_slice(&(a.len() as u32).to_be_bytes());
            bytes.extend_from_slice(a);
            bytes.extend_from_slice(&c.to_be_bytes());
        }
        assert_eq!(
            sorted_clock_hash(e),
            xxhash_rust::xxh3::xxh3_64(&bytes) as u32
        );
    }

    #[test]
    fn keys_moved_between_the_same_clocks_do_not_cancel() {
        // Two keys of one branch, both rewritten from one clock to
        // another (a bulk rewrite by one actor).
        let (a, b) = (0..100_000u32)
            .map(key)
            .find_map(|x| {
                (100_000..200_000u32).map(key).find_map(|y| {
                    (segment_of(&x) / SEGMENTS_PER_BRANCH as u32
                        == segment_of(&y) / SEGMENTS_PER_BRANCH as u32)
                        .then_some((x, y))
                })
            })
            .unwrap();
        let mut before = TictacTree::new();
        before.replace(&a, None, Some(clock(1)));
        before.replace(&b, None, Some(clock(1)));
        let mut after = before.clone();
        after.replace(&a, Some(clock(1)), Some(clock(2)));
        after.replace(&b, Some(clock(1)), Some(clock(2)));
        assert_ne!(before.root(), after.root());
    }

    #[test]
    fn the_persisted_form_round_trips_and_refuses_damage() {
        let mut t = TictacTree::new();
        for i in 0..300 {
            t.replace(&key(i), None, Some(clock(i as u64)));
        }
        let bytes = t.encode();
        assert_eq!(TictacTree::decode(&bytes), Ok(t.clone()));
        assert_eq!(
            TictacTree::decode(&TictacTree::new().encode()),
            Ok(TictacTree::new())
        );
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        assert_eq!(TictacTree::decode(&flipped), Err(DecodeError::Checksum));
        for cut in [0, 5, 12, bytes.len() - 1] {
            assert!(TictacTree::decode(&bytes[..cut]).is_err());
        }
    }
}
