"""The sweeps of docs/benchmarks.md without asv: per pattern and window, colcep's events/s (one
thread, process CPU time, best of ``--rounds``), the limit kernels' on the same window, their
ratio, the matches and the most live partial matches between 10^4-row batches.

    python asv_bench/sweeps_table.py                       # 10^6 events over 100 symbols
    python asv_bench/sweeps_table.py --events 4e6 --patterns P5 --rounds 2
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import colcep  # noqa: E402
import limit  # noqa: E402
from benchmarks.bench_sweeps import WINDOWS, _count, run  # noqa: E402
from benchmarks.common import LIMIT_PATTERNS, warm_up  # noqa: E402
from colcep.tools.ticks import make_ticks  # noqa: E402


def cpu(fn, rounds: int):
    best, out = float("inf"), None
    for _ in range(rounds):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, default=1e6)
    ap.add_argument("--symbols", type=int, default=100)
    ap.add_argument("--patterns", default="P3,P4,P5")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    table = make_ticks(int(args.events), args.symbols, 7)
    names = args.patterns.split(",")
    warm_up(names)
    limit.warm_up()
    print(f"{table.num_rows:,} events over {args.symbols} symbols, one core, process CPU time, best of {args.rounds}")
    print("| pattern | window | matches | live partial matches (max) | colcep | limit kernel | ratio |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for name in names:
        for w in WINDOWS[name]:
            p = LIMIT_PATTERNS[name].within(w)
            c, out = cpu(lambda: colcep.match(table, p, key="name", time="ts", columns=[], threads=1), args.rounds)
            lim, n_lim = cpu(lambda: limit.best(name, table, repeat=1, within=w)[1], args.rounds)
            n = _count(out)
            assert n == n_lim, (name, w, n, n_lim)
            live = run(p, table)[1]
            rate = lambda s: f"{table.num_rows / s / 1e6:.2f} M/s"  # noqa: E731
            print(f"| {name} | {w / 1000:g} s | {n:,} | {live:,} | {rate(c)} | {rate(lim)} | {lim / c:.2f} |", flush=True)


if __name__ == "__main__":
    main()
