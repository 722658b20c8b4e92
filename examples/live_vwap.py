"""A one-hour VWAP per symbol, updated every minute of event time, corrected by late ticks.

    python examples/live_vwap.py [--events 400000] [--symbols 20] [--stretch 50] [--late 0.01] [--batch 500]

Ticks come from ``colcep.tools.ticks.make_ticks`` (time stretched ``--stretch`` times, so the feed spans
hours), a fraction ``--late`` of them arriving up to four minutes after their time. They stream
through ``WindowAggregator`` in batches of ``--batch`` rows, as a live feed would: Flink's
tumbling one-hour windows with a ``ContinuousEventTimeTrigger`` of one minute and five minutes of
allowed lateness. Every firing is a row (``firing``, ``kind``: early every minute, on time at the
hour, late for each late tick within the lateness); ticks later than that come back from
``pop_late()``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep import triggers as tr
from colcep.tools.ticks import make_ticks
from colcep.windows import Tumbling, WindowAggregator


def feed(events: int, symbols: int, stretch: int, late: float, seed: int) -> pa.Table:
    """Ticks in arrival order: time order, except ``late`` of them held back up to 4 minutes."""
    ticks = make_ticks(events, symbols, seed)
    ts = pc.multiply(ticks["ts"], stretch)
    ticks = ticks.set_column(ticks.schema.get_field_index("ts"), "ts", ts)
    ticks = ticks.append_column("pv", pc.multiply(ticks["price"], ticks["volume"].cast(pa.float64())))
    rng = np.random.default_rng(seed)
    arrive = ts.to_numpy() + np.where(rng.random(events) < late, rng.integers(0, 240_000, events), 0)
    return ticks.take(pa.array(np.argsort(arrive, kind="stable")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--symbols", type=int, default=20)
    ap.add_argument("--stretch", type=int, default=50, help="multiply tick times by this (default 50: ~100 ms apart)")
    ap.add_argument("--late", type=float, default=0.01, help="fraction of ticks arriving up to 4 min late")
    ap.add_argument("--batch", type=int, default=500, help="rows per batch of the live feed")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()

    ticks = feed(a.events, a.symbols, a.stretch, a.late, a.seed)
    agg = WindowAggregator(Tumbling("1h"), {"pv": ("pv", "sum"), "volume": ("volume", "sum"), "ticks": "count"},
                           key="name", trigger=tr.ContinuousEventTime("1min"), allowed_lateness="5min",
                           out_of_orderness="2s")
    t0 = time.perf_counter()
    out, dropped = [], 0
    for b in ticks.to_batches(max_chunksize=a.batch):
        out.append(agg.process(b))
        gone = agg.pop_late()
        dropped += 0 if gone is None else gone.num_rows
    out.append(agg.close())
    elapsed = time.perf_counter() - t0
    fired = pa.concat_tables(out)
    fired = fired.append_column("vwap", pc.divide(fired["pv"], fired["volume"].cast(pa.float64())))
    kinds = {k: int(pc.sum(pc.equal(fired["kind"], k)).as_py() or 0) for k in ("early", "on_time", "late")}
    print(f"{ticks.num_rows:,} ticks in batches of {a.batch:,} -> {fired.num_rows:,} VWAP updates over "
          f"{a.symbols} symbols in {elapsed:.3f} s (incl. first-call JIT): {kinds['early']:,} early, "
          f"{kinds['on_time']:,} on time, {kinds['late']:,} late; {dropped:,} ticks later than the lateness")
    first = fired.filter(pc.equal(fired["name"], fired["name"][0])).to_pandas()
    first = first[first["window_start"] == first["window_start"].iloc[0]]
    first["window_start"] = first["window_start"].astype("datetime64[ms]")
    shown = first[(first["firing"] % 10 == 0) | (first["kind"] != "early")]
    print(shown[["name", "window_start", "firing", "kind", "ticks", "vwap"]].to_string(index=False))


if __name__ == "__main__":
    main()
