//! Figures: printed as they are measured, then all at once as one JSON line.

use std::fmt::Write;

pub enum Value {
    Num(f64),
    Int(u64),
    Bool(bool),
    Text(String),
}

#[derive(Default)]
pub struct Report {
    fields: Vec<(String, Value)>,
}

impl Report {
    pub fn new(bench: &str, quick: bool) -> Report {
        let mut r = Report::default();
        r.fields.push(("bench".into(), Value::Text(bench.into())));
        r.fields.push(("quick".into(), Value::Bool(quick)));
        r
    }

    /// Records a figure and prints it with a label.
    pub fn num(&mut self, name: &str, value: f64, label: &str) {
        println!("{label:<52} {value:>12.2}   ({name})");
        let value = if value.is_finite() { value } else { 0.0 };
        self.fields.push((name.into(), Value::Num(value)));
    }

    pub fn int(&mut self, name: &str, value: u64, label: &str) {
        println!("{label:<52} {value:>12}   ({name})");
        self.fields.push((name.into(), Value::Int(value)));
    }

    /// Records a figure printed another way.
    pub fn record(&mut self, name: &str, value: f64) {
        let value = if value.is_finite() { value } else { 0.0 };
        self.fields.push((name.into(), Value::Num(value)));
    }

    pub fn text(&mut self, name: &str, value: &str) {
        self.fields.push((name.into(), Value::Text(value.into())));
    }

    pub fn json(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:", quote(k));
            match v {
                Value::Num(x) => {
                    let _ = write!(out, "{}", (x * 1000.0).round() / 1000.0);
                }
                Value::Int(x) => {
                    let _ = write!(out, "{x}");
                }
                Value::Bool(b) => {
                    let _ = write!(out, "{b}");
                }
                Value::Text(s) => out.push_str(&quote(s)),
            }
        }
        out.push('}');
        out
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_well_formed() {
        let mut r = Report::new("engine", true);
        r.num("x_mb_s", 1.23456, "x");
        r.num("nan", f64::NAN, "nan");
        r.int("n", 7, "n");
        r.text("cpu", "a \"quoted\" cpu\n");
        assert_eq!(
            r.json(),
            r#"{"bench":"engine","quick":true,"x_mb_s":1.235,"nan":0,"n":7,"cpu":"a \"quoted\" cpu\u000a"}"#
        );
    }
}
