//! Numbers as VictoriaMetrics prints them in its answers: integer digits
//! when whole, else the shortest decimal that reads back to the same
//! double, never an exponent; `NaN`, `+Inf`, `-Inf`. Written straight
//! into the answer: a month of points is thousands of numbers.

/// Appends `f`.
pub(crate) fn push_num(out: &mut String, f: f64) {
    as_text(out, |b| put_num(b, f));
}

/// Appends what `put` writes (ASCII) through a buffer kept by the thread
/// (an export writes a number a value: no allocation each).
fn as_text(out: &mut String, put: impl FnOnce(&mut Vec<u8>)) {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|b| {
        b.clear();
        put(b);
        out.push_str(std::str::from_utf8(b).expect("ASCII"));
    });
}

/// Appends `f` as ASCII bytes (answers are built as bytes and checked as
/// text once, not number by number).
pub(crate) fn put_num(out: &mut Vec<u8>, f: f64) {
    if f.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if f.is_infinite() {
        out.extend_from_slice(if f > 0.0 { b"+Inf" } else { b"-Inf" });
    } else if f == 0.0 {
        out.push(b'0');
    } else if let Some((m, d)) = short_decimal(f) {
        put_decimal(out, m, d);
    } else {
        let mut buf = ryu::Buffer::new();
        plain(out, buf.format_finite(f));
    }
}

/// Powers of ten exact in a double.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// How near `f × 10^d` must be to an integer, relative to it, for the
/// integer over `10^d` to be worth dividing out: 2^-50, four times what
/// the two roundings allow.
const NEAR: f64 = 1.0 / (1u64 << 50) as f64;

/// A sensor's usual reading, a decimal of a few digits, as `m / 10^d`
/// with the fewest decimals `d` (up to 15) that read back to `f`
/// exactly, `|m|` below 2^52. Those digits are then the shortest that
/// read back: fewer decimals do not, and no other number with `d`
/// decimals does either (they are 10^-d apart, more than `f`'s spacing
/// of doubles when `|m| < 2^52`).
fn short_decimal(f: f64) -> Option<(i64, usize)> {
    // The usual reading has at most three decimals: those four tried at
    // once (no test waits on the one before), the first that comes near
    // an integer proven by the division; else one at a time. Below 2^40,
    // `f × 10^3` is far below the limit `near` has.
    if f.abs() < (1u64 << 40) as f64 {
        let tries = [0, 1, 2, 3].map(|d| near(f, d));
        if let Some(d) = tries.iter().position(|t| t.is_some_and(|t| t.1)) {
            let x = tries[d].expect("near").0;
            if x as f64 / POW10[d] == f {
                return Some((x, d));
            }
        }
    }
    for (d, &p) in POW10.iter().enumerate() {
        let (x, close) = near(f, d)?;
        if x.unsigned_abs() >= 1 << 52 {
            return None;
        }
        if close && x as f64 / p == f {
            return Some((x, d));
        }
    }
    None
}

/// `f × 10^d` rounded, and whether it lies near enough that integer for
/// `x / 10^d` to be worth trying: were `x / 10^d` to read back to `f`,
/// `f × 10^d` would lie within a few units of its last place of `x` (the
/// division and the product each round by half a unit at most); farther,
/// the division is not tried (most decimals fewer than `f` has). `None`
/// when `f × 10^d` is 2^52 or more in magnitude (no decimal of `d`
/// digits with a mantissa below 2^52 then, nor of more).
fn near(f: f64, d: usize) -> Option<(i64, bool)> {
    const LIMIT: f64 = (1u64 << 52) as f64;
    let y = f * POW10[d];
    if y.abs() >= LIMIT {
        return None;
    }
    let x = round(y);
    Some((x, (y - x as f64).abs() <= y.abs() * NEAR))
}

/// `y` (below 2^52 in magnitude) to the nearest integer, halves away from
/// zero, as `f64::round` does, without its call into the maths library
/// (x86-64 has no rounding instruction before SSE4.1): the truncation and
/// the remainder are exact at these magnitudes.
fn round(y: f64) -> i64 {
    let t = y as i64;
    let rest = y - t as f64;
    // Without branches: which way a reading rounds is anyone's guess.
    t + i64::from(rest >= 0.5) - i64::from(rest <= -0.5)
}

/// Appends `m / 10^d` in plain digits.
fn put_decimal(out: &mut Vec<u8>, m: i64, d: usize) {
    if m < 0 {
        out.push(b'-');
    }
    let digits = Digits::of(m.unsigned_abs());
    let text = digits.text();
    if d == 0 {
        out.extend_from_slice(text);
    } else if text.len() > d {
        let (int, frac) = text.split_at(text.len() - d);
        out.extend_from_slice(int);
        out.push(b'.');
        out.extend_from_slice(frac);
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (d - text.len()), b'0');
        out.extend_from_slice(text);
    }
}

/// `f` alone.
#[cfg(test)]
pub(crate) fn num(f: f64) -> String {
    let mut s = String::new();
    push_num(&mut s, f);
    s
}

/// Appends a time given in ms as seconds: `ms / 1e3` printed as
/// [`push_num`] prints it.
pub(crate) fn push_ts(out: &mut String, ms: i64) {
    as_text(out, |b| put_ts(b, ms));
}

/// [`push_ts`] as ASCII bytes. Below 10^15 ms (about 31,700 years) a
/// millisecond is exact in the printed digits, so whole seconds and the
/// millisecond digits are written as integers.
pub(crate) fn put_ts(out: &mut Vec<u8>, ms: i64) {
    if ms.unsigned_abs() >= 1_000_000_000_000_000 {
        return put_num(out, ms as f64 / 1e3);
    }
    if ms < 0 {
        out.push(b'-');
    }
    let (s, frac) = (ms.unsigned_abs() / 1000, ms.unsigned_abs() % 1000);
    out.extend_from_slice(Digits::of(s).text());
    if frac != 0 {
        let three = [
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ];
        let keep = if frac % 100 == 0 {
            1
        } else if frac % 10 == 0 {
            2
        } else {
            3
        };
        out.push(b'.');
        out.extend_from_slice(&three[..keep]);
    }
}

/// The two digits of each number below 100.
const PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// A small stack buffer of an integer's digits.
struct Digits {
    buf: [u8; 20],
    at: usize,
}

impl Digits {
    /// `v`'s decimal digits, two at a time.
    fn of(mut v: u64) -> Digits {
        let mut d = Digits {
            buf: [0; 20],
            at: 20,
        };
        while v >= 100 {
            let r = (v % 100) as usize * 2;
            v /= 100;
            d.at -= 2;
            d.buf[d.at..d.at + 2].copy_from_slice(&PAIRS[r..r + 2]);
        }
        if v >= 10 {
            let r = v as usize * 2;
            d.at -= 2;
            d.buf[d.at..d.at + 2].copy_from_slice(&PAIRS[r..r + 2]);
        } else {
            d.at -= 1;
            d.buf[d.at] = b'0' + v as u8;
        }
        d
    }

    fn text(&self) -> &[u8] {
        &self.buf[self.at..]
    }
}

/// Rewrites Ryu's text of a finite, non-zero double (`1.5`, `1e-7`,
/// `1.25e16`, `100.0`) without an exponent and without a trailing `.0`.
fn plain(out: &mut Vec<u8>, s: &str) {
    let (s, neg) = match s.strip_prefix('-') {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    let (mant, exp) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().expect("Ryu's exponent")),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    // value = 0.DIGITS × 10^point
    let mut point = int.len() as i32 + exp;
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    let lead = digits.iter().take_while(|&&b| b == b'0').count();
    digits.drain(..lead);
    point -= lead as i32;
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    if digits.is_empty() {
        out.push(b'0');
        return;
    }
    if neg {
        out.push(b'-');
    }
    let text = &digits[..];
    let n = digits.len() as i32;
    if point <= 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-point) as usize, b'0');
        out.extend_from_slice(text);
    } else if point >= n {
        out.extend_from_slice(text);
        out.resize(out.len() + (point - n) as usize, b'0');
    } else {
        out.extend_from_slice(&text[..point as usize]);
        out.push(b'.');
        out.extend_from_slice(&text[point as usize..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The rounding is `f64::round`'s, below 2^52.
        #[test]
        fn rounding_is_the_standard_one(y in -4.6e15f64..4.6e15, halves in -1000i64..1000) {
            for y in [y, halves as f64 / 2.0, y.trunc() + 0.5, y.trunc() - 0.5] {
                prop_assert_eq!(round(y) as f64, y.round(), "{}", y);
            }
        }
    }

    /// What Rust's own formatting prints (shortest, no exponent), as the
    /// answers printed before Ryu was used.
    fn reference(f: f64) -> String {
        if f.is_nan() {
            "NaN".into()
        } else if f.is_infinite() {
            if f > 0.0 { "+Inf" } else { "-Inf" }.into()
        } else if f == 0.0 {
            "0".into()
        } else {
            format!("{f}")
        }
    }

    #[test]
    fn numbers_print_as_victoriametrics_prints_them() {
        for (f, want) in [
            (2.0, "2"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (-21.37, "-21.37"),
            (1e-7, "0.0000001"),
            (1e15, "1000000000000000"),
            (1.5e22, "15000000000000000000000"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
            (f64::MIN_POSITIVE, &reference(f64::MIN_POSITIVE)),
            (f64::MAX, &reference(f64::MAX)),
        ] {
            assert_eq!(num(f), want, "{f:e}");
        }
    }

    #[test]
    fn times_print_as_seconds() {
        let ts = |ms| {
            let mut s = String::new();
            push_ts(&mut s, ms);
            s
        };
        assert_eq!(ts(1_700_000_000_500), "1700000000.5");
        assert_eq!(ts(1_700_000_000_000), "1700000000");
        assert_eq!(ts(1_700_000_000_007), "1700000000.007");
        assert_eq!(ts(0), "0");
        assert_eq!(ts(-1_500), "-1.5");
    }

    /// `got` is what `f` should print as: plain digits that read back to
    /// `f`, no longer than Rust's own shortest (which may round a tie the
    /// other way).
    fn reads_back(got: &str, f: f64) -> Result<(), TestCaseError> {
        let want = reference(f);
        prop_assert!(!got.contains(['e', 'E']), "{}", got);
        prop_assert!(got.len() <= want.len(), "{} vs {}", got, want);
        match got {
            "NaN" => prop_assert!(f.is_nan()),
            "+Inf" => prop_assert_eq!(f, f64::INFINITY),
            "-Inf" => prop_assert_eq!(f, f64::NEG_INFINITY),
            _ => prop_assert_eq!(got.parse::<f64>().unwrap(), if f == 0.0 { 0.0 } else { f }),
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn any_double_prints_plain_and_shortest(bits in any::<u64>()) {
            let f = f64::from_bits(bits);
            reads_back(&num(f), f)?;
        }

        #[test]
        fn decimals_print_as_rust_prints_them(m in -10_000_000i64..10_000_000, e in 0i32..12) {
            let f = m as f64 / 10f64.powi(e);
            prop_assert_eq!(num(f), reference(f));
        }

        /// Mantissas near the fast path's limit, at every exponent.
        #[test]
        fn long_decimals_print_shortest(m in (1i64 << 50)..(1i64 << 53), d in 0usize..16, neg in any::<bool>()) {
            let f = if neg { -(m as f64) } else { m as f64 } / POW10[d];
            reads_back(&num(f), f)?;
        }

        #[test]
        fn times_print_as_their_seconds_would(
            ms in prop_oneof![any::<i64>(), -2_000_000_000_000_000i64..2_000_000_000_000_000],
        ) {
            let mut s = String::new();
            push_ts(&mut s, ms);
            reads_back(&s, ms as f64 / 1e3)?;
            if ms.unsigned_abs() < 1_000_000_000_000_000 {
                prop_assert_eq!(s, reference(ms as f64 / 1e3));
            }
        }
    }
}
