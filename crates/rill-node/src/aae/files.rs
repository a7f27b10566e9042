//! The trees on disk: written at a clean stop, one file per vnode
//! (`tictacaae/<partition index>.trees` under the data directory,
//! docs/format.md, "Tictac tree set"), and removed when the node opens,
//! so that after any stop but a clean one the trees are built again from
//! the store (Riak's `aae_treecache` keeps them the same way).

use rill_aae::Trees;
use std::io::Write;
use std::path::{Path, PathBuf};

fn path(dir: &Path, index: &str) -> PathBuf {
    dir.join(format!("{index}.trees"))
}

/// A vnode's trees as the last clean stop left them, removed from disk
/// (whether or not they are used): `None` when there are none or they
/// cannot be read (then they are built again).
pub(crate) fn take(dir: &Path, index: &str) -> Option<Trees> {
    let p = path(dir, index);
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %p.display(), error = %e, "cannot read the anti-entropy trees; they are built again");
            return None;
        }
    };
    if let Err(e) = std::fs::remove_file(&p) {
        tracing::warn!(file = %p.display(), error = %e, "cannot remove the anti-entropy trees read; they are built again");
        return None;
    }
    match Trees::decode(&bytes) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(file = %p.display(), error = %e, "the anti-entropy trees on disk do not read; they are built again");
            None
        }
    }
}

/// Makes the removals of `take` durable (before anything is written, so
/// a crash cannot bring old trees back).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes a vnode's built trees (a temporary file, synced, renamed).
pub(crate) fn save(dir: &Path, index: &str, trees: &Trees) -> std::io::Result<()> {
    let Some(bytes) = trees.encode() else {
        return Ok(());
    };
    std::fs::create_dir_all(dir)?;
    let p = path(dir, index);
    let tmp = p.with_extension("trees.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &p)?;
    Ok(())
}
