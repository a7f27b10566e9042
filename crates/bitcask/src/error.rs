//! Errors of the Bitcask engine.

use std::io;
use std::path::PathBuf;

/// Why bytes read from a data or hint file were rejected.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("truncated: needed {needed} bytes, found {found}")]
    Truncated { needed: usize, found: usize },
    #[error("header checksum mismatch: stored {expected:#010x}, computed {got:#010x}")]
    HeaderChecksum { expected: u32, got: u32 },
    #[error("body checksum mismatch: stored {expected:#010x}, computed {got:#010x}")]
    BodyChecksum { expected: u32, got: u32 },
    #[error("unknown flag bits {0:#04x}")]
    UnknownFlags(u8),
    #[error("bad magic bytes: not a Rill Bitcask file of this kind")]
    BadMagic,
    #[error("format version {0} is not supported (this build reads data files of versions 1 and 2, hint files of version 1)")]
    UnsupportedVersion(u8),
    #[error("invalid: {0}")]
    Invalid(&'static str),
}

/// Errors returned by [`crate::Store`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the disk is full writing {path}: free space, then retry the write")]
    DiskFull { path: PathBuf },
    /// A write or fsync failed earlier (`cause`, shared by every refusal
    /// since): the store refuses writes until it is reopened.
    #[error(
        "the store refuses writes after an earlier I/O failure ({cause}); \
         reopen it to recover what was durably written"
    )]
    PreviousIo { cause: std::sync::Arc<Error> },
    #[error("key of {len} bytes exceeds the maximum of {max}")]
    KeyTooLarge { len: usize, max: usize },
    #[error("a key must not be empty")]
    EmptyKey,
    #[error("value of {len} bytes exceeds the maximum of {max}")]
    ValueTooLarge { len: usize, max: usize },
    #[error("invalid option {name}: {reason}")]
    InvalidOption { name: &'static str, reason: String },
    #[error("{path} is locked by another process (pid file {lock})")]
    Locked { path: PathBuf, lock: PathBuf },
    #[error("corrupt record in {path} at offset {offset}: {source}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        #[source]
        source: DecodeError,
    },
    #[error("the store is closed")]
    Closed,
    #[error("busy: {0}")]
    Busy(String),
}

impl Error {
    /// Wraps an I/O error, turning ENOSPC and EDQUOT into [`Error::DiskFull`].
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Error::DiskFull { path },
            _ => Error::Io { path, source },
        }
    }

    /// True when the error came from the disk being full.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::DiskFull { .. })
            || matches!(self, Error::PreviousIo { cause } if cause.is_disk_full())
    }

    /// A copy of this error for the poisoned state, which every later
    /// refusal shares: the same variant and data, an I/O error rebuilt from
    /// its OS code (or its kind and text).
    pub(crate) fn duplicate(&self) -> Error {
        let io = |e: &io::Error| match e.raw_os_error() {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(e.kind(), e.to_string()),
        };
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: io(source),
            },
            Error::DiskFull { path } => Error::DiskFull { path: path.clone() },
            Error::PreviousIo { cause } => Error::PreviousIo {
                cause: cause.clone(),
            },
            Error::KeyTooLarge { len, max } => Error::KeyTooLarge {
                len: *len,
                max: *max,
            },
            Error::EmptyKey => Error::EmptyKey,
            Error::ValueTooLarge { len, max } => Error::ValueTooLarge {
                len: *len,
                max: *max,
            },
            Error::InvalidOption { name, reason } => Error::InvalidOption {
                name,
                reason: reason.clone(),
            },
            Error::Locked { path, lock } => Error::Locked {
                path: path.clone(),
                lock: lock.clone(),
            },
            Error::Corrupt {
                path,
                offset,
                source,
            } => Error::Corrupt {
                path: path.clone(),
                offset: *offset,
                source: source.clone(),
            },
            Error::Closed => Error::Closed,
            Error::Busy(m) => Error::Busy(m.clone()),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Refuses an empty key or one longer than `max` bytes.
pub(crate) fn check_key(key: &[u8], max: usize) -> Result<()> {
    if key.is_empty() {
        return Err(Error::EmptyKey);
    }
    if key.len() > max {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max,
        });
    }
    Ok(())
}
