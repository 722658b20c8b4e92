"""Shared fixtures: the conformance corpus, kept in the repository (conformance/, expected outputs from Flink CEP 2.3)."""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

CORPUS = HERE.parent / "conformance"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the conformance corpus is missing at {CORPUS} (the repository's conformance/ folder; restore it from git)")
    return CORPUS
