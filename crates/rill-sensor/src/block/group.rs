//! A group block (version 2): the samples of several series that share
//! their timestamps (the fields of one line protocol measurement and tag
//! set), over part of a window, with the timestamps held once. Each
//! series is a column: its own value codec, its own header of aggregates
//! (the same [`Header`] a version 1 block has), and, where it lacks a
//! value at some of the block's timestamps, a presence bitmap. One
//! column is read without decoding the others' values.
//!
//! Layout (integers and floats little-endian; docs/format.md, "Sensor
//! group block", version 2):
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 1 | version, 2 |
//! | 1 | 1 | time unit: timestamps are multiples of 10^k ns, k in 0..=9 |
//! | 2 | 1 | flags: bit 0, timestamps on a grid; other bits 0 |
//! | 3 | 1 | zero |
//! | 4 | 4 | rows: the block's timestamps, at least 1 |
//! | 8 | 8 | first timestamp (i64) |
//! | 16 | 8 | last timestamp (i64) |
//! | 24 | 4 | length of the timestamps section |
//! | 28 | 2 | columns, at least 1 |
//! | 30 | 77 each | column headers (below), series ids strictly rising |
//! | .. | n | timestamps section (as version 1's) |
//! | .. | | per column: its presence section, then its values section |
//! | end-4 | 4 | CRC-32 (IEEE) of every byte before it |
//!
//! Column header: series id (u64), value codec (u8), count of values
//! (u32, 1..=rows), first and last timestamp of the column's values
//! (i64 each), min, max, first, last, sum (f64 each, as version 1's
//! header), presence section length (u32; 0: a value at every row, else
//! the rows' bits, most significant first, set where the column has a
//! value), values section length (u32).

use super::{
    decode_values, encode_times, encode_values, header_of, header_of_columns, put_aggregates,
    same_header, u32_at, u64_at, zip_samples, BlockError, Choice, Codec, EncodeError, Header,
    Sample, TimeUnit, MAX_SAMPLES,
};

pub const VERSION: u8 = 2;
const FIXED: usize = 30;
const COLUMN: usize = 77;
/// The most columns a group block holds.
pub const MAX_COLUMNS: usize = 4096;

/// Encodes series' samples (each series' timestamps strictly rising, the
/// series ids strictly rising, at most [`MAX_SAMPLES`] samples in all) as
/// one group block; the block's rows are every timestamp of any of them.
pub fn encode(columns: &[(u64, &[Sample])], choice: Choice) -> Result<Vec<u8>, EncodeError> {
    if columns.is_empty() || columns.iter().any(|(_, s)| s.is_empty()) {
        return Err(EncodeError::Empty);
    }
    if columns.len() > MAX_COLUMNS || columns.windows(2).any(|w| w[1].0 <= w[0].0) {
        return Err(EncodeError::Columns);
    }
    for (_, s) in columns {
        if s.windows(2).any(|w| w[1].ts <= w[0].ts) {
            return Err(EncodeError::NotRising);
        }
    }
    // The samples of all columns together (and so the rows) within a
    // block's most: a reader decoding every column allocates no more.
    if columns.iter().map(|(_, s)| s.len()).sum::<usize>() > MAX_SAMPLES {
        return Err(EncodeError::TooMany);
    }
    let rows = union(columns);
    let (k, flags, times) = encode_times(&rows);
    let mut heads = Vec::with_capacity(columns.len() * COLUMN);
    let mut sections = Vec::new();
    let mut values = Vec::new();
    for (series, samples) in columns {
        values.clear();
        values.extend(samples.iter().map(|s| s.value));
        let (codec, body) = encode_values(&values, choice);
        let presence = if samples.len() == rows.len() {
            Vec::new()
        } else {
            presence_bits(&rows, samples)
        };
        let h = header_of(codec, samples);
        heads.extend_from_slice(&series.to_le_bytes());
        heads.push(codec as u8);
        put_aggregates(&mut heads, &h);
        heads.extend_from_slice(&(presence.len() as u32).to_le_bytes());
        heads.extend_from_slice(&(body.len() as u32).to_le_bytes());
        sections.extend_from_slice(&presence);
        sections.extend_from_slice(&body);
    }
    let mut out = Vec::with_capacity(FIXED + heads.len() + times.len() + sections.len() + 4);
    out.extend_from_slice(&[VERSION, k, flags, 0]);
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    out.extend_from_slice(&rows[0].to_le_bytes());
    out.extend_from_slice(&rows[rows.len() - 1].to_le_bytes());
    out.extend_from_slice(&(times.len() as u32).to_le_bytes());
    out.extend_from_slice(&(columns.len() as u16).to_le_bytes());
    out.extend_from_slice(&heads);
    out.extend_from_slice(&times);
    out.extend_from_slice(&sections);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Every timestamp of any column, rising (the columns' own, at once when
/// they all agree, as the fields of one line do).
fn union(columns: &[(u64, &[Sample])]) -> Vec<i64> {
    let first = columns[0].1;
    let same =
        |s: &[Sample]| s.len() == first.len() && s.iter().zip(first).all(|(a, b)| a.ts == b.ts);
    if columns[1..].iter().all(|(_, s)| same(s)) {
        return first.iter().map(|s| s.ts).collect();
    }
    let mut all: Vec<i64> = columns
        .iter()
        .flat_map(|(_, s)| s.iter().map(|x| x.ts))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The rows' bits, most significant first, set where `samples` has one.
fn presence_bits(rows: &[i64], samples: &[Sample]) -> Vec<u8> {
    let mut bits = vec![0u8; rows.len().div_ceil(8)];
    let mut at = 0;
    for s in samples {
        // Both rise: the sample's row is at or after the last one found.
        while rows[at] != s.ts {
            at += 1;
        }
        bits[at / 8] |= 0x80 >> (at % 8);
    }
    bits
}

/// A group block's layout, read from its fixed part and checked: where
/// each column's header and sections lie.
struct Layout<'a> {
    bytes: &'a [u8],
    rows: usize,
    first_ts: i64,
    last_ts: i64,
    columns: usize,
    times: std::ops::Range<usize>,
    /// Where each column's presence and values sections begin.
    starts: Vec<usize>,
}

/// One column's place in a block.
struct ColumnAt {
    header: Header,
    presence: std::ops::Range<usize>,
    values: std::ops::Range<usize>,
}

impl<'a> Layout<'a> {
    /// Checks the checksum and the fixed part and finds the sections.
    fn read(bytes: &'a [u8]) -> Result<Layout<'a>, BlockError> {
        if bytes.len() < FIXED + COLUMN + 4 {
            return Err(BlockError::Invalid("shorter than a header"));
        }
        match bytes[0] {
            VERSION => {}
            super::VERSION => {
                return Err(BlockError::Invalid(
                    "a single series' block (version 1), not a group block",
                ))
            }
            0 => return Err(BlockError::Invalid("version 0")),
            v => return Err(BlockError::Version(v)),
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body) != u32_at(crc, 0) {
            return Err(BlockError::Checksum);
        }
        if bytes[1] > 9 || bytes[2] & !super::GRID != 0 || bytes[3] != 0 {
            return Err(BlockError::Invalid("bad time unit or flags"));
        }
        let rows = u32_at(bytes, 4) as usize;
        let (first_ts, last_ts) = (u64_at(bytes, 8) as i64, u64_at(bytes, 16) as i64);
        let times_len = u32_at(bytes, 24) as usize;
        let columns = u16::from_le_bytes([bytes[28], bytes[29]]) as usize;
        if rows == 0
            || rows > MAX_SAMPLES
            || last_ts < first_ts
            || (rows == 1) != (first_ts == last_ts)
            || columns == 0
            || columns > MAX_COLUMNS
        {
            return Err(BlockError::Invalid("inconsistent header"));
        }
        let end = bytes.len() - 4;
        let heads_end = FIXED + columns * COLUMN;
        if heads_end + times_len > end {
            return Err(BlockError::Invalid("sections past the end"));
        }
        let mut starts = Vec::with_capacity(columns + 1);
        let mut at = heads_end + times_len;
        let mut last_series = None;
        let mut samples = 0usize;
        for c in 0..columns {
            let h = FIXED + c * COLUMN;
            // Every column's values together within a block's most, as
            // the encoder keeps them (before anything is allocated).
            samples += u32_at(bytes, h + 9) as usize;
            if samples > MAX_SAMPLES {
                return Err(BlockError::Invalid("more samples than a block holds"));
            }
            let series = u64_at(bytes, h);
            if last_series.is_some_and(|l| series <= l) {
                return Err(BlockError::Invalid("columns out of order"));
            }
            last_series = Some(series);
            starts.push(at);
            let len = u32_at(bytes, h + 69) as usize + u32_at(bytes, h + 73) as usize;
            at = at
                .checked_add(len)
                .filter(|&a| a <= end)
                .ok_or(BlockError::Invalid("sections past the end"))?;
        }
        if at != end {
            return Err(BlockError::Invalid("bytes after the last section"));
        }
        Ok(Layout {
            bytes,
            rows,
            first_ts,
            last_ts,
            columns,
            times: heads_end..heads_end + times_len,
            starts,
        })
    }

    /// The series of every column, in order.
    fn series(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.columns).map(|c| u64_at(self.bytes, FIXED + c * COLUMN))
    }

    /// The column of `series`, if the block has one.
    fn find(&self, series: u64) -> Option<usize> {
        let mut lo = 0;
        let mut hi = self.columns;
        while lo < hi {
            let mid = (lo + hi) / 2;
            match u64_at(self.bytes, FIXED + mid * COLUMN).cmp(&series) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Column `c`'s header and sections, checked against the block.
    fn column(&self, c: usize) -> Result<ColumnAt, BlockError> {
        let b = self.bytes;
        let h = FIXED + c * COLUMN;
        let codec = match b[h + 8] {
            1 => Codec::Gorilla,
            2 => Codec::Decimal,
            _ => return Err(BlockError::Invalid("unknown value codec")),
        };
        let f = |at: usize| f64::from_bits(u64_at(b, h + at));
        let header = Header {
            codec,
            count: u32_at(b, h + 9),
            first_ts: u64_at(b, h + 13) as i64,
            last_ts: u64_at(b, h + 21) as i64,
            min: f(29),
            max: f(37),
            first: f(45),
            last: f(53),
            sum: f(61),
        };
        let presence_len = u32_at(b, h + 69) as usize;
        let values_len = u32_at(b, h + 73) as usize;
        let count = header.count as usize;
        let presence_ok = if presence_len == 0 {
            count == self.rows
        } else {
            presence_len == self.rows.div_ceil(8) && count < self.rows
        };
        if count == 0
            || !presence_ok
            || header.first_ts < self.first_ts
            || header.last_ts > self.last_ts
            || header.last_ts < header.first_ts
            || (count == 1) != (header.first_ts == header.last_ts)
        {
            return Err(BlockError::Invalid("inconsistent column header"));
        }
        let start = self.starts[c];
        Ok(ColumnAt {
            header,
            presence: start..start + presence_len,
            values: start + presence_len..start + presence_len + values_len,
        })
    }

    /// Every column's series and header (no section decoded).
    fn headers(&self) -> Result<Vec<(u64, Header)>, BlockError> {
        self.series()
            .enumerate()
            .map(|(c, s)| Ok((s, self.column(c)?.header)))
            .collect()
    }

    /// The header of `series`' column (`None`: the block has none).
    fn header_of(&self, series: u64) -> Result<Option<Header>, BlockError> {
        self.find(series)
            .map(|c| self.column(c).map(|at| at.header))
            .transpose()
    }

    /// The block's timestamps, checked to rise from the first to the last.
    fn times(&self) -> Result<Vec<i64>, BlockError> {
        let mut ts = Vec::new();
        self.times_into(TimeUnit::Ns, &mut ts)?;
        Ok(ts)
    }

    /// [`times`](Self::times) in `unit`, appended to `out` (left as it
    /// was on an error).
    fn times_into(&self, unit: TimeUnit, out: &mut Vec<i64>) -> Result<(), BlockError> {
        let b = self.bytes;
        super::time::decode_section(
            (self.first_ts, self.last_ts),
            self.rows,
            b[1],
            b[2],
            &b[self.times.clone()],
            unit,
            out,
        )
    }

    /// Column `c`'s samples at the block's timestamps `ts`, checked
    /// against its header bit for bit.
    fn samples(&self, c: usize, rows: &[i64]) -> Result<(Header, Vec<Sample>), BlockError> {
        let (mut ts, mut values) = (Vec::new(), Vec::new());
        let h = self.columns_into(c, rows, &mut ts, &mut values)?;
        Ok((h, zip_samples(ts, values)))
    }

    /// Column `c`'s samples at the block's timestamps `rows`, checked
    /// against its header bit for bit, their times appended to `ts` and
    /// their values to `values` (both left as they were on an error).
    fn columns_into(
        &self,
        c: usize,
        rows: &[i64],
        ts: &mut Vec<i64>,
        values: &mut Vec<f64>,
    ) -> Result<Header, BlockError> {
        let at = self.column(c)?;
        let (t0, v0) = (ts.len(), values.len());
        let checked = self.present_rows(&at, rows, ts).and_then(|()| {
            let t = &ts[t0..];
            let span = t.first().zip(t.last()).map(|(a, b)| (*a, *b));
            self.check_column(&at, t.len(), span, values)
        });
        if checked.is_err() {
            ts.truncate(t0);
            values.truncate(v0);
        }
        checked
    }

    /// The column's rows of `rows`, appended to `ts`.
    fn present_rows(
        &self,
        at: &ColumnAt,
        rows: &[i64],
        ts: &mut Vec<i64>,
    ) -> Result<(), BlockError> {
        if at.presence.is_empty() {
            ts.extend_from_slice(rows);
            return Ok(());
        }
        let bits = &self.bytes[at.presence.clone()];
        // Bits past the last row must be zero.
        let used = self.rows % 8;
        if used != 0 && bits[bits.len() - 1] & (0xff >> used) != 0 {
            return Err(BlockError::Invalid("presence bits past the last row"));
        }
        ts.extend(
            rows.iter()
                .enumerate()
                .filter(|(i, _)| bits[i / 8] & (0x80 >> (i % 8)) != 0)
                .map(|(_, &t)| t),
        );
        Ok(())
    }

    /// Decodes the column's values (appended to `values`) and checks them
    /// against its header, with the number of its times and the first
    /// and the last of them (ns; `None` when it has none).
    fn check_column(
        &self,
        at: &ColumnAt,
        times: usize,
        span: Option<(i64, i64)>,
        values: &mut Vec<f64>,
    ) -> Result<Header, BlockError> {
        let count = at.header.count as usize;
        let span = match span {
            Some(span) if times == count => span,
            _ => {
                return Err(BlockError::Invalid(
                    "rows present and values of a column differ in number",
                ))
            }
        };
        let v0 = values.len();
        let agg = decode_values(
            at.header.codec,
            &self.bytes[at.values.clone()],
            count,
            at.header.sum,
            values,
        )?;
        if !same_header(
            &header_of_columns(at.header.codec, span, &values[v0..], agg),
            &at.header,
        ) {
            return Err(BlockError::Invalid("samples disagree with the header"));
        }
        Ok(at.header)
    }
}

/// Every column of a group block: its series, header and samples.
pub fn decode(bytes: &[u8]) -> Result<Vec<(u64, Header, Vec<Sample>)>, BlockError> {
    let l = Layout::read(bytes)?;
    let ts = l.times()?;
    let series: Vec<u64> = l.series().collect();
    series
        .into_iter()
        .enumerate()
        .map(|(c, s)| l.samples(c, &ts).map(|(h, v)| (s, h, v)))
        .collect()
}

/// The header and samples of `series`' column (`None`: the block has no
/// such column); the other columns' values are not decoded.
pub fn decode_series(
    bytes: &[u8],
    series: u64,
) -> Result<Option<(Header, Vec<Sample>)>, BlockError> {
    let (mut ts, mut values) = (Vec::new(), Vec::new());
    let h = decode_series_columns(bytes, series, &mut ts, &mut values)?;
    Ok(h.map(|h| (h, zip_samples(ts, values))))
}

/// [`decode_series`] with the samples' times appended to `ts` and their
/// values to `values` (both left as they were on an error or when there
/// is no such column).
pub fn decode_series_columns(
    bytes: &[u8],
    series: u64,
    ts: &mut Vec<i64>,
    values: &mut Vec<f64>,
) -> Result<Option<Header>, BlockError> {
    decode_series_columns_in(bytes, series, TimeUnit::Ns, ts, values)
}

/// [`decode_series_columns`] with the times in `unit` (floored).
pub fn decode_series_columns_in(
    bytes: &[u8],
    series: u64,
    unit: TimeUnit,
    ts: &mut Vec<i64>,
    values: &mut Vec<f64>,
) -> Result<Option<Header>, BlockError> {
    let l = Layout::read(bytes)?;
    let Some(c) = l.find(series) else {
        return Ok(None);
    };
    let at = l.column(c)?;
    if !at.presence.is_empty() {
        let rows = l.times()?;
        let t0 = ts.len();
        let got = l.columns_into(c, &rows, ts, values)?;
        let p = 10i64.pow(u32::from(unit.exponent()));
        for t in &mut ts[t0..] {
            *t = t.div_euclid(p);
        }
        return Ok(Some(got));
    }
    // A value at every row (the fields of one line): the rows decode
    // straight into `ts`, checked from the block's first to its last.
    let (t0, v0) = (ts.len(), values.len());
    let span = Some((l.first_ts, l.last_ts));
    let checked = l
        .times_into(unit, ts)
        .and_then(|()| l.check_column(&at, ts.len() - t0, span, values));
    if checked.is_err() {
        ts.truncate(t0);
        values.truncate(v0);
    }
    checked.map(Some)
}

/// Every column's series and header, checking the checksum.
pub fn headers(bytes: &[u8]) -> Result<Vec<(u64, Header)>, BlockError> {
    Layout::read(bytes)?.headers()
}

/// The header of `series`' column, checking the checksum (`None`: no
/// such column).
pub fn header(bytes: &[u8], series: u64) -> Result<Option<Header>, BlockError> {
    Layout::read(bytes)?.header_of(series)
}
