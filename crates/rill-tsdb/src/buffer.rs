//! Each series' samples wait here, window by window, until they fill a
//! block (the sensor-data paper's B, counted in samples) or their window
//! closes; then they leave as a [`Cut`] to be encoded and stored. Pure:
//! time is a parameter.
//!
//! Series are buffered by group (the fields of one measurement and tag
//! set, which share their timestamps): a group's window is cut whole, so
//! its series leave together and their block holds the timestamps once.
//! A write adds each series' samples in turn, then [`Buffers::take_full`]
//! cuts the windows it filled: at the time where the first of their
//! series holds B samples, every series giving what it has up to there
//! (so the fields of one line stay in one block).
//!
//! Within a window the samples are kept in time order; a repeated
//! timestamp keeps the value written last. Samples may arrive out of
//! order, within a window or for an earlier window still open; a sample
//! for a window already cut opens it again, and its next cut becomes a
//! later part of that window (the store numbers the parts; a query reads
//! them in order, the later part winning on a repeated time).
//!
//! A window that has ended is cut once it went quiet: when no sample came
//! for it since the previous [`Buffers::close`] (the engine's tick, every
//! second or so). Live ingest writes nothing into an ended window, so it
//! is cut at its first tick; a backfill writing history keeps the window
//! it is writing whole until it moves on, instead of cutting it into a
//! part a tick (more blocks, more bytes, slower reads; a slower writer,
//! more parts).
//!
//! Each window remembers the oldest log segment its samples came from, so
//! the log can drop every segment older than all waiting samples.

use crate::FastMap;
use rill_sensor::Sample;
use std::collections::BTreeMap;

/// Samples of one group and window, leaving the buffer to be stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Cut {
    pub group: u64,
    /// The window's start, ns (a multiple of the window length).
    pub window: i64,
    /// Each series' samples, by series id rising: in time order, no
    /// timestamp twice, never empty.
    pub columns: Vec<(u64, Vec<Sample>)>,
    /// The oldest log segment holding one of the samples: the log keeps
    /// it until the cut is stored.
    pub segment: u64,
}

impl Cut {
    /// Samples of every series.
    pub fn samples(&self) -> usize {
        self.columns.iter().map(|(_, v)| v.len()).sum()
    }

    /// The samples of `series`, if the cut has some.
    pub fn column(&self, series: u64) -> Option<&[Sample]> {
        self.columns
            .binary_search_by_key(&series, |c| c.0)
            .ok()
            .map(|i| self.columns[i].1.as_slice())
    }
}

struct Open {
    /// By series id rising, none empty.
    columns: Vec<(u64, Vec<Sample>)>,
    /// The oldest log segment holding one of the samples.
    segment: u64,
    /// A sample came since the last [`Buffers::close`].
    touched: bool,
}

/// The buffers of every group.
pub struct Buffers {
    window_ns: i64,
    block_samples: usize,
    groups: FastMap<u64, BTreeMap<i64, Open>>,
    /// Windows a series filled since the last `take_full`.
    full: Vec<(u64, i64)>,
    waiting: usize,
}

/// The window `ts` falls in (the first window starts at `i64::MIN` for
/// the times before the first whole one).
pub fn window_of(ts: i64, window_ns: i64) -> i64 {
    ts.div_euclid(window_ns).saturating_mul(window_ns)
}

impl Buffers {
    /// Windows of `window_ns`; a block holds at most `block_samples` of a
    /// series.
    pub fn new(window_ns: i64, block_samples: usize) -> Buffers {
        assert!(window_ns > 0 && block_samples > 0);
        Buffers {
            window_ns,
            block_samples,
            groups: FastMap::default(),
            full: Vec::new(),
            waiting: 0,
        }
    }

    /// Samples waiting in all buffers.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Forgets every sample of the groups `gone` keeps (their data left
    /// the node).
    pub fn forget(&mut self, gone: impl Fn(u64) -> bool) {
        let mut dropped = 0;
        self.groups.retain(|g, windows| {
            if !gone(*g) {
                return true;
            }
            dropped += windows
                .values()
                .flat_map(|o| &o.columns)
                .map(|(_, v)| v.len())
                .sum::<usize>();
            false
        });
        self.full.retain(|(g, _)| !gone(*g));
        self.waiting -= dropped;
    }

    /// Adds samples of `series` of `group` (from log segment `segment`).
    /// A window the series fills is cut by the next [`Buffers::take_full`].
    pub fn add(&mut self, group: u64, series: u64, samples: &[Sample], segment: u64) {
        let buf = self.groups.entry(group).or_default();
        let mut rest = samples;
        while let Some(first) = rest.first() {
            // The run of samples in one window goes to its buffer at once.
            let window = window_of(first.ts, self.window_ns);
            let open = buf.entry(window).or_insert_with(|| Open {
                columns: Vec::new(),
                segment,
                touched: true,
            });
            open.segment = open.segment.min(segment);
            open.touched = true;
            let at = match open.columns.binary_search_by_key(&series, |c| c.0) {
                Ok(at) => at,
                Err(at) => {
                    open.columns.insert(at, (series, Vec::new()));
                    at
                }
            };
            let v = &mut open.columns[at].1;
            let was_full = v.len() >= self.block_samples;
            // Whether a time is in this window: two comparisons (no
            // division per sample), unless the window's start saturated.
            let w = self.window_ns;
            let exact = window.rem_euclid(w) == 0;
            let here = |ts: i64| {
                if exact {
                    (0..i128::from(w)).contains(&(i128::from(ts) - i128::from(window)))
                } else {
                    window_of(ts, w) == window
                }
            };
            let mut taken = 0;
            for s in rest {
                if taken > 0 && !here(s.ts) {
                    break;
                }
                taken += 1;
                match v.last() {
                    Some(last) if last.ts < s.ts => v.push(*s),
                    None => v.push(*s),
                    _ => match find_late(v, s.ts) {
                        Ok(i) => {
                            v[i] = *s;
                            continue;
                        }
                        Err(i) => v.insert(i, *s),
                    },
                }
                self.waiting += 1;
            }
            if !was_full && v.len() >= self.block_samples {
                self.full.push((group, window));
            }
            rest = &rest[taken..];
        }
    }

    /// Cuts the windows filled since the last call, appending the blocks
    /// to `out`: while a series of the window holds a block's worth, the
    /// window's samples up to the time where the first series reaches a
    /// block's worth leave together (no series gives more than a block's
    /// worth; the rest wait).
    pub fn take_full(&mut self, out: &mut Vec<Cut>) {
        let block = self.block_samples;
        for (group, window) in std::mem::take(&mut self.full) {
            let Some(buf) = self.groups.get_mut(&group) else {
                continue;
            };
            while let Some(open) = buf.get_mut(&window) {
                // The earliest time at which some series has a block's worth.
                let Some(until) = open
                    .columns
                    .iter()
                    .filter(|(_, v)| v.len() >= block)
                    .map(|(_, v)| v[block - 1].ts)
                    .min()
                else {
                    break;
                };
                let mut columns = Vec::with_capacity(open.columns.len());
                for (series, v) in &mut open.columns {
                    let n = v.partition_point(|s| s.ts <= until);
                    if n > 0 {
                        let rest = v.split_off(n);
                        columns.push((*series, std::mem::replace(v, rest)));
                    }
                }
                open.columns.retain(|(_, v)| !v.is_empty());
                let segment = open.segment;
                if open.columns.is_empty() {
                    buf.remove(&window);
                }
                let c = Cut {
                    group,
                    window,
                    columns,
                    segment,
                };
                self.waiting -= c.samples();
                out.push(c);
            }
            if buf.is_empty() {
                self.groups.remove(&group);
            }
        }
    }

    /// Cuts every window that ended at or before `closed_before` (its
    /// end, not its start) and took no sample since the previous call,
    /// appending the blocks to `out`; an ended window that took some is
    /// cut by a later call, once quiet.
    pub fn close(&mut self, closed_before: i64, out: &mut Vec<Cut>) {
        // A window [w, w + W) has ended by t when w + W <= t, that is
        // when it starts before t's own window.
        let start = window_of(closed_before, self.window_ns);
        self.groups.retain(|&group, buf| {
            let mut quiet = Vec::new();
            for (&window, open) in buf.iter_mut() {
                if !std::mem::take(&mut open.touched) && window < start {
                    quiet.push(window);
                }
            }
            for window in quiet {
                let c = cut(group, window, buf.remove(&window).expect("listed"));
                self.waiting -= c.samples();
                out.push(c);
            }
            !buf.is_empty()
        });
    }

    /// Cuts everything (a clean stop).
    pub fn cut_all(&mut self, out: &mut Vec<Cut>) {
        for (group, buf) in std::mem::take(&mut self.groups) {
            for (window, open) in buf {
                let c = cut(group, window, open);
                self.waiting -= c.samples();
                out.push(c);
            }
        }
    }

    /// Cuts every open window holding a sample from a log segment below
    /// `segment` (the log is over its budget).
    pub fn cut_from_segments_below(&mut self, segment: u64, out: &mut Vec<Cut>) {
        self.groups.retain(|&group, buf| {
            let old: Vec<i64> = buf
                .iter()
                .filter(|(_, o)| o.segment < segment)
                .map(|(&w, _)| w)
                .collect();
            for window in old {
                let c = cut(group, window, buf.remove(&window).expect("listed"));
                self.waiting -= c.samples();
                out.push(c);
            }
            !buf.is_empty()
        });
    }

    /// The oldest log segment a waiting sample came from (none waiting:
    /// `None`, every segment may go).
    pub fn oldest_segment(&self) -> Option<u64> {
        self.groups
            .values()
            .flat_map(|b| b.values().map(|o| o.segment))
            .min()
    }

    /// The waiting samples of `series` of `group` in windows starting
    /// from `first` to `last` (both included), window by window, oldest
    /// first.
    pub fn waiting_in(
        &self,
        group: u64,
        series: u64,
        first: i64,
        last: i64,
    ) -> Vec<(i64, Vec<Sample>)> {
        let Some(buf) = self.groups.get(&group).filter(|_| first <= last) else {
            return Vec::new();
        };
        buf.range(first..=last)
            .filter_map(|(&w, open)| {
                let at = open.columns.binary_search_by_key(&series, |c| c.0).ok()?;
                Some((w, open.columns[at].1.clone()))
            })
            .collect()
    }
}

/// Where a sample at `ts` goes in `v` (sorted by time), as
/// `binary_search` answers. A late sample is usually a few places from
/// the end (a line held back a request or two): those are looked at
/// first, already in the cache, before a search of the whole buffer.
fn find_late(v: &[Sample], ts: i64) -> Result<usize, usize> {
    let near = v.len().saturating_sub(16);
    for i in (near..v.len()).rev() {
        match v[i].ts.cmp(&ts) {
            std::cmp::Ordering::Equal => return Ok(i),
            std::cmp::Ordering::Less => return Err(i + 1),
            std::cmp::Ordering::Greater => {}
        }
    }
    v[..near].binary_search_by(|x| x.ts.cmp(&ts))
}

fn cut(group: u64, window: i64, open: Open) -> Cut {
    Cut {
        group,
        window,
        columns: open.columns,
        segment: open.segment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Series 0 and 1 are group 0, series 2 and 3 group 2.
    fn group_of(series: u64) -> u64 {
        series / 2 * 2
    }

    /// Adds and cuts what is full, as a write does.
    fn write(b: &mut Buffers, series: u64, samples: &[Sample], seg: u64, out: &mut Vec<Cut>) {
        b.add(group_of(series), series, samples, seg);
        b.take_full(out);
    }

    proptest! {
        /// Whatever the order and repeats, the cuts hold each series' last
        /// value at each time, in blocks of one window and one group,
        /// sorted, at most the block size per series, with the log
        /// segment of their oldest sample.
        #[test]
        fn cuts_keep_the_last_value_of_each_time(
            adds in prop::collection::vec(
                (0u64..4, prop::collection::vec((-250i64..250, 0u8..4), 0..24), any::<bool>()),
                0..80,
            ),
            block in prop_oneof![1usize..6, 16usize..80],
        ) {
            let mut b = Buffers::new(100, block);
            let mut out = Vec::new();
            let mut model: BTreeMap<(u64, i64), (f64, u64)> = BTreeMap::new();
            for (seg, (series, batch, take)) in adds.iter().enumerate() {
                let samples: Vec<Sample> =
                    batch.iter().map(|&(ts, v)| s(ts, f64::from(v))).collect();
                b.add(group_of(*series), *series, &samples, seg as u64);
                // Sometimes a write adds several series before the cut.
                if *take {
                    b.take_full(&mut out);
                }
                for x in &samples {
                    model.insert((*series, x.ts), (x.value, seg as u64));
                }
            }
            b.take_full(&mut out);
            b.cut_all(&mut out);
            prop_assert_eq!(b.waiting(), 0);
            let mut got: BTreeMap<(u64, i64), f64> = BTreeMap::new();
            for c in &out {
                prop_assert!(!c.columns.is_empty());
                prop_assert!(c.columns.windows(2).all(|w| w[0].0 < w[1].0));
                for (series, samples) in &c.columns {
                    prop_assert_eq!(group_of(*series), c.group);
                    prop_assert!(!samples.is_empty() && samples.len() <= block);
                    prop_assert!(samples.windows(2).all(|w| w[0].ts < w[1].ts));
                    for x in samples {
                        prop_assert_eq!(window_of(x.ts, 100), c.window);
                        // Its segment is no later than the write of the value.
                        prop_assert!(c.segment <= model[&(*series, x.ts)].1);
                        got.insert((*series, x.ts), x.value);
                    }
                }
            }
            let want: BTreeMap<(u64, i64), f64> =
                model.into_iter().map(|(k, (v, _))| (k, v)).collect();
            prop_assert_eq!(got, want);
        }
    }

    fn s(ts: i64, value: f64) -> Sample {
        Sample { ts, value }
    }

    #[test]
    fn full_blocks_leave_and_windows_close() {
        let mut b = Buffers::new(100, 3);
        let mut out = Vec::new();
        write(
            &mut b,
            1,
            &[s(10, 1.0), s(20, 2.0), s(5, 0.5), s(150, 9.0)],
            1,
            &mut out,
        );
        assert_eq!(
            out,
            vec![Cut {
                group: 0,
                window: 0,
                columns: vec![(1, vec![s(5, 0.5), s(10, 1.0), s(20, 2.0)])],
                segment: 1,
            }]
        );
        assert_eq!(b.waiting(), 1);
        // A late sample for window 0 opens it again.
        write(&mut b, 1, &[s(30, 3.0), s(30, 3.5)], 2, &mut out);
        assert_eq!(b.waiting(), 2);
        assert_eq!(b.oldest_segment(), Some(1));
        assert_eq!(
            b.waiting_in(0, 1, 0, 100),
            vec![(0, vec![s(30, 3.5)]), (100, vec![s(150, 9.0)])]
        );
        assert_eq!(b.waiting_in(0, 1, 100, 0), vec![]);
        assert_eq!(b.waiting_in(2, 1, 0, 100), vec![]);
        assert_eq!(b.waiting_in(0, 0, 0, 100), vec![]);
        out.clear();
        // Window 0 ended at 100; window 100 ends at 200. A window that
        // took samples since the last close waits for the next.
        b.close(199, &mut out);
        assert!(out.is_empty(), "{out:?}");
        b.close(199, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].window, out[0].segment), (0, 2));
        assert_eq!(out[0].columns, vec![(1, vec![s(30, 3.5)])]);
        assert_eq!(b.oldest_segment(), Some(1));
        out.clear();
        b.close(200, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].window, out[0].segment), (100, 1));
        assert_eq!(b.waiting(), 0);
        assert_eq!(b.oldest_segment(), None);
        assert!(b.groups.is_empty(), "no group kept without samples");
    }

    #[test]
    fn a_backfilled_window_is_cut_once_when_it_goes_quiet() {
        // History written across several ticks: the window ended long
        // ago, but it is cut once, whole, after a tick without samples.
        let mut b = Buffers::new(100, 1000);
        let mut out = Vec::new();
        for tick in 0..5 {
            write(&mut b, 1, &[s(tick * 10, tick as f64)], 1, &mut out);
            b.close(10_000, &mut out);
            assert!(out.is_empty(), "tick {tick}: {out:?}");
        }
        b.close(10_000, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].samples(), 5);
        assert_eq!(b.waiting(), 0);
    }

    #[test]
    fn the_fields_of_one_line_leave_in_one_block() {
        // Two series of one group, written a record at a time (each
        // series' run, then the cut): every cut holds both, on the same
        // timestamps, a block's worth each.
        let mut b = Buffers::new(1_000_000, 4);
        let mut out = Vec::new();
        for record in 0..5i64 {
            let times: Vec<i64> = (0..3).map(|i| record * 3 + i).collect();
            let a: Vec<Sample> = times.iter().map(|&t| s(t, 1.0)).collect();
            let c: Vec<Sample> = times.iter().map(|&t| s(t, 2.0)).collect();
            b.add(0, 0, &a, 1);
            b.add(0, 1, &c, 1);
            b.take_full(&mut out);
        }
        b.cut_all(&mut out);
        assert_eq!(out.len(), 4, "{out:?}");
        for cut in &out {
            assert_eq!(cut.columns.len(), 2);
            let ts = |i: usize| cut.columns[i].1.iter().map(|x| x.ts).collect::<Vec<_>>();
            assert_eq!(ts(0), ts(1));
        }
        assert_eq!(
            out.iter().map(|c| c.columns[0].1.len()).collect::<Vec<_>>(),
            vec![4, 4, 4, 3]
        );
    }

    #[test]
    fn windows_holding_old_segments_are_cut_early() {
        let mut b = Buffers::new(100, 10);
        let mut out = Vec::new();
        write(&mut b, 1, &[s(10, 1.0)], 3, &mut out);
        write(&mut b, 1, &[s(150, 2.0)], 5, &mut out);
        write(&mut b, 2, &[s(1_000_000, 3.0)], 4, &mut out);
        b.cut_from_segments_below(5, &mut out);
        let mut cut: Vec<(u64, i64)> = out.iter().map(|c| (c.group, c.window)).collect();
        cut.sort();
        assert_eq!(cut, vec![(0, 0), (2, 1_000_000)]);
        assert_eq!(b.oldest_segment(), Some(5));
        assert_eq!(b.waiting(), 1);
    }

    #[test]
    fn negative_times_fall_in_their_window() {
        assert_eq!(window_of(-1, 100), -100);
        assert_eq!(window_of(-100, 100), -100);
        assert_eq!(window_of(99, 100), 0);
        // The ends of time do not overflow.
        assert_eq!(window_of(i64::MIN, 3_600_000_000_000), i64::MIN);
        let hour = 3_600_000_000_000;
        assert!(i64::MAX - window_of(i64::MAX, hour) < hour);
        let mut b = Buffers::new(3_600_000_000_000, 10);
        let mut out = Vec::new();
        write(
            &mut b,
            1,
            &[s(i64::MIN, 1.0), s(i64::MAX, 2.0)],
            1,
            &mut out,
        );
        // The first window has not ended inside itself.
        b.close(i64::MIN + 1, &mut out);
        assert!(out.is_empty());
        b.cut_all(&mut out);
        assert_eq!(out.len(), 2);
    }
}
