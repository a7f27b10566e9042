//! A sender and a receiver wired through queues, with a partition's data
//! in a sorted map and the receiver's vnode in another: transfers finish
//! whole, and a lost batch, a restarted receiver or a slow reader cost at
//! most a window of batches again, never the partition from the start.

use rill_handoff::*;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

struct World {
    now: u64,
    data: Map,
    stored: Map,
    /// The receiver's durable cursor for the transfer.
    cursor: Option<Cursor>,
    sender: Sender,
    receiver: Option<Receiver>,
    to_receiver: VecDeque<ToReceiver>,
    to_sender: VecDeque<ToSender>,
    reads: VecDeque<(u64, Option<Cursor>, usize, usize)>,
    /// Reads are answered only once `now` reaches this.
    reads_wait_until: u64,
    done: bool,
    failed: Option<String>,
    /// Decides whether a message to the receiver is lost.
    lose: Box<dyn FnMut(&ToReceiver) -> bool>,
    rcfg: ReceiverConfig,
}

fn transfer() -> TransferId {
    TransferId {
        partition: 5,
        id: 7,
        from: "a@h".into(),
    }
}

fn data(n: usize) -> Map {
    (0..n)
        .map(|i| {
            (
                format!("k{i:05}").into_bytes(),
                format!("v{i}").into_bytes(),
            )
        })
        .collect()
}

fn cfg() -> SenderConfig {
    SenderConfig {
        batch_items: 100,
        batch_bytes: 1 << 20,
        window: 2,
        ack_timeout_ms: 30_000,
        keepalive_ms: 10_000,
        max_retries: 5,
    }
}

impl World {
    fn new(items: usize, scfg: SenderConfig) -> World {
        let (sender, first) = Sender::start(scfg, transfer(), 0);
        let mut w = World {
            now: 0,
            data: data(items),
            stored: Map::new(),
            cursor: None,
            sender,
            receiver: None,
            to_receiver: VecDeque::new(),
            to_sender: VecDeque::new(),
            reads: VecDeque::new(),
            reads_wait_until: 0,
            done: false,
            failed: None,
            lose: Box::new(|_| false),
            rcfg: ReceiverConfig {
                idle_timeout_ms: 60_000,
            },
        };
        w.sender_effects(first);
        w
    }

    fn sender_effects(&mut self, effects: Vec<SenderEffect>) {
        for e in effects {
            match e {
                SenderEffect::Send(m) => {
                    if !(self.lose)(&m) {
                        self.to_receiver.push_back(m);
                    }
                }
                SenderEffect::Read {
                    session,
                    after,
                    max_items,
                    max_bytes,
                } => self.reads.push_back((session, after, max_items, max_bytes)),
                SenderEffect::Done => self.done = true,
                SenderEffect::Failed(why) => self.failed = Some(why),
            }
        }
    }

    fn receiver_effects(&mut self, effects: Vec<ReceiverEffect>) {
        for e in effects {
            match e {
                ReceiverEffect::Send(m) => self.to_sender.push_back(m),
                ReceiverEffect::Store { seq, items, cursor } => {
                    for it in items {
                        self.stored.insert(it.key, it.value);
                    }
                    self.cursor = Some(cursor);
                    let now = self.now;
                    let more = self.receiver.as_mut().unwrap().stored(seq, now);
                    self.receiver_effects(more);
                }
                ReceiverEffect::Finished => {}
                ReceiverEffect::Abort(_) => self.receiver = None,
            }
        }
    }

    fn answer_read(&mut self) -> bool {
        if self.now < self.reads_wait_until {
            return false;
        }
        let Some((session, after, max_items, _)) = self.reads.pop_front() else {
            return false;
        };
        let from = match &after {
            Some(c) => Bound::Excluded(c.clone()),
            None => Bound::Unbounded,
        };
        let items: Vec<Item> = self
            .data
            .range((from, Bound::Unbounded))
            .take(max_items)
            .map(|(k, v)| Item {
                key: k.clone(),
                value: v.clone(),
            })
            .collect();
        let cursor = items.last().map(|i| i.key.clone());
        let more = match &cursor {
            Some(c) => self
                .data
                .range((Bound::Excluded(c.clone()), Bound::Unbounded))
                .next()
                .is_some(),
            None => false,
        };
        let now = self.now;
        let e = self.sender.read(session, items, cursor, more, now);
        self.sender_effects(e);
        true
    }

    /// One step: a message or a read, else time passes by a second.
    fn step(&mut self) {
        let now = self.now;
        if let Some(m) = self.to_receiver.pop_front() {
            let e = match m {
                ToReceiver::Open { transfer, session } => {
                    let (r, e) = Receiver::open(
                        self.rcfg.clone(),
                        transfer,
                        session,
                        self.cursor.clone(),
                        now,
                    );
                    self.receiver = Some(r);
                    e
                }
                other => match self.receiver.as_mut() {
                    Some(r) => r.receive(other, now),
                    None => Vec::new(),
                },
            };
            self.receiver_effects(e);
            return;
        }
        if let Some(m) = self.to_sender.pop_front() {
            let e = self.sender.receive(m, now);
            self.sender_effects(e);
            return;
        }
        if self.answer_read() {
            return;
        }
        self.now += 1000;
        let now = self.now;
        let e = self.sender.tick(now);
        self.sender_effects(e);
        if let Some(r) = self.receiver.as_mut() {
            let e = r.tick(now);
            self.receiver_effects(e);
        }
    }

    fn run(&mut self) {
        for _ in 0..200_000 {
            if self.done || self.failed.is_some() {
                return;
            }
            self.step();
        }
        panic!("the transfer neither finished nor failed");
    }
}

#[test]
fn a_transfer_moves_everything_once() {
    let mut w = World::new(2500, cfg());
    w.run();
    assert!(w.done, "{:?}", w.failed);
    assert_eq!(w.stored, w.data);
    assert_eq!(w.sender.items_sent, 2500, "nothing sent twice");
    assert_eq!(w.sender.session(), 1);
}

#[test]
fn an_empty_partition_finishes_at_once() {
    let mut w = World::new(0, cfg());
    w.run();
    assert!(w.done);
    assert!(w.stored.is_empty());
}

#[test]
fn a_lost_batch_costs_a_window_not_the_partition() {
    let mut w = World::new(2500, cfg());
    let mut batches = 0;
    w.lose = Box::new(move |m| {
        if matches!(m, ToReceiver::Batch { .. }) {
            batches += 1;
            return batches == 12;
        }
        false
    });
    w.run();
    assert!(w.done, "{:?}", w.failed);
    assert_eq!(w.stored, w.data);
    assert_eq!(w.sender.session(), 2, "one new session");
    let again = w.sender.items_sent - 2500;
    assert!(
        again <= 2 * 100,
        "{again} items sent again (window 2 x 100)"
    );
}

#[test]
fn a_restarted_receiver_resumes_from_what_it_stored() {
    let mut w = World::new(2500, cfg());
    // Run until half is stored, then the receiving node restarts: its
    // receiver and whatever was in flight are lost, its cursor is not.
    while w.stored.len() < 1200 {
        w.step();
    }
    w.receiver = None;
    w.to_receiver.clear();
    w.to_sender.clear();
    let now = w.now;
    let e = w.sender.connection_lost(now);
    w.sender_effects(e);
    w.run();
    assert!(w.done, "{:?}", w.failed);
    assert_eq!(w.stored, w.data);
    let again = w.sender.items_sent - 2500;
    assert!(again <= 2 * 100, "{again} items sent again");
}

#[test]
fn keepalives_carry_a_slow_reader_past_the_idle_timeout() {
    let mut w = World::new(300, cfg());
    // The first read takes 3 minutes, beyond the receiver's 60 s idle
    // timeout: keepalives every 10 s keep the session.
    w.reads_wait_until = 180_000;
    w.run();
    assert!(w.done, "{:?}", w.failed);
    assert_eq!(w.stored, w.data);
    assert_eq!(w.sender.session(), 1, "no new session was needed");
}

#[test]
fn a_sender_that_never_hears_back_gives_up() {
    let mut w = World::new(300, cfg());
    w.lose = Box::new(|_| true);
    w.run();
    let why = w.failed.expect("failed");
    assert!(why.contains("gave up after 5 retries"), "{why}");
    assert!(w.sender.is_over());
}

#[test]
fn messages_of_an_old_session_are_ignored() {
    let (mut s, _) = Sender::start(cfg(), transfer(), 0);
    let _ = s.connection_lost(1);
    assert_eq!(s.session(), 2);
    assert!(s
        .receive(
            ToSender::Resume {
                session: 1,
                after: None
            },
            2
        )
        .is_empty());
    let (mut r, _) = Receiver::open(ReceiverConfig::default(), transfer(), 3, None, 0);
    let stale = ToReceiver::Batch {
        session: 2,
        seq: 0,
        items: vec![],
        cursor: vec![1],
    };
    assert!(r.receive(stale, 1).is_empty());
    // A repeated or out-of-order batch is not stored.
    let b = |seq| ToReceiver::Batch {
        session: 3,
        seq,
        items: vec![],
        cursor: vec![1],
    };
    assert_eq!(r.receive(b(1), 1), vec![]);
    assert!(matches!(
        r.receive(b(0), 1)[0],
        ReceiverEffect::Store { seq: 0, .. }
    ));
    assert_eq!(r.receive(b(0), 1), vec![], "still storing it");
}

/// Stores that finish later (as a durable write does), and reads that
/// pass over items and return none.
#[test]
fn batches_arriving_while_one_is_stored_are_kept_in_order() {
    let (mut r, _) = Receiver::open(ReceiverConfig::default(), transfer(), 1, None, 0);
    let b = |seq: u64| ToReceiver::Batch {
        session: 1,
        seq,
        items: vec![Item {
            key: vec![seq as u8],
            value: vec![],
        }],
        cursor: vec![seq as u8],
    };
    let stores = |e: &[ReceiverEffect]| -> Vec<u64> {
        e.iter()
            .filter_map(|x| match x {
                ReceiverEffect::Store { seq, .. } => Some(*seq),
                _ => None,
            })
            .collect()
    };
    assert_eq!(stores(&r.receive(b(0), 1)), vec![0]);
    assert!(r.receive(b(1), 1).is_empty(), "kept while 0 is stored");
    assert!(
        r.receive(b(0), 1).is_empty(),
        "a repeat of the one being stored"
    );
    let e = r.stored(0, 2);
    assert_eq!(
        e[0],
        ReceiverEffect::Send(ToSender::Ack { session: 1, seq: 0 })
    );
    assert_eq!(stores(&e), vec![1], "the kept one follows at once");
    assert!(r
        .receive(
            ToReceiver::Finish {
                session: 1,
                batches: 2
            },
            3
        )
        .is_empty());
    let e = r.stored(1, 4);
    assert!(e.contains(&ReceiverEffect::Finished), "{e:?}");
}

#[test]
fn a_read_that_returns_no_items_moves_the_cursor_on() {
    let (mut s, e) = Sender::start(cfg(), transfer(), 0);
    assert!(matches!(e[0], SenderEffect::Send(ToReceiver::Open { .. })));
    let e = s.receive(
        ToSender::Resume {
            session: 1,
            after: None,
        },
        1,
    );
    assert!(matches!(e[0], SenderEffect::Read { after: None, .. }));
    // Nothing to send in this stretch, but the read got past "k5".
    let e = s.read(1, vec![], Some(b"k5".to_vec()), true, 2);
    match &e[0] {
        SenderEffect::Read { after, .. } => assert_eq!(after.as_deref(), Some(&b"k5"[..])),
        other => panic!("{other:?}"),
    }
    // A failed read starts a new session.
    let e = s.read_failed(1, "disk", 3);
    assert!(matches!(
        e[0],
        SenderEffect::Send(ToReceiver::Open { session: 2, .. })
    ));
}
