//! `rill planing` through the real binary.

use std::process::Command;

fn rill(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rill"))
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_papers_node_planes_with_one_gigabyte_files_at_v_016() {
    let (code, out) = rill(&[
        "planing",
        "--capacity",
        // The paper's 100 GB, in bytes (GB is 2^30 as in riak.conf).
        "100000000000",
        "--vnodes",
        "64",
        "--live-share",
        "0.16",
    ]);
    assert_eq!(code, 0, "{out}");
    // (100 GB / 64) * (0.8 - 0.16) = 1,000,000,000 bytes
    assert!(out.contains("(1000000000 bytes)"), "{out}");
}

#[test]
fn a_configuration_that_cannot_plane_says_so() {
    let (code, out) = rill(&["planing", "--capacity", "8GiB", "--live-share", "0.9"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cannot plane"), "{out}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let (code, out) = rill(&["planing", "--capacity", "lots", "--live-share", "0.5"]);
    assert_ne!(code, 0);
    assert!(out.contains("expected a size"), "{out}");
}
