//! What must hold once the cluster simulation has settled, with no
//! client read since the heal:
//! - no write was acknowledged before `node_confirms` distinct nodes held
//!   it;
//! - every member knows the same ring, nothing moving, every join and
//!   leave asked for carried out;
//! - no node holds data of a partition it does not own (hinted and
//!   ownership handoff finished; a node that left holds nothing);
//! - anti-entropy reached a loop that found nothing, and the primaries of
//!   every key hold the same object (they converged by themselves);
//! - every value there is one a vnode coordinated, with the dot that
//!   vnode gave it (no dot issued twice, none lost from its value), made
//!   once unless its coordinator's `Accepted` was lost with its node
//!   after it made it (then the next replica made it again, as Riak's
//!   forwarded puts can);
//! - nothing an acknowledged write's context had seen (deleted or
//!   overwritten, acknowledged or not) is there: nothing comes back;
//! - every acknowledged write is there, its value with its dot, unless an
//!   acknowledged write's context had seen the dot (strict: a write that
//!   was not acknowledged forgives nothing, since clients sent those
//!   again until acknowledged);
//! - the one exception: a write made before a power loss of a node that
//!   does not write `o_sync` (it acknowledges what its disk may lose;
//!   `disk`), which took every trace of it (no vnode's clock had seen it
//!   after the loss, nor has the converged object's), may be gone, and
//!   what its context had seen may come back.

use super::client::Acked;
use super::ClusterSim;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterViolation {
    #[error("the members did not come to one ring with nothing moving")]
    RingNotSettled,
    #[error("{count} objects were left on fallbacks")]
    HintsLeft { count: usize },
    #[error("anti-entropy still found differences after its last loop")]
    NotQuiet,
    /// `replicas` is the primaries' objects as Rust's `Debug` shows them.
    #[error("{key}: the primaries did not converge: {replicas}")]
    NotConverged { key: String, replicas: String },
    #[error("{key}: {value} was never coordinated")]
    NeverWritten { key: String, value: String },
    #[error("{key}: {value} is there with a dot its coordinator did not give it")]
    WrongDot { key: String, value: String },
    #[error("{key}: acknowledged {value} has no dot from its coordinator")]
    NoDot { key: String, value: String },
    #[error("{key}: acknowledged {value} was lost")]
    AckedLost { key: String, value: String },
    #[error("{key}: {value} came back although an acknowledged write had seen it")]
    CameBack { key: String, value: String },
    /// One write made into two versions other than by a coordinator
    /// whose `Accepted` was lost with its node.
    #[error("{value} was made {times} times")]
    MadeTwice { value: String, times: usize },
    #[error("acknowledged before node_confirms distinct nodes held it: {write}")]
    Unconfirmed { write: String },
}

pub(super) fn check(sim: &ClusterSim, settled: bool, quiet: bool) -> Result<(), ClusterViolation> {
    if !settled {
        return Err(ClusterViolation::RingNotSettled);
    }
    if let Some((value, times)) = sim.made_too_often() {
        return Err(ClusterViolation::MadeTwice {
            value: value.to_owned(),
            times,
        });
    }
    if let Some(w) = sim.unconfirmed().first() {
        return Err(ClusterViolation::Unconfirmed { write: w.clone() });
    }
    let left = sim.hinted_left();
    if left > 0 {
        return Err(ClusterViolation::HintsLeft { count: left });
    }
    for key in sim.keys() {
        let replicas = sim.replicas(&key);
        if replicas.iter().any(|r| *r != replicas[0]) {
            return Err(ClusterViolation::NotConverged {
                replicas: format!("{replicas:?}"),
                key,
            });
        }
        let live: Vec<&rill_object::Content> = replicas[0]
            .as_ref()
            .map(|o| o.contents.iter().filter(|c| !c.meta.deleted).collect())
            .unwrap_or_default();
        // A write whose every trace a power loss took, and that did not
        // come back from a copy in flight, may be gone; what its
        // context covered may come back.
        let final_clock = replicas[0].as_ref().map(|o| &o.clock);
        let gone = |a: &Acked| {
            a.dot.as_ref().is_some_and(|d| {
                sim.lost_to_power(&key, d, a.made) && !final_clock.is_some_and(|c| c.covers(d))
            })
        };
        let acked: Vec<_> = sim.acked().iter().filter(|a| a.key == key).collect();
        let standing: Vec<_> = acked.iter().filter(|a| !gone(a)).collect();
        let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
        for c in &live {
            let dots = sim.dots_of(&c.value);
            if dots.is_empty() {
                return Err(ClusterViolation::NeverWritten {
                    value: text(&c.value),
                    key,
                });
            }
            let Some(dot) = c.dot.as_ref().filter(|d| dots.contains(d)) else {
                return Err(ClusterViolation::WrongDot {
                    value: text(&c.value),
                    key,
                });
            };
            if standing.iter().any(|b| b.context.covers(dot)) {
                return Err(ClusterViolation::CameBack {
                    value: text(&c.value),
                    key,
                });
            }
        }
        for a in &acked {
            let Some(value) = &a.value else {
                continue;
            };
            let Some(dot) = &a.dot else {
                return Err(ClusterViolation::NoDot {
                    key: key.clone(),
                    value: value.clone(),
                });
            };
            let covered = acked.iter().any(|b| b.context.covers(dot));
            let present = live
                .iter()
                .any(|c| c.value == value.as_bytes() && c.dot.as_ref() == Some(dot));
            if !covered && !present && !gone(a) {
                return Err(ClusterViolation::AckedLost {
                    key: key.clone(),
                    value: value.clone(),
                });
            }
        }
    }
    if !quiet {
        return Err(ClusterViolation::NotQuiet);
    }
    Ok(())
}
