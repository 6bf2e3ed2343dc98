// Live: the microphone -> AudioWorklet -> pcm16 at 24 kHz -> /v1/realtime; partials grey, finals black, and
// the server's speech_started / speech_stopped on a timeline.
import { $, url, wsProtocols, wsUrl } from "./common.js";

const RATE = 24000;
const CHUNK_SAMPLES = RATE / 10; // 100 ms per append
const TIMELINE_S = 30;           // the timeline shows the last 30 s
let socket = null, context = null, stream = null, pending = [], pendingLength = 0, sentSamples = 0;
const items = new Map();          // item_id -> <p>
let open = null;                  // the timeline's bar of the turn being heard

function setStatus(text) { $("l-status").textContent = text; }

function line(itemId) {
  let p = items.get(itemId);
  if (!p) {
    p = document.createElement("p");
    p.className = "partial";
    p.dataset.item = itemId;
    $("l-transcript").appendChild(p);
    items.set(itemId, p);
  }
  return p;
}

function note(text) {
  const li = document.createElement("li");
  li.textContent = `${(sentSamples / RATE).toFixed(1)} s: ${text}`;
  $("l-events").prepend(li);
}

function drawTimeline() {
  const now = sentSamples / RATE;
  const from = Math.max(0, now - TIMELINE_S);
  for (const bar of $("l-timeline").children) {
    const start = Number(bar.dataset.start), end = bar.dataset.end ? Number(bar.dataset.end) : now;
    bar.style.left = `${Math.max(0, (start - from) / TIMELINE_S) * 100}%`;
    bar.style.width = `${Math.max(0, (end - Math.max(start, from)) / TIMELINE_S) * 100}%`;
  }
}

function onEvent(event) {
  switch (event.type) {
    case "input_audio_buffer.speech_started": {
      setStatus("hearing speech");
      note("speech started");
      open = document.createElement("span");
      open.className = "open";
      open.dataset.start = String(event.audio_start_ms / 1000);
      open.title = `speech from ${(event.audio_start_ms / 1000).toFixed(1)} s`;
      $("l-timeline").append(open);
      break;
    }
    case "input_audio_buffer.speech_stopped":
      setStatus("transcribing");
      note("speech stopped");
      if (open) { open.dataset.end = String(event.audio_end_ms / 1000); open.className = ""; open = null; }
      break;
    case "conversation.item.input_audio_transcription.delta": line(event.item_id).textContent += event.delta; break;
    case "conversation.item.input_audio_transcription.completed": {
      const p = line(event.item_id);
      p.textContent = event.transcript;
      p.className = "final";
      note("final text");
      setStatus("listening");
      break;
    }
    case "error": $("l-errors").textContent = event.error.message; break;
  }
  drawTimeline();
}

function toBase64(int16) {
  const bytes = new Uint8Array(int16.buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function resampleTo24k(samples, rate) {
  if (rate === RATE) return samples;
  const out = new Float32Array(Math.floor(samples.length * RATE / rate));
  const step = rate / RATE;
  for (let i = 0; i < out.length; i++) {
    const x = i * step, j = Math.floor(x), f = x - j;
    out[i] = samples[j] * (1 - f) + (samples[Math.min(j + 1, samples.length - 1)] || 0) * f;
  }
  return out;
}

function onSamples(samples) {
  pending.push(resampleTo24k(samples, context.sampleRate));
  pendingLength += pending[pending.length - 1].length;
  if (pendingLength < CHUNK_SAMPLES) return;
  const pcm = new Int16Array(pendingLength);
  let at = 0;
  for (const block of pending) {
    for (let i = 0; i < block.length; i++) pcm[at++] = Math.max(-32768, Math.min(32767, Math.round(block[i] * 32767)));
  }
  pending = []; pendingLength = 0;
  if (socket && socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify({ type: "input_audio_buffer.append", audio: toBase64(pcm) }));
    sentSamples += pcm.length;
    drawTimeline();
  }
}

async function start() {
  sentSamples = 0;
  $("l-timeline").replaceChildren();
  $("l-events").replaceChildren();
  $("l-errors").textContent = "";
  socket = new WebSocket(wsUrl("/v1/realtime?intent=transcription"), wsProtocols());
  socket.onmessage = (message) => onEvent(JSON.parse(message.data));
  socket.onclose = (e) => { setStatus(e.code === 1008 ? "refused: this server needs an API key" : "disconnected"); stop(); };
  await new Promise((resolve, reject) => { socket.onopen = resolve; socket.onerror = () => reject(new Error("cannot open /v1/realtime")); });
  const vad = $("l-vad").checked ? { type: "server_vad", threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 } : null;
  socket.send(JSON.stringify({ type: "session.update", session: { type: "transcription", audio: { input: {
    format: { type: "audio/pcm", rate: RATE }, transcription: { model: "whisper-1" }, turn_detection: vad } } } }));
  stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false } });
  context = new AudioContext();
  await context.audioWorklet.addModule(url("/playground/pcm-worklet.js"));
  const node = new AudioWorkletNode(context, "pcm-capture");
  node.port.onmessage = (message) => onSamples(message.data);
  context.createMediaStreamSource(stream).connect(node);
  $("l-start").textContent = "Stop";
  setStatus("listening");
}

function stop() {
  if (socket && socket.readyState === WebSocket.OPEN && !$("l-vad").checked) {
    socket.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
  }
  if (stream) stream.getTracks().forEach((t) => t.stop());
  if (context) context.close();
  stream = context = null;
  $("l-start").textContent = "Start";
}

export function initLive() {
  $("l-start").addEventListener("click", () => {
    if (stream) stop(); else start().catch((e) => { $("l-errors").textContent = String(e.message || e); stop(); });
  });
}
