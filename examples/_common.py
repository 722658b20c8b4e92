"""Shared runner of the tick-scan examples: generate ticks, match, print a summary.

Each example defines its ``PATTERN`` and calls :func:`run`; run it with ``--help`` for the
options (``--events``, ``--symbols``, ``--seed``, ``--spark``, ``--show``).
"""
from __future__ import annotations

import argparse
import time
from typing import Sequence

import pyarrow as pa

import colcep
from colcep.tools.summary import format_matches, summarize
from colcep.tools.ticks import make_ticks


def run(pattern: colcep.Pattern, doc: str, columns: Sequence[str], argv: Sequence[str] | None = None, *,
        events: int = 200_000, symbols: int = 50) -> pa.Table:
    """Parse ``argv``, scan synthetic ticks for ``pattern`` and print what was found.
    Returns the matches (one row per matched event; ``row`` is the tick's ``id``)."""
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    ap.add_argument("--events", type=int, default=events, help=f"ticks to generate (default {events:,})")
    ap.add_argument("--symbols", type=int, default=symbols, help=f"symbols (default {symbols})")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--spark", action="store_true", help="run on local Spark instead of in this process")
    ap.add_argument("--show", type=int, default=5, help="matches to print (default 5)")
    a = ap.parse_args(argv)

    ticks = make_ticks(a.events, a.symbols, a.seed)  # id, name, ts (ms), price, volume
    t0 = time.perf_counter()
    if a.spark:
        from colcep.spark import local_session, match

        spark = local_session()
        df = spark.createDataFrame(ticks)
        out = match(df, pattern, key="name", time="ts", columns=list(columns), seq="id", time_unit="ms").toArrow()
        out = out.sort_by("match_id")
        engine = f"Spark {spark.sparkContext.master}"
    else:
        out = colcep.match(ticks, pattern, key="name", time="ts", columns=list(columns), time_unit="ms")
        engine = "in-process"
    secs = time.perf_counter() - t0
    s = summarize(out, "name", top=5)
    print(doc.strip().splitlines()[0])
    print(f"  {a.events:,} ticks over {a.symbols} symbols, {engine}: {s['matches']:,} matches "
          f"({s['matched_events']:,} events) in {secs:.2f} s, {a.events / secs:,.0f} ticks/s")
    if s["events_per_stage"]:
        print("  events per stage: " + ", ".join(f"{k} {v:,}" for k, v in s["events_per_stage"].items()))
    if s.get("top_keys"):
        print("  most matches: " + ", ".join(f"{k} {v:,}" for k, v in s["top_keys"].items()))
    if a.show:
        print(format_matches(out, "name", a.show))
    return out
