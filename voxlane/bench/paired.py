"""``voxlane bench compare``: two transcription runs over the same files, compared file by file.

A default is chosen by whether it reads the same files better, not by one corpus total: one word on a
2,000-word set is 0.05 points, and a total can move by a few long files alone. The comparison pairs each
file's errors in run A and run B, and reports:

- the corpus WER of each and the difference B - A, in points;
- a 95% interval of that difference from a paired bootstrap over files (files drawn with replacement, both
  runs' errors and words of a drawn file taken together; ``draws`` resamples, a fixed seed);
- a sign test over files: how many read better in B, how many worse, and the exact two-sided binomial
  p-value of that split (files that read the same drop out);
- with a manifest that names each file's ``subset``, each subset's WER and S/D/I in A and in B.

A run is a result JSON of ``voxlane bench accuracy --save-result`` (``files``: per file, per system, words,
sub, del, ins) and the system to take from it (``server`` unless ``PATH:SYSTEM`` names another). Files whose
reference is empty (silence, noise) count the words output as insertions.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FileScore:
    file: str
    words: int
    sub: int
    dels: int
    ins: int

    @property
    def errors(self) -> int:
        return self.sub + self.dels + self.ins


@dataclass(frozen=True)
class Comparison:
    files: int
    words: int
    wer_a: float
    wer_b: float
    low: float
    """The bootstrap interval of WER(B) - WER(A), in fractions (not points)."""
    high: float
    better: int
    """Files with fewer errors in B."""
    worse: int
    same: int
    p_value: float
    """Exact two-sided binomial p-value of better against worse."""

    @property
    def delta(self) -> float:
        return self.wer_b - self.wer_a


def load_run(spec: str) -> dict[str, FileScore]:
    """Per-file scores of ``PATH`` or ``PATH:SYSTEM`` (a ``bench accuracy`` result; SYSTEM defaults to server)."""
    path, system = spec, "server"
    if not Path(spec).is_file() and ":" in spec:
        path, system = spec.rsplit(":", 1)
    result = json.loads(Path(path).read_text())
    scores = {}
    for row in result["files"]:
        s = row.get(system)
        if s is None:
            raise ValueError(f"{path}: {row['file']} has no result for {system!r} (failed, or not run)")
        ins = s["ins"] if s["words"] else s["output_words"]
        scores[row["file"]] = FileScore(row["file"], s["words"], s["sub"], s["del"], ins)
    if not scores:
        raise ValueError(f"{path}: no files")
    return scores


def sign_test(better: int, worse: int) -> float:
    """Exact two-sided binomial p-value of ``better`` against ``worse`` at p = 1/2 (1.0 when both are 0)."""
    n = better + worse
    if n == 0:
        return 1.0
    k = min(better, worse)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(a: dict[str, FileScore], b: dict[str, FileScore], draws: int = 10_000, seed: int = 0) -> Comparison:
    """Run B against run A over the files both hold (they must hold the same files)."""
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"the runs hold different files: {', '.join(only[:5])}{' ...' if len(only) > 5 else ''}")
    names = sorted(a)
    words = [a[n].words for n in names]
    err_a = [a[n].errors for n in names]
    err_b = [b[n].errors for n in names]
    total_words = max(1, sum(words))
    rng = random.Random(seed)
    deltas: list[float] = []
    n = len(names)
    while len(deltas) < draws:
        picks = [rng.randrange(n) for _ in range(n)]
        w = sum(words[i] for i in picks)
        if w == 0:
            if sum(words) == 0:
                raise ValueError("no file has reference words: there is no WER to compare")
            continue  # only files with empty references drawn: no WER, draw again
        deltas.append((sum(err_b[i] for i in picks) - sum(err_a[i] for i in picks)) / w)
    deltas.sort()
    better = sum(eb < ea for ea, eb in zip(err_a, err_b))
    worse = sum(eb > ea for ea, eb in zip(err_a, err_b))
    return Comparison(
        files=n,
        words=sum(words),
        wer_a=sum(err_a) / total_words,
        wer_b=sum(err_b) / total_words,
        low=deltas[int(0.025 * (draws - 1))],
        high=deltas[int(0.975 * (draws - 1))],
        better=better,
        worse=worse,
        same=n - better - worse,
        p_value=sign_test(better, worse),
    )


def subsets(manifest: Path) -> dict[str, str]:
    """File name -> subset, from a manifest whose rows name one (``subset``); files without one are 'all'."""
    out = {}
    for line in manifest.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[Path(row["audio"]).name] = row.get("subset", "all")
    return out


def by_subset(run: dict[str, FileScore], subset_of: dict[str, str]) -> dict[str, FileScore]:
    """The run's scores summed per subset, and over all files as 'all files'."""
    sums: dict[str, list[int]] = {}
    for name, s in run.items():
        for key in (subset_of.get(name, "other"), "all files"):
            acc = sums.setdefault(key, [0, 0, 0, 0])
            acc[0] += s.words
            acc[1] += s.sub
            acc[2] += s.dels
            acc[3] += s.ins
    return {k: FileScore(k, *v) for k, v in sorted(sums.items(), key=lambda kv: (kv[0] == "all files", kv[0]))}


def format_comparison(c: Comparison, name_a: str = "A", name_b: str = "B") -> str:
    return (
        f"{c.files} files, {c.words} words: {name_a} {100 * c.wer_a:.2f}%, {name_b} {100 * c.wer_b:.2f}%; "
        f"{name_b} - {name_a} = {100 * c.delta:+.2f} points, 95% interval [{100 * c.low:+.2f}, {100 * c.high:+.2f}]; "
        f"files better in {name_b}: {c.better}, worse: {c.worse}, same: {c.same} (sign test p = {c.p_value:.3f})"
    )


def format_subsets(runs: Sequence[tuple[str, dict[str, FileScore]]]) -> str:
    """One line per subset: words, then each run's WER and S/D/I."""
    names = [n for n, _ in runs]
    head = f"{'subset':<14}{'words':>7}" + "".join(f"{n[:24]:>26}" for n in names)
    lines = [head]
    for key, first in runs[0][1].items():
        cells = []
        for _, scores in runs:
            s = scores.get(key)
            if s is None:
                cells.append(f"{'-':>26}")
                continue
            wer = f"{100 * s.errors / s.words:.2f}%" if s.words else f"({s.ins} words out)"
            cells.append(f"{wer} {s.sub}/{s.dels}/{s.ins}".rjust(26))
        lines.append(f"{key:<14}{first.words:>7}" + "".join(cells))
    return "\n".join(lines)


def report(specs: Sequence[str], manifest: Path | None, draws: int) -> dict[str, Any]:
    """Each run against the first: the comparison, and per-subset scores when a manifest is given."""
    runs = [(spec, load_run(spec)) for spec in specs]
    base = runs[0][1]
    out: dict[str, Any] = {"runs": specs, "comparisons": {}}
    for name, run in runs[1:]:
        c = compare(base, run, draws)
        out["comparisons"][name] = c
    if manifest is not None:
        subset_of = subsets(manifest)
        out["subsets"] = [(name, by_subset(run, subset_of)) for name, run in runs]
    return out
