//! PNG plots of a sensor run, drawn by gnuplot from the CSV files: MB/s
//! (EWMA) over time for every engine, and usage U below it.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `<name>.gp` and runs gnuplot on it; returns the PNG's path.
pub fn draw(out: &Path, name: &str, csvs: &[(String, PathBuf)]) -> Result<PathBuf> {
    if csvs.is_empty() {
        bail!("no engine ran");
    }
    let png = out.join(format!("{name}.png"));
    let script = out.join(format!("{name}.gp"));
    std::fs::write(&script, script_text(name, &png, csvs))
        .with_context(|| format!("writing {}", script.display()))?;
    let status = Command::new("gnuplot")
        .arg(&script)
        .status()
        .context("running gnuplot (install it: apt-get install gnuplot-nox)")?;
    if !status.success() {
        bail!("gnuplot failed on {} ({status})", script.display());
    }
    Ok(png)
}

/// gnuplot's string quoting: single quotes, doubled inside.
fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "''"))
}

fn script_text(name: &str, png: &Path, csvs: &[(String, PathBuf)]) -> String {
    let series = |column: &str| {
        csvs.iter()
            .map(|(engine, csv)| {
                format!(
                    "{} using 't_s':'{column}' with lines lw 2 title '{engine}'",
                    quote(csv)
                )
            })
            .collect::<Vec<_>>()
            .join(", \\\n     ")
    };
    format!(
        "set terminal pngcairo size 1100,800 font ',10'\n\
         set output {png}\n\
         set datafile separator ','\n\
         set key autotitle columnhead outside right\n\
         set grid\n\
         set multiplot layout 2,1 title '{name}'\n\
         set ylabel 'MB/s (EWMA)'\n\
         set yrange [0:*]\n\
         plot {rate}\n\
         set ylabel 'usage U'\n\
         set xlabel 'time, s'\n\
         set yrange [0:1.02]\n\
         plot {usage}\n\
         unset multiplot\n",
        png = quote(png),
        rate = series("mb_s_ewma"),
        usage = series("usage"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_names_every_engine_and_quotes_paths() {
        let s = script_text(
            "x",
            Path::new("/o/it's.png"),
            &[
                ("ceiling".into(), "/o/a.csv".into()),
                ("fisherman".into(), "/o/b.csv".into()),
            ],
        );
        assert!(s.contains("set output '/o/it''s.png'"), "{s}");
        assert!(s.contains("'/o/a.csv' using 't_s':'mb_s_ewma' with lines lw 2 title 'ceiling'"));
        assert!(s.contains("'/o/b.csv' using 't_s':'usage' with lines lw 2 title 'fisherman'"));
    }
}
