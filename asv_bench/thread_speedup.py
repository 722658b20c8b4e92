"""Scan time with 1 and 2 threads: the benchmark patterns P1-P4 over 10^6 ticks at 100 and
5,000 symbols (best of 3 each; docs/benchmarks.md, "Threads"). Prints a markdown table.

    python asv_bench/thread_speedup.py [events] [threads...]
"""
import os
import sys
import time

import pyarrow as pa

import colcep
from colcep.examples import BENCHMARK_PATTERNS
from colcep.ticks import make_ticks


def scan(pattern, table, threads):
    m = colcep.Matcher(pattern, key="name", time="ts", columns=[], threads=threads)
    return pa.concat_tables([m.process(table), m.close()])


def best(fn, repeat=3):
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main():
    events = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10**6
    counts = [int(x) for x in sys.argv[2:]] or [1, 2]
    print(f"load average before: {os.getloadavg()}")
    print("| pattern | symbols | " + " | ".join(f"{t} thread{'s' * (t > 1)}" for t in counts) + " | speedup |")
    print("| --- | ---: | " + " | ".join("---:" for _ in counts) + " | ---: |")
    for symbols in (100, 5000):
        table = make_ticks(events, symbols, 7)
        for name, pattern in BENCHMARK_PATTERNS.items():
            ref = scan(pattern, table.slice(0, 50_000), 1)
            assert scan(pattern, table.slice(0, 50_000), counts[-1]).equals(ref)
            times = [best(lambda: scan(pattern, table, t)) for t in counts]
            cells = " | ".join(f"{dt * 1e3:.0f} ms ({events / dt / 1e6:.1f} M/s)" for dt in times)
            print(f"| {name} | {symbols:,} | {cells} | {times[0] / times[-1]:.2f}x |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
