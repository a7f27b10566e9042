//! The one narrow door through which the engine touches the filesystem.
//!
//! Everything the engine does to disk goes through [`Vfs`] and [`VFile`], so
//! tests can swap in [`FaultyVfs`] to inject ENOSPC, EIO, failed fsyncs and
//! torn writes at chosen moments, or [`SimVfs`], a simulated disk that
//! loses power and keeps only what was made durable.

mod faulty;
mod sim;
mod std_fs;

pub use faulty::{Fault, FaultyVfs};
pub use sim::{CrashKeep, SimVfs, SECTOR_BYTES};
pub use std_fs::StdVfs;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a file is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only.
    Read,
    /// Create a new file (fail if it exists) for writing.
    CreateNew,
    /// Create a new file with O_DIRECT: writes must be 4096-aligned in
    /// offset, length and memory.
    CreateNewDirect,
    /// Open an existing file for reading and writing (recovery truncation).
    ReadWrite,
}

/// The most slices [`VFile::write_all_vectored_at`] takes.
pub const MAX_WRITE_PARTS: usize = 4;

/// An open file. Positional I/O only, so one handle serves many threads.
pub trait VFile: Send + Sync {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    fn sync_data(&self) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    fn size(&self) -> io::Result<u64>;

    /// [`VFile::read_at`] only if it need not wait for the device: the
    /// bytes are in the page cache (Linux's `RWF_NOWAIT`), else
    /// `WouldBlock` (the default: the caller reads on a thread that may
    /// wait).
    fn read_at_nowait(&self, _buf: &mut [u8], _offset: u64) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// Reads exactly `buf.len()` bytes or fails with `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_exact_at_with(buf, offset, false)
    }

    /// [`VFile::read_exact_at`], through [`VFile::read_at_nowait`] when
    /// `nowait` (failing with `WouldBlock` as soon as a part is not
    /// cached).
    fn read_exact_at_with(
        &self,
        mut buf: &mut [u8],
        mut offset: u64,
        nowait: bool,
    ) -> io::Result<()> {
        while !buf.is_empty() {
            let read = if nowait {
                self.read_at_nowait(buf, offset)
            } else {
                self.read_at(buf, offset)
            };
            match read {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes all of `buf` or fails; on failure some prefix may be written.
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes the slices back to back from `offset` in one call where the
    /// platform can (`pwritev`); returns how many bytes were written. The
    /// default writes from the first non-empty slice only.
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<usize> {
        match bufs.iter().find(|b| !b.is_empty()) {
            Some(b) => self.write_at(b, offset),
            None => Ok(0),
        }
    }

    /// Writes every byte of the slices, back to back from `offset`, or
    /// fails; on failure some prefix may be written. At most
    /// [`MAX_WRITE_PARTS`] slices.
    fn write_all_vectored_at(&self, bufs: &[&[u8]], mut offset: u64) -> io::Result<()> {
        assert!(
            bufs.len() <= MAX_WRITE_PARTS,
            "too many slices for one write"
        );
        let mut parts: [&[u8]; MAX_WRITE_PARTS] = [&[]; MAX_WRITE_PARTS];
        parts[..bufs.len()].copy_from_slice(bufs);
        let mut first = 0;
        loop {
            while first < parts.len() && parts[first].is_empty() {
                first += 1;
            }
            if first == parts.len() {
                return Ok(());
            }
            match self.write_vectored_at(&parts[first..], offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(mut n) => {
                    offset += n as u64;
                    while n > 0 {
                        let take = n.min(parts[first].len());
                        parts[first] = &parts[first][take..];
                        n -= take;
                        if parts[first].is_empty() {
                            first += 1;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the whole file into memory.
    fn read_all(&self) -> io::Result<Vec<u8>> {
        let len = self.size()? as usize;
        let mut buf = vec![0u8; len];
        let mut filled = 0;
        while filled < len {
            match self.read_at(&mut buf[filled..], filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(filled);
        Ok(buf)
    }
}

/// Filesystem operations.
pub trait Vfs: Send + Sync + 'static {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VFile>>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries in a directory.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive lock on a directory, held until the returned
    /// guard is dropped; fails with `WouldBlock` when another holder has it.
    fn lock(&self, dir: &Path) -> io::Result<Box<dyn std::any::Any + Send + Sync>>;
}

/// Removes `dir`, the files in it first (not directories: a store's
/// directory holds none), and makes its removal durable in its parent.
/// Gone already is done.
pub fn remove_dir_durably(vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
    if !vfs.exists(dir) {
        return Ok(());
    }
    for f in vfs.list_dir(dir)? {
        vfs.remove_file(&f)?;
    }
    vfs.sync_dir(dir)?;
    vfs.remove_dir(dir)?;
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => vfs.sync_dir(p),
        _ => vfs.sync_dir(Path::new(".")),
    }
}

/// Creates `dir` and its missing parents, each made durable in its own
/// parent (a power cut must not take a new directory and what is in it).
pub fn create_dir_durably(vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(p) = at.filter(|p| !p.as_os_str().is_empty() && !vfs.exists(p)) {
        missing.push(p);
        at = p.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    vfs.create_dir_all(dir)?;
    for p in missing.iter().rev() {
        let parent = match p.parent() {
            Some(q) if !q.as_os_str().is_empty() => q,
            _ => Path::new("."),
        };
        vfs.sync_dir(parent)?;
    }
    Ok(())
}
