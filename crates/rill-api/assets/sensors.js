// Rill's sensor page: search (or page through every series) and pick a
// series, a range (presets, custom, drag to zoom, pan), a min/max band
// per pixel with the last value as a line (M4 downsampling on the node:
// /rill/sensors/m4), gaps where data is missing, a live tail, and the
// shown range as CSV. Times are shown and entered in one zone: the
// browser's, named on the page, or UTC. The state lives in the URL's
// fragment (#series=...&from=...&to=...&tz=utc), so a view can be
// bookmarked and shared. Times in the URL are ms since the epoch or
// relative to now (now, now-1h).
"use strict";

const $ = (s) => document.querySelector(s);
const UNITS = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 };
const state = { series: [], query: "", from: "now-1h", to: "now", live: false, zone: "local" };
// Colours of several series' lines.
const PALETTE = ["#2a5bd7", "#d7402a", "#2a9d5b", "#b8860b", "#8e44ad", "#16a2b8", "#c2185b", "#5d6d7e"];
const PAGE = 50;
let chart = null;
let timer = null;
let loading = 0;

function resolve(t) {
  if (t === "now") return Date.now();
  const m = /^now-(\d+)([smhd])$/.exec(t);
  if (m) return Date.now() - Number(m[1]) * UNITS[m[2]];
  const n = Number(t);
  return Number.isFinite(n) ? n : Date.now();
}

function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  state.series = p.getAll("series");
  state.query = p.get("q") || "";
  state.from = p.get("from") || "now-1h";
  state.to = p.get("to") || "now";
  state.live = p.get("live") === "1";
  state.zone = p.get("tz") === "utc" ? "utc" : "local";
}

function writeHash() {
  const p = new URLSearchParams();
  for (const k of state.series) p.append("series", k);
  if (state.query) p.set("q", state.query);
  p.set("from", state.from);
  p.set("to", state.to);
  if (state.live) p.set("live", "1");
  if (state.zone === "utc") p.set("tz", "utc");
  history.replaceState(null, "", "#" + p.toString());
}

function status(text, error) {
  const s = $("#status");
  s.textContent = text;
  s.className = error ? "status error" : "status";
}

// The browser's zone, by name, and its offset from UTC at `ms`.
function localZone() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
}

function offsetText(ms) {
  const m = -new Date(ms).getTimezoneOffset();
  const a = Math.abs(m);
  const two = (n) => String(n).padStart(2, "0");
  return `UTC${m < 0 ? "-" : "+"}${two(Math.floor(a / 60))}:${two(a % 60)}`;
}

function zoneName() {
  return state.zone === "utc" ? "UTC" : localZone();
}

// The datetime-local inputs hold wall times of the zone shown, as the
// axis does.
function toInput(ms) {
  const shift = state.zone === "utc" ? 0 : new Date(ms).getTimezoneOffset() * 60e3;
  return new Date(ms - shift).toISOString().slice(0, 19);
}

function fromInput(v) {
  // A date-time without an offset is the browser's local time.
  const ms = state.zone === "utc" ? Date.parse(v + "Z") : new Date(v).getTime();
  return Number.isFinite(ms) ? ms : null;
}

// The widest of the value axis's labels, so that they never run into
// the chart or into each other.
function valueAxisSize(u, values) {
  if (!values || !values.length) return 50;
  const ctx = u.ctx;
  ctx.save();
  ctx.font = u.axes[1].font[0];
  const widest = Math.max(...values.map((v) => ctx.measureText(String(v)).width));
  ctx.restore();
  return Math.ceil(widest / devicePixelRatio) + 20;
}

// The chart: one series as a min/max band per pixel and its last value
// (`lines` null), or a line for each of `lines` (their labels).
function makeChart(lines) {
  const el = $("#chart");
  const opts = {
    width: Math.max(300, el.clientWidth || 800),
    height: Math.max(240, Math.round(window.innerHeight * 0.6)),
    scales: { x: { time: true } },
    // Time labels at least 90 px apart, so that they never overlap.
    axes: [{ space: 90 }, { size: valueAxisSize }],
    series: lines
      ? [{}, ...lines.map((label, i) => ({ label, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: false, points: { show: false } }))]
      : [
          {},
          { label: "min", stroke: "rgba(42,91,215,0.35)", width: 1, spanGaps: false, points: { show: false } },
          { label: "max", stroke: "rgba(42,91,215,0.35)", width: 1, spanGaps: false, points: { show: false } },
          { label: "last", stroke: "#2a5bd7", width: 1.5, spanGaps: false, points: { show: false } },
        ],
    bands: lines ? [] : [{ series: [2, 1], fill: "rgba(42,91,215,0.15)" }],
    cursor: { drag: { x: true, y: false, setScale: false } },
    hooks: {
      setSelect: [
        (u) => {
          if (u.select.width < 3) return;
          const a = u.posToVal(u.select.left, "x");
          const b = u.posToVal(u.select.left + u.select.width, "x");
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          setRange(Math.round(a * 1000), Math.round(b * 1000), false);
        },
      ],
    },
  };
  if (state.zone === "utc") opts.tzDate = (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
  if (chart) chart.destroy();
  chart = new uPlot(opts, lines ? [[], ...lines.map(() => [])] : [[], [], [], []], el);
  chart.zone = state.zone;
  chart.lines = lines ? lines.join("\n") : null;
}

function setRange(from, to, live) {
  if (!(to > from)) return;
  state.from = String(from);
  state.to = live ? "now" : String(to);
  state.live = live;
  writeHash();
  refresh();
}

function preset(span) {
  state.from = "now-" + span;
  state.to = "now";
  writeHash();
  refresh();
}

async function refresh() {
  if (chart.zone !== state.zone) makeChart(null);
  syncControls();
  if (!state.series.length && !state.query) {
    document.body.dataset.state = "idle";
    return;
  }
  const from = resolve(state.from);
  const to = resolve(state.to);
  const width = Math.max(10, Math.round(chart.bbox.width / devicePixelRatio || 800));
  const mine = ++loading;
  document.body.dataset.state = "loading";
  let drawnNow;
  try {
    if (state.query) drawnNow = await drawQuery(from, to, width);
    else if (state.series.length === 1) drawnNow = await drawOne(state.series[0], from, to, width);
    else drawnNow = await drawMany(from, to, width);
  } catch (e) {
    if (mine === loading) {
      status((state.query ? "The query failed: " : "Cannot read the series: ") + e.message, true);
      document.body.dataset.state = "error";
    }
    return;
  }
  if (mine !== loading) return; // a later request won
  drawnNow();
  chart.setScale("x", { min: from / 1000, max: to / 1000 });
  document.body.dataset.state = "drawn";
  document.body.dataset.from = String(from);
  document.body.dataset.to = String(to);
  drawn();
}

async function getJson(url) {
  const resp = await fetch(url);
  if (!resp.ok) {
    const text = (await resp.text()).trim();
    let msg = text;
    try {
      msg = JSON.parse(text).error || text;
    } catch (_) {}
    throw new Error(msg || resp.statusText);
  }
  return resp.json();
}

function m4(key, from, to, width) {
  const q = new URLSearchParams({ series: key, start: String(from), end: String(to), width: String(width) });
  return getJson("/rill/sensors/m4?" + q);
}

// Each returns what draws its answer, called if no later request won.
async function drawOne(key, from, to, width) {
  const r = await m4(key, from, to, width);
  return () => {
    if (chart.lines !== null) makeChart(null);
    chart.setData([r.t, r.min, r.max, r.last], false);
    status(
      `${r.samples.toLocaleString()} samples drawn as ${r.t.length - r.gaps} points` +
        (r.gaps ? `, ${r.gaps} gap${r.gaps > 1 ? "s" : ""}` : "") +
        `; ${r.blocks_from_headers} blocks summed from their headers, ${r.blocks_decoded} decoded`
    );
    document.body.dataset.samples = String(r.samples);
    document.body.dataset.lines = "1";
  };
}

// Several series: each pixel's last value as a line a series.
async function drawMany(from, to, width) {
  const all = await Promise.all(state.series.map((k) => m4(k, from, to, width)));
  return () => {
    lines(state.series, all.map((r) => [r.t, r.last]));
    const samples = all.reduce((n, r) => n + r.samples, 0);
    status(`${state.series.length} series, ${samples.toLocaleString()} samples`);
    document.body.dataset.samples = String(samples);
  };
}

// A PromQL query over the range, a step a pixel.
async function drawQuery(from, to, width) {
  const step = Math.max(1, Math.round((to - from) / 1000 / width));
  const q = new URLSearchParams({ query: state.query, start: String(from / 1000), end: String(to / 1000), step: String(step) });
  const r = await getJson("/api/v1/query_range?" + q);
  const result = r.data.result;
  return () => {
    const labels = result.map((s) => metricText(s.metric));
    lines(labels, result.map((s) => [s.values.map((v) => v[0]), s.values.map((v) => Number(v[1]))]));
    const points = result.reduce((n, s) => n + s.values.length, 0);
    status(`${result.length} series, ${points.toLocaleString()} points, a step of ${step} s`);
    document.body.dataset.samples = String(points);
  };
}

// Lines of several series, their times joined into one axis.
function lines(labels, tables) {
  if (chart.lines !== labels.join("\n")) makeChart(labels);
  const data = tables.length ? uPlot.join(tables) : [[]];
  chart.setData(data, false);
  document.body.dataset.lines = String(labels.length);
}

// A series' labels as Prometheus writes them: name{label="value",...}.
function metricText(m) {
  const name = m.__name__ || "";
  const rest = Object.keys(m)
    .filter((k) => k !== "__name__")
    .sort()
    .map((k) => `${k}=${JSON.stringify(m[k])}`);
  return rest.length ? `${name}{${rest.join(",")}}` : name || "{}";
}

function syncControls() {
  const picked = $("#picked");
  if (state.query) {
    picked.textContent = state.query;
    picked.title = state.query;
  } else if (!state.series.length) {
    picked.textContent = "No series picked";
    picked.title = "";
  } else {
    // A chip a series, its button taking it off the chart.
    picked.replaceChildren(
      ...state.series.map((k) => {
        const chip = document.createElement("span");
        chip.className = "chip";
        chip.title = k;
        const name = document.createElement("span");
        name.textContent = k;
        const x = document.createElement("button");
        x.type = "button";
        x.textContent = "\u00d7";
        x.title = "Take it off the chart";
        x.addEventListener("click", () => {
          state.series = state.series.filter((s) => s !== k);
          writeHash();
          refresh();
        });
        chip.append(name, x);
        return chip;
      })
    );
    picked.title = "";
  }
  $("#query").value = state.query;
  const from = resolve(state.from);
  const to = resolve(state.to);
  $("#from").value = toInput(from);
  $("#to").value = toInput(to);
  const zone = zoneName();
  $("#zone").value = state.zone;
  $("#zone option[value=local]").textContent = localZone();
  $("#zone").title = `Times shown and entered in ${zone} (${state.zone === "utc" ? "UTC+00:00" : offsetText(from)})`;
  $("#from").setAttribute("aria-label", `From (${zone})`);
  $("#to").setAttribute("aria-label", `To (${zone})`);
  document.body.dataset.zone = zone;
  document.body.dataset.fromInput = $("#from").value;
  for (const b of document.querySelectorAll("[data-range]")) {
    b.classList.toggle("on", state.from === "now-" + b.dataset.range && state.to === "now");
  }
  $("#live").checked = state.live;
  $("#live").disabled = state.to !== "now";
  const csv = new URLSearchParams({
    format: "__timestamp__:unix_ms,__value__",
    "match[]": state.series[0] || "",
    start: String(from / 1000),
    end: String(to / 1000),
  });
  const a = $("#csv");
  for (const k of state.series.slice(1)) csv.append("match[]", k);
  a.href = state.series.length ? "/api/v1/export/csv?" + csv : "#";
  a.setAttribute("download", "series.csv");
  clearInterval(timer);
  timer = null;
  if (state.live && state.to === "now") timer = setInterval(refresh, 5000);
}

// The search: series whose key holds every word typed, or every series
// when none is, a page of 50 at a time.
let searchSeq = 0;
let searchOffset = 0;
async function search(text, offset) {
  const found = $("#found");
  const ul = $("#results");
  const mine = ++searchSeq;
  const q = new URLSearchParams({ q: text.trim(), offset: String(offset), limit: String(PAGE) });
  const resp = await fetch("/rill/sensors/search?" + q);
  if (mine !== searchSeq) return;
  if (!resp.ok) {
    status("Search failed: " + (await resp.text()).trim(), true);
    return;
  }
  const r = await resp.json();
  searchOffset = r.offset;
  ul.replaceChildren(
    ...r.series.map((key) => {
      const li = document.createElement("li");
      li.textContent = key;
      li.title = key;
      li.setAttribute("role", "option");
      li.addEventListener("mousedown", () => pick(key, false));
      const add = document.createElement("button");
      add.type = "button";
      add.className = "add";
      add.textContent = "+";
      add.title = "Add to the chart";
      add.addEventListener("mousedown", (e) => {
        e.stopPropagation();
        e.preventDefault();
        pick(key, true);
      });
      li.prepend(add);
      return li;
    })
  );
  if (!r.series.length) {
    const li = document.createElement("li");
    li.textContent = r.total ? "No more series" : "No series matches";
    ul.replaceChildren(li);
  }
  const last = r.offset + r.series.length;
  $("#count").textContent = r.total
    ? `${(r.offset + 1).toLocaleString()}-${last.toLocaleString()} of ${r.total.toLocaleString()} series`
    : "";
  $("#prev").disabled = r.offset === 0;
  $("#next").disabled = last >= r.total;
  found.hidden = false;
  document.body.dataset.total = String(r.total);
  document.body.dataset.shown = String(r.series.length);
  document.body.dataset.offset = String(r.offset);
  listed();
}

// Shows `key` alone, or beside the series shown (`add`).
function pick(key, add) {
  state.query = "";
  state.series = add ? [...state.series.filter((s) => s !== key), key] : [key];
  $("#found").hidden = true;
  $("#search").value = "";
  writeHash();
  refresh();
}

function pan(dir) {
  const from = resolve(state.from);
  const to = resolve(state.to);
  const d = Math.round(((to - from) / 2) * dir);
  const newTo = to + d;
  setRange(from + d, newTo, dir > 0 && newTo >= Date.now());
}

function zoomOut() {
  const from = resolve(state.from);
  const to = resolve(state.to);
  const span = to - from;
  const newTo = Math.min(Date.now(), to + span / 2);
  setRange(Math.round(newTo - span * 2), Math.round(newTo), state.to === "now");
}

// Self-tests for headless browsers, reporting in the page's data
// attributes: ?selftest=zoom drags across the middle half of the chart
// once drawn, as a user would; ?selftest=apply&from=...&to=... types a
// custom range (wall times of the zone shown) and applies it;
// ?selftest=browse opens the series list without a word typed, then its
// next page; ?selftest=layout measures the toolbar;
// ?selftest=labels&label=NAME opens the label browser, NAME's values,
// and the series of its first value.
const params = new URLSearchParams(location.search);
let selftest = params.get("selftest");
function drawn() {
  if (selftest === "zoom") {
    selftest = "zooming";
    // After uPlot has applied the new scale (it commits a tick later).
    setTimeout(() => {
      const w = chart.bbox.width / devicePixelRatio;
      chart.setSelect({ left: w * 0.25, top: 0, width: w * 0.5, height: 10 }, true);
    }, 50);
  } else if (selftest === "zooming") {
    selftest = null;
    document.body.dataset.state = "zoomed";
  } else if (selftest === "apply") {
    selftest = "applying";
    $("#from").value = params.get("from");
    $("#to").value = params.get("to");
    $("#apply").click();
  } else if (selftest === "applying") {
    selftest = null;
    document.body.dataset.state = "applied";
  } else if (selftest === "layout") {
    selftest = null;
    const nav = $("nav").getBoundingClientRect();
    document.body.dataset.navHeight = String(Math.round(nav.height));
    document.body.dataset.buttonHeight = String(Math.round($("#apply").getBoundingClientRect().height));
    document.body.dataset.overflow = String(document.documentElement.scrollWidth > window.innerWidth);
    document.body.dataset.state = "measured";
  }
}

// The label browser: every label name, then a name's values; a value
// searches for the series that carry it.
async function labelNames() {
  const panel = $("#labels");
  if (!panel.hidden && panel.dataset.showing === "names") {
    panel.hidden = true;
    return;
  }
  const r = await getJson("/api/v1/labels");
  panel.replaceChildren(heading("Labels"), ...r.data.map((name) => item(name, () => labelValues(name))));
  panel.dataset.showing = "names";
  panel.hidden = false;
  document.body.dataset.labels = r.data.join(",");
  labelled();
}

async function labelValues(name) {
  const r = await getJson(`/api/v1/label/${encodeURIComponent(name)}/values`);
  const panel = $("#labels");
  panel.replaceChildren(
    heading(`${name} (${r.data.length.toLocaleString()} values)`),
    item("\u2190 every label", () => {
      panel.hidden = true;
      labelNames();
    }),
    ...r.data.map((v) =>
      item(v, () => {
        panel.hidden = true;
        const words = name === "__name__" ? v : `${name}=${JSON.stringify(v)}`;
        $("#search").value = words;
        $("#search").focus();
        search(words, 0);
      })
    )
  );
  panel.dataset.showing = "values";
  document.body.dataset.labelValues = String(r.data.length);
  labelled();
}

function heading(text) {
  const h = document.createElement("h3");
  h.textContent = text;
  return h;
}

function item(text, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.title = text;
  b.addEventListener("click", onClick);
  return b;
}

function labelled() {
  if (selftest === "labels") {
    selftest = "label-values";
    const room = [...document.querySelectorAll("#labels button")].find((b) => b.textContent === params.get("label"));
    if (room) room.click();
  } else if (selftest === "label-values") {
    selftest = "label-search";
    const first = document.querySelectorAll("#labels button")[1];
    if (first) first.click();
  }
}

function listed() {
  if (selftest === "label-search") {
    selftest = null;
    document.body.dataset.state = "labelled";
    return;
  }
  if (selftest === "browse") {
    selftest = "paging";
    document.body.dataset.firstShown = document.body.dataset.shown;
    $("#next").click();
  } else if (selftest === "paging") {
    selftest = null;
    document.body.dataset.state = "browsed";
  }
}

function init() {
  readHash();
  makeChart(null);
  $("#search").addEventListener("input", (e) => search(e.target.value, 0));
  $("#search").addEventListener("focus", (e) => search(e.target.value, 0));
  $("#search").addEventListener("blur", () => setTimeout(() => ($("#found").hidden = true), 150));
  // The page buttons keep the focus in the search box.
  for (const [id, dir] of [["#prev", -1], ["#next", 1]]) {
    $(id).addEventListener("mousedown", (e) => e.preventDefault());
    $(id).addEventListener("click", () => search($("#search").value, Math.max(0, searchOffset + dir * PAGE)));
  }
  $("#queryform").addEventListener("submit", (e) => {
    e.preventDefault();
    state.query = $("#query").value.trim();
    if (state.query) state.series = [];
    writeHash();
    refresh();
  });
  $("#labelsbtn").addEventListener("click", () => labelNames());
  $("#zone").addEventListener("change", (e) => {
    state.zone = e.target.value;
    writeHash();
    refresh();
  });
  $("#search").addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      const first = $("#results li[role=option]");
      if (first) pick(first.title, false);
    }
  });
  for (const b of document.querySelectorAll("[data-range]")) {
    b.addEventListener("click", () => preset(b.dataset.range));
  }
  $("#apply").addEventListener("click", () => {
    const from = fromInput($("#from").value);
    const to = fromInput($("#to").value);
    if (from === null || to === null || !(to > from)) {
      status("A custom range needs a start before its end.", true);
      return;
    }
    setRange(from, to, false);
  });
  $("#left").addEventListener("click", () => pan(-1));
  $("#right").addEventListener("click", () => pan(1));
  $("#out").addEventListener("click", zoomOut);
  $("#live").addEventListener("change", (e) => {
    state.live = e.target.checked;
    writeHash();
    refresh();
  });
  window.addEventListener("hashchange", () => {
    readHash();
    refresh();
  });
  window.addEventListener("resize", () => {
    chart.setSize({ width: Math.max(300, $("#chart").clientWidth), height: Math.max(240, Math.round(window.innerHeight * 0.6)) });
  });
  refresh();
  if (selftest === "browse") $("#search").focus();
  if (selftest === "labels") labelNames();
}

init();
