//! `rill ping`, `rill admin ...`: small HTTP requests to a running node
//! (Riak's riak-admin talks to its node the same way, over its own
//! channel).

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// One HTTP/1.1 request with `Connection: close`.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Result<Reply> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
        format!("cannot reach the node at {addr} (is it running? `rill start`)")
    })?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("malformed answer from the node"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("malformed status line from the node"))?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Ok(Reply { status, body })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(len.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn enc(name: &str) -> String {
    name.bytes()
        .map(|c| {
            if c.is_ascii_alphanumeric() || b"-_.~".contains(&c) {
                (c as char).to_string()
            } else {
                format!("%{c:02X}")
            }
        })
        .collect()
}

/// `rill admin bucket-type create|activate|update|list|status`, with
/// riak-admin's argument forms and answers.
pub fn bucket_type(addr: SocketAddr, args: &[String]) -> Result<()> {
    match args {
        [cmd, name, rest @ ..] if cmd == "create" => {
            let json = rest.first().map(String::as_str).unwrap_or("{\"props\":{}}");
            let v: Value = serde_json::from_str(json).map_err(|_| anyhow!("Cannot create bucket type {name}: invalid json"))?;
            if v.get("props").is_none() {
                bail!("Cannot create bucket type {name}: no props field found in json");
            }
            let r = request(addr, "PUT", &format!("/rill/bucket-types/{}", enc(name)), Some(json))?;
            if r.status == 201 {
                println!("{name} created");
                Ok(())
            } else {
                bail!("Error creating bucket type {name}:\n{}", r.body.trim_end())
            }
        }
        [cmd, name] if cmd == "activate" => {
            let r = request(addr, "POST", &format!("/rill/bucket-types/{}/activate", enc(name)), None)?;
            match r.status {
                204 => {
                    println!("{name} has been activated");
                    Ok(())
                }
                404 => bail!("{name} is not an existing bucket type"),
                _ => bail!("Error activating bucket type {name}:\n{}", r.body.trim_end()),
            }
        }
        [cmd, name, json] if cmd == "update" => {
            serde_json::from_str::<Value>(json).map_err(|_| anyhow!("Cannot update bucket type: {name}: invalid json"))?;
            let r = request(addr, "PUT", &format!("/types/{}/props", enc(name)), Some(json))?;
            if r.status == 204 {
                println!("{name} updated");
                Ok(())
            } else {
                bail!("Error updating bucket type {name}:\n{}", r.body.trim_end())
            }
        }
        [cmd] if cmd == "list" => {
            let r = request(addr, "GET", "/rill/bucket-types", None)?;
            let v: Value = serde_json::from_str(&r.body)?;
            for t in v["types"].as_array().into_iter().flatten() {
                let active = if t["status"] == "active" { "active" } else { "not active" };
                println!("{} ({active})", t["name"].as_str().unwrap_or_default());
            }
            Ok(())
        }
        [cmd, name] if cmd == "status" => {
            let r = request(addr, "GET", &format!("/rill/bucket-types/{}", enc(name)), None)?;
            if r.status == 404 {
                println!("{name} is not an existing bucket type");
                std::process::exit(1);
            }
            let v: Value = serde_json::from_str(&r.body)?;
            match v["status"].as_str() {
                Some("active") => println!("{name} is active\n"),
                _ => println!("{name} has been created and may be activated\n"),
            }
            for (k, val) in v["props"].as_object().into_iter().flatten() {
                println!("{k}: {val}");
            }
            Ok(())
        }
        _ => bail!(
            "usage: rill admin bucket-type create NAME ['{{\"props\":{{...}}}}'] | activate NAME | update NAME JSON | list | status NAME"
        ),
    }
}

/// `rill admin status`: the node's statistics, one per line.
pub fn status(addr: SocketAddr) -> Result<()> {
    let r = request(addr, "GET", "/stats", None)?;
    let v: Value = serde_json::from_str(&r.body).context("the node's /stats is not JSON")?;
    for (k, val) in v.as_object().into_iter().flatten() {
        println!("{k} : {val}");
    }
    Ok(())
}

/// Sends one cluster command to the node and prints its answer; a
/// refused command exits with status 1.
pub fn cluster_op(addr: SocketAddr, command: Value) -> Result<()> {
    let r = request(addr, "POST", "/rill/cluster", Some(&command.to_string()))?;
    if r.status != 200 {
        bail!("{}", r.body.trim_end());
    }
    let v: Value = serde_json::from_str(&r.body).context("the node's answer is not JSON")?;
    let text = v["text"].as_str().unwrap_or_default().trim_end();
    if v["ok"].as_bool() == Some(true) {
        println!("{text}");
        Ok(())
    } else {
        eprintln!("{text}");
        std::process::exit(1);
    }
}

/// `rill admin cluster ...`, with riak-admin's argument forms.
pub fn cluster(addr: SocketAddr, args: &[String]) -> Result<()> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let command = match a.as_slice() {
        ["join", target] => serde_json::json!({"op": "join", "target": target}),
        ["leave"] => serde_json::json!({"op": "leave"}),
        ["leave", node] => serde_json::json!({"op": "leave", "node": node}),
        ["force-remove", node] => serde_json::json!({"op": "force-remove", "node": node}),
        ["replace", node, new] => serde_json::json!({"op": "replace", "node": node, "new": new}),
        ["force-replace", node, new] => {
            serde_json::json!({"op": "force-replace", "node": node, "new": new})
        }
        ["plan"] => serde_json::json!({"op": "plan"}),
        ["commit"] => serde_json::json!({"op": "commit"}),
        ["clear"] => serde_json::json!({"op": "clear"}),
        ["status"] => serde_json::json!({"op": "status"}),
        _ => bail!(
            "usage: rill admin cluster join NODE | leave [NODE] | force-remove NODE | replace NODE NEW | force-replace NODE NEW | plan | commit | clear | status"
        ),
    };
    cluster_op(addr, command)
}

/// `rill admin backend-migrate TO | status`: starts moving the node's
/// data to backend TO (or resumes a stopped move), or shows how far it
/// is; `wait` follows it to the end (exit status 1 if it stops failed).
pub fn backend_migrate(
    addr: SocketAddr,
    target: &str,
    keys_per_second: u64,
    wait: bool,
) -> Result<()> {
    const PATH: &str = "/rill/backend-migration";
    let mut v = if target == "status" {
        let r = request(addr, "GET", PATH, None)?;
        serde_json::from_str(&r.body).context("the node's answer is not JSON")?
    } else {
        let body = serde_json::json!({"to": target, "keys_per_second": keys_per_second});
        let r = request(addr, "POST", PATH, Some(&body.to_string()))?;
        if r.status != 202 {
            bail!("{}", r.body.trim_end());
        }
        let v: Value = serde_json::from_str(&r.body).context("the node's answer is not JSON")?;
        println!(
            "moving this node's data from {} to {}, one partition at a time, while it serves",
            v["from"].as_str().unwrap_or("?"),
            v["to"].as_str().unwrap_or("?")
        );
        v
    };
    let mut shown = String::new();
    loop {
        let line = migration_line(&v);
        if line != shown {
            println!("{line}");
            shown = line;
        }
        match v["state"].as_str() {
            Some("failed") => bail!(
                "the migration stopped: {}",
                v["error"].as_str().unwrap_or("")
            ),
            Some("running") if wait => {}
            _ => return Ok(()),
        }
        std::thread::sleep(Duration::from_secs(1));
        let r = request(addr, "GET", PATH, None)?;
        v = serde_json::from_str(&r.body).context("the node's answer is not JSON")?;
    }
}

fn migration_line(v: &Value) -> String {
    let state = v["state"].as_str().unwrap_or("?");
    if state == "none" {
        return "no backend migration on this node".into();
    }
    let mut line = format!(
        "{state}: {} -> {}, {} of {} partitions moved, {} keys ({} bytes) copied in this run",
        v["from"].as_str().unwrap_or("?"),
        v["to"].as_str().unwrap_or("?"),
        v["partitions_moved"],
        v["partitions"],
        v["keys_copied"],
        v["bytes_copied"],
    );
    if let Some(p) = v["copying"].as_u64() {
        line.push_str(&format!(", copying partition {p}"));
    }
    if let Some(e) = v["error"].as_str() {
        line.push_str(&format!("; error: {e}"));
    }
    line
}

/// `rill admin tictacaae ...`: the node's anti-entropy trees and
/// settings, Riak 3.4's words.
pub fn tictacaae(addr: SocketAddr, args: &[String]) -> Result<()> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let answer = |r: Reply| -> Result<Value> {
        if r.status != 200 {
            bail!("{}", r.body.trim_end());
        }
        serde_json::from_str(&r.body).context("the node's answer is not JSON")
    };
    const SETTINGS: [&str; 5] = [
        "exchangetick",
        "rebuildtick",
        "maxresults",
        "rangeboost",
        "repairloops",
    ];
    match a.as_slice() {
        ["treestatus", rest @ ..] => {
            let v = answer(request(addr, "GET", "/rill/tictacaae", None)?)?;
            if rest == ["--format", "json"] {
                println!("{}", serde_json::to_string_pretty(&v["trees"])?);
                return Ok(());
            }
            if !rest.is_empty() && rest != ["--format", "table"] {
                bail!("usage: rill admin tictacaae treestatus [--format table|json]");
            }
            println!("{:<10} {:<11} {:<24} {:>5}", "Partition", "Status", "Last Rebuild Date", "Trees");
            for t in v["trees"].as_array().into_iter().flatten() {
                let built = t["built_at"].as_str().unwrap_or("never");
                println!(
                    "{:<10} {:<11} {:<24} {:>5}",
                    t["partition"], t["status"].as_str().unwrap_or(""), built, t["trees"]
                );
            }
            Ok(())
        }
        ["rebuild-now"] => {
            let body = serde_json::json!({"op": "rebuild-now"}).to_string();
            let v = answer(request(addr, "POST", "/rill/tictacaae", Some(&body))?)?;
            println!("{}", v["text"].as_str().unwrap_or_default());
            Ok(())
        }
        [name] if SETTINGS.contains(name) => {
            let v = answer(request(addr, "GET", "/rill/tictacaae", None)?)?;
            println!(
                "tictacaae_{name} on {} is: {}",
                v["node"].as_str().unwrap_or_default(),
                v["settings"][format!("tictacaae_{name}")]
            );
            Ok(())
        }
        [name, value] if SETTINGS.contains(name) => {
            let value: u64 = value
                .parse()
                .with_context(|| format!("tictacaae_{name} takes a whole number, not {value:?}"))?;
            let body = serde_json::json!({"op": "set", "name": name, "value": value}).to_string();
            let v = answer(request(addr, "POST", "/rill/tictacaae", Some(&body))?)?;
            println!("{}", v["text"].as_str().unwrap_or_default());
            Ok(())
        }
        _ => bail!("usage: rill admin tictacaae treestatus [--format table|json] | rebuild-now | exchangetick|rebuildtick|maxresults|rangeboost|repairloops [VALUE]"),
    }
}
