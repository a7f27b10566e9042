//! A [`Vfs`] that injects failures: writes that stop after a byte budget
//! (a torn write, then the chosen error), failing fsyncs and failing file
//! creation. Faults are switched on and off while the store runs.

use super::{OpenMode, VFile, Vfs};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A failure to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Writes succeed for `budget_bytes` more bytes in total, then fail with
    /// `errno` (the write that crosses the budget is torn).
    WritesFailAfter { budget_bytes: u64, errno: i32 },
    /// Every fsync fails with `errno`.
    SyncFails { errno: i32 },
    /// Creating files fails with `errno`.
    CreateFails { errno: i32 },
}

#[derive(Default)]
struct State {
    write_budget: Option<(u64, i32)>,
    sync_errno: Option<i32>,
    create_errno: Option<i32>,
    writes_failed: u64,
    file_syncs: u64,
}

/// Wraps another [`Vfs`] and injects [`Fault`]s.
#[derive(Clone)]
pub struct FaultyVfs {
    inner: Arc<dyn Vfs>,
    state: Arc<Mutex<State>>,
}

impl FaultyVfs {
    pub fn new(inner: Arc<dyn Vfs>) -> FaultyVfs {
        FaultyVfs {
            inner,
            state: Arc::default(),
        }
    }

    pub fn inject(&self, fault: Fault) {
        let mut s = self.state.lock().expect("fault state");
        match fault {
            Fault::WritesFailAfter {
                budget_bytes,
                errno,
            } => s.write_budget = Some((budget_bytes, errno)),
            Fault::SyncFails { errno } => s.sync_errno = Some(errno),
            Fault::CreateFails { errno } => s.create_errno = Some(errno),
        }
    }

    /// Removes every fault: the disk behaves again.
    pub fn heal(&self) {
        let mut s = self.state.lock().expect("fault state");
        s.write_budget = None;
        s.sync_errno = None;
        s.create_errno = None;
    }

    /// How many file fsyncs were made (successful or not).
    pub fn file_syncs(&self) -> u64 {
        self.state.lock().expect("fault state").file_syncs
    }

    /// How many write calls were failed so far.
    pub fn writes_failed(&self) -> u64 {
        self.state.lock().expect("fault state").writes_failed
    }
}

struct FaultyFile {
    inner: Arc<dyn VFile>,
    state: Arc<Mutex<State>>,
}

impl VFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }

    fn read_at_nowait(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at_nowait(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let allowed = {
            let mut s = self.state.lock().expect("fault state");
            match s.write_budget {
                None => buf.len(),
                Some((0, errno)) => {
                    s.writes_failed += 1;
                    return Err(io::Error::from_raw_os_error(errno));
                }
                Some((budget, errno)) => {
                    let n = (buf.len() as u64).min(budget) as usize;
                    s.write_budget = Some((budget - n as u64, errno));
                    n
                }
            }
        };
        self.inner.write_at(&buf[..allowed], offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        {
            let mut s = self.state.lock().expect("fault state");
            s.file_syncs += 1;
            if let Some(errno) = s.sync_errno {
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        self.inner.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
}

impl Vfs for FaultyVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VFile>> {
        if matches!(mode, OpenMode::CreateNew | OpenMode::CreateNewDirect) {
            if let Some(errno) = self.state.lock().expect("fault state").create_errno {
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        let inner = self.inner.open(path, mode)?;
        Ok(Arc::new(FaultyFile {
            inner,
            state: self.state.clone(),
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list_dir(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if let Some(errno) = self.state.lock().expect("fault state").sync_errno {
            return Err(io::Error::from_raw_os_error(errno));
        }
        self.inner.sync_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn lock(&self, dir: &Path) -> io::Result<Box<dyn std::any::Any + Send + Sync>> {
        self.inner.lock(dir)
    }
}
