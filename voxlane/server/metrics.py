"""Counters for /metrics (Prometheus text format). Updated on the event loop only: no locks."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from voxlane.server.loopmon import GcPauseMonitor, LoopStallMonitor


@dataclass
class Metrics:
    requests: Counter[tuple[str, int]] = field(default_factory=Counter)
    """(route, status) -> count"""
    audio_seconds: float = 0.0
    """Seconds of audio transcribed successfully."""
    windows: int = 0
    continuations: int = 0
    """Extra decode passes over windows whose first decode stopped early."""
    stream_errors: int = 0
    """Streams that ended with an error after their first byte."""
    speech_seconds: float = 0.0
    """Seconds of speech synthesised and sent."""
    speech_streams: int = 0
    """Speech streams that completed."""
    engine_restarts: int = 0
    """Engine processes started after one died."""
    loop: LoopStallMonitor = field(default_factory=LoopStallMonitor)
    gc: GcPauseMonitor = field(default_factory=GcPauseMonitor)

    def render(self, queued_windows: int, engine_up: bool) -> str:
        lines = [
            "# HELP voxlane_requests_total HTTP requests by route and status.",
            "# TYPE voxlane_requests_total counter",
        ]
        for (route, status), count in sorted(self.requests.items()):
            lines.append(f'voxlane_requests_total{{route="{route}",status="{status}"}} {count}')
        lines += [
            "# TYPE voxlane_audio_seconds_total counter",
            f"voxlane_audio_seconds_total {self.audio_seconds:.3f}",
            "# TYPE voxlane_windows_total counter",
            f"voxlane_windows_total {self.windows}",
            "# HELP voxlane_continuation_passes_total Extra decode passes over windows whose decode stopped early.",
            "# TYPE voxlane_continuation_passes_total counter",
            f"voxlane_continuation_passes_total {self.continuations}",
            "# TYPE voxlane_stream_errors_total counter",
            f"voxlane_stream_errors_total {self.stream_errors}",
            "# TYPE voxlane_engine_queued_windows gauge",
            f"voxlane_engine_queued_windows {queued_windows}",
            "# TYPE voxlane_engine_up gauge",
            f"voxlane_engine_up {int(engine_up)}",
            "# HELP voxlane_engine_restarts_total Engine processes started after one died.",
            "# TYPE voxlane_engine_restarts_total counter",
            f"voxlane_engine_restarts_total {self.engine_restarts}",
            "# TYPE voxlane_speech_seconds_total counter",
            f"voxlane_speech_seconds_total {self.speech_seconds:.3f}",
            "# TYPE voxlane_speech_streams_total counter",
            f"voxlane_speech_streams_total {self.speech_streams}",
        ]
        lines += self.loop.render()
        lines += self.gc.render()
        return "\n".join(lines) + "\n"
