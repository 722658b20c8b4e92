"""The limit kernels (``limit_kernels.py``, vendored from ``shared/bench/limit/kernels.py``): the
hand-specialised loops issue 11's targets are ratios to, "the faster of their arrival-order and
grouped forms, every match materialised".

    from limit import best
    seconds, n_matches = best("P2", table)   # Arrow table -> matches, the faster form

Materialising forms: P1 arrival (``p1_emit``; its grouped form only counts), P2 / P3 arrival
(``p2_run`` / ``p3_run``) and grouped (``group_by_key`` + ``p2_grouped`` / ``p3_grouped``), P4
arrival (``p4_emit``) and grouped (``p4_grouped_emit2``), P5 grouped only (``p5_grouped_emit``, a
min-heap of thresholds per key). The arrival kernels' per-key capacity starts at 64 and doubles
until it suffices, as their docstring asks of a caller. ``within`` overrides a pattern's window
(the window sweeps of docs/benchmarks.md).
"""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import limit_kernels as lk

WITHIN = {"P1": 10_000, "P2": 60_000, "P3": 3_600_000, "P4": 2_000, "P5": 3_600_000}
P5_VOLUME, P5_MULT = 800.0, 1.05  # P5's a: volume > 800; b: price > 1.05 x a's price


def prepare(table: pa.Table, key: str = "name") -> tuple:
    """(key codes int32, number of keys, ts int64, price, volume) in arrival order."""
    enc = pc.dictionary_encode(table.column(key)).combine_chunks()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    col = lambda n, t: np.ascontiguousarray(table.column(n).to_numpy(), dtype=t)  # noqa: E731
    return codes, len(enc.dictionary), col("ts", np.int64), col("price", np.float64), col("volume", np.float64)


def _with_cap(kernel, *args) -> np.ndarray:
    cap = 64
    while True:
        out, n = kernel(*args, cap)
        if n >= 0:
            return out
        cap *= 2


def arrival(name: str, arrays: tuple, within: int | None = None) -> int | None:
    """None where there is no arrival-order form (P5)."""
    key, nkeys, ts, price, volume = arrays
    w = WITHIN[name] if within is None else within
    if name == "P5":
        return None
    if name == "P1":
        return lk.p1_emit(key, ts, price, volume, nkeys, w).shape[0]
    kernel = {"P2": lk.p2_run, "P3": lk.p3_run, "P4": lk.p4_emit}[name]
    return _with_cap(kernel, key, ts, price, volume, nkeys, w).shape[0]


def grouped(name: str, arrays: tuple, within: int | None = None) -> int | None:
    """None where the grouped form does not materialise matches (P1)."""
    key, nkeys, ts, price, volume = arrays
    if name == "P1":
        return None
    offsets, rows, gts, gp, gv = lk.group_by_key(key, nkeys, ts, price, volume)
    w = WITHIN[name] if within is None else within
    if name == "P5":
        return lk.p5_grouped_emit(offsets, rows, gts, gp, gv, w, P5_VOLUME, P5_MULT).shape[0]
    if name == "P4":
        return lk.p4_grouped_emit2(offsets, rows, gts, gp, gv, w).shape[0]
    kernel = lk.p2_grouped if name == "P2" else lk.p3_grouped
    return int(kernel(offsets, rows, gts, gp, gv, w)[1])


def best(name: str, table: pa.Table, repeat: int = 3, within: int | None = None) -> tuple[float, int]:
    """(seconds, matches) of the faster form from the Arrow table (``prepare`` included, as
    colcep's scans start from the table too), best of ``repeat`` each."""
    out = []
    for form in (arrival, grouped):
        times, n = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            n = form(name, prepare(table), within)
            times.append(time.perf_counter() - t0)
            if n is None:
                break
        if n is not None:
            out.append((min(times), n))
    return min(out)


def warm_up() -> None:
    tiny = pa.table({"name": ["x"] * 8, "ts": np.arange(8, dtype=np.int64), "price": np.linspace(1, 2, 8),
                     "volume": np.full(8, 1000.0)})
    for name in WITHIN:
        best(name, tiny, repeat=1)
