"""``voxlane bench`` flags, and the frozen options built from them once (a bad value is a ValueError that
says what to pass instead; the CLI prints it and exits 2)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from typing import Any

BACKENDS = ("openai-audio", "openai-audio-speech")
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
DEFAULT_MODELS = {"openai-audio": "whisper-1", "openai-audio-speech": "piper"}


@dataclass(frozen=True)
class BenchOptions:
    backend: str
    base_url: str
    model: str
    dataset: str | None
    min_duration_s: float
    max_duration_s: float
    num_prompts: int | None
    """None: each dataset item once."""
    num_warmups: int
    max_concurrency: int
    request_rate: float
    """Requests per second of a Poisson process; inf sends as fast as the concurrency allows."""
    seed: int
    ready_check_timeout_s: float
    request_timeout_s: float
    extra_body: dict[str, Any]
    probe_health: str | None
    probe_interval_ms: float
    voice: str
    response_format: str
    sample_rate: int
    stall_threshold_ms: float
    asr_check_url: str | None
    asr_check_model: str
    api_key: str | None
    save_result: bool
    save_detailed: bool
    result_dir: str
    result_filename: str | None
    show_progress: bool = True


def concurrency_list(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers (e.g. 1,4,16)") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("concurrency levels must be integers of at least 1, e.g. 1,4,16")
    return levels


def request_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: pass 'inf' or a number of requests per second") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("the request rate must be positive (or 'inf')")
    return value


def extra_body(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"--extra-body is not valid JSON ({exc.msg}); e.g. '{{\"stream\": true}}'"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('--extra-body must be a JSON object, e.g. \'{"language": "en"}\'')
    return value


def add_load_arguments(parser: argparse.ArgumentParser, *, sweep: bool) -> None:
    """Flags of ``bench serve`` and ``bench sweep``."""
    g = parser.add_argument_group("target")
    g.add_argument(
        "--backend",
        choices=BACKENDS,
        default="openai-audio",
        help="openai-audio: POST /v1/audio/transcriptions; openai-audio-speech: POST /v1/audio/speech "
        "(default: openai-audio)",
    )
    g.add_argument(
        "--base-url", default=DEFAULT_BASE_URL, help=f"server root, without /v1 (default: {DEFAULT_BASE_URL})"
    )
    g.add_argument("--model", help="model= of each request (default: whisper-1 for openai-audio, piper for speech)")
    g.add_argument("--api-key", help="sent as 'Authorization: Bearer KEY' (default: none)")
    g.add_argument(
        "--extra-body",
        type=extra_body,
        default={},
        metavar="JSON",
        help='more request fields, e.g. \'{"stream": true}\' or \'{"response_format": "verbose_json"}\'',
    )
    g.add_argument(
        "--ready-check-timeout-sec",
        type=float,
        default=60.0,
        help="wait up to this long for GET /health to answer 200 before starting; 0 skips the check (default: 60)",
    )
    g.add_argument(
        "--request-timeout-s", type=float, default=600.0, help="a request taking longer fails (default: 600)"
    )

    d = parser.add_argument_group("dataset")
    d.add_argument(
        "--dataset",
        help="transcription: FILE.jsonl (audio, text, duration_s), a DIR of audio files with "
        "optional same-name .txt references, or hf:NAME[:split] (local cache only); "
        "speech: FILE.txt (one input per line), 'paragraphs' (16 of 50-95 words) or leave out for the built-in "
        "short paragraphs",
    )
    d.add_argument("--min-duration-s", type=float, default=0.0, help="skip audio shorter than this (default: 0)")
    d.add_argument("--max-duration-s", type=float, default=math.inf, help="skip audio longer than this (default: inf)")
    d.add_argument(
        "--num-prompts",
        type=int,
        help="requests to send: the dataset shuffled by --seed and cycled (default: each item once)",
    )
    d.add_argument("--num-warmups", type=int, default=1, help="untimed requests sent first (default: 1)")
    d.add_argument("--seed", type=int, default=0, help="seed of the request order and Poisson arrivals (default: 0)")

    load = parser.add_argument_group("load")
    if sweep:
        load.add_argument(
            "--max-concurrency",
            type=concurrency_list,
            default=[1, 4, 16, 64],
            metavar="N,N,...",
            help="concurrency levels to run, one benchmark each (default: 1,4,16,64)",
        )
    else:
        load.add_argument(
            "--max-concurrency",
            type=int,
            default=1,
            help="requests in flight at most; one HTTP connection per slot (default: 1)",
        )
    load.add_argument(
        "--request-rate",
        type=request_rate,
        default=math.inf,
        help="requests per second, Poisson arrivals; 'inf' sends as fast as the concurrency allows (default: inf)",
    )
    load.add_argument(
        "--probe-health",
        default="/health",
        metavar="PATH",
        help="GET this path on its own thread during the run and report its latency; 'none' turns it "
        "off (default: /health)",
    )
    load.add_argument("--probe-interval-ms", type=float, default=100.0, help="between health probes (default: 100)")

    s = parser.add_argument_group("speech (openai-audio-speech)")
    s.add_argument("--voice", default="joe", help="voice= of each request (default: joe)")
    s.add_argument(
        "--response-format",
        default="pcm",
        help="response_format=; pcm and wav give the continuity figures (default: pcm)",
    )
    s.add_argument(
        "--sample-rate", type=int, default=22050, help="rate of the returned pcm (16-bit mono) in Hz (default: 22050)"
    )
    s.add_argument(
        "--stall-threshold-ms",
        type=float,
        default=100.0,
        help="a stream is smooth when its largest stall is under this (default: 100)",
    )
    s.add_argument(
        "--asr-check-url",
        metavar="URL",
        help="after the run, transcribe every returned audio at URL/v1/audio/transcriptions and report "
        "WER against the input text",
    )
    s.add_argument("--asr-check-model", default="whisper-1", help="model= of the ASR check (default: whisper-1)")

    o = parser.add_argument_group("output")
    o.add_argument(
        "--save-result",
        action="store_true",
        help="write the figures as JSON" + (" (a sweep always does)" if sweep else ""),
    )
    o.add_argument("--save-detailed", action="store_true", help="add every request's timings and errors to the JSON")
    o.add_argument("--result-dir", default=".", help="directory of the JSON (and sweep plots) (default: .)")
    o.add_argument(
        "--result-filename", help="JSON file name (default: BACKEND-cN-YYYYMMDD-HHMMSS.json, sweep-BACKEND-....json)"
    )


def options_from_args(args: argparse.Namespace, max_concurrency: int | None = None) -> BenchOptions:
    """Check the flags and build the options. Raises ValueError with what to change."""
    if args.num_prompts is not None and args.num_prompts < 1:
        raise ValueError("--num-prompts must be at least 1")
    if args.num_warmups < 0:
        raise ValueError("--num-warmups must be 0 or more")
    concurrency = max_concurrency if max_concurrency is not None else args.max_concurrency
    if concurrency < 1:
        raise ValueError("--max-concurrency must be at least 1")
    for name in ("request_timeout_s", "probe_interval_ms", "sample_rate"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive")
    if args.ready_check_timeout_sec < 0:
        raise ValueError("--ready-check-timeout-sec must be 0 or more")
    if args.min_duration_s > args.max_duration_s:
        raise ValueError("--min-duration-s is above --max-duration-s")
    base_url = args.base_url.rstrip("/")
    if base_url.endswith("/v1"):
        base_url = base_url[:-3]
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"--base-url {args.base_url!r} must start with http:// or https://")
    probe = args.probe_health
    if probe and probe.lower() not in ("none", "off", ""):
        probe = probe if probe.startswith("/") else "/" + probe
    else:
        probe = None
    return BenchOptions(
        backend=args.backend,
        base_url=base_url,
        model=args.model or DEFAULT_MODELS[args.backend],
        dataset=args.dataset,
        min_duration_s=args.min_duration_s,
        max_duration_s=args.max_duration_s,
        num_prompts=args.num_prompts,
        num_warmups=args.num_warmups,
        max_concurrency=concurrency,
        request_rate=args.request_rate,
        seed=args.seed,
        ready_check_timeout_s=args.ready_check_timeout_sec,
        request_timeout_s=args.request_timeout_s,
        extra_body=args.extra_body,
        probe_health=probe,
        probe_interval_ms=args.probe_interval_ms,
        voice=args.voice,
        response_format=args.response_format,
        sample_rate=args.sample_rate,
        stall_threshold_ms=args.stall_threshold_ms,
        asr_check_url=args.asr_check_url.rstrip("/") if args.asr_check_url else None,
        asr_check_model=args.asr_check_model,
        api_key=args.api_key,
        save_result=args.save_result,
        save_detailed=args.save_detailed,
        result_dir=args.result_dir,
        result_filename=args.result_filename,
    )
