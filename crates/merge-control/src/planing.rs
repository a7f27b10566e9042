//! Planing advice (the sensor-data paper, "Riak KV performance in sensor
//! data storage application", §4.2, eq. 4): a node keeps "planing" (merge only
//! deletes fully dead files) while R <= (C_i / n_i)(U_m - V).

/// What the advice says for one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct PlaningAdvice {
    /// The largest rotation size R that keeps the node planing, bytes;
    /// `None` when no R can (V >= U_m).
    pub max_file_size_bytes: Option<u64>,
    /// Live data per vnode G = V * C_i / n_i, bytes.
    pub live_bytes_per_vnode: u64,
    /// Warnings an operator must read.
    pub warnings: Vec<String>,
}

/// Smallest rotation size worth having: below it, rotation costs dominate.
pub const MIN_SENSIBLE_FILE_SIZE_BYTES: u64 = 16 << 20;

/// Smallest rotation size the default takes, however small the disk.
pub const MIN_DEFAULT_FILE_SIZE_BYTES: u64 = 1 << 20;
/// Largest rotation size the default takes (Riak's `bitcask.max_file_size`).
pub const MAX_DEFAULT_FILE_SIZE_BYTES: u64 = 2 << 30;

/// The rotation size R a node takes when `bitcask.max_file_size` is not
/// set: eq. 4 with the live share V planned at half the merge target
/// (V = U_m / 2), so R = (C_i / n_i)(U_m / 2), between 1 MiB and Riak's
/// 2 GiB, in whole 64 KiB. `stores` counts the Bitcask stores that may
/// share the filesystem (every partition of the ring: a node alone holds
/// them all). A default that ignored the disk's size could leave every
/// byte of a small disk in active files, which no merge may take, so a
/// node that filled its disk never wrote again after deletes.
pub fn default_rotation_bytes(capacity_bytes: u64, stores: u32, target_usage: f64) -> u64 {
    let per_store = capacity_bytes as f64 / f64::from(stores.max(1));
    let r = (per_store * (target_usage / 2.0).clamp(0.0, 0.5)) as u64;
    (r & !0xFFFF).clamp(MIN_DEFAULT_FILE_SIZE_BYTES, MAX_DEFAULT_FILE_SIZE_BYTES)
}

pub fn advise(
    capacity_bytes: u64,
    vnodes: u32,
    target_usage: f64,
    live_share: f64,
) -> PlaningAdvice {
    let per_vnode = capacity_bytes as f64 / f64::from(vnodes.max(1));
    let live_bytes_per_vnode = (per_vnode * live_share).max(0.0) as u64;
    let mut warnings = Vec::new();
    let room = target_usage - live_share;
    let max_file_size_bytes = if room <= 0.0 {
        warnings.push(format!(
            "cannot plane: the planned live share V = {live_share:.2} is not below the merge target U_m = {target_usage:.2}; \
             merge will have to copy live data (lower V or raise U_m)"
        ));
        None
    } else {
        let r = (per_vnode * room) as u64;
        if r < MIN_SENSIBLE_FILE_SIZE_BYTES {
            warnings.push(format!(
                "the largest planing R is only {r} bytes: files that small rotate too often; \
                 use fewer vnodes per node, more capacity or a lower V"
            ));
        }
        Some(r)
    };
    if live_share > 0.6 {
        warnings.push(format!(
            "V = {live_share:.2}: a node failure raises V on the others (the sensor-data paper, §4.3); leave headroom"
        ));
    }
    PlaningAdvice {
        max_file_size_bytes,
        live_bytes_per_vnode,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_configuration() {
        // C_i = 100 GB, n_i = 64, U_m = 0.8: planing with R = 1 GB holds up
        // to V = 0.16 (the sensor-data paper, §4.2).
        let gb = 1_000_000_000u64;
        let a = advise(100 * gb, 64, 0.8, 0.16);
        let r = a.max_file_size_bytes.unwrap();
        assert!(r.abs_diff(gb) < gb / 100, "{r}");
        let a = advise(100 * gb, 64, 0.8, 0.3);
        assert!(a.max_file_size_bytes.unwrap() < gb);
    }

    #[test]
    fn the_default_rotation_size_follows_eq_4() {
        let mib = 1u64 << 20;
        // 272 MiB over 64 stores at U_m = 0.8: (4.25 MiB)(0.4) = 1.7 MiB.
        let r = default_rotation_bytes(272 * mib, 64, 0.8);
        assert_eq!(r, (272 * mib / 64 * 4 / 10) & !0xFFFF);
        let a = advise(272 * mib, 64, 0.8, 0.4);
        assert!(
            r <= a.max_file_size_bytes.unwrap(),
            "R keeps V = U_m/2 planing"
        );
        // Large disks keep Riak's 2 GiB; tiny ones 1 MiB.
        assert_eq!(default_rotation_bytes(4 << 40, 64, 0.8), 2 << 30);
        assert_eq!(default_rotation_bytes(16 * mib, 64, 0.8), mib);
        assert_eq!(default_rotation_bytes(0, 0, 0.8), mib);
        // The paper's node: 100 GB over 64 vnodes, 625 MB.
        let r = default_rotation_bytes(100_000_000_000, 64, 0.8);
        assert!(r.abs_diff(625_000_000) < 1 << 16, "{r}");
    }

    #[test]
    fn no_planing_above_the_target() {
        let a = advise(8 << 30, 64, 0.8, 0.85);
        assert_eq!(a.max_file_size_bytes, None);
        assert!(a.warnings[0].contains("cannot plane"));
    }

    #[test]
    fn tiny_files_are_warned_about() {
        let a = advise(1 << 30, 64, 0.8, 0.7);
        assert!(a.warnings.iter().any(|w| w.contains("rotate too often")));
    }
}
