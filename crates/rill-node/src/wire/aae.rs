//! Anti-entropy exchanges' questions and answers on the wire (request
//! kind 9, reply kind 25; docs/format.md, "Vnode messages").

use super::{Reader, WireError};
use rill_aae::{Answer, Ask, IndexN, BRANCHES, SEGMENTS, SEGMENTS_PER_BRANCH};

const ROOT: u8 = 0;
const BRANCH_LIST: u8 = 1;
const CLOCKS: u8 = 2;
const NONE: u8 = 3;

fn put_ids(b: &mut Vec<u8>, ids: &[u32]) {
    b.extend_from_slice(&(ids.len() as u32).to_be_bytes());
    for i in ids {
        b.extend_from_slice(&i.to_be_bytes());
    }
}

pub(super) fn put_ask(b: &mut Vec<u8>, index_n: IndexN, ask: &Ask) {
    b.extend_from_slice(&index_n.first.to_be_bytes());
    b.push(index_n.n);
    match ask {
        Ask::Root => b.push(ROOT),
        Ask::Branches(ids) => {
            b.push(BRANCH_LIST);
            put_ids(b, ids);
        }
        Ask::Clocks(ids) => {
            b.push(CLOCKS);
            put_ids(b, ids);
        }
    }
}

pub(super) fn put_segments(b: &mut Vec<u8>, index_n: IndexN, segments: &[u32]) {
    b.extend_from_slice(&index_n.first.to_be_bytes());
    b.push(index_n.n);
    put_ids(b, segments);
}

pub(super) fn put_answer(b: &mut Vec<u8>, a: &Option<Answer>) {
    match a {
        None => b.push(NONE),
        Some(Answer::Root(root)) => {
            b.push(ROOT);
            put_ids(b, root);
        }
        Some(Answer::Branches(list)) => {
            b.push(BRANCH_LIST);
            b.extend_from_slice(&(list.len() as u32).to_be_bytes());
            for (id, segs) in list {
                b.extend_from_slice(&id.to_be_bytes());
                put_ids(b, segs);
            }
        }
        Some(Answer::Clocks(list)) => {
            b.push(CLOCKS);
            b.extend_from_slice(&(list.len() as u32).to_be_bytes());
            for (key, clock) in list {
                super::put_long(b, key);
                b.extend_from_slice(&clock.to_be_bytes());
            }
        }
    }
}

impl Reader<'_> {
    /// At most `max` ids, each below `below`.
    fn ids(&mut self, max: usize, below: usize) -> Result<Vec<u32>, WireError> {
        let n = self.count(4)?;
        if n > max {
            return Err(WireError::Malformed(format!(
                "{n} ids where at most {max} fit"
            )));
        }
        let ids = (0..n).map(|_| self.u32()).collect::<Result<Vec<_>, _>>()?;
        if let Some(bad) = ids.iter().find(|i| **i as usize >= below) {
            return Err(WireError::Malformed(format!("id {bad} out of range")));
        }
        Ok(ids)
    }

    pub(super) fn aae_ask(&mut self) -> Result<(IndexN, Ask), WireError> {
        let first = self.u32()?;
        let n = self.u8()?;
        let ask = match self.u8()? {
            ROOT => Ask::Root,
            BRANCH_LIST => Ask::Branches(self.ids(BRANCHES, BRANCHES)?),
            CLOCKS => Ask::Clocks(self.ids(SEGMENTS, SEGMENTS)?),
            x => return Err(WireError::Malformed(format!("anti-entropy question {x}"))),
        };
        Ok((IndexN { first, n }, ask))
    }

    pub(super) fn aae_segments(&mut self) -> Result<(IndexN, Vec<u32>), WireError> {
        let first = self.u32()?;
        let n = self.u8()?;
        Ok((IndexN { first, n }, self.ids(SEGMENTS, SEGMENTS)?))
    }

    pub(super) fn aae_answer(&mut self) -> Result<Option<Answer>, WireError> {
        Ok(Some(match self.u8()? {
            NONE => return Ok(None),
            ROOT => Answer::Root(self.ids(BRANCHES, usize::MAX)?),
            BRANCH_LIST => {
                let n = self.count(8)?;
                if n > BRANCHES {
                    return Err(WireError::Malformed(format!("{n} branches")));
                }
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    let id = self.u32()?;
                    list.push((id, self.ids(SEGMENTS_PER_BRANCH, usize::MAX)?));
                }
                Answer::Branches(list)
            }
            CLOCKS => {
                let n = self.count(8)?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = self.long()?.to_vec();
                    list.push((key, self.u32()?));
                }
                Answer::Clocks(list)
            }
            x => return Err(WireError::Malformed(format!("anti-entropy answer {x}"))),
        }))
    }
}
