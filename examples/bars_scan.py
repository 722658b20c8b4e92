"""Ticks -> 1-minute bars -> pattern: three rising closes, then a volume spike.

    python examples/bars_scan.py [--events 400000] [--symbols 20] [--spike 1.8] [--seed 7]

Bars come from ``colcep.windows.ohlc`` (Flink's tumbling event-time windows, one per symbol
and minute) and feed ``colcep.match`` directly: the bar table is keyed by ``name`` and timed
by ``window_start``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep import Pattern, SkipPastLastEvent, avg, col, last, match
from colcep.windows import Tumbling, ohlc


def make_ticks(events: int, symbols: int, seed: int) -> pa.Table:
    """Synthetic ticks (id, name, ts in ms, price, volume) in the spirit of shared/bench/gen_ticks.py,
    spread over hours (about 50 ms apart) so that one-minute bars have a few dozen ticks each,
    with bursts of activity that make volume spikes."""
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, symbols, size=events)
    ts = np.cumsum(rng.exponential(50.0, size=events)).astype(np.int64)
    order = np.argsort(sym, kind="stable")
    steps = rng.normal(0.0, 0.0008, size=events)
    c = np.cumsum(steps[order])
    starts = np.r_[0, np.flatnonzero(np.diff(sym[order])) + 1]
    ret = np.empty(events)
    ret[order] = c - np.repeat(c[starts] - steps[order][starts], np.diff(np.r_[starts, events]))
    price = np.round((20.0 + 180.0 * rng.random(symbols))[sym] * np.exp(ret), 4)
    minute = ts // 60_000
    burst = np.where(rng.random((minute.max() + 1, symbols)) < 0.03, 3.0, 1.0)[minute, sym]
    volume = np.round(rng.lognormal(np.log(300.0), 0.8, size=events) * burst)
    names = np.array([f"S{i:04d}" for i in range(symbols)], dtype=object)[sym]
    return pa.table({"id": np.arange(events, dtype=np.int64), "name": names, "ts": ts, "price": price,
                     "volume": volume})


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
    ap.add_argument("--spike", type=float, default=1.8)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()

    try:  # the project's generator, when present
        from colcep.ticks import make_ticks as project_ticks
        ticks = project_ticks(a.events, a.symbols, a.seed)
    except ImportError:
        ticks = make_ticks(a.events, a.symbols, a.seed)

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
