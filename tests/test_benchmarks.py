"""The asv suite in CI form: every benchmark of asv_bench/benchmarks runs once on tiny data, and
the yardstick loops (asv_bench/yardstick.py) find exactly colcep's matches.

COLCEP_BENCH_QUICK=1 shrinks the grids to ~10^4 events before the benchmark modules are
imported; each benchmark class then runs setup_cache (in a temporary directory, as asv does),
and for every parameter combination setup, each time_/peakmem_/track_ method once, teardown.
"""
from __future__ import annotations

import importlib
import inspect
import itertools
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

_BENCH_VARS = ("COLCEP_BENCH_QUICK", "COLCEP_BENCH_EVENTS", "COLCEP_BENCH_SYMBOLS", "COLCEP_BENCH_REF_EVENTS")
ASV_BENCH = Path(__file__).resolve().parents[1] / "asv_bench"
sys.path.insert(0, str(ASV_BENCH))

import colcep  # noqa: E402
from colcep.tools.examples import BENCHMARK_PATTERNS  # noqa: E402
from colcep.tools.ticks import make_ticks  # noqa: E402

import yardstick  # noqa: E402

PREFIXES = ("time_", "peakmem_", "track_", "mem_")
#: modules that do not read COLCEP_BENCH_QUICK: module constants shrunk for the smoke run
SHRINK = {"bench_windows": {"EVENTS": 10_000}, "bench_sql": {"EVENTS": 10_000}}


def _modules():
    """The benchmark modules, imported in quick mode (the sizes are read at import; the
    environment is restored afterwards so no other test sees the switch)."""
    # bench_compile last: its child processes then load the kernels this process already cached
    names = sorted((p.stem for p in (ASV_BENCH / "benchmarks").glob("bench_*.py")),
                   key=lambda n: (n == "bench_compile", n))
    saved = {v: os.environ.pop(v) for v in _BENCH_VARS if v in os.environ}
    os.environ["COLCEP_BENCH_QUICK"] = "1"
    try:
        return [importlib.import_module(f"benchmarks.{n}") for n in names]
    finally:
        os.environ.pop("COLCEP_BENCH_QUICK", None)
        os.environ.update(saved)


def _benchmark_classes():
    out = []
    for mod in _modules():
        for name, cls in vars(mod).items():
            if inspect.isclass(cls) and cls.__module__ == mod.__name__ and any(
                    m.startswith(PREFIXES) for m in dir(cls)):
                out.append(pytest.param(mod, cls, id=f"{mod.__name__.split('.')[-1]}.{name}"))
    return out


def _param_grid(cls):
    params = getattr(cls, "params", None)
    if params is None or params == []:
        return [()]
    if not isinstance(params, (list, tuple)) or not params or not isinstance(params[0], (list, tuple)):
        params = [params]
    return list(itertools.product(*params))


# ----------------------------------------------------------------------------- the yardstick is right
def _colcep_matches(table, name):
    """colcep's matches as sorted rows: (a, b, c) for P1 / P4, (first, last event) for P2 / P3."""
    out = colcep.match(table, BENCHMARK_PATTERNS[name], key="name", time="ts", columns=[])
    ids = out.column("match_id").to_numpy()
    rows = out.column("row").to_numpy()
    if ids.size == 0:
        return np.zeros((0, 3 if name in ("P1", "P4") else 2), np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(ids)) + 1]
    ends = np.r_[starts[1:], ids.size]
    if name in ("P1", "P4"):
        assert np.all(ends - starts == 3)
        got = rows.reshape(-1, 3)
    else:
        got = np.stack([rows[starts], rows[ends - 1]], axis=1)
    return got[np.lexsort(got.T[::-1])]


@pytest.mark.parametrize("name", ["P1", "P2", "P3", "P4"])
@pytest.mark.parametrize("events, symbols, seed", [(20_000, 100, 3), (6_000, 8, 5)])
def test_yardstick_finds_colceps_matches(name, events, symbols, seed):
    if name == "P4" and symbols < 20:
        events = 1_500  # rising triples explode with few symbols
    table = make_ticks(events, symbols, seed)
    want = _colcep_matches(table, name)
    got = yardstick.run(name, table)
    got = got[np.lexsort(got.T[::-1])]
    assert got.shape[0] > 0
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_match_count_helper_agrees_with_distinct_ids():
    from benchmarks.common import QUICK, _n_matches

    assert QUICK

    import pyarrow.compute as pc

    m = colcep.Matcher(BENCHMARK_PATTERNS["P4"], key="name", time="ts", columns=[])
    table = make_ticks(5_000, 50, 1)
    for part in (m.process(table.slice(0, 2_500)), m.process(table.slice(2_500)), m.close()):
        assert _n_matches(part) == pc.count_distinct(part.column("match_id")).as_py()


def test_state_probe_counts_the_matchers_arrays():
    """``matcher_state_bytes`` (bytes per live partial match in bench_memory) finds the arrays
    the Matcher's state holds; ``Matcher.state_bytes`` counts them at their capacity, which the
    probe cannot see through the kernel's (Numba's) views, and the pooled output arrays: more."""
    from benchmarks.common import matcher_state_bytes

    m = colcep.Matcher(BENCHMARK_PATTERNS["P4"], key="name", time="ts", columns=[])
    m.process(make_ticks(5_000, 20, 1))
    assert m.live_partial_matches > 20
    assert m.state_bytes >= matcher_state_bytes(m) >= 50 * m.live_partial_matches


# ----------------------------------------------------------------------------- every benchmark runs
def test_benchmark_modules_found():
    names = {m.__name__.split(".")[-1] for m in _modules()}
    assert {"bench_patterns", "bench_compile", "bench_memory", "bench_scaling"} <= names


@pytest.mark.parametrize("mod, cls", _benchmark_classes())
def test_benchmark_runs(mod, cls, tmp_path, monkeypatch):
    for attr, value in SHRINK.get(mod.__name__.split(".")[-1], {}).items():
        monkeypatch.setattr(mod, attr, value)
    monkeypatch.chdir(tmp_path)  # asv runs setup_cache and the benchmarks in its cache directory
    bench = cls()
    has_cache = getattr(bench, "setup_cache", None) is not None
    cache = bench.setup_cache() if has_cache else None
    methods = sorted(m for m in dir(cls) if m.startswith(PREFIXES))
    grid = _param_grid(cls)
    assert methods and grid
    for combo in grid:
        args = ((cache,) if has_cache else ()) + tuple(combo)
        for method in methods:
            obj = cls()
            if hasattr(obj, "setup"):
                obj.setup(*args)
            try:
                result = getattr(obj, method)(*args)
            finally:
                if hasattr(obj, "teardown"):
                    obj.teardown(*args)
            if method.startswith("track_"):
                assert isinstance(result, (int, float, np.integer, np.floating)), (method, combo, result)
                assert math.isfinite(float(result)), (method, combo, result)
