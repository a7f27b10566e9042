//! The operator's cluster commands (riak-admin's words and answers):
//! `cluster join` on the joining node; `cluster leave | force-remove |
//! replace | force-replace | plan | commit | clear` at the claimant, where
//! staged changes live (a node that is not the claimant forwards them);
//! `member-status`, `ring-status`, `transfers`, `down` from this node's
//! own view.

use crate::msg::PeerMsg;
use crate::runtime::Peer;
use rill_cluster::{codec, render, Change, StageError, Status};
use rill_transport::Lane;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long an operator's command waits for another node.
const ADMIN_WAIT: Duration = Duration::from_secs(10);

/// An answer for the operator: success, and the text to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminAnswer {
    pub ok: bool,
    pub text: String,
}

impl AdminAnswer {
    pub(crate) fn ok(text: impl Into<String>) -> AdminAnswer {
        AdminAnswer {
            ok: true,
            text: text.into(),
        }
    }
    pub(crate) fn failed(text: impl Into<String>) -> AdminAnswer {
        AdminAnswer {
            ok: false,
            text: text.into(),
        }
    }
    fn to_json(&self) -> String {
        json!({"ok": self.ok, "text": self.text}).to_string()
    }
    fn from_json(s: &str) -> AdminAnswer {
        let v: Value = serde_json::from_str(s).unwrap_or(Value::Null);
        AdminAnswer {
            ok: v["ok"].as_bool().unwrap_or(false),
            text: v["text"]
                .as_str()
                .unwrap_or("a malformed answer from the claimant")
                .to_string(),
        }
    }
}

fn staged_error(e: StageError) -> AdminAnswer {
    AdminAnswer::failed(format!("Failed: {e}"))
}

/// Where `cluster join` finds the cluster: `host:port` of a member's
/// cluster listener, or a node name `name@host` on the default port.
pub fn join_address(target: &str, default_port: u16) -> Result<SocketAddr, crate::BadJoinTarget> {
    let host = target.rsplit_once('@').map_or(target, |(_, h)| h);
    if let Ok(a) = host.parse::<SocketAddr>() {
        return Ok(a);
    }
    format!("{host}:{default_port}")
        .parse()
        .map_err(|_| crate::BadJoinTarget {
            target: target.to_string(),
        })
}

impl Peer {
    /// An operator's command, from `rill admin` through the HTTP API.
    /// `request` is JSON: `{"op": ..., "node": ..., "new": ..., "target": ...}`.
    pub async fn admin(self: &Arc<Self>, request: &str) -> AdminAnswer {
        let mut v: Value = match serde_json::from_str(request) {
            Ok(v) => v,
            Err(e) => return AdminAnswer::failed(format!("not a JSON command: {e}")),
        };
        // `cluster leave` without a node: this node leaves.
        if v["op"] == "leave" && v["node"].as_str().is_none_or(str::is_empty) {
            v["node"] = Value::String(self.me.clone());
        }
        let request = &v.to_string();
        match v["op"].as_str().unwrap_or_default() {
            "join" => self.join(v["target"].as_str().unwrap_or_default()).await,
            "repair-partition" | "repair-node" => self.repair_admin(&v),
            "member-status" | "status" | "ring-status" | "transfers" | "down"
            | "transfer-limit" => AdminAnswer::from_json(&self.admin_here(request)),
            _ => {
                let claimant = self.lock().state.claimant().to_string();
                if claimant == self.me {
                    return AdminAnswer::from_json(&self.admin_here(request));
                }
                match self.ask_claimant(&claimant, request).await {
                    Ok(a) => a,
                    Err(e) => AdminAnswer::failed(e),
                }
            }
        }
    }

    /// Sends the message `make(id)` to `to` and waits, within
    /// [`ADMIN_WAIT`], for the answer carrying the same id.
    async fn ask(&self, to: SocketAddr, make: impl FnOnce(u64) -> PeerMsg) -> Option<PeerMsg> {
        let id = self.id();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waiters = || self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        waiters().insert(id, tx);
        self.send_addr(to, Lane::Control, make(id));
        let r = tokio::time::timeout(ADMIN_WAIT, rx).await;
        waiters().remove(&id);
        r.ok().and_then(Result::ok)
    }

    async fn ask_claimant(&self, claimant: &str, request: &str) -> Result<AdminAnswer, String> {
        let Some(addr) = self.lock().addrs.get(claimant).copied() else {
            return Err(format!(
                "Failed: the claimant {claimant} has no known address yet"
            ));
        };
        let json = request.to_string();
        match self.ask(addr, |id| PeerMsg::AdminRequest { id, json }).await {
            Some(PeerMsg::AdminReply { json, .. }) => Ok(AdminAnswer::from_json(&json)),
            _ => Err(format!(
                "Failed: the claimant {claimant} did not answer; is it up? ('rill admin member-status')"
            )),
        }
    }

    /// `cluster join`: take the cluster state of the member at `target`
    /// and become joining in it.
    async fn join(self: &Arc<Self>, target: &str) -> AdminAnswer {
        let addr = match join_address(target, self.cfg.listen.port()) {
            Ok(a) => a,
            Err(e) => return AdminAnswer::failed(e.to_string()),
        };
        {
            let inner = self.lock();
            let members = inner.state.with_status(Status::is_member);
            if members != [self.me.clone()] {
                return AdminAnswer::failed("Failed: This node is already a member of a cluster");
            }
        }
        let me = self.advertised().to_string();
        let r = self.ask(addr, |id| PeerMsg::JoinAsk { id, addr: me }).await;
        let Some(PeerMsg::JoinState { state, .. }) = r else {
            return AdminAnswer::failed(format!("Failed: {target} did not answer at {addr}"));
        };
        let mut theirs = match codec::decode(&state) {
            Ok(s) => s,
            Err(e) => return AdminAnswer::failed(format!("Failed: the cluster's state: {e}")),
        };
        if theirs.ring_size() != self.node.ring_size() {
            return AdminAnswer::failed(format!(
                "Failed: {target} has a ring of {} partitions, this node {}; ring_size must match",
                theirs.ring_size(),
                self.node.ring_size()
            ));
        }
        if theirs
            .status(&self.me)
            .is_some_and(|s| s != Status::Invalid)
        {
            return AdminAnswer::failed(format!(
                "Failed: a node named {} is already a member of that cluster",
                self.me
            ));
        }
        let member = theirs.with_status(Status::is_member).into_iter().next();
        if let Err(e) = theirs.set_status(&self.me, &self.me, Status::Joining) {
            return AdminAnswer::failed(format!("Failed: {e}"));
        }
        theirs.set_address(&self.me, &self.advertised().to_string());
        let mut inner = self.lock();
        inner.state = theirs;
        inner.staged = Default::default();
        inner.plan = None;
        if let Err(e) = self.changed(&mut inner) {
            return AdminAnswer::failed(format!("Failed: {e}"));
        }
        // Tell the member asked at once (the periodic gossip would too).
        if let Some(m) = member {
            inner.addrs.entry(m.clone()).or_insert(addr);
            self.send_gossip(&inner, &m);
        }
        AdminAnswer::ok(format!(
            "Success: staged join request for '{}' to '{}'",
            self.me, target
        ))
    }

    /// A command answered by this node (as the claimant for staged
    /// changes), as JSON.
    pub(crate) fn admin_here(&self, request: &str) -> String {
        let v: Value = serde_json::from_str(request).unwrap_or(Value::Null);
        let node = v["node"].as_str().unwrap_or_default().to_string();
        let new = v["new"].as_str().unwrap_or_default().to_string();
        let target_n_val = self.cfg.target_n_val;
        let mut inner = self.lock();
        let inner = &mut *inner;
        let stage = |inner: &mut crate::runtime::Inner, change: Change, ok: String| {
            let state = inner.state.clone();
            match inner.staged.stage(&state, &node, change) {
                Ok(()) => AdminAnswer::ok(ok),
                Err(e) => staged_error(e),
            }
        };
        let answer = match v["op"].as_str().unwrap_or_default() {
            "leave" => stage(
                inner,
                Change::Leave,
                format!("Success: staged leave request for '{node}'"),
            ),
            "force-remove" => stage(
                inner,
                Change::Remove,
                format!("Success: staged remove request for '{node}'"),
            ),
            "replace" => stage(
                inner,
                Change::Replace(new.clone()),
                format!("Success: staged replacement of '{node}' with '{new}'"),
            ),
            "force-replace" => stage(
                inner,
                Change::ForceReplace(new.clone()),
                format!("Success: staged forced replacement of '{node}' with '{new}'"),
            ),
            "plan" => match inner.staged.plan(
                &inner.state,
                &self.me,
                target_n_val,
                &self.claimant_context(inner),
            ) {
                Ok(plan) => {
                    let text = render::plan(&plan, target_n_val);
                    inner.plan = Some(plan);
                    AdminAnswer::ok(text)
                }
                Err(e) => staged_error(e),
            },
            "commit" => {
                let plan = inner.plan.clone();
                let cx = self.claimant_context(inner);
                match inner.staged.commit(
                    &mut inner.state,
                    &self.me,
                    plan.as_ref(),
                    target_n_val,
                    &cx,
                ) {
                    Ok(_) => {
                        inner.plan = None;
                        match self.changed(inner) {
                            Ok(()) => AdminAnswer::ok("Cluster changes committed"),
                            Err(e) => AdminAnswer::failed(format!("Failed: {e}")),
                        }
                    }
                    Err(e) => staged_error(e),
                }
            }
            "clear" => {
                inner.staged.clear(&mut inner.state, &self.me);
                inner.plan = None;
                match self.changed(inner) {
                    Ok(()) => AdminAnswer::ok("Cleared staged cluster changes"),
                    Err(e) => AdminAnswer::failed(format!("Failed: {e}")),
                }
            }
            "member-status" | "status" => AdminAnswer::ok(render::member_status(&inner.state)),
            "ring-status" => AdminAnswer::ok(self.ring_status(inner)),
            "transfers" => {
                let mut text = transfers(&inner.state);
                let active = self.active_transfers();
                if !active.is_empty() {
                    text.push_str("\nActive transfers:\n");
                    text.push_str(&active);
                }
                AdminAnswer::ok(text)
            }
            "transfer-limit" => match v["limit"].as_u64() {
                Some(n) => {
                    self.set_transfer_limit(n as usize);
                    AdminAnswer::ok(format!("Set transfer limit for '{}' to {n}", self.me))
                }
                None => AdminAnswer::failed("usage: rill admin transfer-limit LIMIT"),
            },
            "down" => {
                let now = self.now();
                let liveness = inner.detector.liveness(&node, now);
                if inner.state.status(&node).is_none() {
                    AdminAnswer::failed(format!("Failed: {node:?} is not a member of the cluster."))
                } else if node == self.me || liveness != crate::detector::Liveness::Unreachable {
                    AdminAnswer::failed(format!("Failed: {node:?} is up"))
                } else {
                    match inner.state.set_status(&self.me, &node, Status::Down) {
                        Ok(()) => match self.changed(inner) {
                            Ok(()) => AdminAnswer::ok(format!("Success: {node:?} marked as down")),
                            Err(e) => AdminAnswer::failed(format!("Failed: {e}")),
                        },
                        Err(e) => AdminAnswer::failed(format!("Failed: {e}")),
                    }
                }
            }
            other => AdminAnswer::failed(format!("unknown cluster command {other:?}")),
        };
        answer.to_json()
    }

    fn ring_status(&self, inner: &crate::runtime::Inner) -> String {
        let s = &inner.state;
        let now = self.now();
        let mut out = String::new();
        out.push_str(
            "================================== Claimant ===================================\n",
        );
        out.push_str(&format!("Claimant:  '{}'\n", s.claimant()));
        let status = s
            .status(s.claimant())
            .map_or("unknown".to_string(), |st| st.to_string());
        let reach = if s.claimant() == self.me
            || inner.detector.liveness(s.claimant(), now) != crate::detector::Liveness::Unreachable
        {
            "up"
        } else {
            "down"
        };
        out.push_str(&format!("Status:     {reach}\n"));
        out.push_str(&format!("Ring Ready: {}\n", s.ring_ready()));
        out.push_str(&format!("Member status of the claimant: {status}\n\n"));
        out.push_str(
            "============================== Ownership Handoff ==============================\n",
        );
        if s.ring().next.is_empty() {
            out.push_str("No pending changes.\n\n");
        } else {
            for t in &s.ring().next {
                let done = if s.is_done(t) { "done" } else { "awaiting" };
                out.push_str(&format!(
                    "partition {:>5}: {} -> {} ({done})\n",
                    t.partition, t.from, t.to
                ));
            }
            out.push('\n');
        }
        out.push_str(
            "============================== Unreachable Nodes ==============================\n",
        );
        let unreachable: Vec<String> = s
            .with_status(Status::is_member)
            .into_iter()
            .filter(|n| {
                n != &self.me
                    && inner.detector.liveness(n, now) == crate::detector::Liveness::Unreachable
            })
            .collect();
        if unreachable.is_empty() {
            out.push_str("All nodes are up and reachable\n");
        } else {
            out.push_str("The following nodes are unreachable: ");
            out.push_str(&format!("{unreachable:?}\n"));
        }
        out
    }
}

/// `transfers`: the ownership transfers the ring plans.
fn transfers(s: &rill_cluster::ClusterState) -> String {
    let pending: Vec<_> = s.ring().next.iter().filter(|t| !s.is_done(t)).collect();
    if pending.is_empty() {
        return "No transfers active\n".into();
    }
    let mut out = String::from("Pending ownership transfers:\n");
    for t in pending {
        out.push_str(&format!(
            "  partition {} from '{}' to '{}'\n",
            t.partition, t.from, t.to
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_targets_are_addresses_or_node_names() {
        let a: SocketAddr = "127.0.0.1:11019".parse().unwrap();
        assert_eq!(join_address("127.0.0.1:11019", 8099), Ok(a));
        assert_eq!(join_address("dev1@127.0.0.1:11019", 8099), Ok(a));
        assert_eq!(
            join_address("riak@127.0.0.1", 8099),
            Ok("127.0.0.1:8099".parse().unwrap())
        );
        let e = join_address("riak@nowhere", 8099).unwrap_err();
        assert!(e.to_string().contains("host:port"), "{e}");
    }
}
