// Speak: text (or SSML) to pcm over server-sent events, played with Web Audio as it arrives; the word being
// spoken is highlighted from the events' word timings when the server sends them.
import { $, api, captions, download, events, failure, itemAt, wordCues } from "./common.js";

const RATE = 24000;
let context = null;
let output = null;     // every chunk plays through this node; the analyser beside it tells that sound went out
let analyser = null;
let run = 0;           // each Speak press; a stale stream stops feeding the player
let startAt = 0;       // the context's time at which the first sample plays
let nextAt = 0;        // where the next chunk goes
let queuedSeconds = 0; // audio received so far
let words = [];        // [{word, start, end, el}]
let current = -1;
let pcmChunks = [];

function base64ToFloat(b64) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const pcm = new Int16Array(bytes.buffer, 0, bytes.length >> 1);
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i] / 32768;
  pcmChunks.push(bytes);
  return out;
}

function enqueue(samples) {
  if (!samples.length) return;
  const buffer = context.createBuffer(1, samples.length, RATE);
  buffer.copyToChannel(samples, 0);
  const source = context.createBufferSource();
  source.buffer = buffer;
  source.connect(output);
  if (queuedSeconds === 0) startAt = nextAt = context.currentTime + 0.1;
  nextAt = Math.max(nextAt, context.currentTime + 0.02);
  source.start(nextAt);
  nextAt += buffer.duration;
  queuedSeconds += buffer.duration;
}

function addWords(list) {
  const out = $("s-words");
  for (const w of list) {
    if (words.some((x) => x.start === w.start && x.word === w.word)) continue;
    const span = document.createElement("span");
    span.className = "word";
    span.textContent = w.word;
    out.append(span, " ");
    words.push({ ...w, el: span });
  }
}

function tick(mine) {
  if (mine !== run || !context) return;
  const played = Math.max(0, Math.min(context.currentTime - startAt, queuedSeconds));
  const shown = $("s-played");
  shown.dataset.seconds = played.toFixed(3);
  shown.textContent = `${played.toFixed(1)} s of ${queuedSeconds.toFixed(1)} s`;
  const level = new Float32Array(analyser.fftSize);
  analyser.getFloatTimeDomainData(level);
  if (level.some((x) => Math.abs(x) > 1e-4)) shown.dataset.heard = "true";
  const i = queuedSeconds > 0 ? itemAt(words, played) : -1;
  if (i !== current) {
    if (current >= 0 && words[current]) words[current].el.classList.remove("current");
    if (i >= 0) words[i].el.classList.add("current");
    current = i;
    $("s-words").dataset.current = String(i);
  }
  requestAnimationFrame(() => tick(mine));
}

function body(format, sse) {
  const request = { model: "tts-1", input: $("s-input").value, voice: $("s-voice").value || "alloy", speed: Number($("s-speed").value) || 1, response_format: format };
  if (sse) Object.assign(request, { stream_format: "sse", sample_rate: RATE, timestamps: ["word"] });
  return JSON.stringify(request);
}

async function speak(event) {
  event.preventDefault();
  stop();
  const mine = ++run;
  context = new AudioContext({ sampleRate: RATE });
  output = context.createGain();
  analyser = context.createAnalyser();
  output.connect(context.destination);
  output.connect(analyser);
  await context.resume();
  delete $("s-played").dataset.heard;
  queuedSeconds = 0;
  words = [];
  current = -1;
  pcmChunks = [];
  $("s-words").replaceChildren();
  $("s-words").dataset.current = "-1";
  $("s-downloads").hidden = true;
  $("s-status").textContent = "speaking…";
  requestAnimationFrame(() => tick(mine));
  try {
    const response = await api("/v1/audio/speech", { method: "POST", headers: { "Content-Type": "application/json" }, body: body("pcm", true) });
    if (!response.ok) throw new Error(await failure(response));
    for await (const e of events(response)) {
      if (mine !== run) return;
      if (e.type === "speech.audio.delta") {
        enqueue(base64ToFloat(e.audio));
        if (e.words) addWords(e.words);
      } else if (e.type === "speech.audio.done") {
        if (e.words) addWords(e.words);
      } else if (e.type === "error") throw new Error(e.error.message);
    }
    $("s-status").textContent = words.length ? "done" : "done (this server sent no word timings)";
    $("s-downloads").hidden = false;
  } catch (error) {
    if (mine === run) $("s-status").textContent = String(error.message || error);
  }
}

function stop() {
  run++;
  if (context) context.close();
  context = null;
}

async function save(kind) {
  if (kind === "srt" || kind === "vtt") {
    if (!words.length) { $("s-status").textContent = "no word timings to make captions from"; return; }
    return download(`speech.${kind}`, captions(wordCues(words), kind), "text/plain");
  }
  const format = $("s-format").value;
  $("s-status").textContent = `fetching ${format}…`;
  const response = await api("/v1/audio/speech", { method: "POST", headers: { "Content-Type": "application/json" }, body: body(format, false) });
  if (!response.ok) { $("s-status").textContent = await failure(response); return; }
  download(`speech.${format}`, await response.blob());
  $("s-status").textContent = "done";
}

export function fillVoices(voices) {
  const select = $("s-voice");
  const chosen = select.value;
  select.replaceChildren();
  for (const v of voices) select.append(new Option(v.id, v.id));
  if (chosen) select.value = chosen;
}

export function initSpeak() {
  $("s-form").addEventListener("submit", speak);
  $("s-stop").addEventListener("click", () => { stop(); $("s-status").textContent = "stopped"; });
  $("s-downloads").addEventListener("click", (e) => { if (e.target.dataset.kind) save(e.target.dataset.kind); });
}
