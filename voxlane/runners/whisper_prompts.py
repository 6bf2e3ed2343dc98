"""What the decoder is given before a window's text: the request's prompt, the start-of-transcript
sequence, a forced prefix, <|notimestamps|>; and the bounded memo a runner keeps them in."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from faster_whisper.tokenizer import Tokenizer

from voxlane.messages import TranscribeOptions
from voxlane.runners.base import WindowPass, decodes_timestamps

T = TypeVar("T")

MAX_LENGTH = 448
MAX_PREFIX_TOKENS = 120
"""At most this much of a forced prefix (its end) is kept: the decoder's 448 positions hold it and the text."""
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


def prompt_tokens(tok: Tokenizer, options: TranscribeOptions, prefix: tuple[int, ...]) -> tuple[int, ...]:
    """Whisper's prompt: the request's ``prompt`` after <|startofprev|>, then the start-of-transcript
    sequence. A continuation gets the same prompt as its window, not the text of the passes before it:
    on the dev set that text made continuations over pauses repeat earlier sentences ("You know this is
    true." after "You know this could be true.") and invent "Thank you." (6.7% WER with it, 6.6%
    without; docs/long-audio.md). A ``prefix`` (its tokens: ``prefix_tokens``) follows the
    start-of-transcript sequence, after <|notimestamps|>."""
    prompt: list[int] = []
    if options.prompt:
        previous = tok.encode(" " + options.prompt.strip())
        prompt = [tok.sot_prev, *previous[-(MAX_LENGTH // 2 - 1) :]]
    if options.prefix:
        return (*prompt, *tok.sot_sequence, tok.no_timestamps, *prefix)
    return (*prompt, *tok.sot_sequence)


def prefix_tokens(tok: Tokenizer, prefix: str) -> tuple[int, ...]:
    """A forced prefix's tokens (``TranscribeOptions.prefix``). CTranslate2 forces them one decoder step each
    (~4 ms on tiny.en) and returns them at the head of the result, where the runner takes them off."""
    return tuple(tok.encode(" " + prefix.strip())[-MAX_PREFIX_TOKENS:])


def no_timestamps(work: WindowPass, tok: Tokenizer) -> tuple[int, ...]:
    """<|notimestamps|> for the one window of a request that shows no times; nothing for the others
    (``decodes_timestamps``)."""
    return () if decodes_timestamps(work) else (tok.no_timestamps,)
