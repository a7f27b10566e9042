//! The sensor page through the real binary, in headless Chromium
//! (Debian's `chromium`, which scripts/test-all installs): the page
//! loads, finds a series, draws it (the min/max band per pixel, a gap
//! where data is missing), zooms when dragged across, and a screenshot
//! is kept (target/tmp/sensor-page.png); in two time zones, it shows and
//! takes times in the browser's zone or in UTC, pages through every
//! series before a word is typed, and keeps its toolbar on one line
//! beside a long series name (screenshots target/tmp/sensor-page-*.png).

mod common;

use common::sensor::{enc, now_s};
use common::Node;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chromium is not installed: run scripts/test-all, or apt-get install chromium")
}

/// Runs headless Chromium on `url` with `args`, bounded in time.
fn browse(url: &str, args: &[&str]) -> String {
    browse_in(None, url, args)
}

/// [`browse`] with the browser in time zone `tz` (an IANA name).
fn browse_in(tz: Option<&str>, url: &str, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium());
    if let Some(tz) = tz {
        cmd.env("TZ", tz);
    }
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        "--virtual-time-budget=15000",
        "--window-size=1280,800",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .arg(url)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("chromium starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s on {url}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of attribute `name` of the `<body>` in a dumped DOM.
fn body_attr(dom: &str, name: &str) -> Option<String> {
    let body = &dom[dom.find("<body")?..];
    let tag = &body[..body.find('>')?];
    let at = tag.find(&format!("{name}=\""))? + name.len() + 2;
    Some(tag[at..at + tag[at..].find('"')?].to_string())
}

#[test]
fn the_sensor_page_draws_and_zooms_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "sensor.window = 10m\nsensor.grace = 1s");
    // Two hours of a temperature every 10 s, with 20 minutes missing.
    let end = now_s() - 60;
    let start = end - 7200;
    let mut body = String::new();
    for t in (start..=end).step_by(10) {
        if (start + 3000..start + 4200).contains(&t) {
            continue;
        }
        let x = (t - start) as f64 / 600.0;
        body.push_str(&format!(
            "boiler,unit=7 temp={:.2} {t}\n",
            60.0 + 8.0 * x.sin() + ((t * 7919) % 13) as f64 / 10.0
        ));
    }
    let r = n
        .http("POST", "/write?db=plant&precision=s", &[], body.as_bytes())
        .unwrap();
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));

    // The page's files and reads.
    let page = n.http("GET", "/sensors", &[], b"").unwrap();
    assert_eq!(page.status, 200);
    assert!(String::from_utf8_lossy(&page.body).contains("/sensors/uplot.min.js"));
    for f in [
        "uplot.min.js",
        "uplot.min.css",
        "sensors.js",
        "uplot-LICENSE.txt",
    ] {
        let r = n.http("GET", &format!("/sensors/{f}"), &[], b"").unwrap();
        assert_eq!(r.status, 200, "{f}");
        assert!(r.body.len() > 100, "{f}");
    }
    let r = n
        .http("GET", "/rill/sensors/search?q=BOILER%20unit", &[], b"")
        .unwrap();
    let found: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let key = found["series"][0]
        .as_str()
        .expect("the series is found")
        .to_string();
    assert_eq!(key, "boiler_temp{db=\"plant\",unit=\"7\"}");
    let m4 = format!(
        "/rill/sensors/m4?series={}&start={}&end={}&width=120",
        enc(&key),
        start * 1000,
        (end + 1) * 1000
    );
    let r = n.http("GET", &m4, &[], b"").unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let (t, last) = (v["t"].as_array().unwrap(), v["last"].as_array().unwrap());
    // A point a minute where there are samples, and one gap: the 20
    // minutes missing.
    let gaps: Vec<f64> = t
        .iter()
        .zip(last)
        .filter(|(_, x)| x.is_null())
        .map(|(t, _)| t.as_f64().unwrap())
        .collect();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert!(
        ((start + 3000) as f64..(start + 4200) as f64).contains(&gaps[0]),
        "the gap at {} of {start}..{end}",
        gaps[0]
    );
    assert!(
        (98..=102).contains(&(last.len() - 1)),
        "{} points",
        last.len()
    );
    assert_eq!(
        v["samples"].as_u64().unwrap() as usize,
        body.lines().count()
    );
    let (mins, maxs) = (v["min"].as_array().unwrap(), v["max"].as_array().unwrap());
    assert!(mins
        .iter()
        .zip(maxs)
        .all(|(a, b)| a.is_null() == b.is_null()
            && (a.is_null() || a.as_f64().unwrap() <= b.as_f64().unwrap())));
    assert!(
        t.windows(2).all(|w| w[0].as_f64() < w[1].as_f64()),
        "times rise"
    );

    // Zoomed out to four pixels, the stored blocks (a window of 10
    // minutes each) are summed up from their headers, not decoded.
    common::until("blocks stored", Duration::from_secs(30), || {
        n.stats()["sensor_blocks_stored_total"]
            .as_u64()
            .unwrap_or(0)
            >= 10
    });
    let wide = m4.replace("width=120", "width=4");
    let r = n.http("GET", &wide, &[], b"").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert!(v["blocks_from_headers"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(
        v["samples"].as_u64().unwrap() as usize,
        body.lines().count()
    );

    // In the browser: drawn, then zoomed by a drag across the middle.
    let url = format!(
        "http://{}/sensors#series={}&from={}&to={}",
        n.http,
        enc(&key),
        start * 1000,
        (end + 1) * 1000
    );
    let dom = browse(&url, &["--dump-dom"]);
    assert_eq!(
        body_attr(&dom, "data-state").as_deref(),
        Some("drawn"),
        "{dom}"
    );
    let drawn: usize = body_attr(&dom, "data-samples").unwrap().parse().unwrap();
    assert_eq!(drawn, body.lines().count());
    assert!(dom.contains("<canvas"), "the chart is drawn on a canvas");
    let zoom_url = url.replacen("/sensors#", "/sensors?selftest=zoom#", 1);
    let dom = browse(&zoom_url, &["--dump-dom"]);
    assert_eq!(
        body_attr(&dom, "data-state").as_deref(),
        Some("zoomed"),
        "{dom}"
    );
    let from: i64 = body_attr(&dom, "data-from").unwrap().parse().unwrap();
    let to: i64 = body_attr(&dom, "data-to").unwrap().parse().unwrap();
    let (s_ms, e_ms) = (start * 1000, (end + 1) * 1000);
    let span = e_ms - s_ms;
    assert!(
        from > s_ms + span / 5 && to < e_ms - span / 5 && to > from,
        "zoomed to {from}..{to} of {s_ms}..{e_ms}"
    );
    let zoomed: usize = body_attr(&dom, "data-samples").unwrap().parse().unwrap();
    assert!(zoomed > 0 && zoomed < drawn, "{zoomed} of {drawn} samples");

    // The screenshot, kept.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sensor-page.png");
    let _ = std::fs::remove_file(&shot);
    browse(&url, &[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}

/// A wall time of `ms` at `offset_min` minutes from UTC, as a
/// datetime-local input holds it (seconds left out when 0).
fn wall(ms: i64, offset_min: i64) -> String {
    let t = rill_api::http::util::rfc3339(ms / 1000 + offset_min * 60);
    let t = t.trim_end_matches('Z');
    t.strip_suffix(":00").unwrap_or(t).to_string()
}

#[test]
fn the_sensor_page_keeps_one_time_zone_pages_series_and_a_long_name() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    // 60 rooms a sample a minute for two hours, and one sensor of a very
    // long name.
    let end = now_s() / 60 * 60 - 60;
    let start = end - 7200;
    let long = format!("site_{}", "north_wing_".repeat(25));
    let mut body = String::new();
    for t in (start..=end).step_by(60) {
        for room in 0..60 {
            body.push_str(&format!("room,room=r{room:02} temp=21.5 {t}\n"));
        }
        body.push_str(&format!("hall,site={long} temp=19 {t}\n"));
    }
    let r = n
        .http("POST", "/write?db=home&precision=s", &[], body.as_bytes())
        .unwrap();
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let key = "room_temp{db=\"home\",room=\"r07\"}";
    let (from, to) = ((start + 600) * 1000, (end - 600) * 1000);
    let page = |query: &str, hash: &str| {
        format!(
            "http://{}/sensors{query}#series={}&from={from}&to={to}{hash}",
            n.http,
            enc(key)
        )
    };
    // Zones without daylight saving, so their offsets hold all year.
    for (tz, offset) in [("Australia/Darwin", 570), ("America/Bogota", -300)] {
        // Shown in the browser's zone, named on the page.
        let dom = browse_in(Some(tz), &page("", ""), &["--dump-dom"]);
        assert_eq!(
            body_attr(&dom, "data-state").as_deref(),
            Some("drawn"),
            "{tz}: {dom}"
        );
        assert_eq!(body_attr(&dom, "data-zone").as_deref(), Some(tz));
        assert_eq!(
            body_attr(&dom, "data-from-input"),
            Some(wall(from, offset)),
            "{tz}"
        );
        assert!(
            dom.contains(&format!("<option value=\"local\">{tz}</option>")),
            "{tz}: the zone is named"
        );
        // Or in UTC.
        let dom = browse_in(Some(tz), &page("", "&tz=utc"), &["--dump-dom"]);
        assert_eq!(body_attr(&dom, "data-zone").as_deref(), Some("UTC"));
        assert_eq!(
            body_attr(&dom, "data-from-input"),
            Some(wall(from, 0)),
            "{tz}"
        );
        // A custom range typed in the zone shown is that zone's time.
        let (a, b) = (from + 1_800_000, to - 1_800_000);
        for (hash, off) in [("", offset), ("&tz=utc", 0)] {
            let query = format!("?selftest=apply&from={}&to={}", wall(a, off), wall(b, off));
            let dom = browse_in(Some(tz), &page(&query, hash), &["--dump-dom"]);
            assert_eq!(
                body_attr(&dom, "data-state").as_deref(),
                Some("applied"),
                "{tz}{hash}: {dom}"
            );
            assert_eq!(
                body_attr(&dom, "data-from"),
                Some(a.to_string()),
                "{tz}{hash}"
            );
            assert_eq!(
                body_attr(&dom, "data-to"),
                Some(b.to_string()),
                "{tz}{hash}"
            );
        }
        let shot = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("sensor-page-{}.png", tz.replace('/', "_")));
        let _ = std::fs::remove_file(&shot);
        browse_in(
            Some(tz),
            &page("", ""),
            &[&format!("--screenshot={}", shot.display())],
        );
        assert!(std::fs::read(&shot).is_ok_and(|png| png.starts_with(b"\x89PNG")));
        eprintln!("screenshot: {}", shot.display());
    }

    // Every series before a word is typed, 50 a page: the second page
    // holds the other 11.
    let url = format!("http://{}/sensors?selftest=browse", n.http);
    let dom = browse(&url, &["--dump-dom"]);
    assert_eq!(
        body_attr(&dom, "data-state").as_deref(),
        Some("browsed"),
        "{dom}"
    );
    assert_eq!(body_attr(&dom, "data-total").as_deref(), Some("61"));
    assert_eq!(body_attr(&dom, "data-first-shown").as_deref(), Some("50"));
    assert_eq!(body_attr(&dom, "data-offset").as_deref(), Some("50"));
    assert_eq!(body_attr(&dom, "data-shown").as_deref(), Some("11"));
    assert!(dom.contains("51-61 of 61 series"), "the count is shown");

    // Several series on one chart, each a line in the legend.
    let other = "room_temp{db=\"home\",room=\"r11\"}";
    let url = format!(
        "http://{}/sensors#series={}&series={}&from={from}&to={to}",
        n.http,
        enc(key),
        enc(other)
    );
    let dom = browse(&url, &["--dump-dom"]);
    assert_eq!(
        body_attr(&dom, "data-state").as_deref(),
        Some("drawn"),
        "{dom}"
    );
    assert_eq!(body_attr(&dom, "data-lines").as_deref(), Some("2"));
    for k in [key, other] {
        let shown = k.replace('"', "&quot;");
        assert!(dom.contains(&shown), "{k} in the legend");
    }
    // A PromQL query: a line a series of its answer; a bad one's error
    // shown.
    let query = |q: &str| {
        let url = format!("http://{}/sensors#q={}&from={from}&to={to}", n.http, enc(q));
        browse(&url, &["--dump-dom"])
    };
    let dom = query("room_temp{room=~\"r0[0-2]\"} + 1");
    assert_eq!(
        body_attr(&dom, "data-state").as_deref(),
        Some("drawn"),
        "{dom}"
    );
    assert_eq!(body_attr(&dom, "data-lines").as_deref(), Some("3"));
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sensor-page-query.png");
    let _ = std::fs::remove_file(&shot);
    let url = format!(
        "http://{}/sensors#q={}&from={from}&to={to}",
        n.http,
        enc("room_temp{room=~\"r0[0-2]\"} + 1")
    );
    browse(&url, &[&format!("--screenshot={}", shot.display())]);
    assert!(std::fs::read(&shot).is_ok_and(|png| png.starts_with(b"\x89PNG")));
    let dom = query("avg(room_temp)");
    assert_eq!(body_attr(&dom, "data-lines").as_deref(), Some("1"));
    let dom = query("sum(");
    assert_eq!(body_attr(&dom, "data-state").as_deref(), Some("error"));
    assert!(dom.contains("The query failed: invalid parameter"), "{dom}");
    // The label browser: names, a name's values, a value's series.
    let url = format!("http://{}/sensors?selftest=labels&label=room", n.http);
    let dom = browse(&url, &["--dump-dom"]);
    assert_eq!(
        body_attr(&dom, "data-state").as_deref(),
        Some("labelled"),
        "{dom}"
    );
    assert_eq!(
        body_attr(&dom, "data-labels").as_deref(),
        Some("__name__,db,room,site")
    );
    assert_eq!(body_attr(&dom, "data-label-values").as_deref(), Some("60"));
    assert_eq!(body_attr(&dom, "data-total").as_deref(), Some("1"));

    // A name of 300 characters: the toolbar keeps one line, nothing
    // spills past the window.
    let long_key = format!("hall_temp{{db=\"home\",site=\"{long}\"}}");
    let url = format!(
        "http://{}/sensors?selftest=layout#series={}&from={from}&to={to}",
        n.http,
        enc(&long_key)
    );
    let dom = browse(&url, &["--dump-dom"]);
    assert_eq!(
        body_attr(&dom, "data-state").as_deref(),
        Some("measured"),
        "{dom}"
    );
    let px = |name| -> f64 { body_attr(&dom, name).unwrap().parse().unwrap() };
    assert!(
        px("data-nav-height") < 2.0 * px("data-button-height"),
        "the toolbar wrapped: {} px high, a button {} px",
        px("data-nav-height"),
        px("data-button-height")
    );
    assert_eq!(body_attr(&dom, "data-overflow").as_deref(), Some("false"));
}
