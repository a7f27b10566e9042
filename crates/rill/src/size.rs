//! Byte sizes as operators write them: `100GB`, `8GiB`, `512MB`, `4096`.

use anyhow::{bail, Result};

pub fn parse(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let Ok(n) = number.parse::<f64>() else {
        bail!("expected a size such as 100GB or 8GiB, found {text:?}");
    };
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "tib" | "t" => 1 << 40,
        other => bail!(
            "unknown size unit {other:?} in {text:?} (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        ),
    };
    if !n.is_finite() || n < 0.0 {
        bail!("a size must be a positive number, found {text:?}");
    }
    Ok((n * mult as f64) as u64)
}

pub fn show(bytes: u64) -> String {
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
    fn sizes() {
        assert_eq!(parse("100GB").unwrap(), 100_000_000_000);
        assert_eq!(parse("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse(" 512 MB").unwrap(), 512_000_000);
        assert_eq!(parse("4096").unwrap(), 4096);
        assert_eq!(parse("1.5GiB").unwrap(), 3 << 29);
        assert!(parse("lots").is_err());
        assert!(parse("10 parsecs").is_err());
        assert_eq!(show(8 << 30), "8.00 GiB");
    }
}
