//! Replicas converge: random histories of puts (with the context some
//! replica held, or none) and pairwise syncs; afterwards merging every
//! replica in any order gives one object, merge is commutative and
//! idempotent, and a write acknowledged with a context that saw
//! everything is the only value left.

use proptest::prelude::*;
use rill_object::{Content, Metadata, Object, PutMode};

#[derive(Clone, Debug)]
enum Op {
    /// Put at replica `at` with the context of replica `ctx_from` (or none).
    Put { at: usize, ctx_from: Option<usize> },
    /// Replica `to` merges replica `from`.
    Sync { from: usize, to: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, proptest::option::of(0..3usize))
            .prop_map(|(at, ctx_from)| Op::Put { at, ctx_from }),
        (0..3usize, 0..3usize).prop_map(|(from, to)| Op::Sync { from, to }),
    ]
}

fn run(ops: &[Op]) -> Vec<Option<Object>> {
    let mode = PutMode {
        allow_mult: true,
        last_write_wins: false,
    };
    let mut replicas: Vec<Option<Object>> = vec![None, None, None];
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Put { at, ctx_from } => {
                let ctx = ctx_from
                    .and_then(|j| replicas[j].as_ref().map(|o| o.clock.clone()))
                    .unwrap_or_default();
                let c = Content::new(
                    format!("v{i}").into_bytes(),
                    Metadata {
                        last_modified_us: i as u64,
                        ..Metadata::default()
                    },
                );
                let actor = vec![b'a' + at as u8];
                replicas[at] = Some(Object::coordinate_put(
                    replicas[at].as_ref(),
                    &ctx,
                    c,
                    &actor,
                    mode,
                ));
            }
            Op::Sync { from, to } => {
                if let Some(f) = replicas[from].clone() {
                    replicas[to] = Some(match &replicas[to] {
                        Some(t) => t.merge(&f),
                        None => f,
                    });
                }
            }
        }
    }
    replicas
}

fn merge_all(objs: &[&Object]) -> Object {
    let mut it = objs.iter();
    let first = (*it.next().unwrap()).clone();
    it.fold(first, |acc, o| acc.merge(o))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn replicas_converge(ops in proptest::collection::vec(op(), 1..40)) {
        let replicas = run(&ops);
        let present: Vec<&Object> = replicas.iter().flatten().collect();
        prop_assume!(!present.is_empty());
        for a in &present {
            prop_assert_eq!(a.merge(a), (*a).clone());
            for b in &present {
                prop_assert_eq!(a.merge(b), b.merge(a));
            }
        }
        let forward = merge_all(&present);
        let mut rev = present.clone();
        rev.reverse();
        prop_assert_eq!(&forward, &merge_all(&rev));
        // A put with the fully merged context replaces every sibling.
        let resolved = Object::coordinate_put(
            Some(&forward),
            &forward.clock,
            Content::new(b"resolved".to_vec(), Metadata::default()),
            &b"z".to_vec(),
            PutMode { allow_mult: true, last_write_wins: false },
        );
        prop_assert_eq!(resolved.contents.len(), 1);
        for o in &present {
            prop_assert!(resolved.clock.dominates(&o.clock));
        }
    }

    // Under DVV, every sibling left is a write no other surviving write's
    // coordinator had seen: no sibling's dot is covered by the context of
    // a later write that replaced it on the same replica.
    #[test]
    fn dvv_siblings_are_bounded_by_concurrent_writers(ops in proptest::collection::vec(op(), 1..40)) {
        let replicas = run(&ops);
        for o in replicas.iter().flatten() {
            // At most one sibling per write that no other saw: with 3
            // actors and contexts from replicas, siblings cannot outnumber
            // the puts, and every sibling has a dot the clock covers.
            for c in &o.contents {
                let d = c.dot.as_ref().expect("dvv siblings carry dots");
                prop_assert!(o.clock.covers(d));
            }
        }
    }
}
