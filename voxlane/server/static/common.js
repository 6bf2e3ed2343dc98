// Shared by the playground's parts: the server's address, the API key (this tab's memory only), fetch with
// the key, server-sent events, captions and downloads.
export const $ = (id) => document.getElementById(id);

const conn = { base: "", key: null };
let keyWaiters = [];

export function setBase(url) { conn.base = (url || "").replace(/\/+$/, ""); }
export function url(path) { return conn.base + path; }

export function wsUrl(path) {
  const origin = conn.base ? new URL(conn.base) : location;
  const scheme = origin.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${origin.host}${path}`;
}

/** The WebSocket subprotocols: a browser cannot set a header on a socket, so the key travels as OpenAI's
 * `openai-insecure-api-key.KEY` subprotocol. */
export function wsProtocols() {
  const protocols = ["realtime"];
  if (conn.key) protocols.push("openai-insecure-api-key." + conn.key);
  return protocols;
}

export function hasKey() { return conn.key !== null; }

/** Resolves once the user has typed a key into the form the page shows. */
function askForKey(why) {
  $("key-why").textContent = why;
  $("key-form").hidden = false;
  $("api-key").focus();
  return new Promise((resolve) => keyWaiters.push(resolve));
}

export function initKeyForm() {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    conn.key = $("api-key").value.trim();
    $("key-form").hidden = true;
    const waiting = keyWaiters;
    keyWaiters = [];
    waiting.forEach((resolve) => resolve());
  });
}

/** fetch() on the server with the key as a Bearer token; a 401 asks for a key and sends the request again. */
export async function api(path, init = {}) {
  for (;;) {
    const headers = new Headers(init.headers || {});
    if (conn.key) headers.set("Authorization", "Bearer " + conn.key);
    const response = await fetch(url(path), { ...init, headers });
    if (response.status !== 401) return response;
    await askForKey(conn.key ? "The server refused that key; try another." : "This server needs an API key.");
  }
}

/** The error JSON's message, or the status line. */
export async function failure(response) {
  try {
    const body = await response.json();
    return `${response.status}: ${body.error.message}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

/** Yields each server-sent event's data, parsed as JSON, as it arrives. */
export async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data && data !== "[DONE]") yield JSON.parse(data);
    }
  }
}

function stamp(seconds, comma) {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  const h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60, s = Math.floor(ms / 1000) % 60;
  return `${pad(h)}:${pad(m)}:${pad(s)}${comma ? "," : "."}${pad(ms % 1000, 3)}`;
}

/** SRT or WebVTT from cues `{start, end, text}` (seconds). */
export function captions(cues, kind) {
  const vtt = kind === "vtt";
  const body = cues.map((c, i) => `${vtt ? "" : i + 1 + "\n"}${stamp(c.start, !vtt)} --> ${stamp(c.end, !vtt)}\n${c.text.trim()}\n`);
  return (vtt ? "WEBVTT\n\n" : "") + body.join("\n");
}

/** Word timings as caption cues of up to `perCue` words. */
export function wordCues(words, perCue = 7) {
  const cues = [];
  for (let i = 0; i < words.length; i += perCue) {
    const group = words.slice(i, i + perCue);
    cues.push({ start: group[0].start, end: group[group.length - 1].end, text: group.map((w) => w.word.trim()).join(" ") });
  }
  return cues;
}

export function download(name, data, type) {
  const blob = data instanceof Blob ? data : new Blob([data], { type });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

/** The index of the timed item (sorted by start) playing at `t` seconds, or -1. */
export function itemAt(items, t) {
  let lo = 0, hi = items.length - 1, found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (items[mid].start <= t) { found = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return found;
}

export function showError(message) { $("errors").textContent = message; }
