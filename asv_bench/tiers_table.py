#!/usr/bin/env python3
"""Issue 11's table: colcep's kernel tiers and threads against the limit kernels
(``limit.py``: ``shared/bench/limit/kernels.py``, the faster of their arrival-order and grouped
forms, every match materialised), measured in one process in interleaved rounds.

    python asv_bench/tiers_table.py                       # 10^6 events, 100 and 5,000 symbols
    python asv_bench/tiers_table.py --events 1e5 --symbols 100 --patterns P1,P4 --rounds 3

Per pattern and symbol count, every configuration (limit; generic and compiled at 1 thread;
both at ``--threads``) runs once per round, and the best round counts, so a burst of load on a
shared machine hits all of them alike. A colcep scan is one Matcher from the Arrow table to its
compact output (``common.scan``); the limit kernels' time includes taking their arrays from the
same table (the key dictionary-encoded), as the issue's figures did. The compiled tier's steps are
compiled (or loaded from the disk cache) before the first round. Prints a Markdown table and, with ``--json``, the raw seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CONFIGS = [("generic", 1), ("compiled", 1), ("generic", 2), ("compiled", 2)]


def measure(events: int, symbols: int, patterns: list[str], rounds: int, threads: int) -> list[dict]:
    import limit
    from benchmarks.common import LIMIT_PATTERNS as PATTERNS, scan, warm_up
    from colcep.tools.ticks import make_ticks

    configs = [(t, n if n == 1 else threads) for t, n in CONFIGS]
    table = make_ticks(events, symbols, 7)
    limit.warm_up()
    rows = []
    for name in patterns:
        warm_up([name], tiers=("generic", "compiled"))
        best = {"limit": float("inf"), **{c: float("inf") for c in configs}}
        matches = {}
        for _ in range(rounds):
            dt, matches["limit"] = limit.best(name, table, repeat=1)
            best["limit"] = min(best["limit"], dt)
            for tier, n in configs:
                t0 = time.perf_counter()
                matches[(tier, n)] = scan(PATTERNS[name], table, tier=tier, threads=n)
                best[(tier, n)] = min(best[(tier, n)], time.perf_counter() - t0)
        if len(set(matches.values())) != 1:
            raise AssertionError(f"{name}: the engines disagree on the number of matches: {matches}")
        rows.append({"pattern": name, "symbols": symbols, "events": events, "matches": matches["limit"],
                     "limit_s": best["limit"], **{f"{t}_{n}_s": best[(t, n)] for t, n in configs}})
        print(f"# {name} x {symbols}: " + ", ".join(f"{k} {v:.3f}" for k, v in rows[-1].items() if k.endswith("_s")),
              file=sys.stderr, flush=True)
    return rows


def _rate(events: int, s: float) -> str:
    r = events / s
    return f"{r / 1e6:.1f} M/s" if r >= 1e6 else f"{r / 1e3:.0f} k/s"


def markdown(rows: list[dict], threads: int) -> str:
    head = ("| pattern | symbols | limit | generic | ratio | compiled | ratio | "
            f"generic x{threads} threads | speedup | compiled x{threads} threads | speedup | matches |")
    out = [head, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        e, lim = r["events"], r["limit_s"]
        g1, s1, g2, s2 = r["generic_1_s"], r["compiled_1_s"], r[f"generic_{threads}_s"], r[f"compiled_{threads}_s"]
        out.append(f"| {r['pattern']} | {r['symbols']:,} | {_rate(e, lim)} | {_rate(e, g1)} | {lim / g1:.2f} | "
                   f"{_rate(e, s1)} | {lim / s1:.2f} | {_rate(e, g2)} | {g1 / g2:.2f}x | {_rate(e, s2)} | "
                   f"{s1 / s2:.2f}x | {r['matches']:,} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e6)
    ap.add_argument("--symbols", default="100,5000")
    ap.add_argument("--patterns", default="P1,P2,P3,P4,P5")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the best counts (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="the threaded configurations' thread count")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args(argv)
    t0, load0 = time.time(), os.getloadavg()
    rows = []
    for symbols in (int(s) for s in args.symbols.split(",")):
        rows += measure(int(args.events), symbols, args.patterns.split(","), args.rounds, args.threads)
    print(markdown(rows, args.threads))
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}, {os.cpu_count()} cores, load average "
          f"{load0[0]:.1f} before and {os.getloadavg()[0]:.1f} after, {args.rounds} rounds, {time.time() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
