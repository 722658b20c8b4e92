"""Scan throughput with the keys spread over threads (``threads=``): the four benchmark patterns
over 10^6 ticks (quick: 10^4) at 100 and 5,000 symbols, with 1 and 2 threads.

    asv run --python=same --bench bench_threads

``track_speedup`` is the one-thread time over the two-thread time, measured in the same
process (target >= 1.8 on 2 free cores; the machine must not be busy with anything else).
"""
from .common import PATTERN_NAMES, PATTERNS, QUICK_EVENTS, QUICK, REF_EVENTS, best_time, load, make_data, warm_up

import colcep

EVENTS = QUICK_EVENTS if QUICK else REF_EVENTS
SYMBOLS = [100, 5000]


def threaded_scan(pattern, table, threads: int) -> int:
    """One Matcher over the whole table on ``threads`` threads (compact output); the output rows."""
    m = colcep.Matcher(pattern, key="name", time="ts", columns=[], threads=threads)
    return m.process(table).num_rows + m.close().num_rows


class Threads:
    params = (PATTERN_NAMES, SYMBOLS, [1, 2])
    param_names = ["pattern", "symbols", "threads"]
    timeout = 1800
    number = 1
    repeat = (1, 3, 30.0)
    rounds = 1
    warmup_time = 0.0
    setup_cache = staticmethod(make_data)

    def setup(self, cache, pattern, symbols, threads):
        warm_up([pattern])
        self.table = load(cache, EVENTS, symbols)
        self.pattern = PATTERNS[pattern]
        threaded_scan(self.pattern, self.table.slice(0, 70_000), threads)  # the pool's threads started

    def time_scan(self, cache, pattern, symbols, threads):
        threaded_scan(self.pattern, self.table, threads)

    def track_events_per_second(self, cache, pattern, symbols, threads):
        dt, _ = best_time(lambda: threaded_scan(self.pattern, self.table, threads), repeat=3, budget=30.0)
        return self.table.num_rows / dt

    track_events_per_second.unit = "events/s"


class ThreadSpeedup:
    params = (PATTERN_NAMES, SYMBOLS)
    param_names = ["pattern", "symbols"]
    timeout = 1800
    rounds = 1
    setup_cache = staticmethod(make_data)

    def setup(self, cache, pattern, symbols):
        warm_up([pattern])
        self.table = load(cache, EVENTS, symbols)
        self.pattern = PATTERNS[pattern]

    def track_speedup(self, cache, pattern, symbols):
        one, a = best_time(lambda: threaded_scan(self.pattern, self.table, 1), repeat=3, budget=30.0)
        two, b = best_time(lambda: threaded_scan(self.pattern, self.table, 2), repeat=3, budget=30.0)
        assert a == b
        return one / two

    track_speedup.unit = "x one thread"
