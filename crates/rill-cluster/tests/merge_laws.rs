//! The cluster state is a join semilattice: whatever order, duplication or
//! grouping gossip merges versions in, every node ends with the same state.
//! States are grown from one cluster by random operations of several nodes
//! and random exchanges between them, then merged every way.

use proptest::prelude::*;
use rill_cluster::{ClusterState, Status, Transfer};

const NODES: [&str; 4] = ["a@h", "b@h", "c@h", "d@h"];
const STATUSES: [Status; 6] = Status::ALL;

#[derive(Clone, Debug)]
enum Op {
    SetStatus {
        actor: usize,
        node: usize,
        status: usize,
    },
    WriteRing {
        actor: usize,
        partition: u32,
        to: usize,
    },
    MarkDone {
        actor: usize,
        partition: u32,
    },
    See {
        actor: usize,
    },
    Address {
        actor: usize,
        port: u16,
    },
    Exchange {
        from: usize,
        to: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let n = NODES.len();
    prop_oneof![
        (0..n, 0..n, 0..STATUSES.len()).prop_map(|(actor, node, status)| Op::SetStatus {
            actor,
            node,
            status
        }),
        (0..n, 0..8u32, 0..n).prop_map(|(actor, partition, to)| Op::WriteRing {
            actor,
            partition,
            to
        }),
        (0..n, 0..8u32).prop_map(|(actor, partition)| Op::MarkDone { actor, partition }),
        (0..n).prop_map(|actor| Op::See { actor }),
        (0..n, 0..3u16).prop_map(|(actor, port)| Op::Address { actor, port }),
        (0..n, 0..n).prop_map(|(from, to)| Op::Exchange { from, to }),
    ]
}

/// One replica per node, all from the same new cluster, after `ops`.
fn replicas(ops: &[Op]) -> Vec<ClusterState> {
    let origin = ClusterState::new("c", NODES[0], 8);
    let mut r: Vec<ClusterState> = NODES.iter().map(|_| origin.clone()).collect();
    for op in ops {
        match *op {
            Op::SetStatus {
                actor,
                node,
                status,
            } => {
                let _ = r[actor].set_status(NODES[actor], NODES[node], STATUSES[status]);
            }
            Op::WriteRing {
                actor,
                partition,
                to,
            } => {
                let s = &mut r[actor];
                let version = s.ring().version + 1;
                let from = s.owners()[partition as usize].clone();
                s.write_ring(NODES[actor], |ring| {
                    ring.next.retain(|t| t.partition != partition);
                    ring.next.push(Transfer {
                        partition,
                        from,
                        to: NODES[to].to_string(),
                        id: version,
                    });
                });
            }
            Op::MarkDone { actor, partition } => {
                let s = &mut r[actor];
                if let Some(t) = s
                    .ring()
                    .next
                    .iter()
                    .find(|t| t.partition == partition)
                    .cloned()
                {
                    s.mark_done(&t);
                }
            }
            Op::See { actor } => {
                r[actor].see(NODES[actor]);
            }
            Op::Address { actor, port } => {
                r[actor].set_address(NODES[actor], &format!("127.0.0.1:{}", 8099 + port));
            }
            Op::Exchange { from, to } => {
                let other = r[from].clone();
                r[to].merge(&other).unwrap();
            }
        }
    }
    r
}

fn merged(a: &ClusterState, b: &ClusterState) -> ClusterState {
    let mut m = a.clone();
    m.merge(b).unwrap();
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn merge_is_commutative_associative_and_idempotent(ops in prop::collection::vec(op(), 0..60)) {
        let r = replicas(&ops);
        for a in &r {
            prop_assert_eq!(&merged(a, a), a);
            for b in &r {
                prop_assert_eq!(merged(a, b), merged(b, a));
                for c in &r {
                    prop_assert_eq!(merged(&merged(a, b), c), merged(a, &merged(b, c)));
                }
            }
        }
    }

    #[test]
    fn states_survive_their_bytes(ops in prop::collection::vec(op(), 0..60)) {
        for s in replicas(&ops) {
            let bytes = rill_cluster::codec::encode(&s);
            prop_assert_eq!(rill_cluster::codec::decode(&bytes), Ok(s));
        }
    }

    #[test]
    fn every_node_ends_with_the_same_state_in_any_order(ops in prop::collection::vec(op(), 0..60)) {
        let r = replicas(&ops);
        let forward = r.iter().skip(1).fold(r[0].clone(), |acc, s| merged(&acc, s));
        let backward = r.iter().rev().skip(1).fold(r[r.len() - 1].clone(), |acc, s| merged(&acc, s));
        prop_assert_eq!(&forward, &backward);
        // Merging a state that already holds another changes nothing.
        for s in &r {
            let mut again = forward.clone();
            prop_assert!(!again.merge(s).unwrap());
        }
    }
}

#[test]
fn states_of_other_clusters_are_refused() {
    let mut a = ClusterState::new("one", "a@h", 8);
    let b = ClusterState::new("two", "b@h", 8);
    assert!(a.merge(&b).is_err());
}

#[test]
fn a_newer_ring_wins_and_ring_ready_waits_for_every_member() {
    let mut a = ClusterState::new("c", "a@h", 8);
    a.set_status("b@h", "b@h", Status::Joining).unwrap();
    a.see("a@h");
    let mut b = a.clone();
    // Joining members need not have seen the ring.
    assert!(a.ring_ready());
    a.set_status("a@h", "b@h", Status::Valid).unwrap();
    a.see("a@h");
    assert!(!a.ring_ready(), "b is valid and has not seen it");
    b.merge(&a).unwrap();
    b.see("b@h");
    a.merge(&b).unwrap();
    assert!(a.ring_ready());
    a.write_ring("a@h", |r| r.owners[0] = "b@h".into());
    b.merge(&a).unwrap();
    assert_eq!(b.owners()[0], "b@h");
    assert!(!b.merge(&a).unwrap());
}
