//! What must hold of the key-value simulation once it has settled.

use crate::kv::KvSim;

pub(crate) fn check(sim: &KvSim) -> Result<(), String> {
    if sim.hinted_left() > 0 {
        return Err(format!(
            "{} hinted objects were never handed off",
            sim.hinted_left()
        ));
    }
    for key in sim.keys() {
        let replicas = sim.replicas(&key);
        let first = replicas[0];
        if replicas.iter().any(|r| *r != first) {
            return Err(format!(
                "{key}: the primaries did not converge: {replicas:?}"
            ));
        }
        let contents: Vec<&[u8]> = match first {
            Some(o) => o
                .contents
                .iter()
                .filter(|c| !c.meta.deleted)
                .map(|c| c.value.as_ref())
                .collect(),
            None => Vec::new(),
        };
        for v in &contents {
            if !sim.was_written(v) {
                return Err(format!(
                    "{key}: {} was never written",
                    String::from_utf8_lossy(v)
                ));
            }
        }
        for (value, dot, _) in sim.acked_for(&key) {
            let (Some(value), Some(dot)) = (value, dot) else {
                continue;
            };
            // A write whose context had seen it may have replaced it,
            // acknowledged or not; one that was acknowledged did.
            let maybe_replaced = sim.all_attempted_contexts(&key).any(|c| c.covers(dot));
            let replaced = sim.all_acked_contexts(&key).any(|c| c.covers(dot));
            let present = contents.contains(&value.as_bytes());
            if !maybe_replaced && !present {
                return Err(format!("{key}: acknowledged {value} was lost"));
            }
            if replaced && present {
                return Err(format!(
                    "{key}: {value} came back although an acknowledged write had seen it"
                ));
            }
        }
    }
    Ok(())
}
