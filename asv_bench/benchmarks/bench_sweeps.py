"""The SASE+ paper's sweeps (its Figures 5-7): throughput against the window, and so against the
live partial matches the window keeps, for P3, P4 and P5 (10^6 events over 100 symbols; quick:
10^4), with the limit kernels (asv_bench/limit.py) on the same window beside colcep.

    asv run --python=same --bench bench_sweeps
    python asv_bench/sweeps_table.py          # the table of docs/benchmarks.md, without asv

The generated ticks span about 33 minutes (5 ticks a second per symbol at 100 symbols), so a
window of 1 h or 1 day keeps every partial match to the end. P4 (skip till any match) makes
every rising triple in the window: its matches grow with the cube of the window, ~10^7 at 10 s,
so its sweep stops at 10 s.
"""
from .common import LIMIT_PATTERNS, QUICK, QUICK_EVENTS, REF_EVENTS, best_time, load, make_data, warm_up

import limit  # asv_bench/limit.py (common put asv_bench on sys.path)
import colcep

EVENTS = QUICK_EVENTS if QUICK else REF_EVENTS
SYMBOLS = 100
#: window (ms) per pattern: 1 s to 1 day, P4 to 10 s
WINDOWS = {"P3": [1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000],
           "P4": [500, 1_000, 2_000, 5_000, 10_000],
           "P5": [1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000]}
POINTS = [f"{p}@{w}" for p, ws in WINDOWS.items() for w in ws]
BATCH = 10_000  # the live partial matches are sampled between batches of this many rows


def sweep_pattern(point: str):
    """(name, the pattern with that window, the window in ms) of a sweep point ``"P5@60000"``."""
    name, w = point.split("@")
    p = LIMIT_PATTERNS[name]
    return name, p.within(int(w)), int(w)


def run(pattern, table) -> tuple[int, int]:
    """(matches, the most live partial matches between batches of ``BATCH`` rows) of one scan."""
    m = colcep.Matcher(pattern, key="name", time="ts", columns=[])
    n, live = 0, 0
    for b in table.to_batches(max_chunksize=BATCH):
        n += _count(m.process(b))
        live = max(live, m.live_partial_matches)
    return n + _count(m.close()), live


def _count(out) -> int:
    return len(set(out.column("match_id").to_pylist())) if out.num_rows else 0


class Sweeps:
    params = (POINTS,)
    param_names = ["pattern@window_ms"]
    timeout = 3600
    number = 1
    repeat = (1, 3, 60.0)
    rounds = 1
    warmup_time = 0.0
    setup_cache = staticmethod(make_data)

    def setup(self, cache, point):
        self.name, self.pattern, self.window = sweep_pattern(point)
        warm_up([self.name])
        self.table = load(cache, EVENTS, SYMBOLS)

    def time_scan(self, cache, point):
        colcep.match(self.table, self.pattern, key="name", time="ts", columns=[], threads=1)

    def track_events_per_second(self, cache, point):
        dt, _ = best_time(lambda: colcep.match(self.table, self.pattern, key="name", time="ts", columns=[],
                                               threads=1), repeat=3, budget=60.0)
        return self.table.num_rows / dt

    track_events_per_second.unit = "events/s"

    def track_ratio_to_limit(self, cache, point):
        """colcep's rate over the limit kernels' on the same window (same matches), best of 3."""
        limit.warm_up()
        lim, n_lim = limit.best(self.name, self.table, repeat=3, within=self.window)
        cc, out = best_time(lambda: colcep.match(self.table, self.pattern, key="name", time="ts", columns=[],
                                                 threads=1), repeat=3, budget=60.0)
        assert _count(out) == n_lim, (point, _count(out), n_lim)
        return lim / cc

    track_ratio_to_limit.unit = "x limit"

    def track_live_partial_matches(self, cache, point):
        return run(self.pattern, self.table)[1]

    track_live_partial_matches.unit = "partial matches"
