//! CPU priority of the transport's background threads.

/// Lowers the calling thread's CPU priority (nice +10: when both want the
/// CPU, a normal thread gets about ten times its share; raising a nice
/// value needs no privilege).
pub(crate) fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on this thread's own id; no memory involved.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}
