//! Bytes read back into messages: every decoder refuses what it cannot
//! read whole.

use super::*;

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, MsgError> {
        let (&x, rest) = self.0.split_first().ok_or(MsgError::Short)?;
        self.0 = rest;
        Ok(x)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], MsgError> {
        if self.0.len() < n {
            return Err(MsgError::Short);
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn var(&mut self) -> Result<u64, MsgError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let x = self.u8()?;
            let bits = u64::from(x & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(MsgError::Malformed("varint past 64 bits"));
            }
            v |= bits << shift;
            if x & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(MsgError::Malformed("varint past 64 bits"))
    }
    fn home(&mut self) -> Result<u32, MsgError> {
        u32::try_from(self.var()?).map_err(|_| MsgError::Malformed("partition"))
    }
    fn i64(&mut self) -> Result<i64, MsgError> {
        Ok(unzigzag(self.var()?))
    }
    /// A count of items each at least `min_bytes` long: never more than
    /// the bytes left could hold (so a forged count allocates nothing).
    fn count(&mut self, min_bytes: usize) -> Result<usize, MsgError> {
        let n = usize::try_from(self.var()?).map_err(|_| MsgError::Short)?;
        if n.saturating_mul(min_bytes.max(1)) > self.0.len() {
            return Err(MsgError::Short);
        }
        Ok(n)
    }
    fn text(&mut self) -> Result<String, MsgError> {
        let n = self.count(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| MsgError::Malformed("not UTF-8"))
    }
    fn points(&mut self) -> Result<Vec<(i64, f64)>, MsgError> {
        let n = self.count(9)?;
        let mut times = Vec::with_capacity(n.min(PREALLOCATE));
        let mut last = 0i64;
        for _ in 0..n {
            last = last.wrapping_add(self.i64()?);
            times.push(last);
        }
        let values = self.take(n * 8)?;
        Ok(times
            .into_iter()
            .zip(values.chunks_exact(8))
            .map(|(t, v)| {
                (
                    t,
                    f64::from_bits(u64::from_le_bytes(v.try_into().expect("8"))),
                )
            })
            .collect())
    }
    fn series(&mut self) -> Result<Vec<SeriesSamples>, MsgError> {
        let m = self.count(3)?;
        let mut series = Vec::with_capacity(m.min(PREALLOCATE));
        for _ in 0..m {
            let key = self.text()?;
            let group = match self.u8()? {
                0 => None,
                1 => Some(self.text()?),
                _ => return Err(MsgError::Malformed("group flag")),
            };
            let samples = self
                .points()?
                .into_iter()
                .map(|(ts, value)| Sample { ts, value })
                .collect();
            series.push(SeriesSamples {
                key,
                group,
                samples,
            });
        }
        Ok(series)
    }

    fn matchers(&mut self) -> Result<Vec<MatcherSpec>, MsgError> {
        let n = self.count(3)?;
        let mut matchers = Vec::with_capacity(n.min(PREALLOCATE));
        for _ in 0..n {
            matchers.push(MatcherSpec {
                label: self.text()?,
                op: self.text()?,
                value: self.text()?,
            });
        }
        Ok(matchers)
    }
    fn end(&self) -> Result<(), MsgError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(MsgError::Malformed("bytes after the message"))
        }
    }
}

fn open(b: &[u8]) -> Result<(u8, Reader<'_>), MsgError> {
    let mut r = Reader(b);
    let v = r.u8()?;
    if v != VERSION {
        return Err(MsgError::Version(v));
    }
    let kind = r.u8()?;
    Ok((kind, r))
}

pub fn decode_request(b: &[u8]) -> Result<Request, MsgError> {
    let (kind, mut r) = open(b)?;
    let req = match kind {
        WRITE => {
            let db = r.text()?;
            let now = r.i64()?;
            let n = r.count(2)?;
            let mut parts = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                let home = r.home()?;
                let series = r.series()?;
                parts.push(Part { home, series });
            }
            Request::Write { db, now, parts }
        }
        SELECT => {
            let matchers = r.matchers()?;
            Request::Select {
                matchers,
                mint: r.i64()?,
                maxt: r.i64()?,
                now: r.i64()?,
            }
        }
        SELECT_DIGESTS => {
            let matchers = r.matchers()?;
            Request::SelectDigests {
                matchers,
                mint: r.i64()?,
                maxt: r.i64()?,
                now: r.i64()?,
            }
        }
        SELECT_RANGES => {
            let n = r.count(3)?;
            let mut items = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                items.push((r.text()?, r.i64()?, r.i64()?));
            }
            Request::SelectRanges {
                items,
                now: r.i64()?,
            }
        }
        DATABASES => Request::Databases,
        HANDOFF => Request::Handoff {
            db: r.text()?,
            now: r.i64()?,
            series: r.series()?,
        },
        DIGESTS => Request::Digests {
            db: r.text()?,
            home: r.home()?,
            now: r.i64()?,
            from: r.i64()?,
            to: r.i64()?,
            slice: r.i64()?,
        },
        HOME_SAMPLES => Request::HomeSamples {
            db: r.text()?,
            home: r.home()?,
            now: r.i64()?,
            from: r.i64()?,
            to: r.i64()?,
            after: match r.u8()? {
                0 => None,
                1 => Some((r.text()?, r.i64()?)),
                _ => return Err(MsgError::Malformed("cursor flag")),
            },
            limit: r.var()?,
        },
        KEYS => {
            let n = r.count(1)?;
            let mut sets = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                sets.push(r.matchers()?);
            }
            Request::Keys { sets }
        }
        other => return Err(MsgError::Kind(other)),
    };
    r.end()?;
    Ok(req)
}

pub fn decode_reply(b: &[u8]) -> Result<Reply, MsgError> {
    let (kind, mut r) = open(b)?;
    let reply = match kind {
        WRITTEN => Reply::Written(Written {
            written: r.var()?,
            too_old: r.var()?,
            too_new: r.var()?,
            bad_series: r.var()?,
        }),
        SERIES => {
            let n = r.count(2)?;
            let mut found = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                found.push(Found {
                    key: r.text()?,
                    points: r.points()?,
                });
            }
            Reply::Series(found)
        }
        SERIES_DIGESTS => {
            let n = r.count(4)?;
            let mut homes = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                let db = r.text()?;
                let home = r.home()?;
                let slice = r.i64()?;
                let m = r.count(10)?;
                let mut slices = Vec::with_capacity(m.min(PREALLOCATE));
                for _ in 0..m {
                    let start = r.i64()?;
                    let digest = u64::from_le_bytes(r.take(8)?.try_into().expect("8"));
                    slices.push((start, digest, r.var()?));
                }
                homes.push(HomeKept {
                    db,
                    home,
                    slice,
                    slices,
                });
            }
            let n = r.count(12)?;
            let mut series = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                let key = r.text()?;
                let k = r.count(1)?;
                let mut at = Vec::with_capacity(k.min(PREALLOCATE));
                for _ in 0..k {
                    let h = r.home()?;
                    if h as usize >= homes.len() {
                        return Err(MsgError::Malformed("home index"));
                    }
                    at.push(h);
                }
                let from = r.i64()?;
                let points = r.var()?;
                let digest = u64::from_le_bytes(r.take(8)?.try_into().expect("8"));
                series.push(FoundDigest {
                    key,
                    homes: at,
                    from,
                    points,
                    digest,
                });
            }
            Reply::SeriesDigests { homes, series }
        }
        KEY_LIST => {
            let n = r.count(1)?;
            let mut keys = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                keys.push(r.text()?);
            }
            Reply::Keys(keys)
        }
        SLICE_DIGESTS => {
            let n = r.count(10)?;
            let mut slices = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                let start = r.i64()?;
                let digest = u64::from_le_bytes(r.take(8)?.try_into().expect("8"));
                slices.push((start, digest, r.var()?));
            }
            Reply::Digests(slices)
        }
        SAMPLES => Reply::Samples {
            series: r.series()?,
            more: match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(MsgError::Malformed("more flag")),
            },
        },
        FAILED => {
            let kind = match r.u8()? {
                0 => FailKind::Invalid,
                1 => FailKind::Busy,
                2 => FailKind::Failed,
                _ => return Err(MsgError::Malformed("failure kind")),
            };
            Reply::Failed {
                kind,
                text: r.text()?,
            }
        }
        other => return Err(MsgError::Kind(other)),
    };
    r.end()?;
    Ok(reply)
}
