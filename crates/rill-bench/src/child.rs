//! Engines run in processes of their own: a workload starts this binary
//! again for each engine (a child stays in the run's memory cgroup), so
//! what one engine leaves in memory does not count against the next and
//! each engine's resident memory and I/O counters are its own. A child
//! leaves its figures as one line of numbers in a file.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// Runs `rill-bench` with `args` and waits; an error names `what`.
pub(crate) fn run(what: &str, args: &[String]) -> Result<()> {
    let status = std::process::Command::new(std::env::current_exe()?)
        .args(args)
        .status()
        .with_context(|| format!("{what}: starting its process"))?;
    if !status.success() {
        bail!("{what}: its process failed ({status}); see above");
    }
    Ok(())
}

/// `flag value` pairs as arguments.
pub(crate) fn flags(pairs: &[(&str, String)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(f, v)| [f.to_string(), v.clone()])
        .collect()
}

/// Writes `numbers` as the line a parent reads with [`read`].
pub(crate) fn write(file: &Path, numbers: &[f64]) -> Result<()> {
    let words: Vec<String> = numbers.iter().map(f64::to_string).collect();
    std::fs::write(file, words.join(" ") + "\n")
        .with_context(|| format!("writing {}", file.display()))
}

/// The `n` numbers a child left in `file`.
pub(crate) fn read(file: &Path, n: usize) -> Result<Vec<f64>> {
    let line =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let numbers = line
        .split_whitespace()
        .map(str::parse)
        .collect::<std::result::Result<Vec<f64>, _>>()
        .with_context(|| format!("figures {line:?}"))?;
    if numbers.len() != n {
        bail!("{} numbers in {line:?}, not {n}", numbers.len());
    }
    Ok(numbers)
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_survive_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.figures");
        super::write(&f, &[1.5, 20729.25, 0.0, 1e-3]).unwrap();
        assert_eq!(super::read(&f, 4).unwrap(), vec![1.5, 20729.25, 0.0, 1e-3]);
        assert!(super::read(&f, 3).is_err());
        std::fs::write(&f, "1 x\n").unwrap();
        assert!(super::read(&f, 2).is_err());
    }
}
