"""Rendering a finished transcription in OpenAI's response formats."""

from __future__ import annotations

from collections.abc import Sequence

from voxlane.messages import Segment


def token_logprobs(segments: Sequence[Segment]) -> list[dict[str, object]]:
    """The segments' token log-probabilities in OpenAI's shape, ``[{token, bytes, logprob}]`` (``include``)."""
    return [{"token": t.token, "bytes": t.bytes, "logprob": t.logprob} for s in segments for t in s.logprobs or []]


def _timestamp(seconds: float, decimal: str) -> str:
    ms = int(round(seconds * 1000))
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{ms:03d}"


def to_srt(segments: Sequence[Segment]) -> str:
    blocks = [
        f"{i}\n{_timestamp(s.start, ',')} --> {_timestamp(s.end, ',')}\n{s.text.strip()}\n"
        for i, s in enumerate(segments, start=1)
    ]
    return "\n".join(blocks)


def to_vtt(segments: Sequence[Segment]) -> str:
    blocks = [f"{_timestamp(s.start, '.')} --> {_timestamp(s.end, '.')}\n{s.text.strip()}\n" for s in segments]
    return "WEBVTT\n\n" + "\n".join(blocks)


def join_text(segments: Sequence[Segment]) -> str:
    return "".join(s.text for s in segments).strip()
