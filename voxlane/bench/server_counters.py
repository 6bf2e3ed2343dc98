"""What the server did for a run, from its /metrics before and after: Whisper windows per hour of audio and
extra decode passes. A server that is not voxlane (or hides /metrics) gives None, and the report leaves
the figures out."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

COUNTERS = {
    "windows": "voxlane_windows_total",
    "audio_s": "voxlane_audio_seconds_total",
    "continuation_passes": "voxlane_continuation_passes_total",
}


def scrape(base_url: str, headers: dict[str, str] | None = None) -> dict[str, float] | None:
    """The counters above, or None when /metrics cannot be read or is not voxlane's."""
    try:
        r = httpx.get(base_url.rstrip("/") + "/metrics", headers=headers or {}, timeout=10.0)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    samples = {s.name: s.value for family in text_string_to_metric_families(r.text) for s in family.samples}
    if not all(name in samples for name in COUNTERS.values()):
        return None
    return {key: samples[name] for key, name in COUNTERS.items()}


def window_figures(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, Any] | None:
    """Windows, windows per audio hour and continuation passes per window over the run (other clients of
    the server during the run count too)."""
    if before is None or after is None:
        return None
    d = {key: after[key] - before[key] for key in COUNTERS}
    return {
        "windows": int(d["windows"]),
        "audio_s": d["audio_s"],
        "windows_per_audio_hour": d["windows"] / d["audio_s"] * 3600 if d["audio_s"] > 0 else None,
        "continuation_passes": int(d["continuation_passes"]),
        "continuation_passes_per_window": d["continuation_passes"] / d["windows"] if d["windows"] else None,
    }
