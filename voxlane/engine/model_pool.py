"""Which Whisper models the engine holds: loaded on demand, unloaded when idle. Pure bookkeeping, time as an
argument: the core (core.py) runs the loads on its loader thread and tells the pool what happened.

Contract:
- The default model (the first ``--model``) is loaded at start and never unloaded.
- ``want(model)`` asks for a model; ``next_load(busy, now)`` names the next one to load (one load at a time)
  and the models to unload first to stay within ``max_loaded``: the least recently used ones with no work
  (``busy``: models with windows queued, waiting or running). When every loaded model is busy, the load
  waits: ``next_load`` answers None until one is idle.
- ``expired(busy, now)``: the models other than the default with no work for ``ttl_s`` (0: never).
- A model is used when a window of it is queued or finishes, or a ``LoadModel`` names it (``touch``).
- ``unload(model)`` (an ``UnloadModel``, an expiry or an eviction) never unloads the default model.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from voxlane.messages import ModelState
from voxlane.runners.base import Runner


@dataclass
class _Model:
    path: str
    runner: Runner | None = None
    memory_bytes: int = 0
    last_used_s: float = 0.0
    loads: int = 0
    unloads: int = 0
    load_seconds: float = 0.0


class ModelPool:
    def __init__(
        self, default: str, runner: Runner, max_loaded: int, ttl_s: float, now: float, memory_bytes: int = 0,
        load_s: float = 0.0,
    ) -> None:  # fmt: skip
        self.default = default
        self.max_loaded = max(1, max_loaded)
        self.ttl_s = ttl_s
        self._models: dict[str, _Model] = {default: _Model(default, runner, memory_bytes, now, 1, 0, load_s)}
        self._lru: OrderedDict[str, None] = OrderedDict({default: None})
        """Loaded models, least recently used first."""
        self._wanted: OrderedDict[str, None] = OrderedDict()
        self.loading: str | None = None

    def runner(self, model: str) -> Runner | None:
        entry = self._models.get(model)
        return None if entry is None else entry.runner

    def is_loaded(self, model: str) -> bool:
        return model in self._lru

    @property
    def loaded(self) -> list[str]:
        return list(self._lru)

    def touch(self, model: str, now: float) -> None:
        if model in self._lru:
            self._models[model].last_used_s = now
            self._lru.move_to_end(model)

    def want(self, model: str) -> None:
        if model not in self._lru and model != self.loading:
            self._wanted.setdefault(model, None)

    def forget(self, model: str) -> None:
        """Nobody waits for ``model`` any more (its windows were aborted): it need not load."""
        self._wanted.pop(model, None)

    def next_load(self, busy: set[str]) -> tuple[str, list[str]] | None:
        """(model to load now, loaded models to unload before it), or None: a load runs, none is wanted, or
        every loaded model is busy and there is no room."""
        if self.loading is not None or not self._wanted:
            return None
        model = next(iter(self._wanted))
        room = self.max_loaded - len(self._lru)
        evict: list[str] = []
        for candidate in self._lru:  # least recently used first
            if room >= 1:
                break
            if candidate != self.default and candidate not in busy:
                evict.append(candidate)
                room += 1
        if room < 1:
            return None
        del self._wanted[model]
        self.loading = model
        return model, evict

    def loaded_ok(self, model: str, runner: Runner, memory_bytes: int, seconds: float, now: float) -> None:
        entry = self._models.setdefault(model, _Model(model))
        entry.runner, entry.memory_bytes, entry.last_used_s = runner, memory_bytes, now
        entry.loads += 1
        entry.load_seconds += seconds
        self._lru[model] = None
        self._lru.move_to_end(model)
        self.loading = None

    def load_failed(self, model: str, seconds: float) -> None:
        entry = self._models.setdefault(model, _Model(model))
        entry.load_seconds += seconds
        self.loading = None

    def unload(self, model: str) -> Runner | None:
        """Forget the model's runner (the caller lets it go); returns it. ``expired`` and ``next_load`` never
        name the default model, and it is never unloaded here either."""
        if model not in self._lru or model == self.default:
            return None
        del self._lru[model]
        entry = self._models[model]
        runner, entry.runner, entry.memory_bytes = entry.runner, None, 0
        entry.unloads += 1
        return runner

    def expired(self, busy: set[str], now: float) -> list[str]:
        if self.ttl_s <= 0:
            return []
        return [
            m
            for m in self._lru
            if m != self.default and m not in busy and now - self._models[m].last_used_s >= self.ttl_s
        ]

    def next_expiry(self, busy: set[str]) -> float | None:
        """When the next idle model's TTL runs out (None: no such model)."""
        if self.ttl_s <= 0:
            return None
        times = [self._models[m].last_used_s + self.ttl_s for m in self._lru if m != self.default and m not in busy]
        return min(times) if times else None

    def states(self) -> list[ModelState]:
        return [
            ModelState(m.path, m.path in self._lru, m.memory_bytes, m.loads, m.unloads, round(m.load_seconds, 3))
            for m in self._models.values()
        ]
