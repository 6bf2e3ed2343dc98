"""Whisper on CTranslate2: encode a batch of 30 s windows, generate with timestamps, align words.

Each window is decoded on its own (no conditioning on the windows before it), which is what lets windows
of many requests share a batch. A window whose greedy output looks degenerate is decoded again at rising
temperatures, a doubted one again with a beam (runners/whisper_decode.py), and a window that is most likely
silence yields nothing. A decode that stops before its window's audio does hands back where the rest should
be decoded (runners/whisper_segments.py).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import ctranslate2
import numpy as np
import tokenizers
from faster_whisper.tokenizer import Tokenizer

from voxlane.audio.features import FRAMES_PER_SECOND, N_FRAMES, pad_frames
from voxlane.config import EngineConfig
from voxlane.messages import Segment, TranscribeOptions, WindowResult
from voxlane.runners.base import SHORT_MAX_S, WindowOutput, WindowPass, is_short, short_pad
from voxlane.runners.cuda import place
from voxlane.runners.whisper_align import align, take_rows
from voxlane.runners.whisper_decode import (
    COMPRESSION_RATIO_THRESHOLD,
    FALLBACK_TEMPERATURES,
    Decoded,
    beam_wins,
    fallback_wins,
    short_read_loops,
    short_token_cap,
)
from voxlane.runners.whisper_prompts import (
    MAX_LENGTH,
    MEMO_SIZE,
    Memo,
    no_timestamps,
    prefix_tokens,
    prompt_tokens,
)
from voxlane.runners.whisper_segments import pass_segments

log = logging.getLogger(__name__)

PARTIAL_TOKENS_PER_S = 8
"""Most tokens a live partial may decode per second of its audio (fast speech is 4-5 words a second)."""


def model_n_mels(model_path: str | Path) -> int:
    """Mel bins the model expects: preprocessor_config.json's feature_size, else Whisper's 80."""
    config = Path(model_path) / "preprocessor_config.json"
    if config.is_file():
        return int(json.loads(config.read_text()).get("feature_size", 80))
    return 80


@dataclass(frozen=True)
class WhisperOptions:
    """How a runner decodes, from the engine's settings (``from_config``)."""

    beam_size: int = 1
    """``--beam-size``: the beam of a window's first decode when neither its request nor the scheduler
    chose one."""
    doubt_beam_size: int = 0
    """``--doubt-beam-size``: the beam of the second decode of a doubted window (0: no second decode)."""
    doubt_log_prob: float = -0.5
    """``--doubt-log-prob``: a first decode with a mean log-probability under this is doubted."""
    short_pad_frames: int = 0
    """Frames of silence after a short window's audio (``is_short``); 0: every window is 30 s."""
    short_final_pad_frames: int = 0
    """The same for a live turn's final (``--short-final-pad-s``); 0: every final is 30 s."""

    @classmethod
    def from_config(cls, config: EngineConfig) -> WhisperOptions:
        return cls(
            beam_size=config.beam_size,
            doubt_beam_size=config.doubt_beam_size,
            doubt_log_prob=config.doubt_log_prob,
            short_pad_frames=round(config.short_window_pad_s * FRAMES_PER_SECOND),
            short_final_pad_frames=round(config.short_final_pad_s * FRAMES_PER_SECOND),
        )


@dataclass
class _Round:
    """One encode and decode of some windows of a batch: the first of all of them, then a second of the live
    finals whose short read looped, on all 30 s."""

    work: list[WindowPass]
    encoded: ctranslate2.StorageView
    languages: list[str]
    outputs: list[WindowOutput]
    looped: list[int]
    """Rows of this round decoded again in the next."""


class WhisperRunner:
    """Decodes batches of windows (``run``) on one Whisper model, as its ``WhisperOptions`` say."""

    def __init__(
        self,
        model: ctranslate2.models.Whisper,
        hf_tokenizer: tokenizers.Tokenizer,
        n_mels: int,
        options: WhisperOptions,
        decoder: ctranslate2.models.Whisper | None = None,
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
        self.options = options
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
        runner = cls(model, tokenizer, model_n_mels(path), WhisperOptions.from_config(config), decoder)
        if config.device == "cuda":
            runner.warm_up(config.max_batch_size, config.warm_up_beam_sizes)
        return runner

    def warm_up(self, max_batch_size: int, beam_sizes: Sequence[int] = ()) -> None:
        """Run each batch size the scheduler may form, by powers of two, once before the engine says it is
        ready: CUDA compiles the kernels a GPU newer than the wheel needs at their first use (seconds to tens
        of seconds, read from the JIT cache on the next start) and cuBLAS picks its algorithms per shape.
        Then every other kind of decode a request may ask for, once each, since each has kernels of its own:
        a beam search of each of ``beam_sizes`` (a live turn's final: --realtime-beam-size) and of the doubt
        beam (--doubt-beam-size), a sampled decode (the temperature fallback), word alignment
        (timestamp_granularities=word) and features cut short (live partials are cut to their audio)."""
        sizes = sorted({1, max_batch_size, *(2**k for k in range(1, max_batch_size.bit_length()))})
        tok = self.tokenizer("transcribe", "en")
        silence = np.full((self.n_mels, N_FRAMES), -1.5, dtype=np.float32)  # digital silence's log-mel
        prompt = list(tok.sot_sequence)
        for size in sizes:
            encoded = self.model.encode(ctranslate2.StorageView.from_array(np.stack([silence] * size)))
            self.decoder.generate(encoded, [prompt] * size, max_length=8, beam_size=1)
        encoded = self.model.encode(ctranslate2.StorageView.from_array(silence[None]))
        for beam_size in sorted({self.options.beam_size, self.options.doubt_beam_size, *beam_sizes} - {0, 1}):
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
        self._memo.clear()

    def tokenizer(self, task: str, language: str) -> Tokenizer:
        return self._memo(
            ("tokenizer", task, language),
            lambda: Tokenizer(self.hf_tokenizer, self.is_multilingual, task=task, language=language),
        )

    def _prompt_tokens(self, language: str, options: TranscribeOptions) -> tuple[int, ...]:
        return self._memo(("prompt", language, options), lambda: self._make_prompt_tokens(language, options))

    def _make_prompt_tokens(self, language: str, options: TranscribeOptions) -> tuple[int, ...]:
        prefix = self._prefix_tokens(options.task, language, options.prefix) if options.prefix else ()
        return prompt_tokens(self.tokenizer(options.task, language), options, prefix)

    def _prefix_tokens(self, task: str, language: str, prefix: str) -> tuple[int, ...]:
        return self._memo(
            ("prefix", task, language, prefix), lambda: prefix_tokens(self.tokenizer(task, language), prefix)
        )

    def beam_for(self, work: WindowPass) -> int:
        """The beam of the window's first decode: its request's (live work), the scheduler's choice, or
        ``--beam-size``."""
        return work.options.beam_size or work.beam_size or self.options.beam_size

    # --- the batch -------------------------------------------------------------------------------

    def is_short(self, work: WindowPass) -> bool:
        return is_short(work, self.options.short_pad_frames, self.options.short_final_pad_frames)

    def short_frames(self, work: WindowPass) -> int:
        """Frames a short window (``is_short``) is encoded on: SHORT_MAX_S of audio and the pad, whatever its
        own length, so that its encoding never depends on the windows batched with it (each padded to its
        own length plus the pad, batches padded them to their widest: the dev set read 5.91-6.11% at 16
        clients, against 5.70% in every run this way; docs/asr-engine.md)."""
        pad = short_pad(work, self.options.short_pad_frames, self.options.short_final_pad_frames)
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
        self, batch: Sequence[WindowPass], features: np.ndarray, encoder: ctranslate2.models.Whisper
    ) -> list[WindowOutput]:
        """Encode and decode the batch in rounds: a live final read short that loops is decoded again on all
        30 s in the next round (``WindowPass.whole``), as before short windows, and its output replaces the
        looped one. Each round's windows that asked for word timestamps or logprobs are aligned on that
        round's encoding, the last round first."""
        outputs: list[WindowOutput] = []
        rounds: list[_Round] = []
        work, rows, at = list(batch), features, list(range(len(batch)))
        while work:
            encoded = encoder.encode(ctranslate2.StorageView.from_array(rows))
            languages = self._languages(work, encoded, encoder, rows.shape[2])
            decoded = self._generate(work, encoded, languages)
            shaped = [self._output(w, lang, d) for w, lang, d in zip(work, languages, decoded)]
            looped = [
                k
                for k, (w, o, d) in enumerate(zip(work, shaped, decoded))
                if self._short_final_loops(w, o.result.segments, d)
            ]
            if not rounds:
                outputs = list(shaped)
            else:
                for k, output in zip(at, shaped):
                    text = "".join(s.text for s in outputs[k].result.segments)
                    log.debug("a live final read short looped (%r): read on 30 s", text[:80])
                    outputs[k] = output
            rounds.append(_Round(work, encoded, languages, shaped, looped))
            work = [work[k].read_whole() for k in looped]
            at = [at[k] for k in looped]
            if work:
                rows = np.stack([w.features for w in work])
        for r in reversed(rounds):
            aligned = [
                k
                for k, w in enumerate(r.work)
                if (w.options.word_timestamps or w.options.logprobs)
                and r.outputs[k].result.segments
                and k not in r.looped
            ]
            if aligned:
                resumes = align(
                    self.decoder,
                    [r.work[k] for k in aligned],
                    [r.outputs[k].result for k in aligned],
                    take_rows(r.encoded, aligned, len(r.work)),
                    [self.tokenizer(r.work[k].options.task, r.languages[k]) for k in aligned],
                    self.hf_tokenizer,
                )
                for k, resume_s in zip(aligned, resumes, strict=True):
                    output = r.outputs[k]
                    if resume_s is not None and (output.resume_s is None or resume_s < output.resume_s):
                        output.resume_s = resume_s  # its words skipped speech: the segments after are cut
        return outputs

    def _output(self, work: WindowPass, language: str, decoded: Decoded) -> WindowOutput:
        """A pass's segments at their true times, and where its continuation starts."""
        tok = self.tokenizer(work.options.task, language)
        segments, resume_s = pass_segments(work, tok, decoded, self.is_short(work))
        result = WindowResult(
            work.request_id,
            work.msg.index,
            language,
            segments,
            short=self.is_short(work),
            whole_retry=work.whole,
            beam_size=self.beam_for(work),
        )
        return WindowOutput(result, resume_s)

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
                source = take_rows(encoded, unknown, len(batch))
            detected = self.decoder.detect_language(source)
            for i, candidates in zip(unknown, detected):
                languages[i] = candidates[0][0][2:-2]  # '<|de|>' -> 'de'
        return languages

    def _generate(
        self, batch: Sequence[WindowPass], encoded: ctranslate2.StorageView, languages: list[str]
    ) -> list[Decoded]:
        prompts = [
            [*self._prompt_tokens(lang, w.options), *no_timestamps(w, self.tokenizer(w.options.task, lang))]
            for w, lang in zip(batch, languages)
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
                if fallback_wins(best[i], candidate):
                    best[i] = candidate
                if best[i].needs_fallback:
                    still.append(i)
            pending = still
        return best

    def _short_final(self, work: WindowPass) -> bool:
        return work.msg.is_live and self.is_short(work)

    def _short_final_loops(self, work: WindowPass, segments: Sequence[Segment], decoded: Decoded) -> bool:
        """Whether a live final read on a short window went wrong: it ran to its token cap (a loop cut short
        is too short for the compression ratio to tell: "This is all very whisper-da-da-da-...", 2.17), or
        ``short_read_loops``. It is then decoded again on all 30 s, where these turns read right."""
        if not self._short_final(work) or not segments:
            return False
        if len(decoded.tokens) >= short_token_cap(work.msg.duration_s) - 1:
            return True
        text = " ".join(s.text.strip() for s in segments)
        return short_read_loops(text, segments[0].avg_logprob, work.options.prefix)

    def doubts(self, decoded: Decoded, work: WindowPass) -> bool:
        """Whether a first decode at temperature 0 deserves a second, wider one (``doubt_beam_size``): its
        mean log-probability is under ``doubt_log_prob`` or its text repeats itself (compression ratio over
        2.4), and it is not silence. Live work never does (a partial is replaced within a second, and a turn's
        final is already decoded with --realtime-beam-size, whose latency docs/realtime.md measures), nor a
        window already decoded with a beam at least as wide."""
        doubt_beam_size = self.options.doubt_beam_size
        if doubt_beam_size <= 1 or work.msg.is_live or decoded.is_silence:
            return False
        if self.beam_for(work) >= doubt_beam_size:
            return False
        return (
            decoded.avg_logprob < self.options.doubt_log_prob or decoded.compression_ratio > COMPRESSION_RATIO_THRESHOLD
        )

    def _second_opinion(
        self,
        best: list[Decoded],
        encoded: ctranslate2.StorageView,
        prompts: list[list[int]],
        languages: list[str],
        batch: Sequence[WindowPass],
    ) -> None:
        """Beam on doubt: decode the doubted windows again with a beam of ``doubt_beam_size`` (the encoder's
        output is reused: only the decoder runs again) and keep the beam's decode where ``beam_wins``."""
        doubted = [i for i, d in enumerate(best) if self.doubts(d, batch[i])]
        if not doubted:
            return
        wide = self._decode_once(encoded, doubted, prompts, languages, batch, 0.0, self.options.doubt_beam_size)
        for i, candidate in zip(doubted, wide):
            if beam_wins(best[i], candidate):
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
    ) -> list[Decoded]:
        """Decode the windows ``rows`` of the batch; one result per row, in order. CTranslate2 wants the
        start-of-transcript token at the same place in every row of a call, and takes one beam size a call,
        so rows whose prompts differ in length (requests with prompts of their own) or that ask for another
        beam size (``TranscribeOptions.beam_size``) go in separate calls."""
        groups: dict[tuple[int, int], list[int]] = {}
        for i in rows:
            width = beam_size or self.beam_for(batch[i])
            groups.setdefault((len(prompts[i]), width), []).append(i)
        decoded: dict[int, Decoded] = {}
        for (_, beam_size), group in groups.items():
            outs = self._generate_rows(
                take_rows(encoded, group, len(batch)),
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
    ) -> list[Decoded]:
        sampling = {"sampling_temperature": temperature, "sampling_topk": 0} if temperature > 0 else {}
        max_length = MAX_LENGTH
        longest_s = max(w.msg.duration_s for w in batch)
        if all(w.msg.partial for w in batch):
            # A partial's few seconds hold a few words: a decode that loops (more likely on features cut
            # to the audio) stops early instead of running to 448 tokens.
            max_length = min(MAX_LENGTH, len(prompts[0]) + PARTIAL_TOKENS_PER_S * math.ceil(longest_s) + 8)
        elif all(self.is_short(w) for w in batch):
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
            decoded.append(Decoded(tokens, avg_logprob, out.no_speech_prob, temperature, text, width))
        return decoded
