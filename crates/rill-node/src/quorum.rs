//! Riak's quorum accounting (riak_kv_get_core, riak_kv_put_core), as pure
//! functions of the replies. Tested from tables.

use crate::error::KvError;

/// What one replica answered a read with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadReply {
    /// A live object or a tombstone.
    Found,
    NotFound,
    Failed,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadQuorum {
    pub r: u32,
    pub pr: u32,
    pub notfound_ok: bool,
}

/// Whether enough replicas answered for the merged object (or not-found)
/// to be the answer; otherwise the error Riak gives. `replies` carries
/// (primary, reply) for each replica asked.
pub(crate) fn read_outcome(q: ReadQuorum, replies: &[(bool, ReadReply)]) -> Result<(), KvError> {
    let mut ok = 0;
    let mut primary_ok = 0;
    let mut notfound = 0;
    let mut failed = 0;
    for (primary, r) in replies {
        match r {
            ReadReply::Found => {
                ok += 1;
                primary_ok += u32::from(*primary);
            }
            ReadReply::NotFound if q.notfound_ok => {
                ok += 1;
                primary_ok += u32::from(*primary);
            }
            ReadReply::NotFound => notfound += 1,
            ReadReply::Failed => failed += 1,
        }
    }
    if ok >= q.r && primary_ok >= q.pr {
        return Ok(());
    }
    if ok == 0 && failed == 0 && notfound > 0 {
        // Every replica said not found: a not-found answer.
        return Ok(());
    }
    if ok >= q.r || q.pr >= q.r {
        return Err(KvError::PrUnsatisfied {
            need: q.pr,
            got: primary_ok,
        });
    }
    Err(KvError::RUnsatisfied { need: q.r, got: ok })
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteQuorum {
    pub w: u32,
    pub dw: u32,
    pub pw: u32,
}

/// (primary, stored durably) for each replica written.
pub(crate) fn write_outcome(q: WriteQuorum, replies: &[(bool, bool)]) -> Result<(), KvError> {
    let stored = replies.iter().filter(|(_, ok)| *ok).count() as u32;
    let primaries = replies.iter().filter(|(p, ok)| *p && *ok).count() as u32;
    if primaries < q.pw {
        return Err(KvError::PwUnsatisfied {
            need: q.pw,
            got: primaries,
        });
    }
    if stored < q.w {
        return Err(KvError::WUnsatisfied {
            need: q.w,
            got: stored,
        });
    }
    if stored < q.dw {
        return Err(KvError::DwUnsatisfied {
            need: q.dw,
            got: stored,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReadReply::*;

    #[test]
    fn reads_from_a_table() {
        let t = |r, pr, notfound_ok| ReadQuorum { r, pr, notfound_ok };
        type Row<'a> = (ReadQuorum, &'a [(bool, ReadReply)], Result<(), KvError>);
        let table: &[Row] = &[
            (
                t(2, 0, true),
                &[(true, Found), (true, NotFound), (true, NotFound)],
                Ok(()),
            ),
            // riak_kv_get_core: ok + notfound + notfound with notfound_ok=false.
            (
                t(2, 0, false),
                &[(true, Found), (true, NotFound), (true, NotFound)],
                Err(KvError::RUnsatisfied { need: 2, got: 1 }),
            ),
            (
                t(2, 0, false),
                &[(true, NotFound), (true, NotFound), (true, NotFound)],
                Ok(()),
            ),
            (
                t(2, 0, true),
                &[(true, Found), (true, Failed), (true, Failed)],
                Err(KvError::RUnsatisfied { need: 2, got: 1 }),
            ),
            (
                t(1, 3, true),
                &[(true, Found), (true, Found), (false, Found)],
                Err(KvError::PrUnsatisfied { need: 3, got: 2 }),
            ),
            (
                t(3, 3, true),
                &[(true, Found), (true, Found), (true, Found)],
                Ok(()),
            ),
        ];
        for (q, replies, want) in table {
            assert_eq!(&read_outcome(*q, replies), want, "{q:?} {replies:?}");
        }
    }

    #[test]
    fn writes_from_a_table() {
        let q = |w, dw, pw| WriteQuorum { w, dw, pw };
        assert_eq!(
            write_outcome(q(2, 2, 0), &[(true, true), (true, true), (true, false)]),
            Ok(())
        );
        assert_eq!(
            write_outcome(q(3, 2, 0), &[(true, true), (true, true), (true, false)]),
            Err(KvError::WUnsatisfied { need: 3, got: 2 })
        );
        assert_eq!(
            write_outcome(q(1, 1, 3), &[(true, true), (true, true), (false, true)]),
            Err(KvError::PwUnsatisfied { need: 3, got: 2 })
        );
    }
}
