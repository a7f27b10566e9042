//! `rill start`, `stop` and `ping` as an operator runs them, on the real
//! binary: they agree with each other, a crash leaves no pid file that
//! blocks the next start, a node that dies during start is reported at
//! once, and the log file is plain text.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ok={} stdout={:?} stderr={:?}",
            self.ok, self.stdout, self.stderr
        )
    }
}

/// `rill -c <conf> <cmd>`, with NO_COLOR unset so the log's colour
/// choice depends on the terminal test alone.
fn rill(conf: &Path, cmd: &str) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_rill"))
        .arg("-c")
        .arg(conf)
        .arg(cmd)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("data").join("rill.log")
}

fn pid_path(dir: &Path) -> PathBuf {
    dir.join("data").join("rill.pid")
}

/// Runs `rill stop` when dropped, so a failed test leaves no node behind
/// (`rill stop` signals only the process holding the pid file's lock).
struct StopOnDrop(PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = rill(&self.0, "stop");
    }
}

/// `rill start` in `dir` on fresh loopback ports; started again on other
/// ports if one was taken meanwhile. Returns the config and the output.
fn start(dir: &Path) -> (PathBuf, Out, StopOnDrop) {
    for _ in 0..4 {
        let (pb, http) = common::free_ports();
        let conf = common::write_config(dir, "", pb, http);
        let log_len = std::fs::metadata(log_path(dir)).map_or(0, |m| m.len() as usize);
        let out = rill(&conf, "start");
        if out.ok {
            return (conf.clone(), out, StopOnDrop(conf));
        }
        let log = std::fs::read(log_path(dir)).unwrap_or_default();
        if !String::from_utf8_lossy(&log[log_len.min(log.len())..]).contains("cannot listen") {
            panic!("rill start failed: {out}");
        }
    }
    panic!("rill start found its ports taken four times");
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_pong(conf: &Path) {
    let out = rill(conf, "ping");
    assert!(out.ok && out.stdout.trim() == "pong", "{out}");
}

fn assert_not_running(conf: &Path, cmd: &str) {
    let out = rill(conf, cmd);
    assert!(
        !out.ok && out.stderr.contains("the node is not running"),
        "{cmd}: {out}"
    );
}

#[test]
fn start_ping_stop_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, out, _stop) = start(dir.path());
    assert!(out.stdout.contains("rill started"), "{out}");
    assert_pong(&conf);

    let again = rill(&conf, "start");
    assert!(
        !again.ok && again.stderr.contains("a node is already running (pid"),
        "{again}"
    );
    // A console node on the same data is refused before it binds a port.
    let console = rill(&conf, "console");
    assert!(
        !console.ok && console.stderr.contains("a node is already running on"),
        "{console}"
    );
    assert_pong(&conf);

    let stopped = rill(&conf, "stop");
    assert!(
        stopped.ok && stopped.stdout.contains("rill stopped"),
        "{stopped}"
    );
    assert_not_running(&conf, "ping");
    assert_not_running(&conf, "stop");
}

#[test]
fn start_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, _, _stop) = start(dir.path());
    let pid: i32 = std::fs::read_to_string(pid_path(dir.path()))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill has no memory effects; `pid` is the node we started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    // kill returns before the process is gone; the node may also stay a
    // zombie for a while, which must not count as running.
    wait_until(
        "the killed node to be gone",
        Duration::from_secs(30),
        || {
            rill(&conf, "ping")
                .stderr
                .contains("the node is not running")
        },
    );
    let out = rill(&conf, "start");
    assert!(out.ok, "{out}");
    assert!(
        out.stdout.contains(&format!(
            "ignoring a stale pid file (pid {pid} is not running)"
        )),
        "{out}"
    );
    assert_pong(&conf);
    let stopped = rill(&conf, "stop");
    assert!(stopped.ok, "{stopped}");
    assert_not_running(&conf, "ping");
}

#[test]
fn a_pid_file_naming_a_live_unrelated_process_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let me = std::process::id();
    std::fs::write(pid_path(dir.path()), format!("{me}\n")).unwrap();
    let (conf, out, _stop) = start(dir.path());
    assert!(
        out.stdout.contains(&format!(
            "ignoring a stale pid file (pid {me} is not running)"
        )),
        "{out}"
    );
    assert_pong(&conf);
    let written = std::fs::read_to_string(pid_path(dir.path())).unwrap();
    assert_ne!(written.trim(), me.to_string(), "the node wrote its own pid");
    let stopped = rill(&conf, "stop");
    assert!(stopped.ok, "{stopped}");
}

#[test]
fn the_log_file_has_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, _, _stop) = start(dir.path());
    let stopped = rill(&conf, "stop");
    assert!(stopped.ok, "{stopped}");
    let log = std::fs::read(log_path(dir.path())).unwrap();
    let text = String::from_utf8_lossy(&log);
    assert!(
        text.contains("node ready") && text.contains("node stopped"),
        "{text}"
    );
    assert!(!log.contains(&0x1b), "ANSI escape in the log: {text:?}");
}

#[test]
fn a_node_that_dies_during_start_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let (http, _) = common::free_ports();
    let conf = common::write_config(dir.path(), "", held.local_addr().unwrap().port(), http);
    let _stop = StopOnDrop(conf.clone());
    let out = rill(&conf, "start");
    assert!(!out.ok, "{out}");
    assert!(
        out.stderr.contains("the node exited during start")
            && out
                .stderr
                .contains(&log_path(dir.path()).display().to_string()),
        "{out}"
    );
    let log = std::fs::read_to_string(log_path(dir.path())).unwrap();
    assert!(log.contains("cannot listen for PB"), "{log}");
    assert_not_running(&conf, "ping");
    assert_not_running(&conf, "stop");
    drop(held);
}
