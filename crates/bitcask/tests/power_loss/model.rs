//! The model of a power-loss run: what each key may hold now, and what
//! it may hold after a power cut.

use bitcask::Store;
use std::collections::BTreeMap;

/// A key's state: its value and expiry second, or `None` when absent.
pub type State = Option<(Vec<u8>, Option<u64>)>;

/// A key of a batch: the states it could have before, and the batch's.
pub type BatchItem = (Vec<u8>, Vec<State>, State);

pub fn visible(s: &State, now_s: u64) -> Option<&[u8]> {
    s.as_ref()
        .filter(|(_, exp)| exp.is_none_or(|e| e > now_s))
        .map(|(v, _)| v.as_slice())
}

/// What each key may hold now, and what it may hold after a power cut.
#[derive(Default)]
pub struct Model {
    /// States a read may return now (one, unless a write failed).
    pub now: BTreeMap<Vec<u8>, Vec<State>>,
    /// States a power cut may leave: the last durable one and every later
    /// attempt.
    after_crash: BTreeMap<Vec<u8>, Vec<State>>,
    /// Batches not known durable: each key with the states it could have
    /// before the batch and the state the batch gave it, while no later
    /// write touched the key.
    batches: Vec<Vec<BatchItem>>,
}

impl Model {
    pub fn exact(&self, key: &[u8]) -> Option<&State> {
        match self.now.get(key).map(Vec::as_slice) {
            None => Some(&None),
            Some([one]) => Some(one),
            Some(_) => None,
        }
    }

    /// A later write takes the key out of the batches it was in.
    pub fn touched(&mut self, key: &[u8]) {
        for b in &mut self.batches {
            b.retain(|(k, _, _)| k != key);
        }
    }

    /// A batch is about to be written: what its keys may hold before it.
    pub fn before_batch(&self, items: &[(Vec<u8>, State)]) -> Vec<BatchItem> {
        items
            .iter()
            .map(|(k, st)| {
                let before = self.after_crash.get(k).cloned().unwrap_or(vec![None]);
                (k.clone(), before, st.clone())
            })
            .collect()
    }

    /// A batch was written (or attempted): all of it or nothing survives.
    pub fn batch(&mut self, items: Vec<BatchItem>, durable: bool) {
        if !durable {
            self.batches.push(items);
        }
    }

    /// A write was acknowledged (`durable`: under o_sync).
    pub fn written(&mut self, key: &[u8], state: State, durable: bool) {
        self.touched(key);
        self.now.insert(key.to_vec(), vec![state.clone()]);
        let c = self.after_crash.entry(key.to_vec()).or_insert(vec![None]);
        if durable {
            *c = vec![state];
        } else {
            c.push(state);
        }
    }

    /// A write failed: it may or may not have happened.
    pub fn attempted(&mut self, key: &[u8], state: State) {
        self.touched(key);
        self.now
            .entry(key.to_vec())
            .or_insert(vec![None])
            .push(state.clone());
        self.after_crash
            .entry(key.to_vec())
            .or_insert(vec![None])
            .push(state);
    }

    /// Everything acknowledged so far is durable.
    pub fn synced(&mut self) {
        self.after_crash = self.now.clone();
        self.batches.clear();
    }

    /// After a reopen: every key must read as one of `allowed`'s states;
    /// what it reads becomes the one state, durable (it is what the disk
    /// holds).
    pub fn check_reopened(&mut self, s: &Store, crashed: bool, now_s: u64, ctx: &str) {
        if crashed {
            self.check_batches(s, now_s, ctx);
        }
        self.batches.clear();
        let keys: Vec<Vec<u8>> = self.after_crash.keys().cloned().collect();
        for key in keys {
            let allowed = if crashed {
                &self.after_crash[&key]
            } else {
                &self.now[&key]
            };
            let got = s
                .get(&key)
                .unwrap_or_else(|e| panic!("get after reopen, {ctx}: {e}"));
            // Several states may read alike (an empty value with and without
            // an expiry): all of them stay possible.
            let matching: Vec<State> = if got.is_none() {
                vec![None]
            } else {
                allowed
                    .iter()
                    .filter(|st| visible(st, now_s) == got.as_deref())
                    .cloned()
                    .collect()
            };
            if got.is_none() && !allowed.iter().any(|st| visible(st, now_s).is_none())
                || matching.is_empty()
            {
                panic!(
                    "{ctx}: key {} reads {:?} after a {}; allowed: {:?}",
                    String::from_utf8_lossy(&key),
                    got.as_ref().map(|v| v.len()),
                    if crashed { "power cut" } else { "clean reopen" },
                    allowed
                        .iter()
                        .map(|st| visible(st, now_s).map(<[u8]>::len))
                        .collect::<Vec<_>>()
                );
            }
            self.now.insert(key.clone(), matching.clone());
            self.after_crash.insert(key, matching);
        }
    }
}

impl Model {
    /// Each batch not known durable reads all new or all old: a key whose
    /// new state reads like another allowed state tells nothing.
    pub fn check_batches(&self, s: &Store, now_s: u64, ctx: &str) {
        for b in &self.batches {
            let mut seen: Vec<(String, bool)> = Vec::new();
            for (key, before, new) in b {
                let new_reads = visible(new, now_s);
                let ambiguous = before.iter().any(|st| visible(st, now_s) == new_reads);
                if ambiguous {
                    continue;
                }
                let got = s.get(key).unwrap_or_else(|e| panic!("get, {ctx}: {e}"));
                seen.push((
                    String::from_utf8_lossy(key).into_owned(),
                    got.as_deref() == new_reads,
                ));
            }
            assert!(
                seen.iter().all(|(_, n)| *n) || seen.iter().all(|(_, n)| !*n),
                "{ctx}: a batch survived in part (key, has the batch's state): {seen:?}"
            );
        }
    }
}
