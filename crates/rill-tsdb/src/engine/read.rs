//! Reading a series over a range: its stored blocks of the windows in
//! the range, the blocks cut and not yet stored, and the samples still
//! waiting in buffers, merged in that order (a later one winning on a
//! repeated time).

use super::helpers::Turn;
use super::{Engine, EngineError};
use crate::buffer::{window_of, Cut};
use crate::keys::block_key;
use crate::points::Points;
use rill_sensor::block::Header;
use rill_sensor::{BlockError, Sample, TimeUnit};
use std::sync::Arc;

/// What a read of one series over a range takes from memory: its id,
/// store, the range cut to what is kept, and its buffered and queued
/// samples of the range's windows.
pub(super) struct Sources {
    pub id: u64,
    /// The group whose blocks hold the series.
    pub group: u64,
    pub store: Arc<dyn crate::storage::BlockStore>,
    pub lo: i64,
    pub hi: i64,
    pub waiting: Vec<(i64, Vec<Sample>)>,
    pub unstored: Vec<Arc<Cut>>,
    /// The engine's count of live sources (it waits for them to go).
    pub _reads: Arc<()>,
    /// Samples the read may still decode, when bounded.
    pub budget: Option<Arc<ReadBudget>>,
    /// Read on the calling thread only (no helpers).
    pub one_core: bool,
    /// The unit of the times read (ns, or floored to ms when the range's
    /// ends are whole ms: cut in ms, they cut the same samples).
    pub unit: TimeUnit,
    /// Set when a time read in ms may equal the one before it (a block
    /// finer than 1 ms, or samples merged): the answer is then checked.
    pub may_repeat: Arc<std::sync::atomic::AtomicBool>,
}

/// A series looked up, or a window's blocks fetched and checked, counted
/// against a [`ReadBudget`] as this many samples decoded.
const READ_COST: usize = 256;

/// How many samples a read, or the reads of one query, may decode (a
/// series looked up and a window's blocks fetched count [`READ_COST`]
/// each; a query's other work is charged too, see
/// a query's work beyond its reads): a query
/// tried on the thread that took its request must stay short, and one
/// that would not, or that would wait for the device, is sent to the
/// blocking pool instead.
/// Shared by the threads of a long read (a window both read, the
/// request's thread not waiting for a helper still on it, counts twice).
#[derive(Debug)]
pub struct ReadBudget(std::sync::atomic::AtomicI64);

impl ReadBudget {
    pub fn new(samples: u64) -> ReadBudget {
        ReadBudget(std::sync::atomic::AtomicI64::new(
            i64::try_from(samples).unwrap_or(i64::MAX),
        ))
    }

    /// Takes `samples` from the budget; whether they were there.
    pub fn take(&self, samples: usize) -> bool {
        let n = i64::try_from(samples).unwrap_or(i64::MAX);
        let before = self.0.fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        before >= n
    }

    /// Spends the rest of the budget (a read that would wait for the
    /// device stops as one past its budget does).
    pub fn stop(&self) {
        self.0.store(-1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a read found the budget short.
    pub fn spent(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) < 0
    }
}

/// A stored part of a window, its header read (checksum checked).
pub(super) struct Part {
    pub number: u32,
    pub header: Header,
    pub bytes: Arc<[u8]>,
}

fn damaged(key: &str, window: i64, part: u32, error: BlockError) -> EngineError {
    EngineError::Damaged {
        series: key.to_string(),
        window,
        part,
        error,
    }
}

/// The header of `series`' samples in a stored block of its group
/// (`None`: the block has none of them): a version 1 block holds the
/// samples of the series its key names (its group's id), a group block a
/// column per series.
fn header_in(bytes: &[u8], group: u64, series: u64) -> Result<Option<Header>, BlockError> {
    match bytes.first() {
        Some(&rill_sensor::block::VERSION) if group == series => {
            rill_sensor::block::header(bytes).map(Some)
        }
        Some(&rill_sensor::block::VERSION) => Ok(None),
        _ => rill_sensor::block::group::header(bytes, series),
    }
}

impl Part {
    /// Series `id`'s samples, decoded; an error names series `key`'s
    /// window `w`.
    pub fn decode(&self, id: u64, key: &str, w: i64) -> Result<Vec<Sample>, EngineError> {
        let decoded = match self.bytes.first() {
            Some(&rill_sensor::block::VERSION) => {
                rill_sensor::block::decode(&self.bytes).map(|(_, samples)| samples)
            }
            _ => rill_sensor::block::group::decode_series(&self.bytes, id)
                .map(|c| c.map_or_else(Vec::new, |(_, samples)| samples)),
        };
        decoded.map_err(|e| damaged(key, w, self.number, e))
    }

    /// [`decode`](Self::decode) appended to `out`'s two columns, times
    /// in `unit`.
    pub fn decode_columns(
        &self,
        id: u64,
        key: &str,
        w: i64,
        unit: TimeUnit,
        out: &mut Points,
    ) -> Result<(), EngineError> {
        let decoded = match self.bytes.first() {
            Some(&rill_sensor::block::VERSION) => {
                rill_sensor::block::decode_columns_in(&self.bytes, unit, &mut out.ts, &mut out.v)
                    .map(drop)
            }
            _ => rill_sensor::block::group::decode_series_columns_in(
                &self.bytes,
                id,
                unit,
                &mut out.ts,
                &mut out.v,
            )
            .map(drop),
        };
        decoded.map_err(|e| damaged(key, w, self.number, e))
    }

    /// Whether every time of the block is a whole ms (its unit 1 ms or
    /// more and its first time a whole ms): floored to ms, they still
    /// rise, and differ from any other such block's apart from it.
    fn whole_ms(&self) -> bool {
        let k = match self.bytes.first() {
            Some(&rill_sensor::block::VERSION) => self.bytes.get(2),
            _ => self.bytes.get(1),
        };
        let first = self
            .bytes
            .get(8..16)
            .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")).rem_euclid(1_000_000));
        k.is_some_and(|&k| k >= 6) && first == Some(0)
    }

    /// Whether it holds no sample of `lo..=hi` (known from its header).
    pub fn outside(&self, lo: i64, hi: i64) -> bool {
        self.header.last_ts < lo || self.header.first_ts > hi
    }
}

impl Sources {
    /// The windows of the range, in order.
    pub fn windows(&self, window_ns: i64) -> impl Iterator<Item = i64> {
        let last = window_of(self.hi, window_ns);
        std::iter::successors(Some(window_of(self.lo, window_ns)), move |&w| {
            if w < last {
                w.checked_add(window_ns)
            } else {
                None
            }
        })
    }

    /// Window `w`'s stored parts holding samples of series `key`, in
    /// part order.
    pub fn parts(&self, key: &str, w: i64) -> Result<Vec<Part>, EngineError> {
        let mut out = Vec::new();
        for number in 0u32.. {
            let key_of = block_key(self.group, w, number);
            // A bounded read must not wait for the device: one that would
            // stops, to be read again where waiting is fine.
            let got = match &self.budget {
                None => self.store.get_shared(&key_of)?,
                Some(budget) => match self.store.try_get_shared(&key_of) {
                    Some(got) => got?,
                    None => {
                        budget.stop();
                        return Err(EngineError::OverBudget);
                    }
                },
            };
            let Some(bytes) = got else {
                break;
            };
            let header =
                header_in(&bytes, self.group, self.id).map_err(|e| damaged(key, w, number, e))?;
            if let Some(header) = header {
                out.push(Part {
                    number,
                    header,
                    bytes,
                });
            }
        }
        Ok(out)
    }

    /// Window `w`'s samples in memory: its queued blocks, then its
    /// buffered samples (the order in which a later one wins).
    pub fn loose(&self, w: i64) -> impl Iterator<Item = &[Sample]> {
        let queued = self.unstored.iter().filter(move |c| c.window == w);
        let buffered = self.waiting.iter().filter(move |(ww, _)| *ww == w);
        queued
            .filter_map(|c| c.column(self.id))
            .chain(buffered.map(|(_, s)| s.as_slice()))
    }
}

impl Engine {
    /// The [`Sources`] of series `key` of `db` over `t0..=t1` at `now`;
    /// `None` when there is nothing to read.
    pub(super) fn sources(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
    ) -> Option<Sources> {
        let window_ns = self.opts.window_ns;
        let st = self.lock();
        let (Some((id, group)), Some(d)) = (st.catalog.lookup(db, key), st.dbs.get(db)) else {
            return None;
        };
        // No shard yet: no block of it stored yet.
        let store = st
            .catalog
            .home(id)
            .and_then(|h| d.stores.get(&h).cloned())
            .unwrap_or_else(|| Arc::new(crate::storage::NoBlocks));
        let lo = t0.max(now.saturating_sub(d.retention_ns));
        let hi = t1.min(now.saturating_add(self.opts.max_future_ns));
        if lo > hi {
            return None;
        }
        let (w0, w1) = (window_of(lo, window_ns), window_of(hi, window_ns));
        let waiting = d.buffers.waiting_in(group, id, w0, w1);
        let unstored: Vec<Arc<Cut>> = st
            .unstored
            .iter()
            .filter(|(name, c)| {
                *name == db
                    && c.group == group
                    && (w0..=w1).contains(&c.window)
                    && c.column(id).is_some()
            })
            .map(|(_, c)| c.clone())
            .collect();
        Some(Sources {
            id,
            group,
            store,
            lo,
            hi,
            waiting,
            unstored,
            _reads: self.reads.clone(),
            budget: None,
            one_core: false,
            unit: TimeUnit::Ns,
            may_repeat: Arc::default(),
        })
    }

    /// The samples of series `key` of `db` from `t0` to `t1` (both
    /// included), in time order; nothing older than the database's
    /// storage period at `now`.
    pub fn read(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
    ) -> Result<Vec<Sample>, EngineError> {
        let p = self.read_points(db, key, t0, t1, now)?;
        Ok(p.ts
            .into_iter()
            .zip(p.v)
            .map(|(ts, value)| Sample { ts, value })
            .collect())
    }

    /// [`read`](Self::read) of series `key` (at home in `home`) of only
    /// the windows its home has blocks of and those with samples in
    /// memory: what a digest of a long, mostly empty range reads (every
    /// other window of the range has no block).
    pub(super) fn read_stored(
        &self,
        db: &str,
        home: u32,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
    ) -> Result<Vec<Sample>, EngineError> {
        let Some(src) = self.sources(db, key, t0, t1, now) else {
            return Ok(Vec::new());
        };
        // The stored windows after the memory's snapshot, as reads take
        // them: a block leaves memory only once it is stored and its
        // window recorded, so a window cut meanwhile is in one or the
        // other.
        let stored = self.stored_windows(db, home, src.lo, src.hi)?;
        let hi = src.hi;
        let windows: Vec<i64> = src
            .windows(self.opts.window_ns)
            .filter(|w| stored.binary_search(w).is_ok() || src.loose(*w).next().is_some())
            .collect();
        let mut p = read_windows(src, key, windows)?;
        let to = p.ts.partition_point(|&t| t <= hi);
        p.ts.truncate(to);
        p.v.truncate(to);
        Ok(p.ts
            .into_iter()
            .zip(p.v)
            .map(|(ts, value)| Sample { ts, value })
            .collect())
    }

    /// [`read`](Self::read) as two columns, times in ns (what a query
    /// takes: no pairs made and taken apart again).
    pub fn read_points(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
    ) -> Result<Points, EngineError> {
        self.read_points_within(db, key, t0, t1, now, None)
    }

    /// [`read_points`](Self::read_points), decoding no more samples than
    /// `budget` holds (else [`EngineError::OverBudget`], before decoding
    /// the window that would pass it).
    pub fn read_points_within(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
        budget: Option<&Arc<ReadBudget>>,
    ) -> Result<Points, EngineError> {
        Ok(self
            .read_in(db, key, t0, t1, now, budget, TimeUnit::Ns, false)?
            .0)
    }

    /// [`read_points_within`](Self::read_points_within) with the times in
    /// ms (floored; of samples within one ms, the last kept), as a query
    /// takes them: where the range kept begins and ends on whole ms (the
    /// usual case) blocks in units of 1 ms or more decode straight into
    /// ms, with no pass over the answer to convert it. `one_core`: read
    /// on the calling thread only (a node answering another's query reads
    /// beside the asker and the other replicas: sharing a read with
    /// helpers would only take their cores).
    #[allow(clippy::too_many_arguments)]
    pub fn read_ms_within(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
        budget: Option<&Arc<ReadBudget>>,
        one_core: bool,
    ) -> Result<Points, EngineError> {
        let (points, unit, may_repeat) =
            self.read_in(db, key, t0, t1, now, budget, TimeUnit::Ms, one_core)?;
        Ok(super::ms::in_ms(points, unit, may_repeat))
    }

    /// The read behind both: times in `unit` where the range kept allows,
    /// else in ns; the unit they are in, and whether (in ms) a time may
    /// equal the one before it.
    #[allow(clippy::too_many_arguments)]
    fn read_in(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
        budget: Option<&Arc<ReadBudget>>,
        unit: TimeUnit,
        one_core: bool,
    ) -> Result<(Points, TimeUnit, bool), EngineError> {
        // Memory first, then the stores: a block leaves memory only once
        // it is stored, so nothing is missed (one in both places gives
        // the same samples twice, which the merge takes once).
        if budget.is_some_and(|b| !b.take(READ_COST)) {
            return Err(EngineError::OverBudget);
        }
        let Some(mut src) = self.sources(db, key, t0, t1, now) else {
            return Ok((Points::default(), unit, false));
        };
        src.budget = budget.cloned();
        src.one_core = one_core;
        src.unit = super::ms::unit_for(unit, src.lo, src.hi);
        let unit = src.unit;
        let (lo, hi) = super::ms::bounds_in(unit, src.lo, src.hi);
        // Set by the windows as they are read. (Windows not of whole ms
        // need no flag of their own: a block of whole-ms times holds no
        // time inside a ms, so two distinct ones floor apart wherever a
        // window ends.)
        let may_repeat = src.may_repeat.clone();
        let windows: Vec<i64> = src.windows(self.opts.window_ns).collect();
        let mut out = read_windows(src, key, windows)?;
        // The first window was cut to `lo` as it was read; the last is
        // cut to `hi` here (a truncation moves nothing).
        debug_assert!(out.ts.first().is_none_or(|&t| t >= lo));
        let to = out.ts.partition_point(|&t| t <= hi);
        out.ts.truncate(to);
        out.v.truncate(to);
        Ok((
            out,
            unit,
            may_repeat.load(std::sync::atomic::Ordering::Relaxed),
        ))
    }
}

/// Windows from this many on are read on more than one core (a window
/// holds up to a block's worth of samples of the series: fewer are not
/// worth posting to a helper).
const SPLIT_FROM: usize = super::helpers::WINDOWS_PER_HELPER;

/// The answer is sized from its windows for at most this many samples (the first window of a series that was busy once and quiet
/// since must not reserve for every window after it).
const RESERVE_MAX: usize = 1 << 18;

/// The samples of `windows` (rising) of series `key`, in time order: a
/// long read on more than one core (`helpers`).
fn read_windows(src: Sources, key: &str, windows: Vec<i64>) -> Result<Points, EngineError> {
    let mut out = Points::default();
    if windows.len() < SPLIT_FROM || src.one_core {
        for &w in &windows {
            read_window(&src, key, w, &mut out)?;
        }
        return Ok(out);
    }
    let n = windows.len();
    let (src, key, windows) = (Arc::new(src), Arc::<str>::from(key), Arc::new(windows));
    // Helpers hold the sources weakly: a job still queued behind another
    // read's when this one is answered reads nothing and holds nothing.
    let work: Arc<dyn Fn(usize) -> Result<Points, EngineError> + Send + Sync> = {
        let (weak, key, windows) = (Arc::downgrade(&src), key.clone(), windows.clone());
        Arc::new(move |i| {
            let src = weak
                .upgrade()
                .ok_or_else(|| EngineError::Invalid("the read has ended".into()))?;
            let mut p = Points::default();
            read_window(&src, &key, windows[i], &mut p).map(|_| p)
        })
    };
    super::helpers::split(n, work, |turn| {
        match turn {
            Turn::Mine(i) => {
                let whole = read_window(&src, &key, windows[i], &mut out)?;
                // The answer is sized from the windows read (as read,
                // before the first was cut to the range), not grown by
                // doubling: from the first, and again (with a quarter to
                // spare, so that windows a little fuller do not move it
                // again) when one suggests more than there is room for
                // (the first held fewer: a series begun in it).
                let rest = whole.saturating_mul(n - 1 - i);
                if out.ts.capacity() - out.ts.len() < rest {
                    let more = rest.saturating_add(rest / 4 * usize::from(i > 0));
                    out.ts.reserve(more.min(RESERVE_MAX));
                    out.v.reserve(more.min(RESERVE_MAX));
                }
            }
            Turn::Theirs(p) => {
                let p = p?;
                out.ts.extend_from_slice(&p.ts);
                out.v.extend_from_slice(&p.v);
            }
        }
        Ok::<(), EngineError>(())
    })?;
    Ok(out)
}

/// Window `w` of series `key`, appended to `out` in time order: its
/// stored parts, its queued blocks and its buffered samples, a later one
/// winning on a repeated time; how many it held before it was cut to the
/// range.
fn read_window(src: &Sources, key: &str, w: i64, out: &mut Points) -> Result<usize, EngineError> {
    let (lo, _) = super::ms::bounds_in(src.unit, src.lo, src.hi);
    let start = out.ts.len();
    read_window_whole(src, key, w, out)?;
    let whole = out.ts.len() - start;
    // Only the range's first window holds samples before it: cut here,
    // where they are the last in the answer, not once the answer is whole
    // (which would move all of it).
    if w <= src.lo {
        let before = out.ts[start..].partition_point(|&t| t < lo);
        out.ts.drain(start..start + before);
        out.v.drain(start..start + before);
    }
    Ok(whole)
}

/// [`read_window`], the window whole.
fn read_window_whole(
    src: &Sources,
    key: &str,
    w: i64,
    out: &mut Points,
) -> Result<(), EngineError> {
    let (lo, hi) = (src.lo, src.hi);
    // A part wholly outside the range is not decoded.
    let mut parts = src.parts(key, w)?;
    parts.retain(|p| !p.outside(lo, hi));
    if let Some(budget) = &src.budget {
        let stored: usize = parts.iter().map(|p| p.header.count as usize).sum();
        let loose: usize = src.loose(w).map(<[Sample]>::len).sum();
        if !budget.take(READ_COST.saturating_add(stored).saturating_add(loose)) {
            return Err(EngineError::OverBudget);
        }
    }
    // The usual case: stored parts only, each after the one before in
    // time, decoded straight into the answer.
    parts.sort_by_key(|p| p.header.first_ts);
    let apart = parts
        .windows(2)
        .all(|p| p[0].header.last_ts < p[1].header.first_ts);
    if apart && src.loose(w).all(<[Sample]>::is_empty) {
        if src.unit == TimeUnit::Ms && !parts.iter().all(Part::whole_ms) {
            src.may_repeat
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let count: usize = parts.iter().map(|p| p.header.count as usize).sum();
        out.ts.reserve(count);
        out.v.reserve(count);
        for part in &parts {
            part.decode_columns(src.id, key, w, src.unit, out)?;
        }
        return Ok(());
    }
    // The window's runs of samples, a later one winning. Merged in ns,
    // times in ms repeat only where a run's are not whole ms.
    if src.unit == TimeUnit::Ms
        && (!parts.iter().all(Part::whole_ms) || src.loose(w).any(|l| !l.is_empty()))
    {
        src.may_repeat
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
    parts.sort_by_key(|p| p.number);
    let mut runs: Vec<Vec<Sample>> = Vec::new();
    for part in parts {
        runs.push(part.decode(src.id, key, w)?);
    }
    runs.extend(src.loose(w).map(<[Sample]>::to_vec));
    let mut merged = Vec::new();
    super::merge::merge_runs(runs, &mut merged);
    let p = super::ms::per_unit(src.unit);
    out.ts.extend(merged.iter().map(|s| s.ts.div_euclid(p)));
    out.v.extend(merged.iter().map(|s| s.value));
    Ok(())
}
