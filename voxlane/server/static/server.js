// Server: models (loaded or not, memory, load and unload), voices, and figures from /metrics drawn once a second.
import { $, api, failure, url } from "./common.js";

const POINTS = 60;
/** Each chart: its title, unit, and how to read one figure from two successive /metrics pages. */
const CHARTS = [
  { id: "requests", title: "Requests per second", unit: "/s", read: (m, p, dt) => rate(m, p, "voxlane_requests_total", dt) },
  { id: "queue", title: "Queued windows", unit: "", read: (m) => sum(m, "voxlane_engine_queued_windows") },
  { id: "batch", title: "Windows per batch (mean)", unit: "", read: (m, p) => mean(m, p, "voxlane_engine_batch_size_windows") },
  { id: "health", title: "/health latency", unit: " ms", read: (m, p, dt, healthMs) => healthMs },
  { id: "lag", title: "Event loop lag (mean)", unit: " ms", read: (m, p) => 1000 * mean(m, p, "voxlane_event_loop_stall_seconds") },
  { id: "sessions", title: "Live sessions", unit: "", read: (m) => sum(m, "voxlane_realtime_sessions") },
];
const series = new Map(CHARTS.map((c) => [c.id, []]));
let previous = null, previousAt = 0, timer = null;

/** Prometheus text to {name: [value, ...]} (labels dropped: the charts add them up). */
function parse(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = Number(match[3]);
    if (!Number.isFinite(value)) continue;
    if (!out.has(match[1])) out.set(match[1], []);
    out.get(match[1]).push(value);
  }
  return out;
}

function sum(m, name) { return (m.get(name) || []).reduce((a, b) => a + b, 0); }
function rate(m, p, name, dt) { return p && dt > 0 ? Math.max(0, sum(m, name) - sum(p, name)) / dt : 0; }
function mean(m, p, name) {
  if (!p) return 0;
  const n = sum(m, name + "_count") - sum(p, name + "_count");
  return n > 0 ? (sum(m, name + "_sum") - sum(p, name + "_sum")) / n : 0;
}

function chart(c) {
  const box = document.createElement("figure");
  box.className = "chart";
  box.id = "chart-" + c.id;
  box.innerHTML = `<h3>${c.title}: <output>–</output></h3>
    <svg viewBox="0 0 ${POINTS} 40" preserveAspectRatio="none" role="img" aria-label="${c.title}, the last minute"><polyline points=""/></svg>`;
  return box;
}

function draw(c, values) {
  const box = $("chart-" + c.id);
  const top = Math.max(1e-9, ...values);
  const points = values.map((v, i) => `${i + POINTS - values.length},${(38 - (v / top) * 36).toFixed(2)}`).join(" ");
  box.querySelector("polyline").setAttribute("points", points);
  const last = values[values.length - 1];
  box.querySelector("output").textContent = `${last < 10 ? last.toFixed(2) : last.toFixed(0)}${c.unit}`;
}

async function sample() {
  const began = performance.now();
  try { await fetch(url("/health")); } catch { /* shown as a gap in the figures */ }
  const healthMs = performance.now() - began;
  const response = await api("/metrics");
  if (!response.ok) return;
  const now = performance.now() / 1000;
  const current = parse(await response.text());
  for (const c of CHARTS) {
    const values = series.get(c.id);
    values.push(c.read(current, previous, now - previousAt, healthMs));
    if (values.length > POINTS) values.shift();
    draw(c, values);
  }
  previous = current;
  previousAt = now;
}

function silentWav(seconds = 1, rate = 16000) {
  const n = seconds * rate, view = new DataView(new ArrayBuffer(44 + 2 * n));
  const text = (at, s) => [...s].forEach((ch, i) => view.setUint8(at + i, ch.charCodeAt(0)));
  text(0, "RIFF"); view.setUint32(4, 36 + 2 * n, true); text(8, "WAVEfmt ");
  view.setUint32(16, 16, true); view.setUint16(20, 1, true); view.setUint16(22, 1, true);
  view.setUint32(24, rate, true); view.setUint32(28, 2 * rate, true); view.setUint16(32, 2, true); view.setUint16(34, 16, true);
  text(36, "data"); view.setUint32(40, 2 * n, true);
  return new Blob([view.buffer], { type: "audio/wav" });
}

/** A model loads on its first request: send it one second of silence, again while it answers model_loading. */
async function load(model, button) {
  button.disabled = true;
  $("m-status").textContent = `loading ${model}…`;
  for (let attempt = 0; attempt < 20; attempt++) {
    const form = new FormData();
    form.append("file", silentWav(), "silence.wav");
    form.append("model", model);
    form.append("chunking_strategy", "none");
    const response = await api("/v1/audio/transcriptions", { method: "POST", body: form });
    if (response.ok) { $("m-status").textContent = `${model} loaded`; await refreshModels(); return; }
    if (response.status !== 503) { $("m-status").textContent = await failure(response); button.disabled = false; return; }
    const wait = Number(response.headers.get("Retry-After")) || 2;
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
  }
  $("m-status").textContent = `${model} is still loading`;
  button.disabled = false;
}

/** Unload a model now (DELETE /v1/models/{id}); a refusal (409: the default model, or work in flight) says why. */
async function unload(model, button) {
  button.disabled = true;
  $("m-status").textContent = `unloading ${model}…`;
  const path = model.split("/").map(encodeURIComponent).join("/");
  const response = await api(`/v1/models/${path}`, { method: "DELETE" });
  if (!response.ok) { $("m-status").textContent = await failure(response); button.disabled = false; return; }
  $("m-status").textContent = `${model} unloaded`;
  await refreshModels();
}

let onModels = () => {};
let shownModels = "";

export async function refreshModels() {
  const response = await api("/v1/models");
  if (!response.ok) { $("m-status").textContent = await failure(response); return; }
  const models = (await response.json()).data;
  onModels(models);
  // The tab polls once a second: rebuilding unchanged rows would take the keyboard focus off their buttons.
  const listed = JSON.stringify(models);
  if (listed === shownModels) return;
  shownModels = listed;
  const aliases = new Map();
  for (const m of models) if (m.root && m.root !== m.id) aliases.set(m.root, [...(aliases.get(m.root) || []), m.id]);
  // GET /v1/models lists the default model (the first --model, never unloaded) first.
  const defaultModel = (models.find((m) => m.kind === "transcription") || {}).id;
  const rows = models.filter((m) => !m.root || m.root === m.id).map((m) => {
    const tr = document.createElement("tr");
    tr.dataset.model = m.id;
    tr.dataset.loaded = String(Boolean(m.loaded));
    const memory = m.memory_bytes ? `${(m.memory_bytes / 2 ** 20).toFixed(0)} MiB` : "";
    for (const text of [m.id, m.kind, (aliases.get(m.id) || []).join(", "), m.loaded ? "yes" : "no", memory]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    const td = document.createElement("td");
    if (m.kind === "transcription" && (!m.loaded || m.id !== defaultModel)) {
      const action = m.loaded ? "Unload" : "Load";
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = action;
      b.setAttribute("aria-label", `${action} ${m.id}`);
      b.addEventListener("click", () => (m.loaded ? unload : load)(m.id, b));
      td.append(b);
    }
    tr.append(td);
    return tr;
  });
  $("m-table").tBodies[0].replaceChildren(...rows);
}

export async function refreshVoices() {
  const response = await api("/v1/audio/voices");
  if (!response.ok) return [];
  const voices = (await response.json()).data;
  $("v-list").replaceChildren(...voices.map((v) => {
    const li = document.createElement("li");
    li.textContent = `${v.id}${v.builtin ? " (built in)" : ""}${v.aliases.length ? ": also " + v.aliases.join(", ") : ""}`;
    return li;
  }));
  return voices;
}

export function initServer(modelsChanged) {
  onModels = modelsChanged;
  $("charts").replaceChildren(...CHARTS.map(chart));
}

/** Poll once a second while the Server tab is shown. */
export function watch(on) {
  clearInterval(timer);
  timer = null;
  if (!on) return;
  const beat = () => { refreshModels().catch(() => {}); sample().catch(() => {}); };
  beat();
  timer = setInterval(beat, 1000);
}
