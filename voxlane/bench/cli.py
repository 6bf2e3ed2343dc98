"""``voxlane bench serve | sweep | engine | accuracy | piper | tts | mixed``: parsers and entry points (wired
in by ``voxlane/cli.py``).

Bad flags and unreadable datasets print one message and exit 2. A server that is down, slow or failing
is a result, not an error: its failures are counted and reported, and the command exits 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from voxlane.config import DEFAULT_MODEL_NAME

EXIT_USAGE = 2
_MISSING_DEPENDENCY = "{name} is missing, though voxlane depends on it: reinstall voxlane (make serve or pip install .)"
_NO_PLOTS = (
    "voxlane bench sweep: no plots, matplotlib is not installed (pip install 'voxlane[plots]'); "
    "every figure is in the JSON"
)


def add_bench_parser(sub: argparse._SubParsersAction) -> None:
    from voxlane.bench.options import add_load_arguments

    bench = sub.add_parser(
        "bench",
        help="benchmark an OpenAI-compatible speech server (or the raw engine)",
        description="Measure any server speaking the OpenAI audio API: throughput, latency, streaming continuity, "
        "responsiveness under load and accuracy. Figures are defined in docs/benchmarks.md.",
    )
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    serve = bench_sub.add_parser(
        "serve",
        help="one run against a server at one concurrency level",
        description="Send --num-prompts requests to a running server, at most --max-concurrency at once, and "
        "report the figures (print; --save-result writes JSON). Exits 0 even when requests fail: "
        "failures are part of the result.",
    )
    add_load_arguments(serve, sweep=False)
    serve.set_defaults(func=_guard(_serve))

    sweep = bench_sub.add_parser(
        "sweep",
        help="one run per concurrency level: table, JSON and PNG plots",
        description="Run 'bench serve' at each --max-concurrency level in turn, print one table row per level, "
        "save all results as one JSON file and draw PNG plots next to it.",
    )
    add_load_arguments(sweep, sweep=True)
    sweep.set_defaults(func=_guard(_sweep))

    engine = bench_sub.add_parser(
        "engine",
        help="the ceiling: decode + features + the Whisper runner in-process, no server",
        description="Transcribe the dataset with the raw Whisper runner in this process (no HTTP, no engine "
        "process, no scheduler) at each batch size, and report RTFx and WER per batch size and the best.",
    )
    engine.add_argument(
        "--dataset", required=True, help="FILE.jsonl, a DIR of audio files (optional same-name .txt) or hf:NAME[:split]"
    )
    engine.add_argument("--min-duration-s", type=float, default=0.0, help="skip audio shorter than this (default: 0)")
    engine.add_argument(
        "--max-duration-s", type=float, default=float("inf"), help="skip audio longer than this (default: inf)"
    )
    engine.add_argument(
        "--num-prompts", type=int, help="requests: the dataset shuffled by --seed and cycled (default: each item once)"
    )
    engine.add_argument("--seed", type=int, default=0, help="seed of the request order (default: 0)")
    engine.add_argument(
        "--model",
        default=DEFAULT_MODEL_NAME,
        help=f"'{DEFAULT_MODEL_NAME}' (bundled) or a CTranslate2 Whisper model directory "
        f"(default: {DEFAULT_MODEL_NAME})",
    )
    engine.add_argument("--compute-type", default="int8", help="CTranslate2 compute type (default: int8)")
    engine.add_argument("--engine-threads", type=int, default=2, help="CTranslate2 intra_threads (default: 2)")
    engine.add_argument("--beam-size", type=int, default=1, help="1 = greedy (default: 1)")
    engine.add_argument(
        "--split-search-s",
        type=float,
        default=None,
        help="seconds searched for a quiet cut before each 30 s boundary, as 'voxlane serve "
        "--split-search-s' (default: the server's default)",
    )
    engine.add_argument(
        "--batch-sizes",
        default="1,2,4,8",
        metavar="N,N,...",
        help="batch sizes to try, one pass each (default: 1,2,4,8)",
    )
    engine.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="rounds over all batch sizes, interleaved; the ceiling is the best pass (default: 1)",
    )
    engine.add_argument("--save-result", action="store_true", help="write the figures as JSON")
    engine.add_argument("--result-dir", default=".", help="directory of the JSON (default: .)")
    engine.add_argument("--result-filename", help="JSON file name (default: engine-YYYYMMDD-HHMMSS.json)")
    engine.set_defaults(func=_guard(_engine))

    from voxlane.bench.realtime import add_realtime_parser

    add_realtime_parser(bench_sub)  # live streams over /v1/realtime: its own module

    accuracy = bench_sub.add_parser(
        "accuracy",
        help="WER of a server against plain faster-whisper on the same files, in the same run",
        description="Transcribe every file of the dataset once through the server (at --max-concurrency "
        "requests at once), through faster-whisper's sequential WhisperModel.transcribe and through "
        "its BatchedInferencePipeline with VAD (same model, compute type and beam size), and print "
        "WER with substitutions / deletions / insertions per file and for the corpus.",
    )
    add_load_arguments(accuracy, sweep=False)
    for action in accuracy._actions:
        if action.dest == "max_concurrency":
            action.default, action.help = 8, "requests in flight at most at the server (default: 8)"
    ref = accuracy.add_argument_group("faster-whisper reference")
    ref.add_argument(
        "--reference-model",
        default=DEFAULT_MODEL_NAME,
        help=f"'{DEFAULT_MODEL_NAME}' (bundled) or a CTranslate2 Whisper model directory: the model the "
        f"server runs (default: {DEFAULT_MODEL_NAME})",
    )
    ref.add_argument("--compute-type", default="int8", help="CTranslate2 compute type (default: int8)")
    ref.add_argument("--beam-size", type=int, default=1, help="1 = greedy, as the server's default (default: 1)")
    ref.add_argument("--threads", type=int, default=2, help="CTranslate2 threads of the reference (default: 2)")
    ref.add_argument(
        "--batch-size", type=int, default=8, help="batch size of the BatchedInferencePipeline (default: 8)"
    )
    ref.add_argument("--language", default="en", help="language= for the reference and the server (default: en)")
    ref.add_argument(
        "--systems",
        default=",".join(("server", "faster-whisper", "fw-batched-vad")),
        metavar="NAME,...",
        help="which to run: server, faster-whisper, fw-batched-vad (default: all)",
    )
    accuracy.set_defaults(func=_guard(_accuracy))

    compare = bench_sub.add_parser(
        "compare",
        help="two or more accuracy runs on the same files, compared file by file (paired bootstrap, sign test)",
        description="Each run against the first: corpus WER, the difference with a 95% interval from a paired "
        "bootstrap over files, and a sign test over the files that read differently; with --dataset, WER "
        "and S/D/I per subset (the manifest's 'subset' field). A run is a result JSON of 'bench accuracy "
        "--save-result', as PATH (its server) or PATH:SYSTEM (server, faster-whisper, fw-batched-vad).",
    )
    compare.add_argument("runs", nargs="+", metavar="RUN", help="PATH or PATH:SYSTEM; the first is the baseline")
    compare.add_argument("--dataset", help="the runs' manifest (JSONL): WER per subset too")
    compare.add_argument("--draws", type=int, default=10_000, help="bootstrap resamples (default: 10000)")
    compare.set_defaults(func=_guard(_compare))

    check = bench_sub.add_parser(
        "check-dataset",
        help="a dev set's manifest against its files: fields, presence, SHA-256 and duration of each",
        description="Check that every row of a dev set's manifest (JSONL) names audio, text, duration_s, source, "
        "license and sha256, that each file is there with that SHA-256 and decodes to that duration (within "
        "0.05 s); print the totals, or each problem and exit 1.",
    )
    check.add_argument("manifest", help="the manifest (JSONL); audio paths are relative to it")
    check.set_defaults(func=_guard(_check_dataset))
    _add_diarize_parser(bench_sub)
    _add_speech_parsers(bench_sub)


def _add_diarize_parser(bench_sub: argparse._SubParsersAction) -> None:
    diarize = bench_sub.add_parser(
        "diarize",
        help="diarization on synthetic conversations of the dev set's speakers: DER, speaker count, WER, CPU",
        description="Build conversations of 2-4 dev-set speakers (voxlane/bench/conversations.py), transcribe each "
        "plainly, diarized and with its speakers named, at a running voxlane server; then --concurrency diarized "
        "transcriptions at once while /health is probed. Prints DER (0.25 s collar) with its missed speech, false "
        "alarm and speaker confusion apart, the share of files with the "
        "right speaker count, known speakers named right, WER (diarized and plain), CPU seconds per audio minute "
        "and /health p99 (docs/diarization.md).",
    )
    diarize.add_argument("--base-url", default="http://127.0.0.1:8000", help="the server (default: %(default)s)")
    diarize.add_argument(
        "--dev-dir",
        required=True,
        help="the dev data set's directory: its manifest.jsonl and audio/ with the two-speaker recordings "
        "(audio/long_so762_SPEAKER_SPEAKER.flac)",
    )
    diarize.add_argument(
        "--set",
        choices=("default", "hard"),
        default="default",
        help="default: 2-4 speakers, --conversations and --overlap-conversations; hard: 24 conversations of "
        "same-gender pairs, 3-6 speakers and 0.3-1 s replies (the two counts do not apply) (default: %(default)s)",
    )
    diarize.add_argument("--conversations", type=int, default=15, help="without overlap (default: 15)")
    diarize.add_argument("--overlap-conversations", type=int, default=5, help="with 0.5 s overlaps (default: 5)")
    diarize.add_argument("--seed", type=int, default=0, help="seed of the conversations (default: 0)")
    diarize.add_argument("--concurrency", type=int, default=8, help="diarized requests at once (default: 8)")
    diarize.add_argument("--model", default="gpt-4o-transcribe-diarize", help="model= (default: %(default)s)")
    diarize.add_argument(
        "--num-speakers",
        choices=("auto", "truth"),
        default="auto",
        help="auto: the server finds the speaker count; truth: each diarized request sends the conversation's "
        "true count as num_speakers (default: %(default)s)",
    )
    diarize.add_argument("--rttm-dir", help="write each conversation's reference and hypothesis RTTM here")
    diarize.add_argument("--save", help="write the figures and the per-file rows to this JSON file")
    diarize.set_defaults(func=_guard(_diarize))


def _diarize(args: argparse.Namespace) -> int:
    from voxlane.bench import diarize

    opts = diarize.Options(
        args.base_url.rstrip("/"),
        Path(args.dev_dir),
        args.conversations,
        args.overlap_conversations,
        args.seed,
        args.concurrency,
        args.model,
        truth_count=args.num_speakers == "truth",
        rttm_dir=Path(args.rttm_dir) if args.rttm_dir else None,
        set_name=args.set,
    )
    result = diarize.run(opts)
    print(diarize.format_summary(result))
    if args.save:
        diarize.save(result, Path(args.save))
        print(f"saved {args.save}")
    return 0


def _add_speech_parsers(bench_sub: argparse._SubParsersAction) -> None:
    """``bench piper``, ``bench tts`` and ``bench mixed`` (voxlane/bench/piper_raw.py, tts_compare.py)."""
    piper = bench_sub.add_parser(
        "piper",
        help="the speech ceiling: raw Piper in-process on the 16 paragraphs, per session layout",
        description="Synthesise the 16 paragraphs (--dataset paragraphs) sentence by sentence with the bundled "
        "voice in this process, no server, once per layout and round (ABBA), and print audio seconds per "
        "wall second. A layout SxT is S onnxruntime sessions of T threads, each on its own thread.",
    )
    piper.add_argument(
        "--layouts",
        default=None,
        metavar="SxT,...",
        help="layouts to compare (default: 1xCORES (plain Piper on all cores), CORESx1 (one session per core))",
    )
    piper.add_argument("--repeats", type=int, default=2, help="rounds over the layouts, ABBA (default: 2)")
    piper.add_argument("--paragraphs", type=int, default=16, help="the first N of the 16 paragraphs (default: 16)")
    piper.set_defaults(func=_guard(_piper))

    serve_help = (
        "NAME=FLAGS: start 'voxlane serve FLAGS' on a free 127.0.0.1 port for this configuration, e.g. "
        "'one-slot=--tts-slots 1 --tts-solo-threads 1'; repeat to compare (default: the server at --base-url)"
    )
    tts = bench_sub.add_parser(
        "tts",
        help="speech streams of the 16 paragraphs at several concurrencies, paired with raw Piper",
        description="Per round (ABBA over --repeats): raw Piper on all cores in this process, then for each "
        "configuration the 16 paragraphs as pcm streams at each --concurrency. Prints TTFP p50/p99, audio "
        "seconds per wall second, the share of streams that stalled, /health p99, and each server's audio "
        "per second over raw Piper's in the same round.",
    )
    tts.add_argument("--serve", action="append", default=[], metavar="NAME=FLAGS", help=serve_help)
    tts.add_argument("--base-url", default="http://127.0.0.1:8000", help="server to measure without --serve")
    tts.add_argument("--concurrency", default="8,16", metavar="N,N,...", help="streams at once (default: 8,16)")
    tts.add_argument("--repeats", type=int, default=2, help="rounds, ABBA (default: 2)")
    tts.add_argument("--no-piper", action="store_true", help="leave out the raw Piper baseline")
    tts.add_argument(
        "--num-prompts", type=int, help="speech requests per level (default: each of the 16 paragraphs once)"
    )
    _add_output_arguments(tts)
    tts.set_defaults(func=_guard(_tts))

    mixed = bench_sub.add_parser(
        "mixed",
        help="transcription and speech at once, against each alone",
        description="Per configuration and round: --asr-concurrency transcription clients over --dataset alone, "
        "--tts-concurrency speech streams of the 16 paragraphs alone, then both at once (ABBA over "
        "--repeats). Prints ASR RTFx, speech audio per second, TTFP, stalled streams and /health p99, "
        "and each side's mixed / alone ratio.",
    )
    mixed.add_argument("--serve", action="append", default=[], metavar="NAME=FLAGS", help=serve_help)
    mixed.add_argument("--base-url", default="http://127.0.0.1:8000", help="server to measure without --serve")
    mixed.add_argument("--dataset", required=True, help="transcription dataset (FILE.jsonl, DIR, hf:NAME)")
    mixed.add_argument("--asr-concurrency", type=int, default=8, help="transcription clients (default: 8)")
    mixed.add_argument("--tts-concurrency", type=int, default=8, help="speech streams (default: 8)")
    mixed.add_argument("--repeats", type=int, default=2, help="rounds, ABBA (default: 2)")
    mixed.add_argument("--asr-prompts", type=int, help="transcription requests (default: each file once)")
    mixed.add_argument("--tts-prompts", type=int, help="speech requests (default: each of the 16 paragraphs once)")
    _add_output_arguments(mixed)
    mixed.set_defaults(func=_guard(_mixed))


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--result-dir", default=".", help="directory of the JSON and PNG (default: .)")
    parser.add_argument("--result-filename", help="JSON file name (default: COMMAND-YYYYMMDD-HHMMSS.json)")
    parser.add_argument("--no-save", action="store_true", help="print only: no JSON, no plot")


def _guard(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Usage problems (bad values, unreadable datasets, missing extras) -> one line on stderr, exit 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] in ("jiwer", "httpx"):
                print(f"voxlane bench: {_MISSING_DEPENDENCY.format(name=exc.name)}", file=sys.stderr)
                return EXIT_USAGE
            raise
        except ValueError as exc:  # DatasetError is a ValueError
            print(f"voxlane bench {args.bench_command}: {exc}", file=sys.stderr)
            return EXIT_USAGE

    return run


def _check_model(flag: str, model: str) -> None:
    if model != DEFAULT_MODEL_NAME and not (Path(model) / "model.bin").is_file():
        raise ValueError(
            f"{flag} {model!r} is neither {DEFAULT_MODEL_NAME!r} nor a CTranslate2 Whisper model "
            "directory (a folder with model.bin)"
        )


def _serve(args: argparse.Namespace) -> int:
    from voxlane.bench import report, runner
    from voxlane.bench.options import options_from_args

    opts = options_from_args(args)
    items = runner.load_inputs(opts)
    outcome = runner.run(opts, items)
    result = report.summarise(opts, outcome)
    print(report.format_result(result))
    if opts.save_result or opts.save_detailed or opts.result_filename:
        path = report.save_json(result, opts.result_dir, opts.result_filename or report.default_filename(result))
        print(f"saved {path}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from voxlane.bench import report, runner, sweep
    from voxlane.bench.options import options_from_args

    levels: list[int] = args.max_concurrency
    opts = options_from_args(args, max_concurrency=levels[0])
    items = runner.load_inputs(opts)
    results = sweep.run_sweep(opts, levels, items)
    name = opts.result_filename or sweep.default_stem(opts.backend) + ".json"
    path = report.save_json(results, opts.result_dir, name)
    stem = path.with_suffix("") if path.suffix == ".json" else path
    try:
        plots = sweep.plot(results, stem)
    except ModuleNotFoundError as exc:  # plots are the one optional part (the `plots` extra)
        if exc.name is None or exc.name.split(".")[0] != "matplotlib":
            raise
        print(_NO_PLOTS, file=sys.stderr)
        plots = []
    print(f"saved {path}")
    for p in plots:
        print(f"saved {p}")
    return 0


def _engine(args: argparse.Namespace) -> int:
    import time

    from voxlane.bench import report
    from voxlane.bench.datasets import load_audio_dataset
    from voxlane.bench.engine import EngineBenchOptions, format_engine_result, run_engine_bench
    from voxlane.bench.options import concurrency_list

    try:
        batch_sizes = tuple(concurrency_list(args.batch_sizes))
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--batch-sizes: {exc}") from None
    if args.num_prompts is not None and args.num_prompts < 1:
        raise ValueError("--num-prompts must be at least 1")
    if args.engine_threads < 1 or args.beam_size < 1 or args.repeats < 1:
        raise ValueError("--engine-threads, --beam-size and --repeats must be at least 1")
    _check_model("--model", args.model)
    items = load_audio_dataset(args.dataset, min_duration_s=args.min_duration_s, max_duration_s=args.max_duration_s)
    opts = EngineBenchOptions(
        model=args.model,
        compute_type=args.compute_type,
        engine_threads=args.engine_threads,
        beam_size=args.beam_size,
        batch_sizes=batch_sizes,
        num_prompts=args.num_prompts,
        seed=args.seed,
        repeats=args.repeats,
        **({"split_search_s": args.split_search_s} if args.split_search_s is not None else {}),
    )
    result = run_engine_bench(opts, items, args.dataset)
    print(format_engine_result(result))
    if args.save_result or args.result_filename:
        name = args.result_filename or f"engine-{time.strftime('%Y%m%d-%H%M%S')}.json"
        print(f"saved {report.save_json(result, args.result_dir, name)}")
    return 0


def _check_dataset(args: argparse.Namespace) -> int:
    import json
    from collections import Counter
    from pathlib import Path

    from voxlane.bench.datasets import check_manifest

    path = Path(args.manifest)
    if not path.is_file():
        raise ValueError(f"no manifest at {path}")
    problems = check_manifest(path)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    subsets = Counter(row.get("subset", "-") for row in rows)
    words = sum(len(row["text"].split()) for row in rows)
    minutes = sum(float(row["duration_s"]) for row in rows) / 60
    sources = {s.split(":")[0] for row in rows for s in row["source"].split(" + ")}
    print(f"{len(rows)} files, {minutes:.1f} min, {words} words, {len(sources)} sources; "
          f"subsets: {', '.join(f'{k} {v}' for k, v in sorted(subsets.items()))}")  # fmt: skip
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from voxlane.bench import paired

    if len(args.runs) < 2 and not args.dataset:
        raise ValueError("compare needs two runs (or one run and --dataset for its subsets)")
    out = paired.report(args.runs, Path(args.dataset) if args.dataset else None, args.draws)
    for name, c in out["comparisons"].items():
        print(paired.format_comparison(c, "A", "B"), f"(A = {args.runs[0]}, B = {name})")
    if "subsets" in out:
        print(paired.format_subsets(out["subsets"]))
    return 0


def _accuracy(args: argparse.Namespace) -> int:
    import dataclasses
    import time

    from voxlane.bench import accuracy, report, runner, server_counters, wer
    from voxlane.bench.options import options_from_args
    from voxlane.config import default_model_path

    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = sorted(set(systems) - set(accuracy.SYSTEMS))
    if unknown or not systems:
        raise ValueError(f"--systems: {', '.join(unknown) or 'none given'}; choose from {', '.join(accuracy.SYSTEMS)}")
    if args.backend != "openai-audio":
        raise ValueError("bench accuracy measures transcription: leave --backend at openai-audio")
    if args.num_prompts is not None:
        raise ValueError("bench accuracy sends each file once: leave out --num-prompts")
    if args.beam_size < 1 or args.threads < 1 or args.batch_size < 1:
        raise ValueError("--beam-size, --threads and --batch-size must be at least 1")
    model = args.reference_model
    _check_model("--reference-model", model)
    opts = options_from_args(args)
    if args.language:
        opts = dataclasses.replace(opts, extra_body={"language": args.language, **opts.extra_body})
    items = runner.load_inputs(opts)
    name, normalise = wer.text_normaliser()
    runs = []
    windows = None
    if "server" in systems:
        headers = {"Authorization": f"Bearer {opts.api_key}"} if opts.api_key else {}
        before = server_counters.scrape(opts.base_url, headers)
        runs.append(accuracy.run_server(opts, items))
        windows = server_counters.window_figures(before, server_counters.scrape(opts.base_url, headers))
    if "faster-whisper" in systems or "fw-batched-vad" in systems:
        fw = accuracy.faster_whisper_model(
            str(default_model_path() if model == DEFAULT_MODEL_NAME else model), args.compute_type, args.threads
        )
        if "faster-whisper" in systems:
            runs.append(accuracy.run_faster_whisper(fw, items, args.beam_size, args.language or None))
        if "fw-batched-vad" in systems:
            runs.append(
                accuracy.run_faster_whisper_batched(fw, items, args.beam_size, args.language or None, args.batch_size)
            )
    result = accuracy.table(items, runs, normalise)
    result |= {
        "benchmark": "accuracy",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "dataset": opts.dataset,
        "base_url": opts.base_url,
        "max_concurrency": opts.max_concurrency,
        "reference_model": model,
        "compute_type": args.compute_type,
        "beam_size": args.beam_size,
        "normaliser": name,
        "errors": {run.name: run.errors[:3] for run in runs if run.errors},
        "server_windows": windows,
    }
    print(f"{'=' * 20} voxlane bench accuracy {'=' * 20}")
    print(
        f"{len(items)} files from {opts.dataset}; server {opts.base_url} at {opts.max_concurrency} at once; "
        f"faster-whisper {model} ({args.compute_type}, beam {args.beam_size}); normaliser: {name}"
    )
    print(accuracy.format_table(result, [run.name for run in runs]))
    for line in report.window_lines(windows):
        print(line)
    for run in runs:
        for error in run.errors[:3]:
            print(f"{run.name}: failed: {error}")
    if opts.save_result or opts.result_filename:
        filename = opts.result_filename or f"accuracy-{time.strftime('%Y%m%d-%H%M%S')}.json"
        print(f"saved {report.save_json(result, opts.result_dir, filename)}")
    return 0


def _piper(args: argparse.Namespace) -> int:
    from voxlane.bench.piper_raw import PiperLayout, default_layouts, format_piper_result, run_piper_bench

    if args.repeats < 1 or not 1 <= args.paragraphs <= 16:
        raise ValueError("--repeats must be at least 1 and --paragraphs 1 to 16")
    layouts = [PiperLayout.parse(t) for t in args.layouts.split(",")] if args.layouts else default_layouts()
    print(format_piper_result(run_piper_bench(layouts, args.repeats, args.paragraphs), layouts))
    return 0


def _tts(args: argparse.Namespace) -> int:
    from voxlane.bench import tts_compare
    from voxlane.bench.options import concurrency_list

    try:
        levels = concurrency_list(args.concurrency)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--concurrency: {exc}") from None
    if args.repeats < 1 or (args.num_prompts is not None and args.num_prompts < 1):
        raise ValueError("--repeats and --num-prompts must be at least 1")
    specs: list[tts_compare.ServerSpec | None] = [tts_compare.ServerSpec.parse(t) for t in args.serve] or [None]
    base_url = args.base_url.rstrip("/")
    result = tts_compare.run_tts(specs, base_url, levels, args.repeats, not args.no_piper, args.num_prompts)
    print(tts_compare.format_tts(result))
    _save(args, "tts", result)
    return 0


def _mixed(args: argparse.Namespace) -> int:
    from voxlane.bench import tts_compare
    from voxlane.bench.datasets import load_audio_dataset

    counts = (args.repeats, args.asr_concurrency, args.tts_concurrency, args.asr_prompts or 1, args.tts_prompts or 1)
    if min(counts) < 1:
        raise ValueError("--repeats, --asr-concurrency, --tts-concurrency and the prompt counts must be at least 1")
    load_audio_dataset(args.dataset)  # a bad dataset fails here, before any server starts
    specs: list[tts_compare.ServerSpec | None] = [tts_compare.ServerSpec.parse(t) for t in args.serve] or [None]
    load = tts_compare.MixedLoad(
        args.dataset, args.asr_concurrency, args.tts_concurrency, args.asr_prompts, args.tts_prompts
    )
    result = tts_compare.run_mixed(specs, args.base_url.rstrip("/"), load, args.repeats)
    print(tts_compare.format_mixed(result))
    _save(args, "mixed", result)
    return 0


def _save(args: argparse.Namespace, command: str, result: dict) -> None:
    import time

    from voxlane.bench import report, tts_compare

    if args.no_save:
        return
    path = report.save_json(
        result, args.result_dir, args.result_filename or f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    print(f"saved {path}")
    try:
        for plot in tts_compare.plot(result, path.with_suffix("")):
            print(f"saved {plot}")
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "matplotlib":
            raise
        print(
            f"voxlane bench {command}: no plot, matplotlib is not installed (pip install 'voxlane[plots]')",
            file=sys.stderr,
        )
