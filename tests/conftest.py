"""Shared fixtures: the conformance corpus, kept in the repository (conformance/, expected outputs from Flink CEP 2.3)."""
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run ("ci"): a red CI is then a regression, not
# a rare draw. `COLCEP_HYPOTHESIS=explore pytest tests/test_property.py` draws new ones (run it
# often, locally; a failure it finds becomes a fixed test case).
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile(os.environ.get("COLCEP_HYPOTHESIS", "ci"))

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

CORPUS = HERE.parent / "conformance"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the conformance corpus is missing at {CORPUS} (the repository's conformance/ folder; restore it from git)")
    return CORPUS
