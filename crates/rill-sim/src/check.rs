//! What must hold once a simulated cluster has settled.

use crate::sim::Sim;
use rill_cluster::Status;
use std::collections::BTreeMap;

/// An invariant the settled cluster breaks (a status is `None` for a
/// node the state does not know).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    #[error("no node is up")]
    NoNodeUp,
    #[error("{node} and {other} disagree on members or ring")]
    Disagree { node: String, other: String },
    #[error("{node}: the ring is not ready")]
    RingNotReady { node: String },
    #[error("the claimant {claimant} is {status:?}")]
    ClaimantNotValid {
        claimant: String,
        status: Option<Status>,
    },
    #[error("{node} owns a partition but is {status:?}")]
    OwnerNotValid {
        node: String,
        status: Option<Status>,
    },
    #[error("{node} is valid but owns nothing")]
    OwnsNothing { node: String },
    /// Partitions per owner differ by more than one.
    #[error("unbalanced: {counts:?}")]
    Unbalanced { counts: BTreeMap<String, usize> },
    #[error("{node} left but is {status:?} and owns {owns:?}")]
    LeftButOwns {
        node: String,
        status: Option<Status>,
        owns: Option<usize>,
    },
    #[error("the cluster did not settle in {rounds} rounds")]
    NotSettled { rounds: usize },
}

pub(crate) fn invariants(sim: &Sim) -> Result<(), Violation> {
    let states = sim.up_states();
    let Some((first_name, first)) = states.first() else {
        return Err(Violation::NoNodeUp);
    };
    for (n, s) in &states {
        if s.digest() != first.digest() {
            return Err(Violation::Disagree {
                node: n.to_string(),
                other: first_name.to_string(),
            });
        }
        if !s.ring_ready() {
            return Err(Violation::RingNotReady {
                node: n.to_string(),
            });
        }
    }
    let s = first;
    let claimant = s.claimant();
    if s.status(claimant) != Some(Status::Valid) {
        return Err(Violation::ClaimantNotValid {
            claimant: claimant.to_string(),
            status: s.status(claimant),
        });
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for o in s.owners() {
        if s.status(o) != Some(Status::Valid) {
            return Err(Violation::OwnerNotValid {
                node: o.to_string(),
                status: s.status(o),
            });
        }
        *counts.entry(o).or_default() += 1;
    }
    let valid = s.with_status(|x| x == Status::Valid);
    if valid.len() <= s.ring_size() as usize {
        for v in &valid {
            if !counts.contains_key(v.as_str()) {
                return Err(Violation::OwnsNothing { node: v.clone() });
            }
        }
    }
    let (min, max) = (
        counts.values().min().copied().unwrap_or(0),
        counts.values().max().copied().unwrap_or(0),
    );
    if max - min > 1 {
        return Err(Violation::Unbalanced {
            counts: counts.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        });
    }
    for l in sim.left() {
        if counts.contains_key(l.as_str()) || s.status(l) != Some(Status::Invalid) {
            return Err(Violation::LeftButOwns {
                node: l.clone(),
                status: s.status(l),
                owns: counts.get(l.as_str()).copied(),
            });
        }
    }
    Ok(())
}
