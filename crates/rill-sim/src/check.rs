//! What must hold once a simulated cluster has settled.

use crate::sim::Sim;
use rill_cluster::Status;
use std::collections::BTreeMap;

pub(crate) fn invariants(sim: &Sim) -> Result<(), String> {
    let states = sim.up_states();
    let Some((first_name, first)) = states.first() else {
        return Err("no node is up".into());
    };
    for (n, s) in &states {
        if s.digest() != first.digest() {
            return Err(format!("{n} and {first_name} disagree on members or ring"));
        }
        if !s.ring_ready() {
            return Err(format!("{n}: the ring is not ready"));
        }
    }
    let s = first;
    let claimant = s.claimant();
    if s.status(claimant) != Some(Status::Valid) {
        return Err(format!(
            "the claimant {claimant} is {:?}",
            s.status(claimant)
        ));
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for o in s.owners() {
        if s.status(o) != Some(Status::Valid) {
            return Err(format!("{o} owns a partition but is {:?}", s.status(o)));
        }
        *counts.entry(o).or_default() += 1;
    }
    let valid = s.with_status(|x| x == Status::Valid);
    if valid.len() <= s.ring_size() as usize {
        for v in &valid {
            if !counts.contains_key(v.as_str()) {
                return Err(format!("{v} is valid but owns nothing"));
            }
        }
    }
    let (min, max) = (
        counts.values().min().copied().unwrap_or(0),
        counts.values().max().copied().unwrap_or(0),
    );
    if max - min > 1 {
        return Err(format!("unbalanced: {counts:?}"));
    }
    for l in sim.left() {
        if counts.contains_key(l.as_str()) || s.status(l) != Some(Status::Invalid) {
            return Err(format!(
                "{l} left but is {:?} and owns {:?}",
                s.status(l),
                counts.get(l.as_str())
            ));
        }
    }
    Ok(())
}
