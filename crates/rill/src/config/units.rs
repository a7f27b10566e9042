//! Sizes and durations as operators write them, one parser each for the
//! config file and every command: Riak's units, so `KB`, `MB`, `GB`, `TB`
//! are powers of 1,024 as in riak.conf (`KiB`... are the same), and
//! durations in `us`, `ms`, `s`, `m`, `h`, `d` or `w`.

use std::time::Duration;

/// A size in bytes: a number (a decimal point allowed), then `B`, `KB`,
/// `MB`, `GB`, `TB` or their `KiB` forms, all powers of 1,024, or none.
pub fn bytesize(v: &str) -> Result<u64, String> {
    let t = v.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = match number.parse() {
        Ok(n) if number.starts_with(|c: char| c.is_ascii_digit()) => n,
        _ => return Err(format!("expected a size such as 2GB or 512MB, found {v:?}")),
    };
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "KB" | "KIB" => 1 << 10,
        "MB" | "MIB" => 1 << 20,
        "GB" | "GIB" => 1 << 30,
        "TB" | "TIB" => 1 << 40,
        u => {
            return Err(format!(
                "unknown size unit {u:?} in {v:?} (use B, KB, MB, GB or TB, powers of 1024)"
            ))
        }
    };
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("size {v:?} is too large"));
    }
    Ok(bytes as u64)
}

/// A duration: a whole number, then `us`, `ms`, `s` (or none), `m`, `h`,
/// `d` or `w`.
pub fn duration(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("expected a duration such as 3s or 1d, found {v:?}"))?;
    let us: u64 = match unit.trim() {
        "us" => 1,
        "ms" => 1_000,
        "s" | "" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        "w" => 7 * 86_400_000_000,
        u => {
            return Err(format!(
                "unknown duration unit {u:?} in {v:?} (use us, ms, s, m, h, d or w)"
            ))
        }
    };
    n.checked_mul(us)
        .map(Duration::from_micros)
        .ok_or_else(|| format!("duration {v:?} is too long"))
}

/// A size as the config file writes it, where it is a whole number of a
/// unit: `4GB`, `16MB`, `1KB`, `512B`.
pub fn show_conf_size(bytes: u64) -> String {
    for (unit, shift) in [("TB", 40), ("GB", 30), ("MB", 20), ("KB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// A size for people: `512 B`, `1.50 GiB`.
pub fn show_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_powers_of_1024_as_in_riak_conf() {
        for (text, want) in [
            ("2GB", 2u64 << 30),
            ("2GiB", 2 << 30),
            ("512MB", 512 << 20),
            (" 512 mb", 512 << 20),
            ("64KB", 64 << 10),
            ("1TB", 1 << 40),
            ("4096", 4096),
            ("4096B", 4096),
            ("1.5GB", 3 << 29),
            ("0", 0),
        ] {
            assert_eq!(bytesize(text), Ok(want), "{text}");
        }
        for bad in ["", "x", "lots", "10 parsecs", "-1MB", ".MB", "1e30TB"] {
            assert!(bytesize(bad).is_err(), "{bad}");
        }
        assert_eq!(show_bytes(8 << 30), "8.00 GiB");
        assert_eq!(show_bytes(100), "100 B");
        for b in [0, 512, 1 << 10, 16 << 20, 4 << 30, 1 << 40, (1 << 20) + 1] {
            assert_eq!(bytesize(&show_conf_size(b)), Ok(b), "{b}");
        }
        assert_eq!(show_conf_size(64 << 20), "64MB");
    }

    #[test]
    fn durations() {
        assert_eq!(duration("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(duration("10ms"), Ok(Duration::from_millis(10)));
        for bad in ["", "soon", "1.5s", "3 fortnights", "99999999999999999w"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }
}
