use super::*;

fn one(line: &str) -> Point<'_> {
    let (mut p, e) = parse(line);
    assert!(e.is_empty(), "{e:?}");
    assert_eq!(p.len(), 1);
    p.remove(0)
}

fn bad(line: &str) -> String {
    let (p, e) = parse(line);
    assert!(p.is_empty(), "{p:?}");
    assert_eq!(e.len(), 1);
    format!("{}: '{}'", e[0].reason, e[0].excerpt)
}

#[test]
fn a_full_line() {
    let p = one(
        "weather,location=us-midwest,season=summer temperature=82,humidity=71i 1465839830100400200",
    );
    assert_eq!(p.measurement, "weather");
    assert_eq!(p.tags.len(), 2);
    assert_eq!((&*p.tags[1].0, &*p.tags[1].1), ("season", "summer"));
    assert_eq!(p.fields[0], ("temperature".into(), FieldValue::Float(82.0)));
    assert_eq!(p.fields[1], ("humidity".into(), FieldValue::Int(71)));
    assert_eq!(p.timestamp, Some(1465839830100400200));
}

#[test]
fn escapes_as_influxdb() {
    let p = one(r#"my\ meas\,ure,tag\ key=tag\,val\=ue field\=key="say \"hi\" \\ \n",other=1 -5"#);
    assert_eq!(p.measurement, "my meas,ure");
    assert_eq!((&*p.tags[0].0, &*p.tags[0].1), ("tag key", "tag,val=ue"));
    assert_eq!(p.fields[0].0, "field=key");
    assert_eq!(p.fields[0].1, FieldValue::Str(r#"say "hi" \ \n"#.into()));
    assert_eq!(p.fields[1].1, FieldValue::Float(1.0));
    assert_eq!(p.timestamp, Some(-5));
    // A backslash before anything else is itself.
    assert_eq!(one(r"a\b x=1").measurement, r"a\b");
}

#[test]
fn strings_hold_spaces_commas_and_equals() {
    let p = one(r#"m s="a, b=c d",n=2u 7"#);
    assert_eq!(p.fields[0].1, FieldValue::Str("a, b=c d".into()));
    assert_eq!(p.fields[1].1, FieldValue::UInt(2));
    assert_eq!(p.timestamp, Some(7));
}

#[test]
fn booleans_and_no_timestamp() {
    let p = one("m a=t,b=FALSE,c=True,d=f");
    let v: Vec<_> = p.fields.iter().map(|f| f.1.clone()).collect();
    assert_eq!(v, [true, false, true, false].map(FieldValue::Bool).to_vec());
    assert_eq!(p.timestamp, None);
}

#[test]
fn comments_blank_lines_and_crlf() {
    let (p, e) = parse("# a comment\n\ncpu v=1 1\r\n  \ncpu v=2 2\n");
    assert!(e.is_empty());
    assert_eq!(p.len(), 2);
    assert_eq!(p[1].timestamp, Some(2));
}

#[test]
fn bad_lines_say_why_and_where() {
    assert!(bad("cpu").contains("missing fields"));
    assert!(bad(",t=1 v=1").contains("missing measurement"));
    assert!(bad("cpu,t v=1").contains("tag"));
    assert!(bad("cpu v=").contains("without a value"));
    assert!(bad("cpu v=abc").contains("bad field value"));
    assert!(bad("cpu v=inf").contains("bad field value"));
    assert!(bad("cpu v=NaN").contains("bad field value"));
    assert!(bad("cpu v=99999999999999999999i").contains("bad integer"));
    assert!(bad("cpu v=1 12x").contains("bad timestamp"));
    assert!(bad(r#"cpu v="open"#).contains("unterminated"));
    let (p, e) = parse("cpu v=1 1\ncpu v=x 2\ncpu v=3 3");
    assert_eq!(p.len(), 2);
    assert_eq!(e[0].line, 2);
    assert!(
        e[0].to_string().starts_with("line 2: bad field value"),
        "{}",
        e[0]
    );
}

#[test]
fn a_long_bad_line_is_cut_in_its_error() {
    let line = format!("cpu v={}", "x".repeat(500));
    assert!(bad(&line).len() < 200);
}

#[test]
fn backslashes_as_influxdbs_corpus() {
    // Cases of influxdata/line-protocol-corpus.
    let p = one(r"cpu,regions=\\ east v=1");
    assert_eq!((&*p.tags[0].0, &*p.tags[0].1), ("regions", r"\ east"));
    let p = one(r"u,s=\\,\,\t v=1");
    assert_eq!(&*p.tags[0].1, r"\,,\t");
    assert!(bad(r"m,path=C:\\ v=1").contains("missing fields"));
    let p = one(r#"m f\"k=1"#);
    assert_eq!(p.fields[0].0, r#"f"k"#);
}

#[test]
fn plus_signs_and_escaped_closing_quotes_are_refused() {
    assert!(bad("m v=+1").contains("bad field value"));
    assert!(bad("m v=+1i").contains("bad field value"));
    assert!(bad("m v=1 +5").contains("bad timestamp"));
    assert!(bad(r#"m s="abc\""#).contains("unterminated"));
    let p = one(r#"m s="abc\\""#);
    assert_eq!(p.fields[0].1, FieldValue::Str(r"abc\".into()));
}

proptest::proptest! {
    /// The one-pass reading of a plain decimal gives exactly the double
    /// Rust's own parsing gives, and declines what it cannot read so.
    #[test]
    fn plain_decimals_read_as_rust_reads_them(
        neg in proptest::bool::ANY,
        int in "[0-9]{0,17}",
        frac in proptest::option::of("[0-9]{0,17}"),
    ) {
        let text = format!("{}{int}{}", if neg { "-" } else { "" }, frac.map(|f| format!(".{f}")).unwrap_or_default());
        let digits = text.bytes().filter(u8::is_ascii_digit).count();
        match plain_decimal(text.as_bytes()) {
            Some(f) => {
                let want: f64 = text.parse().unwrap();
                proptest::prop_assert_eq!(f.to_bits(), want.to_bits(), "{}", text);
                proptest::prop_assert!(digits <= 15);
            }
            None => proptest::prop_assert!(digits == 0 || digits > 15, "{}", text),
        }
    }

    /// Any value text gives the field value it gave before the one-pass
    /// reading (the full parse alone).
    #[test]
    fn field_values_are_as_the_full_parse_gives(v in "[-+0-9.eEi]{0,12}") {
        let slow = |v: &str| -> Option<f64> {
            let plain = v.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E'));
            v.parse::<f64>().ok().filter(|f| plain && f.is_finite() && !v.starts_with('+'))
        };
        if let Some(f) = plain_decimal(v.as_bytes()) {
            proptest::prop_assert_eq!(Some(f.to_bits()), slow(&v).map(f64::to_bits), "{}", v);
        }
    }
}

/// The fields' full reading alone, as it was before the one-pass reading
/// of plain fields: the reference that reading must agree with.
type Fields<'a> = (Vec<(String, FieldValue<'a>)>, Option<i64>);

fn fields_by_the_full_reading(rest: &str) -> Result<Fields<'_>, ParseError> {
    let mut fields = Vec::new();
    let mut left = rest.trim_start_matches(' ');
    loop {
        let (kv, s, r, esc) = take(left, b", ", None, true);
        let (k, v) = split_eq(kv, None).ok_or(ParseError::FieldWithoutEquals)?;
        if k.is_empty() {
            return Err(ParseError::EmptyFieldKey);
        }
        fields.push((
            unescape(k, esc, FIELD_KEY_ESCAPES).into_owned(),
            field_value(v)?,
        ));
        left = r;
        if s != Some(b',') {
            break;
        }
    }
    let ts = left.trim_matches(' ');
    let ts = if ts.is_empty() {
        None
    } else if ts.starts_with('+') {
        return Err(ParseError::BadTimestamp { found: short(ts) });
    } else {
        Some(
            ts.parse::<i64>()
                .map_err(|_| ParseError::BadTimestamp { found: short(ts) })?,
        )
    };
    Ok((fields, ts))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// Fields read with the one-pass reading of plain fields are what the
    /// full reading alone gives, errors included.
    #[test]
    fn plain_fields_read_as_the_full_reading_reads_them(
        parts in proptest::collection::vec(
            proptest::prop_oneof![
                "[a-c]{1,3}=-?[0-9]{1,6}(\\.[0-9]{0,4})?",
                "[a-c]{1,3}=[0-9]{1,4}[iu]",
                "[a-c]{1,3}=(t|true|F|false)",
                "[a-c]{1,3}=\"[a-c ,=\\\\]{0,4}\"",
                "[a-c\"\\\\]{1,3}=[0-9]{1,2}",
                "[a-c=\\\\ ,\"0-9.\\-+ie]{0,8}",
            ],
            1..5,
        ),
        seps in proptest::collection::vec("[, ]{1,2}", 5),
        ts in proptest::option::of("-?\\+?[0-9]{0,20}"),
    ) {
        let mut text = String::new();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                text.push_str(&seps[i]);
            }
            text.push_str(p);
        }
        if let Some(t) = ts {
            text.push(' ');
            text.push_str(&t);
        }
        let mut fields = Vec::new();
        let got = parse_fields(&text, &mut fields)
            .map(|ts| (fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<Vec<_>>(), ts));
        let want = fields_by_the_full_reading(&text);
        proptest::prop_assert_eq!(got, want, "{:?}", text);
    }
}
