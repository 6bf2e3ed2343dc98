"""`voxlane bench` on the default install (what `make serve` installs): `bench serve` and `bench sweep` run
in a process where every installed package outside voxlane's default dependencies fails to import (pytest,
openai, matplotlib, ...). The sweep then saves its JSON and says how to get the plots."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]

# Runs in the child: refuse the listed top-level modules, then run each `voxlane bench` command line.
CHILD = """
import importlib.abc, json, sys
blocked = set(json.loads(sys.argv[1]))

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not a default dependency)", name=name)
        return None

sys.meta_path.insert(0, Block())
from voxlane.cli import main
for argv in json.loads(sys.argv[2]):
    code = main(argv)
    print(f"exit {code}", flush=True)
"""


def default_distributions() -> set[str]:
    """voxlane's default dependencies (from this checkout's pyproject.toml) and all of theirs, installed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r).name for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return seen


def not_default_modules() -> list[str]:
    """Top-level import names that only distributions outside the default install provide."""
    default = default_distributions()
    return sorted(
        module
        for module, dists in packages_distributions().items()
        if module not in ("voxlane", "tests")
        and module not in sys.stdlib_module_names
        and not any(canonicalize_name(d) in default for d in dists)
    )


def test_bench_serve_and_sweep_need_only_the_default_install(fake: Any, tiny_dataset: Path, tmp_path: Path) -> None:
    blocked = not_default_modules()
    assert {"matplotlib", "openai", "pytest"} <= set(blocked)
    assert not {"httpx", "jiwer", "whisper_normalizer"} & set(blocked)
    common = ["--base-url", fake.base_url, "--num-warmups", "0", "--num-prompts", "2", "--result-dir", str(tmp_path)]
    sweep = ["--backend", "openai-audio-speech", "--max-concurrency", "1,2", "--result-filename", "sweep.json"]
    commands = [
        ["bench", "serve", *common, "--dataset", str(tiny_dataset), "--result-filename", "s.json"],
        ["bench", "sweep", *common, *sweep],
    ]
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(blocked), json.dumps(commands)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.count("exit 0") == 2, child.stdout[-3000:] + child.stderr[-3000:]
    served = json.loads((tmp_path / "s.json").read_text())
    assert served["completed"] == 2 and "EnglishTextNormalizer" in served["normaliser"]
    assert [r["max_concurrency"] for r in json.loads((tmp_path / "sweep.json").read_text())] == [1, 2]
    assert "no plots, matplotlib is not installed (pip install 'voxlane[plots]')" in child.stderr
    assert list(tmp_path.glob("*.png")) == []
