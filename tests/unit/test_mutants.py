"""Every mutant of ``make mutants`` still applies to the code and names tests that exist: a mutant whose patch
has rotted proves nothing (tests/mutants/run.py counts it as an error, but only when the mutants run)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.mutants.run import HERE, ROOT, load

PATCHES = sorted(HERE.glob("*.patch"))


def test_there_are_mutants() -> None:
    assert len(PATCHES) >= 20


@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_the_mutant_applies_and_names_existing_tests(patch: Path) -> None:
    mutant = load(patch)
    check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 0, f"{patch.name} no longer applies; make it again: {check.stderr}"
    for test in mutant.tests:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), f"{patch.name}: no test file {path}"
        if name:
            assert f"def {name.split('[')[0]}(" in (ROOT / path).read_text(), f"{patch.name}: no test {test}"
