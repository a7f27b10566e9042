//! Where a receiver keeps its place: the cursor of the last batch it
//! stored, on disk under `<data>/meta/handoff/`, so that a transfer
//! broken off resumes after it; and the removal of cursors no transfer
//! will use again.

use super::TransferId;
use crate::runtime::Peer;
use rill_cluster::Status;

fn cursor_name(t: &TransferId) -> String {
    let from: String = t.from.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{from}", t.partition, t.id)
}

/// The transfer a cursor file is named after.
fn transfer_of(name: &str) -> Option<TransferId> {
    let mut parts = name.splitn(3, '-');
    let partition = parts.next()?.parse().ok()?;
    let id = parts.next()?.parse().ok()?;
    let hex = parts.next()?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let from = String::from_utf8(bytes?).ok()?;
    Some(TransferId {
        partition,
        id,
        from,
    })
}

impl Peer {
    pub(super) fn cursor_path(&self, t: &TransferId) -> std::path::PathBuf {
        self.node
            .config()
            .data_dir
            .join("meta")
            .join("handoff")
            .join(cursor_name(t))
    }

    pub(super) fn load_cursor(&self, t: &TransferId) -> Option<Vec<u8>> {
        std::fs::read(self.cursor_path(t)).ok()
    }

    pub(super) fn save_cursor(&self, t: &TransferId, cursor: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let path = self.cursor_path(t);
        let dir = path.parent().expect("a parent");
        std::fs::create_dir_all(dir)?;
        let tmp = path.with_extension("tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(cursor)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    }
}

impl Peer {
    /// Removes the cursors no transfer will use: a repair's once no
    /// receiver of it runs (a repair broken off by a restart starts
    /// again), an ownership transfer's
    /// once the ring no longer has it pending, a hinted transfer's once
    /// its sender is no member or reports holding nothing of the
    /// partition without owning it, and files a crash left half written. A running
    /// receiver's cursor stays.
    pub(super) fn clean_cursors(&self) {
        let dir = self.node.config().data_dir.join("meta").join("handoff");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let keep = |t: &TransferId| -> bool {
            if self.handoffs().incoming.contains_key(t) {
                return true;
            }
            let inner = self.lock();
            let s = &inner.state;
            if rill_handoff::repair::source_of(t.id).is_some() {
                return false;
            }
            if t.id != 0 {
                return s.ring().next.iter().any(|p| {
                    p.partition == t.partition && p.id == t.id && p.from == t.from && !s.is_done(p)
                });
            }
            s.status(&t.from).is_some_and(Status::is_member)
                && inner
                    .holdings
                    .get(&t.from)
                    .is_none_or(|r| r.not_owned(&t.from, s.owners()).any(|p| p == t.partition))
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale = match transfer_of(&name) {
                _ if name.ends_with(".tmp") => true,
                Some(t) => !keep(&t),
                None => false,
            };
            if stale {
                match std::fs::remove_file(e.path()) {
                    Ok(()) => {
                        tracing::info!(cursor = %name, "a handoff cursor no transfer will use was removed")
                    }
                    Err(err) => {
                        tracing::warn!(cursor = %name, error = %err, "a handoff cursor could not be removed")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursors_name_gives_its_transfer_back() {
        for t in [
            TransferId {
                partition: 7,
                id: 0,
                from: "dev1@127.0.0.1".into(),
            },
            TransferId {
                partition: 1023,
                id: 42,
                from: "rill-x@host-a".into(),
            },
        ] {
            assert_eq!(transfer_of(&cursor_name(&t)), Some(t));
        }
        assert_eq!(transfer_of("7-0"), None);
        assert_eq!(transfer_of("7-0-zz"), None);
        assert_eq!(transfer_of("x-0-61"), None);
    }
}
