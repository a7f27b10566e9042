//! Clients' requests in the key-value simulation: a get or a put starts
//! a `rill-coord` machine at its coordinator, whose effects become
//! messages; replies and timeouts feed it; answers update the clients'
//! contexts and the model of acknowledged writes.

use super::{node_name, Acked, KvSim, Msg, Op, Write, MODE};
use rill_coord::{GetEffect, GetFsm, GetOutcome, GetParams, PutEffect, PutFsm, PutParams};
use rill_object::{Content, Metadata, Object};

impl KvSim {
    /// The vnode's actor for a key, as `rill-node`'s vnodes choose it:
    /// its newest epoch in the stored clock if that epoch is not below the
    /// vnode's floor, else a new epoch (also when it holds nothing for the
    /// key). A vnode that handed its data off and dropped it raises its
    /// floor past every epoch it had: an object merged in later may carry
    /// an old epoch's count from before writes it no longer remembers,
    /// and continuing that count would issue a dot twice (found by this
    /// simulation, seed 3285 of a 20,000-seed run: an acknowledged write
    /// was lost). Riak gives such a vnode a new id.
    pub(super) fn actor_for(
        &mut self,
        node: usize,
        partition: u32,
        stored: Option<&Object>,
    ) -> Vec<u8> {
        let prefix = format!("{}/{partition}/", node_name(node)).into_bytes();
        let floor = self.nodes[node]
            .floors
            .get(&partition)
            .copied()
            .unwrap_or(0);
        let own = stored.and_then(|o| {
            o.clock
                .entries()
                .map(|(a, _, _)| a)
                .filter(|a| a.starts_with(&prefix))
                .max()
                .cloned()
        });
        let epoch_of = |a: &[u8]| {
            let tail: [u8; 8] = a[a.len() - 8..].try_into().expect("8 bytes");
            u64::from_be_bytes(tail)
        };
        match own {
            Some(a) if epoch_of(&a) >= floor => a,
            _ => {
                let e = self.nodes[node].epochs.entry(partition).or_insert(0);
                *e += 1;
                let mut a = prefix;
                a.extend_from_slice(&e.to_be_bytes());
                a
            }
        }
    }

    pub(super) fn start_get(&mut self, c: usize, key: String) {
        let pl = self.preflist(c, &key);
        if (pl.len() as u32) < self.cfg.r {
            return;
        }
        let params = GetParams {
            n: pl.len() as u32,
            r: self.cfg.r,
            pr: 0,
            node_confirms: 0,
            notfound_ok: true,
            basic_quorum: false,
            allow_mult: true,
            deletedvclock: true,
            wait_for_all: false,
        };
        let (fsm, effects) = GetFsm::start(params, replicas(&pl));
        let op = self.next_op;
        self.next_op += 1;
        for e in effects {
            if let GetEffect::Send(idx) = e {
                let (to, partition, primary) = pl[idx];
                let msg = Msg::Get {
                    op,
                    idx,
                    partition,
                    primary,
                    key: key.clone(),
                };
                self.send(c, to, msg, false);
            }
        }
        let deadline = self.now + self.cfg.timeout_ticks;
        self.ops.insert(
            op,
            Op::Get {
                fsm,
                key,
                deadline,
                coordinator: c,
            },
        );
    }

    pub(super) fn start_put(&mut self, c: usize, key: String, delete: bool) {
        let pl = self.preflist(c, &key);
        if (pl.len() as u32) < self.cfg.w {
            return;
        }
        let op = self.next_op;
        self.next_op += 1;
        let value = (!delete).then(|| format!("v{op}"));
        let write = Write {
            key: key.clone(),
            value: value.clone(),
            context: self.contexts.get(&key).cloned().unwrap_or_default(),
            targets: pl.clone(),
        };
        let params = PutParams {
            n: pl.len() as u32,
            w: self.cfg.w,
            dw: self.cfg.w,
            pw: 0,
            node_confirms: 0,
            allow_mult: true,
            return_body: true,
        };
        let (fsm, _) = PutFsm::start(params, replicas(&pl));
        if let Some(v) = &value {
            self.written.insert(v.clone());
        }
        self.attempted.push((key.clone(), write.context.clone()));
        // The put goes to the first replica's node, which coordinates.
        let coordinator = pl[0].0;
        let deadline = self.now + self.cfg.timeout_ticks;
        self.ops.insert(
            op,
            Op::Put {
                fsm,
                write,
                deadline,
                coordinator,
            },
        );
        self.coordinate(op);
    }

    /// The coordinator makes the new object from what it holds and the
    /// context, stores it, and sends it to the other replicas.
    pub(super) fn coordinate(&mut self, op: u64) {
        let Some(Op::Put {
            write, coordinator, ..
        }) = self.ops.get(&op)
        else {
            return;
        };
        let (write, c) = (write.clone(), *coordinator);
        let (node, partition, primary) = write.targets[0];
        let content = match &write.value {
            Some(v) => {
                let m = Metadata {
                    last_modified_us: self.now * 1000,
                    ..Metadata::default()
                };
                Content::new(v.clone().into_bytes(), m)
            }
            None => Content::tombstone(self.now * 1000, format!("t{op}").into_bytes()),
        };
        let k = (partition, write.key.clone());
        let stored = self.store(node, primary).get(&k).cloned();
        let actor = self.actor_for(node, partition, stored.as_ref());
        let obj = Object::coordinate_put(stored.as_ref(), &write.context, content, &actor, MODE);
        self.store(node, primary).insert(k, obj.clone());
        let effects = match self.ops.get_mut(&op) {
            Some(Op::Put { fsm, .. }) => fsm.coordinated(Ok(obj)),
            _ => return,
        };
        self.put_effects(op, c, effects);
    }

    pub(super) fn put_effects(&mut self, op: u64, c: usize, effects: Vec<PutEffect>) {
        for e in effects {
            match e {
                PutEffect::Send { idx, object } => {
                    let Some(Op::Put { write, .. }) = self.ops.get(&op) else {
                        return;
                    };
                    let (to, partition, primary) = write.targets[idx];
                    let key = write.key.clone();
                    let msg = Msg::Put {
                        op: Some(op),
                        idx,
                        partition,
                        primary,
                        key,
                        object,
                    };
                    self.send(c, to, msg, false);
                }
                PutEffect::Answer(Ok(body)) => {
                    let Some(Op::Put { write, .. }) = self.ops.get(&op) else {
                        return;
                    };
                    let write = write.clone();
                    let dot = match (&write.value, &body) {
                        (Some(v), Some(b)) => b
                            .contents
                            .iter()
                            .find(|x| x.value == v.as_bytes())
                            .and_then(|x| x.dot.clone()),
                        _ => None,
                    };
                    if write.value.is_some() && dot.is_none() {
                        // Already superseded on the replicas that answered.
                        self.log(format!("op {op}: acknowledged, already superseded"));
                    }
                    self.log(format!(
                        "op {op}: {} {:?} acknowledged",
                        write.key, write.value
                    ));
                    self.acked.push(Acked {
                        key: write.key,
                        value: write.value,
                        dot,
                        context: write.context,
                    });
                }
                PutEffect::Answer(Err(e)) => self.log(format!("op {op}: put failed: {e}")),
                PutEffect::Coordinate | PutEffect::Done { .. } => {}
            }
        }
    }

    pub(super) fn get_effects(&mut self, c: usize, key: &str, effects: Vec<GetEffect>) {
        for e in effects {
            match e {
                GetEffect::Answer(GetOutcome::Found(o)) => {
                    self.contexts.insert(key.to_string(), o.clock);
                }
                GetEffect::Answer(GetOutcome::Deleted(clock)) => {
                    self.contexts.insert(key.to_string(), clock);
                }
                GetEffect::Answer(_) => {}
                GetEffect::Repair { idx, object } => {
                    // Fire and forget, as read repair is.
                    let pl = self.preflist(c, key);
                    if let Some(&(to, partition, primary)) = pl.get(idx) {
                        let msg = Msg::Put {
                            op: None,
                            idx,
                            partition,
                            primary,
                            key: key.to_string(),
                            object,
                        };
                        self.send(c, to, msg, false);
                    }
                }
                GetEffect::Send(_) | GetEffect::Reap(_) | GetEffect::Done => {}
            }
        }
    }

    pub(super) fn timeouts(&mut self) {
        let due: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, o)| match o {
                Op::Get { deadline, .. } | Op::Put { deadline, .. } => *deadline <= self.now,
            })
            .map(|(k, _)| *k)
            .collect();
        for op in due {
            match self.ops.remove(&op) {
                Some(Op::Get {
                    mut fsm,
                    key,
                    coordinator,
                    ..
                }) => {
                    let e = fsm.timeout();
                    self.get_effects(coordinator, &key, e);
                }
                Some(Op::Put { mut fsm, write, .. }) => {
                    let answered = fsm.timeout();
                    if answered.iter().any(|e| matches!(e, PutEffect::Answer(_))) {
                        self.log(format!("op {op}: put of {} timed out", write.key));
                    }
                }
                None => {}
            }
        }
    }
}

/// A preference list (node, partition, primary) as the machines see it.
fn replicas(pl: &[(usize, u32, bool)]) -> Vec<rill_coord::Replica> {
    pl.iter()
        .map(|&(node, _, primary)| rill_coord::Replica {
            primary,
            node: node as u32,
        })
        .collect()
}
