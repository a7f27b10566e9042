//! A get's coordination: a get machine over the replicas of a preference
//! list, fed through the heads (so a large value crosses between nodes
//! once), answering by Riak's quorum rules, then repairing replicas
//! behind the merge and reaping a tombstone every replica holds.
//!
//! The same run has two drivers. On a thread that may block
//! ([`Coordinator::coordinate_get`](super::Coordinator::coordinate_get)) this node's replicas are read in place. As
//! a task of the runtime ([`Coordinator::coordinate_get_task`](super::Coordinator::coordinate_get_task), the PB and HTTP
//! gets) no step may wait for the disk: this node's replicas answer in
//! place only when their backend can without waiting (memory, the write
//! buffer, the page cache); the reads that would wait go together to one
//! blocking thread and answer on the reply channel, like another node's
//! replicas. A get served from memory then needs no thread hand-off at
//! all, and replies of other nodes wake the request's own task.

use super::{overloaded, quorum_error, unexpected, Read, ReadMode, Replies};
use crate::error::KvError;
use crate::params::ReadQuorum;
use crate::replicas::{as_replicas, ReplyTx};
use crate::vnode::head::{HeadStep, Heads};
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use rill_backend::BKey;
use rill_coord::{CoordError, GetEffect, GetFsm, GetOutcome, GetParams, GetReply};
use rill_object::Object;
use rill_ring::PreflistEntry;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::mpsc::unbounded_channel;

/// The tag of a read repair's reply (not a replica's answer).
const REPAIR: usize = usize::MAX - 1;

/// Where a coordinator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Driver {
    /// A thread that may block: this node's vnodes are called in place.
    Blocking,
    /// A task of the runtime: nothing in it waits for the disk.
    Task,
}

/// What a get does with its replicas: read the key, repair, reap.
#[derive(Clone)]
struct GetJob {
    key: BKey,
    preflist: Vec<PreflistEntry>,
    mode: ReadMode,
    tx: ReplyTx,
}

/// A get in progress.
pub(super) struct GetRun {
    fsm: GetFsm,
    heads: Heads,
    job: GetJob,
    driver: Driver,
    /// The machine's effects not yet carried out.
    effects: VecDeque<GetEffect>,
    answer: Option<GetOutcome>,
    /// The last typed error of a replica (a full disk, a busy node), for
    /// an answer where every replica failed.
    last_error: Option<KvError>,
    /// Nodes whose replicas could not be reached by this get.
    unreachable: Vec<String>,
    /// Requests to this node's vnodes that would wait (task driver):
    /// partition, request, tag.
    waiting: Vec<(u32, VnodeRequest, usize)>,
    /// Repairs and reaps (task driver: done on a blocking thread).
    work: Vec<GetEffect>,
    deadline: Instant,
    /// Which replicas' replies reached the machine.
    fed: Vec<bool>,
}

impl GetRun {
    /// The request's time is up: the machine answers with what it has,
    /// and the replicas that never answered are logged (a lost message or
    /// a stuck vnode shows here, not only as a client's timeout).
    fn time_out(&mut self) {
        let silent: Vec<String> = (self.job.preflist.iter().zip(&self.fed))
            .filter(|(_, fed)| !**fed)
            .map(|(e, _)| format!("{}/{}", e.node, e.partition.0))
            .collect();
        let answered = self.answer.is_some();
        if !silent.is_empty() {
            tracing::warn!(
                bucket = %String::from_utf8_lossy(&self.job.key.bucket),
                key = %String::from_utf8_lossy(&self.job.key.key),
                replicas = %silent.join(", "),
                client_answered = answered,
                "a get timed out waiting for replicas"
            );
        }
        self.effects.extend(self.fsm.timeout());
    }
}

fn get_reply(reply: VnodeReply, run: &mut GetRun) -> GetReply {
    match reply {
        VnodeReply::Found(Some(o)) => GetReply::Found(o),
        VnodeReply::Found(None) => GetReply::NotFound,
        VnodeReply::Failed(e) => {
            let r = GetReply::Failed {
                reason: e.to_string(),
                overload: overloaded(&e),
            };
            if let KvError::Unreachable { node, .. } = &e {
                if !run.unreachable.contains(node) {
                    run.unreachable.push(node.clone());
                }
            }
            run.last_error = Some(e);
            r
        }
        other => GetReply::Failed {
            reason: unexpected(other),
            overload: false,
        },
    }
}

impl super::Coordinator {
    /// Reads the key from every replica of `preflist` through a get
    /// machine, on a thread that may block: answers by Riak's quorum
    /// rules, repairs replicas behind the merge, reaps a tombstone every
    /// replica holds.
    ///
    /// A get that fails because replicas could not be reached (their
    /// node died as it was asked, before the cluster took it for down) is
    /// asked again of the preference list without those nodes, at most
    /// once per replica: a read is safe to repeat, and the client gets
    /// the answer of the replicas that can answer.
    pub(crate) fn coordinate_get(
        &self,
        k: &BKey,
        preflist: &[PreflistEntry],
        q: ReadQuorum,
        mode: ReadMode,
    ) -> Result<Read, KvError> {
        let mut avoid: Vec<String> = Vec::new();
        let mut preflist = preflist.to_vec();
        loop {
            let (mut run, mut rx) = self.get_begin(k, &preflist, q, mode, Driver::Blocking);
            while !self.get_pump(&mut run) {
                match self.replicas.wait(&mut rx, run.deadline) {
                    Some(got) => self.take_get_reply(&mut run, got),
                    None => run.time_out(),
                }
            }
            let unreachable = run.unreachable.clone();
            let r = self.get_end(run, rx);
            match self.retry_without(k, &preflist, &r, unreachable, &mut avoid) {
                Some(p) => preflist = p,
                None => return r,
            }
        }
    }

    /// The preference list to ask again when a get failed because the
    /// nodes of `unreachable` could not be reached; `None` when it stands.
    fn retry_without(
        &self,
        k: &BKey,
        preflist: &[PreflistEntry],
        result: &Result<Read, KvError>,
        unreachable: Vec<String>,
        avoid: &mut Vec<String>,
    ) -> Option<Vec<PreflistEntry>> {
        if result.is_ok() || unreachable.is_empty() || avoid.len() >= preflist.len() {
            return None;
        }
        avoid.extend(unreachable);
        let n = preflist.len() as u32;
        let next = self
            .replicas
            .preflist_avoiding(&k.bucket_type, &k.bucket, &k.key, n, avoid);
        (!next.is_empty()).then_some(next)
    }

    /// [`Coordinator::coordinate_get`](super::Coordinator::coordinate_get) as a task of the runtime: never waits
    /// for the disk on the calling thread.
    pub(crate) async fn coordinate_get_task(
        &self,
        k: &BKey,
        preflist: &[PreflistEntry],
        q: ReadQuorum,
        mode: ReadMode,
    ) -> Result<Read, KvError> {
        let mut avoid: Vec<String> = Vec::new();
        let mut preflist = preflist.to_vec();
        loop {
            let (run, rx) = self.get_begin(k, &preflist, q, mode, Driver::Task);
            let deadline = tokio::time::Instant::from_std(run.deadline);
            let mut guard = Unfinished {
                node: self,
                parts: Some((run, rx)),
            };
            loop {
                let (run, rx) = guard.parts.as_mut().expect("held until the answer");
                if self.get_pump(run) {
                    break;
                }
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(got)) => self.take_get_reply(run, got),
                    _ => run.time_out(),
                }
            }
            let (run, rx) = guard.parts.take().expect("held until the answer");
            let unreachable = run.unreachable.clone();
            let r = self.get_end(run, rx);
            match self.retry_without(k, &preflist, &r, unreachable, &mut avoid) {
                Some(p) => preflist = p,
                None => return r,
            }
        }
    }

    fn get_begin(
        &self,
        k: &BKey,
        preflist: &[PreflistEntry],
        q: ReadQuorum,
        mode: ReadMode,
        driver: Driver,
    ) -> (GetRun, Replies) {
        let all_local = preflist.iter().all(|e| self.replicas.is_local(e));
        let params = GetParams {
            n: preflist.len() as u32,
            r: q.r,
            pr: q.pr,
            node_confirms: q.node_confirms,
            notfound_ok: q.notfound_ok,
            basic_quorum: mode.basic_quorum,
            allow_mult: mode.allow_mult,
            deletedvclock: mode.deletedvclock,
            // This node's vnodes reply at once, so the answer merges them
            // all; with other nodes' replicas it comes at R.
            wait_for_all: all_local,
        };
        let (fsm, first) = GetFsm::start(params, as_replicas(preflist));
        let (tx, rx) = unbounded_channel();
        let run = GetRun {
            fsm,
            heads: Heads::default(),
            job: GetJob {
                key: k.clone(),
                preflist: preflist.to_vec(),
                mode,
                tx,
            },
            driver,
            effects: first.into(),
            answer: None,
            last_error: None,
            unreachable: Vec::new(),
            waiting: Vec::new(),
            work: Vec::new(),
            deadline: Instant::now() + self.request_timeout,
            fed: vec![false; preflist.len()],
        };
        (run, rx)
    }

    /// Carries out the run's effects; true once the client can be
    /// answered (or the machine is done).
    fn get_pump(&self, run: &mut GetRun) -> bool {
        while let Some(effect) = run.effects.pop_front() {
            match effect {
                GetEffect::Send(i) => {
                    // This node's vnode is asked for the object, another
                    // node's for its head.
                    let key = run.job.key.clone();
                    let request = if self.replicas.is_local(&run.job.preflist[i]) {
                        VnodeRequest::Get { key }
                    } else {
                        VnodeRequest::Head { key }
                    };
                    if let Some(reply) = self.ask_run(run, i, request) {
                        self.take_get_reply(run, (i, reply));
                    }
                }
                GetEffect::Answer(a) => run.answer = Some(a),
                GetEffect::Done => {}
                other if run.driver == Driver::Blocking => self.get_effect(&run.job, other),
                other => run.work.push(other),
            }
        }
        self.hand_over(run);
        run.answer.is_some() || run.fsm.is_done()
    }

    /// Asks replica `i` of the run; `None` when the reply comes later on
    /// the run's channel.
    fn ask_run(&self, run: &mut GetRun, i: usize, request: VnodeRequest) -> Option<VnodeReply> {
        let e = &run.job.preflist[i];
        if run.driver == Driver::Task && self.replicas.is_local(e) {
            let quick = self.vnodes.try_serve(e.partition.0, &request);
            if quick.is_none() {
                self.counters
                    .get_local_waits
                    .fetch_add(1, Ordering::Relaxed);
                if matches!(request, VnodeRequest::Get { .. }) {
                    // Heads of other nodes wait for this object rather
                    // than fetch a value this node may hold.
                    run.heads.await_whole(i);
                }
                run.waiting.push((e.partition.0, request, i));
            }
            return quick;
        }
        self.replicas.ask(e, request, i, &run.job.tx)
    }

    /// Task driver: the reads that would wait, and the repairs and reaps,
    /// go to one blocking thread (the reads' replies come back on the
    /// run's channel; repairs are not awaited).
    fn hand_over(&self, run: &mut GetRun) {
        if run.waiting.is_empty() && run.work.is_empty() {
            return;
        }
        let (waiting, work) = (
            std::mem::take(&mut run.waiting),
            std::mem::take(&mut run.work),
        );
        let tx = run.job.tx.clone();
        let mut unsent = Unsent {
            tags: waiting.iter().map(|(_, _, tag)| *tag).collect(),
            tx: tx.clone(),
            reason: "the node is shutting down",
        };
        let Some(node) = self.this.upgrade() else {
            return;
        };
        unsent.reason = "internal error: a replica's read ended without an answer";
        let job = run.job.clone();
        tokio::task::spawn_blocking(move || {
            for (partition, request, tag) in waiting {
                let _ = tx.send((tag, node.vnodes.serve(partition, request)));
                unsent.tags.retain(|t| *t != tag);
            }
            for e in work {
                node.get_effect(&job, e);
            }
        });
    }

    /// Takes replica `i`'s reply through the heads (fetching whole
    /// objects where a head alone does not do) into the get machine.
    fn take_get_reply(&self, run: &mut GetRun, (i, reply): (usize, VnodeReply)) {
        if i == REPAIR {
            return;
        }
        let mut queue = VecDeque::from([(i, reply)]);
        while let Some((i, reply)) = queue.pop_front() {
            if matches!(reply, VnodeReply::Head { .. }) {
                self.counters
                    .get_head_clocks
                    .fetch_add(1, Ordering::Relaxed);
            }
            for step in run.heads.reply(i, reply) {
                match step {
                    HeadStep::Feed(i, r) => {
                        if let Some(fed) = run.fed.get_mut(i) {
                            *fed = true;
                        }
                        let r = get_reply(r, run);
                        run.effects.extend(run.fsm.reply(i, r));
                    }
                    HeadStep::Fetch(i) => {
                        self.counters.get_fetches.fetch_add(1, Ordering::Relaxed);
                        let request = VnodeRequest::Get {
                            key: run.job.key.clone(),
                        };
                        if let Some(r) = self.ask_run(run, i, request) {
                            queue.push_back((i, r));
                        }
                    }
                }
            }
        }
    }

    /// The client's answer; the replies still to come are collected
    /// afterwards (for read repair) by a task of the runtime.
    fn get_end(&self, mut run: GetRun, rx: Replies) -> Result<Read, KvError> {
        let answer = run
            .answer
            .take()
            .expect("a get machine answers before it is done");
        let last_error = run.last_error.take();
        if !run.fsm.is_done() {
            self.finish_get(run, rx);
        }
        match answer {
            GetOutcome::Found(o) => Ok(Read::Found(o)),
            GetOutcome::NotFound => Ok(Read::NotFound),
            GetOutcome::Deleted(clock) => Ok(Read::Deleted(clock)),
            // Every replica failed: the client sees why (typed: a full
            // disk, a busy node).
            GetOutcome::Err(CoordError::Failed(_)) if last_error.is_some() => {
                Err(last_error.expect("checked"))
            }
            GetOutcome::Err(e) => Err(quorum_error(e)),
        }
    }

    /// Collects a get's remaining replies after its client was answered,
    /// on the runtime, and carries out the repairs and reaps they call
    /// for (on a blocking thread).
    fn finish_get(&self, mut run: GetRun, mut rx: Replies) {
        let (Some(remote), Some(node)) = (self.replicas.remote(), self.this.upgrade()) else {
            return;
        };
        run.driver = Driver::Task;
        let deadline = tokio::time::Instant::from_std(run.deadline);
        remote.runtime().spawn(async move {
            while !run.fsm.is_done() {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(got)) => node.take_get_reply(&mut run, got),
                    _ => run.time_out(),
                }
                node.get_pump(&mut run);
            }
        });
    }

    /// A get's effects after its answer: repairs and reaps.
    fn get_effect(&self, job: &GetJob, effect: GetEffect) {
        match effect {
            GetEffect::Repair { idx, object } => self.repair(
                &job.key,
                &job.preflist[idx],
                object,
                job.mode.allow_mult,
                &job.tx,
            ),
            GetEffect::Reap(clock) if job.mode.may_reap => {
                self.reap_later(&job.key, &clock, &job.preflist)
            }
            GetEffect::Send(_) | GetEffect::Answer(_) | GetEffect::Reap(_) | GetEffect::Done => {}
        }
    }

    fn repair(&self, k: &BKey, e: &PreflistEntry, target: Object, allow_mult: bool, tx: &ReplyTx) {
        let request = VnodeRequest::Merge {
            key: k.clone(),
            object: target,
            allow_mult,
            prune: None,
            return_object: false,
        };
        // Another node's repair is sent and not awaited (its reply, if
        // any, is dropped with the request's channel or passed over).
        match self.replicas.ask(e, request, REPAIR, tx) {
            Some(VnodeReply::Failed(err)) => {
                tracing::warn!(partition = e.partition.0, error = %err, "read repair failed")
            }
            _ => {
                self.counters.read_repairs.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A get run as a task whose future is dropped before it is answered
/// (its client went away) still collects the replies and repairs, as an
/// answered one does.
struct Unfinished<'a> {
    node: &'a super::Coordinator,
    parts: Option<(GetRun, Replies)>,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some((run, rx)) = self.parts.take() {
            if !run.fsm.is_done() {
                self.node.finish_get(run, rx);
            }
        }
    }
}

/// Reads handed to a blocking thread that have not answered: should the
/// thread panic, or the node be shutting down, they answer as failed at
/// once rather than leave the get waiting for its timeout.
struct Unsent {
    tags: Vec<usize>,
    tx: ReplyTx,
    reason: &'static str,
}

impl Drop for Unsent {
    fn drop(&mut self) {
        for tag in self.tags.drain(..) {
            let reply = VnodeReply::Failed(KvError::Backend(self.reason.into()));
            let _ = self.tx.send((tag, reply));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::BackendKind;
    use crate::testing::{node, put_kv, put_v};
    use crate::{DeleteRequest, GetAnswer, GetRequest, Node};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    fn ask(key: &[u8], deletedvclock: bool) -> GetRequest {
        GetRequest {
            bucket: b"b".to_vec(),
            key: key.to_vec(),
            deletedvclock,
            ..GetRequest::default()
        }
    }

    async fn on_thread<T: Send + 'static>(
        n: &Arc<Node>,
        f: impl FnOnce(&Node) -> T + Send + 'static,
    ) -> T {
        let n = n.clone();
        tokio::task::spawn_blocking(move || f(&n)).await.unwrap()
    }

    /// A get run as a task answers as one run on a blocking thread,
    /// whether this node's replicas answer in place or from a blocking
    /// thread: found, not found, deleted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_get_as_a_task_answers_as_a_blocking_get() {
        for backend in [BackendKind::Memory, BackendKind::Bitcask] {
            for quick in [true, false] {
                let dir = tempfile::tempdir().unwrap();
                let n = node(dir.path(), backend);
                n.vnodes.quick_reads.store(quick, Ordering::Relaxed);
                on_thread(&n, put_v).await;
                on_thread(&n, |n| {
                    put_kv(n, b"gone", b"x");
                    n.delete(&DeleteRequest {
                        bucket: b"b".to_vec(),
                        key: b"gone".to_vec(),
                        ..DeleteRequest::default()
                    })
                    .unwrap()
                })
                .await;
                let mut seen = Vec::new();
                for (key, deleted) in [(&b"k"[..], false), (b"none", false), (b"gone", true)] {
                    let task = n.get_task(&ask(key, deleted)).await;
                    let blocking = on_thread(&n, move |n| n.get(&ask(key, deleted))).await;
                    assert_eq!(
                        format!("{task:?}"),
                        format!("{blocking:?}"),
                        "{backend:?} {quick}"
                    );
                    seen.push(task.unwrap());
                }
                assert!(
                    matches!(&seen[0], GetAnswer::Found(o) if o.contents[0].value == b"v"[..]),
                    "{:?}",
                    seen[0]
                );
                assert!(matches!(seen[1], GetAnswer::NotFound), "{:?}", seen[1]);
                assert!(matches!(seen[2], GetAnswer::Deleted(_)), "{:?}", seen[2]);
                let st = n.stats();
                assert_eq!(st.gets, 6);
                // Reads in place, or handed to a blocking thread.
                if !quick {
                    assert!(st.get_local_waits > 0, "{backend:?}");
                } else if backend == BackendKind::Memory {
                    assert_eq!(st.get_local_waits, 0);
                }
            }
        }
    }

    /// A get run as a task repairs the replicas behind (on a blocking
    /// thread, after the answer).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_get_as_a_task_repairs_replicas() {
        for quick in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let n = crate::testing::memory_node(dir.path());
            n.vnodes.quick_reads.store(quick, Ordering::Relaxed);
            on_thread(&n, put_v).await;
            let pl = n.preflist(b"", b"b", b"k", 3);
            let k = crate::vnode::bkey(b"", b"b", b"k");
            for e in &pl[..2] {
                n.vnodes.at(e).backend().delete(&k, &[]).unwrap();
            }
            let mut one = ask(b"k", false);
            one.r = Some(rill_bucket::Quorum::N(1));
            let got = n.get_task(&one).await.unwrap();
            assert!(matches!(got, GetAnswer::Found(o) if o.contents[0].value == b"v"[..]));
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while n.stats().read_repairs < 2 {
                assert!(std::time::Instant::now() < deadline, "repairs not done");
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            for e in &pl {
                assert!(
                    n.vnodes.at(e).get(&k).unwrap().is_some(),
                    "{:?} repaired",
                    e.partition
                );
            }
        }
    }
}
