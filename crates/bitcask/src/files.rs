//! The file table and its read-handle cache, shared by every thread.
//!
//! There is exactly one read descriptor per data file, opened on first use
//! and closed when the cache is over `max_open_files` (least recently used
//! first) or when the file is deleted. Deletion takes the file out of the
//! table, waits for in-flight reads to drop their handle, closes the
//! descriptor and only then unlinks: no descriptor of a deleted file ever
//! stays open (the stale-descriptor bug of Riak's Bitcask, the sensor-data paper, §2.2).

use crate::error::{Error, Result};
use crate::vfs::{OpenMode, VFile, Vfs};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

pub(crate) fn data_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.data"))
}

pub(crate) fn hint_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.hint"))
}

pub(crate) fn parse_file_name(path: &Path) -> Option<(u32, &str)> {
    let name = path.file_name()?.to_str()?;
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 10 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, ext))
}

pub(crate) struct DataFile {
    pub id: u32,
    pub path: PathBuf,
    handle: Mutex<Option<Arc<dyn VFile>>>,
    /// Second-chance bit for eviction: set on use (only if clear, so hot
    /// files do not bounce a cache line between readers), cleared by the
    /// eviction sweep.
    recently_used: AtomicBool,
}

pub(crate) struct FileTable {
    vfs: Arc<dyn Vfs>,
    files: RwLock<BTreeMap<u32, Arc<DataFile>>>,
    open: Mutex<usize>,
    max_open: usize,
}

impl FileTable {
    pub fn new(vfs: Arc<dyn Vfs>, max_open: usize) -> FileTable {
        FileTable {
            vfs,
            files: RwLock::default(),
            open: Mutex::new(0),
            max_open,
        }
    }

    pub fn insert(&self, id: u32, path: PathBuf) {
        let file = Arc::new(DataFile {
            id,
            path,
            handle: Mutex::new(None),
            recently_used: AtomicBool::new(true),
        });
        self.files.write().expect("file table").insert(id, file);
    }

    pub fn contains(&self, id: u32) -> bool {
        self.files.read().expect("file table").contains_key(&id)
    }

    pub fn ids(&self) -> Vec<u32> {
        self.files
            .read()
            .expect("file table")
            .keys()
            .copied()
            .collect()
    }

    /// The read handle of a file, opened if need be; `None` when the file is
    /// not (or no longer) in the table.
    pub fn handle(&self, id: u32) -> Result<Option<Arc<dyn VFile>>> {
        let Some(file) = self.used(id) else {
            return Ok(None);
        };
        let mut slot = file.handle.lock().expect("file handle");
        if let Some(h) = slot.as_ref() {
            return Ok(Some(h.clone()));
        }
        let h = self
            .vfs
            .open(&file.path, OpenMode::Read)
            .map_err(|e| Error::io(&file.path, e))?;
        *slot = Some(h.clone());
        drop(slot);
        let over = {
            let mut open = self.open.lock().expect("open count");
            *open += 1;
            *open > self.max_open
        };
        if over {
            self.evict(id);
        }
        Ok(Some(h))
    }

    /// [`FileTable::handle`] for a read that must not wait: `Err(())`
    /// when the file is not open yet (opening is a system call that may
    /// wait for the device) or its slot is busy; `Ok(None)` when the file
    /// is not in the table.
    #[allow(clippy::result_unit_err)]
    pub fn handle_if_open(&self, id: u32) -> std::result::Result<Option<Arc<dyn VFile>>, ()> {
        let Some(file) = self.used(id) else {
            return Ok(None);
        };
        let slot = file.handle.try_lock().map_err(|_| ())?;
        let h = slot.as_ref().ok_or(())?.clone();
        Ok(Some(h))
    }

    /// A file of the table, marked as used (for the eviction's second
    /// chance).
    fn used(&self, id: u32) -> Option<Arc<DataFile>> {
        let file = self.files.read().expect("file table").get(&id).cloned()?;
        if !file.recently_used.load(Ordering::Relaxed) {
            file.recently_used.store(true, Ordering::Relaxed);
        }
        Some(file)
    }

    /// Closes descriptors not in use until the cache is back within its
    /// bound (`keep` is the one just opened): files not used since the last
    /// sweep first, then the others (second chance).
    fn evict(&self, keep: u32) {
        let candidates: Vec<Arc<DataFile>> = self
            .files
            .read()
            .expect("file table")
            .values()
            .filter(|f| f.id != keep)
            .cloned()
            .collect();
        let (cold, warm): (Vec<_>, Vec<_>) = candidates
            .into_iter()
            .partition(|f| !f.recently_used.swap(false, Ordering::Relaxed));
        for f in cold.into_iter().chain(warm) {
            if *self.open.lock().expect("open count") <= self.max_open {
                break;
            }
            let mut slot = f.handle.lock().expect("file handle");
            // A handle another thread holds is in use; leave it.
            if slot.as_ref().is_some_and(|h| Arc::strong_count(h) == 1) {
                *slot = None;
                *self.open.lock().expect("open count") -= 1;
            }
        }
    }

    /// Takes a file out of the table, waits for in-flight reads, closes its
    /// descriptor and unlinks it (and its hint). Readers that looked the file
    /// up before this will find it gone and retry through the keydir.
    pub fn delete(&self, id: u32, dir: &Path) -> Result<()> {
        let file = self.files.write().expect("file table").remove(&id);
        if let Some(file) = file {
            // Only this function can drop the last table reference; readers
            // hold `Arc<DataFile>` or a handle clone for the length of a read.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let busy = Arc::strong_count(&file) > 1
                    || file
                        .handle
                        .lock()
                        .expect("file handle")
                        .as_ref()
                        .is_some_and(|h| Arc::strong_count(h) > 1);
                if !busy || Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            if file.handle.lock().expect("file handle").take().is_some() {
                *self.open.lock().expect("open count") -= 1;
            }
        }
        let data = data_path(dir, id);
        let hint = hint_path(dir, id);
        for path in [&hint, &data] {
            match self.vfs.remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        Ok(())
    }

    /// Descriptors open now (for the stale-descriptor checks and metrics).
    pub fn open_count(&self) -> usize {
        *self.open.lock().expect("open count")
    }
}
