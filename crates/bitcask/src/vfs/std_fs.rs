//! The real filesystem.

use super::{OpenMode, VFile, Vfs};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, Default)]
pub struct StdVfs;

struct StdFile(File);

impl VFile for StdFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    #[cfg(target_os = "linux")]
    fn read_at_nowait(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: one iovec over `buf`, which outlives the call.
        let n = unsafe { libc::preadv2(self.0.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            // Kernels or filesystems without RWF_NOWAIT: read elsewhere.
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS | libc::EPERM)
            ) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            return Err(e);
        }
        Ok(n as usize)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; super::MAX_WRITE_PARTS];
        let n = bufs.len().min(iov.len());
        for (v, b) in iov.iter_mut().zip(&bufs[..n]) {
            v.iov_base = b.as_ptr() as *mut libc::c_void;
            v.iov_len = b.len();
        }
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the iovecs point into `bufs`, which outlive the call, and
        // pwritev only reads through them.
        let r =
            unsafe { libc::pwritev(self.0.as_raw_fd(), iov.as_ptr(), n as libc::c_int, offset) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl Vfs for StdVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VFile>> {
        let mut opts = OpenOptions::new();
        match mode {
            OpenMode::Read => {
                opts.read(true);
            }
            OpenMode::CreateNew => {
                opts.read(true).write(true).create_new(true);
            }
            OpenMode::CreateNewDirect => {
                opts.read(true)
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_DIRECT);
            }
            OpenMode::ReadWrite => {
                opts.read(true).write(true);
            }
        }
        Ok(Arc::new(StdFile(opts.open(path)?)))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            out.push(entry?.path());
        }
        Ok(out)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    /// `flock` on `dir/LOCK`: released by the kernel when the process dies,
    /// so a crash never leaves a stale lock.
    fn lock(&self, dir: &Path) -> io::Result<Box<dyn std::any::Any + Send + Sync>> {
        use std::os::unix::io::AsRawFd;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"))?;
        // SAFETY: flock on a descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Box::new(file))
    }
}
