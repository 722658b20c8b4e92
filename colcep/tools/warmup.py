"""Compile colcep's kernels ahead of the first scan, its subsystems in parallel processes.

A kernel compiles the first time a process on this machine calls it and is then cached on disk
(:mod:`colcep.engine.kernel_cache`). The CEP engine's generic step and its driver are the largest
(each one chain of calls Numba compiles one function at a time); they compile in two processes
at once (``"cep-step"`` and ``"cep"``, :mod:`colcep.engine.steps`), and the standard SQL mode's
row-pattern search, the window and trigger kernels are independent of them, so on a machine
with more cores they compile beside them.
Each group runs small scans that call its kernels with the argument types real scans use; what
is already cached is only loaded. ``colcep warmup`` runs this (images, cluster init scripts,
CI before a test run).
"""
from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Sequence

__all__ = ["GROUPS", "warmup", "warm_group"]


def _ticks():
    from colcep.tools.ticks import make_ticks

    return make_ticks(3000, 4, 1)


def _cep() -> None:
    import colcep as cc
    from colcep.tools.examples import BENCHMARK_PATTERNS
    from colcep.expr import col, prev

    t = _ticks()
    rise = cc.Pattern.begin("a").where(col("price") > prev("price")).next("b").where(col("price") > col("volume"))
    cc.match(t, BENCHMARK_PATTERNS["P2"], key="name", time="ts", timeouts=True)
    cc.match(t, rise, key="name", time="ts")
    cc.match_many(t, {k: BENCHMARK_PATTERNS[k] for k in ("P1", "P3", "P5")}, key="name", time="ts")
    _file_scan()
    _key_index()


def _key_index() -> None:
    """The key hash table's kernels for each kind of key column, and its growth."""
    import pyarrow as pa

    from colcep.engine.keyindex import KeyIndex

    names = [f"key-{i:012d}" for i in range(600)]  # (past the table's first size: it grows)
    for kind, arr in (("str", pa.array(names)), ("str", pa.array(names, pa.large_string())),
                      ("int", pa.array(range(600), pa.int64()))):
        index = KeyIndex(kind)
        index.encode(arr)
        index.look_up(arr)
        index.truncate(1)


def _file_scan() -> None:
    """An in-process scan of a small Parquet file as ``colcep scan --in-process`` runs it: its
    kernels' warm-up, its streamed reading with dictionary keys, keys spread over two threads."""
    import tempfile

    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from colcep.spark.batch import ROW_COL, arrow_spec
    from colcep.engine.shards import PARALLEL_MIN_ROWS
    from colcep.tools.examples import BENCHMARK_PATTERNS
    from colcep.tools.file_scan import parquet_batches, scan_batches, warm_kernels
    from colcep.tools.ticks import make_ticks

    with tempfile.TemporaryDirectory(prefix="colcep-warmup-") as tmp:
        path = os.path.join(tmp, "ticks.parquet")
        pq.write_table(make_ticks(PARALLEL_MIN_ROWS + 1000, 8, 1), path)
        data = ds.dataset(path)
        spec = arrow_spec(data.schema, BENCHMARK_PATTERNS["P3"], "name", "ts", [])
        need = [c for c in spec.in_schema.names if c != ROW_COL]
        warm_kernels({"P3": spec}, data, need)  # what colcep scan calls before it scans
        scan_batches(spec, lambda: parquet_batches(path, spec.key_columns, need, 1 << 20),
                     lambda: data.to_table(columns=need), lambda out: None, lambda disorder: None, threads=2)


def _generic_step() -> None:
    """The generic tier's step (``kernels.nfa._run_key``, the largest compile) before the driver,
    while the "cep" group's process compiles the driver first (``colcep.engine.steps``)."""
    import colcep as cc
    from colcep.engine import steps
    from colcep.tools.examples import BENCHMARK_PATTERNS

    steps.STEP_FIRST = True
    cc.match(_ticks(), BENCHMARK_PATTERNS["P2"], key="name", time="ts")


def _sql() -> None:
    import colcep as cc

    q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY name ORDER BY ts MEASURES FIRST(A.price) AS p, COUNT(*) AS n "
         "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) DEFINE B AS B.price > PREV(B.price), "
         "C AS C.price < AVG(B.price))")
    cc.sql(q, t=_ticks())


def _windows() -> None:
    import colcep as cc
    from colcep import triggers as tr

    t = _ticks()
    cc.ohlc(t, "1min", key="name")
    cc.aggregate(t, cc.Session("30s"), {"n": "count", "px": ("price", "last")}, key="name")
    cc.aggregate(t, cc.Sliding("5min", "1min"), {"v": ("volume", "sum")}, key="name")
    cc.aggregate(t, cc.Tumbling("1h"), {"v": ("volume", "sum")}, key="name", trigger=tr.ContinuousEventTime("1min"),
                 allowed_lateness="5min", out_of_orderness="2s")


#: The groups of kernels, largest first: name -> a function that calls them.
GROUPS: dict[str, Callable[[], None]] = {"cep": _cep, "cep-step": _generic_step, "sql": _sql, "windows": _windows}


def warm_group(name: str, host_tuned: bool = False) -> tuple[str, float, int]:
    """Run one group's scans in this process: (name, seconds, kernels compiled here); with
    ``host_tuned``, kernels compiled for this machine even where colcep ships them compiled."""
    from colcep.engine import kernel_cache as cache
    from colcep.engine import shipped, steps

    cache.notice = False
    if host_tuned:
        shipped.use = False
    steps.BESIDE = False  # (the groups are the processes)
    t0 = time.perf_counter()
    GROUPS[name]()
    return name, time.perf_counter() - t0, cache.kernel_compiles()


def warmup(groups: Sequence[str] | None = None, processes: int | None = None,
           report: Callable[[str], None] | None = None, host_tuned: bool = False) -> dict[str, tuple[float, int]]:
    """Compile (or load) the kernels of ``groups`` (default: all of :data:`GROUPS`), in up to
    ``processes`` fresh processes at once (default: the cores, at most one per group); returns
    name -> (seconds, kernels compiled). ``report`` gets a line as each group finishes. Kernels
    colcep ships compiled (:mod:`colcep.engine.shipped`) are loaded, not compiled, unless
    ``host_tuned``: then every kernel not yet in this machine's cache compiles for its CPU."""
    names = list(GROUPS) if groups is None else list(groups)
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        from colcep.errors import InputError

        raise InputError(f"unknown kernel group {unknown[0]!r}; the groups are {list(GROUPS)}")
    n = max(1, min(len(names), processes or os.cpu_count() or 1))
    done: dict[str, tuple[float, int]] = {}
    # fresh interpreters ("spawn"): the caller may hold threads or a JVM that a fork would copy
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        for fut in as_completed([pool.submit(warm_group, name, host_tuned) for name in names]):
            name, seconds, compiled = fut.result()
            done[name] = (seconds, compiled)
            if report is not None:
                report(f"{name}: {compiled} kernels compiled, {seconds:.1f} s")
    return done
