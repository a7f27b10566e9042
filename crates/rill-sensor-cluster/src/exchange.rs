//! Anti-entropy for sensor data: the replicas of a home partition
//! compare what they hold and send each other what the other lacks, so
//! they converge after what handoff cannot see (a node whose data
//! directory was lost, a node down while writes went on with W met
//! without it, a write acknowledged by fewer replicas than N).
//!
//! Each round, for every home partition this node holds and owns, the
//! node exchanges with the next owner of the home after it that is up
//! (the owners taken in preference-list order, around): with three
//! owners A, B, C, A exchanges with B, B with C, C with A, so each
//! replica is some other's partner, and one that holds nothing (wiped)
//! is still reached by the one before it.
//!
//! An exchange compares the digests of the home's slices of time
//! (`rill_tsdb::Engine::slice_digests`: an hour each, or the window if
//! shorter) from the oldest whole slice within the storage period to
//! the last slice that ended before `now` less `sensor.grace`: settled
//! slices only, whose digests each side keeps, so a round in a steady
//! state reads each sample about once (when its slice settles), not
//! once a round. A settled slice that took a write within the grace
//! period on either side (a backfill of history, a repair) is busy: not
//! read, not compared, until it has been quiet that long. The slice
//! being written is left to the write path (W replicas) and handoff: a replica that lacks some of it is repaired
//! once it settles, about an hour later. For every slice that differs,
//! each side sends the other its samples of the slice, in pages, and
//! each keeps those it lacks (`Engine::write_missing`: a time it does
//! not hold, or a larger value), so both hold the union and their
//! digests agree.
//!
//! The unit compared is the slice, not the series: a slice that differs
//! by one sample sends the whole slice of the home both ways (reads and
//! network, not writes: each side writes only what it lacks). A second
//! level of digests per series would cut that; divergence is rare
//! outside a lost node, where the whole slice is missing anyway.

use crate::handoff::owners;
use crate::msg::{self, Reply, Request, SeriesSamples};
use crate::SensorCluster;
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_tsdb::Engine;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Samples in one page of an exchange.
const PAGE_SAMPLES: u64 = 250_000;

/// Slices of a home partition exchanged with a peer: samples from `t0`
/// to `t1` (ns, both included), judged at `now`, in pages of about
/// `page` samples.
#[derive(Clone, Copy)]
struct Span<'a> {
    db: &'a str,
    home: u32,
    t0: i64,
    t1: i64,
    now: i64,
    page: u64,
}

/// What a round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeReport {
    /// Home partitions compared with a partner.
    pub exchanged: usize,
    /// Slices that differed.
    pub slices_differing: usize,
    /// Slices left for a later round, written lately on either side.
    pub slices_busy: usize,
    /// Samples the partners wrote (they lacked them).
    pub samples_sent: u64,
    /// Samples this node wrote (it lacked them).
    pub samples_taken: u64,
    /// Exchanges that failed (tried again next round).
    pub failed: usize,
}

/// Anti-entropy's counters since the node started.
#[derive(Default)]
pub(crate) struct Counters {
    rounds: AtomicU64,
    exchanges: AtomicU64,
    slices_differing: AtomicU64,
    slices_busy: AtomicU64,
    samples_repaired: AtomicU64,
    failures: AtomicU64,
}

/// Anti-entropy's counters since the node started, for `/stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeStats {
    /// Rounds done (every home held and owned, exchanged or tried).
    pub rounds: u64,
    pub exchanges: u64,
    pub slices_differing: u64,
    /// Slices left for a later round, written lately on either side.
    pub slices_busy: u64,
    /// Samples written on either side of this node's exchanges.
    pub samples_repaired: u64,
    pub failures: u64,
}

/// The partner of `me` among `owners`: the next one after it that is up.
pub fn partner<'a>(owners: &'a [String], me: &str, up: impl Fn(&str) -> bool) -> Option<&'a str> {
    let i = owners.iter().position(|o| o == me)?;
    (1..owners.len())
        .map(|k| owners[(i + k) % owners.len()].as_str())
        .find(|o| up(o))
}

/// The slices of `mine` and `theirs` (start, digest, samples) that
/// differ, as runs of adjacent slices `[from, to)`; `to` ends the last.
pub fn differing(
    mine: &[(i64, u64, u64)],
    theirs: &[(i64, u64, u64)],
    slice: i64,
    to: i64,
) -> Vec<(i64, i64)> {
    let theirs: BTreeMap<i64, (u64, u64)> = theirs.iter().map(|&(s, d, n)| (s, (d, n))).collect();
    let mut starts: Vec<i64> = mine
        .iter()
        .filter(|&&(s, d, n)| theirs.get(&s).copied().unwrap_or((0, 0)) != (d, n))
        .map(|&(s, _, _)| s)
        .collect();
    let mine_at: BTreeMap<i64, ()> = mine.iter().map(|&(s, _, _)| (s, ())).collect();
    starts.extend(
        theirs
            .iter()
            .filter(|(s, (_, n))| *n > 0 && !mine_at.contains_key(s))
            .map(|(s, _)| *s),
    );
    starts.sort_unstable();
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for s in starts {
        let end = s.saturating_add(slice).min(to);
        match runs.last_mut() {
            Some(r) if r.1 == s => r.1 = end,
            _ => runs.push((s, end)),
        }
    }
    runs
}

impl SensorCluster {
    /// One round of anti-entropy at `now` (ns).
    pub fn exchange_round(&self, now: i64) -> ExchangeReport {
        let mut report = ExchangeReport::default();
        let started = Instant::now();
        let view = self.node.cluster_view();
        for (db, home) in self.engine.homes() {
            let to = owners(&view.ring, home, self.replication.n_val);
            let Some(peer) = partner(&to, &view.me, |o| view.is_up(o)) else {
                continue;
            };
            match self.exchange_home(&db, home, peer, now, &mut report) {
                Ok(()) => report.exchanged += 1,
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(db, home, peer, error = %e, "a sensor anti-entropy exchange failed; it is tried again");
                }
            }
        }
        let c = &self.exchange;
        c.rounds.fetch_add(1, Ordering::Relaxed);
        c.exchanges
            .fetch_add(report.exchanged as u64, Ordering::Relaxed);
        c.slices_differing
            .fetch_add(report.slices_differing as u64, Ordering::Relaxed);
        c.slices_busy
            .fetch_add(report.slices_busy as u64, Ordering::Relaxed);
        c.samples_repaired.fetch_add(
            report.samples_sent + report.samples_taken,
            Ordering::Relaxed,
        );
        c.failures
            .fetch_add(report.failed as u64, Ordering::Relaxed);
        tracing::debug!(
            ms = started.elapsed().as_millis() as u64,
            homes = report.exchanged,
            "a sensor anti-entropy round"
        );
        if report.samples_sent + report.samples_taken > 0 {
            tracing::info!(
                homes = report.exchanged,
                slices = report.slices_differing,
                sent = report.samples_sent,
                taken = report.samples_taken,
                "sensor anti-entropy repaired replicas"
            );
        }
        report
    }

    /// Anti-entropy's counters since the node started.
    pub fn exchange_stats(&self) -> ExchangeStats {
        let c = &self.exchange;
        ExchangeStats {
            rounds: c.rounds.load(Ordering::Relaxed),
            exchanges: c.exchanges.load(Ordering::Relaxed),
            slices_differing: c.slices_differing.load(Ordering::Relaxed),
            slices_busy: c.slices_busy.load(Ordering::Relaxed),
            samples_repaired: c.samples_repaired.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
        }
    }

    fn exchange_home(
        &self,
        db: &str,
        home: u32,
        peer: &str,
        now: i64,
        report: &mut ExchangeReport,
    ) -> Result<(), String> {
        exchange_home(
            &self.engine,
            db,
            home,
            now,
            PAGE_SAMPLES,
            &mut |r| self.ask(peer, r),
            report,
        )
    }

    /// Asks `peer` and waits for its answer (a failure is an error).
    fn ask(&self, peer: &str, request: &Request) -> Result<Reply, String> {
        let mut calls = self.node.call_nodes(vec![(
            peer.to_string(),
            VnodeRequest::Sensor(msg::encode_request(request)),
        )]);
        let deadline = Instant::now() + self.node.request_timeout();
        match calls.next(deadline) {
            Some((_, VnodeReply::Sensor(b))) => match msg::decode_reply(&b) {
                Ok(Reply::Failed { text, .. }) => Err(format!("{peer}: {text}")),
                Ok(r) => Ok(r),
                Err(e) => Err(format!("{peer}: {e}")),
            },
            Some((_, other)) => Err(format!("{peer}: {other:?}")),
            None => Err(format!("{peer}: no answer in time")),
        }
    }
}

/// One exchange of home partition `home` of `db` between `engine` (this
/// node's) and a peer that `ask` sends requests to and returns the answer
/// of: digests compared, and each differing run of slices sent and taken
/// in pages of about `page` samples. What a round runs for each home,
/// and what the simulation runs over its network.
pub fn exchange_home(
    engine: &Engine,
    db: &str,
    home: u32,
    now: i64,
    page: u64,
    ask: &mut dyn FnMut(&Request) -> Result<Reply, String>,
    report: &mut ExchangeReport,
) -> Result<(), String> {
    let slice = engine.slice_ns();
    let to = now
        .saturating_sub(engine.options().grace_ns)
        .div_euclid(slice)
        * slice;
    let first = engine.first_slice(db, now.saturating_sub(engine.options().retention(db)), now);
    if to <= first {
        return Ok(());
    }
    // Those that hold samples or are busy: one absent holds none.
    let all = engine
        .slice_digests(db, home, first, to, now)
        .map_err(|e| e.to_string())?;
    let theirs = match ask(&Request::Digests {
        db: db.to_string(),
        home,
        now,
        from: first,
        to,
        slice,
    })? {
        Reply::Digests(d) => d,
        other => return Err(format!("digests answered by {other:?}")),
    };
    // Only the slices asked for (a peer whose storage period starts
    // later answers fewer: those are not compared).
    let theirs: Vec<(i64, u64, u64)> = theirs
        .into_iter()
        .filter(|(s, _, _)| (first..to).contains(s) && (s - first) % slice == 0)
        .collect();
    // A slice busy on either side (written within the grace period: a
    // backfill or a repair under way; a peer sends it as 0 samples) waits
    // for a later round; empty slices are not compared (one side's
    // absent slice is empty).
    let busy: BTreeSet<i64> = all
        .iter()
        .filter(|(_, d)| d.busy)
        .map(|m| m.0)
        .chain(theirs.iter().filter(|e| e.2 == 0).map(|e| e.0))
        .collect();
    report.slices_busy += busy.len();
    let mine: Vec<(i64, u64, u64)> = all
        .into_iter()
        .filter(|(s, d)| d.samples > 0 && !busy.contains(s))
        .map(|(s, d)| (s, d.digest, d.samples))
        .collect();
    let theirs: Vec<(i64, u64, u64)> = theirs
        .into_iter()
        .filter(|e| e.2 > 0 && !busy.contains(&e.0))
        .collect();
    for (lo, hi) in differing(&mine, &theirs, slice, to) {
        report.slices_differing +=
            usize::try_from((hi - lo).div_euclid(slice).max(1)).unwrap_or(usize::MAX);
        let span = Span {
            db,
            home,
            t0: lo,
            t1: hi - 1,
            now,
            page,
        };
        report.samples_sent += send_range(engine, &span, ask)?;
        report.samples_taken += take_range(engine, &span, ask)?;
    }
    Ok(())
}

/// Sends `engine`'s samples of the span to the peer, page by page; the
/// samples it wrote.
fn send_range(
    engine: &Engine,
    span: &Span<'_>,
    ask: &mut dyn FnMut(&Request) -> Result<Reply, String>,
) -> Result<u64, String> {
    let &Span {
        db,
        home,
        t0,
        t1,
        now,
        page,
    } = span;
    let mut after: Option<(String, i64)> = None;
    let mut written = 0;
    loop {
        let (samples, more) = engine
            .home_samples(
                db,
                home,
                t0,
                t1,
                now,
                after.as_ref().map(|(k, t)| (k.as_str(), *t)),
                usize::try_from(page).unwrap_or(usize::MAX),
            )
            .map_err(|e| e.to_string())?;
        after = samples
            .last()
            .and_then(|(k, _, v)| Some((k.clone(), v.last()?.ts)));
        if !samples.is_empty() {
            let series = samples.into_iter().map(SeriesSamples::from).collect();
            match ask(&Request::Handoff {
                db: db.to_string(),
                now,
                series,
            })? {
                Reply::Written(w) => written += w.written,
                other => return Err(format!("samples answered by {other:?}")),
            }
        }
        if !more {
            return Ok(written);
        }
    }
}

/// Takes the peer's samples of the span, page by page, keeping those
/// `engine` lacks; the samples written.
fn take_range(
    engine: &Engine,
    span: &Span<'_>,
    ask: &mut dyn FnMut(&Request) -> Result<Reply, String>,
) -> Result<u64, String> {
    let &Span {
        db,
        home,
        t0,
        t1,
        now,
        page,
    } = span;
    let mut after: Option<(String, i64)> = None;
    let mut written = 0;
    loop {
        let (series, more) = match ask(&Request::HomeSamples {
            db: db.to_string(),
            home,
            now,
            from: t0,
            to: t1,
            after: after.clone(),
            limit: page,
        })? {
            Reply::Samples { series, more } => (series, more),
            other => return Err(format!("a page answered by {other:?}")),
        };
        let next = series
            .last()
            .and_then(|s| Some((s.key.clone(), s.samples.last()?.ts)));
        if more && (next.is_none() || next == after) {
            return Err("a page that does not move on".into());
        }
        after = next;
        written += crate::replica::keep_missing(engine, db, series, now)
            .map_err(|e| e.to_string())?
            .written;
        if !more {
            return Ok(written);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_owner_exchanges_with_the_next_one_up() {
        let owners: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let all = |_: &str| true;
        assert_eq!(partner(&owners, "a", all), Some("b"));
        assert_eq!(partner(&owners, "c", all), Some("a"));
        // b down: a's partner is c, and c's is a.
        let no_b = |o: &str| o != "b";
        assert_eq!(partner(&owners, "a", no_b), Some("c"));
        assert_eq!(partner(&owners, "x", all), None);
        assert_eq!(partner(&owners[..1], "a", all), None);
    }

    #[test]
    fn differing_slices_make_runs_and_an_empty_side_differs_everywhere() {
        let mine = vec![(0, 1, 1), (10, 2, 2), (20, 3, 3), (30, 4, 4)];
        let theirs = vec![(0, 1, 1), (10, 9, 2), (20, 9, 3), (30, 4, 4)];
        assert_eq!(differing(&mine, &theirs, 10, 35), vec![(10, 30)]);
        assert_eq!(differing(&mine, &[], 10, 35), vec![(0, 35)]);
        // Only they hold a slice: it differs too.
        let mine = vec![(0, 0, 0), (10, 2, 2)];
        let theirs = vec![(0, 5, 1), (10, 2, 2)];
        assert_eq!(differing(&mine, &theirs, 10, 20), vec![(0, 10)]);
        assert_eq!(differing(&[], &theirs, 10, 20), vec![(0, 20)]);
        assert!(differing(&mine, &mine, 10, 20).is_empty());
    }
}
