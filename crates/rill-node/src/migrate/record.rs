//! `meta/backend_migration.json`: where a backend migration of the node
//! stands (docs/format.md, "Backend migration record").

use crate::config::BackendKind;
use crate::meta::{MetaDir, MetaError};
use std::collections::BTreeSet;

const FILE: &str = "backend_migration.json";
const VERSION: u64 = 1;

/// Why `meta/backend_migration.json` could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// A field missing or of the wrong kind: `what` says which.
    #[error("meta/{FILE} does not describe a backend migration: {what}")]
    Malformed { what: String },
    #[error("meta/{FILE} has version {found}; this build reads version {VERSION}")]
    UnknownVersion { found: u64 },
    #[error("meta/{FILE} names an unknown backend {name:?}")]
    UnknownBackend { name: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub version: u64,
    /// The backend the data moves from and to (`storage_backend` names).
    pub from: String,
    pub to: String,
    /// Partitions (ring numbers) whose data is on `to`.
    pub moved: BTreeSet<u32>,
    /// Every partition moved and its old data dropped.
    pub done: bool,
    /// The copy's pace, kept for a resume (0: unpaced).
    pub keys_per_second: u64,
}

impl Record {
    pub fn new(from: &str, to: &str) -> Record {
        Record {
            version: VERSION,
            from: from.into(),
            to: to.into(),
            moved: BTreeSet::new(),
            done: false,
            keys_per_second: 0,
        }
    }

    /// The record, if a migration was ever asked of this node.
    pub fn load(meta: &MetaDir) -> Result<Option<Record>, RecordError> {
        let Some(v) = meta.read(FILE)? else {
            return Ok(None);
        };
        let bad = |what: &str| RecordError::Malformed {
            what: what.to_string(),
        };
        let version = v["version"].as_u64().ok_or_else(|| bad("no version"))?;
        if version != VERSION {
            return Err(RecordError::UnknownVersion { found: version });
        }
        let name = |f: &str| {
            v[f].as_str()
                .map(str::to_string)
                .ok_or_else(|| bad(&format!("no {f}")))
        };
        let moved = v["moved"]
            .as_array()
            .ok_or_else(|| bad("no moved"))?
            .iter()
            .map(|p| {
                p.as_u64()
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| bad("a partition that is not a number"))
            })
            .collect::<Result<_, _>>()?;
        let r = Record {
            version,
            from: name("from")?,
            to: name("to")?,
            moved,
            done: v["done"].as_bool().ok_or_else(|| bad("no done"))?,
            keys_per_second: v["keys_per_second"].as_u64().unwrap_or(0),
        };
        r.source_kind()?;
        r.target_kind()?;
        Ok(Some(r))
    }

    /// Writes the record atomically and durably.
    pub fn save(&self, meta: &MetaDir) -> Result<(), MetaError> {
        let v = serde_json::json!({
            "version": self.version,
            "from": self.from,
            "to": self.to,
            "moved": self.moved,
            "done": self.done,
            "keys_per_second": self.keys_per_second,
        });
        meta.write(FILE, &v)
            .map_err(|source| MetaError::Write { name: FILE, source })
    }

    pub fn source_kind(&self) -> Result<BackendKind, RecordError> {
        kind(&self.from)
    }

    pub fn target_kind(&self) -> Result<BackendKind, RecordError> {
        kind(&self.to)
    }
}

fn kind(name: &str) -> Result<BackendKind, RecordError> {
    BackendKind::from_name(name).ok_or_else(|| RecordError::UnknownBackend {
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_bad_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let meta = MetaDir::open(dir.path()).unwrap();
        assert_eq!(Record::load(&meta).unwrap(), None);
        let mut r = Record::new("bitcask", "leveled");
        r.moved.insert(3);
        r.save(&meta).unwrap();
        assert_eq!(Record::load(&meta).unwrap(), Some(r));
        let bad = serde_json::json!({"version": 1, "from": "bitcask", "to": "rocks", "moved": [], "done": false});
        meta.write(FILE, &bad).unwrap();
        let e = Record::load(&meta).unwrap_err().to_string();
        assert!(e.contains("unknown backend"), "{e}");
        meta.write(FILE, &serde_json::json!({"version": 2}))
            .unwrap();
        assert!(Record::load(&meta).is_err());
    }
}
