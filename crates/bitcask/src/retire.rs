//! Retiring merged-away files, all or nothing across a crash.
//!
//! A merge that drops a tombstone (or an expired record) relies on every
//! older record of its key going with the merge's inputs: were one input
//! to survive a crash that took the others, the older value would come
//! back with nothing left to shadow it (Riak's Bitcask had this bug). So
//! such a merge first writes a manifest naming every input, fsyncs it and
//! its directory entry, and only then applies the drops and unlinks the
//! inputs. Opening a store finishes the deletions of every manifest it
//! finds before it reads anything. A merge that drops nothing unlinks its
//! inputs directly: any of them coming back holds only records older than
//! durable ones elsewhere.

use crate::error::{Error, Result};
use crate::files::{data_path, hint_path, parse_file_name};
use crate::format::manifest::{decode_manifest, encode_manifest};
use crate::store::Inner;
use crate::vfs::{OpenMode, Vfs};
use std::io;
use std::path::{Path, PathBuf};

/// Files a merge took out of use, deleted when no fold can read them.
pub(crate) struct Retired {
    pub ids: Vec<u32>,
    /// The manifest that commits their deletion, when the merge dropped
    /// records.
    pub manifest: Option<PathBuf>,
}

pub(crate) fn manifest_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.merge"))
}

fn remove_if_present(vfs: &dyn Vfs, path: &Path) -> Result<()> {
    match vfs.remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

impl Inner {
    /// Writes and makes durable the manifest naming `ids`; returns its path.
    pub(crate) fn write_manifest(&self, ids: &[u32]) -> Result<PathBuf> {
        let id = {
            let mut w = self.writer();
            w.next_file_id += 1;
            w.next_file_id - 1
        };
        let vfs = self.opts.vfs.as_ref();
        let path = manifest_path(&self.dir, id);
        let written = vfs.open(&path, OpenMode::CreateNew).and_then(|f| {
            f.write_all_at(&encode_manifest(ids), 0)?;
            f.sync_data()
        });
        let synced = written.and_then(|()| vfs.sync_dir(&self.dir));
        if let Err(e) = synced {
            // Never acted on: it may go, and a crash leaving it torn or
            // unnamed is ignored at open.
            let _ = vfs.remove_file(&path);
            let e = Error::io(&path, e);
            return Err(match e {
                Error::DiskFull { .. } => e,
                other => self.poison(other),
            });
        }
        Ok(path)
    }

    /// Deletes retired files now, or when the last open fold ends.
    pub(crate) fn retire(&self, retired: Retired) -> Result<()> {
        {
            let mut f = self.folds.lock().expect("folds");
            if f.active > 0 {
                f.deferred.push(retired);
                return Ok(());
            }
        }
        self.delete_retired(retired)
    }

    /// Unlinks retired files; then, the unlinks durable, their manifest.
    pub(crate) fn delete_retired(&self, retired: Retired) -> Result<()> {
        for &id in &retired.ids {
            if self.files.contains(id) {
                self.delete_file(id)?;
            }
        }
        if let Some(manifest) = retired.manifest {
            let vfs = self.opts.vfs.as_ref();
            vfs.sync_dir(&self.dir)
                .map_err(|e| self.poison(Error::io(&self.dir, e)))?;
            remove_if_present(vfs, &manifest)?;
        }
        Ok(())
    }
}

/// At open, before any file is read: finishes the deletions of every
/// durable manifest and removes the manifests. Returns the highest id
/// among them (ids are never reused) and how many were finished.
pub(crate) fn finish_manifests(
    vfs: &dyn Vfs,
    dir: &Path,
    listing: &[PathBuf],
) -> Result<(u32, usize)> {
    let mut max_id = 0;
    let mut manifests = Vec::new();
    for path in listing {
        let Some((id, "merge")) = parse_file_name(path) else {
            continue;
        };
        max_id = max_id.max(id);
        let bytes = vfs
            .open(path, OpenMode::Read)
            .and_then(|f| f.read_all())
            .map_err(|e| Error::io(path, e))?;
        match decode_manifest(&bytes) {
            Ok(ids) => {
                tracing::warn!(path = %path.display(), files = ids.len(),
                    "finishing the deletions of a merge a crash interrupted");
                for id in ids {
                    remove_if_present(vfs, &hint_path(dir, id))?;
                    remove_if_present(vfs, &data_path(dir, id))?;
                }
            }
            Err(e) => {
                // Not fsynced whole, so never acted on.
                tracing::warn!(path = %path.display(), error = %e,
                    "removing an incomplete merge manifest");
            }
        }
        manifests.push(path);
    }
    if manifests.is_empty() {
        return Ok((0, 0));
    }
    // The unlinks are durable before the manifests that order them go.
    vfs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    for path in &manifests {
        remove_if_present(vfs, path)?;
    }
    vfs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok((max_id, manifests.len()))
}
