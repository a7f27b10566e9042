//! What must hold of the key-value simulation once it has settled.

use crate::kv::KvSim;

/// What the settled key-value simulation breaks; `key` is the key's
/// name, values are as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KvViolation {
    #[error("{count} hinted objects were never handed off")]
    HintsLeft { count: usize },
    /// `replicas` is the primaries' objects as Rust's `Debug` shows them.
    #[error("{key}: the primaries did not converge: {replicas}")]
    NotConverged { key: String, replicas: String },
    #[error("{key}: {value} was never written")]
    NeverWritten { key: String, value: String },
    #[error("{key}: acknowledged {value} was lost")]
    AckedLost { key: String, value: String },
    #[error("{key}: {value} came back although an acknowledged write had seen it")]
    CameBack { key: String, value: String },
}

pub(crate) fn check(sim: &KvSim) -> Result<(), KvViolation> {
    if sim.hinted_left() > 0 {
        return Err(KvViolation::HintsLeft {
            count: sim.hinted_left(),
        });
    }
    for key in sim.keys() {
        let replicas = sim.replicas(&key);
        let first = replicas[0];
        if replicas.iter().any(|r| *r != first) {
            return Err(KvViolation::NotConverged {
                replicas: format!("{replicas:?}"),
                key,
            });
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
                return Err(KvViolation::NeverWritten {
                    value: String::from_utf8_lossy(v).into_owned(),
                    key,
                });
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
                return Err(KvViolation::AckedLost {
                    key: key.clone(),
                    value: value.to_string(),
                });
            }
            if replaced && present {
                return Err(KvViolation::CameBack {
                    key: key.clone(),
                    value: value.to_string(),
                });
            }
        }
    }
    Ok(())
}
