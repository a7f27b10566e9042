//! A put's attempts: which replica coordinates next when one cannot, and
//! what it writes.
//!
//! A put is sent to the first replica of its preference list, which makes
//! the new version (riak_kv_put_fsm's forward to a coordinating vnode).
//! When that replica's node cannot be reached before it took the request
//! (the request never left, or its node went down before it answered
//! that it took it, Riak's forward acknowledgement), nothing was made:
//! the put starts again with that node passed over, as if it were down.
//! Once the coordinator took the request it may have made the version,
//! so the put fails and the client decides: made again elsewhere, one
//! write would become two versions.
//!
//! When the coordinator made the version but other replicas could not be
//! reached and the quorum fell short, the put starts again on a
//! preference list without them, with the version made (merged there,
//! not made again: nothing it did not cover is covered, and a data-type
//! operation counts once).
//!
//! Every node is passed over at most once, and no more nodes than the put
//! has replicas, so a put ends.

use rill_object::Object;

/// What an attempt's first replica does.
#[derive(Clone, Debug, PartialEq)]
pub enum Make {
    /// Make the new version from the client's request.
    Step,
    /// Merge the version an earlier attempt made, and answer with what it
    /// holds, as a coordinator does.
    Merge(Object),
}

/// How an attempt failed.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptEnd<N> {
    /// The coordinating replica's node was lost. `taken`: it had answered
    /// that it took the request (or the caller cannot tell it did not).
    CoordinatorLost { node: N, taken: bool },
    /// The attempt's put machine answered with an error while these
    /// replicas' nodes could not be reached; `made` is the version its
    /// coordinator made, if it made one.
    ShortOf {
        unreachable: Vec<N>,
        made: Option<Object>,
    },
    /// Any other failure: it is the answer.
    Failed,
}

/// The attempts of one put.
#[derive(Clone, Debug)]
pub struct PutAttempts<N> {
    /// Replicas of the put: the most nodes passed over.
    n: usize,
    avoid: Vec<N>,
    made: Option<Object>,
    /// The current attempt's coordinator took the request.
    accepted: bool,
    attempt: u32,
}

impl<N: Clone + PartialEq> PutAttempts<N> {
    /// The first attempt of a put to `n` replicas: nothing passed over,
    /// the version made by its first replica.
    pub fn new(n: u32) -> PutAttempts<N> {
        PutAttempts {
            n: n as usize,
            avoid: Vec::new(),
            made: None,
            accepted: false,
            attempt: 0,
        }
    }

    /// The nodes the current attempt's preference list passes over.
    pub fn avoid(&self) -> &[N] {
        &self.avoid
    }

    /// What the current attempt's first replica does.
    pub fn make(&self) -> Make {
        match &self.made {
            Some(o) => Make::Merge(o.clone()),
            None => Make::Step,
        }
    }

    /// Numbers the attempts from 0: replies to an earlier one are stale.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The current attempt's coordinator answered that it took the
    /// request.
    pub fn accepted(&mut self) {
        self.accepted = true;
    }

    /// The current attempt ended in failure. True: start the next one
    /// (with [`PutAttempts::avoid`] and [`PutAttempts::make`]); false:
    /// the failure is the put's answer.
    pub fn retry(&mut self, end: AttemptEnd<N>) -> bool {
        if self.avoid.len() >= self.n {
            return false;
        }
        match end {
            AttemptEnd::CoordinatorLost { node, taken } => {
                if taken || self.accepted || self.avoid.contains(&node) {
                    return false;
                }
                self.avoid.push(node);
            }
            AttemptEnd::ShortOf { unreachable, made } => {
                let new: Vec<N> = unreachable
                    .into_iter()
                    .filter(|u| !self.avoid.contains(u))
                    .collect();
                if new.is_empty() {
                    return false;
                }
                if let Some(o) = made {
                    self.made = Some(o);
                }
                for u in new {
                    if !self.avoid.contains(&u) {
                        self.avoid.push(u);
                    }
                }
            }
            AttemptEnd::Failed => return false,
        }
        self.accepted = false;
        self.attempt += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_object::{Content, Metadata};

    fn object(v: &str) -> Object {
        let mut o = Object::default();
        o.contents
            .push(Content::new(v.as_bytes().to_vec(), Metadata::default()));
        o
    }

    #[test]
    fn a_coordinator_lost_before_it_took_the_request_is_passed_over() {
        let mut a = PutAttempts::new(3);
        assert_eq!(a.make(), Make::Step);
        assert!(a.retry(AttemptEnd::CoordinatorLost {
            node: "a",
            taken: false
        }));
        assert_eq!(a.avoid(), ["a"]);
        assert_eq!(a.make(), Make::Step, "nothing was made");
        assert_eq!(a.attempt(), 1);
    }

    #[test]
    fn a_coordinator_that_took_the_request_is_not_retried() {
        let mut a = PutAttempts::new(3);
        assert!(!a.retry(AttemptEnd::CoordinatorLost {
            node: "a",
            taken: true
        }));
        let mut b = PutAttempts::new(3);
        b.accepted();
        assert!(
            !b.retry(AttemptEnd::CoordinatorLost {
                node: "a",
                taken: false
            }),
            "its answer that it took the request counts"
        );
    }

    #[test]
    fn acceptance_belongs_to_one_attempt() {
        let mut a = PutAttempts::new(3);
        assert!(a.retry(AttemptEnd::CoordinatorLost {
            node: "a",
            taken: false
        }));
        a.accepted();
        assert!(!a.retry(AttemptEnd::CoordinatorLost {
            node: "b",
            taken: false
        }));
        let mut c = PutAttempts::new(3);
        assert!(c.retry(AttemptEnd::ShortOf {
            unreachable: vec!["x"],
            made: None
        }));
        assert!(
            c.retry(AttemptEnd::CoordinatorLost {
                node: "b",
                taken: false
            }),
            "the new attempt's coordinator has not taken anything yet"
        );
    }

    #[test]
    fn a_made_version_is_merged_by_the_next_attempts_never_made_again() {
        let mut a = PutAttempts::new(3);
        let o = object("v");
        assert!(a.retry(AttemptEnd::ShortOf {
            unreachable: vec!["b", "c"],
            made: Some(o.clone())
        }));
        assert_eq!(a.avoid(), ["b", "c"]);
        assert_eq!(a.make(), Make::Merge(o.clone()));
        assert!(a.retry(AttemptEnd::ShortOf {
            unreachable: vec!["d"],
            made: None
        }));
        assert_eq!(a.make(), Make::Merge(o), "kept when a later one made none");
    }

    #[test]
    fn a_shortfall_with_no_new_node_to_pass_over_is_the_answer() {
        let mut a = PutAttempts::new(3);
        assert!(!a.retry(AttemptEnd::ShortOf {
            unreachable: Vec::<&str>::new(),
            made: None
        }));
        let mut b = PutAttempts::new(3);
        assert!(b.retry(AttemptEnd::ShortOf {
            unreachable: vec!["x"],
            made: None
        }));
        assert!(!b.retry(AttemptEnd::ShortOf {
            unreachable: vec!["x"],
            made: None
        }));
        assert!(!b.retry(AttemptEnd::Failed));
    }

    /// Over every sequence of attempt ends of up to five steps: the put
    /// ends within n + 1 attempts, and after a coordinator took the
    /// request nothing is made again.
    #[test]
    fn every_put_ends_and_nothing_taken_is_made_again() {
        let nodes = ["a", "b", "c", "d"];
        let ends = |i: usize| -> (Option<AttemptEnd<&'static str>>, bool) {
            let node = nodes[i % 4];
            match i / 4 {
                0 => (
                    Some(AttemptEnd::CoordinatorLost { node, taken: false }),
                    false,
                ),
                1 => (
                    Some(AttemptEnd::CoordinatorLost { node, taken: true }),
                    false,
                ),
                2 => (
                    Some(AttemptEnd::CoordinatorLost { node, taken: false }),
                    true,
                ),
                3 => (
                    Some(AttemptEnd::ShortOf {
                        unreachable: vec![node],
                        made: Some(object(node)),
                    }),
                    false,
                ),
                _ => (Some(AttemptEnd::Failed), false),
            }
        };
        let choices = 4 * 4 + 1;
        let mut seq = vec![0usize; 5];
        loop {
            let mut a = PutAttempts::new(3);
            let mut attempts = 1;
            let mut taken_before = false;
            for &i in &seq {
                let (end, accept) = ends(i);
                if accept {
                    a.accepted();
                }
                let was_made = a.make() != Make::Step;
                let taken =
                    matches!(end, Some(AttemptEnd::CoordinatorLost { taken: true, .. })) || accept;
                if !a.retry(end.expect("an end")) {
                    break;
                }
                attempts += 1;
                taken_before |= taken;
                assert!(!taken, "a request taken is not retried");
                assert!(
                    !was_made || a.make() != Make::Step,
                    "a made version is never made again"
                );
            }
            assert!(attempts <= 4, "{seq:?}: {attempts} attempts");
            assert!(!taken_before);
            // Next sequence.
            let mut k = 0;
            while k < seq.len() {
                seq[k] += 1;
                if seq[k] < choices {
                    break;
                }
                seq[k] = 0;
                k += 1;
            }
            if k == seq.len() {
                break;
            }
        }
    }
}
