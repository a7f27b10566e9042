//! The simulated disk's file handles, locks and its [`Vfs`] face.

use super::{err, DirNode, DirOp, Disk, FileNode, Node, SimVfs, DIRECT_ALIGN, ROOT};
use crate::vfs::{OpenMode, VFile, Vfs};
use std::any::Any;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

struct SimFile {
    disk: Arc<Mutex<Disk>>,
    boot: u64,
    ino: u64,
    writable: bool,
    direct: bool,
}

impl SimFile {
    fn disk(&self) -> io::Result<MutexGuard<'_, Disk>> {
        let d = self.disk.lock().expect("simulated disk");
        d.check(self.boot)?;
        Ok(d)
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut d = self.disk.lock().expect("simulated disk");
        if d.boot == self.boot {
            if let Some(n) = d.handles.get_mut(&self.ino) {
                *n = n.saturating_sub(1);
            }
            d.free_if_unused(self.ino);
        }
    }
}

impl VFile for SimFile {
    /// The simulated disk is memory: nothing waits.
    fn read_at_nowait(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.read_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut d = self.disk()?;
        let data = &d.file(self.ino).live;
        let from = (offset as usize).min(data.len());
        let n = buf.len().min(data.len() - from);
        buf[..n].copy_from_slice(&data[from..from + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if !self.writable {
            return Err(err(libc::EBADF));
        }
        if self.direct
            && (!offset.is_multiple_of(DIRECT_ALIGN)
                || !(buf.len() as u64).is_multiple_of(DIRECT_ALIGN))
        {
            return Err(err(libc::EINVAL));
        }
        let mut d = self.disk()?;
        d.change(self.boot)?;
        let end = offset as usize + buf.len();
        let mut n = buf.len();
        if let Some(cap) = d.capacity_bytes {
            let grows = end.saturating_sub(d.file(self.ino).live.len()) as u64;
            let free = cap.saturating_sub(d.used_bytes());
            if grows > free {
                n -= (grows - free) as usize;
                if n == 0 || self.direct {
                    return Err(err(libc::ENOSPC));
                }
            }
        }
        let f = d.file(self.ino);
        let at = offset as usize;
        if f.live.len() < at + n {
            f.live.resize(at + n, 0);
        }
        f.live[at..at + n].copy_from_slice(&buf[..n]);
        Ok(n)
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut d = self.disk()?;
        d.change(self.boot)?;
        if let Some(errno) = d.sync_errno {
            return Err(err(errno));
        }
        let f = d.file(self.ino);
        f.durable = f.live.clone();
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if !self.writable {
            return Err(err(libc::EINVAL));
        }
        let mut d = self.disk()?;
        d.change(self.boot)?;
        let f = d.file(self.ino);
        f.live.resize(len as usize, 0);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        let mut d = self.disk()?;
        Ok(d.file(self.ino).live.len() as u64)
    }
}

/// A directory lock of the simulated disk; a crash releases it.
struct SimLock {
    disk: Arc<Mutex<Disk>>,
    boot: u64,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut d = self.disk.lock().expect("simulated disk");
        if d.boot == self.boot {
            d.locks.remove(&self.path);
        }
    }
}

impl Vfs for SimVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VFile>> {
        let mut d = self.disk();
        d.check(self.boot)?;
        let ino = match mode {
            OpenMode::Read | OpenMode::ReadWrite => {
                let ino = d.lookup(path)?;
                if !matches!(d.nodes.get(&ino), Some(Node::File(_))) {
                    return Err(err(libc::EISDIR));
                }
                ino
            }
            OpenMode::CreateNew | OpenMode::CreateNewDirect => {
                d.change(self.boot)?;
                let (parent, name) = d.parent_of(path)?;
                if d.dir(parent)?.live.contains_key(&name) {
                    return Err(err(libc::EEXIST));
                }
                let ino = d.new_node(Node::File(FileNode::default()));
                d.link(parent, name, ino)?;
                ino
            }
        };
        *d.handles.entry(ino).or_default() += 1;
        Ok(Arc::new(SimFile {
            disk: self.disk.clone(),
            boot: self.boot,
            ino,
            writable: mode != OpenMode::Read,
            direct: mode == OpenMode::CreateNewDirect,
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut d = self.disk();
        d.change(self.boot)?;
        let (parent, name) = d.parent_of(path)?;
        let dir = d.dir(parent)?;
        let ino = *dir.live.get(&name).ok_or_else(|| err(libc::ENOENT))?;
        dir.live.remove(&name);
        dir.pending.push(DirOp::Unlink(name));
        d.unref_link(ino);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut d = self.disk();
        d.change(self.boot)?;
        let (src, from_name) = d.parent_of(from)?;
        let (dst, to_name) = d.parent_of(to)?;
        if src != dst {
            // The engine renames within one directory only.
            return Err(err(libc::EXDEV));
        }
        let dir = d.dir(src)?;
        let ino = *dir.live.get(&from_name).ok_or_else(|| err(libc::ENOENT))?;
        dir.live.remove(&from_name);
        let replaced = dir.live.insert(to_name.clone(), ino);
        dir.pending.push(DirOp::Rename(from_name, to_name, ino));
        if let Some(old) = replaced {
            d.unref_link(old);
        }
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut d = self.disk();
        d.change(self.boot)?;
        let mut ino = ROOT;
        for c in path.components() {
            let Component::Normal(name) = c else { continue };
            let next = d.dir(ino)?.live.get(name).copied();
            ino = match next {
                Some(child) => {
                    d.dir(child)?;
                    child
                }
                None => {
                    let child = d.new_node(Node::Dir(DirNode::default()));
                    d.link(ino, name.to_os_string(), child)?;
                    child
                }
            };
        }
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut d = self.disk();
        d.change(self.boot)?;
        let ino = d.lookup(path)?;
        if !d.dir(ino)?.live.is_empty() {
            return Err(err(libc::ENOTEMPTY));
        }
        let (parent, name) = d.parent_of(path)?;
        let dir = d.dir(parent)?;
        dir.live.remove(&name);
        dir.pending.push(DirOp::Unlink(name));
        d.unref_link(ino);
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut d = self.disk();
        d.check(self.boot)?;
        let ino = d.lookup(path)?;
        Ok(d.dir(ino)?.live.keys().map(|n| path.join(n)).collect())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut d = self.disk();
        d.change(self.boot)?;
        if let Some(errno) = d.sync_errno {
            return Err(err(errno));
        }
        let ino = d.lookup(dir)?;
        let node = d.dir(ino)?;
        node.durable = node.live.clone();
        node.pending.clear();
        d.collect_garbage();
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let mut d = self.disk();
        d.boot == self.boot && d.lookup(path).is_ok()
    }

    fn lock(&self, dir: &Path) -> io::Result<Box<dyn Any + Send + Sync>> {
        let mut d = self.disk();
        d.check(self.boot)?;
        d.lookup(dir)?;
        if !d.locks.insert(dir.to_path_buf()) {
            return Err(err(libc::EWOULDBLOCK));
        }
        Ok(Box::new(SimLock {
            disk: self.disk.clone(),
            boot: self.boot,
            path: dir.to_path_buf(),
        }))
    }
}
