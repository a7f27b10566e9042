//! One setting, described once: its key, the kind of value it takes (and
//! so its validation and unit), its default, its help, and where its
//! value goes. The key list of `rill chkconfig --keys`, docs/settings.md,
//! the defaults and the parser all come from the tables of these
//! (`node`, `cluster`, `backends`, `sensor`).

use super::units::{bytesize, duration};
use super::Config;
use std::net::SocketAddr;
use std::time::Duration;

/// The kind of value a setting takes, with its bounds.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Bytes, written with `KB`, `MB`, `GB`, `TB` (powers of 1,024).
    Size { min: u64, max: u64 },
    /// A duration, written with `us`, `ms`, `s`, `m`, `h`, `d`, `w`.
    Duration { min: Duration, max: Duration },
    /// A whole number.
    Count { min: u64, max: u64 },
    /// A number from 0 to 1.
    Share,
    /// A number from `min` to 100.
    Percent { min: f64 },
    /// `on` or `off` (`true` and `false` too).
    OnOff,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// `ip:port`.
    Address,
    /// A filesystem path.
    Path,
    /// Any text that is not empty.
    Text,
}

impl Kind {
    /// What the kind takes, for the key list and for errors.
    pub fn describe(&self) -> String {
        match *self {
            Kind::Size { min, max } => format!(
                "a size from {} to {}",
                super::units::show_conf_size(min),
                super::units::show_conf_size(max)
            ),
            Kind::Duration { min, max } if max == Duration::MAX && min.is_zero() => {
                "a duration".into()
            }
            Kind::Duration { min, max } if max == Duration::MAX => {
                format!("a duration of at least {}", show_duration(min))
            }
            Kind::Duration { min, max } => {
                format!(
                    "a duration from {} to {}",
                    show_duration(min),
                    show_duration(max)
                )
            }
            Kind::Count { min, max } => format!("an integer from {min} to {max}"),
            Kind::Share => "a number between 0 and 1".into(),
            Kind::Percent { min } => format!("a percentage from {min} to 100"),
            Kind::OnOff => "on or off".into(),
            Kind::Choice(words) => one_of(words),
            Kind::Address => "an address such as 127.0.0.1:8087".into(),
            Kind::Path => "a path".into(),
            Kind::Text => "text".into(),
        }
    }
}

/// A bound of a duration setting: `1us`, `500ms`, `3s`, `1d`.
fn show_duration(d: Duration) -> String {
    let us = d.as_micros();
    for (unit, n) in [
        ("d", 86_400_000_000u128),
        ("h", 3_600_000_000),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
    ] {
        if us >= n && us.is_multiple_of(n) {
            return format!("{}{unit}", us / n);
        }
    }
    format!("{us}us")
}

/// `a, b or c` (an empty word shown as `""`).
pub fn one_of(words: &[&str]) -> String {
    let words: Vec<&str> = words
        .iter()
        .map(|w| if w.is_empty() { "\"\"" } else { *w })
        .collect();
    match words.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// A setting's default.
#[derive(Clone, Copy, Debug)]
pub enum Initial {
    /// This value, applied by [`Config::defaults`] as if it were written.
    Value(&'static str),
    /// Unset; the text says what that means.
    Unset(&'static str),
}

/// A value parsed by its setting's kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Bytes(u64),
    Duration(Duration),
    Count(u64),
    Number(f64),
    On(bool),
    Address(SocketAddr),
    /// A choice, a path or text, as written (trimmed).
    Text(&'a str),
    /// One of the setting's own words (`off`, `auto`...).
    Word(&'a str),
}

/// What a setting's `apply` gets: the whole key (for messages), the name
/// its key's `NAME` or `DB` stood for, and the value.
pub struct Arg<'a> {
    pub key: &'a str,
    pub name: &'a str,
    pub value: Value<'a>,
}

impl Arg<'_> {
    pub fn word(&self) -> Option<&str> {
        match self.value {
            Value::Word(w) => Some(w),
            _ => None,
        }
    }

    fn wrong(&self) -> ! {
        unreachable!(
            "{}: the table gave {:?} to an apply of another kind",
            self.key, self.value
        )
    }

    pub fn bytes(&self) -> u64 {
        match self.value {
            Value::Bytes(b) => b,
            _ => self.wrong(),
        }
    }

    pub fn duration(&self) -> Duration {
        match self.value {
            Value::Duration(d) => d,
            _ => self.wrong(),
        }
    }

    pub fn count(&self) -> u64 {
        match self.value {
            Value::Count(n) => n,
            _ => self.wrong(),
        }
    }

    pub fn number(&self) -> f64 {
        match self.value {
            Value::Number(x) => x,
            _ => self.wrong(),
        }
    }

    pub fn on(&self) -> bool {
        match self.value {
            Value::On(on) => on,
            _ => self.wrong(),
        }
    }

    pub fn address(&self) -> SocketAddr {
        match self.value {
            Value::Address(a) => a,
            _ => self.wrong(),
        }
    }

    pub fn text(&self) -> &str {
        match self.value {
            Value::Text(t) => t,
            _ => self.wrong(),
        }
    }
}

/// Where a setting's value goes once parsed: any further check, then the
/// field. An error is a sentence naming the key.
pub type Apply = fn(&mut Config, &Arg<'_>) -> Result<(), String>;

/// One setting of the config file.
pub struct Setting {
    /// The key; a `NAME` or `DB` part stands for a name the operator
    /// chooses (`multi_backend.NAME.storage_backend`).
    pub key: &'static str,
    pub kind: Kind,
    /// Words taken besides the kind's values (`off`, `auto`).
    pub words: &'static [&'static str],
    pub default: Initial,
    pub help: &'static str,
    pub apply: Apply,
}

impl Setting {
    /// Parses `v` as this setting takes it.
    pub fn parse<'v>(&self, key: &str, v: &'v str) -> Result<Value<'v>, String> {
        let v = v.trim();
        if self.words.contains(&v) {
            return Ok(Value::Word(v));
        }
        let bad = || format!("{key} must be {}, found {v:?}", takes(self));
        Ok(match self.kind {
            Kind::Size { min, max } => {
                let b = bytesize(v).map_err(|e| format!("{key}: {e}"))?;
                if !(min..=max).contains(&b) {
                    return Err(bad());
                }
                Value::Bytes(b)
            }
            Kind::Duration { min, max } => {
                let d = duration(v).map_err(|e| format!("{key}: {e}"))?;
                if !(min..=max).contains(&d) {
                    return Err(bad());
                }
                Value::Duration(d)
            }
            Kind::Count { min, max } => match v.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Value::Count(n),
                _ => return Err(bad()),
            },
            Kind::Share => match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => Value::Number(x),
                _ => return Err(bad()),
            },
            Kind::Percent { min } => match v.parse::<f64>() {
                Ok(x) if (min..=100.0).contains(&x) => Value::Number(x),
                _ => return Err(bad()),
            },
            Kind::OnOff => match v {
                "on" | "true" => Value::On(true),
                "off" | "false" => Value::On(false),
                _ => return Err(bad()),
            },
            Kind::Choice(words) if words.contains(&v) => Value::Text(v),
            Kind::Choice(_) => return Err(bad()),
            Kind::Address => Value::Address(v.parse().map_err(|_| bad())?),
            Kind::Path | Kind::Text if v.is_empty() => return Err(bad()),
            Kind::Path | Kind::Text => Value::Text(v),
        })
    }

    /// The part of `key` this setting's `NAME`/`DB` stands for (empty for
    /// a plain key); `None` when `key` is not this setting's.
    pub fn matches<'k>(&self, key: &'k str) -> Option<&'k str> {
        let Some((prefix, rest)) = split_pattern(self.key) else {
            return (self.key == key).then_some("");
        };
        let name_and_rest = key.strip_prefix(prefix)?;
        let name = match rest {
            "" => name_and_rest,
            rest => name_and_rest.strip_suffix(rest)?,
        };
        // A name inside a key (multi_backend.NAME.x) holds no dot; one
        // that ends it (sensor.retention.DB) may.
        (!name.is_empty() && (rest.is_empty() || !name.contains('.'))).then_some(name)
    }

    /// Whether the key holds a `NAME` or `DB` the operator chooses.
    #[cfg(test)]
    pub fn is_pattern(&self) -> bool {
        split_pattern(self.key).is_some()
    }

    /// The default as the key list shows it.
    pub fn default_text(&self) -> &'static str {
        match self.default {
            Initial::Value(v) | Initial::Unset(v) => v,
        }
    }
}

/// `(text before NAME/DB, text after it)` of a pattern key.
fn split_pattern(key: &str) -> Option<(&str, &str)> {
    ["NAME", "DB"].iter().find_map(|p| {
        let at = key.find(p)?;
        Some((&key[..at], &key[at + p.len()..]))
    })
}

/// Every setting, by subject.
pub fn all() -> impl Iterator<Item = &'static Setting> {
    super::node::SETTINGS
        .iter()
        .chain(super::cluster::SETTINGS)
        .chain(super::backends::SETTINGS)
        .chain(super::sensor::SETTINGS)
        .chain(super::aae::SETTINGS)
}

/// The setting `key` names, with the name its pattern matched (or, for
/// `multi_backend.NAME.<key>` of a key a named backend takes too, NAME).
pub fn find(key: &str) -> Option<(&'static Setting, &str)> {
    if let Some(found) = all().find_map(|s| s.matches(key).map(|name| (s, name))) {
        return Some(found);
    }
    let (name, rest) = key.strip_prefix("multi_backend.")?.split_once('.')?;
    if name.is_empty() || !super::backends::PER_BACKEND.contains(&rest) {
        return None;
    }
    all().find(|s| s.key == rest).map(|s| (s, name))
}

/// The help of a setting as listed: with the named-backend form of a key
/// a named backend takes too.
pub fn help(s: &Setting) -> String {
    if super::backends::PER_BACKEND.contains(&s.key) {
        format!(
            "{} (also a named backend's: multi_backend.NAME.{})",
            s.help, s.key
        )
    } else {
        s.help.to_string()
    }
}

/// What a setting takes, as listed.
pub fn takes(s: &Setting) -> String {
    match s.words {
        [] => s.kind.describe(),
        words => format!("{}, or {}", s.kind.describe(), one_of(words)),
    }
}

/// The settings as `rill chkconfig --keys` lists them.
pub fn listing() -> String {
    all()
        .map(|s| {
            format!(
                "{}\n    takes {}; default {}\n    {}\n",
                s.key,
                takes(s),
                s.default_text(),
                help(s)
            )
        })
        .collect()
}

/// The settings as a Markdown table (docs/settings.md).
pub fn markdown() -> String {
    let mut out = String::from("| key | takes | default | what it does |\n|---|---|---|---|\n");
    let cell = |t: &str| t.replace('|', "\\|");
    for s in all() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            s.key,
            cell(&takes(s)),
            cell(s.default_text()),
            cell(&help(s))
        ));
    }
    out
}
