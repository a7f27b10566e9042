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
