"""``make mutants``: every named mutation of the code must make at least one of its tests fail.

Each ``tests/mutants/*.patch`` is one small, deliberate bug: a unified diff against the repository, with a
header that ``git apply`` skips::

    # mutant: the realtime partials ticker never runs
    # tests: tests/e2e/test_realtime.py::test_partials_arrive_before_commit
    # tests: tests/unit/test_live_audio.py::test_ticker
    --- a/voxlane/server/realtime.py
    +++ b/voxlane/server/realtime.py
    @@ ...

For each patch, the tracked and untracked (not ignored) files are copied to a temporary directory, the
patch is applied there, and only the named tests run, from that copy (``PYTHONPATH`` points at it, so the
servers the tests start run the mutated code too). A mutant is *killed* when pytest fails (exit code 1);
it *survives* when they all pass. Anything else (the patch no longer applies, no test collected, pytest
crashed) is an *error*, because a mutant that cannot run proves nothing. Two mutants run at once by
default (``--jobs``): each has its own copy and its servers their own ports; the container tests' mutants,
which share an image tag, take turns. The table is printed at the end; the exit code is non-zero unless
every mutant was killed.

To add one: break the code on purpose, check that the tests you name fail, then
``git diff voxlane > tests/mutants/NAME.patch``, put the two header lines on top and ``git checkout voxlane``.
Run ``python tests/mutants/run.py NAME ...`` (``make mutants ARGS=NAME``) for some mutants only, ``--list``
to see them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


@dataclass
class Mutant:
    name: str
    """The patch file's stem."""
    what: str
    """The ``# mutant:`` line: the bug, in words."""
    tests: list[str]
    """pytest node ids, from the ``# tests:`` lines."""
    patch: Path


@dataclass
class Outcome:
    mutant: Mutant
    verdict: str
    """killed, survived or error."""
    seconds: float
    detail: str = ""


def load(path: Path) -> Mutant:
    what, tests = "", []
    for line in path.read_text().splitlines():
        if line.startswith("# mutant:"):
            what = line.split(":", 1)[1].strip()
        elif line.startswith("# tests:"):
            tests += line.split(":", 1)[1].split()
        elif line.startswith(("---", "diff ")):
            break
    if not what or not tests:
        raise SystemExit(f"{path}: a mutant needs a '# mutant:' line and at least one '# tests:' line")
    return Mutant(path.stem, what, tests, path)


def copy_repo(dest: Path) -> None:
    """The files git knows or would add (tracked and untracked, not ignored), as they are on disk."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def run(mutant: Mutant, timeout_s: float) -> Outcome:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"voxlane-mutant-{mutant.name}-") as tmp:
        copy = Path(tmp) / ROOT.name
        copy_repo(copy)
        if (ROOT.parent / "shared").exists():  # the dev data set ships beside the repo, in ../shared
            (Path(tmp) / "shared").symlink_to(ROOT.parent / "shared")
        applied = subprocess.run(["git", "apply", str(mutant.patch)], cwd=copy, capture_output=True, text=True)
        if applied.returncode != 0:
            return Outcome(mutant, "error", time.monotonic() - start, "patch does not apply: " + applied.stderr)
        env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutant.tests]
        try:
            done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # A test that hangs on the bug is a test that notices it, but a hang is slow: say so.
            return Outcome(mutant, "killed", time.monotonic() - start, f"timed out after {timeout_s:.0f} s")
        tail = "\n".join(done.stdout.strip().splitlines()[-15:])
        verdict = {0: "survived", 1: "killed"}.get(done.returncode, "error")
        return Outcome(mutant, verdict, time.monotonic() - start, tail)


SHARED_TESTS = ("tests/container/",)
"""Tests that share state outside their copy (the image tag ``voxlane-test``): their mutants run one at a time."""
_shared = threading.Lock()


def run_one(mutant: Mutant, timeout_s: float) -> Outcome:
    if any(t.startswith(SHARED_TESTS) for t in mutant.tests):
        with _shared:
            return run(mutant, timeout_s)
    return run(mutant, timeout_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (patch stems); default: all")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests, run nothing")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="limit per mutant (default 300)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="mutants run at once, each in its own copy (default 2: most wait on a server's start)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print pytest's tail for every mutant")
    args = parser.parse_args()

    mutants = [load(p) for p in sorted(HERE.glob("*.patch"))]
    if args.names:
        unknown = set(args.names) - {m.name for m in mutants}
        if unknown:
            raise SystemExit(f"no such mutant: {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.name in args.names]
    if not mutants:
        raise SystemExit("no mutants in tests/mutants/")
    if args.list:
        for m in mutants:
            print(f"{m.name}: {m.what}\n    " + "\n    ".join(m.tests))
        return 0

    began = time.monotonic()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, m, args.timeout_s) for m in mutants]
        for future in as_completed(futures):
            outcome = future.result()
            print(f"{outcome.verdict:>8}  {outcome.seconds:6.1f} s  {outcome.mutant.name}", flush=True)
            if args.verbose or outcome.verdict != "killed":
                print("    " + outcome.detail.replace("\n", "\n    "), flush=True)
    outcomes = [f.result() for f in futures]

    print("\n| mutation | what | tests | result | s |\n|---|---|---|---|---|")
    for o in outcomes:
        tests = "<br>".join(t.removeprefix("tests/") for t in o.mutant.tests)
        print(f"| {o.mutant.name} | {o.mutant.what} | {tests} | {o.verdict} | {o.seconds:.0f} |")
    killed = sum(o.verdict == "killed" for o in outcomes)
    print(f"\n{killed}/{len(outcomes)} mutants killed in {time.monotonic() - began:.0f} s, {args.jobs} at once")
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
