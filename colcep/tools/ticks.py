"""Synthetic tick data: per-symbol random walks, deterministic for a seed.

    ticks = make_ticks(100_000, symbols=20, seed=7)        # a pyarrow Table
    write_ticks("out/ticks.parquet", 1_000_000, 100)       # Parquet or CSV (by the suffix)
    write_ticks("out/ticks_by_symbol", 1_000_000, 100, partition_by_key=True)  # part-00000.parquet ...

Columns: ``id`` (int64, arrival order), ``name`` (string, the symbol), ``ts`` (int64 ms,
non-decreasing over the whole stream, about 2 ms apart), ``price`` (float64, a geometric
random walk per symbol, 4 decimals) and ``volume`` (float64, log-normal, median about 300).
The algorithm and its random draws are those of the benchmark's tick generator (docs/benchmarks.md),
so the same (events, symbols, seed) gives the same rows as the benchmark data.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa

TICK_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.int64()),
                         ("price", pa.float64()), ("volume", pa.float64())])


def make_ticks(events: int, symbols: int = 100, seed: int = 7) -> pa.Table:
    """``events`` ticks over ``symbols`` symbols (``S0000``, ``S0001``, ...), in arrival order."""
    if events < 0 or symbols < 1:
        raise ValueError(f"make_ticks needs events >= 0 and symbols >= 1, got {events}, {symbols}")
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, symbols, size=events)
    ts = np.cumsum(rng.exponential(2.0, size=events)).astype(np.int64)  # ~2 ms apart
    steps = rng.normal(0.0, 0.0005, size=events)
    # per-symbol cumulative log-returns, in arrival order
    order = np.argsort(sym, kind="stable")
    ret = np.empty(events)
    s_sorted = sym[order]
    c = np.cumsum(steps[order])
    starts = np.r_[0, np.flatnonzero(np.diff(s_sorted)) + 1] if events else np.zeros(0, np.int64)
    base = np.repeat(c[starts] - steps[order][starts], np.diff(np.r_[starts, events]))
    ret[order] = c - base
    start_price = 20.0 + 180.0 * rng.random(symbols)
    price = np.round(start_price[sym] * np.exp(ret), 4)
    volume = np.round(rng.lognormal(np.log(300.0), 0.8, size=events))
    names = pa.array([f"S{i:04d}" for i in range(symbols)], pa.string())
    name_col = names.take(pa.array(sym, pa.int64()))
    return pa.table([pa.array(np.arange(events, dtype=np.int64)), name_col, pa.array(ts), pa.array(price),
                     pa.array(volume)], schema=TICK_SCHEMA)


def write_ticks(path: str | os.PathLike, events: int, symbols: int = 100, seed: int = 7, *,
                partition_by_key: bool = False, buckets: int | None = None, row_group_size: int = 1 << 20) -> Path:
    """Write ``make_ticks(events, symbols, seed)`` to ``path`` and return it.

    A path ending in ``.csv`` gets CSV with a header; anything else Parquet. With
    ``partition_by_key`` the path is a folder of files that each hold a range of whole symbols,
    sorted by (name, ts, id): ``part-00000.parquet``, ... (:func:`colcep.spark.write_by_key`;
    ``buckets`` files, by default from the data: at most about 2 M rows a file, up to 64 files,
    never more than 1,024 however many symbols), the layout :func:`colcep.spark.match_parquet`
    reads directly.
    """
    path = Path(path)
    if buckets is not None and not partition_by_key:
        raise ValueError("write_ticks: buckets= goes with partition_by_key=True")
    table = make_ticks(events, symbols, seed)
    if partition_by_key:
        from colcep.spark.parquet import write_by_key

        write_by_key(table, path, "name", "ts", seq="id", buckets=buckets, row_group_size=row_group_size)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, path, row_group_size=row_group_size)
    return path
