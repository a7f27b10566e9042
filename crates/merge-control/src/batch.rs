//! Which picks one merge takes together: a pure function of the policy's
//! picks, the bytes each merge writes and the free space.
//!
//! A merge writes its copies (and their hint entries, and tombstones that
//! stand in for expired records) before its inputs go, so for a moment it
//! needs that much free space. A merge that cannot fit fails with ENOSPC
//! after filling the disk to the last block (and with it every writer's
//! next put), so a batch never needs more than the free space allows,
//! less what merges already running need and a share left for the
//! writers that go on putting while the merge runs.

use crate::policy::Pick;
use bitcask::format::hint::HINT_ENTRY_FIXED_LEN;
use bitcask::format::RECORD_HEADER_LEN;
use bitcask::FileStats;
use std::collections::HashMap;

/// Files merged together at most.
pub const MAX_BATCH_FILES: usize = 16;

/// Of the free space, this share is left to writers while a merge runs
/// (1/4): at U = 0.99 on a 56 MB disk a merge may still write 420 KB.
pub const WRITER_SHARE_DIVISOR: u64 = 4;

/// Bytes merges may write with `free` bytes free on the filesystem.
pub fn merge_budget(free: u64) -> u64 {
    free - free / WRITER_SHARE_DIVISOR
}

/// A key's bytes, guessed where the statistics do not tell them.
const KEY_GUESS_BYTES: u64 = 256;

/// Bytes a merge of this file may write before the file goes: its live
/// records, a hint entry for each, and for each expired record a
/// tombstone that may have to stand in for it, with its hint. Keys are
/// taken as long as the average live record allows, at most 256 bytes
/// (256 when the file holds no live record). Nothing for a file the
/// merge deletes unread (`FileStats::unread`).
pub fn merge_need(f: &FileStats) -> u64 {
    if f.unread {
        return 0;
    }
    let (header, hint) = (RECORD_HEADER_LEN as u64, HINT_ENTRY_FIXED_LEN as u64);
    let key = match f.live_keys {
        0 => KEY_GUESS_BYTES,
        k => (f.live_bytes / k)
            .saturating_sub(header)
            .min(KEY_GUESS_BYTES),
    };
    f.live_bytes + f.live_keys * (hint + key) + f.expired_keys * (header + hint + 2 * key)
}

/// The first pick (in the policy's order) that no merge is working on and
/// whose merge fits `budget` (`need`: the bytes its merge writes), and
/// with it the next picks of the same store that, added, still fit one
/// output file of `room` bytes and the budget: merging them together
/// fills whole output files instead of leaving one small file per input.
/// Empty when nothing fits. `in_flight`: the files merges are working on.
pub fn batch_for_one_store(
    picks: &[Pick],
    need: impl Fn(&Pick) -> u64,
    room: impl Fn(usize) -> u64,
    budget: u64,
    in_flight: &HashMap<(usize, u32), u64>,
) -> Vec<Pick> {
    let free = |p: &&Pick| !in_flight.contains_key(&(p.store, p.file_id));
    let Some(first) = picks.iter().filter(free).find(|p| need(p) <= budget) else {
        return Vec::new();
    };
    let limit = room(first.store).min(budget);
    let mut used = need(first);
    let mut batch = vec![*first];
    for p in picks.iter().filter(free) {
        if p.store != first.store || p.file_id == first.file_id {
            continue;
        }
        if batch.len() >= MAX_BATCH_FILES {
            break;
        }
        if used + need(p) > limit {
            continue; // a smaller one further on may still fit
        }
        used += need(p);
        batch.push(*p);
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (store, file id, bytes its merge writes)
    type File = (usize, u32, u64);

    fn batch(
        files: &[File],
        room: u64,
        budget: u64,
        in_flight: &HashMap<(usize, u32), u64>,
    ) -> Vec<(usize, u32)> {
        let picks: Vec<Pick> = files
            .iter()
            .map(|&(store, file_id, _)| Pick {
                store,
                file_id,
                dead_share: 0.5,
            })
            .collect();
        let need = |p: &Pick| {
            files
                .iter()
                .find(|f| f.0 == p.store && f.1 == p.file_id)
                .map_or(0, |f| f.2)
        };
        batch_for_one_store(&picks, need, |_| room, budget, in_flight)
            .iter()
            .map(|p| (p.store, p.file_id))
            .collect()
    }

    #[test]
    fn batches_fill_one_output_file_of_one_store() {
        let files = [
            (0, 1, 100),
            (1, 7, 100),
            (0, 2, 500),
            (0, 3, 300),
            (0, 4, 300),
        ];
        // 100 + 500 + 300 fit 1000; the next 300 does not.
        let got = batch(&files, 1000, u64::MAX, &HashMap::new());
        assert_eq!(got, [(0, 1), (0, 2), (0, 3)]);
    }

    #[test]
    fn a_merge_never_needs_more_than_the_budget() {
        let files = [(0, 1, 900), (0, 2, 300), (0, 3, 200), (1, 4, 100)];
        // The first pick does not fit: the first that does leads.
        assert_eq!(batch(&files, 1000, 400, &HashMap::new()), [(0, 2)]);
        assert_eq!(batch(&files, 1000, 500, &HashMap::new()), [(0, 2), (0, 3)]);
        // Nothing fits: no merge; a file whose merge writes nothing does.
        assert!(batch(&files, 1000, 50, &HashMap::new()).is_empty());
        assert_eq!(batch(&[(0, 9, 0)], 1000, 0, &HashMap::new()), [(0, 9)]);
    }

    #[test]
    fn files_being_merged_are_skipped() {
        let files = [(0, 1, 100), (0, 2, 100), (0, 3, 100)];
        let busy: HashMap<_, _> = [((0, 1), 100), ((0, 3), 100)].into_iter().collect();
        assert_eq!(batch(&files, 1000, u64::MAX, &busy), [(0, 2)]);
    }

    #[test]
    fn at_most_max_batch_files() {
        let files: Vec<File> = (0..40).map(|i| (0, i, 1)).collect();
        assert_eq!(
            batch(&files, 1000, u64::MAX, &HashMap::new()).len(),
            MAX_BATCH_FILES
        );
    }

    #[test]
    fn the_budget_leaves_a_share_to_writers() {
        assert_eq!(merge_budget(0), 0);
        assert_eq!(merge_budget(4), 3);
        assert_eq!(merge_budget(1000), 750);
    }

    fn stats(live_bytes: u64, live_keys: u64, expired_keys: u64) -> FileStats {
        FileStats {
            file_id: 1,
            total_bytes: live_bytes * 2,
            total_keys: live_keys * 2 + expired_keys,
            live_bytes,
            live_keys,
            expired_keys,
            min_seq: 1,
            max_seq: 2,
            active: false,
            unread: false,
        }
    }

    #[test]
    fn a_merge_needs_its_records_their_hints_and_tombstones_for_expired_ones() {
        // 100 records of 16 KiB with 20-byte keys: hints add 44 bytes each.
        let big = 100 * (36 + 20 + 16384);
        assert_eq!(merge_need(&stats(big, 100, 0)), big + 100 * (24 + 256));
        // Index entries (keys only, 64 bytes): hints nearly double them.
        assert_eq!(
            merge_need(&stats(100 * 100, 100, 0)),
            100 * 100 + 100 * (24 + 64)
        );
        // A file of expired records only: each may need a tombstone.
        assert_eq!(merge_need(&stats(0, 0, 10)), 10 * (36 + 24 + 512));
        assert_eq!(merge_need(&stats(0, 0, 0)), 0);
        // The same, with no older record of its keys anywhere else: the
        // merge deletes it unread and writes nothing.
        let unread = FileStats {
            unread: true,
            ..stats(0, 0, 10)
        };
        assert_eq!(merge_need(&unread), 0);
    }
}
