//! The write path: a write's samples become log records (series
//! definitions first, while not yet durable), are committed with others
//! arriving together, and are added to the buffers in log order.

use super::{Engine, EngineError, Logged, State, WriteReport, MAX_NAME_BYTES};
use crate::catalog::Catalog;
use crate::wal::format::{
    encode_entry, encode_samples, Entry, MAX_ENTRY_SAMPLES, MAX_RECORD_BYTES,
};
use rill_sensor::Sample;
use std::borrow::Cow;
use std::ops::Range;

impl Engine {
    /// Writes samples of series (keys as [`rill_sensor::Series::key`]
    /// gives them) to database `db`; returns once they are durable (as
    /// the log syncs) and visible to reads. Samples older than the
    /// database's storage period or too far ahead of `now` are counted,
    /// not written. On an error nothing was acknowledged, though some of
    /// the samples may have been kept (a write is safe to repeat: a
    /// repeated time keeps the value written last).
    pub fn write(
        &self,
        db: &str,
        series: &[(String, Vec<Sample>)],
        now: i64,
    ) -> Result<WriteReport, EngineError> {
        self.write_grouped(db, series, &[], now)
    }

    /// As [`Engine::write`], each series in the group `groups` names for
    /// it (by position; `None`, or past the end: a group of its own) when
    /// the series is new. Series of one group share their timestamps (the
    /// fields of one line protocol measurement and tag set) and are
    /// stored in one block per window, the timestamps held once.
    pub fn write_grouped(
        &self,
        db: &str,
        series: &[(String, Vec<Sample>)],
        groups: &[Option<&str>],
        now: i64,
    ) -> Result<WriteReport, EngineError> {
        let r = self.write_logged(db, series, groups, now);
        self.counters.count_write(&r);
        r
    }

    fn write_logged(
        &self,
        db: &str,
        series: &[(String, Vec<Sample>)],
        groups: &[Option<&str>],
        now: i64,
    ) -> Result<WriteReport, EngineError> {
        let oldest = now.saturating_sub(self.opts.retention(db));
        let newest = now.saturating_add(self.opts.max_future_ns);
        let mut report = WriteReport::default();
        let kept: Vec<Kept<'_>> = series
            .iter()
            .enumerate()
            .map(|(i, (key, samples))| {
                let group = groups.get(i).copied().flatten();
                if key.len() > MAX_NAME_BYTES || group.is_some_and(|g| g.len() > MAX_NAME_BYTES) {
                    report.bad_series += samples.len() as u64;
                    return (key.as_str(), group, Cow::Borrowed(&[][..]));
                }
                if samples.iter().all(|s| (oldest..=newest).contains(&s.ts)) {
                    return (key.as_str(), group, Cow::Borrowed(samples.as_slice()));
                }
                let mut v = Vec::with_capacity(samples.len());
                for s in samples {
                    if s.ts < oldest {
                        report.too_old += 1;
                    } else if s.ts > newest {
                        report.too_new += 1;
                    } else {
                        v.push(*s);
                    }
                }
                (key.as_str(), group, Cow::Owned(v))
            })
            .filter(|(_, _, v)| !v.is_empty())
            .collect();
        if kept.is_empty() {
            return Ok(report);
        }
        self.create_database(db)?;
        let mut tickets = Vec::new();
        let mut first_err = None;
        {
            let mut st = self.lock();
            let unstored = st.unstored.samples();
            if unstored > self.opts.max_unstored_samples {
                return Err(EngineError::Busy(unstored));
            }
            for record in records(&mut st.catalog, db, &kept)? {
                // Records appended before a failure are still committed
                // (and added in order), the rest not written.
                let ticket = match self.wal.append(&record.payload) {
                    Ok(t) => t,
                    Err(e) => {
                        first_err = Some(EngineError::from(e));
                        break;
                    }
                };
                let seq = st.next_seq;
                st.next_seq += 1;
                st.logged.push_back(Logged {
                    seq,
                    segment: ticket.segment_at_least,
                    db: db.to_string(),
                    now,
                    defines: record.defines,
                    series: record.series,
                    flat: record.flat,
                    done: None,
                });
                tickets.push((seq, ticket));
            }
        }
        let mut last_seq = 0;
        for (seq, ticket) in tickets {
            let r = self.wal.commit(ticket);
            let mut st = self.lock();
            if let Some(l) = st.logged.iter_mut().find(|l| l.seq == seq) {
                l.done = Some(r.is_ok());
            }
            self.apply_done(&mut st);
            drop(st);
            last_seq = seq;
            if let Err(e) = r {
                first_err.get_or_insert(EngineError::from(e));
            }
        }
        let mut st = self.lock();
        while st.applied < last_seq {
            st = self.applied.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        match first_err {
            Some(e) => Err(e),
            None => {
                report.written = kept.iter().map(|(_, _, v)| v.len() as u64).sum();
                Ok(report)
            }
        }
    }

    /// Adds the writes at the front of the log order whose commits have
    /// returned to the buffers.
    fn apply_done(&self, st: &mut State) {
        let mut any = false;
        while let Some(done) = st.logged.front().and_then(|l| l.done) {
            let l = st.logged.pop_front().expect("front seen");
            any = true;
            st.applied = l.seq;
            if !done {
                continue;
            }
            for id in &l.defines {
                st.catalog.made_durable(*id);
            }
            let State {
                dbs,
                unstored,
                catalog,
                settled,
                late_seq,
                ..
            } = st;
            let d = dbs.get_mut(&l.db).expect("a written database is open");
            let mut last_home = None;
            for (id, group, range) in &l.series {
                let samples = &l.flat[range.clone()];
                d.buffers.add(*group, *id, samples, l.segment);
                let home = catalog.home(*id);
                if home != last_home {
                    last_home = home;
                    if let Some(h) = home {
                        *d.writes.entry(h).or_default() += 1;
                    }
                }
                // A sample in a settled slice marks it (engine/digest.rs):
                // a pass over the samples, an insert per slice touched.
                if let Some(h) = home {
                    if samples.iter().any(|s| s.ts < *settled) {
                        *late_seq += 1;
                        let slice = self.slice_ns();
                        let mut last = None;
                        for s in samples.iter().filter(|s| s.ts < *settled) {
                            let start = s.ts.div_euclid(slice) * slice;
                            if last != Some(start) {
                                last = Some(start);
                                // The later time: a write judged at an
                                // earlier one does not end a busy spell.
                                let m = d
                                    .late
                                    .entry(h)
                                    .or_default()
                                    .entry(start)
                                    .or_insert((0, i64::MIN));
                                *m = (*late_seq, m.1.max(l.now));
                            }
                        }
                    }
                }
            }
            // Cut after the whole write: the fields of its lines leave
            // together.
            let mut cuts = Vec::new();
            d.buffers.take_full(&mut cuts);
            unstored.extend(&l.db, cuts);
        }
        if any {
            self.applied.notify_all();
        }
    }
}

/// A write's series kept: key, group key, samples.
type Kept<'a> = (&'a str, Option<&'a str>, Cow<'a, [Sample]>);

/// One log record of a write.
#[derive(Default)]
struct Record {
    payload: Vec<u8>,
    defines: Vec<u64>,
    /// Each series' id, group and samples (a range of `flat`).
    series: Vec<(u64, u64, Range<usize>)>,
    flat: Vec<Sample>,
}

/// A write's records: definitions of series not yet durable, then their
/// samples, split so no record passes the log's size.
fn records(
    catalog: &mut Catalog,
    db: &str,
    series: &[Kept<'_>],
) -> Result<Vec<Record>, EngineError> {
    let invalid = |e: crate::wal::format::FormatError| EngineError::Invalid(e.to_string());
    let limit = MAX_RECORD_BYTES / 2;
    let mut out = Vec::new();
    // Sized for the whole write (up to a record's size): not regrown.
    let total: usize = series.iter().map(|(_, _, s)| s.len()).sum();
    let mut cur = Record {
        payload: Vec::with_capacity((total * 19 + series.len() * 16).min(limit + 64)),
        flat: Vec::with_capacity(total.min(limit / 16)),
        ..Record::default()
    };
    for (key, group_key, samples) in series {
        let (id, group, define) = catalog.id(db, key, *group_key);
        for chunk in samples.chunks(MAX_ENTRY_SAMPLES) {
            // A chunk is at most 64 Ki samples of 19 bytes: 1.2 MiB.
            if cur.payload.len() > limit {
                out.push(std::mem::take(&mut cur));
            }
            if define && !cur.defines.contains(&id) {
                let d = catalog.definition(id).expect("made above");
                let e = Entry::Series {
                    id,
                    db: d.db.into_bytes(),
                    key: d.key.into_bytes(),
                    group: d.group,
                    group_key: d.group_key.into_bytes(),
                };
                encode_entry(&mut cur.payload, &e).map_err(invalid)?;
                cur.defines.push(id);
            }
            encode_samples(&mut cur.payload, id, chunk).map_err(invalid)?;
            let at = cur.flat.len();
            cur.flat.extend_from_slice(chunk);
            cur.series.push((id, group, at..cur.flat.len()));
        }
    }
    if !cur.payload.is_empty() {
        out.push(cur);
    }
    Ok(out)
}
