"""The state between calls (issue 22 parts 2 and 3).

- ``BatchSize``: the cost of a ``process()`` call against the state it carries. P5's shape (a
  big-volume tick, then the first tick above 1.05 x its price, within 1 h) over 10^6 ticks of 100
  symbols: the first half in one call builds >= 10^5 live partial matches (1.2 x 10^5 -> 2.2 x
  10^5 over the second half), the second half is timed in batches of 1,000 and of 10^5 rows.
  ``track_ratio_small_to_large``: the 1,000-row time over the 10^5-row time (target: <= 1.3).
- ``StateBound``: runaway patterns under ``max_state_bytes`` = 1 GiB in a child process whose
  address space is limited to its size before plus 1.5 GiB (``asv_bench/memory_bound.py``): the
  outcome (1: ``CapacityError``, 0: anything else: ``MemoryError``, a kill) and the peaks.
"""
import functools
import time

import colcep as cc
from colcep import col, last

from .common import QUICK, load, make_data, warm_up

EVENTS = 10_000 if QUICK else 1_000_000
SYMBOLS = 100


def p5() -> cc.Pattern:
    return (cc.Pattern.begin("a").where(col("volume") > 500.0)
            .followed_by("b").where(col("price") > last("price", of="a") * 1.05)
            .within("1h"))


def second_half(table, batch: int, columns=None) -> tuple[float, int]:
    """CPU seconds of feeding the second half of ``table`` in ``batch``-row calls to a Matcher
    that took the first half in one; and its live partial matches at the half."""
    m = cc.Matcher(p5(), key="name", time="ts", columns=columns)
    half = table.num_rows // 2
    m.process(table.slice(0, half))
    live = m.live_partial_matches
    t0 = time.process_time()
    for lo in range(half, table.num_rows, batch):
        m.process(table.slice(lo, batch))
    return time.process_time() - t0, live


class BatchSize:
    params = ([1_000, 100_000], ["compact", "all"])
    param_names = ["batch_rows", "columns"]
    timeout = 1800
    number = 1
    repeat = (1, 3, 60.0)
    rounds = 1
    warmup_time = 0.0
    setup_cache = staticmethod(make_data)

    def setup(self, cache, batch_rows, columns):
        warm_up([])
        self.table = load(cache, EVENTS, SYMBOLS)
        self.columns = [] if columns == "compact" else None
        second_half(self.table.slice(0, 2_000), 500, self.columns)  # this pattern's kernels

    def time_second_half(self, cache, batch_rows, columns):
        second_half(self.table, batch_rows, self.columns)

    def track_cpu_seconds(self, cache, batch_rows, columns):
        return second_half(self.table, batch_rows, self.columns)[0]

    track_cpu_seconds.unit = "s"

    def track_live_partial_matches_at_half(self, cache, batch_rows, columns):
        return second_half(self.table, batch_rows, self.columns)[1]

    track_live_partial_matches_at_half.unit = "partial matches"

    def track_ratio_small_to_large(self, cache, batch_rows, columns):
        if batch_rows != 1_000:
            return 1.0
        return second_half(self.table, 1_000, self.columns)[0] / second_half(self.table, 100_000, self.columns)[0]

    track_ratio_small_to_large.unit = "x"


@functools.lru_cache(maxsize=None)
def _bound_run(case: str, quick: bool) -> dict:
    """One child run of ``case`` per process (the track_ methods read the same run); the quick
    smoke run (CI) takes a 64 MiB bound, 96 MiB of headroom and the small inputs of
    tests/test_memory_bound.py."""
    import memory_bound  # asv_bench/memory_bound.py (common put asv_bench on sys.path)

    kw = dict(bound=64 << 20, headroom=96 << 20, rows=memory_bound.SMALL_ROWS[case]) if quick else {}
    return memory_bound.run_case(case, **kw)


class StateBound:
    params = (["merged_kleene", "combinations", "skip_till_any", "p5", "matches"],)
    param_names = ["case"]
    timeout = 3600
    number = 1
    repeat = 1
    rounds = 1

    def _get(self, case):
        return _bound_run(case, QUICK)

    def track_capacity_error(self, case):
        return 1.0 if self._get(case)["outcome"] == "CapacityError" else 0.0

    track_capacity_error.unit = "1 = CapacityError"

    def track_peak_address_space_mib(self, case):
        return self._get(case).get("peak_as_mib", float("nan"))

    track_peak_address_space_mib.unit = "MiB"

    def track_peak_rss_mib(self, case):
        return self._get(case).get("peak_rss_mib", float("nan"))

    track_peak_rss_mib.unit = "MiB"

    def track_max_state_mib(self, case):
        return self._get(case).get("max_state_mib", float("nan"))

    track_max_state_mib.unit = "MiB"
