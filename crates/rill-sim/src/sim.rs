//! One simulated cluster: nodes holding `rill-cluster` states, a network
//! of state messages, and a seeded scheduler of events.

use crate::check::Violation;
use crate::rng::Rng;
use rill_cluster::{step, Change, ClusterState, Staged, Status};
use std::collections::{BTreeMap, BTreeSet};

/// What a run does.
#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    pub ring_size: u32,
    pub target_n_val: u32,
    /// Nodes that may ever join (the founder included).
    pub max_nodes: usize,
    /// Events before the final heal.
    pub steps: usize,
    /// Messages lost, per thousand.
    pub drop_per_mille: u64,
    /// A message takes 1 to this many ticks.
    pub max_delay_ticks: u64,
}

impl Config {
    pub fn new(seed: u64) -> Config {
        Config {
            seed,
            ring_size: 32,
            target_n_val: 3,
            max_nodes: 6,
            steps: 600,
            drop_per_mille: 100,
            max_delay_ticks: 8,
        }
    }
}

struct Node {
    state: ClusterState,
    up: bool,
    staged: Staged,
}

struct Message {
    at: u64,
    seq: u64,
    to: String,
    state: ClusterState,
}

pub struct Sim {
    cfg: Config,
    rng: Rng,
    now: u64,
    nodes: BTreeMap<String, Node>,
    net: Vec<Message>,
    seq: u64,
    /// While partitioned: the nodes on one side.
    side: Option<BTreeSet<String>>,
    /// Nodes an operator had leave (they must own nothing at the end).
    left: BTreeSet<String>,
    pub trace: Vec<String>,
}

fn name(i: usize) -> String {
    format!("n{i}@sim")
}

impl Sim {
    pub fn new(cfg: Config) -> Sim {
        let first = name(1);
        let mut nodes = BTreeMap::new();
        nodes.insert(
            first.clone(),
            Node {
                state: ClusterState::new("sim", &first, cfg.ring_size),
                up: true,
                staged: Staged::default(),
            },
        );
        Sim {
            rng: Rng::new(cfg.seed),
            cfg,
            now: 0,
            nodes,
            net: Vec::new(),
            seq: 0,
            side: None,
            left: BTreeSet::new(),
            trace: Vec::new(),
        }
    }

    fn log(&mut self, event: String) {
        self.trace.push(format!("{:>5} {event}", self.now));
    }

    fn up_nodes(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.up)
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn cut(&self, a: &str, b: &str) -> bool {
        self.side
            .as_ref()
            .is_some_and(|s| s.contains(a) != s.contains(b))
    }

    fn send(&mut self, from: &str, to: &str) {
        let lost = self.rng.chance(self.cfg.drop_per_mille) || self.cut(from, to);
        let delay = 1 + self.rng.below(self.cfg.max_delay_ticks);
        if lost {
            self.log(format!("lost {from} -> {to}"));
            return;
        }
        let state = self.nodes[from].state.clone();
        self.seq += 1;
        self.net.push(Message {
            at: self.now + delay,
            seq: self.seq,
            to: to.to_string(),
            state,
        });
    }

    /// A node takes in a state, records that it saw the result, and runs
    /// the claimant's step.
    fn receive(&mut self, to: &str, state: &ClusterState) {
        let target_n_val = self.cfg.target_n_val;
        let Some(n) = self.nodes.get_mut(to) else {
            return;
        };
        if !n.up {
            return;
        }
        let _ = n.state.merge(state);
        n.state.see(to);
        step(
            &mut n.state,
            to,
            target_n_val,
            &rill_cluster::Context::default(),
        );
        n.state.see(to);
        if n.state.status(to) == Some(Status::Invalid) {
            // Removed from the cluster: it stops, as a Riak node does.
            n.up = false;
            self.log(format!("{to} removed, stops"));
        }
    }

    fn deliver(&mut self) {
        self.net.sort_by_key(|m| (m.at, m.seq));
        while self.net.first().is_some_and(|m| m.at <= self.now) {
            let m = self.net.remove(0);
            self.receive(&m.to.clone(), &m.state);
        }
    }

    /// One tick: deliver what is due, then one random event.
    fn tick(&mut self) {
        self.now += 1;
        self.deliver();
        let up = self.up_nodes();
        let Some(a) = self.rng.pick(&up).cloned() else {
            return;
        };
        match self.rng.below(100) {
            0..=44 => {
                let peers: Vec<String> = self.nodes[&a]
                    .state
                    .with_status(|s| s != Status::Invalid)
                    .into_iter()
                    .filter(|p| *p != a)
                    .collect();
                if let Some(b) = self.rng.pick(&peers).cloned() {
                    self.send(&a, &b);
                }
            }
            45..=59 => {
                let s = self.nodes[&a].state.clone();
                self.receive(&a, &s);
            }
            60..=74 => self.handoff(&a),
            75..=79 => self.join(&a),
            80..=91 => {
                // An operator's request goes to the claimant `a` knows of,
                // as riak-admin's cluster commands do.
                let c = self.nodes[&a].state.claimant().to_string();
                if self.nodes.get(&c).is_some_and(|n| n.up) && !self.cut(&a, &c) {
                    self.operate(&c);
                }
            }
            92..=95 => self.kill_or_start(),
            _ => self.partition_or_heal(),
        }
    }

    /// A pending transfer from `a` finishes (its data is at the new owner).
    fn handoff(&mut self, a: &str) {
        let n = self.nodes.get_mut(a).expect("node");
        let mine: Vec<_> = n
            .state
            .ring()
            .next
            .iter()
            .filter(|t| t.from == a && !n.state.is_done(t))
            .cloned()
            .collect();
        if let Some(t) = self.rng.pick(&mine).cloned() {
            self.nodes.get_mut(a).expect("node").state.mark_done(&t);
            self.log(format!("{a} handed off partition {}", t.partition));
        }
    }

    /// A new node asks `a` to let it join.
    fn join(&mut self, a: &str) {
        if self.nodes.len() >= self.cfg.max_nodes {
            return;
        }
        let new = name(self.nodes.len() + 1);
        let mut state = self.nodes[a].state.clone();
        if state.set_status(&new, &new, Status::Joining).is_err() {
            return;
        }
        state.see(&new);
        self.nodes.insert(
            new.clone(),
            Node {
                state,
                up: true,
                staged: Staged::default(),
            },
        );
        self.log(format!("{new} joins via {a}"));
        self.send(&new, a);
    }

    /// At node `a`, an operator stages a change (sometimes a leave), plans
    /// and commits; refused unless `a` is the claimant with a ready ring.
    fn operate(&mut self, a: &str) {
        let target_n_val = self.cfg.target_n_val;
        let leave = self.rng.chance(400);
        let n = self.nodes.get_mut(a).expect("node");
        if leave {
            let valid = n.state.with_status(|s| s == Status::Valid);
            if valid.len() > 1 {
                let who = valid[self.rng.below(valid.len() as u64) as usize].clone();
                if n.staged.stage(&n.state, &who, Change::Leave).is_ok() {
                    self.trace
                        .push(format!("{:>5} {a}: staged leave of {who}", self.now));
                }
            }
        }
        let n = self.nodes.get_mut(a).expect("node");
        if n.state.claimant() != a {
            return;
        }
        let plan = match n
            .staged
            .plan(&n.state, a, target_n_val, &rill_cluster::Context::default())
        {
            Ok(p) => p,
            Err(e) => {
                let line = format!(
                    "{:>5} {a}: plan refused: {}",
                    self.now,
                    e.to_string().lines().next().unwrap_or("")
                );
                self.trace.push(line);
                return;
            }
        };
        let leaving: Vec<String> = plan
            .changes
            .iter()
            .filter(|(_, c)| *c == Change::Leave)
            .map(|(who, _)| who.clone())
            .collect();
        match n.staged.commit(
            &mut n.state,
            a,
            Some(&plan),
            target_n_val,
            &rill_cluster::Context::default(),
        ) {
            Ok(_) => {
                n.state.see(a);
                self.left.extend(leaving);
                let moves: usize = plan
                    .transitions
                    .iter()
                    .map(|t| t.transfers.values().sum::<usize>())
                    .sum();
                self.log(format!(
                    "{a}: committed {} changes, {moves} transfers planned",
                    plan.changes.len()
                ));
            }
            Err(e) => self.log(format!("{a}: commit refused: {e}")),
        }
    }

    fn kill_or_start(&mut self) {
        let all: Vec<String> = self.nodes.keys().cloned().collect();
        let Some(x) = self.rng.pick(&all).cloned() else {
            return;
        };
        let removed = self.nodes[&x].state.status(&x) == Some(Status::Invalid);
        let up = self.nodes[&x].up;
        if up && self.up_nodes().len() > 1 {
            self.nodes.get_mut(&x).expect("node").up = false;
            self.log(format!("{x} stops"));
        } else if !up && !removed {
            self.nodes.get_mut(&x).expect("node").up = true;
            self.log(format!("{x} starts"));
        }
    }

    fn partition_or_heal(&mut self) {
        if self.side.take().is_some() {
            self.log("partition healed".into());
            return;
        }
        let side: BTreeSet<String> = self
            .nodes
            .keys()
            .filter(|_| self.rng.chance(500))
            .cloned()
            .collect();
        self.log(format!("partition: {side:?} apart"));
        self.side = Some(side);
    }

    /// Runs the events, then heals everything and lets the cluster settle:
    /// every node not removed starts, messages flow without loss, handoffs
    /// finish. Returns a description of the first broken invariant.
    pub fn run(&mut self) -> Result<(), Violation> {
        for _ in 0..self.cfg.steps {
            self.tick();
        }
        self.settle()?;
        crate::check::invariants(self)
    }

    fn settle(&mut self) -> Result<(), Violation> {
        self.side = None;
        self.net.clear();
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for x in &names {
            let removed = self.nodes[x].state.status(x) == Some(Status::Invalid);
            self.nodes.get_mut(x).expect("node").up = !removed;
        }
        self.log("settle: all healed".into());
        for round in 0..SETTLE_ROUNDS {
            let before: Vec<u64> = self.nodes.values().map(|n| n.state.digest()).collect();
            for a in self.up_nodes() {
                let s = self.nodes[&a].state.clone();
                for b in self.up_nodes() {
                    self.receive(&b, &s);
                }
            }
            for a in self.up_nodes() {
                let pending: Vec<_> = self.nodes[&a].state.ring().next.clone();
                for t in pending.iter().filter(|t| t.from == a) {
                    self.nodes.get_mut(&a).expect("node").state.mark_done(t);
                }
            }
            let after: Vec<u64> = self.nodes.values().map(|n| n.state.digest()).collect();
            let quiet = self.up_nodes().iter().all(|a| {
                self.nodes[a].state.ring_ready() && self.nodes[a].state.ring().next.is_empty()
            });
            if before == after && quiet {
                self.log(format!("settled after {round} rounds"));
                return Ok(());
            }
        }
        Err(Violation::NotSettled {
            rounds: SETTLE_ROUNDS,
        })
    }

    pub(crate) fn up_states(&self) -> Vec<(&String, &ClusterState)> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.up)
            .map(|(k, n)| (k, &n.state))
            .collect()
    }

    pub(crate) fn left(&self) -> &BTreeSet<String> {
        &self.left
    }
}

/// All-to-all exchanges the settling phase takes at most.
const SETTLE_ROUNDS: usize = 100;
