"""Every case of the conformance corpus (``conformance/``, expected output from the real Flink CEP 2.3),
through the Numba engine and through the plain-Python reference, one test per case.

A missing or empty corpus is a collection error, never an empty parameter set (which pytest would
report as a skip)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from colcep.engine import codegen
from colcep.engine.compiler import compile_pattern
from conformance import CORPUS, case_pattern, check_case, compare, load_cases, rows_to_matches, tiers_agree

if not CORPUS.is_dir():
    raise FileNotFoundError(f"the conformance corpus is missing at {CORPUS}: it is part of the repository "
                            "(conformance/), restore it from git")
CASES = load_cases([CORPUS])
if not CASES:
    raise FileNotFoundError(f"the conformance corpus at {CORPUS} holds no cases")
GAPS = {c["id"] for c in CASES if compile_pattern(case_pattern(c)).has_gap_windows}


def test_corpus_is_complete(corpus_dir):
    assert len(CASES) == 825
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert len(GAPS) == 12


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_engine(case):
    diff = check_case(case, "colcep")
    assert diff is None, diff


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_compiled_tier(case, monkeypatch):
    """The compiled tier forced: Flink's output, and exactly the generic tier's tables and live
    partial matches, whole, in 1- and 7-row batches and restored at every boundary
    (``conformance.tiers_agree``); every case's shape is generated (``test_stepgen.py``). The
    generated step runs as Python (``codegen.JIT`` False): the source Numba compiles, without a
    compile per shape; ``test_stepgen.py`` and ``test_tiers.py`` compile it."""
    monkeypatch.setattr(codegen, "JIT", False)
    timeouts = case.get("expected_timeouts") is not None
    whole = tiers_agree(case, timeouts)
    diff = compare(case, *rows_to_matches(whole, timeouts))
    assert diff is None, diff


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference(case):
    diff = check_case(case, "reference")
    assert diff is None, diff


def test_script_reports_each_failing_case(tmp_path, corpus_dir):
    """``python tests/conformance.py PATH`` prints one line per failing case and a summary."""
    cases = json.loads((corpus_dir / "flink" / "NFATest.json").read_text())
    broken = dict(cases[0], id="broken.case", expected=[{"nonexistent": [1]}])
    (tmp_path / "cases.json").write_text(json.dumps([cases[0], broken]))
    script = str(Path(__file__).with_name("conformance.py"))
    res = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    lines = res.stdout.strip().splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert lines[0].startswith("broken.case: ")
    assert res.returncode == 1
