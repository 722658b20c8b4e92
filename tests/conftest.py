"""Shared fixtures: the conformance corpus, kept in the repository (conformance/, expected outputs from Flink CEP 2.3),
and one local Spark session per test process (each pytest-xdist worker has its own)."""
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

from spark_settings import JAVA_OPTIONS, RUNTIME, spark_settings  # noqa: E402 (tests/ is on the path from here)

CORPUS = HERE.parent / "conformance"


def pytest_sessionstart(session):
    """With several test processes (pytest-xdist), the kernels are compiled here once, before
    the workers start (``precompile.before_workers``; a second or two when they are cached)."""
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", 0):
        return
    import time

    import precompile

    t0 = time.perf_counter()
    precompile.before_workers(lambda line: print(f"colcep warmup: {line}", flush=True))
    print(f"colcep warmup: done in {time.perf_counter() - t0:.1f} s", flush=True)


def pytest_collection_modifyitems(config, items):
    """Spark and ``slow`` tests first (in their order, the rest in theirs): with several
    processes (pytest-xdist) the long tests then start at once, and the short ones fill in
    around them instead of leaving one long test running alone at the end."""
    items.sort(key=lambda item: not (item.get_closest_marker("spark") or item.get_closest_marker("slow")))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the conformance corpus is missing at {CORPUS} (the repository's conformance/ folder; restore it from git)")
    return CORPUS


@pytest.fixture(scope="session")
def spark():
    """This process's local Spark session (two cores, two shuffle partitions), shared by every
    Spark test: starting a JVM and its Python workers costs seconds each time. A module that
    wants other runtime settings overrides this fixture (``spark_settings.spark_settings``)."""
    pytest.importorskip("pyspark")
    from colcep.spark import local_session

    s = local_session(2, shuffle_partitions=2, memory="1g", java_options=JAVA_OPTIONS)
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def _spark_settings_restored(request):
    """A test that uses the Spark session leaves its runtime settings as it found them."""
    if "spark" not in request.fixturenames:
        yield
        return
    s = request.getfixturevalue("spark")
    with spark_settings(s, {k: s.conf.get(k) for k in RUNTIME}):  # as they are now, and again after the test
        yield
