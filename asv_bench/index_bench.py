#!/usr/bin/env python3
"""Issue 22: cost that follows the work. P5 (shared/bench/patterns.json) and the shapes users
write beside it, colcep against the heap loop (``p5_grouped_emit``, shared/bench/limit), at
several stream lengths, process CPU time, one process.

    python asv_bench/index_bench.py --events 1e6,4e6                 # P5 and the heap loop
    python asv_bench/index_bench.py --events 1e6,4e6 --shapes all    # every shape, per-event growth
    python asv_bench/index_bench.py --events 1e6 --shapes P1,P2,P3,P4 --symbols 100,5000

Each figure is the best of ``--repeat`` runs after a warm-up on a small table.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import colcep  # noqa: E402
from colcep.tools.examples import BENCHMARK_PATTERNS  # noqa: E402
from colcep.expr import col, last  # noqa: E402
from colcep.pattern import Pattern  # noqa: E402
from colcep.skip import SkipPastLastEvent, SkipToFirst, SkipToLast, SkipToNext  # noqa: E402
from colcep.tools.ticks import make_ticks  # noqa: E402
from limit_kernels import group_by_key  # noqa: E402

HOUR = "1h"
LIMIT = Path("/work/shared/bench/limit/kernels.py")  # p5_grouped_emit (not vendored in limit_kernels.py)
_LIMIT = []


def _limit():
    """``p5_grouped_emit`` from the shared limit kernels, imported from a copy under /tmp (Numba
    caches its compiled code next to the module; the shared folder stays untouched)."""
    if not _LIMIT:
        import shutil
        import tempfile
        d = Path(tempfile.gettempdir()) / "colcep_p5limit"
        d.mkdir(exist_ok=True)
        if not (d / "p5limit.py").exists() or (d / "p5limit.py").read_bytes() != LIMIT.read_bytes():
            shutil.copyfile(LIMIT, d / "p5limit.py")
        sys.path.insert(0, str(d))
        import p5limit
        _LIMIT.append(p5limit)
    return _LIMIT[0]


def _a():
    return Pattern.begin("a").where(col("volume") > 800.0)


def shapes() -> dict:
    pa_ = last("price", of="a")
    p5 = _a().followed_by("b").where(col("price") > 1.05 * pa_).within(HOUR)
    out = {
        "P5": p5,
        "drop": _a().followed_by("b").where(col("price") < 0.97 * pa_).within(HOUR),
        "level_ge": _a().followed_by("b").where(col("price") >= pa_ * 1.04 + 0.01).within(HOUR),
        "conjunct": _a().followed_by("b").where((col("price") > 1.04 * pa_) & (col("volume") > 300.0)).within(HOUR),
        "skip_next": p5.skip(SkipToNext()),
        "skip_past_last": p5.skip(SkipPastLastEvent()),
        "skip_first": p5.skip(SkipToFirst("a")),
        "skip_last": p5.skip(SkipToLast("a")),
        "two_levels": (_a().followed_by("b").where(col("price") > 1.02 * pa_)
                       .followed_by("c").where(col("price") > 1.02 * last("price", of="b")).within(HOUR)),
        # a level inside a Kleene stage: every b above a's level is taken by every open run (the
        # work grows with the runs), so its window is a minute (an hour holds ~10^5 runs of a key)
        "kleene": (_a().followed_by("b").where(col("price") > 1.02 * pa_).one_or_more()
                   .followed_by("c").where(col("price") < 0.99 * last("price", of="b")).within(60_000)
                   .skip(SkipPastLastEvent())),
    }
    out.update(BENCHMARK_PATTERNS)
    return out


def n_matches(t: pa.Table) -> int:
    if t.num_rows == 0:
        return 0
    ids = t.column("match_id")
    return int(ids[-1].as_py()) - int(ids[0].as_py()) + 1


def colcep_scan(p, table) -> int:
    m = colcep.Matcher(p, key="name", time="ts", columns=[])
    return n_matches(m.process(table)) + n_matches(m.close())


def heap_scan(table) -> int:
    p5_grouped_emit = _limit().p5_grouped_emit
    enc = pc.dictionary_encode(table.column("name")).combine_chunks()
    key = enc.indices.to_numpy().astype(np.int64)
    ts = table.column("ts").to_numpy()
    price = table.column("price").to_numpy()
    vol = table.column("volume").to_numpy()
    off, rows, gts, gp, gv = group_by_key(key, len(enc.dictionary), ts, price, vol)
    return p5_grouped_emit(off, rows, gts, gp, gv, 3_600_000, 800.0, 1.05).shape[0]


def best(f, repeat):
    t_best, r = None, None
    for _ in range(repeat):
        t0 = time.process_time()
        r = f()
        t = time.process_time() - t0
        t_best = t if t_best is None else min(t_best, t)
    return t_best, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", default="1e6,4e6")
    ap.add_argument("--symbols", default="100")
    ap.add_argument("--shapes", default="P5")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--heap", action="store_true", help="also the heap loop (P5's yardstick)")
    ap.add_argument("--chunk", type=int, default=0, help="set colcep.engine.matcher.CHUNK_ROWS (an experiment)")
    ap.add_argument("--many-runs", type=int, default=0, help="set colcep.engine.shards.MANY_RUNS (an experiment)")
    a = ap.parse_args()
    if a.many_runs:
        import colcep.engine.shards
        colcep.engine.shards.MANY_RUNS = a.many_runs
    if a.chunk:
        import colcep.engine.matcher
        colcep.engine.matcher.CHUNK_ROWS = a.chunk
    all_shapes = shapes()
    names = list(all_shapes) if a.shapes == "all" else a.shapes.split(",")
    events = [int(float(x)) for x in a.events.split(",")]
    tiny = make_ticks(20_000, 10, 1)
    for nm in names:
        colcep_scan(all_shapes[nm], tiny)
    if a.heap:
        heap_scan(tiny)
    for sym in (int(s) for s in a.symbols.split(",")):
        rows = []
        for n in events:
            table = make_ticks(n, sym, 7)
            if a.heap:
                t, c = best(lambda: heap_scan(table), a.repeat)
                rows.append(("heap loop", n, t, c))
                print(f"{sym} sym {n:>9} heap loop   {n / t / 1e6:7.2f} M/s  {t * 1e9 / n:8.1f} ns/ev  {c} matches",
                      flush=True)
            for nm in names:
                t, c = best(lambda: colcep_scan(all_shapes[nm], table), a.repeat)
                rows.append((nm, n, t, c))
                print(f"{sym} sym {n:>9} {nm:<12}{n / t / 1e6:7.2f} M/s  {t * 1e9 / n:8.1f} ns/ev  {c} matches",
                      flush=True)
        if len(events) > 1:
            for nm in (["heap loop"] if a.heap else []) + names:
                r = [x for x in rows if x[0] == nm]
                g = (r[-1][2] / r[-1][1]) / (r[0][2] / r[0][1])
                print(f"{sym} sym growth of cost per event {events[0]:.0e} -> {events[-1]:.0e}: {nm:<12} x{g:.2f}")


if __name__ == "__main__":
    main()
