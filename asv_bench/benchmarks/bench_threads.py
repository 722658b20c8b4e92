"""Scan throughput with the keys spread over threads (``threads=``): the four benchmark patterns
over 10^6 ticks (quick: 10^4) at 100 and 5,000 symbols, with 1 and 2 threads, on both kernel
tiers (the quick smoke run interprets the compiled tier's generated step, as in bench_tiers).

    asv run --python=same --bench bench_threads

``track_speedup`` is the one-thread time over the two-thread time, measured in the same
process (target >= 1.8 on 2 free cores; the machine must not be busy with anything else).
"""
from .common import (PATTERN_NAMES, PATTERNS, QUICK_EVENTS, QUICK, REF_EVENTS, best_time, enter_tier, leave_tier,
                     make_data, scan, tier_table, warm_up)


EVENTS = QUICK_EVENTS if QUICK else REF_EVENTS
SYMBOLS = [100, 5000]
TIERS = ["generic", "compiled"]


class _Setup:
    def setup(self, cache, pattern, symbols, tier, *threads):
        self._jit = enter_tier()
        warm_up([pattern], tiers=(tier,))
        self.table = tier_table(cache, EVENTS, symbols)
        self.pattern = PATTERNS[pattern]
        scan(self.pattern, self.table.slice(0, 70_000), tier, max(threads or (2,)))  # the pool's threads started

    def teardown(self, cache, pattern, symbols, tier, *threads):
        leave_tier(self._jit)


class Threads(_Setup):
    params = (PATTERN_NAMES, SYMBOLS, TIERS, [1, 2])
    param_names = ["pattern", "symbols", "tier", "threads"]
    timeout = 1800
    number = 1
    repeat = (1, 3, 30.0)
    rounds = 1
    warmup_time = 0.0
    setup_cache = staticmethod(make_data)

    def time_scan(self, cache, pattern, symbols, tier, threads):
        scan(self.pattern, self.table, tier, threads)

    def track_events_per_second(self, cache, pattern, symbols, tier, threads):
        dt, _ = best_time(lambda: scan(self.pattern, self.table, tier, threads), repeat=3, budget=30.0)
        return self.table.num_rows / dt

    track_events_per_second.unit = "events/s"


class ThreadSpeedup(_Setup):
    params = (PATTERN_NAMES, SYMBOLS, TIERS)
    param_names = ["pattern", "symbols", "tier"]
    timeout = 1800
    rounds = 1
    setup_cache = staticmethod(make_data)

    def track_speedup(self, cache, pattern, symbols, tier):
        one, a = best_time(lambda: scan(self.pattern, self.table, tier, 1), repeat=3, budget=30.0)
        two, b = best_time(lambda: scan(self.pattern, self.table, tier, 2), repeat=3, budget=30.0)
        assert a == b
        return one / two

    track_speedup.unit = "x one thread"
