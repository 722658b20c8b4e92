"""Ticks -> 1-minute bars -> pattern: three rising closes, then a volume spike.

    python examples/bars_scan.py [--events 400000] [--symbols 20] [--stretch 50] [--spike 1.8]

Ticks come from ``colcep.tools.ticks.make_ticks`` (the benchmark generator: a busy feed, about 2 ms
apart), with time stretched ``--stretch`` times so that a few hundred ticks make hours of
minute bars. Bars come from ``colcep.windows.ohlc`` (Flink's tumbling event-time windows, one
per symbol and minute) and feed ``colcep.match`` directly: the bar table is keyed by ``name``
and timed by ``window_start``.
"""
from __future__ import annotations

import argparse
import time

import pyarrow.compute as pc

from colcep import Pattern, SkipPastLastEvent, avg, col, last, match
from colcep.tools.ticks import make_ticks
from colcep.windows import Tumbling, ohlc


def rising_then_spike(spike: float) -> Pattern:
    """Three consecutive bars each closing above the one before, then a bar whose volume is
    ``spike`` times the mean volume of those four bars."""
    return (Pattern.begin("base")
            .next("up").where(col("close") > last("close", of=["base", "up"])).times(3).consecutive()
            .next("spike").where(col("volume") > spike * avg("volume", of=["base", "up"]))
            .skip(SkipPastLastEvent()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--symbols", type=int, default=20)
    ap.add_argument("--stretch", type=int, default=50, help="multiply tick times by this (default 50: ~100 ms apart)")
    ap.add_argument("--spike", type=float, default=1.8)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()

    ticks = make_ticks(a.events, a.symbols, a.seed)
    ticks = ticks.set_column(ticks.schema.get_field_index("ts"), "ts", pc.multiply(ticks["ts"], a.stretch))

    t0 = time.perf_counter()
    bars = ohlc(ticks, Tumbling("1min"), key="name", time="ts", price="price", volume="volume")
    t1 = time.perf_counter()
    matches = match(bars, rising_then_spike(a.spike), key="name", time="window_start",
                    columns=["window_start", "close", "volume"])
    t2 = time.perf_counter()

    n_match = len(set(matches["match_id"].to_pylist()))
    print(f"{ticks.num_rows:,} ticks -> {bars.num_rows:,} one-minute bars over {a.symbols} symbols "
          f"in {t1 - t0:.3f} s (incl. first-call JIT)")
    print(f"{n_match} matches of 'three rising closes, then volume > {a.spike}x their mean' "
          f"in {t2 - t1:.3f} s")
    shown = matches.filter(pc.less(matches["match_id"], 3)).to_pandas()
    if len(shown):
        shown["window_start"] = shown["window_start"].astype("datetime64[ms]")
        print(shown.to_string(index=False))


if __name__ == "__main__":
    main()
