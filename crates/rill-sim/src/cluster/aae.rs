//! Anti-entropy in the simulation: `rill-aae`'s exchange machine between
//! a partition's vnode and another replica of one of its preference
//! lists, both asked through the vnode requests a node sends (their
//! trees are the vnodes' own, changed by every write), each difference
//! looked at twice with a pause between; the keys found are repaired by a
//! read through the key's preference list, as a node repairs them.

use super::client::Purpose;
use super::net::{Body, Tag};
use super::ClusterSim;
use rill_aae::{pairwise, Answer, Exchange, IndexN, Pair, Step};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};

/// Branches and segments an exchange looks at, at most (small, so some
/// loops stop at the cap and the next finds the rest).
const MAX_RESULTS: usize = 4;

pub(super) struct Running {
    /// The node whose partition runs the exchange.
    pub node: usize,
    partition: u32,
    remote: (usize, u32),
    index_n: IndexN,
    machine: Exchange,
    answers: [Option<Answer>; 2],
    deadline: u64,
}

impl ClusterSim {
    /// Starts one exchange of a partition `c` owns with a replica of one
    /// of its preference lists, both chosen at random.
    pub(super) fn start_exchange(&mut self, c: usize) {
        let owned: Vec<u32> = (0..self.cfg.ring_size)
            .filter(|&p| self.owner_in(c, p) == c)
            .collect();
        let Some(&p) = self.rng.pick(&owned) else {
            return;
        };
        let pairs = pairwise(p, &[self.cfg.n as u8], self.cfg.ring_size);
        let Some(&pair) = self.rng.pick(&pairs) else {
            return;
        };
        self.exchange(c, p, pair);
    }

    fn exchange(&mut self, c: usize, partition: u32, pair: Pair) {
        let remote = self.owner_in(c, pair.remote);
        if !self.reachable(c, remote) {
            return;
        }
        let seed = self.rng.next_u64();
        let (machine, ask) = Exchange::new(MAX_RESULTS, seed);
        let id = self.id();
        self.exchanges.insert(
            id,
            Running {
                node: c,
                partition,
                remote: (remote, pair.remote),
                index_n: pair.index_n,
                machine,
                answers: [None, None],
                deadline: 0,
            },
        );
        self.counts.exchanges += 1;
        self.ask_both(id, ask, 0);
    }

    fn ask_both(&mut self, id: u64, ask: rill_aae::Ask, wait: u64) {
        let Some(x) = self.exchanges.get_mut(&id) else {
            return;
        };
        x.deadline = self.now + wait + self.cfg.timeout_ticks;
        let (c, local, (remote, remote_p), index_n) = (x.node, x.partition, x.remote, x.index_n);
        for (side, (to, partition)) in [(c, local), (remote, remote_p)].into_iter().enumerate() {
            let body = Body::Request {
                tag: Tag::Exchange { id, side },
                partition,
                request: VnodeRequest::Aae {
                    index_n,
                    ask: ask.clone(),
                },
            };
            self.send_after(c, to, body, wait);
        }
    }

    pub(super) fn exchange_replied(&mut self, id: u64, side: usize, reply: VnodeReply) {
        let Some(x) = self.exchanges.get_mut(&id) else {
            return;
        };
        let VnodeReply::Aae(Some(answer)) = reply else {
            // Not built, or failed: the exchange ends with nothing found.
            self.exchanges.remove(&id);
            return;
        };
        x.answers[side] = Some(answer);
        let [Some(_), Some(_)] = &x.answers else {
            return;
        };
        let [a, b] = std::mem::take(&mut x.answers).map(|a| a.expect("both answered"));
        match x.machine.answered(a, b) {
            Ok(Step::Ask(next)) => {
                let pause = self.cfg.exchange_pause_ticks;
                self.ask_both(id, next, pause);
            }
            Ok(Step::Done(outcome)) => {
                let x = self.exchanges.remove(&id).expect("running");
                if outcome.deltas.is_empty() {
                    return;
                }
                self.counts.deltas += outcome.deltas.len();
                self.log(format!(
                    "exchange {id} ({}: {} with {}) found {} keys",
                    super::node_name(x.node),
                    x.partition,
                    x.remote.1,
                    outcome.deltas.len()
                ));
                if self.cfg.faults.no_repair {
                    return;
                }
                for k in outcome.deltas {
                    let k = rill_node::wire::decode_key(&k).expect("a key the vnode encoded");
                    let key = String::from_utf8(k.key).expect("the simulation's keys are text");
                    self.start_get_for(x.node, key, Purpose::Repair, self.cfg.r);
                }
            }
            Err(e) => panic!("exchange {id}: {e}"),
        }
    }

    pub(super) fn exchange_timeouts(&mut self) {
        let now = self.now;
        self.exchanges.retain(|_, x| x.deadline > now);
    }

    /// One loop of anti-entropy over the whole ring: every exchange of
    /// every partition, each run to its end with its repairs. Returns
    /// how many keys the exchanges found.
    pub(super) fn exchange_loop(&mut self) -> usize {
        let before = self.counts.deltas;
        for p in 0..self.cfg.ring_size {
            let c = self.owner_in(self.reference(), p);
            for pair in pairwise(p, &[self.cfg.n as u8], self.cfg.ring_size) {
                self.exchange(c, p, pair);
                self.quiesce();
            }
        }
        self.counts.deltas - before
    }
}
