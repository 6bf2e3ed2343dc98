"""A CTranslate2 model wrapped so that a test sees every call the runner makes to it."""

from __future__ import annotations

from typing import Any


class ModelSpy:
    """Forwards every method call to ``model`` and records (method, frames of an ``encode``'s input, keyword
    arguments) in ``calls``, which several spies may share."""

    def __init__(self, model: Any, calls: list[tuple[str, int | None, dict[str, Any]]]) -> None:
        self.model = model
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.model, name)

        def spied(*args: Any, **kwargs: Any) -> Any:
            frames = args[0].shape[2] if name == "encode" else None
            self.calls.append((name, frames, kwargs))
            return method(*args, **kwargs)

        return spied
