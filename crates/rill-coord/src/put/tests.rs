//! riak_kv_put_core's rules from tables.

use super::*;
use rill_object::{Content, Metadata, PutMode};

fn obj(value: &str) -> Object {
    let mut c = Content::new(value.as_bytes().to_vec(), Metadata::default());
    c.meta.last_modified_us = 1_000_000;
    let mode = PutMode {
        allow_mult: true,
        last_write_wins: false,
    };
    Object::coordinate_put(None, &Default::default(), c, &b"a".to_vec(), mode)
}

fn params(w: u32, dw: u32, pw: u32) -> PutParams {
    PutParams {
        n: 3,
        w,
        dw,
        pw,
        node_confirms: 0,
        allow_mult: true,
        return_body: false,
    }
}

/// Replies of replicas 1 and 2 after the coordinator's store: `w` the
/// request arrived, `dw` stored, `x` failed, `busy` overloaded; a `*`
/// marks a fallback (replica 0, the coordinator, is a primary).
fn run(p: PutParams, replies: &str) -> (usize, String, Option<bool>) {
    run_on(p, [0, 1, 2], replies)
}

/// [`run`] with replica `i` on node `nodes[i]`.
fn run_on(p: PutParams, nodes: [u32; 3], replies: &str) -> (usize, String, Option<bool>) {
    let codes: Vec<&str> = replies.split(' ').filter(|c| !c.is_empty()).collect();
    let mut primaries = [true, true, true];
    let mut steps: Vec<(usize, PutReply)> = Vec::new();
    for c in &codes {
        let (c, fallback) = match c.strip_suffix('*') {
            Some(c) => (c, true),
            None => (*c, false),
        };
        let (idx, what) = c.split_at(1);
        let idx: usize = idx.parse().unwrap();
        if fallback {
            primaries[idx] = false;
        }
        let r = match what {
            "w" => PutReply::W,
            "dw" => PutReply::Dw(None),
            "x" => PutReply::Failed {
                reason: "disk full".into(),
                overload: false,
            },
            "busy" => PutReply::Failed {
                reason: "overload".into(),
                overload: true,
            },
            other => panic!("{other}"),
        };
        steps.push((idx, r));
    }
    let replicas = (0..3)
        .map(|i| Replica {
            primary: primaries[i],
            node: nodes[i],
        })
        .collect();
    let (mut fsm, e) = PutFsm::start(p, replicas);
    assert_eq!(e, vec![PutEffect::Coordinate]);
    let mut answer = None;
    let mut everywhere = None;
    let mut take = |step: usize, effects: Vec<PutEffect>| {
        for e in effects {
            match e {
                PutEffect::Answer(a) => {
                    assert!(answer.is_none(), "answered twice");
                    let text = match a {
                        Ok(_) => "ok".to_string(),
                        Err(e) => e.to_string(),
                    };
                    answer = Some((step, text));
                }
                PutEffect::Done { everywhere: e } => everywhere = Some(e),
                PutEffect::Send { idx, .. } => assert!(idx == 1 || idx == 2),
                PutEffect::Coordinate => panic!("twice"),
            }
        }
    };
    take(0, fsm.coordinated(Ok(obj("v"))));
    for (i, (idx, r)) in steps.into_iter().enumerate() {
        take(i + 1, fsm.reply(idx, r));
    }
    let (at, text) = answer.unwrap_or_else(|| panic!("not answered: {replies}"));
    (at, text, everywhere)
}

#[test]
fn answers_from_a_table() {
    // (w, dw, pw, replies of replicas 1 and 2, answered after step #
    // (0: the coordinator's own store), answer, stored everywhere)
    type Row = (
        u32,
        u32,
        u32,
        &'static str,
        usize,
        &'static str,
        Option<bool>,
    );
    let table: &[Row] = &[
        (1, 1, 0, "1w 1dw 2w 2dw", 0, "ok", Some(true)),
        (2, 2, 0, "1w 1dw 2w 2dw", 2, "ok", Some(true)),
        // W counts arrivals, DW stores: W alone does not answer a DW of 2.
        (2, 1, 0, "1w 2w 1dw 2dw", 1, "ok", Some(true)),
        (2, 2, 0, "1w 2w 1dw 2dw", 3, "ok", Some(true)),
        (3, 3, 0, "1w 1dw 2w 2dw", 4, "ok", Some(true)),
        // DW can no longer be met after N - DW + 1 failures.
        (3, 3, 0, "1x", 1, "{dw_val_unsatisfied,3,1}", None),
        (2, 2, 0, "1x 2x", 2, "{dw_val_unsatisfied,2,1}", Some(false)),
        (2, 2, 0, "1x 2w 2dw", 3, "ok", Some(false)),
        (2, 2, 0, "1busy 2busy", 2, "overload", Some(false)),
        // PW counts primaries' stores.
        (1, 1, 2, "1dw* 2dw", 2, "ok", Some(false)),
        // A fallback in the list: PW = 3 is out of reach from the start
        // (Riak waits for every store to say so).
        (
            1,
            1,
            3,
            "1dw* 2dw",
            0,
            "{pw_val_unsatisfied,3,1}",
            Some(false),
        ),
        (1, 1, 3, "1x", 1, "{pw_val_unsatisfied,3,1}", None),
        (2, 1, 2, "1w* 2x", 2, "{pw_val_unsatisfied,2,1}", None),
        // W above DW: fails as soon as too many replicas did (Riak waits
        // for the timeout).
        (3, 1, 0, "1x", 1, "{w_val_unsatisfied,3,1}", None),
        // W out of reach while DW can still be met: W is what failed.
        (3, 2, 0, "1x", 1, "{w_val_unsatisfied,3,1}", None),
    ];
    for (w, dw, pw, replies, at, want, everywhere) in table {
        let got = run(params(*w, *dw, *pw), replies);
        assert_eq!(
            got,
            (*at, want.to_string(), *everywhere),
            "w {w} dw {dw} pw {pw}: {replies}"
        );
    }
}

#[test]
fn node_confirms_counts_distinct_nodes_from_a_table() {
    // (w, dw, node_confirms, node of each replica, replies of replicas 1
    // and 2, answered after step #, answer, stored everywhere)
    type Row = (
        u32,
        u32,
        u32,
        [u32; 3],
        &'static str,
        usize,
        &'static str,
        Option<bool>,
    );
    let table: &[Row] = &[
        // Three replicas on three nodes: two stores are two nodes.
        (2, 2, 2, [0, 1, 2], "1dw 2dw", 1, "ok", Some(true)),
        // Two fallbacks on the coordinator's node: W and DW are met by
        // one machine, node_confirms is not (Riak's words).
        (
            2,
            2,
            2,
            [0, 0, 0],
            "1dw* 2dw*",
            0,
            "{node_confirms_val_unsatisfied,2,1}",
            Some(false),
        ),
        // Replicas 0 and 1 on one node: the second node's store is
        // awaited.
        (2, 2, 2, [0, 0, 1], "1dw 2dw", 2, "ok", Some(true)),
        // ... and its failure ends the wait.
        (
            2,
            2,
            2,
            [0, 0, 1],
            "1dw 2x",
            2,
            "{node_confirms_val_unsatisfied,2,1}",
            Some(false),
        ),
        // node_confirms out of reach while DW is still to come: named.
        (
            3,
            3,
            3,
            [0, 1, 1],
            "1w",
            0,
            "{node_confirms_val_unsatisfied,3,1}",
            None,
        ),
    ];
    for (w, dw, nc, nodes, replies, at, want, everywhere) in table {
        let mut p = params(*w, *dw, 0);
        p.node_confirms = *nc;
        let got = run_on(p, *nodes, replies);
        assert_eq!(
            got,
            (*at, want.to_string(), *everywhere),
            "w {w} dw {dw} nc {nc} nodes {nodes:?}: {replies}"
        );
    }
}

#[test]
fn the_coordinators_failure_is_the_answer() {
    let (mut fsm, _) = PutFsm::start(params(2, 2, 0), Replica::each_on_own_node(&[true; 3]));
    let e = fsm.coordinated(Err(CoordError::Failed("out_of_space".into())));
    assert_eq!(
        e,
        vec![
            PutEffect::Answer(Err(CoordError::Failed("out_of_space".into()))),
            PutEffect::Done { everywhere: false }
        ]
    );
    assert!(fsm.reply(1, PutReply::Dw(None)).is_empty());
}

#[test]
fn the_body_is_the_merge_of_what_the_replicas_hold() {
    let mut p = params(3, 3, 0);
    p.return_body = true;
    let (mut fsm, _) = PutFsm::start(p, Replica::each_on_own_node(&[true; 3]));
    let v = obj("v");
    let e = fsm.coordinated(Ok(v.clone()));
    assert_eq!(e.len(), 2, "sent to replicas 1 and 2: {e:?}");
    let other = {
        let c = Content::new(b"sibling".to_vec(), Metadata::default());
        let mode = PutMode {
            allow_mult: true,
            last_write_wins: false,
        };
        Object::coordinate_put(None, &Default::default(), c, &b"z".to_vec(), mode)
    };
    fsm.reply(1, PutReply::Dw(Some(v.clone())));
    let e = fsm.reply(2, PutReply::Dw(Some(v.merge(&other))));
    let PutEffect::Answer(Ok(Some(body))) = &e[0] else {
        panic!("{e:?}")
    };
    assert_eq!(body.contents.len(), 2);
}

#[test]
fn a_timeout_answers_once() {
    let (mut fsm, _) = PutFsm::start(params(3, 3, 0), Replica::each_on_own_node(&[true; 3]));
    fsm.coordinated(Ok(obj("v")));
    assert_eq!(
        fsm.timeout(),
        vec![
            PutEffect::Answer(Err(CoordError::Timeout)),
            PutEffect::Done { everywhere: false }
        ]
    );
    assert!(fsm.timeout().is_empty());
}
