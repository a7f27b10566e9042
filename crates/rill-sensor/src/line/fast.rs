//! The usual line's fields read in one pass: a field with no backslash
//! and no double quote up to the comma or space that ends it. Anything
//! else (escapes, strings, errors) is left to the full reading, which
//! gives the same for what is read here (a property test keeps them so).

use super::{field_value, FieldValue};

/// Bytes as the fields' reading sees them.
const ORDINARY: u8 = 0;
const EQUALS: u8 = 1;
const END: u8 = 2;
const SPECIAL: u8 = 3;

const CLASS: [u8; 256] = {
    let mut c = [ORDINARY; 256];
    c[b'=' as usize] = EQUALS;
    c[b',' as usize] = END;
    c[b' ' as usize] = END;
    c[b'\\' as usize] = SPECIAL;
    c[b'"' as usize] = SPECIAL;
    c
};

/// The first field of `s` when it is plain: its key, its value, the byte
/// that ended it (`,`, ` ` or none) and the text after that byte. `None`
/// when the full reading must decide (it may be an error).
pub(super) fn field(s: &str) -> Option<(&str, FieldValue<'_>, Option<u8>, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    loop {
        match CLASS[usize::from(*b.get(i)?)] {
            ORDINARY => i += 1,
            EQUALS => break,
            _ => return None,
        }
    }
    if i == 0 {
        return None;
    }
    let key = i;
    i += 1;
    while let Some(&c) = b.get(i) {
        match CLASS[usize::from(c)] {
            END => break,
            SPECIAL => return None,
            _ => i += 1,
        }
    }
    // The key and the value end at ASCII bytes: both are whole str.
    let value = field_value(&s[key + 1..i]).ok()?;
    let (stop, rest) = match b.get(i) {
        Some(&c) => (Some(c), &s[i + 1..]),
        None => (None, ""),
    };
    Some((&s[..key], value, stop, rest))
}

/// A timestamp of up to 18 digits, with a `-` or not (no `+`: InfluxDB
/// refuses it); `None` for anything else (the full reading decides).
pub(super) fn timestamp(s: &str) -> Option<i64> {
    let (neg, digits) = match s.as_bytes().split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s.as_bytes()),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(c - b'0');
    }
    Some(if neg { -v } else { v })
}
