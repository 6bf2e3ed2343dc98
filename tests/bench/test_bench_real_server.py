"""``voxlane bench`` against a real ``voxlane serve`` on 127.0.0.1 (the session's ``server``), small runs of both
backends, and ``voxlane bench engine`` on the bundled Whisper model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from voxlane.cli import main


def bench(tmp_path: Path, *argv: str) -> dict[str, Any]:
    out = tmp_path / "result.json"
    assert main(["bench", *argv, "--result-dir", str(tmp_path), "--result-filename", out.name]) == 0
    return json.loads(out.read_text())


LATENCY_KEYS = {"mean", "median", "std", "p50", "p90", "p95", "p99", "max"}
HEALTH_KEYS = {"p50", "p95", "p99", "max"}


def assert_common_figures(r: dict[str, Any]) -> None:
    for key in ("completed", "failed", "errors", "duration_s", "request_throughput", "server_ready"):
        assert key in r
    assert set(r["e2el_ms"]) == LATENCY_KEYS and all(v is not None for v in r["e2el_ms"].values())
    if r["health"] is not None:
        assert set(r["health"]["latency_ms"]) == HEALTH_KEYS and "failures" in r["health"]
    assert {"cpu_s", "cpu_per_request_ms", "cpu_share_of_wall"} <= set(r["client"])


def test_transcription_against_voxlane(server: Any, tiny_dataset: Path, tmp_path: Path) -> None:
    r = bench(
        tmp_path,
        "serve",
        "--base-url",
        server.base_url,
        "--dataset",
        str(tiny_dataset),
        "--num-prompts",
        "3",
        "--max-concurrency",
        "2",
        "--save-detailed",
    )
    assert (r["completed"], r["failed"]) == (3, 0)
    assert_common_figures(r)
    assert r["rtfx"] > 0 and r["request_throughput"] > 0 and r["e2el_ms"]["p99"] >= r["e2el_ms"]["median"] > 0
    assert r["wer_requests"] == 3 and 0 <= r["wer"] < 0.5  # tiny.en on clean short speech
    e = r["wer_errors"]
    assert e["words"] > 0 and e["sub"] + e["del"] + e["ins"] == round(r["wer"] * e["words"])
    # The server's own count of windows over the run: a short clip is one window (its /metrics, before and after).
    w = r["server_windows"]
    assert w["windows"] >= 3 and w["audio_s"] > 0
    assert w["windows_per_audio_hour"] == pytest.approx(w["windows"] / w["audio_s"] * 3600)
    assert r["health"]["failures"] == 0 and r["health"]["latency_ms"]["p50"] > 0
    assert all(q["text"] for q in r["requests"])


def test_streaming_transcription_against_voxlane(server: Any, tiny_dataset: Path, tmp_path: Path) -> None:
    r = bench(
        tmp_path,
        "serve",
        "--base-url",
        server.base_url,
        "--dataset",
        str(tiny_dataset),
        "--num-prompts",
        "2",
        "--max-concurrency",
        "2",
        "--extra-body",
        '{"stream": true}',
        "--probe-health",
        "none",
    )
    assert (r["completed"], r["failed"]) == (2, 0)
    assert_common_figures(r)
    assert set(r["ttft_ms"]) == LATENCY_KEYS and set(r["itl_ms"] or LATENCY_KEYS) == LATENCY_KEYS
    assert 0 < r["ttft_ms"]["median"] <= r["e2el_ms"]["max"]
    assert r["wer"] < 0.5 and r["health"] is None


def test_speech_against_voxlane_with_asr_check(server: Any, tmp_path: Path) -> None:
    probe = httpx.post(
        server.base_url + "/v1/audio/speech",
        timeout=120,
        json={"model": "piper", "input": "Hello.", "voice": "joe", "response_format": "pcm"},
    )
    assert probe.status_code == 200, probe.text  # the speech route exists and speaks
    assert len(probe.content) > 1000
    r = bench(
        tmp_path,
        "serve",
        "--backend",
        "openai-audio-speech",
        "--base-url",
        server.base_url,
        "--num-prompts",
        "2",
        "--max-concurrency",
        "2",
        "--asr-check-url",
        server.base_url,
    )
    assert (r["completed"], r["failed"]) == (2, 0), r["errors"]
    assert_common_figures(r)
    assert set(r["ttfp_ms"]) == LATENCY_KEYS
    for key in (
        "underruns_total",
        "underruns_per_stream",
        "total_stall_ms",
        "max_stall_ms",
        "smooth_share",
        "underrun_share",
        "stall_threshold_ms",
    ):
        assert key in r["continuity"]
    assert r["output_audio_s"] > 1 and r["audio_s_per_wall_s"] > 0
    assert 0 < r["ttfp_ms"]["median"] <= r["e2el_ms"]["max"]
    assert r["rtf"]["median"] > 0
    c = r["continuity"]
    assert c["streams"] == 2 and 0 <= c["smooth_share"] <= 1 and c["underruns_total"] >= 0
    assert r["asr_check"]["requests"] == 2 and r["asr_check"]["wer"] < 0.5


def test_engine_ceiling(tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = bench(
        tmp_path,
        "engine",
        "--dataset",
        str(tiny_dataset),
        "--batch-sizes",
        "1,2",
        "--engine-threads",
        "1",
        "--repeats",
        "2",
    )
    assert [(p["round"], p["batch_size"]) for p in r["passes"]] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert [b["batch_size"] for b in r["per_batch_size"]] == [1, 2]
    for p in r["passes"]:
        assert p["windows"] == 2 and p["runner_rtfx"] >= p["rtfx"] > 0 and p["wer"] < 0.5
    assert r["best_batch_size"] in (1, 2) and r["rtfx"] == max(p["rtfx"] for p in r["passes"])
    assert "ceiling: RTFx" in capsys.readouterr().out


def test_accuracy_against_voxlane_and_faster_whisper(
    server: Any, tiny_dataset: Path, tmp_path: Path, capsys: Any
) -> None:
    r = bench(
        tmp_path,
        "accuracy",
        "--base-url",
        server.base_url,
        "--dataset",
        str(tiny_dataset),
        "--max-concurrency",
        "2",
        "--save-result",
    )
    assert [row["file"] for row in r["files"]] and r["failed"] == {
        "server": 0,
        "faster-whisper": 0,
        "fw-batched-vad": 0,
    }
    for row in r["files"]:
        for name in ("server", "faster-whisper", "fw-batched-vad"):
            s = row[name]
            assert s["words"] > 0 and s["sub"] + s["del"] + s["ins"] == round(s["wer"] * s["words"])
    total = r["total"]
    assert total["server"]["words"] == sum(row["server"]["words"] for row in r["files"])
    assert total["server"]["wer"] < 0.5 and total["faster-whisper"]["wer"] < 0.5
    assert r["server_windows"]["windows"] >= len(r["files"])  # at least a window per file, counted by the server
    table = capsys.readouterr().out
    assert "sub/del/ins" in table and "corpus" in table and "fw-batched-vad" in table
    assert "Whisper windows (per audio hour)" in table


def test_accuracy_bad_systems_exit_2(capsys: Any) -> None:
    assert main(["bench", "accuracy", "--dataset", "x.jsonl", "--systems", "server,whisperx"]) == 2
    assert "whisperx" in capsys.readouterr().err


def test_piper_ceiling_compares_layouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "piper", "--layouts", "1x1,2x1", "--repeats", "2", "--paragraphs", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 paragraphs" in out
    rows = [line for line in out.splitlines() if line.startswith(("| 1x1 ", "| 2x1 "))]
    assert len(rows) == 2
    assert rows[0].endswith("| 1.00x |")  # the first layout is the reference of the ratios
    assert all(float(row.split("|")[2]) > 0 for row in rows)  # audio s per wall s


def test_piper_bad_layout_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "piper", "--layouts", "two"]) == 2
    assert "SESSIONSxTHREADS" in capsys.readouterr().err


def test_tts_pairs_a_server_levels(server: Any, tmp_path: Path) -> None:
    r = bench(
        tmp_path, "tts", "--base-url", server.base_url, "--concurrency", "1,2", "--repeats", "1", "--no-piper",
        "--num-prompts", "2",
    )  # fmt: skip
    assert r["benchmark"] == "tts" and r["levels"] == [1, 2]
    rows = r["rows"]
    assert [(row["config"], row["concurrency"]) for row in rows] == [("server", 1), ("server", 2)]
    for row in rows:
        assert row["completed"] == 2 and row["failed"] == 0
        assert 0 < row["ttfp_p50_ms"] <= row["ttfp_p99_ms"]
        assert row["audio_s_per_wall_s"] > 0 and row["stalled_share"] is not None
    assert (tmp_path / "result.png").is_file()


def test_mixed_reports_both_sides_against_each_alone(server: Any, tiny_dataset: Path, tmp_path: Path) -> None:
    r = bench(
        tmp_path, "mixed", "--base-url", server.base_url, "--dataset", str(tiny_dataset), "--repeats", "1",
        "--asr-concurrency", "2", "--tts-concurrency", "2", "--tts-prompts", "2",
    )  # fmt: skip
    modes = {row["mode"]: row for row in r["rows"]}
    assert set(modes) == {"asr alone", "tts alone", "mixed"}
    assert modes["asr alone"]["asr"]["rtfx"] > 0 and modes["asr alone"]["asr"]["failed"] == 0
    assert modes["tts alone"]["tts"]["completed"] == 2
    assert modes["mixed"]["asr"]["completed"] == 2 and modes["mixed"]["tts"]["completed"] == 2
    assert modes["mixed"]["tts"]["health_p99_ms"] > 0
    assert set(r["ratios"]) == {"server: ASR mixed / alone", "server: TTS mixed / alone"}
    assert all(v > 0 for v in r["ratios"].values())
