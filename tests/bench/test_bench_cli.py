"""``voxlane bench`` end to end against a fake OpenAI audio server on 127.0.0.1: the figures it saves, how it
reports servers that fail, and how it refuses bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from voxlane.cli import main


def bench(tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any] | list[Any] | None]:
    """Run ``voxlane bench ...`` in-process; return its exit code and the JSON it saved, if any."""
    out = tmp_path / "result.json"
    rc = main(["bench", *argv, "--result-dir", str(tmp_path), "--result-filename", out.name])
    return rc, json.loads(out.read_text()) if out.is_file() else None


def transcription(fake: Any, tiny_dataset: Path, *extra: str) -> list[str]:
    return [
        "serve",
        "--base-url",
        fake.base_url,
        "--dataset",
        str(tiny_dataset),
        "--num-prompts",
        "4",
        "--max-concurrency",
        "2",
        "--num-warmups",
        "0",
        "--ready-check-timeout-sec",
        "2",
        *extra,
    ]


def speech(fake: Any, *extra: str) -> list[str]:
    return [
        "serve",
        "--backend",
        "openai-audio-speech",
        "--base-url",
        fake.base_url,
        "--num-prompts",
        "3",
        "--max-concurrency",
        "3",
        "--num-warmups",
        "0",
        "--probe-interval-ms",
        "20",
        *extra,
    ]


def test_transcription_figures_are_saved(fake: Any, tiny_dataset: Path, tmp_path: Path) -> None:
    rc, r = bench(tmp_path, *transcription(fake, tiny_dataset, "--save-detailed", "--probe-interval-ms", "10"))
    assert rc == 0 and isinstance(r, dict)
    assert (r["completed"], r["failed"], r["errors"]) == (4, 0, [])
    assert r["rtfx"] == pytest.approx(r["input_audio_s"] / r["duration_s"])
    assert r["request_throughput"] == pytest.approx(4 / r["duration_s"])
    for key in ("mean", "median", "std", "p90", "p99", "max"):
        assert r["e2el_ms"][key] > 0
    # the fake answers every clip with the same sentence: WER is computed, with a stated normaliser
    assert r["wer"] > 0 and r["wer_requests"] == 4 and "EnglishTextNormalizer" in r["normaliser"]
    assert r["health"]["probes"] >= 1 and r["health"]["failures"] == 0
    assert set(r["health"]["latency_ms"]) == {"p50", "p95", "p99", "max"}
    assert r["client"]["cpu_per_request_ms"] > 0
    assert len(r["requests"]) == 4 and all(q["success"] for q in r["requests"])
    assert fake.behaviour.requests == 4


def test_streaming_transcription_reports_ttft_and_inter_chunk_latency(
    fake: Any, tiny_dataset: Path, tmp_path: Path
) -> None:
    rc, r = bench(tmp_path, *transcription(fake, tiny_dataset, "--extra-body", '{"stream": true}'))
    assert rc == 0 and r["completed"] == 4
    assert 0 < r["ttft_ms"]["median"] <= r["e2el_ms"]["median"]
    assert r["itl_ms"]["median"] >= 5  # the fake waits 10 ms between deltas
    assert r["wer"] > 0


def test_speech_at_twice_real_time_plays_without_stalls(fake: Any, tmp_path: Path) -> None:
    fake.behaviour.speech_speed = 2.0
    rc, r = bench(tmp_path, *speech(fake))
    assert rc == 0 and r["completed"] == 3
    assert r["output_audio_s"] == pytest.approx(3.0)
    assert r["ttfp_ms"]["median"] < r["e2el_ms"]["median"]
    assert r["e2el_ms"]["median"] == pytest.approx(450, abs=250)  # last chunk sent at 0.45 s
    assert r["rtf"]["median"] == pytest.approx(0.45, abs=0.25)
    c = r["continuity"]
    assert (c["streams"], c["underruns_total"], c["smooth_share"], c["underrun_share"]) == (3, 0, 1.0, 0.0)


def test_speech_at_half_real_time_stalls(fake: Any, tmp_path: Path) -> None:
    fake.behaviour.speech_speed = 0.5
    rc, r = bench(tmp_path, *speech(fake, "--stall-threshold-ms", "50"))
    assert rc == 0 and r["completed"] == 3
    c = r["continuity"]
    assert c["underruns_total"] >= 3 * 5 and c["underrun_share"] == 1.0
    assert c["max_stall_ms"]["median"] == pytest.approx(100, abs=60)  # each 0.1 s chunk is 0.1 s late
    assert c["smooth_share"] == 0.0
    assert r["rtf"]["median"] == pytest.approx(1.8, abs=0.5)  # 1 s of audio, last chunk sent at 1.8 s


@pytest.mark.parametrize("extra", ['{"response_format": "wav"}', '{"stream_format": "sse"}'])
def test_speech_as_streamed_wav_or_sse_events(fake: Any, tmp_path: Path, extra: str) -> None:
    fake.behaviour.speech_speed = 2.0
    rc, r = bench(tmp_path, *speech(fake, "--extra-body", extra))
    assert rc == 0 and r["completed"] == 3
    assert r["output_audio_s"] == pytest.approx(3.0)  # the wav header is not audio
    assert r["continuity"]["streams"] == 3 and r["continuity"]["underruns_total"] == 0


def test_compressed_speech_is_measured_by_decoding_it_after_the_run(fake: Any, tmp_path: Path) -> None:
    rc, r = bench(tmp_path, *speech(fake, "--response-format", "flac"))
    assert rc == 0 and (r["completed"], r["failed"]) == (3, 0)
    assert r["output_audio_s"] == pytest.approx(3.0, abs=0.01)
    assert r["continuity"]["streams"] == 0 and r["rtf"]["median"] > 0


def test_server_answering_500_is_counted_not_fatal(
    fake: Any, tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.behaviour.status = 500
    rc, r = bench(tmp_path, *transcription(fake, tiny_dataset))
    assert rc == 0
    assert (r["completed"], r["failed"]) == (0, 4)
    assert r["errors"][0]["count"] == 4 and r["errors"][0]["error"].startswith("HTTP 500: ")
    assert "boom" in r["errors"][0]["error"]
    assert "error x4: HTTP 500" in capsys.readouterr().out


def test_slow_server_times_out_per_request(fake: Any, tiny_dataset: Path, tmp_path: Path) -> None:
    fake.behaviour.delay_s = 3.0
    rc, r = bench(tmp_path, *transcription(fake, tiny_dataset, "--request-timeout-s", "0.3"))
    assert rc == 0 and (r["completed"], r["failed"]) == (0, 4)
    assert "Timeout" in r["errors"][0]["error"]
    assert r["duration_s"] < 2.5


def test_down_server_is_reported_with_exit_0(
    down_url: str, tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, r = bench(
        tmp_path,
        "serve",
        "--base-url",
        down_url,
        "--dataset",
        str(tiny_dataset),
        "--num-prompts",
        "3",
        "--ready-check-timeout-sec",
        "0.6",
        "--max-concurrency",
        "2",
    )
    assert rc == 0
    assert r["server_ready"] is False and "did not answer 200" in r["ready_error"]
    assert (r["completed"], r["failed"]) == (0, 3) and "Connect" in r["errors"][0]["error"]  # ConnectionRefusedError
    assert r["health"]["failures"] >= 1
    assert "running anyway" in capsys.readouterr().err


def test_sweep_prints_a_row_per_level_and_draws_plots(
    fake: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.behaviour.speech_audio_s, fake.behaviour.speech_speed = 0.5, 4.0
    rc, results = bench(
        tmp_path,
        "sweep",
        "--backend",
        "openai-audio-speech",
        "--base-url",
        fake.base_url,
        "--num-prompts",
        "4",
        "--max-concurrency",
        "1,2",
        "--num-warmups",
        "0",
    )
    assert rc == 0 and [r["max_concurrency"] for r in results] == [1, 2]
    out = capsys.readouterr().out
    assert out.count("\n|     1 |") == 1 and out.count("\n|     2 |") == 1
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["result-latency.png", "result-throughput.png", "result-ttfp.png", "result-underruns.png"]
    assert all((tmp_path / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["serve", "--max-concurrency", "0", "--dataset", "x.jsonl"], "--max-concurrency must be at least 1"),
        (["serve", "--dataset", "/nonexistent/m.jsonl"], "no such file or directory"),
        (["serve"], "needs --dataset"),
        (["serve", "--base-url", "127.0.0.1:8000", "--dataset", "x"], "must start with http://"),
        (["engine", "--dataset", "x.jsonl", "--batch-sizes", "1,zero"], "--batch-sizes"),
        (["sweep", "--backend", "openai-audio-speech", "--dataset", "/nonexistent.txt"], "cannot read"),
        (["diarize", "--dev-dir", "/nonexistent"], "no manifest.jsonl in /nonexistent: pass the dev data set's"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *argv]) == 2
    assert message in capsys.readouterr().err


def test_argparse_errors_and_help_from_the_command_line() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "voxlane.cli", "bench", "serve", "--request-rate", "-1"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "request rate must be positive" in bad.stderr
    no_data = subprocess.run([sys.executable, "-m", "voxlane.cli", "bench", "diarize"], capture_output=True, text=True)
    assert no_data.returncode == 2 and "the following arguments are required: --dev-dir" in no_data.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "voxlane.cli", "bench", "sweep", "--help"], capture_output=True, text=True
    ).stdout
    for flag in (
        "--backend",
        "--base-url",
        "--model",
        "--num-prompts",
        "--max-concurrency",
        "--request-rate",
        "--seed",
        "--ready-check-timeout-sec",
        "--save-result",
        "--save-detailed",
        "--result-filename",
        "--extra-body",
        "--probe-health",
        "--probe-interval-ms",
        "--dataset",
        "--asr-check-url",
    ):
        assert flag in help_text


def test_poisson_arrivals_spread_the_requests_over_time(fake: Any, tiny_dataset: Path, tmp_path: Path) -> None:
    import random

    rng = random.Random(7 + 1)  # the dispatcher's generator for --seed 7
    last_arrival_s = sum(rng.expovariate(20.0) for _ in range(9))
    rc, r = bench(
        tmp_path,
        *transcription(
            fake, tiny_dataset, "--request-rate", "20", "--seed", "7", "--num-prompts", "10", "--max-concurrency", "10"
        ),
    )
    assert rc == 0 and r["completed"] == 10 and r["request_rate"] == 20.0
    assert r["duration_s"] >= last_arrival_s


def test_parsing_the_cli_does_not_import_the_bench_dependencies() -> None:
    """`voxlane serve` must work with the base install, without httpx, jiwer or matplotlib."""
    code = (
        "import sys; from voxlane.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('httpx', 'jiwer', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_progress_line_only_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from voxlane.bench.runner import Progress, _progress

    assert _progress(3, True) is None  # pytest's captured stderr is not a terminal
    bar = Progress(3)
    for _ in range(3):
        bar.update()
    bar.close()
    err = capsys.readouterr().err
    assert "3/3 requests 100%" in err and err.endswith("\r\x1b[K")
