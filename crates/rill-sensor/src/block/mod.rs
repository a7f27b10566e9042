//! A block: one series' samples over part of a window, compressed, with
//! a header of aggregates that answers whole-block questions (min, max,
//! first, last, count, sum) without decoding the samples.
//!
//! Layout, version 1 (all integers little-endian; docs/format.md,
//! "Sensor block"):
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 1 | version, 1 |
//! | 1 | 1 | value codec: 1 Gorilla XOR, 2 scaled decimals |
//! | 2 | 1 | time unit: timestamps are multiples of 10^k ns, k in 0..=9 |
//! | 3 | 1 | flags: bit 0, timestamps on a grid (grid.rs; else time.rs); other bits 0 |
//! | 4 | 4 | count of samples, at least 1 |
//! | 8 | 8 | first timestamp, ns since the epoch (i64) |
//! | 16 | 8 | last timestamp (i64) |
//! | 24 | 8 | min (f64; over the values that are not NaN, NaN if none) |
//! | 32 | 8 | max (f64; likewise) |
//! | 40 | 8 | first value (f64) |
//! | 48 | 8 | last value (f64) |
//! | 56 | 8 | sum (f64; of the values that are not NaN) |
//! | 64 | 4 | length of the timestamps section |
//! | 68 | n | timestamps section (time.rs, or grid.rs with flag bit 0) |
//! | .. | m | values section (decimal.rs or gorilla.rs), to the checksum |
//! | end-4 | 4 | CRC-32 (IEEE) of every byte before it |

mod decimal;
mod gorilla;
mod grid;
pub mod group;
mod time;
mod wide;

use crate::bits::{BitReader, BitWriter, Truncated};

pub const VERSION: u8 = 1;
/// Flag bit: the timestamps section is a grid (grid.rs).
pub(crate) const GRID: u8 = 1;
const HEADER: usize = 68;
/// The most samples a block may hold (a damaged or hostile count must
/// not make a reader allocate without bound).
pub const MAX_SAMPLES: usize = 1 << 20;
const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;

/// One reading: nanoseconds since the epoch and a value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub ts: i64,
    pub value: f64,
}

/// How a block's values are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Gorilla = 1,
    Decimal = 2,
}

/// The unit of decoded times: ns, or floored to ms (what a query takes:
/// a block in units of 1 ms or more is decoded straight into ms, with no
/// division a sample).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Ns,
    Ms,
}

impl TimeUnit {
    /// `s`: the unit is 10^s ns.
    pub(crate) fn exponent(self) -> u8 {
        match self {
            TimeUnit::Ns => 0,
            TimeUnit::Ms => 6,
        }
    }
}

/// Which value codec to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Scaled decimals where every value is one, else Gorilla XOR.
    Auto,
    /// Both, keeping the smaller.
    Smallest,
    /// Gorilla XOR only.
    Gorilla,
}

/// A block's header: what is known without decoding the samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    pub codec: Codec,
    pub count: u32,
    pub first_ts: i64,
    pub last_ts: i64,
    pub min: f64,
    pub max: f64,
    pub first: f64,
    pub last: f64,
    pub sum: f64,
}

/// Why bytes are not a block.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BlockError {
    #[error("not a sensor block: {0}")]
    Invalid(&'static str),
    #[error("a damaged sensor block: checksum mismatch")]
    Checksum,
    #[error("sensor block version {0} is newer than this build reads (1 and 2)")]
    Version(u8),
}

impl From<Truncated> for BlockError {
    fn from(_: Truncated) -> BlockError {
        BlockError::Invalid("truncated")
    }
}

/// Why samples cannot be made a block.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EncodeError {
    #[error("a block needs at least one sample")]
    Empty,
    #[error("a block holds at most {MAX_SAMPLES} samples")]
    TooMany,
    #[error("timestamps must rise strictly within a block")]
    NotRising,
    #[error(
        "a group block holds 1 to {} columns, their series ids rising",
        group::MAX_COLUMNS
    )]
    Columns,
}

/// Encodes samples (timestamps strictly rising) as a block.
pub fn encode(samples: &[Sample], choice: Choice) -> Result<Vec<u8>, EncodeError> {
    if samples.len() > MAX_SAMPLES {
        return Err(EncodeError::TooMany);
    }
    if samples.is_empty() {
        return Err(EncodeError::Empty);
    }
    if samples.windows(2).any(|w| w[1].ts <= w[0].ts) {
        return Err(EncodeError::NotRising);
    }
    let ts: Vec<i64> = samples.iter().map(|s| s.ts).collect();
    let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
    let (k, flags, times) = encode_times(&ts);
    let (codec, body) = encode_values(&values, choice);
    let h = header_of(codec, samples);
    let mut out = Vec::with_capacity(HEADER + times.len() + body.len() + 4);
    out.extend_from_slice(&[VERSION, codec as u8, k, flags]);
    put_aggregates(&mut out, &h);
    out.extend_from_slice(&(times.len() as u32).to_le_bytes());
    out.extend_from_slice(&times);
    out.extend_from_slice(&body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// A header's count, first and last timestamps, min, max, first, last
/// and sum, as both block versions lay them out (44 bytes).
fn put_aggregates(out: &mut Vec<u8>, h: &Header) {
    out.extend_from_slice(&h.count.to_le_bytes());
    out.extend_from_slice(&h.first_ts.to_le_bytes());
    out.extend_from_slice(&h.last_ts.to_le_bytes());
    for f in [h.min, h.max, h.first, h.last, h.sum] {
        out.extend_from_slice(&f.to_le_bytes());
    }
}

/// The timestamps section of rising `ts`: its time unit, its flags
/// (`GRID` where the grid is shorter) and its bytes.
fn encode_times(ts: &[i64]) -> (u8, u8, Vec<u8>) {
    let k = time::unit_exponent(ts);
    let mut tw = BitWriter::default();
    time::encode(ts, k, &mut tw);
    let times = tw.into_bytes();
    // Timestamps on a grid where that is smaller (jittered sampling).
    match grid::encode(ts, k) {
        Some(g) if g.len() < times.len() => (k, GRID, g),
        _ => (k, 0, times),
    }
}

/// The values section of `values` by `choice`, and its codec.
fn encode_values(values: &[f64], choice: Choice) -> (Codec, Vec<u8>) {
    let gorilla = || {
        let mut w = BitWriter::default();
        gorilla::encode(values, &mut w);
        w.into_bytes()
    };
    match choice {
        Choice::Gorilla => (Codec::Gorilla, gorilla()),
        Choice::Auto => match decimal::encode(values) {
            Some(d) => (Codec::Decimal, d),
            None => (Codec::Gorilla, gorilla()),
        },
        Choice::Smallest => {
            let g = gorilla();
            match decimal::encode(values) {
                Some(d) if d.len() < g.len() => (Codec::Decimal, d),
                _ => (Codec::Gorilla, g),
            }
        }
    }
}

/// `count` values from a values section, appended to `out` (left as it
/// was on an error); their aggregates when the decoder gathered them.
fn decode_values(
    codec: Codec,
    bytes: &[u8],
    count: usize,
    sum: f64,
    out: &mut Vec<f64>,
) -> Result<Option<(f64, f64, f64)>, BlockError> {
    let start = out.len();
    let done = match codec {
        Codec::Gorilla => gorilla::decode(&mut BitReader::new(bytes), count, out).map(|()| None),
        Codec::Decimal => decimal::decode(bytes, count, sum, out).map(|a| Some(a.finish())),
    };
    if done.is_err() {
        out.truncate(start);
    }
    done
}

/// The aggregates, the same bits on every machine: min and max by IEEE
/// total order (-0.0 below +0.0), the sum added in sample order, and
/// every NaN they give the one quiet NaN `0x7ff8000000000000`.
fn header_of(codec: Codec, samples: &[Sample]) -> Header {
    let (first, last) = (samples[0], samples[samples.len() - 1]);
    let (min, max, sum) = aggregates(samples.iter().map(|s| s.value));
    Header {
        codec,
        count: samples.len() as u32,
        first_ts: first.ts,
        last_ts: last.ts,
        min,
        max,
        first: first.value,
        last: last.value,
        sum,
    }
}

/// [`header_of`] samples given as their values (not empty) and the
/// times of the first and the last (ns). `agg`: the values' aggregates
/// when their decoder gathered them.
fn header_of_columns(
    codec: Codec,
    span: (i64, i64),
    values: &[f64],
    agg: Option<(f64, f64, f64)>,
) -> Header {
    let (min, max, sum) = agg.unwrap_or_else(|| aggregates(values.iter().copied()));
    Header {
        codec,
        count: values.len() as u32,
        first_ts: span.0,
        last_ts: span.1,
        min,
        max,
        first: values[0],
        last: values[values.len() - 1],
        sum,
    }
}

/// Min, max and sum of values as [`header_of`] gives them.
fn aggregates(values: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let mut a = Agg::default();
    for v in values {
        a.add(v);
    }
    a.finish()
}

/// [`aggregates`] gathered a value at a time (a decoder gathers them as
/// it decodes: no second pass over the values).
#[derive(Clone, Copy)]
pub(crate) struct Agg {
    lo: i64,
    hi: i64,
    sum: f64,
    any: bool,
}

impl Default for Agg {
    fn default() -> Agg {
        Agg {
            lo: i64::MAX,
            hi: i64::MIN,
            sum: 0.0,
            any: false,
        }
    }
}

/// IEEE total order as signed integers (f64::total_cmp's mapping, its
/// own inverse), so each value is compared as one integer.
fn flip(b: i64) -> i64 {
    b ^ (((b >> 63) as u64) >> 1) as i64
}

impl Agg {
    /// The aggregates of values (none NaN) whose least is `min`, greatest
    /// `max` and sum `sum`.
    pub(crate) fn span(min: f64, max: f64, sum: f64) -> Agg {
        Agg {
            lo: flip(min.to_bits() as i64),
            hi: flip(max.to_bits() as i64),
            sum,
            any: true,
        }
    }

    #[inline(always)]
    pub(crate) fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        let k = flip(v.to_bits() as i64);
        self.lo = self.lo.min(k);
        self.hi = self.hi.max(k);
        self.sum += v;
        self.any = true;
    }

    /// Min, max and sum, every NaN the canonical one.
    pub(crate) fn finish(self) -> (f64, f64, f64) {
        let back = |k: i64| f64::from_bits(flip(k) as u64);
        let (min, max) = if self.any {
            (back(self.lo), back(self.hi))
        } else {
            (f64::NAN, f64::NAN)
        };
        let canonical = |f: f64| {
            if f.is_nan() {
                f64::from_bits(CANONICAL_NAN)
            } else {
                f
            }
        };
        (canonical(min), canonical(max), canonical(self.sum))
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Checks the checksum and reads the header.
pub fn header(bytes: &[u8]) -> Result<Header, BlockError> {
    if bytes.len() < HEADER + 4 {
        return Err(BlockError::Invalid("shorter than a header"));
    }
    match bytes[0] {
        VERSION => {}
        0 => return Err(BlockError::Invalid("version 0")),
        group::VERSION => {
            return Err(BlockError::Invalid(
                "a group block (version 2), not a single series' block",
            ))
        }
        v => return Err(BlockError::Version(v)),
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32_at(crc, 0) {
        return Err(BlockError::Checksum);
    }
    let codec = match bytes[1] {
        1 => Codec::Gorilla,
        2 => Codec::Decimal,
        _ => return Err(BlockError::Invalid("unknown value codec")),
    };
    if bytes[2] > 9 || bytes[3] & !GRID != 0 {
        return Err(BlockError::Invalid("bad time unit or flags"));
    }
    let f = |at| f64::from_bits(u64_at(bytes, at));
    let h = Header {
        codec,
        count: u32_at(bytes, 4),
        first_ts: u64_at(bytes, 8) as i64,
        last_ts: u64_at(bytes, 16) as i64,
        min: f(24),
        max: f(32),
        first: f(40),
        last: f(48),
        sum: f(56),
    };
    if h.count == 0
        || h.count as usize > MAX_SAMPLES
        || h.last_ts < h.first_ts
        || (h.count == 1) != (h.first_ts == h.last_ts)
    {
        return Err(BlockError::Invalid("inconsistent header"));
    }
    Ok(h)
}

/// Decodes a block to its samples, checking everything it can: a block
/// that decodes is the block that was encoded (or its checksum failed).
pub fn decode(bytes: &[u8]) -> Result<(Header, Vec<Sample>), BlockError> {
    let (mut ts, mut values) = (Vec::new(), Vec::new());
    let h = decode_columns(bytes, &mut ts, &mut values)?;
    Ok((h, zip_samples(ts, values)))
}

/// Two columns as samples.
fn zip_samples(ts: Vec<i64>, values: Vec<f64>) -> Vec<Sample> {
    ts.into_iter()
        .zip(values)
        .map(|(ts, value)| Sample { ts, value })
        .collect()
}

/// [`decode`] with the samples' times appended to `ts` and their values
/// to `values` (both left as they were on an error).
pub fn decode_columns(
    bytes: &[u8],
    ts: &mut Vec<i64>,
    values: &mut Vec<f64>,
) -> Result<Header, BlockError> {
    decode_columns_in(bytes, TimeUnit::Ns, ts, values)
}

/// [`decode_columns`] with the times in `unit` (floored).
pub fn decode_columns_in(
    bytes: &[u8],
    unit: TimeUnit,
    ts: &mut Vec<i64>,
    values: &mut Vec<f64>,
) -> Result<Header, BlockError> {
    let h = header(bytes)?;
    let count = h.count as usize;
    let end = bytes.len() - 4;
    let times_len = u32_at(bytes, 64) as usize;
    if times_len > end - HEADER {
        return Err(BlockError::Invalid("timestamps past the end"));
    }
    let times = &bytes[HEADER..HEADER + times_len];
    let (t0, v0) = (ts.len(), values.len());
    let span = (h.first_ts, h.last_ts);
    let checked = time::decode_section(span, count, bytes[2], bytes[3], times, unit, ts)
        .and_then(|()| {
            decode_values(
                h.codec,
                &bytes[HEADER + times_len..end],
                count,
                h.sum,
                values,
            )
        })
        .and_then(|agg| {
            // The times' first and last were checked as they were read.
            if same_header(&header_of_columns(h.codec, span, &values[v0..], agg), &h) {
                Ok(h)
            } else {
                Err(BlockError::Invalid("samples disagree with the header"))
            }
        });
    if checked.is_err() {
        ts.truncate(t0);
        values.truncate(v0);
    }
    checked
}

/// What a decoder claims of samples that decode: `h` is their header
/// (count, times, first, last, min and max bit for bit), the sum of a
/// decimal column within the rounding of an in-order sum (twice the
/// decoder's bound: this one is taken of the values, not the exact
/// mantissas).
#[cfg(test)]
pub(crate) fn agrees(h: &Header, samples: &[Sample]) -> bool {
    let got = header_of(h.codec, samples);
    if h.codec != Codec::Decimal {
        return same_header(&got, h);
    }
    let size: f64 = samples.iter().map(|s| s.value.abs()).sum();
    let n = samples.len() as f64;
    let near = (got.sum - h.sum).abs() <= (2.0 * n + 8.0) * f64::EPSILON * size * (1.0 + 1e-9);
    same_header(&Header { sum: h.sum, ..got }, h) && near
}

/// Headers equal bit for bit (NaN equal to NaN).
fn same_header(a: &Header, b: &Header) -> bool {
    let bits = |h: &Header| [h.min, h.max, h.first, h.last, h.sum].map(f64::to_bits);
    a.codec == b.codec
        && a.count == b.count
        && a.first_ts == b.first_ts
        && a.last_ts == b.last_ts
        && bits(a) == bits(b)
}

#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wide_tests;
