// ferry's status page: polls status.json and shows it. Every value is set
// as text (textContent), never as markup: table names may hold quotes, <,
// & or anything else PostgreSQL allows.
"use strict";

const POLL_MS = 2000;
const SVG = "http://www.w3.org/2000/svg";
let lastOK = null;

function $(id) { return document.getElementById(id); }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function fmtInt(n) { return Number(n).toLocaleString("en-US"); }

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n), i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(1)) + " " + units[i];
}

function fmtSeconds(s) {
  if (s < 10) return s.toFixed(2) + " s";
  if (s < 120) return s.toFixed(0) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

// ago says how long before the server's now a time was, so that the
// browser's clock does not matter.
function ago(iso, now) {
  if (!iso) return "never";
  const s = Math.max(0, (Date.parse(now) - Date.parse(iso)) / 1000);
  return fmtSeconds(s) + " ago";
}

function timeEl(iso, now) {
  const t = el("time", null, ago(iso, now));
  if (iso) { t.dateTime = iso; t.title = iso; }
  return t;
}

function setText(id, text) { $(id).textContent = text; }

function render(st) {
  const state = $("state");
  state.textContent = st.state;
  state.className = "state state-" + st.state;
  setText("slot", st.slot);
  setText("source", st.source);
  setText("destination", st.destination);
  setText("version", st.version);
  $("started").replaceChildren(timeEl(st.started, st.now));
  setText("dest-head", st.sink === "kafka" ? "Kafka topic" : "ClickHouse table");

  const lag = st.lag;
  setText("lag-seconds", lag.seconds === null ? "–" : fmtSeconds(lag.seconds));
  setText("lag-bytes", lag.bytes === null ? "–" : fmtBytes(lag.bytes));
  $("lag-bytes").title = lag.bytes === null ? "" : fmtInt(lag.bytes) + " bytes";
  setText("confirmed-lsn", lag.confirmed_lsn || "–");
  setText("server-lsn", lag.server_lsn || "–");
  drawChart($("chart-seconds"), st.lag_history, "seconds", fmtSeconds);
  drawChart($("chart-bytes"), st.lag_history, "bytes", fmtBytes);
  const h = st.slot_health;
  setText("slot-health", !h ? "–" :
    (h.active ? "active" : "inactive") + ", wal_status " + h.wal_status + ", retains " + fmtBytes(h.retained_wal_bytes) +
    (h.over_limit ? " (over --max-retained-wal)" : "") + (h.wal_keep_unlimited ? " (max_slot_wal_keep_size unlimited)" : ""));
  $("heartbeat").replaceChildren(timeEl(st.last_heartbeat, st.now));

  const e = st.last_error;
  $("no-error").hidden = !!e;
  $("error").hidden = !e;
  $("error-box").classList.toggle("has-error", !!e);
  if (e) {
    setText("error-kind", e.kind + (e.stopped ? ", stopped replication" : ", retried"));
    $("error-time").replaceChildren(timeEl(e.time, st.now));
    setText("error-retries", fmtInt(st.retries) + (st.retries === 1 ? " error" : " errors") + " retried since ferry started");
    setText("error-message", e.message);
  }

  renderTables(st);
  setText("updated", "updated " + new Date(st.now).toLocaleTimeString("en-GB"));
}

function renderTables(st) {
  const rows = st.tables.map(t => {
    const tr = el("tr", "table-row" + (t.replicated ? "" : " gone"));
    const name = el("td", "name", t.table);
    if (t.append_only) name.append(" ", el("span", "tag", "append-only"));
    if (!t.replicated) name.append(" ", el("span", "tag", "no longer replicated"));
    tr.append(name, el("td", "dest", t.destination || "–"), copyCell(t.copy, st.now), ...streamedCells(t.streamed));
    const applied = el("td", "applied");
    applied.append(timeEl(t.last_applied, st.now));
    tr.append(applied);
    return tr;
  });
  $("tables").tBodies[0].replaceChildren(...rows);
  $("no-tables").hidden = rows.length > 0;
}

function copyCell(c, now) {
  const td = el("td", "copy");
  if (!c) {
    td.append(el("span", "copy-state", "not copied by this run"));
    return td;
  }
  const bar = el("progress");
  bar.max = Math.max(c.estimate, c.rows, 1);
  bar.value = c.done ? bar.max : c.rows;
  td.append(bar, " ", el("span", "copy-rows", fmtInt(c.rows)));
  if (c.estimate > 0) td.append(" / ~", el("span", "copy-est", fmtInt(c.estimate)));
  td.append(" rows");
  const state = el("div", "sub");
  if (c.done) {
    const took = (Date.parse(c.finished) - Date.parse(c.started)) / 1000;
    state.append(el("span", "copy-state", "done"), " in " + fmtSeconds(took) + ", ", timeEl(c.finished, now));
  } else if (c.rows === 0) {
    // Planned with the others, or reading its first rows.
    state.append(el("span", "copy-state", "copying"), ", no row yet");
  } else {
    const pct = c.estimate > 0 ? " " + Math.min(100, 100 * c.rows / c.estimate).toFixed(0) + "%" : "";
    state.append(el("span", "copy-state", "copying" + pct), ", started ", timeEl(c.started, now));
  }
  if (c.copies > 1) state.append(" ", el("span", "tag copies", "copy " + c.copies + " since start"));
  td.append(state);
  return td;
}

function streamedCells(s) {
  return [["ins", s.insert], ["upd", s.update], ["del", s.delete], ["trunc", s.truncate]]
    .map(([cls, n]) => el("td", "num " + cls, fmtInt(n)));
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

// drawChart draws one series of the lag history: x is time (the last
// minutes, the newest on the right), y from 0 to the series' maximum.
function drawChart(box, history, key, fmt) {
  const W = 400, H = 110, L = 4, R = 396, T = 14, B = 96;
  const pts = history.filter(p => p[key] !== null);
  const parts = [svg("line", { x1: L, y1: B, x2: R, y2: B, class: "axis" })];
  if (pts.length === 0) {
    const t = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" });
    t.textContent = "no data yet";
    parts.push(t);
    box.replaceChildren(...parts);
    return;
  }
  const t1 = history[history.length - 1].t;
  const t0 = Math.min(history[0].t, t1 - 60000);
  const top = Math.max(...pts.map(p => p[key]));
  const yMax = top > 0 ? top * 1.1 : 1;
  const x = t => L + (R - L) * (t - t0) / (t1 - t0);
  const y = v => B - (B - T) * v / yMax;
  parts.push(svg("polyline", { points: pts.map(p => x(p.t).toFixed(1) + "," + y(p[key]).toFixed(1)).join(" "), class: "series" }));
  const maxLabel = svg("text", { x: L, y: T - 3, class: "label" });
  maxLabel.textContent = "max " + fmt(top);
  const span = svg("text", { x: R, y: H - 2, "text-anchor": "end", class: "label" });
  span.textContent = "last " + fmtSeconds((t1 - t0) / 1000);
  parts.push(maxLabel, span);
  box.replaceChildren(...parts);
}

async function poll() {
  try {
    const resp = await fetch("status.json", { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    render(await resp.json());
    lastOK = new Date();
    $("stale").hidden = true;
  } catch (err) {
    const s = $("stale");
    s.hidden = false;
    s.textContent = "ferry does not answer (" + err.message + ")" + (lastOK ? "; shown as of " + lastOK.toLocaleTimeString("en-GB") : "");
  }
  setTimeout(poll, POLL_MS);
}

poll();
