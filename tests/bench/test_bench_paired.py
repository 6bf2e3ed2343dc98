"""``voxlane bench compare``: two runs over the same files, paired file by file, on constructed scores with
known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxlane.bench import paired
from voxlane.cli import main


def run(errors: list[tuple[int, int, int]], words: int = 20) -> dict[str, paired.FileScore]:
    return {f"f{i}.wav": paired.FileScore(f"f{i}.wav", words, *e) for i, e in enumerate(errors)}


def test_the_sign_test_is_the_exact_binomial_tail_on_both_sides() -> None:
    assert paired.sign_test(0, 5) == pytest.approx(2 / 32)
    assert paired.sign_test(9, 1) == pytest.approx(2 * 11 / 1024)
    assert paired.sign_test(5, 5) == 1.0
    assert paired.sign_test(0, 0) == 1.0


def test_identical_runs_differ_by_nothing_in_every_draw() -> None:
    a = run([(i % 3, i % 2, 0) for i in range(12)])
    c = paired.compare(a, dict(a))
    assert (c.delta, c.low, c.high) == (0.0, 0.0, 0.0)  # a file's two runs are drawn together
    assert (c.better, c.worse, c.same, c.p_value) == (0, 0, 12, 1.0)


def test_one_error_fewer_in_every_file_is_better_beyond_doubt() -> None:
    a = run([(2, 1, 0)] * 10)
    b = run([(1, 1, 0)] * 10)
    c = paired.compare(a, b)
    assert c.wer_a == pytest.approx(0.15) and c.wer_b == pytest.approx(0.10)
    assert c.delta == pytest.approx(-0.05)
    assert c.low == pytest.approx(-0.05) and c.high == pytest.approx(-0.05)
    assert (c.better, c.worse) == (10, 0)
    assert c.p_value == pytest.approx(2 / 1024)


def test_one_file_carries_the_total_and_the_interval_says_so() -> None:
    a = run([(0, 0, 0)] * 19 + [(0, 0, 0)])
    b = run([(0, 0, 0)] * 19 + [(0, 10, 0)])  # one file lost half its words, the others read the same
    c = paired.compare(a, b)
    assert c.delta > 0 and c.low == 0.0 < c.high  # most draws miss that file
    assert (c.better, c.worse, c.same) == (0, 1, 19)


def test_runs_of_different_files_are_refused() -> None:
    with pytest.raises(ValueError, match="different files"):
        paired.compare(run([(0, 0, 0)] * 3), run([(0, 0, 0)] * 4))


def result_json(path: Path, rows: list[tuple[str, int, int, int, int, int]]) -> Path:
    files = [
        {"file": f, "duration_s": 1.0, "server": {"words": w, "sub": s, "del": d, "ins": i, "output_words": o}}
        for f, w, s, d, i, o in rows
    ]
    path.write_text(json.dumps({"files": files}))
    return path


def test_the_cli_compares_runs_and_sums_subsets_from_the_manifest(tmp_path: Path, capsys) -> None:
    a = result_json(
        tmp_path / "a.json", [("x.wav", 10, 1, 1, 0, 9), ("y.wav", 10, 2, 0, 0, 10), ("n.wav", 0, 0, 0, 0, 3)]
    )
    b = result_json(
        tmp_path / "b.json", [("x.wav", 10, 0, 0, 0, 10), ("y.wav", 10, 1, 0, 0, 10), ("n.wav", 0, 0, 0, 0, 0)]
    )
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "\n".join(
            json.dumps({"audio": f"audio/{f}", "text": "", "duration_s": 1.0, "subset": s})
            for f, s in (("x.wav", "read"), ("y.wav", "read"), ("n.wav", "noise"))
        )
    )
    assert main(["bench", "compare", str(a), str(b), "--dataset", str(manifest), "--draws", "200"]) == 0
    out = capsys.readouterr().out
    assert "A 35.00%, B 5.00%" in out  # words out over an empty reference count as insertions: (2+2+3)/20
    assert "better in B: 3, worse: 0" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line and line.split()[0] in ("read", "noise")}
    assert "20" in lines["read"] and "20.00% 3/1/0" in lines["read"] and "5.00% 1/0/0" in lines["read"]
    assert "(3 words out)" in lines["noise"] and "(0 words out)" in lines["noise"]


def test_the_cli_refuses_a_single_run_without_a_dataset(tmp_path: Path, capsys) -> None:
    a = result_json(tmp_path / "a.json", [("x.wav", 10, 1, 1, 0, 9)])
    assert main(["bench", "compare", str(a)]) == 2
    assert "needs two runs" in capsys.readouterr().err
