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
/// (whether or not they are used): `None` when there are none or they do
/// not decode (then they are built again). A file that cannot be read
/// or removed stops the start: left in place, it could be taken by a
/// later start after writes it does not know of.
pub(crate) fn take(dir: &Path, index: &str) -> std::io::Result<Option<Trees>> {
    let p = path(dir, index);
    // A stop that failed while it wrote them may have left this.
    std::fs::remove_file(p.with_extension("trees.tmp")).or_else(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Ok(()),
        _ => Err(e),
    })?;
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    std::fs::remove_file(&p)?;
    match Trees::decode(&bytes) {
        Ok(t) => Ok(Some(t)),
        Err(e) => {
            tracing::warn!(file = %p.display(), error = %e, "the anti-entropy trees on disk do not read; they are built again");
            Ok(None)
        }
    }
}

/// Makes the removals of `take` durable (before anything is written, so
/// a crash cannot bring old trees back).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::File::open(dir) {
        Ok(d) => d.sync_all(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes a vnode's built trees (a temporary file, synced, renamed);
/// returns where, if they were built.
pub(crate) fn save(dir: &Path, index: &str, trees: &Trees) -> std::io::Result<Option<PathBuf>> {
    let Some(bytes) = trees.encode() else {
        return Ok(None);
    };
    std::fs::create_dir_all(dir)?;
    let p = path(dir, index);
    let tmp = p.with_extension("trees.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &p)?;
    Ok(Some(p))
}
