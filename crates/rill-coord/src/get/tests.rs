//! riak_kv_get_core's rules from tables: replies in order, and after which
//! reply the client is answered, with what.

use super::*;
use crate::error::QuorumError;
use rill_object::{Content, Metadata, PutMode};

fn obj(actor: &str, value: &str, after: Option<&Object>) -> Object {
    let mut c = Content::new(value.as_bytes().to_vec(), Metadata::default());
    c.meta.last_modified_us = 1_000_000;
    let mode = PutMode {
        allow_mult: true,
        last_write_wins: false,
    };
    let ctx = after.map(|o| o.clock.clone()).unwrap_or_default();
    Object::coordinate_put(after, &ctx, c, &actor.as_bytes().to_vec(), mode)
}

fn tomb(after: &Object) -> Object {
    let c = Content::tombstone(2_000_000, b"t".to_vec());
    let mode = PutMode {
        allow_mult: true,
        last_write_wins: false,
    };
    Object::coordinate_put(Some(after), &after.clock, c, &b"a".to_vec(), mode)
}

/// `ok` a found object `v1`, `new` a newer one, `nf` not found, `x` a
/// failure, `tomb` a tombstone; a `*` marks a fallback.
fn reply(code: &str, v1: &Object, v2: &Object, t: &Object) -> (bool, GetReply) {
    let (code, primary) = match code.strip_suffix('*') {
        Some(c) => (c, false),
        None => (code, true),
    };
    let r = match code {
        "ok" => GetReply::Found(v1.clone()),
        "new" => GetReply::Found(v2.clone()),
        "tomb" => GetReply::Found(t.clone()),
        "nf" => GetReply::NotFound,
        "x" => GetReply::Failed {
            reason: "disk".into(),
            overload: false,
        },
        "busy" => GetReply::Failed {
            reason: "overload".into(),
            overload: true,
        },
        other => panic!("{other}"),
    };
    (primary, r)
}

fn params(r: u32, pr: u32, notfound_ok: bool, basic_quorum: bool) -> GetParams {
    GetParams {
        n: 3,
        r,
        pr,
        node_confirms: 0,
        notfound_ok,
        basic_quorum,
        allow_mult: true,
        deletedvclock: false,
        wait_for_all: false,
    }
}

#[test]
fn answers_from_a_table() {
    let v1 = obj("a", "v1", None);
    let v2 = obj("a", "v2", Some(&v1));
    let t = tomb(&v2);
    // (r, pr, notfound_ok, basic_quorum, replies, answered after reply #, answer)
    type Row = (u32, u32, bool, bool, &'static str, usize, &'static str);
    let table: &[Row] = &[
        (2, 0, true, false, "ok ok ok", 2, "v1"),
        (2, 0, true, false, "ok new ok", 2, "v2"),
        (1, 0, true, false, "nf ok ok", 1, "notfound"),
        (2, 0, true, false, "nf ok ok", 2, "v1"),
        // notfound_ok = false: not-founds do not count toward R ...
        (2, 0, false, false, "nf ok ok", 3, "v1"),
        // ... and N - R + 1 of them end the wait.
        (2, 0, false, false, "nf nf ok", 2, "notfound"),
        (2, 0, false, false, "nf x ok", 2, "r_val_unsatisfied 2 0"),
        // basic_quorum: a majority of not-founds is an answer.
        (1, 0, false, false, "nf nf ok", 3, "v1"),
        (1, 0, false, true, "nf nf ok", 2, "notfound"),
        (2, 0, true, false, "x x ok", 2, "failed disk"),
        (2, 0, true, false, "x ok x", 3, "r_val_unsatisfied 2 1"),
        (2, 0, true, false, "busy ok x", 3, "overload"),
        // PR counts primaries only.
        (1, 2, true, false, "ok ok* ok", 3, "v1"),
        // With a fallback in the list PR = 3 is out of reach at once
        // (Riak waits for every reply to say so).
        (1, 3, true, false, "ok ok* ok", 1, "pr_val_unsatisfied 3 1"),
        (2, 2, true, false, "ok* ok* x", 1, "pr_val_unsatisfied 2 0"),
        // A fallback's not-found counts toward R once every primary has
        // answered: two fallbacks standing in for a dead node do not
        // answer for a key the one primary holds ...
        (2, 0, true, false, "nf* nf* ok", 3, "v1"),
        (2, 0, true, false, "nf* nf* nf", 3, "notfound"),
        // ... and count when the primary cannot answer.
        (2, 0, true, false, "nf* nf* x", 3, "notfound"),
        (2, 0, true, false, "nf* ok nf*", 2, "v1"),
        // Tombstones read as not found.
        (2, 0, true, false, "tomb tomb tomb", 2, "notfound"),
        (2, 0, true, false, "new tomb ok", 2, "notfound"),
    ];
    for (r, pr, nfok, bq, replies, after, want) in table {
        let codes: Vec<&str> = replies.split(' ').collect();
        let primaries: Vec<bool> = codes.iter().map(|c| !c.ends_with('*')).collect();
        let (mut fsm, effects) = GetFsm::start(
            params(*r, *pr, *nfok, *bq),
            Replica::each_on_own_node(&primaries),
        );
        assert_eq!(effects.len(), 3);
        let mut answer = None;
        for (i, code) in codes.iter().enumerate() {
            let (_, rep) = reply(code, &v1, &v2, &t);
            for e in fsm.reply(i, rep) {
                if let GetEffect::Answer(a) = e {
                    assert!(answer.is_none(), "answered twice");
                    answer = Some((i + 1, a));
                }
            }
        }
        let (at, got) = answer.expect("answered");
        let got = match got {
            GetOutcome::Found(o) => String::from_utf8(o.contents[0].value.to_vec()).unwrap(),
            GetOutcome::NotFound => "notfound".into(),
            GetOutcome::Deleted(_) => "deleted".into(),
            GetOutcome::Err(CoordError::Quorum(QuorumError::RUnsatisfied { need, got })) => {
                format!("r_val_unsatisfied {need} {got}")
            }
            GetOutcome::Err(CoordError::Quorum(QuorumError::PrUnsatisfied { need, got })) => {
                format!("pr_val_unsatisfied {need} {got}")
            }
            GetOutcome::Err(CoordError::Failed(r)) => format!("failed {r}"),
            GetOutcome::Err(e) => e.to_string(),
        };
        let row = format!("r {r} pr {pr} notfound_ok {nfok} basic_quorum {bq}: {replies}");
        assert_eq!((at, got.as_str()), (*after, *want), "{row}");
        assert!(fsm.is_done(), "{row}");
    }
}

#[test]
fn replicas_behind_the_merge_are_repaired_once_all_have_answered() {
    let v1 = obj("a", "v1", None);
    let v2 = obj("a", "v2", Some(&v1));
    let (mut fsm, _) = GetFsm::start(
        params(2, 0, true, false),
        Replica::each_on_own_node(&[true; 3]),
    );
    assert!(fsm.reply(0, GetReply::Found(v2.clone())).is_empty());
    let e = fsm.reply(1, GetReply::Found(v1.clone()));
    assert_eq!(e, vec![GetEffect::Answer(GetOutcome::Found(v2.clone()))]);
    let e = fsm.reply(2, GetReply::NotFound);
    assert_eq!(
        e,
        vec![
            GetEffect::Repair {
                idx: 1,
                object: v2.clone()
            },
            GetEffect::Repair {
                idx: 2,
                object: v2.clone()
            },
            GetEffect::Done
        ]
    );
    // Later replies change nothing.
    assert!(fsm.reply(2, GetReply::NotFound).is_empty());
    assert!(fsm.timeout().is_empty());
}

#[test]
fn concurrent_writes_come_back_as_siblings_and_both_sides_are_repaired() {
    let v1 = obj("a", "v1", None);
    let b = obj("b", "vb", Some(&v1));
    let c = obj("c", "vc", Some(&v1));
    let (mut fsm, _) = GetFsm::start(
        params(2, 0, true, false),
        Replica::each_on_own_node(&[true; 3]),
    );
    fsm.reply(0, GetReply::Found(b.clone()));
    let e = fsm.reply(1, GetReply::Found(c.clone()));
    let GetEffect::Answer(GetOutcome::Found(m)) = &e[0] else {
        panic!("{e:?}")
    };
    assert_eq!(m.contents.len(), 2);
    let e = fsm.reply(2, GetReply::Found(m.clone()));
    let repaired: Vec<usize> = e
        .iter()
        .filter_map(|e| match e {
            GetEffect::Repair { idx, .. } => Some(*idx),
            _ => None,
        })
        .collect();
    assert_eq!(repaired, vec![0, 1]);
}

#[test]
fn a_tombstone_on_every_replica_is_reaped_and_deletedvclock_shows_it() {
    let v1 = obj("a", "v1", None);
    let t = tomb(&v1);
    let mut p = params(2, 0, true, false);
    p.deletedvclock = true;
    let (mut fsm, _) = GetFsm::start(p, Replica::each_on_own_node(&[true; 3]));
    fsm.reply(0, GetReply::Found(t.clone()));
    let e = fsm.reply(1, GetReply::Found(t.clone()));
    assert_eq!(
        e,
        vec![GetEffect::Answer(GetOutcome::Deleted(t.clock.clone()))]
    );
    let e = fsm.reply(2, GetReply::Found(t.clone()));
    assert_eq!(e, vec![GetEffect::Reap(t.clock.clone()), GetEffect::Done]);
    // A replica that missed the tombstone is repaired, not reaped.
    let (mut fsm, _) = GetFsm::start(p, Replica::each_on_own_node(&[true; 3]));
    fsm.reply(0, GetReply::Found(t.clone()));
    fsm.reply(1, GetReply::Found(v1.clone()));
    let e = fsm.reply(2, GetReply::Found(t.clone()));
    assert_eq!(
        e,
        vec![
            GetEffect::Repair {
                idx: 1,
                object: t.clone()
            },
            GetEffect::Done
        ]
    );
}

#[test]
fn a_timeout_answers_once_and_repairs_what_answered() {
    let v1 = obj("a", "v1", None);
    let v2 = obj("a", "v2", Some(&v1));
    let (mut fsm, _) = GetFsm::start(
        params(3, 0, true, false),
        Replica::each_on_own_node(&[true; 3]),
    );
    fsm.reply(0, GetReply::Found(v2.clone()));
    fsm.reply(1, GetReply::Found(v1.clone()));
    let e = fsm.timeout();
    assert_eq!(
        e,
        vec![
            GetEffect::Answer(GetOutcome::Err(CoordError::Timeout)),
            GetEffect::Repair {
                idx: 1,
                object: v2.clone()
            },
            GetEffect::Done
        ]
    );
    // An answer already given is not taken back by a timeout.
    let (mut fsm, _) = GetFsm::start(
        params(1, 0, true, false),
        Replica::each_on_own_node(&[true; 3]),
    );
    let e = fsm.reply(0, GetReply::Found(v2.clone()));
    assert!(matches!(e[0], GetEffect::Answer(GetOutcome::Found(_))));
    assert_eq!(fsm.timeout(), vec![GetEffect::Done]);
}

#[test]
fn replies_out_of_range_or_repeated_are_ignored() {
    let v1 = obj("a", "v1", None);
    let (mut fsm, _) = GetFsm::start(
        params(2, 0, true, false),
        Replica::each_on_own_node(&[true; 3]),
    );
    assert!(fsm.reply(7, GetReply::Found(v1.clone())).is_empty());
    assert!(fsm.reply(0, GetReply::Found(v1.clone())).is_empty());
    assert!(fsm.reply(0, GetReply::Found(v1.clone())).is_empty());
    assert!(!fsm.reply(1, GetReply::Found(v1.clone())).is_empty());
}

#[test]
fn fail_thresholds() {
    let t = |n, r, bq| {
        GetParams {
            n,
            r,
            pr: 0,
            node_confirms: 0,
            notfound_ok: false,
            basic_quorum: bq,
            allow_mult: true,
            deletedvclock: false,
            wait_for_all: false,
        }
        .fail_threshold()
    };
    assert_eq!(t(3, 2, false), 2);
    assert_eq!(t(3, 1, false), 3);
    assert_eq!(t(3, 1, true), 2);
    assert_eq!(t(5, 1, true), 3);
    assert_eq!(t(3, 3, false), 1);
}

#[test]
fn waiting_for_all_answers_from_every_reply() {
    let v1 = obj("a", "v1", None);
    let v2 = obj("a", "v2", Some(&v1));
    let mut p = params(1, 0, true, false);
    p.wait_for_all = true;
    let (mut fsm, _) = GetFsm::start(p, Replica::each_on_own_node(&[true; 3]));
    // R = 1 is met by the first reply, but the answer waits for the
    // newer value the third replica holds.
    assert!(fsm.reply(0, GetReply::Found(v1.clone())).is_empty());
    assert!(fsm.reply(1, GetReply::NotFound).is_empty());
    let e = fsm.reply(2, GetReply::Found(v2.clone()));
    assert_eq!(e[0], GetEffect::Answer(GetOutcome::Found(v2.clone())));
    // Errors count every reply.
    let mut p = params(3, 0, true, false);
    p.wait_for_all = true;
    let (mut fsm, _) = GetFsm::start(p, Replica::each_on_own_node(&[true; 3]));
    fsm.reply(
        0,
        GetReply::Failed {
            reason: "disk".into(),
            overload: false,
        },
    );
    fsm.reply(1, GetReply::Found(v1.clone()));
    let e = fsm.reply(2, GetReply::Found(v1.clone()));
    assert_eq!(
        e[0],
        GetEffect::Answer(GetOutcome::Err(CoordError::Quorum(
            QuorumError::RUnsatisfied { need: 3, got: 2 }
        )))
    );
}

#[test]
fn a_tombstone_is_not_reaped_when_a_fallback_answered() {
    let v1 = obj("a", "v1", None);
    let t = tomb(&v1);
    let (mut fsm, _) = GetFsm::start(
        params(2, 0, true, false),
        Replica::each_on_own_node(&[true, true, false]),
    );
    fsm.reply(0, GetReply::Found(t.clone()));
    fsm.reply(1, GetReply::Found(t.clone()));
    let e = fsm.reply(2, GetReply::Found(t.clone()));
    assert_eq!(e, vec![GetEffect::Done], "a primary is down: no reap");
}

/// Found by the key-value simulation (seed 3285 of a 20,000-seed run): a
/// replica at the merge's clock still held tombstones the others had seen
/// superseded, and was never repaired, so the replicas never converged.
#[test]
fn a_replica_level_with_the_merge_but_different_is_repaired() {
    let v1 = obj("a", "v1", None);
    let b = obj("b", "vb", Some(&v1));
    let c = obj("c", "vc", Some(&v1));
    let both = b.merge(&c);
    // The same clock, one sibling fewer: a write had seen vb superseded.
    let mut level = both.clone();
    level.contents.retain(|x| x.value != b"vb"[..]);
    assert_eq!(level.clock, both.clock);
    let (mut fsm, _) = GetFsm::start(
        params(2, 0, true, false),
        Replica::each_on_own_node(&[true; 3]),
    );
    fsm.reply(0, GetReply::Found(level.clone()));
    fsm.reply(1, GetReply::Found(level.clone()));
    let e = fsm.reply(2, GetReply::Found(both.clone()));
    assert!(
        e.contains(&GetEffect::Repair {
            idx: 2,
            object: level.clone()
        }),
        "{e:?}"
    );
}

/// node_confirms on a get: replies of one machine's replicas count as
/// one node; Riak answers `insufficient_nodes` when too few nodes
/// answered.
#[test]
fn node_confirms_counts_the_nodes_that_answered() {
    let v = obj("a", "v1", None);
    let mut p = params(2, 0, true, false);
    p.node_confirms = 2;
    let on = |nodes: [u32; 3]| {
        (0..3)
            .map(|i| Replica {
                primary: i == 0,
                node: nodes[i],
            })
            .collect::<Vec<_>>()
    };
    // Replicas 0 and 1 on one node: R = 2 is met at the second reply,
    // node_confirms only at the third.
    let (mut fsm, _) = GetFsm::start(p, on([0, 0, 1]));
    assert!(fsm.reply(0, GetReply::Found(v.clone())).is_empty());
    assert!(fsm.reply(1, GetReply::Found(v.clone())).is_empty());
    let e = fsm.reply(2, GetReply::Found(v.clone()));
    assert!(
        matches!(&e[0], GetEffect::Answer(GetOutcome::Found(_))),
        "{e:?}"
    );
    // Every replica on one node: out of reach, answered at the first
    // reply, by the nodes.
    let (mut fsm, _) = GetFsm::start(p, on([0, 0, 0]));
    let e = fsm.reply(0, GetReply::Found(v.clone()));
    match &e[0] {
        GetEffect::Answer(GetOutcome::Err(err)) => {
            assert_eq!(err.to_string(), "{insufficient_nodes,1,need,2}")
        }
        other => panic!("{other:?}"),
    }
}
