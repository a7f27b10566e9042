//! The node's small metadata files under `<data>/meta/`, JSON written
//! atomically (temporary file, fsync, rename, fsync of the directory):
//! `node.json` (format version, ring size, each vnode's id) and
//! `buckets.json` (bucket types and bucket properties). docs/format.md
//! describes both.

use serde_json::Value;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why a file under `<data>/meta/` could not be read or written; each
/// says what to do where there is something to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    #[error(
        "{} is not valid JSON ({source}); restore it from a backup or remove it to start afresh",
        .path.display()
    )]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    /// A file read by a name of its own (`meta/leases`).
    #[error("cannot read meta/{name}: {source}")]
    ReadNamed {
        name: &'static str,
        source: io::Error,
    },
    #[error("cannot write meta/{name}: {source}")]
    Write {
        name: &'static str,
        source: io::Error,
    },
}

#[derive(Clone)]
pub(crate) struct MetaDir {
    dir: PathBuf,
}

impl MetaDir {
    pub fn open(data_dir: &Path) -> std::io::Result<MetaDir> {
        let dir = data_dir.join("meta");
        fs::create_dir_all(&dir)?;
        Ok(MetaDir { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn read(&self, name: &str) -> Result<Option<Value>, MetaError> {
        let path = self.dir.join(name);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| MetaError::NotJson { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(MetaError::Read { path, source }),
        }
    }

    pub fn write(&self, name: &str, value: &Value) -> std::io::Result<()> {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(serde_json::to_string_pretty(value)?.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        fs::File::open(&self.dir)?.sync_all()
    }
}
