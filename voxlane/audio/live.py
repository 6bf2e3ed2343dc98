"""Live audio for realtime sessions: base64 pcm16 chunks in, 16 kHz int16 out, and turns found by Silero VAD.

:class:`LiveInput` is one session's front end. ``feed`` runs on the audio pool (never on the event loop):
it decodes a chunk's base64, resamples it to 16 kHz with the session's own resampler stream (chunks in
order: the session awaits each feed before the next), and, with server VAD on, scores each 32 ms frame
with the same Silero model as ``chunking_strategy`` (audio/vad.py), its LSTM state carried from chunk to
chunk. :class:`TurnDetector` turns those scores into speech start and stop positions; it is pure (no
model, no clock), so the rules are unit-tested on made-up probabilities.

Positions are samples at 16 kHz since the session's first audio. OpenAI's ``server_vad`` rules: speech
starts where a frame's probability reaches ``threshold`` (the turn's audio begins ``prefix_padding_ms``
before it), and stops once it has stayed under ``threshold - 0.15`` for ``silence_duration_ms`` (the
turn's audio ends there, that silence included). voxlane adds a *pause* event ``PAUSE_MS`` into that
silence: the session starts the turn's final decode there, so the text is on its way while server_vad
still waits to be sure the speaker is done. If speech comes back before the stop, a *resume* event says so,
and the session drops that decode (cancelled if the engine has not started it yet).
"""

from __future__ import annotations

import base64
import binascii
import difflib
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from voxlane.audio import vad
from voxlane.audio.decode import to_float
from voxlane.audio.features import log_mel
from voxlane.audio.resample import resamplers
from voxlane.audio.vad import CONTEXT, FRAME, SAMPLE_RATE, VadOptions
from voxlane.text.repeats import plain_words

PAUSE_MS = 200
"""Quiet after which a turn's final decode starts (when ``silence_duration_ms`` is longer than this): Silero
scores the end of a word a frame or two late, so the audio to this point holds the turn's last word."""
INPUT_RATES = (24000, 16000, 8000)
"""Sample rates a session accepts: pcm16 at OpenAI's 24 kHz or 16 kHz (Whisper's own, no resampling); G.711
(``audio/pcmu``, ``audio/pcma``) at its 8 kHz."""
ENCODINGS = ("pcm16", "pcmu", "pcma")
"""16-bit little-endian PCM; G.711 mu-law and A-law, one byte a sample (telephony)."""


class BadAudio(ValueError):
    """A chunk that is not base64 of 16-bit little-endian PCM; the message says what to send."""


def decode_pcm16(audio_b64: str) -> np.ndarray:
    """A chunk's base64 text -> its int16 samples (little-endian, mono)."""
    try:
        raw = base64.b64decode(audio_b64, validate=True)
    except (binascii.Error, ValueError):
        raise BadAudio("'audio' is not valid base64; send base64 of 16-bit little-endian mono PCM") from None
    if len(raw) % 2:
        raise BadAudio(f"'audio' holds {len(raw)} bytes, an odd number; pcm16 has 2 bytes per sample")
    return np.frombuffer(raw, dtype="<i2")


def _g711_tables() -> dict[str, np.ndarray]:
    """Each G.711 byte's 16-bit sample (ITU-T G.711: the byte is stored inverted, mu-law all bits, A-law the
    even ones)."""
    codes = np.arange(256, dtype=np.int32)
    u = ~codes & 0xFF
    mantissa, exponent = u & 0x0F, (u >> 4) & 0x07
    mu = (((mantissa << 3) + 0x84) << exponent) - 0x84
    mu = np.where(u & 0x80, -mu, mu)
    a = codes ^ 0x55
    mantissa, exponent = a & 0x0F, (a >> 4) & 0x07
    alaw = np.where(exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0))
    alaw = np.where(a & 0x80, alaw, -alaw)
    return {"pcmu": mu.astype(np.int16), "pcma": alaw.astype(np.int16)}


G711 = _g711_tables()


def decode_chunk(audio_b64: str, encoding: str) -> np.ndarray:
    """A chunk's base64 text in ``encoding`` -> its int16 samples."""
    if encoding == "pcm16":
        return decode_pcm16(audio_b64)
    try:
        raw = base64.b64decode(audio_b64, validate=True)
    except (binascii.Error, ValueError):
        raise BadAudio(f"'audio' is not valid base64; send base64 of G.711 bytes ({encoding})") from None
    return G711[encoding][np.frombuffer(raw, dtype=np.uint8)]


@dataclass(frozen=True)
class TurnEvent:
    kind: str
    """'start', 'pause', 'resume' (speech again after a pause, the turn going on) or 'stop'."""
    sample: int
    """Where the turn's audio starts (prefix padding included) or ends (the closing silence included; for a
    pause, the quiet so far); for a resume, the frame where speech came back."""
    quiet_from: int = -1
    """For 'pause', 'resume' and 'stop': where the run of quiet frames began. A stop with the same ``quiet_from`` as
    a pause ends the turn in the silence that pause was in: nothing was said between them."""


@dataclass
class TurnDetector:
    """OpenAI's server_vad rules over per-frame speech probabilities (one per FRAME samples)."""

    options: VadOptions
    origin: int = 0
    """Session sample of the first frame (the detector restarts when the session's settings change)."""
    frames_seen: int = 0
    speaking: bool = False
    quiet_since: int | None = None
    """Frame where the current run of quiet frames began, while speaking."""
    paused: bool = False
    """Whether the current run of quiet frames has sent its pause event."""

    def feed(self, probs: np.ndarray) -> list[TurnEvent]:
        on = self.options.threshold
        off = max(on - 0.15, 0.01)
        pad = self.options.prefix_padding_ms * SAMPLE_RATE // 1000
        silence_frames = max(1, -(-self.options.silence_duration_ms * SAMPLE_RATE // 1000 // FRAME))
        pause_frames = -(-PAUSE_MS * SAMPLE_RATE // 1000 // FRAME)
        events = []
        for p in probs:
            i = self.frames_seen
            self.frames_seen += 1
            if not self.speaking:
                if p >= on:
                    self.speaking, self.quiet_since = True, None
                    events.append(TurnEvent("start", self.origin + max(0, i * FRAME - pad)))
                continue
            if p >= on:
                if self.paused and self.quiet_since is not None:  # speech again: that pause's decode goes
                    events.append(TurnEvent("resume", self.origin + i * FRAME, self.origin + self.quiet_since * FRAME))
                self.quiet_since, self.paused = None, False
            elif p < off:
                if self.quiet_since is None:
                    self.quiet_since = i
                quiet, quiet_from = i + 1 - self.quiet_since, self.origin + self.quiet_since * FRAME
                if quiet >= silence_frames:
                    self.speaking, self.quiet_since, self.paused = False, None, False
                    events.append(TurnEvent("stop", self.origin + (i + 1) * FRAME, quiet_from))
                elif quiet >= pause_frames and not self.paused:
                    self.paused = True
                    events.append(TurnEvent("pause", self.origin + (i + 1) * FRAME, quiet_from))
        return events


class StreamingVad:
    """Silero over a stream: each frame sees the CONTEXT samples before it, the LSTM state carries over."""

    def __init__(self) -> None:
        self._h = self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._tail = np.zeros(CONTEXT, dtype=np.float32)
        """The CONTEXT samples before the first sample of ``_pending``."""
        self._pending = np.zeros(0, dtype=np.float32)

    def probabilities(self, samples: np.ndarray) -> np.ndarray:
        """Speech probabilities of the whole frames completed by ``samples`` (float32 at 16 kHz)."""
        pending = np.concatenate((self._pending, samples))
        n = len(pending) // FRAME
        if n == 0:
            self._pending = pending
            return np.zeros(0, dtype=np.float32)
        flat = np.concatenate((self._tail, pending[: n * FRAME]))
        probs, self._h, self._c = vad.model().session.run(
            None, {"input": flat[_frame_index(n)], "h": self._h, "c": self._c}
        )
        self._tail = flat[-CONTEXT:].copy()
        self._pending = pending[n * FRAME :].copy()
        return np.asarray(probs, dtype=np.float32).reshape(-1)[:n]


@lru_cache(maxsize=64)
def _frame_index(n: int) -> np.ndarray:
    """Where each of ``n`` frames and the CONTEXT samples before it lie in the samples that hold them: one
    gather per chunk, a fifth of ``sliding_window_view``'s cost, most of which holds the GIL."""
    index = np.arange(n)[:, None] * FRAME + np.arange(CONTEXT + FRAME)
    index.flags.writeable = False  # shared by every session's thread
    return index


@dataclass
class Fed:
    pcm: np.ndarray
    """The chunk at 16 kHz, int16."""
    events: list[TurnEvent] = field(default_factory=list)


class LiveInput:
    """One session's audio front end. Not thread-safe: one ``feed`` at a time, in order."""

    def __init__(
        self, input_rate: int, turn_detection: VadOptions | None, origin: int = 0, encoding: str = "pcm16"
    ) -> None:
        if input_rate not in INPUT_RATES or encoding not in ENCODINGS:
            raise ValueError(f"input {encoding} at {input_rate} Hz is not one of {ENCODINGS} at {INPUT_RATES}")
        self.input_rate = input_rate
        self.encoding = encoding
        self._stack = ExitStack()
        self._resample = self._stack.enter_context(resamplers.stream(input_rate, SAMPLE_RATE))
        self.turns = TurnDetector(turn_detection, origin) if turn_detection is not None else None
        self._vad = StreamingVad() if turn_detection is not None else None

    def feed(self, audio_b64: str) -> Fed:
        pcm = decode_chunk(audio_b64, self.encoding)
        samples = pcm.astype(np.float32) / 32768.0
        if self.input_rate != SAMPLE_RATE:
            samples = np.asarray(self._resample(samples, False), dtype=np.float32)
        out = np.clip(np.round(samples * 32768.0), -32768, 32767).astype(np.int16)
        events: list[TurnEvent] = []
        if self._vad is not None and self.turns is not None and len(samples):
            events = self.turns.feed(self._vad.probabilities(samples))
        return Fed(out, events)

    def close(self) -> None:
        """Give the cached resampler back (another session may take it)."""
        self._stack.close()


PARTIAL_PAD_FRAMES = 300
"""Silence (3 s of log-mel frames) kept after a partial's audio when its features are cut short. Cut to the
audio alone, Whisper loops on short clips ("Firefox Firefox ..."); on the dev set's 12 short clips partials
scored 81% WER with 1 s of padding and 40% with 3 s (30 s: 19%), at 0.13 and 0.07 s a clip against 0.87 s
(the loops cost the decoder more than the frames cost the encoder)."""


def partial_features(pcm: np.ndarray, n_mels: int) -> tuple[np.ndarray, int]:
    """A live partial's log-mel features, cut to its audio plus PARTIAL_PAD_FRAMES (not padded to 30 s: the
    encoder's cost grows with the frames), and how many frames hold audio. ``pcm`` is int16 at 16 kHz."""
    features, n_frames = log_mel(to_float(pcm), n_mels)
    return np.ascontiguousarray(features[:, : min(features.shape[1], n_frames + PARTIAL_PAD_FRAMES)]), n_frames


def unsent(words: list[str], sent: list[str]) -> list[str]:
    """The words of a newer decode (``words``) past those a turn already sent as deltas (``sent``, read
    by earlier decodes that may have heard some words differently, or, for a final, less audio before
    the speech). Aligned by the last run of words both share; words of ``sent`` after that run stand
    for as many words of ``words``."""
    if not sent:
        return words
    matcher = difflib.SequenceMatcher(None, plain_words(sent), plain_words(words), autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    if not blocks:
        return words[len(sent) :]
    last = blocks[-1]
    return words[last.b + last.size + len(sent) - last.a - last.size :]
