use super::*;
use crate::tree::{clock_hash, segment_of};
use std::collections::BTreeMap;

/// A replica as an exchange sees it: its tree and its keys.
#[derive(Clone, Default)]
struct Replica {
    tree: TictacTree,
    keys: BTreeMap<Vec<u8>, ([u8; 20], u32)>,
}

impl Replica {
    fn write(&mut self, i: u32, counter: u64) {
        let hash = key_hash(i);
        let clock = clock_hash([(&b"a"[..], counter)]);
        let id = i.to_be_bytes().to_vec();
        let old = self.keys.insert(id, (hash, clock)).map(|(_, c)| c);
        self.tree.replace(&hash, old, Some(clock));
    }

    fn answer(&self, ask: &Ask) -> Answer {
        match ask {
            Ask::Root => Answer::Root(self.tree.root().to_vec()),
            Ask::Branches(ids) => Answer::Branches(
                ids.iter()
                    .map(|&b| (b, self.tree.branch(b as usize).to_vec()))
                    .collect(),
            ),
            Ask::Clocks(segs) => Answer::Clocks(
                self.keys
                    .iter()
                    .filter(|(_, (h, _))| segs.contains(&segment_of(h)))
                    .map(|(k, (_, c))| (k.clone(), *c))
                    .collect(),
            ),
        }
    }
}

fn key_hash(i: u32) -> [u8; 20] {
    crate::testing::spread_hash(i)
}

/// Runs an exchange to its end; also returns how many asks it made.
fn run(a: &Replica, b: &Replica, max_results: usize, seed: u64) -> (Outcome, usize) {
    let (mut x, mut ask) = Exchange::new(max_results, seed);
    let mut asks = 1;
    loop {
        match x.answered(a.answer(&ask), b.answer(&ask)).unwrap() {
            Step::Ask(next) => {
                ask = next;
                asks += 1;
            }
            Step::Done(o) => return (o, asks),
        }
    }
}

fn id(i: u32) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

#[test]
fn replicas_in_sync_compare_only_their_roots() {
    let mut a = Replica::default();
    for i in 0..2000 {
        a.write(i, 1);
    }
    let (o, asks) = run(&a, &a.clone(), 64, 1);
    assert_eq!(o.stage, Stage::RootCompare);
    assert!(o.deltas.is_empty());
    assert_eq!(asks, 1);
}

#[test]
fn a_missed_write_and_a_newer_clock_are_found() {
    let mut a = Replica::default();
    for i in 0..2000 {
        a.write(i, 1);
    }
    let mut b = a.clone();
    a.write(5000, 1); // b missed it
    b.write(17, 2); // b is newer
    let (o, asks) = run(&a, &b, 64, 1);
    assert_eq!(o.stage, Stage::ClockCompare);
    assert_eq!(o.deltas, vec![id(17), id(5000)]);
    // root twice, branches twice, clocks once
    assert_eq!(asks, 5);
}

#[test]
fn a_difference_that_does_not_last_is_not_repaired() {
    let mut a = Replica::default();
    for i in 0..100 {
        a.write(i, 1);
    }
    let mut b = a.clone();
    b.write(3, 2);
    let (mut x, ask) = Exchange::new(64, 7);
    let step = x.answered(a.answer(&ask), b.answer(&ask)).unwrap();
    assert_eq!(step, Step::Ask(Ask::Root));
    // The write reaches a before the second look.
    a.write(3, 2);
    let step = x
        .answered(a.answer(&Ask::Root), b.answer(&Ask::Root))
        .unwrap();
    assert_eq!(
        step,
        Step::Done(Outcome {
            stage: Stage::RootCompare,
            deltas: vec![]
        })
    );
}

#[test]
fn an_exchange_is_capped_and_later_exchanges_take_the_rest() {
    let mut a = Replica::default();
    let b = Replica::default();
    for i in 0..1000 {
        a.write(i, 1);
    }
    let (o, _) = run(&a, &b, 16, 3);
    assert_eq!(o.stage, Stage::ClockCompare);
    assert!(
        !o.deltas.is_empty() && o.deltas.len() <= 16,
        "{}",
        o.deltas.len()
    );
    // Repairing what each exchange finds converges.
    let mut b = b;
    for round in 0..1000 {
        let (o, _) = run(&a, &b, 16, round);
        if o.deltas.is_empty() {
            assert_eq!(b.tree, a.tree);
            return;
        }
        for k in o.deltas {
            let i = u32::from_be_bytes(k.try_into().unwrap());
            b.write(i, 1);
        }
    }
    panic!("did not converge");
}

#[test]
fn the_tightest_runs_of_ids_are_chosen() {
    let (mut x, _) = Exchange::new(3, 9);
    let ids = vec![1, 500, 501, 502, 900, 4000];
    for _ in 0..20 {
        let s = x.select(ids.clone());
        assert_eq!(s.len(), 3);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        // Among the 4 windows the 3 tightest: 500-502, 501-900, 1-501.
        assert!(s != vec![502, 900, 4000], "{s:?}");
    }
}

#[test]
fn an_answer_of_the_wrong_kind_is_refused() {
    let (mut x, _) = Exchange::new(8, 1);
    let e = x
        .answered(Answer::Root(vec![0; 4096]), Answer::Clocks(vec![]))
        .unwrap_err();
    assert_eq!(e.want, "root");
    assert_eq!(e.got, "clocks");
}
