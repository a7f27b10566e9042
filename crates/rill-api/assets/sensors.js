// Rill's sensor page: search and pick a series, a range (presets, custom,
// drag to zoom, pan), a min/max band per pixel with the last value as a
// line (M4 downsampling on the node: /rill/sensors/m4), gaps where data
// is missing, a live tail, and the shown range as CSV. The state lives in
// the URL's fragment (#series=...&from=...&to=...), so a view can be
// bookmarked and shared. Times in the URL are ms since the epoch or
// relative to now (now, now-1h).
"use strict";

const $ = (s) => document.querySelector(s);
const UNITS = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 };
const state = { series: "", from: "now-1h", to: "now", live: false };
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
  state.series = p.get("series") || "";
  state.from = p.get("from") || "now-1h";
  state.to = p.get("to") || "now";
  state.live = p.get("live") === "1";
}

function writeHash() {
  const p = new URLSearchParams();
  if (state.series) p.set("series", state.series);
  p.set("from", state.from);
  p.set("to", state.to);
  if (state.live) p.set("live", "1");
  history.replaceState(null, "", "#" + p.toString());
}

function status(text, error) {
  const s = $("#status");
  s.textContent = text;
  s.className = error ? "status error" : "status";
}

// datetime-local inputs hold UTC here, to match the URL and the axis.
function toInput(ms) {
  return new Date(ms).toISOString().slice(0, 19);
}

function fromInput(v) {
  const ms = Date.parse(v + "Z");
  return Number.isFinite(ms) ? ms : null;
}

function makeChart() {
  const el = $("#chart");
  const opts = {
    width: Math.max(300, el.clientWidth || 800),
    height: Math.max(240, Math.round(window.innerHeight * 0.6)),
    scales: { x: { time: true } },
    axes: [{}, { size: 70 }],
    series: [
      {},
      { label: "min", stroke: "rgba(42,91,215,0.35)", width: 1, spanGaps: false, points: { show: false } },
      { label: "max", stroke: "rgba(42,91,215,0.35)", width: 1, spanGaps: false, points: { show: false } },
      { label: "last", stroke: "#2a5bd7", width: 1.5, spanGaps: false, points: { show: false } },
    ],
    bands: [{ series: [2, 1], fill: "rgba(42,91,215,0.15)" }],
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
  chart = new uPlot(opts, [[], [], [], []], el);
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
  syncControls();
  if (!state.series) {
    document.body.dataset.state = "idle";
    return;
  }
  const from = resolve(state.from);
  const to = resolve(state.to);
  const width = chart.bbox.width / devicePixelRatio || 800;
  const q = new URLSearchParams({
    series: state.series,
    start: String(from),
    end: String(to),
    width: String(Math.max(10, Math.round(width))),
  });
  const mine = ++loading;
  document.body.dataset.state = "loading";
  let r;
  try {
    const resp = await fetch("/rill/sensors/m4?" + q);
    if (!resp.ok) throw new Error((await resp.text()).trim() || resp.statusText);
    r = await resp.json();
  } catch (e) {
    if (mine === loading) {
      status("Cannot read the series: " + e.message, true);
      document.body.dataset.state = "error";
    }
    return;
  }
  if (mine !== loading) return; // a later request won
  chart.setData([r.t, r.min, r.max, r.last], false);
  chart.setScale("x", { min: from / 1000, max: to / 1000 });
  status(
    `${r.samples.toLocaleString()} samples drawn as ${r.t.length - r.gaps} points` +
      (r.gaps ? `, ${r.gaps} gap${r.gaps > 1 ? "s" : ""}` : "") +
      `; ${r.blocks_from_headers} blocks summed from their headers, ${r.blocks_decoded} decoded`
  );
  document.body.dataset.state = "drawn";
  document.body.dataset.samples = String(r.samples);
  document.body.dataset.from = String(from);
  document.body.dataset.to = String(to);
  drawn();
}

function syncControls() {
  $("#picked").textContent = state.series || "No series picked";
  const from = resolve(state.from);
  const to = resolve(state.to);
  $("#from").value = toInput(from);
  $("#to").value = toInput(to);
  for (const b of document.querySelectorAll("[data-range]")) {
    b.classList.toggle("on", state.from === "now-" + b.dataset.range && state.to === "now");
  }
  $("#live").checked = state.live;
  $("#live").disabled = state.to !== "now";
  const csv = new URLSearchParams({
    format: "__timestamp__:unix_ms,__value__",
    "match[]": state.series,
    start: String(from / 1000),
    end: String(to / 1000),
  });
  const a = $("#csv");
  a.href = state.series ? "/api/v1/export/csv?" + csv : "#";
  a.setAttribute("download", "series.csv");
  clearInterval(timer);
  timer = null;
  if (state.live && state.to === "now") timer = setInterval(refresh, 5000);
}

// The search: series whose key holds every word typed.
let searchSeq = 0;
async function search(text) {
  const ul = $("#results");
  const words = text.trim();
  if (!words) {
    ul.hidden = true;
    return;
  }
  const mine = ++searchSeq;
  const resp = await fetch("/rill/sensors/search?" + new URLSearchParams({ q: words, limit: "50" }));
  if (mine !== searchSeq) return;
  if (!resp.ok) {
    status("Search failed: " + (await resp.text()).trim(), true);
    return;
  }
  const r = await resp.json();
  ul.replaceChildren(
    ...r.series.map((key) => {
      const li = document.createElement("li");
      li.textContent = key;
      li.setAttribute("role", "option");
      li.addEventListener("mousedown", () => pick(key));
      return li;
    })
  );
  if (!r.series.length) {
    const li = document.createElement("li");
    li.textContent = "No series matches";
    ul.replaceChildren(li);
  }
  ul.hidden = false;
}

function pick(key) {
  state.series = key;
  $("#results").hidden = true;
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

// A self-test for headless browsers (?selftest=zoom): once drawn, drag
// across the middle half of the chart as a user would, then report the
// zoomed range in the page's data attributes.
let selftest = new URLSearchParams(location.search).get("selftest");
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
  }
}

function init() {
  readHash();
  makeChart();
  $("#search").addEventListener("input", (e) => search(e.target.value));
  $("#search").addEventListener("blur", () => setTimeout(() => ($("#results").hidden = true), 150));
  $("#search").addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      const first = $("#results li[role=option]");
      if (first) pick(first.textContent);
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
}

init();
