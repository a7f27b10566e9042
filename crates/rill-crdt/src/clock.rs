//! Dots and the version vectors of data types.

use std::collections::BTreeMap;

pub type Actor = Vec<u8>;
pub type Dot = (Actor, u64);

/// For each actor, how many of its events have been seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Clock(pub BTreeMap<Actor, u64>);

impl Clock {
    pub fn get(&self, a: &[u8]) -> u64 {
        self.0.get(a).copied().unwrap_or(0)
    }

    pub fn next_dot(&mut self, a: &[u8]) -> Dot {
        let c = self.0.entry(a.to_vec()).or_insert(0);
        *c += 1;
        (a.to_vec(), *c)
    }

    /// Records that the event `d` has been seen.
    pub fn add_dot(&mut self, d: &Dot) {
        let c = self.0.entry(d.0.clone()).or_insert(0);
        *c = (*c).max(d.1);
    }

    pub fn covers(&self, d: &Dot) -> bool {
        self.get(&d.0) >= d.1
    }

    pub fn descends(&self, other: &Clock) -> bool {
        other.0.iter().all(|(a, c)| self.get(a) >= *c)
    }

    pub fn merge(&mut self, other: &Clock) {
        for (a, c) in &other.0 {
            let e = self.0.entry(a.clone()).or_insert(0);
            *e = (*e).max(*c);
        }
    }
}

const CONTEXT_VERSION: u8 = 1;

impl Clock {
    /// The opaque context handed to clients.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![CONTEXT_VERSION];
        out.extend_from_slice(&(self.0.len() as u32).to_be_bytes());
        for (a, n) in &self.0 {
            let a = &a[..a.len().min(255)];
            out.push(a.len() as u8);
            out.extend_from_slice(a);
            out.extend_from_slice(&n.to_be_bytes());
        }
        out
    }

    /// A client's context back; `None` when the bytes are not one.
    pub fn decode(b: &[u8]) -> Option<Clock> {
        let (&v, mut rest) = b.split_first()?;
        if v != CONTEXT_VERSION || rest.len() < 4 {
            return None;
        }
        let n = u32::from_be_bytes(rest[..4].try_into().ok()?) as usize;
        rest = &rest[4..];
        if n > rest.len() / 9 {
            return None;
        }
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let (&len, r) = rest.split_first()?;
            let len = len as usize;
            if r.len() < len + 8 {
                return None;
            }
            m.insert(
                r[..len].to_vec(),
                u64::from_be_bytes(r[len..len + 8].try_into().ok()?),
            );
            rest = &r[len + 8..];
        }
        rest.is_empty().then_some(Clock(m))
    }
}
