//! PNG plots of a run, drawn by gnuplot from its CSV files: one panel per
//! column, one line per engine, over time (`t_s`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One panel: a CSV column, its axis label, the top of its axis (`None`:
/// as the data goes).
pub struct Panel<'a> {
    pub column: &'a str,
    pub label: &'a str,
    pub max: Option<f64>,
}

/// Writes `<name>.gp` and runs gnuplot on it; returns the PNG's path.
pub fn draw(
    out: &Path,
    name: &str,
    csvs: &[(String, PathBuf)],
    panels: &[Panel],
) -> Result<PathBuf> {
    draw_over(out, name, csvs, panels, ("t_s", "time, s"))
}

/// [`draw`] over another column than time: `x` is the column and its
/// axis label.
pub fn draw_over(
    out: &Path,
    name: &str,
    csvs: &[(String, PathBuf)],
    panels: &[Panel],
    x: (&str, &str),
) -> Result<PathBuf> {
    if csvs.is_empty() {
        bail!("no engine ran");
    }
    let png = out.join(format!("{name}.png"));
    let script = out.join(format!("{name}.gp"));
    std::fs::write(&script, script_text(name, &png, csvs, panels, x))
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

fn script_text(
    name: &str,
    png: &Path,
    csvs: &[(String, PathBuf)],
    panels: &[Panel],
    (x, x_label): (&str, &str),
) -> String {
    // Points only where there are few: a size per point, not a time line.
    let style = if x == "t_s" { "lines" } else { "linespoints" };
    let series = |column: &str| {
        csvs.iter()
            .map(|(engine, csv)| {
                format!(
                    "{} using '{x}':'{column}' with {style} lw 2 title '{engine}'",
                    quote(csv)
                )
            })
            .collect::<Vec<_>>()
            .join(", \\\n     ")
    };
    let mut s = format!(
        "set terminal pngcairo size 1100,{} font ',10'\n\
         set output {}\n\
         set datafile separator ','\n\
         set key autotitle columnhead outside right\n\
         set grid\n\
         set multiplot layout {},1 title '{name}'\n",
        400 * panels.len().max(1),
        quote(png),
        panels.len().max(1),
    );
    if x != "t_s" {
        s.push_str("set xtics 1\n");
    }
    for (i, p) in panels.iter().enumerate() {
        if i + 1 == panels.len() {
            s.push_str(&format!("set xlabel '{x_label}'\n"));
        }
        let top = p.max.map_or("*".to_string(), |m| m.to_string());
        s.push_str(&format!(
            "set ylabel '{}'\nset yrange [0:{top}]\nplot {}\n",
            p.label,
            series(p.column)
        ));
    }
    s.push_str("unset multiplot\n");
    s
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
            &[
                Panel {
                    column: "mb_s_ewma",
                    label: "MB/s",
                    max: None,
                },
                Panel {
                    column: "usage",
                    label: "usage U",
                    max: Some(1.02),
                },
            ],
            ("t_s", "time, s"),
        );
        assert!(s.contains("set output '/o/it''s.png'"), "{s}");
        assert!(s.contains("'/o/a.csv' using 't_s':'mb_s_ewma' with lines lw 2 title 'ceiling'"));
        assert!(s.contains("'/o/b.csv' using 't_s':'usage' with lines lw 2 title 'fisherman'"));
    }
}
