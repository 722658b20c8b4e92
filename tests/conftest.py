"""Shared fixtures: the conformance corpus beside the project (../shared/conformance)."""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

CORPUS = HERE.parent.parent / "shared" / "conformance"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the conformance corpus is missing at {CORPUS} (expected ../shared/conformance)")
    return CORPUS
