"""A CTranslate2 model wrapped so that a test sees every call the runner makes to it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any


class ModelSpy:
    """Forwards every method call to ``model`` and records (method, frames of an ``encode``'s input, keyword
    arguments, and a ``generate``'s prompts as ``prompts``) in ``calls``, which several spies may share."""

    def __init__(self, model: Any, calls: list[tuple[str, int | None, dict[str, Any]]]) -> None:
        self.model = model
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.model, name)

        def spied(*args: Any, **kwargs: Any) -> Any:
            frames = args[0].shape[2] if name == "encode" else None
            recorded = {**kwargs, "prompts": args[1]} if name == "generate" else kwargs
            self.calls.append((name, frames, recorded))
            return method(*args, **kwargs)

        return spied


@contextmanager
def spied_runner(runner: Any, **settings: Any) -> Iterator[list[tuple[str, int | None, dict[str, Any]]]]:
    """``runner`` with its encoder and decoder spied on and ``settings`` (fields of its ``WhisperOptions``,
    such as ``short_pad_frames``) set for the block; yields the calls, and puts everything back after."""
    calls: list[tuple[str, int | None, dict[str, Any]]] = []
    saved = {name: getattr(runner, name) for name in ("model", "decoder", "options")}
    runner.options = replace(runner.options, **settings)
    runner.model, runner.decoder = ModelSpy(saved["model"], calls), ModelSpy(saved["decoder"], calls)
    try:
        yield calls
    finally:
        for name, value in saved.items():
            setattr(runner, name, value)
