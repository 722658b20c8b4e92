#!/usr/bin/env python3
"""Flat-memory check: stream many tick batches through ONE colcep Matcher and record, after
every batch, the process RSS, the live partial matches, the shared-buffer nodes and the bytes
of numpy state the Matcher holds. Under a ``within`` window the state must follow the live
partial matches, not the length of the stream.

    python asv_bench/memory_stream.py --pattern P4 --events 100000000 --batch 1000000
    python asv_bench/memory_stream.py --pattern P1 --events 1000000 --every 5 --json out.json

The ticks continue one stream across batches (per-symbol random walks carried over, time
strictly continuing, about 2 ms apart, volume log-normal: the model of colcep.tools.ticks), made
batch by batch so 10^8 events never sit in memory at once.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from benchmarks.common import (MIB, PATTERNS, _n_matches, matcher_state_bytes, peak_rss_bytes,  # noqa: E402
                               reset_peak_rss, rss_bytes, warm_up)

import colcep  # noqa: E402


class TickStream:
    """Endless ticks in batches: (id, name, ts, price, volume) as colcep.tools.ticks.make_ticks makes them,
    with each symbol's random walk and the clock carried from one batch to the next."""

    def __init__(self, symbols: int = 100, seed: int = 7):
        self.rng = np.random.default_rng(seed)
        self.symbols = symbols
        self.names = pa.array([f"S{i:04d}" for i in range(symbols)], pa.string())
        self.start_price = 20.0 + 180.0 * self.rng.random(symbols)
        self.log_ret = np.zeros(symbols)
        self.clock = 0.0
        self.next_id = 0

    def batch(self, n: int) -> pa.Table:
        rng = self.rng
        sym = rng.integers(0, self.symbols, size=n)
        t = self.clock + np.cumsum(rng.exponential(2.0, size=n))
        self.clock = float(t[-1])
        steps = rng.normal(0.0, 0.0005, size=n)
        order = np.argsort(sym, kind="stable")
        s_sorted = sym[order]
        c = np.cumsum(steps[order])
        starts = np.r_[0, np.flatnonzero(np.diff(s_sorted)) + 1]
        lens = np.diff(np.r_[starts, n])
        base = np.repeat(c[starts] - steps[order][starts], lens)
        ret_sorted = c - base + self.log_ret[s_sorted]
        ret = np.empty(n)
        ret[order] = ret_sorted
        ends = starts + lens - 1
        self.log_ret[s_sorted[ends]] = ret_sorted[ends]
        price = np.round(self.start_price[sym] * np.exp(ret), 4)
        volume = np.round(rng.lognormal(np.log(300.0), 0.8, size=n))
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        return pa.table({"id": ids, "name": self.names.take(pa.array(sym)), "ts": t.astype(np.int64),
                         "price": price, "volume": volume})


def stream(pattern: str = "P4", events: int = 1_000_000, batch: int = 100_000, symbols: int = 100,
           seed: int = 7, every: int = 1, progress=None, tier: str = "generic") -> list[dict]:
    """Stream ``events`` ticks in batches of ``batch`` through one Matcher (kernel ``tier``) for
    benchmark pattern ``pattern``; one record per ``every`` batches (and the last)."""
    warm_up([pattern], tiers=(tier,))
    src = TickStream(symbols, seed)
    m = colcep.Matcher(PATTERNS[pattern], key="name", time="ts", columns=[], tier=tier)
    records, done, matches, i = [], 0, 0, 0
    t0 = time.perf_counter()
    base_rss = rss_bytes()
    reset_peak_rss()
    while done < events:
        n = min(batch, events - done)
        tbl = src.batch(n)
        matches += _n_matches(m.process(tbl))
        del tbl
        done += n
        i += 1
        if i % every == 0 or done >= events:
            rec = {"events": done, "seconds": time.perf_counter() - t0, "rss": rss_bytes(),
                   "peak_rss": peak_rss_bytes(), "base_rss": base_rss,
                   "live_pm": m.live_partial_matches, "buffer_nodes": m.buffer_nodes,
                   "state_bytes": matcher_state_bytes(m), "matches": matches}
            records.append(rec)
            reset_peak_rss()  # peak_rss: the highest RSS since the previous record (Linux)
            if progress:
                progress(rec)
    matches += _n_matches(m.close())
    records[-1]["matches"] = matches
    return records


def summarise(records: list[dict]) -> dict:
    """RSS growth from the first to the last quarter of the stream (after a 10 % warm-up), the
    RSS slope over the second half, the same for the peak RSS between records, and state bytes
    per live partial match at the peak."""
    rss = np.array([r["rss"] for r in records], float)
    peaks = np.array([r.get("peak_rss", r["rss"]) for r in records], float)
    ev = np.array([r["events"] for r in records], float)
    n = len(records)
    lo = n // 10
    q = max(1, (n - lo) // 4)
    first, last = rss[lo:lo + q], rss[n - q:]
    half = slice(n // 2, n)
    slope = float(np.polyfit(ev[half], rss[half], 1)[0]) * 1e6 if n - n // 2 >= 3 else 0.0
    live = np.array([r["live_pm"] for r in records], float)
    state = np.array([r["state_bytes"] for r in records], float)
    peak = int(np.argmax(live))
    return {
        "events": int(ev[-1]), "seconds": records[-1]["seconds"],
        "events_per_second": ev[-1] / max(records[-1]["seconds"], 1e-9),
        "matches": records[-1]["matches"],
        "rss_start_mib": float(first.mean()) / MIB, "rss_end_mib": float(last.mean()) / MIB,
        "rss_max_mib": float(rss.max()) / MIB, "rss_growth_mib": float(last.mean() - first.mean()) / MIB,
        "peak_rss_max_mib": float(peaks.max()) / MIB,
        "peak_rss_growth_mib": float(peaks[n - q:].mean() - peaks[lo:lo + q].mean()) / MIB,
        "rss_slope_bytes_per_million_events": slope,
        "max_live_pm": int(live.max()), "mean_live_pm": float(live.mean()),
        "max_buffer_nodes": int(max(r["buffer_nodes"] for r in records)),
        "max_state_mib": float(state.max()) / MIB,
        "bytes_per_live_pm": float(state[peak] / live[peak]) if live[peak] else float("nan"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pattern", default="P4", choices=sorted(PATTERNS))
    ap.add_argument("--events", type=float, default=1e6, help="stream length (e.g. 1e8)")
    ap.add_argument("--batch", type=float, default=1e5, help="events per batch")
    ap.add_argument("--symbols", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tier", default="generic", choices=["generic", "compiled"], help="the kernel tier")
    ap.add_argument("--every", type=int, default=0, help="print every N batches (default: ~20 lines)")
    ap.add_argument("--json", help="write the records and the summary here")
    a = ap.parse_args(argv)
    events, batch = int(a.events), int(a.batch)
    every = a.every or max(1, events // batch // 20)
    print(f"# {a.pattern}: {events:,} events in batches of {batch:,} over {a.symbols} symbols, one Matcher, "
          f"{a.tier} kernel")
    print("| events | seconds | RSS MiB | peak RSS MiB since last line | live partial matches | buffer nodes | "
          "state MiB | matches |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

    def show(r):
        print(f"| {r['events']:,} | {r['seconds']:.1f} | {r['rss'] / MIB:.1f} | {r['peak_rss'] / MIB:.1f} | {r['live_pm']:,} | "
              f"{r['buffer_nodes']:,} | {r['state_bytes'] / MIB:.2f} | {r['matches']:,} |", flush=True)

    records = stream(a.pattern, events, batch, a.symbols, a.seed, every, progress=show, tier=a.tier)
    s = summarise(records)
    print()
    print(f"RSS {s['rss_start_mib']:.1f} MiB (first quarter) -> {s['rss_end_mib']:.1f} MiB (last quarter), "
          f"growth {s['rss_growth_mib']:+.1f} MiB, max {s['rss_max_mib']:.1f} MiB; "
          f"slope over the second half {s['rss_slope_bytes_per_million_events'] / 1024:+.1f} KiB per 10^6 events")
    print(f"peak RSS between lines: max {s['peak_rss_max_mib']:.1f} MiB, growth first -> last quarter "
          f"{s['peak_rss_growth_mib']:+.1f} MiB")
    print(f"live partial matches: max {s['max_live_pm']:,}, mean {s['mean_live_pm']:,.0f}; "
          f"buffer nodes max {s['max_buffer_nodes']:,}; matcher state max {s['max_state_mib']:.2f} MiB, "
          f"{s['bytes_per_live_pm']:.0f} bytes per live partial match (at the peak)")
    print(f"{s['events']:,} events in {s['seconds']:.1f} s ({s['events_per_second'] / 1e6:.3f} M events/s), "
          f"{s['matches']:,} matches")
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "records": records, "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
