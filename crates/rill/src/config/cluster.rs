//! How the node meets the others: its cluster listener and the address
//! it gives them, handoff limits, and the test-only link faults.

use super::setting::{Initial, Kind, Setting};
use std::time::Duration;

pub static SETTINGS: &[Setting] = &[
    Setting {
        key: "listener.cluster.internal",
        kind: Kind::Address,
        words: &[],
        default: Initial::Value("127.0.0.1:8099"),
        help: "where other nodes reach this one: gossip, replicas, handoff (port 0 picks a free one)",
        apply: |c, a| {
            c.cluster_listener = a.address();
            Ok(())
        },
    },
    Setting {
        key: "listener.cluster.advertise",
        kind: Kind::Address,
        words: &["auto"],
        default: Initial::Value("auto"),
        help: "the address other nodes are told to reach this one at; auto: the cluster listener's, or, when that listens on every interface, the nodename's host at its port",
        apply: |c, a| {
            c.cluster_advertise = match a.word() {
                Some(_) => None,
                None => Some(a.address()),
            };
            Ok(())
        },
    },
    Setting {
        key: "transfer_limit",
        kind: Kind::Count {
            min: 0,
            max: u32::MAX as u64,
        },
        words: &[],
        default: Initial::Value("2"),
        help: "handoffs leaving this node at once (as Riak)",
        apply: |c, a| {
            c.transfer_limit = a.count() as usize;
            Ok(())
        },
    },
    Setting {
        key: "handoff.batch_items",
        kind: Kind::Count {
            min: 1,
            max: 1_000_000,
        },
        words: &[],
        default: Initial::Value("1000"),
        help: "objects per handoff batch at most",
        apply: |c, a| {
            c.handoff_batch_items = a.count() as usize;
            Ok(())
        },
    },
    Setting {
        key: "handoff.timeout",
        kind: Kind::Duration {
            min: Duration::from_millis(1),
            max: Duration::from_secs(86_400),
        },
        words: &[],
        default: Initial::Value("15s"),
        help: "a handoff batch unacknowledged this long resumes in a new session",
        apply: |c, a| {
            c.handoff_timeout = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "cluster.down_after",
        kind: Kind::Duration {
            min: Duration::from_secs(2),
            max: Duration::from_secs(600),
        },
        words: &[],
        default: Initial::Value("6s"),
        help: "a node not heard from this long is taken for down and its replicas go to fallbacks (suspected after half of it; a closed connection counts at once); a claimant silent twice this long is replaced, and plans and commits stop waiting for a member silent that long; Riak's net_ticktime plays this part, 60 s there",
        apply: |c, a| {
            c.down_after = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "test.link.delay",
        kind: Kind::Duration {
            min: Duration::ZERO,
            max: Duration::from_secs(60),
        },
        words: &[],
        default: Initial::Value("0s"),
        help: "TEST ONLY: added to every message sent to another node, e.g. 10ms for a 20 ms round trip, 500us for 1 ms",
        apply: |c, a| {
            c.test_link_delay = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "test.link.loss",
        kind: Kind::Share,
        words: &[],
        default: Initial::Value("0"),
        help: "TEST ONLY: the share of messages to other nodes lost",
        apply: |c, a| {
            c.test_link_loss = a.number();
            Ok(())
        },
    },
];
