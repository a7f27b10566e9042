//! A select as a digest read (Cassandra's word): the asking node reads
//! its own replicas in full; every other node that may hold samples
//! answers, for each series the selectors choose, with digests instead
//! of samples; the asker fetches samples only where a digest differs
//! from its own. Every node is still asked (a sample that only a
//! fallback holds is answered), but replicas that agree send a few
//! bytes a series and read almost nothing.
//!
//! A replica's digests of a series (`answer`):
//! - for the part of the range whose slices (anti-entropy's hours of a
//!   home partition) have digests kept, those digests: kept digests
//!   cost no read, and two replicas whose digest of a slice agree hold
//!   the same samples of every series of the home in it;
//! - for the rest (the slices not settled, busy or not yet computed:
//!   usually the last hour), the digest of the series' points there,
//!   read.
//!
//! The asker compares each with its own (its kept slice digests, its
//! points), and fetches each part that differs once for each distinct
//! digest, from one node that offered it; if that node does not send it,
//! from another that offered the same, until none is left
//! ([`DigestRead`], pure).

use crate::msg::{FoundDigest, HomeKept, Reply};
use rill_promql::value::{Point, Series};
use rill_tsdb::prom_source::PromSource;
use rill_tsdb::Engine;
use std::collections::{BTreeMap, BTreeSet, HashMap};

const MS: i64 = 1_000_000;

/// The digest of a series' points: xxh3-64 of each point's time (ms)
/// and value bits (i64 and u64 LE) in time order. Replicas holding the
/// same samples give the same digest, whatever their blocks.
pub fn points_digest(points: impl Iterator<Item = (i64, f64)>) -> u64 {
    // Hashed a few KB at a time: an update per point costs more than
    // the hash.
    const CHUNK: usize = 4096;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = [0u8; CHUNK];
    let mut at = 0;
    for (t, v) in points {
        if at == CHUNK {
            h.update(&buf);
            at = 0;
        }
        buf[at..at + 8].copy_from_slice(&t.to_le_bytes());
        buf[at + 8..at + 16].copy_from_slice(&v.to_bits().to_le_bytes());
        at += 16;
    }
    h.update(&buf[..at]);
    h.digest()
}

/// A part of a series to fetch: its key, first and last ms.
pub type Item = (String, i64, i64);

/// A digest as offered: kind (0 the points', 1 a home slice's; 2 a part
/// the answer does not account for, unique to the node: never equal to
/// another node's), count and digest. Equal ones of one item stand for
/// the same samples.
type Summary = (u8, u64, u64);

/// What the asking node holds, to compare offers with.
pub trait Mine {
    /// Its points of series `key` from `from` to `to` ms: count and
    /// digest.
    fn points(&mut self, key: &str, from: i64, to: i64) -> (u64, u64);
    /// Its kept digest of the slice at `start` (ns, `slice` ns long) of
    /// home `home` of `db`: samples and digest, if kept.
    fn kept(&mut self, db: &str, home: u32, slice: i64, start: i64) -> Option<(u64, u64)>;
}

/// What a digest read fetches, pure (module doc).
#[derive(Default)]
pub struct DigestRead {
    /// Parts wanted: by item, each digest not this node's with the nodes
    /// that offered it.
    other: BTreeMap<Item, BTreeMap<Summary, BTreeSet<String>>>,
    /// What the last [`fetches`](Self::fetches) asked of each node.
    asked: BTreeMap<String, Vec<(Item, Summary)>>,
}

impl DigestRead {
    /// What node `node` offers of the range `mint..=maxt` ms (a
    /// [`Reply::SeriesDigests`]), compared with `mine`.
    pub fn offer(
        &mut self,
        node: &str,
        homes: &[HomeKept],
        series: Vec<FoundDigest>,
        (mint, maxt): (i64, i64),
        mine: &mut dyn Mine,
    ) {
        if mint > maxt {
            return;
        }
        for f in series {
            let from = f.from.clamp(mint, maxt.saturating_add(1));
            let homes: Vec<&HomeKept> = f
                .homes
                .iter()
                .filter_map(|&i| homes.get(i as usize))
                .collect();
            // What the kept slices of every home of the series reach,
            // whole and in order from the range's first: what they do
            // not, the answer does not say (a malformed one) and is
            // fetched, as a part only this node offered.
            let reach = homes
                .iter()
                .map(|h| reach(h, mint))
                .min()
                .unwrap_or(mint)
                .min(from);
            if reach < from {
                let unknown = (2, 0, xxhash_rust::xxh3::xxh3_64(node.as_bytes()));
                self.want(node, (f.key.clone(), reach, from - 1), unknown);
            }
            for h in homes {
                for &(start, digest, samples) in &h.slices {
                    let lo = (start / MS).max(mint);
                    let hi = (start.saturating_add(h.slice) / MS - 1).min(reach - 1);
                    if lo > hi || samples == 0 {
                        continue;
                    }
                    if mine.kept(&h.db, h.home, h.slice, start) == Some((samples, digest)) {
                        continue;
                    }
                    self.want(node, (f.key.clone(), lo, hi), (1, samples, digest));
                }
            }
            if from <= maxt
                && f.points > 0
                && mine.points(&f.key, from, maxt) != (f.points, f.digest)
            {
                self.want(node, (f.key, from, maxt), (0, f.points, f.digest));
            }
        }
    }

    fn want(&mut self, node: &str, item: Item, summary: Summary) {
        self.other
            .entry(item)
            .or_default()
            .entry(summary)
            .or_default()
            .insert(node.to_string());
    }

    /// The parts to fetch of each node now (adjacent parts of a series
    /// as one): for each part and digest still wanted, of the nodes
    /// offering it one already asked for another part if there is one
    /// (so fewer nodes are asked), else the first by name. Empty when
    /// nothing is left to fetch.
    pub fn fetches(&mut self) -> BTreeMap<String, Vec<Item>> {
        self.asked.clear();
        for (item, digests) in &self.other {
            for (summary, nodes) in digests {
                let node = nodes
                    .iter()
                    .find(|n| self.asked.contains_key(*n))
                    .or_else(|| nodes.iter().next())
                    .expect("a digest left is offered by some node");
                self.asked
                    .entry(node.clone())
                    .or_default()
                    .push((item.clone(), *summary));
            }
        }
        self.asked
            .iter()
            .map(|(node, wanted)| {
                let mut items: Vec<Item> = Vec::with_capacity(wanted.len());
                for ((key, lo, hi), _) in wanted {
                    match items.last_mut() {
                        Some((k, _, h)) if k == key && *h >= lo.saturating_sub(1) => {
                            *h = (*h).max(*hi)
                        }
                        _ => items.push((key.clone(), *lo, *hi)),
                    }
                }
                (node.clone(), items)
            })
            .collect()
    }

    /// Node `node` sent what it was asked for.
    pub fn fetched(&mut self, node: &str) {
        for (item, summary) in self.asked.remove(node).unwrap_or_default() {
            if let Some(digests) = self.other.get_mut(&item) {
                digests.remove(&summary);
                if digests.is_empty() {
                    self.other.remove(&item);
                }
            }
        }
    }

    /// Node `node` did not send what it was asked for: what it offered
    /// is wanted of the others that offered the same.
    pub fn failed(&mut self, node: &str) {
        self.asked.remove(node);
        self.other.retain(|_, digests| {
            digests.retain(|_, nodes| {
                nodes.remove(node);
                !nodes.is_empty()
            });
            !digests.is_empty()
        });
    }
}

/// The ms up to which (excluded) home `h`'s kept slices stand for its
/// samples, from the slice holding `mint` on: `mint` when they do not
/// start there, are not whole ms, or are not one after another.
fn reach(h: &HomeKept, mint: i64) -> i64 {
    if h.slice <= 0 || h.slice % MS != 0 {
        return mint;
    }
    let mut next = mint
        .saturating_mul(MS)
        .div_euclid(h.slice)
        .saturating_mul(h.slice);
    for &(start, _, _) in &h.slices {
        if start != next {
            break;
        }
        next = next.saturating_add(h.slice);
    }
    (next / MS).max(mint)
}

/// The slices a digest read of `mint..=maxt` ms covers: from `from` ns
/// to `to` ns, the end of the slice holding `maxt` (so every slice is
/// whole).
fn slice_range(engine: &Engine, mint: i64, maxt: i64) -> (i64, i64) {
    let slice = engine.slice_ns();
    let from = mint.saturating_mul(MS);
    let last = maxt.saturating_mul(MS).saturating_add(MS - 1);
    let to = last
        .div_euclid(slice)
        .saturating_add(1)
        .saturating_mul(slice);
    (from, to)
}

/// A home's kept slice digests as `Engine::kept_digests` gives them:
/// one a slice from the first start on (samples and digest where kept),
/// found by its start's place.
struct KeptSlices {
    first: i64,
    slices: Vec<Option<(u64, u64)>>,
}

impl KeptSlices {
    fn get(&self, slice: i64, start: i64) -> Option<(u64, u64)> {
        let at = start.checked_sub(self.first)?;
        if at < 0 || at % slice != 0 {
            return None;
        }
        *self.slices.get(usize::try_from(at / slice).ok()?)?
    }
}

/// The asking node's side: its points (the series it read) and its
/// kept slice digests.
pub struct LocalMine<'a> {
    engine: &'a Engine,
    now: i64,
    range: (i64, i64),
    points: HashMap<String, &'a [Point]>,
    /// This node's kept digests by database and home, looked up once.
    kept: HashMap<String, HashMap<u32, KeptSlices>>,
}

impl<'a> LocalMine<'a> {
    /// `local`: what this node read of `mint..=maxt` ms at `now`.
    pub fn new(
        engine: &'a Engine,
        now: i64,
        (mint, maxt): (i64, i64),
        local: &'a [Series],
    ) -> Self {
        LocalMine {
            engine,
            now,
            range: slice_range(engine, mint, maxt),
            points: local
                .iter()
                .map(|s| (crate::merge::key_of(&s.labels), s.points.as_slice()))
                .collect(),
            kept: HashMap::new(),
        }
    }
}

impl Mine for LocalMine<'_> {
    fn points(&mut self, key: &str, from: i64, to: i64) -> (u64, u64) {
        let p = self.points.get(key).copied().unwrap_or_default();
        let lo = p.partition_point(|x| x.t < from);
        let hi = p.partition_point(|x| x.t <= to);
        let part = &p[lo..hi.max(lo)];
        (
            part.len() as u64,
            points_digest(part.iter().map(|x| (x.t, x.v))),
        )
    }

    fn kept(&mut self, db: &str, home: u32, slice: i64, start: i64) -> Option<(u64, u64)> {
        if slice != self.engine.slice_ns() {
            return None;
        }
        let (engine, now, (from, to)) = (self.engine, self.now, self.range);
        let of_db = match self.kept.get_mut(db) {
            Some(of_db) => of_db,
            None => self.kept.entry(db.to_string()).or_default(),
        };
        of_db
            .entry(home)
            .or_insert_with(|| {
                let kept = engine.kept_digests(db, home, from, to, now);
                KeptSlices {
                    first: kept.first().map_or(0, |k| k.0),
                    slices: kept
                        .into_iter()
                        .map(|(_, d)| d.map(|d| (d.samples, d.digest)))
                        .collect(),
                }
            })
            .get(slice, start)
    }
}

/// A replica's answer to a digest read of the series `keep` takes over
/// `mint..=maxt` ms at the asker's time `src.now` (this node's clock
/// now is `local_now`; module doc).
pub fn answer(
    src: &PromSource<'_>,
    keep: &dyn Fn(&rill_sensor::Series) -> bool,
    mint: i64,
    maxt: i64,
    local_now: i64,
) -> Result<Reply, String> {
    let engine = src.engine;
    if mint > maxt {
        return Ok(Reply::SeriesDigests {
            homes: Vec::new(),
            series: Vec::new(),
        });
    }
    let slice = engine.slice_ns();
    let (from, to) = slice_range(engine, mint, maxt);
    // Kept digests are judged by the earlier of the asker's clock and
    // this node's (as anti-entropy's): an asker ahead does not move
    // this node's storage period.
    let kept_now = src.now.min(local_now);
    let mut dbs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (db, s) in engine.select_where(keep) {
        dbs.entry(s.key()).or_default().push(db);
    }
    let mut homes: Vec<HomeKept> = Vec::new();
    // By (database, home): its index and the ns its kept slices reach.
    let mut index: HashMap<(String, u32), (u32, i64)> = HashMap::new();
    let mut series = Vec::with_capacity(dbs.len());
    for (key, in_dbs) in dbs {
        let mut at = Vec::with_capacity(in_dbs.len());
        let mut covered = i64::MAX;
        for db in in_dbs {
            let Some(home) = engine.home_of(&db, &key) else {
                covered = from;
                continue;
            };
            let (i, reach) = *index.entry((db.clone(), home)).or_insert_with(|| {
                let kept = if slice % MS == 0 {
                    engine.kept_digests(&db, home, from, to, kept_now)
                } else {
                    Vec::new()
                };
                // Only a prefix from the range's first slice counts: a
                // range cut by the storage period compares by points.
                let first = from.div_euclid(slice).saturating_mul(slice);
                let slices: Vec<(i64, u64, u64)> = if kept.first().is_some_and(|(s, _)| *s == first)
                {
                    kept.iter()
                        .map_while(|(s, d)| d.map(|d| (*s, d.digest, d.samples)))
                        .collect()
                } else {
                    Vec::new()
                };
                let reach = slices
                    .last()
                    .map_or(from, |(s, _, _)| s.saturating_add(slice));
                homes.push(HomeKept {
                    db: db.clone(),
                    home,
                    slice,
                    slices,
                });
                ((homes.len() - 1) as u32, reach)
            });
            at.push(i);
            covered = covered.min(reach);
        }
        // The ms from which the points are digested: the kept slices
        // stand for what is before.
        let from_ms = covered.max(from) / MS;
        series.push(FoundDigest {
            key,
            homes: at,
            from: from_ms,
            points: 0,
            digest: 0,
        });
    }
    // The rest read: one pass for every series whose rest is not empty.
    let items: Vec<(String, i64, i64)> = series
        .iter()
        .filter(|f| f.from <= maxt)
        .map(|f| (f.key.clone(), f.from, maxt))
        .collect();
    let mut read: HashMap<String, (u64, u64)> = HashMap::with_capacity(items.len());
    src.select_ranges(&items, &mut |key, points| {
        let summary = (
            points.len() as u64,
            points_digest(points.iter().map(|p| (p.t, p.v))),
        );
        read.insert(key.to_string(), summary);
        true
    })?;
    for f in &mut series {
        if let Some(&(n, d)) = read.get(&f.key) {
            (f.points, f.digest) = (n, d);
        }
    }
    Ok(Reply::SeriesDigests { homes, series })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000 * MS;

    /// This node's side: points by key, kept slice digests of home 7 of
    /// "db" by slice start.
    #[derive(Default)]
    struct Fake {
        points: HashMap<String, Vec<(i64, f64)>>,
        kept: HashMap<i64, (u64, u64)>,
    }

    impl Mine for Fake {
        fn points(&mut self, key: &str, from: i64, to: i64) -> (u64, u64) {
            let p: Vec<(i64, f64)> = self
                .points
                .get(key)
                .into_iter()
                .flatten()
                .copied()
                .filter(|(t, _)| (from..=to).contains(t))
                .collect();
            (p.len() as u64, points_digest(p.into_iter()))
        }
        fn kept(&mut self, db: &str, home: u32, slice: i64, start: i64) -> Option<(u64, u64)> {
            (db == "db" && home == 7 && slice == HOUR)
                .then(|| self.kept.get(&start).copied())
                .flatten()
        }
    }

    /// Home 7's kept slices: hour i (from 0) with digest d_i, 10 samples.
    fn home(digests: &[u64]) -> Vec<HomeKept> {
        vec![HomeKept {
            db: "db".into(),
            home: 7,
            slice: HOUR,
            slices: digests
                .iter()
                .enumerate()
                .map(|(i, &d)| (i as i64 * HOUR, d, 10))
                .collect(),
        }]
    }

    /// Series `key` of home 7, kept slices standing for it up to `from`
    /// ms; its points after: `tail`.
    fn found(key: &str, from: i64, tail: &[(i64, f64)]) -> FoundDigest {
        FoundDigest {
            key: key.into(),
            homes: vec![0],
            from,
            points: tail.len() as u64,
            digest: points_digest(tail.iter().copied()),
        }
    }

    const H_MS: i64 = 3_600_000;

    #[test]
    fn only_slices_and_rests_that_differ_are_fetched_once_per_digest() {
        let mut mine = Fake {
            kept: [(0, (10, 1)), (HOUR, (10, 2))].into_iter().collect(),
            ..Fake::default()
        };
        let tail = [(2 * H_MS + 5, 1.0)];
        mine.points.insert("a".into(), tail.to_vec());
        let range = (100, 3 * H_MS - 1);
        let mut read = DigestRead::default();
        // x agrees on both hours and the rest: nothing to fetch.
        read.offer(
            "x",
            &home(&[1, 2]),
            vec![found("a", 2 * H_MS, &tail)],
            range,
            &mut mine,
        );
        assert!(read.fetches().is_empty());
        // y differs in the second hour and holds more after; z has the
        // same second hour as y, and its third hour kept (the same rest
        // as y's, as a kept digest), and a series b this node lacks.
        let more = [(2 * H_MS + 5, 1.0), (2 * H_MS + 9, 2.0)];
        read.offer(
            "y",
            &home(&[1, 3]),
            vec![found("a", 2 * H_MS, &more)],
            range,
            &mut mine,
        );
        read.offer(
            "z",
            &home(&[1, 3, 4]),
            vec![found("a", 3 * H_MS, &[]), found("b", 0, &more)],
            range,
            &mut mine,
        );
        let f = read.fetches();
        assert_eq!(
            f.get("y"),
            Some(&vec![("a".to_string(), H_MS, 3 * H_MS - 1)]),
            "y's second hour (z's is the same) and its rest, as one: {f:?}"
        );
        assert_eq!(
            f.get("z"),
            Some(&vec![
                ("a".to_string(), 2 * H_MS, 3 * H_MS - 1),
                ("b".to_string(), 100, 3 * H_MS - 1)
            ]),
            "z's third hour (a kept digest: not y's rest) and b: {f:?}"
        );
        // y does not send: its second hour is asked of z, its rest of
        // nobody (no other node offered the same).
        read.fetched("z");
        read.failed("y");
        let f = read.fetches();
        assert_eq!(
            f,
            [("z".to_string(), vec![("a".to_string(), H_MS, 2 * H_MS - 1)])]
                .into_iter()
                .collect()
        );
        read.fetched("z");
        assert!(read.fetches().is_empty());
    }

    #[test]
    fn a_slice_not_kept_here_or_empty_there_is_judged_by_what_it_holds() {
        let mut mine = Fake::default();
        let mut read = DigestRead::default();
        let mut empty = home(&[5, 6]);
        empty[0].slices[1].2 = 0;
        // Nothing kept here: the first hour is fetched; the second holds
        // nothing there.
        read.offer(
            "x",
            &empty,
            vec![found("a", 2 * H_MS, &[])],
            (0, 2 * H_MS - 1),
            &mut mine,
        );
        assert_eq!(
            read.fetches().get("x"),
            Some(&vec![("a".to_string(), 0, H_MS - 1)])
        );
        // Slices not whole ms, or a gap the answer's `from` passes over:
        // what they would stand for is fetched.
        let mut odd = home(&[5]);
        odd[0].slice = HOUR + 1;
        let mut read = DigestRead::default();
        read.offer(
            "x",
            &odd,
            vec![found("a", H_MS, &[])],
            (0, H_MS - 1),
            &mut mine,
        );
        assert_eq!(
            read.fetches().get("x"),
            Some(&vec![("a".to_string(), 0, H_MS - 1)])
        );
        let mut gap = home(&[5, 6, 7]);
        gap[0].slices.remove(1);
        let mut read = DigestRead::default();
        mine.kept = [(0, (10, 5)), (2 * HOUR, (10, 7))].into_iter().collect();
        read.offer(
            "x",
            &gap,
            vec![found("a", 3 * H_MS, &[])],
            (0, 3 * H_MS - 1),
            &mut mine,
        );
        assert_eq!(
            read.fetches().get("x"),
            Some(&vec![("a".to_string(), H_MS, 3 * H_MS - 1)]),
            "from the gap on"
        );
    }

    #[test]
    fn points_digests_see_order_and_values() {
        assert_ne!(
            points_digest([(1, 1.0), (2, 2.0)].into_iter()),
            points_digest([(1, 2.0), (2, 1.0)].into_iter())
        );
        // Across the hashing chunk's edge, the same as hashed at once.
        let many: Vec<(i64, f64)> = (0..1000).map(|i| (i, i as f64)).collect();
        let mut bytes = Vec::new();
        for (t, v) in &many {
            bytes.extend_from_slice(&t.to_le_bytes());
            bytes.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        assert_eq!(
            points_digest(many.into_iter()),
            xxhash_rust::xxh3::xxh3_64(&bytes)
        );
    }

    /// A kept slice is found by its start's place; a start off the
    /// slices' grid, before the first or past the last is not kept.
    #[test]
    fn kept_slices_are_found_by_their_start() {
        let k = KeptSlices {
            first: 5 * HOUR,
            slices: vec![Some((10, 1)), None, Some((3, 2))],
        };
        assert_eq!(k.get(HOUR, 5 * HOUR), Some((10, 1)));
        assert_eq!(k.get(HOUR, 6 * HOUR), None);
        assert_eq!(k.get(HOUR, 7 * HOUR), Some((3, 2)));
        assert_eq!(k.get(HOUR, 8 * HOUR), None);
        assert_eq!(k.get(HOUR, 4 * HOUR), None);
        assert_eq!(k.get(HOUR, 5 * HOUR + 1), None);
        assert_eq!(k.get(HOUR, i64::MIN), None);
    }
}
