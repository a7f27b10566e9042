//! Where a receiver keeps its place: the cursor of the last batch it
//! stored, on disk under `<data>/meta/handoff/`, so that a transfer
//! broken off resumes after it.

use super::TransferId;
use crate::runtime::Peer;

fn cursor_name(t: &TransferId) -> String {
    let from: String = t.from.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{from}", t.partition, t.id)
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
