//! The operator's views, in riak-admin's layout (79 columns), so Riak
//! operators read them at a glance: `member-status` and `cluster plan`.

use crate::member::Status;
use crate::staged::{Plan, Transition};
use crate::state::ClusterState;
use std::collections::BTreeMap;
use std::fmt::Write;

const WIDTH: usize = 79;

/// `==== title ====` across 79 columns, the extra `=` on the right.
fn header(title: &str) -> String {
    let title = format!(" {title} ");
    let left = (WIDTH - title.len()) / 2;
    let right = WIDTH - title.len() - left;
    format!("{}{title}{}\n", "=".repeat(left), "=".repeat(right))
}

fn rule(c: char) -> String {
    format!("{}\n", c.to_string().repeat(WIDTH))
}

fn share(owners: &[String], node: &str) -> f64 {
    if owners.is_empty() {
        return 0.0;
    }
    100.0 * owners.iter().filter(|o| *o == node).count() as f64 / owners.len() as f64
}

/// The membership table of `statuses`, with each node's share of `ring`
/// and, while partitions move, of `pending` (the ring once they have).
fn membership(
    statuses: &BTreeMap<String, Status>,
    ring: &[String],
    pending: Option<&[String]>,
) -> String {
    let mut out = header("Membership");
    out.push_str("Status     Ring    Pending    Node\n");
    out.push_str(&rule('-'));
    let mut rows: Vec<(&String, &Status)> = statuses
        .iter()
        .filter(|(_, s)| **s != Status::Invalid)
        .collect();
    rows.sort_by_key(|(n, s)| (**s, (*n).clone()));
    for (n, s) in &rows {
        let now = share(ring, n);
        match pending {
            Some(p) => {
                let _ = writeln!(
                    out,
                    "{:<8}  {now:>5.1}%    {:>5.1}%    '{n}'",
                    s.as_str(),
                    share(p, n)
                );
            }
            None => {
                let _ = writeln!(out, "{:<8}  {now:>5.1}%      --      '{n}'", s.as_str());
            }
        }
    }
    out.push_str(&rule('-'));
    let count = |s: Status| rows.iter().filter(|(_, x)| **x == s).count();
    let _ = writeln!(
        out,
        "Valid:{} / Leaving:{} / Exiting:{} / Joining:{} / Down:{}",
        count(Status::Valid),
        count(Status::Leaving),
        count(Status::Exiting),
        count(Status::Joining),
        count(Status::Down)
    );
    out
}

/// `rill admin member-status`.
pub fn member_status(state: &ClusterState) -> String {
    let statuses: BTreeMap<String, Status> = state
        .members()
        .iter()
        .map(|(n, m)| (n.clone(), m.status))
        .collect();
    let next = &state.ring().next;
    if next.is_empty() {
        return membership(&statuses, state.owners(), None);
    }
    let mut future = state.owners().to_vec();
    for t in next {
        future[t.partition as usize] = t.to.clone();
    }
    membership(&statuses, state.owners(), Some(&future))
}

fn transition(t: &Transition, i: usize, of: usize, target_n_val: u32) -> String {
    let mut out = rule('#');
    let title = format!("After cluster transition {i}/{of}");
    let _ = writeln!(out, "{:^width$}", title, width = WIDTH);
    out.push_str(&rule('#'));
    out.push('\n');
    let pending = (t.owners_after != t.owners_before).then_some(&t.owners_after[..]);
    out.push_str(&membership(&t.statuses, &t.owners_before, pending));
    out.push('\n');
    if t.violations > 0 {
        let _ = writeln!(
            out,
            "WARNING: Not all replicas will be on distinct nodes ({} pairs of partitions closer than target_n_val {target_n_val} share a node)\n",
            t.violations
        );
    }
    let reassigned: usize = t.reassigned.values().sum();
    if reassigned > 0 {
        let _ = writeln!(
            out,
            "Partitions reassigned from cluster changes: {reassigned}"
        );
        for ((from, to), n) in &t.reassigned {
            let _ = writeln!(out, "  {n} reassigned from '{from}' to '{to}'");
        }
        out.push('\n');
    }
    let moved: usize = t.transfers.values().sum();
    if moved > 0 {
        let _ = writeln!(out, "Transfers resulting from cluster changes: {moved}");
        for ((from, to), n) in &t.transfers {
            let _ = writeln!(out, "  {n} transfers from '{from}' to '{to}'");
        }
        out.push('\n');
    }
    out
}

/// `rill admin cluster plan`.
pub fn plan(p: &Plan, target_n_val: u32) -> String {
    let mut out = header("Staged Changes");
    out.push_str("Action         Details(s)\n");
    out.push_str(&rule('-'));
    for (n, c) in &p.changes {
        let (what, details) = c.describe(n);
        let _ = writeln!(out, "{what:<15}{details}");
    }
    out.push_str(&rule('-'));
    out.push('\n');
    for n in &p.lost {
        let _ = writeln!(out, "WARNING: All of '{n}' replicas will be lost");
    }
    out.push('\n');
    let of = p.transitions.len();
    let _ = writeln!(
        out,
        "NOTE: Applying these changes will result in {of} cluster transition{}\n",
        if of == 1 { "" } else { "s" }
    );
    for (i, t) in p.transitions.iter().enumerate() {
        out.push_str(&transition(t, i + 1, of, target_n_val));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_span_79_columns_as_riak_admin_draws_them() {
        let h = header("Membership");
        assert_eq!(h.trim_end().len(), 79);
        assert!(h.starts_with(&format!("{} Membership ", "=".repeat(33))));
        assert!(header("Staged Changes").starts_with(&format!("{} Staged", "=".repeat(31))));
    }

    #[test]
    fn member_status_of_a_new_node() {
        let s = ClusterState::new("rill", "dev1@127.0.0.1", 8);
        let want = "\
================================= Membership ==================================
Status     Ring    Pending    Node
-------------------------------------------------------------------------------
valid     100.0%      --      'dev1@127.0.0.1'
-------------------------------------------------------------------------------
Valid:1 / Leaving:0 / Exiting:0 / Joining:0 / Down:0
";
        assert_eq!(member_status(&s), want);
    }
}
