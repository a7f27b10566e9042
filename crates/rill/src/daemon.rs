//! Is a node running on this data directory? The pid file `<data>/rill.pid`
//! answers, by a lock rather than by its contents.
//!
//! Invariants:
//! - The node process (`rill console`) takes a POSIX write lock on the whole
//!   pid file ([`lock`]) before it binds a port or touches the data, and
//!   holds it for its whole life. The kernel drops the lock when the
//!   process exits, however it exits (`kill -9` included), before it
//!   becomes a zombie; so the lock is exact where `kill(pid, 0)` is not
//!   (that is true for zombies and for pids reused by other processes).
//! - A node is running iff someone holds that lock ([`status`]); the pid in
//!   the file is only informative. A file nobody holds a lock on is stale
//!   and ignored, whatever pid it names.
//! - The node writes its pid in place (at offset 0, then sets the length):
//!   no truncation first, so on a full disk the block the file already has
//!   is reused.
//! - The node process never opens the pid file a second time: closing any
//!   descriptor of a file drops the process's POSIX locks on it. Only other
//!   processes (`rill start`, `stop`, `ping`) call [`status`].

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, IntoRawFd};
use std::path::Path;

/// What the pid file says about its data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Nobody holds the lock. `stale_pid` is the pid a left-over file names
    /// (a node that crashed); that process, if any, is not a node here.
    NotRunning { stale_pid: Option<i32> },
    /// A node holds the lock.
    Running { pid: i32 },
}

/// Why [`lock`] failed.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the lock: a node is running.
    Held {
        pid: Option<i32>,
    },
    Io(io::Error),
}

/// Takes the pid file's lock for this process and writes our pid into it.
/// The descriptor is never closed, so the lock lasts until the process
/// exits: never while the node's stores are still open.
pub fn lock(pid_file: &Path) -> Result<(), LockError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_CLOEXEC)
        .open(pid_file)
        .map_err(LockError::Io)?;
    let mut fl = whole_file(libc::F_WRLCK);
    // SAFETY: fcntl on a descriptor we own, with a valid flock struct.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &mut fl) } != 0 {
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) {
            return Err(LockError::Io(e));
        }
        let pid = holder(&file).ok().flatten().or_else(|| recorded_pid(&file));
        return Err(LockError::Held { pid });
    }
    let text = format!("{}\n", std::process::id());
    file.write_all_at(text.as_bytes(), 0)
        .and_then(|()| file.set_len(text.len() as u64))
        .map_err(LockError::Io)?;
    let _held_until_exit = file.into_raw_fd();
    Ok(())
}

/// Whether a node holds the lock on `pid_file`. A missing file means no
/// node. Never call this in the node process itself (see the module doc).
pub fn status(pid_file: &Path) -> io::Result<Status> {
    let file = match File::open(pid_file) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Status::NotRunning { stale_pid: None })
        }
        Err(e) => return Err(e),
    };
    match holder(&file)? {
        None => Ok(Status::NotRunning {
            stale_pid: recorded_pid(&file),
        }),
        Some(pid) => Ok(Status::Running { pid }),
    }
}

/// The pid of the process holding a lock that conflicts with a write lock
/// on the whole file, `None` if there is none. A holder the kernel cannot
/// name to us (another pid namespace) is named by the file instead.
fn holder(file: &File) -> io::Result<Option<i32>> {
    let mut fl = whole_file(libc::F_WRLCK);
    // SAFETY: fcntl on a descriptor we own, with a valid flock struct.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if fl.l_type == libc::F_UNLCK as libc::c_short {
        return Ok(None);
    }
    if fl.l_pid > 0 {
        return Ok(Some(fl.l_pid));
    }
    recorded_pid(file).map(Some).ok_or_else(|| {
        io::Error::other("the pid file is locked by a process whose pid is not known here")
    })
}

/// The pid written in the file, if it holds one.
fn recorded_pid(file: &File) -> Option<i32> {
    let mut buf = [0u8; 32];
    let n = file.read_at(&mut buf, 0).ok()?;
    let pid: i32 = std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()?;
    (pid > 0).then_some(pid)
}

fn whole_file(kind: libc::c_int) -> libc::flock {
    // SAFETY: flock is plain data; all zeroes is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 0; // to the end of the file, however long it grows
    fl
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_stale_files_are_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rill.pid");
        assert_eq!(status(&p).unwrap(), Status::NotRunning { stale_pid: None });
        std::fs::write(&p, format!("{}\n", std::process::id())).unwrap();
        assert_eq!(
            status(&p).unwrap(),
            Status::NotRunning {
                stale_pid: Some(std::process::id() as i32)
            }
        );
    }

    #[test]
    fn lock_writes_the_pid_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rill.pid");
        std::fs::write(&p, "1234567890\n").unwrap();
        lock(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            format!("{}\n", std::process::id())
        );
    }
}
