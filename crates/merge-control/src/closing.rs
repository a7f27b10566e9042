//! Active files closed early when space is short. Merge never takes a
//! store's active file, so with a large rotation size R the dead bytes of
//! the files being written stay on the disk until they reach R: on a
//! node whose disk filled, deletes then free nothing. When the node is
//! short of space (puts refused for it, or usage at the throttle's U_l),
//! an active file holding enough dead bytes, as dead as the policy takes
//! files now, is closed so a merge can give them back; a store has at
//! most one such file waiting for its merge (the scheduler's bound), so
//! files are never closed faster than merges take them.

/// Dead bytes an active file must hold before it is closed early: each
/// close starts a new file, so a handful of dead records is not worth one.
pub const MIN_DEAD_BYTES: u64 = 64 << 10;

/// Dead share an active file must reach before it is closed early: a file
/// mostly live would be copied almost whole by the merge it is closed for.
pub const MIN_DEAD_SHARE: f64 = 0.25;

/// Whether an active file of `total_bytes` of records, `live_bytes` of
/// them live, is worth closing for a merge when space is short and the
/// policy takes files whose dead share reaches `take_threshold`.
pub fn worth_closing(total_bytes: u64, live_bytes: u64, take_threshold: f64) -> bool {
    let dead = total_bytes.saturating_sub(live_bytes);
    let share = MIN_DEAD_SHARE.max(take_threshold);
    dead >= MIN_DEAD_BYTES && dead as f64 >= share * total_bytes as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_table() {
        let k = 1u64 << 10;
        for (total, live, threshold, want) in [
            (0, 0, 0.0, false),
            (63 * k, 0, 0.0, false),
            (64 * k, 0, 0.0, true),
            (256 * k, 192 * k, 0.0, true),
            (256 * k, 193 * k, 0.0, false),
            (2 << 30, (2 << 30) - 64 * k, 0.0, false),
            (1 << 20, 1 << 20, 0.0, false),
            (1 << 20, 2 << 20, 0.0, false),
            // Not as dead as the policy takes files now: left open.
            (256 * k, 128 * k, 0.6, false),
            (256 * k, 64 * k, 0.6, true),
            (256 * k, 0, 1.0, true),
        ] {
            assert_eq!(
                worth_closing(total, live, threshold),
                want,
                "total {total}, live {live}, threshold {threshold}"
            );
        }
    }
}
