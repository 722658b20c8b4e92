"""Scan throughput of the four benchmark patterns (shared/bench/patterns.json), colcep next to
the hand-specialised yardstick (asv_bench/yardstick.py), over the events x symbols grid.

    asv run --python=same --bench bench_patterns
    COLCEP_BENCH_EVENTS=1000000 COLCEP_BENCH_SYMBOLS=100 asv run --python=same --bench bench_patterns

A scan is one Matcher over the whole table (``process`` + ``close``), materialising every
match (compact output: match_id, key, stage, row). The JIT is warmed in ``setup``.
"""
from .common import (GridScan, PATTERN_NAMES, PATTERNS, REF_EVENTS, REF_SYMBOLS, TARGETS, best_time,
                     load, make_data, scan, warm_up, yardstick_scan)


class Scan(GridScan):
    """Wall time of one scan: colcep and the yardstick on the same table."""

    number = 1
    repeat = (1, 3, 30.0)
    warmup_time = 0.0

    def time_colcep(self, cache, pattern, events, symbols):
        scan(self.pattern, self.table)

    def time_yardstick(self, cache, pattern, events, symbols):
        yardstick_scan(pattern, self.table)


class Throughput(GridScan):
    """Events per second (one scan after warm-up) and the number of matches, per grid point."""

    def track_events_per_second(self, cache, pattern, events, symbols):
        dt, _ = best_time(lambda: scan(self.pattern, self.table), repeat=1)
        return events / dt

    track_events_per_second.unit = "events/s"

    def track_yardstick_events_per_second(self, cache, pattern, events, symbols):
        dt, _ = best_time(lambda: yardstick_scan(pattern, self.table), repeat=3, budget=10.0)
        return events / dt

    track_yardstick_events_per_second.unit = "events/s"

    def track_matches(self, cache, pattern, events, symbols):
        return scan(self.pattern, self.table)

    track_matches.unit = "matches"


class Targets:
    """The issue's targets at 10^6 events over 100 symbols: colcep's events/s as a fraction of
    its target, and colcep / yardstick measured in the same process (target >= 0.4)."""

    params = [PATTERN_NAMES]
    param_names = ["pattern"]
    timeout = 3600
    rounds = 1
    setup_cache = staticmethod(make_data)

    def setup(self, cache, pattern):
        warm_up([pattern])
        self.table = load(cache, REF_EVENTS, REF_SYMBOLS)
        self.pattern = PATTERNS[pattern]

    def track_ratio_to_yardstick(self, cache, pattern):
        ys, _ = best_time(lambda: yardstick_scan(pattern, self.table), repeat=3, budget=10.0)
        cc, _ = best_time(lambda: scan(self.pattern, self.table), repeat=3, budget=30.0)
        return ys / cc

    track_ratio_to_yardstick.unit = "x yardstick"

    def track_fraction_of_target(self, cache, pattern):
        cc, _ = best_time(lambda: scan(self.pattern, self.table), repeat=3, budget=30.0)
        return self.table.num_rows / cc / TARGETS[pattern]

    track_fraction_of_target.unit = "x target"
