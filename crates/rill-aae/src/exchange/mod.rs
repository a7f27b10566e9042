//! One exchange between two replicas of a preference list, after
//! kv_index_tictactree's `aae_exchange`: both replicas' roots are
//! compared, twice, and only branches that differed both times go on;
//! then those branches' segments, twice; then the keys and clock hashes
//! of the segments that differed both times. What still differs is
//! repaired by the caller (a read with read repair). Each stage is
//! capped at `max_results` ids, chosen as the tightest runs of ids
//! (`select`), so an exchange between replicas far apart costs a bounded
//! number of keys and later exchanges take the rest.
//!
//! The machine sends nothing and waits for nothing: the caller asks both
//! replicas for what [`Ask`] names, hands their answers to
//! [`Exchange::answered`], and pauses between stages as it likes.
//! Randomness (which run of ids when there are more) comes from a seed.

use crate::tree::{TictacTree, SEGMENTS_PER_BRANCH};

/// What both replicas are asked for next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    /// The root: every branch hash (4,096).
    Root,
    /// The segments of these branches.
    Branches(Vec<u32>),
    /// The keys (with their clock hashes) of these segments.
    Clocks(Vec<u32>),
}

/// One replica's answer to an [`Ask`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Root(Vec<u32>),
    /// Each asked branch with its 256 segment hashes.
    Branches(Vec<(u32, Vec<u32>)>),
    /// Each key of the asked segments (its identity, opaque here) with
    /// its clock hash.
    Clocks(Vec<(Vec<u8>, u32)>),
}

/// Where an exchange ended (Riak's result states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The roots agreed (or their differences did not last).
    RootCompare,
    /// The branches agreed.
    BranchCompare,
    /// Keys were compared: the outcome lists those that differ.
    ClockCompare,
}

impl Stage {
    /// Riak's name for the state an exchange ended in.
    pub fn name(self) -> &'static str {
        match self {
            Stage::RootCompare => "root_compare",
            Stage::BranchCompare => "branch_compare",
            Stage::ClockCompare => "clock_compare",
        }
    }
}

/// What the exchange found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub stage: Stage,
    /// Keys that one replica holds at another clock or not at all.
    pub deltas: Vec<Vec<u8>>,
}

/// What to do after an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Ask(Ask),
    Done(Outcome),
}

/// An answer of the wrong kind for the stage (a replica that speaks
/// another protocol, or a bug): the exchange is abandoned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("an anti-entropy exchange got a {got} answer while it waited for {want}")]
pub struct WrongAnswer {
    pub want: &'static str,
    pub got: &'static str,
}

#[derive(Clone, Debug)]
enum State {
    FirstRoot,
    SecondRoot { dirty: Vec<u32> },
    FirstBranches { asked: Vec<u32> },
    SecondBranches { asked: Vec<u32>, dirty: Vec<u32> },
    Clocks,
    Finished,
}

/// One exchange in progress.
#[derive(Clone, Debug)]
pub struct Exchange {
    state: State,
    max_results: usize,
    rng: u64,
}

impl Exchange {
    /// A new exchange capped at `max_results` branches and segments, and
    /// what to ask first.
    pub fn new(max_results: usize, seed: u64) -> (Exchange, Ask) {
        let e = Exchange {
            state: State::FirstRoot,
            max_results: max_results.max(1),
            rng: seed | 1,
        };
        (e, Ask::Root)
    }

    /// Both replicas' answers to the last ask.
    pub fn answered(&mut self, mine: Answer, theirs: Answer) -> Result<Step, WrongAnswer> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        let step = match (state, mine, theirs) {
            (State::FirstRoot, Answer::Root(a), Answer::Root(b)) => {
                let dirty = TictacTree::dirty_branches(&a, &b);
                if dirty.is_empty() {
                    in_sync(Stage::RootCompare)
                } else {
                    self.state = State::SecondRoot { dirty };
                    Step::Ask(Ask::Root)
                }
            }
            (State::SecondRoot { dirty }, Answer::Root(a), Answer::Root(b)) => {
                let now = TictacTree::dirty_branches(&a, &b);
                let confirmed = intersect(&dirty, &now);
                if confirmed.is_empty() {
                    in_sync(Stage::RootCompare)
                } else {
                    let asked = self.select(confirmed);
                    self.state = State::FirstBranches {
                        asked: asked.clone(),
                    };
                    Step::Ask(Ask::Branches(asked))
                }
            }
            (State::FirstBranches { asked }, Answer::Branches(a), Answer::Branches(b)) => {
                let dirty = dirty_segments(&asked, &a, &b);
                if dirty.is_empty() {
                    in_sync(Stage::BranchCompare)
                } else {
                    self.state = State::SecondBranches {
                        asked: asked.clone(),
                        dirty,
                    };
                    Step::Ask(Ask::Branches(asked))
                }
            }
            (State::SecondBranches { asked, dirty }, Answer::Branches(a), Answer::Branches(b)) => {
                let now = dirty_segments(&asked, &a, &b);
                let confirmed = intersect(&dirty, &now);
                if confirmed.is_empty() {
                    in_sync(Stage::BranchCompare)
                } else {
                    self.state = State::Clocks;
                    Step::Ask(Ask::Clocks(self.select(confirmed)))
                }
            }
            (State::Clocks, Answer::Clocks(a), Answer::Clocks(b)) => Step::Done(Outcome {
                stage: Stage::ClockCompare,
                deltas: differing_keys(a, b),
            }),
            (state, mine, theirs) => {
                let got = if kind(&mine) != want(&state) {
                    kind(&mine)
                } else {
                    kind(&theirs)
                };
                return Err(WrongAnswer {
                    want: want(&state),
                    got,
                });
            }
        };
        Ok(step)
    }

    /// At most `max_results` of `ids` (sorted): all if they fit, else a
    /// run of consecutive ids among the tightest (smallest span), picked
    /// at random so that exchanges running at once repair different
    /// keys (kv_index_tictactree's `select_ids`).
    fn select(&mut self, mut ids: Vec<u32>) -> Vec<u32> {
        let m = self.max_results;
        if ids.len() <= m {
            return ids;
        }
        ids.sort_unstable();
        let mut windows: Vec<(u32, usize)> = (0..=ids.len() - m)
            .map(|start| (ids[start + m - 1] - ids[start], start))
            .collect();
        windows.sort_unstable();
        let best = windows.len().min(m);
        let pick = (self.next_random() % best as u64) as usize;
        let start = windows[pick].1;
        ids[start..start + m].to_vec()
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn in_sync(stage: Stage) -> Step {
    Step::Done(Outcome {
        stage,
        deltas: Vec::new(),
    })
}

fn kind(a: &Answer) -> &'static str {
    match a {
        Answer::Root(_) => "root",
        Answer::Branches(_) => "branches",
        Answer::Clocks(_) => "clocks",
    }
}

fn want(s: &State) -> &'static str {
    match s {
        State::FirstRoot | State::SecondRoot { .. } => "root",
        State::FirstBranches { .. } | State::SecondBranches { .. } => "branches",
        State::Clocks => "clocks",
        State::Finished => "nothing (the exchange had ended)",
    }
}

/// Ids in both sorted lists.
fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let set: std::collections::BTreeSet<u32> = b.iter().copied().collect();
    a.iter().copied().filter(|x| set.contains(x)).collect()
}

/// The segments of the asked branches whose hashes differ (a branch a
/// replica left out counts as all zeros).
fn dirty_segments(asked: &[u32], a: &[(u32, Vec<u32>)], b: &[(u32, Vec<u32>)]) -> Vec<u32> {
    let find = |list: &[(u32, Vec<u32>)], id: u32| -> [u32; SEGMENTS_PER_BRANCH] {
        let mut out = [0u32; SEGMENTS_PER_BRANCH];
        if let Some((_, segs)) = list.iter().find(|(b, _)| *b == id) {
            for (o, s) in out.iter_mut().zip(segs) {
                *o = *s;
            }
        }
        out
    };
    let mut dirty = Vec::new();
    for &id in asked {
        dirty.extend(TictacTree::dirty_segments(id, &find(a, id), &find(b, id)));
    }
    dirty
}

/// Keys present on one side only or at different clock hashes, sorted.
fn differing_keys(mut a: Vec<(Vec<u8>, u32)>, mut b: Vec<(Vec<u8>, u32)>) -> Vec<Vec<u8>> {
    a.sort_unstable();
    b.sort_unstable();
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                if x.1 != y.1 {
                    out.push(x.0.clone());
                }
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                out.push(x.0.clone());
                i += 1;
            }
            (Some(_), Some(y)) => {
                out.push(y.0.clone());
                j += 1;
            }
            (Some(x), None) => {
                out.push(x.0.clone());
                i += 1;
            }
            (None, Some(y)) => {
                out.push(y.0.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    out.dedup();
    out
}

#[cfg(test)]
mod tests;
