//! What a home partition holds, summed up for anti-entropy
//! (`rill-sensor-cluster`'s exchange): a digest per slice of time, so two
//! replicas compare a month of a partition in a few kilobytes and send
//! each other only the slices that differ.
//!
//! A slice is an hour of sample time, aligned to the hour (or the
//! engine's window, if that is shorter); the last slice asked for may
//! end early. A slice's digest is the XOR over the home's series of
//! xxh3 of (key, every sample's time and value bits, in time order), so
//! it depends on what is held, not on the order it came in, and two
//! replicas holding the same samples agree whatever their blocks.
//!
//! Digests of settled slices are kept. A slice is settled once it ended
//! before `now - grace` (when it was asked for): ingest rarely writes
//! there, so a kept digest stays true. A write that does (a late
//! sample, a repair, a hand-off) marks the slices it touched, and their
//! kept digests are computed again when next asked for; so are a home's
//! once the home was dropped. Marks and digests older than
//! the storage period are let go. Slices computed empty are kept as runs
//! (`kept`), so a long storage period costs what its data does.
//!
//! A slice marked within the grace period before `now` is busy: a
//! backfill or a repair is writing it, on this replica and likely on the
//! others, so it is neither read nor compared until it has been quiet for
//! the grace period (a backfill of a month would otherwise have every
//! round read again every slice it touched since the last, and repair
//! what is still on its way).

use super::kept::{HomeDigests, Kept};
use super::{Engine, EngineError};
use rill_sensor::Sample;
use std::collections::BTreeMap;

/// The longest slice: an hour.
pub const MAX_SLICE_NS: i64 = 3_600_000_000_000;

/// A slice's digest and how many samples it covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SliceDigest {
    pub digest: u64,
    pub samples: u64,
    /// Written within the grace period: not read, not to be compared.
    pub busy: bool,
}

/// A series of a home: key, group key, samples (a page of them).
pub type HomeSeries = (String, Option<String>, Vec<Sample>);

/// Slices of a home as [`Engine::slice_digests`] and
/// [`Engine::kept_digests`] see them.
struct Slices {
    /// The first slice's start.
    first: i64,
    slice: i64,
    settled: i64,
    /// The range's end, no later than now.
    to: i64,
    drops: u64,
    /// Write marks by slice start: (mark, when).
    marks: BTreeMap<i64, (u64, i64)>,
    /// In order, every slice but those known to hold nothing (in a run
    /// computed and unmarked, or kept with no sample): its kept digest,
    /// busy, or default (in `missing`).
    out: Vec<(i64, SliceDigest)>,
    /// Indices into `out` of slices neither kept nor busy.
    missing: Vec<usize>,
}

/// The digest of one series' samples (in time order) within a slice.
pub fn series_digest(key: &str, samples: &[Sample]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    for s in samples {
        h.update(&s.ts.to_le_bytes());
        h.update(&s.value.to_bits().to_le_bytes());
    }
    h.digest()
}

impl Engine {
    /// The slice length: an hour, or the window if shorter.
    pub fn slice_ns(&self) -> i64 {
        self.opts.window_ns.min(MAX_SLICE_NS)
    }

    /// The first slice's start of a range from `from` in `db` at `now`:
    /// `from` rounded down to a slice, and no slice part of which has
    /// expired (replicas expire files at their own times, the rule for
    /// reads is the same on each).
    pub fn first_slice(&self, db: &str, from: i64, now: i64) -> i64 {
        let slice = self.slice_ns();
        let oldest = now.saturating_sub(self.opts.retention(db));
        let first = from.max(oldest).div_euclid(slice) * slice;
        if first < oldest {
            first.saturating_add(slice)
        } else {
            first
        }
    }

    /// The digests of home `home` of `db` for the slices from
    /// [`first_slice`](Self::first_slice) to `to` (excluded; the last
    /// slice ends there; never past `now`), judged at `now` as reads
    /// are: in order, those that hold samples or are busy (a slice
    /// absent holds none). `now` is trusted: a replica answering another
    /// node takes the earlier of the asker's and its own clock.
    pub fn slice_digests(
        &self,
        db: &str,
        home: u32,
        from: i64,
        to: i64,
        now: i64,
    ) -> Result<Vec<(i64, SliceDigest)>, EngineError> {
        let Some(plan) = self.slices(db, home, from, to, now, true) else {
            return Ok(Vec::new());
        };
        let Slices {
            first: _,
            slice,
            settled,
            to,
            drops,
            marks,
            mut out,
            missing,
        } = plan;
        // Each run of adjacent slices not kept is read once: a month
        // kept and its newest hour not yet is an hour's read.
        let mut runs: Vec<&[usize]> = Vec::new();
        let mut at = 0;
        for k in 1..=missing.len() {
            if k == missing.len() || out[missing[k]].0 != out[missing[k - 1]].0 + slice {
                runs.push(&missing[at..k]);
                at = k;
            }
        }
        let series = if runs.is_empty() {
            Vec::new()
        } else {
            self.series_of_home(db, home)
        };
        for run in runs {
            let t0 = out[run[0]].0;
            let t1 = out[run[run.len() - 1]].0.saturating_add(slice).min(to) - 1;
            // A series at a time: memory for one series' run, not the
            // home's.
            for (key, _) in &series {
                let samples = self.read_stored(db, home, key, t0, t1, now)?;
                let mut rest: &[Sample] = &samples;
                for &i in run {
                    let s = out[i].0;
                    let end = (s + slice).min(to);
                    let lo = rest.partition_point(|x| x.ts < s);
                    let hi = rest.partition_point(|x| x.ts < end);
                    if hi > lo {
                        out[i].1.digest ^= series_digest(key, &rest[lo..hi]);
                        out[i].1.samples += (hi - lo) as u64;
                    }
                    rest = &rest[hi.max(lo)..];
                }
            }
        }
        {
            let mut kept = self.kept_digests_lock();
            let of_home = kept.of_home(db, home);
            for &i in &missing {
                let (s, d) = out[i];
                if s + slice <= settled && s + slice <= to {
                    let mark = marks.get(&s).map_or(0, |m| m.0);
                    of_home.keep(s, slice, mark, drops, d);
                }
            }
        }
        out.retain(|(_, d)| d.samples > 0 || d.busy);
        Ok(out)
    }

    /// The digests of home `home` of `db` kept for the slices from
    /// [`first_slice`](Self::first_slice) to `to`, every slice, as
    /// [`slice_digests`](Self::slice_digests) cuts them, reading
    /// nothing: `None` for a slice whose digest is not kept now (not
    /// settled, busy, marked since, or not computed yet). What a digest
    /// read compares before it reads.
    pub fn kept_digests(
        &self,
        db: &str,
        home: u32,
        from: i64,
        to: i64,
        now: i64,
    ) -> Vec<(i64, Option<SliceDigest>)> {
        let Some(plan) = self.slices(db, home, from, to, now, false) else {
            return Vec::new();
        };
        let mut listed: Vec<(i64, Option<SliceDigest>)> =
            plan.out.into_iter().map(|(s, d)| (s, Some(d))).collect();
        for i in plan.missing {
            listed[i].1 = None;
        }
        for (_, d) in &mut listed {
            if d.is_some_and(|d| d.busy) {
                *d = None;
            }
        }
        // Those not listed are known to hold nothing.
        let mut listed = listed.into_iter().peekable();
        std::iter::successors(Some(plan.first), |s| s.checked_add(plan.slice))
            .take_while(|s| *s < plan.to)
            .map(|s| match listed.next_if(|(t, _)| *t == s) {
                Some(l) => l,
                None => (s, Some(SliceDigest::default())),
            })
            .collect()
    }

    /// The slices from `from` to `to` judged at `now`, but those known
    /// to hold nothing: each one's kept digest where it is kept, busy
    /// ones marked, and which are neither (`missing`, digest default).
    /// `settle`: move the engine's settled time up to `now - grace`
    /// (anti-entropy is about to compute and keep the missing ones).
    /// `None` when no slice is in range.
    fn slices(
        &self,
        db: &str,
        home: u32,
        from: i64,
        to: i64,
        now: i64,
        settle: bool,
    ) -> Option<Slices> {
        let slice = self.slice_ns();
        let settled = now.saturating_sub(self.opts.grace_ns);
        let oldest = now.saturating_sub(self.opts.retention(db));
        let first = self.first_slice(db, from, now);
        let to = to.min(now);
        if to <= first {
            return None;
        }
        // Settled from here on: a write touching a slice before it marks
        // the slice (under the same lock the marks are read with).
        let mut drops = 0;
        // This home's marks of the slices asked for; those of slices
        // past the storage period let go.
        let marks: BTreeMap<i64, (u64, i64)> = {
            let mut st = self.lock();
            if settle {
                st.settled = st.settled.max(settled);
            }
            match st.dbs.get_mut(db) {
                Some(d) => {
                    drops = d.drops.get(&home).copied().unwrap_or(0);
                    match d.late.get_mut(&home) {
                        Some(late) => {
                            let keep = oldest.saturating_sub(slice).saturating_add(1);
                            if late.first_key_value().is_some_and(|(s, _)| *s < keep) {
                                *late = late.split_off(&keep);
                            }
                            late.range(first..to).map(|(&s, &m)| (s, m)).collect()
                        }
                        None => BTreeMap::new(),
                    }
                }
                None => BTreeMap::new(),
            }
        };
        let mut out: Vec<(i64, SliceDigest)> = Vec::new();
        let mut missing = Vec::new();
        {
            let mut kept = self.kept_digests_lock();
            // A lookup alone (a digest read, whose database and home a
            // peer names) makes no entry.
            let mut none = HomeDigests::default();
            let of_home = if settle {
                kept.of_home(db, home)
            } else {
                kept.get_home(db, home).unwrap_or(&mut none)
            };
            // Slices whose end is past the storage period's start stay.
            of_home.trim(oldest.saturating_sub(slice).saturating_add(1));
            // The slices to look at: those not in a run computed, those
            // kept, those marked. The rest are known to hold nothing.
            let mut starts: Vec<i64> = Vec::new();
            let mut at = first;
            for (s, e) in of_home.runs_in(first, to, drops) {
                while at < s.min(to) {
                    starts.push(at);
                    at = at.saturating_add(slice);
                }
                at = at.max(e);
            }
            while at < to {
                starts.push(at);
                at = at.saturating_add(slice);
            }
            starts.extend(of_home.slices.range(first..to).map(|(&s, _)| s));
            starts.extend(marks.keys().copied());
            starts.sort_unstable();
            starts.dedup();
            for s in starts {
                let end = (s + slice).min(to);
                let (mark, marked_at) = marks.get(&s).copied().unwrap_or((0, i64::MIN));
                if marked_at > settled {
                    out.push((
                        s,
                        SliceDigest {
                            busy: true,
                            ..SliceDigest::default()
                        },
                    ));
                    continue;
                }
                let whole = end == s + slice;
                match of_home.slices.get(&s) {
                    Some(&(m, k, d)) if whole && m == mark && k == drops => {
                        if d.samples > 0 {
                            out.push((s, d));
                        }
                    }
                    _ => {
                        out.push((s, SliceDigest::default()));
                        missing.push(out.len() - 1);
                    }
                }
            }
        }
        Some(Slices {
            first,
            slice,
            settled,
            to,
            drops,
            marks,
            out,
            missing,
        })
    }

    /// The samples of home `home` of `db` from `t0` to `t1` (both
    /// included), series by series in key order, judged at `now`; from
    /// `after` on (a series key and the last time a page held of it), at
    /// most about `limit` samples (a series' samples may be split).
    /// Also whether more are left.
    #[allow(clippy::too_many_arguments)]
    pub fn home_samples(
        &self,
        db: &str,
        home: u32,
        t0: i64,
        t1: i64,
        now: i64,
        after: Option<(&str, i64)>,
        limit: usize,
    ) -> Result<(Vec<HomeSeries>, bool), EngineError> {
        // Nothing older than the storage period or further ahead than a
        // write may be: a peer's range is bounded.
        let t0 = t0.max(now.saturating_sub(self.opts.retention(db)));
        let t1 = t1.min(now.saturating_add(self.opts.max_future_ns));
        let limit = limit.max(1);
        let mut out = Vec::new();
        let mut held = 0usize;
        for (key, group) in self.series_of_home(db, home) {
            let mut from = t0;
            if let Some((k, t)) = after {
                match key.as_str().cmp(k) {
                    std::cmp::Ordering::Less => continue,
                    std::cmp::Ordering::Equal => match t.checked_add(1) {
                        Some(t) => from = from.max(t),
                        None => continue,
                    },
                    std::cmp::Ordering::Greater => {}
                }
            }
            if from > t1 {
                continue;
            }
            if held >= limit {
                return Ok((out, true));
            }
            // A window at a time, so a page reads about `limit` samples
            // and a window more at most, however long the series.
            let mut samples = Vec::new();
            let mut more = false;
            let mut lo = from;
            loop {
                let hi = lo.saturating_add(self.opts.window_ns - 1).min(t1);
                let mut part = self.read(db, &key, lo, hi, now)?;
                let room = limit - held - samples.len();
                if part.len() > room {
                    part.truncate(room);
                    more = true;
                }
                samples.extend(part);
                if more || hi >= t1 {
                    break;
                }
                if held + samples.len() >= limit {
                    more = true;
                    break;
                }
                lo = hi + 1;
            }
            held += samples.len();
            if !samples.is_empty() {
                out.push((key, group, samples));
            }
            if more {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }

    /// Forgets the kept digests of a home (its data left the node; a
    /// digest computed meanwhile is not trusted either: the home's count
    /// of drops it was made at is behind).
    pub(super) fn forget_digests(&self, db: &str, home: u32) {
        self.kept_digests_lock().forget(db, home);
    }

    /// The windows from the one holding `from` to the one holding `to`
    /// of which home `home` of `db` has blocks stored (and maybe some
    /// expired since), sorted. The shard's keys are looked through once
    /// (a store keeping its keys in memory reads nothing); blocks stored
    /// after are added as they are.
    pub(super) fn stored_windows(
        &self,
        db: &str,
        home: u32,
        from: i64,
        to: i64,
    ) -> Result<Vec<i64>, EngineError> {
        let (w0, w1) = (
            crate::buffer::window_of(from, self.opts.window_ns),
            crate::buffer::window_of(to, self.opts.window_ns),
        );
        let (store, drops) = {
            let mut st = self.lock();
            let Some(d) = st.dbs.get_mut(db) else {
                return Ok(Vec::new());
            };
            let drops = d.drops.get(&home).copied().unwrap_or(0);
            let e = d.stored_windows.entry(home).or_default();
            if e.0 {
                return Ok(e.1.range(w0..=w1).copied().collect());
            }
            (d.stores.get(&home).cloned(), drops)
        };
        // Looked through unlocked: a block stored meanwhile is added to
        // the entry made above, which the keys found join.
        let mut found = std::collections::BTreeSet::new();
        if let Some(store) = store {
            store.fold_keys(&mut |k| {
                if let Some((_, w, _)) = crate::keys::parse_block_key(k) {
                    found.insert(w);
                }
            })?;
        }
        let mut st = self.lock();
        let Some(d) = st.dbs.get_mut(db) else {
            return Ok(Vec::new());
        };
        if d.drops.get(&home).copied().unwrap_or(0) != drops {
            // The home was dropped meanwhile: what was found is of the
            // store dropped, and is not kept (a digest computed from it
            // is not kept either: its count of drops is behind).
            return Ok(found.range(w0..=w1).copied().collect());
        }
        let e = d.stored_windows.entry(home).or_default();
        e.1.extend(found);
        e.0 = true;
        Ok(e.1.range(w0..=w1).copied().collect())
    }

    pub(super) fn kept_digests_lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.digests.lock().unwrap_or_else(|e| e.into_inner())
    }
}
