// Transcribe: an uploaded file, its text as it streams in, a word-level player and downloads.
import { $, api, captions, download, events, failure, itemAt } from "./common.js";

let timed = [];       // [{start, end, el}] of the words (or segments) on screen, by start
let current = -1;
let last = null;      // {result, format, file, fields}
let objectUrl = null;

function fields(format, stream) {
  const form = new FormData();
  form.append("file", $("t-file").files[0]);
  form.append("model", $("t-model").value);
  form.append("response_format", format);
  const language = $("t-language").value.trim();
  if (language) form.append("language", language);
  const chunking = $("t-chunking").value;
  if (chunking === "server_vad") {
    form.append("chunking_strategy", JSON.stringify({ type: "server_vad", threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 200 }));
  } else if (chunking) form.append("chunking_strategy", chunking);
  if (format === "verbose_json" && $("t-words").checked) {
    form.append("timestamp_granularities[]", "word");
    form.append("timestamp_granularities[]", "segment");
  }
  if (stream) form.append("stream", "true");
  return form;
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function addSpeakers(form) {
  for (const row of $("t-speaker-rows").children) {
    const name = row.querySelector("input[type=text]").value.trim();
    const clip = row.querySelector("input[type=file]").files[0];
    if (!name || !clip) continue;
    form.append("known_speaker_names[]", name);
    form.append("known_speaker_references[]", await readAsDataUrl(clip));
  }
}

/** Each speaker's colour, in turn from the stylesheet's palette of --speakers colours. */
function speakerColour(speakers, name) {
  const colours = Number(getComputedStyle(document.documentElement).getPropertyValue("--speakers")) || 1;
  if (!speakers.has(name)) speakers.set(name, speakers.size % colours);
  return speakers.get(name);
}

function segmentLine(segment, speakers) {
  const p = document.createElement("p");
  p.className = "seg";
  p.dataset.colour = String(speakerColour(speakers, segment.speaker));
  const who = document.createElement("span");
  who.className = "speaker";
  who.textContent = segment.speaker;
  p.append(who, segment.text.trim());
  p.tabIndex = 0;
  p.addEventListener("click", () => playFrom(segment.start));
  p.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); playFrom(segment.start); } });
  timed.push({ start: segment.start, end: segment.end, el: p });
  return p;
}

function wordButtons(words) {
  const p = document.createElement("p");
  p.className = "words";
  for (const w of words) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "word";
    b.textContent = w.word.trim();
    b.dataset.start = w.start;
    b.addEventListener("click", () => playFrom(w.start));
    p.append(b, " ");
    timed.push({ start: w.start, end: w.end, el: b });
  }
  return p;
}

function playFrom(seconds) {
  const audio = $("t-audio");
  audio.currentTime = seconds;
  audio.play().catch(() => {});
}

function highlight() {
  const audio = $("t-audio");
  const i = itemAt(timed, audio.currentTime);
  if (i !== current) {
    if (current >= 0 && timed[current]) timed[current].el.classList.remove("current");
    if (i >= 0) timed[i].el.classList.add("current");
    current = i;
  }
  if (!audio.paused) requestAnimationFrame(highlight);
}

function render(result, format) {
  const out = $("t-result");
  out.replaceChildren();
  timed = [];
  current = -1;
  if (typeof result === "string") {
    const pre = document.createElement(format === "text" ? "p" : "pre");
    pre.className = "text";
    pre.textContent = result;
    out.append(pre);
  } else if (result.segments && result.segments.some((s) => "speaker" in s)) {
    const speakers = new Map();
    for (const s of result.segments) out.append(segmentLine(s, speakers));
  } else if (result.words && result.words.length) {
    out.append(wordButtons(result.words));
  } else {
    const p = document.createElement("p");
    p.className = "text";
    p.textContent = result.text;
    out.append(p);
  }
}

async function streamInto(response, format) {
  const out = $("t-result");
  out.replaceChildren();
  timed = [];
  const speakers = new Map();
  const p = document.createElement("p");
  p.className = "text";
  const segments = [];
  if (format !== "diarized_json") out.append(p);
  for await (const event of events(response)) {
    if (event.type === "transcript.text.delta") p.textContent += event.delta;
    else if (event.type === "transcript.text.segment") { segments.push(event); out.append(segmentLine(event, speakers)); }
    else if (event.type === "transcript.text.done") {
      if (format !== "diarized_json") p.textContent = event.text;
      return format === "diarized_json" ? { text: event.text, segments } : (format === "text" ? event.text : { text: event.text });
    } else if (event.type === "error") throw new Error(event.error.message);
  }
  throw new Error("the stream ended before transcript.text.done");
}

async function transcribe(event) {
  event.preventDefault();
  const file = $("t-file").files[0];
  if (!file) return;
  const format = $("t-format").value;
  const stream = $("t-stream").checked && ["json", "text", "diarized_json"].includes(format);
  const form = fields(format, stream);
  if (format === "diarized_json") await addSpeakers(form);
  $("t-go").disabled = true;
  $("t-status").textContent = "transcribing…";
  $("t-downloads").hidden = true;
  try {
    const response = await api("/v1/audio/transcriptions", { method: "POST", body: form });
    if (!response.ok) throw new Error(await failure(response));
    let result;
    if (stream) result = await streamInto(response, format);
    else {
      result = ["json", "verbose_json", "diarized_json"].includes(format) ? await response.json() : await response.text();
      render(result, format);
    }
    last = { result, format, file };
    $("t-status").textContent = "done";
    $("t-downloads").hidden = false;
  } catch (error) {
    $("t-status").textContent = String(error.message || error);
  } finally {
    $("t-go").disabled = false;
  }
}

function cues(result) {
  if (!result || typeof result === "string" || !result.segments) return null;
  return result.segments.map((s) => ({ start: s.start, end: s.end, text: s.speaker ? `${s.speaker}: ${s.text.trim()}` : s.text }));
}

async function save(kind) {
  if (!last) return;
  const base = last.file.name.replace(/\.[^.]*$/, "") || "transcript";
  const { result } = last;
  if (kind === "txt") return download(base + ".txt", typeof result === "string" ? result : result.text, "text/plain");
  if (kind === "json") return download(base + ".json", JSON.stringify(result, null, 2), "application/json");
  const timedCues = cues(result);
  if (timedCues) return download(`${base}.${kind}`, captions(timedCues, kind), "text/plain");
  if (last.format === kind) return download(`${base}.${kind}`, result, "text/plain");
  $("t-status").textContent = `fetching ${kind}…`;  // no timings on screen: ask the server for that format
  const form = new FormData();
  form.append("file", last.file);
  form.append("model", $("t-model").value);
  form.append("response_format", kind);
  const response = await api("/v1/audio/transcriptions", { method: "POST", body: form });
  $("t-status").textContent = response.ok ? "done" : await failure(response);
  if (response.ok) download(`${base}.${kind}`, await response.text(), "text/plain");
}

function useFile(file) {
  if (objectUrl) URL.revokeObjectURL(objectUrl);
  objectUrl = URL.createObjectURL(file);
  const audio = $("t-audio");
  audio.src = objectUrl;
  audio.hidden = false;
}

function addSpeakerRow() {
  const rows = $("t-speaker-rows");
  if (rows.children.length >= 4) return;
  const n = rows.children.length + 1;
  const row = document.createElement("div");
  row.className = "grid";
  row.innerHTML = `<label>Name ${n} <input type="text" autocomplete="off"></label>
    <label>Reference clip ${n} <input type="file" accept="audio/*"></label>`;
  rows.append(row);
}

export async function fillModels(models) {
  const select = $("t-model");
  const chosen = select.value;
  select.replaceChildren();
  for (const m of models.filter((m) => m.kind === "transcription")) select.append(new Option(m.id, m.id));
  if (chosen) select.value = chosen;
}

export function initTranscribe() {
  $("t-form").addEventListener("submit", transcribe);
  $("t-file").addEventListener("change", () => { if ($("t-file").files[0]) useFile($("t-file").files[0]); });
  const drop = $("t-drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files.length) { $("t-file").files = e.dataTransfer.files; useFile(e.dataTransfer.files[0]); }
  });
  $("t-format").addEventListener("change", () => {
    $("t-speakers").hidden = $("t-format").value !== "diarized_json";
    if (!$("t-speakers").hidden && !$("t-speaker-rows").children.length) addSpeakerRow();
  });
  $("t-add-speaker").addEventListener("click", addSpeakerRow);
  $("t-audio").addEventListener("play", () => requestAnimationFrame(highlight));
  $("t-audio").addEventListener("seeked", highlight);
  $("t-downloads").addEventListener("click", (e) => { if (e.target.dataset.kind) save(e.target.dataset.kind); });
}
