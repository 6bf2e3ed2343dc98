// The demo page: microphone -> AudioWorklet -> pcm16 at 24 kHz -> /v1/realtime; deltas and finals on screen.
"use strict";
const RATE = 24000;
const CHUNK_SAMPLES = RATE / 10; // 100 ms per append
const $ = (id) => document.getElementById(id);
let socket = null, context = null, stream = null, pending = [], pendingLength = 0;
const items = new Map(); // item_id -> <p>

function setStatus(text) { $("status").textContent = text; }

function line(itemId) {
  let p = items.get(itemId);
  if (!p) {
    p = document.createElement("p");
    p.className = "partial";
    p.dataset.item = itemId;
    $("transcript").appendChild(p);
    items.set(itemId, p);
  }
  return p;
}

function onEvent(event) {
  switch (event.type) {
    case "input_audio_buffer.speech_started": setStatus("hearing speech"); break;
    case "input_audio_buffer.speech_stopped": setStatus("transcribing"); break;
    case "conversation.item.input_audio_transcription.delta": line(event.item_id).textContent += event.delta; break;
    case "conversation.item.input_audio_transcription.completed": {
      const p = line(event.item_id);
      p.textContent = event.transcript;
      p.className = "final";
      setStatus("listening");
      break;
    }
    case "error": $("errors").textContent = event.error.message; break;
  }
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
    socket.send(JSON.stringify({type: "input_audio_buffer.append", audio: toBase64(pcm)}));
  }
}

async function start() {
  const key = new URLSearchParams(location.search).get("key");
  const protocols = ["realtime"];
  if (key) protocols.push("openai-insecure-api-key." + key);
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/v1/realtime?intent=transcription`, protocols);
  socket.onmessage = (message) => onEvent(JSON.parse(message.data));
  socket.onclose = () => { setStatus("disconnected"); stop(); };
  await new Promise((resolve, reject) => { socket.onopen = resolve; socket.onerror = reject; });
  const vad = $("vad").checked ? {type: "server_vad", threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500} : null;
  socket.send(JSON.stringify({type: "session.update", session: {type: "transcription", audio: {input: {
    format: {type: "audio/pcm", rate: RATE}, transcription: {model: "whisper-1", language: "en"}, turn_detection: vad}}}}));
  stream = await navigator.mediaDevices.getUserMedia({audio: {channelCount: 1, echoCancellation: false, noiseSuppression: false}});
  context = new AudioContext();
  await context.audioWorklet.addModule("/demo/pcm-worklet.js");
  const node = new AudioWorkletNode(context, "pcm-capture");
  node.port.onmessage = (message) => onSamples(message.data);
  context.createMediaStreamSource(stream).connect(node);
  $("start").textContent = "Stop";
  setStatus("listening");
}

function stop() {
  if (socket && socket.readyState === WebSocket.OPEN && !$("vad").checked) {
    socket.send(JSON.stringify({type: "input_audio_buffer.commit"}));
  }
  if (stream) stream.getTracks().forEach((t) => t.stop());
  if (context) context.close();
  stream = context = null;
  $("start").textContent = "Start";
}

$("start").onclick = () => {
  if (stream) stop(); else start().catch((e) => { $("errors").textContent = String(e); stop(); });
};
