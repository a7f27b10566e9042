//! Which picks one merge takes together: a pure function of the policy's
//! picks, the files' live bytes and the free space.
//!
//! A merge writes its copies before its inputs go, so for a moment it
//! needs the live bytes of its inputs in free space. A merge that cannot
//! fit fails with ENOSPC after filling the disk to the last block (and
//! with it every writer's next put), so a batch never takes more live
//! bytes than the free space allows, less a share left for the writers
//! that go on putting while the merge runs.

use crate::policy::{FileView, Pick};
use std::collections::HashSet;

/// Files merged together at most.
pub const MAX_BATCH_FILES: usize = 16;

/// Of the free space, this share is left to writers while a merge runs
/// (1/4): at U = 0.99 on a 56 MB disk a merge may still copy 420 KB.
pub const WRITER_SHARE_DIVISOR: u64 = 4;

/// Live bytes a merge may copy with `free` bytes free on the filesystem.
pub fn merge_budget(free: u64) -> u64 {
    free - free / WRITER_SHARE_DIVISOR
}

/// The first pick (in the policy's order) that no worker is merging and
/// whose live data fits `budget`, and with it the next picks of the same
/// store whose live data, added, still fits one output file of `room`
/// bytes and the budget: merging them together fills whole output
/// files instead of leaving one small file per input. Empty when nothing
/// fits.
pub fn batch_for_one_store(
    picks: &[Pick],
    files: &[FileView],
    room: impl Fn(usize) -> u64,
    budget: u64,
    in_flight: &HashSet<(usize, u32)>,
) -> Vec<Pick> {
    let live = |p: &Pick| {
        files
            .iter()
            .find(|f| f.store == p.store && f.file_id == p.file_id)
            .map_or(0, |f| f.live_bytes)
    };
    let free = |p: &&Pick| !in_flight.contains(&(p.store, p.file_id));
    let Some(first) = picks.iter().filter(free).find(|p| live(p) <= budget) else {
        return Vec::new();
    };
    let limit = room(first.store).min(budget);
    let mut used = live(first);
    let mut batch = vec![*first];
    for p in picks.iter().filter(free) {
        if p.store != first.store || p.file_id == first.file_id {
            continue;
        }
        if batch.len() >= MAX_BATCH_FILES {
            break;
        }
        if used + live(p) > limit {
            continue; // a smaller one further on may still fit
        }
        used += live(p);
        batch.push(*p);
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(store: usize, file_id: u32, live_bytes: u64) -> FileView {
        FileView {
            store,
            file_id,
            total_bytes: 1000,
            total_keys: 10,
            live_bytes,
            live_keys: live_bytes / 100,
        }
    }

    fn picks(files: &[FileView]) -> Vec<Pick> {
        files
            .iter()
            .map(|f| Pick {
                store: f.store,
                file_id: f.file_id,
                dead_share: f.dead_share(),
            })
            .collect()
    }

    fn ids(batch: &[Pick]) -> Vec<(usize, u32)> {
        batch.iter().map(|p| (p.store, p.file_id)).collect()
    }

    #[test]
    fn batches_fill_one_output_file_of_one_store() {
        let files = [
            file(0, 1, 100),
            file(1, 7, 100),
            file(0, 2, 500),
            file(0, 3, 300),
            file(0, 4, 300),
        ];
        let got = batch_for_one_store(&picks(&files), &files, |_| 1000, u64::MAX, &HashSet::new());
        // 100 + 500 + 300 fit 1000; the next 300 does not.
        assert_eq!(ids(&got), [(0, 1), (0, 2), (0, 3)]);
    }

    #[test]
    fn a_merge_never_takes_more_live_bytes_than_the_budget() {
        let files = [
            file(0, 1, 900),
            file(0, 2, 300),
            file(0, 3, 200),
            file(1, 4, 100),
        ];
        let p = picks(&files);
        // The first pick does not fit: the first that does leads.
        let got = batch_for_one_store(&p, &files, |_| 1000, 400, &HashSet::new());
        assert_eq!(ids(&got), [(0, 2)]);
        let got = batch_for_one_store(&p, &files, |_| 1000, 500, &HashSet::new());
        assert_eq!(ids(&got), [(0, 2), (0, 3)]);
        // Nothing fits: no merge, only fully dead files would.
        assert!(batch_for_one_store(&p, &files, |_| 1000, 50, &HashSet::new()).is_empty());
        let dead = [file(0, 9, 0)];
        let got = batch_for_one_store(&picks(&dead), &dead, |_| 1000, 0, &HashSet::new());
        assert_eq!(ids(&got), [(0, 9)]);
    }

    #[test]
    fn files_being_merged_are_skipped() {
        let files = [file(0, 1, 100), file(0, 2, 100), file(0, 3, 100)];
        let busy: HashSet<_> = [(0, 1), (0, 3)].into_iter().collect();
        let got = batch_for_one_store(&picks(&files), &files, |_| 1000, u64::MAX, &busy);
        assert_eq!(ids(&got), [(0, 2)]);
    }

    #[test]
    fn at_most_max_batch_files() {
        let files: Vec<FileView> = (0..40).map(|i| file(0, i, 1)).collect();
        let got = batch_for_one_store(&picks(&files), &files, |_| 1000, u64::MAX, &HashSet::new());
        assert_eq!(got.len(), MAX_BATCH_FILES);
    }

    #[test]
    fn the_budget_leaves_a_share_to_writers() {
        assert_eq!(merge_budget(0), 0);
        assert_eq!(merge_budget(4), 3);
        assert_eq!(merge_budget(1000), 750);
    }
}
