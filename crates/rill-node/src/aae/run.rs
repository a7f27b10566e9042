//! The schedule: builds trees that are missing or due (one vnode at a
//! time), and starts each owned vnode's next exchange when its tick
//! comes (at most one per vnode, `MAX_RUNNING` on the node). An exchange
//! asks both replicas through `Replicas` (this node's vnode at once,
//! another node's through the cluster runtime), pauses between stages,
//! and repairs what differs with a read that repairs its replicas
//! (Riak's `riak_kv_tictacaae_repairs`: a get per key). An exchange that
//! found differences is followed, after the pause, by more between the
//! same replicas (`rill_aae::FollowUps`: Riak's repair loops, and more
//! for replicas far apart), and the vnode then runs the rest of its loop
//! at the pause, until a whole loop finds nothing. The first exchanges
//! after a start come within a minute, not a tick.

use super::{Aae, Plan, FIRST_WITHIN, MAX_RUNNING};
use crate::error::KvError;
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::GetRequest;
use rill_aae::{pairwise, Answer, Ask, Exchange, IndexN, Outcome, Pair, Stage, Status, Step};
use rill_ring::{Partition, PreflistEntry};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long a replica may take to answer for a tree level, and for the
/// keys and clocks of segments (a scan of the vnode's keys).
const TREE_TIMEOUT: Duration = Duration::from_secs(60);
const CLOCKS_TIMEOUT: Duration = Duration::from_secs(600);

/// A vnode whose build failed waits this long before the next try (the
/// others are built meanwhile).
const BUILD_RETRY: Duration = Duration::from_secs(60);

pub(super) fn schedule(weak: Weak<Aae>) {
    loop {
        let Some(aae) = weak.upgrade() else { return };
        if aae.stopped() {
            return;
        }
        aae.start_rebuild();
        aae.start_exchanges();
        let s = aae.state();
        let _ = aae
            .wake
            .wait_timeout(s, Duration::from_millis(200))
            .unwrap_or_else(|e| e.into_inner());
    }
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn next_random(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mix(*s)
}

impl Aae {
    /// Starts building one vnode's trees if any is unbuilt, asked for,
    /// or due (`tictacaae_rebuildwait` plus its share of
    /// `tictacaae_rebuilddelay` after its last build).
    fn start_rebuild(self: &Arc<Self>) {
        let cfg = self.config();
        let now = Instant::now();
        let now_ms = crate::ids::now_us() / 1000;
        let mut s = self.state();
        if s.rebuilding {
            return;
        }
        let check_due = now >= s.next_rebuild_check;
        if check_due {
            s.next_rebuild_check = now + cfg.rebuild_tick;
        }
        let delay_ms = cfg.rebuild_delay.as_millis().max(1) as u64;
        let wait_ms = cfg.rebuild_wait.as_millis() as u64;
        let retry = s.build_retry_at.clone();
        let pick = self.vnodes.iter().find(|v| {
            let Some(a) = v.aae() else { return false };
            if retry[v.partition.0 as usize].is_some_and(|at| at > now) {
                return false;
            }
            match a.trees().status() {
                Status::Unbuilt => true,
                Status::Built { at_ms } => {
                    s.rebuild_asked.contains(&v.partition.0)
                        || (check_due
                            && at_ms + wait_ms + mix(u64::from(v.partition.0)) % delay_ms <= now_ms)
                }
                Status::Building | Status::Rebuilding { .. } => false,
            }
        });
        let Some(v) = pick.cloned() else { return };
        s.rebuild_asked.retain(|p| *p != v.partition.0);
        s.rebuilding = true;
        drop(s);
        let aae = self.clone();
        let spawned = self.spawn_thread("rill-aae-build", move || {
                let started = Instant::now();
                let keep_going = || !aae.stopped();
                match v.rebuild_trees(|| crate::ids::now_us() / 1000, keep_going) {
                    Ok(true) => {
                        aae.counters.rebuilds.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(partition = v.partition.0, took_ms = started.elapsed().as_millis() as u64, "anti-entropy trees built");
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(partition = v.partition.0, error = %e, "building the anti-entropy trees failed; tried again in a minute");
                        aae.state().build_retry_at[v.partition.0 as usize] =
                            Some(Instant::now() + BUILD_RETRY);
                    }
                }
                aae.state().rebuilding = false;
                aae.wake.notify_all();
            });
        if spawned.is_err() {
            self.state().rebuilding = false;
        }
    }

    /// Starts the exchanges whose tick has come.
    fn start_exchanges(self: &Arc<Self>) {
        let cfg = self.config();
        let Some(kv) = self.coordinator.upgrade() else {
            return;
        };
        let n_vals = self.n_vals_in_use(&kv.buckets);
        let view = self.replicas.view();
        let me = view.me.clone();
        let size = view.ring.size();
        let now = Instant::now();
        let mut s = self.state();
        for p in 0..self.vnodes.len() as u32 {
            if s.running >= MAX_RUNNING {
                return;
            }
            let owned = view.ring.owner(Partition(p)) == me;
            let built = self
                .vnodes
                .at_partition(Partition(p))
                .aae()
                .is_some_and(|a| a.trees().is_built());
            let tick = cfg.exchange_tick;
            let rng = next_random(&mut s.rng);
            let plan = &mut s.plans[p as usize];
            if !owned || !built || plan.running {
                continue;
            }
            let Some(at) = plan.next_at else {
                // The first exchange: spread by partition over a minute
                // (or the tick) after the start or a change of settings.
                let spread = FIRST_WITHIN.min(tick);
                plan.next_at = Some(now + spread / 256 * (mix(u64::from(p)) % 256) as u32);
                continue;
            };
            if at > now {
                continue;
            }
            let (pair, boost) = match plan.follow {
                Some((pair, f)) => (pair, f.boost),
                None => {
                    if plan.queue.is_empty() {
                        // A new loop: catching up ends with a loop that
                        // found nothing.
                        plan.catch_up &= plan.loop_found || !plan.looped;
                        plan.loop_found = false;
                        plan.looped = true;
                        plan.queue = pairwise(p, &n_vals, size);
                        shuffle(&mut plan.queue, rng);
                    }
                    let Some(pair) = plan.queue.pop() else {
                        plan.next_at = Some(now + tick);
                        continue;
                    };
                    (pair, 1)
                }
            };
            let remote = view.ring.owner(Partition(pair.remote)).to_string();
            if !view.is_up(&remote) {
                // Primaries only (Riak's tictacaae_primaryonly): the next
                // pair at the next tick.
                plan.next_at = Some(now + tick);
                plan.follow = None;
                continue;
            }
            plan.running = true;
            s.running += 1;
            self.counters
                .running
                .store(s.running as u64, Ordering::Relaxed);
            let aae = self.clone();
            let max_results = (cfg.max_results.max(1) * boost) as usize;
            let job = Job {
                partition: p,
                pair,
                remote,
                max_results,
                seed: rng,
                pause: cfg.exchange_pause,
            };
            let spawned = self.spawn_thread("rill-aae-exchange", move || {
                // A panic must not leave the vnode marked running.
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| aae.exchange(&job)))
                        .unwrap_or_else(|_| {
                            Err(ExchangeError::Failed("the exchange panicked".into()))
                        });
                aae.finished(&job, outcome);
            });
            if spawned.is_err() {
                s.running -= 1;
                self.counters
                    .running
                    .store(s.running as u64, Ordering::Relaxed);
                s.plans[p as usize].running = false;
                s.plans[p as usize].next_at = Some(now + tick);
            }
        }
    }

    /// The n_vals in use, looked up again only when the bucket registry
    /// changed (here or by gossip). When an n_val changed, its keys now
    /// belong to other preference lists' trees, so every vnode holding
    /// data builds its trees again.
    fn n_vals_in_use(&self, buckets: &crate::buckets::Buckets) -> Vec<u8> {
        let generation = buckets.generation();
        let seen = self.state().registry_seen.clone();
        if seen.generation == generation {
            return seen.n_vals;
        }
        let (digest, n_vals) = {
            let r = buckets.registry();
            let n_vals: Vec<u8> = r
                .n_vals_in_use()
                .into_iter()
                .map(|n| n.min(255) as u8)
                .collect();
            (r.n_val_digest(), n_vals)
        };
        self.state().registry_seen = super::RegistrySeen {
            generation,
            digest,
            n_vals: n_vals.clone(),
        };
        if seen.generation != u64::MAX && seen.digest != digest {
            let n = self.rebuild_now();
            tracing::info!(
                vnodes = n,
                "an n_val changed: anti-entropy trees are built again"
            );
        }
        n_vals
    }

    /// After an exchange: counts its end, schedules the next.
    fn finished(&self, job: &Job, outcome: Result<Outcome, ExchangeError>) {
        let cfg = self.config();
        let c = &self.counters;
        let found = match &outcome {
            Ok(o) => {
                match o.stage {
                    Stage::RootCompare => &c.root_compare,
                    Stage::BranchCompare => &c.branch_compare,
                    Stage::ClockCompare => &c.clock_compare,
                }
                .fetch_add(1, Ordering::Relaxed);
                c.exchange_deltas
                    .fetch_add(o.deltas.len() as u64, Ordering::Relaxed);
                o.deltas.len()
            }
            Err(ExchangeError::NotSupported) => {
                c.not_supported.fetch_add(1, Ordering::Relaxed);
                0
            }
            Err(ExchangeError::Stopped) => 0,
            Err(e) => {
                c.error.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(partition = job.partition, remote = job.pair.remote, error = %e, "anti-entropy exchange failed");
                0
            }
        };
        if let Ok(o) = &outcome {
            if !o.deltas.is_empty() {
                tracing::info!(partition = job.partition, remote_partition = job.pair.remote, remote = %job.remote, n_val = job.pair.index_n.n, keys = o.deltas.len(), "anti-entropy exchange found keys to repair");
            }
        }
        let now = Instant::now();
        let mut s = self.state();
        s.running -= 1;
        self.counters
            .running
            .store(s.running as u64, Ordering::Relaxed);
        let plan: &mut Plan = &mut s.plans[job.partition as usize];
        plan.running = false;
        let was = plan.follow.filter(|(p, _)| *p == job.pair).map(|(_, f)| f);
        plan.follow = rill_aae::FollowUps::after(
            was,
            job.max_results,
            found,
            cfg.repair_loops,
            cfg.range_boost,
        )
        .map(|f| (job.pair, f));
        if found > 0 {
            plan.catch_up = true;
            plan.loop_found = true;
        }
        plan.next_at = Some(if plan.follow.is_some() || plan.catch_up {
            now + cfg.exchange_pause
        } else {
            now + cfg.exchange_tick
        });
        drop(s);
        self.wake.notify_all();
    }

    /// Runs one exchange and repairs what it finds.
    fn exchange(&self, job: &Job) -> Result<Outcome, ExchangeError> {
        let view = self.replicas.view();
        let local = PreflistEntry {
            partition: Partition(job.partition),
            node: view.me.clone(),
            primary: true,
        };
        let remote = PreflistEntry {
            partition: Partition(job.pair.remote),
            node: job.remote.clone(),
            primary: true,
        };
        let (mut x, mut ask) = Exchange::new(job.max_results, job.seed);
        let outcome = loop {
            if self.stopped() {
                return Err(ExchangeError::Stopped);
            }
            let (a, b) = self.ask_both(&local, &remote, job.pair.index_n, &ask)?;
            match x
                .answered(a, b)
                .map_err(|e| ExchangeError::Failed(e.to_string()))?
            {
                Step::Ask(next) => {
                    ask = next;
                    // Riak's pause, jittered to [T/2, 3T/2) (one draw an
                    // exchange).
                    let t = job.pause.as_millis() as u64;
                    if t > 0 {
                        let j = mix(job.seed ^ t) % t;
                        self.pause(Duration::from_millis(t / 2 + j));
                    }
                }
                Step::Done(o) => break o,
            }
        };
        self.repair(&outcome.deltas);
        Ok(outcome)
    }

    /// Waits `d`, or until the node stops.
    fn pause(&self, d: Duration) {
        let until = Instant::now() + d;
        let mut s = self.state();
        while !self.stopped() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            s = self
                .wake
                .wait_timeout(s, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Reads each key through its preference list: the read repairs the
    /// replicas that are behind (after its answer).
    fn repair(&self, keys: &[Vec<u8>]) {
        let Some(kv) = self.coordinator.upgrade() else {
            return;
        };
        for k in keys {
            if self.stopped() {
                return;
            }
            let Ok(k) = crate::wire::decode_key(k) else {
                continue;
            };
            let req = GetRequest {
                bucket_type: k.bucket_type.clone(),
                bucket: k.bucket.clone(),
                key: k.key.clone(),
                ..GetRequest::default()
            };
            if let Err(e) = kv.get(&req) {
                tracing::debug!(error = %e, "an anti-entropy repair read failed; a later exchange finds the key again");
            }
        }
    }

    /// Asks both replicas the same question; `NotSupported` when either
    /// has no built trees.
    fn ask_both(
        &self,
        local: &PreflistEntry,
        remote: &PreflistEntry,
        index_n: IndexN,
        ask: &Ask,
    ) -> Result<(Answer, Answer), ExchangeError> {
        let request = VnodeRequest::Aae {
            index_n,
            ask: ask.clone(),
        };
        let timeout = match ask {
            Ask::Clocks(_) => CLOCKS_TIMEOUT,
            _ => TREE_TIMEOUT,
        };
        let asks = vec![(local.clone(), request.clone()), (remote.clone(), request)];
        let Some(got) = self
            .replicas
            .ask_all(asks, Instant::now() + timeout, || !self.stopped())
        else {
            return Err(if self.stopped() {
                ExchangeError::Stopped
            } else {
                ExchangeError::Timeout
            });
        };
        let got: [VnodeReply; 2] = got.try_into().expect("two asked, two answered");
        let [a, b] = got.map(|r| match r {
            VnodeReply::Aae(Some(a)) => Ok(a),
            VnodeReply::Aae(None) => Err(ExchangeError::NotSupported),
            VnodeReply::Failed(e) => Err(ExchangeError::Replica(e)),
            other => Err(ExchangeError::Failed(format!(
                "unexpected answer {other:?}"
            ))),
        });
        Ok((a?, b?))
    }
}

fn shuffle(v: &mut [Pair], mut seed: u64) {
    for i in (1..v.len()).rev() {
        let j = (next_random(&mut seed) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// One exchange to run.
struct Job {
    partition: u32,
    pair: Pair,
    remote: String,
    max_results: usize,
    seed: u64,
    pause: Duration,
}

#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    #[error("a replica has no anti-entropy trees built (not_supported)")]
    NotSupported,
    #[error("a replica did not answer in time")]
    Timeout,
    #[error("a replica failed: {0}")]
    Replica(KvError),
    #[error("{0}")]
    Failed(String),
    #[error("the node is stopping")]
    Stopped,
}
