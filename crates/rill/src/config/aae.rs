//! Active anti-entropy's settings: Riak 3's `tictacaae_*` names, units
//! and (but for `tictacaae_active`) defaults.

use super::setting::{Initial, Kind, Setting};
use std::time::Duration;

const MS: Kind = Kind::Count {
    min: 1,
    max: 1 << 40,
};

pub static SETTINGS: &[Setting] = &[
    Setting {
        key: "tictacaae_active",
        kind: Kind::Choice(&["active", "passive"]),
        words: &[],
        default: Initial::Value("active"),
        help: "keep anti-entropy trees and exchange them between replicas, which then repair themselves (Riak's default is passive)",
        apply: |c, a| {
            c.node.tictacaae.active = a.text() == "active";
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_exchangetick",
        kind: MS,
        words: &[],
        default: Initial::Value("480000"),
        help: "milliseconds between one vnode's anti-entropy exchanges (as Riak)",
        apply: |c, a| {
            c.node.tictacaae.exchange_tick = Duration::from_millis(a.count());
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_rebuildtick",
        kind: MS,
        words: &[],
        default: Initial::Value("3600000"),
        help: "milliseconds between looks whether a vnode's trees are due to be built again (as Riak)",
        apply: |c, a| {
            c.node.tictacaae.rebuild_tick = Duration::from_millis(a.count());
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_rebuildwait",
        kind: Kind::Count {
            min: 1,
            max: 1 << 20,
        },
        words: &[],
        default: Initial::Value("336"),
        help: "hours at least between two builds of a vnode's trees (as Riak)",
        apply: |c, a| {
            c.node.tictacaae.rebuild_wait = Duration::from_secs(a.count() * 3600);
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_rebuilddelay",
        kind: Kind::Count {
            min: 0,
            max: 1 << 32,
        },
        words: &[],
        default: Initial::Value("345600"),
        help: "seconds of delay at most added to the wait, a share fixed by partition, so vnodes build at different times (as Riak, whose share is random)",
        apply: |c, a| {
            c.node.tictacaae.rebuild_delay = Duration::from_secs(a.count());
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_maxresults",
        kind: Kind::Count {
            min: 1,
            max: 1 << 20,
        },
        words: &[],
        default: Initial::Value("64"),
        help: "branches and segments one exchange compares at most (as Riak)",
        apply: |c, a| {
            c.node.tictacaae.max_results = a.count() as u32;
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_rangeboost",
        kind: Kind::Count { min: 1, max: 1024 },
        words: &[],
        default: Initial::Value("2"),
        help: "how many times tictacaae_maxresults the follow-up exchanges of a repair take (as Riak)",
        apply: |c, a| {
            c.node.tictacaae.range_boost = a.count() as u32;
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_repairloops",
        kind: Kind::Count { min: 0, max: 1024 },
        words: &[],
        default: Initial::Value("4"),
        help: "follow-up exchanges after one that found differences (as Riak)",
        apply: |c, a| {
            c.node.tictacaae.repair_loops = a.count() as u32;
            Ok(())
        },
    },
    Setting {
        key: "tictacaae_exchangepause",
        kind: Kind::Count {
            min: 0,
            max: 1 << 30,
        },
        words: &[],
        default: Initial::Value("1000"),
        help: "milliseconds between the stages of an exchange, so a difference must last to count (as Riak)",
        apply: |c, a| {
            c.node.tictacaae.exchange_pause = Duration::from_millis(a.count());
            Ok(())
        },
    },
];
