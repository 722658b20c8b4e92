"""Kernel tiers (``tier=``, colcep.engine.tiers): the generic kernel and the compiled step
(colcep.engine.stepgen) on the five benchmark patterns (P1-P5) at 10^6 events (quick: 10^4) over
100 and 5,000 symbols, against the limit kernels (asv_bench/limit.py: shared/bench/limit/kernels.py,
issue 11's yardstick).

    asv run --python=same --bench bench_tiers

``setup`` compiles the pattern's step (or loads it from the disk cache: ~10-20 s of CPU once
per pattern shape and machine; patterns that differ only in constants share it).
``track_ratio_to_limit`` times both in the same process (targets: compiled >= 0.7, generic >= 0.4).
The quick smoke run (CI) interprets the generated steps (``COLCEP_STEP_JIT=0``) instead of
compiling them: it checks the benchmark code, and its figures mean nothing.
"""
from .common import (LIMIT_PATTERNS, MIB, QUICK, QUICK_EVENTS, REF_EVENTS, best_time, enter_tier,
                     leave_tier, make_data, peak_above, scan, tier_table, warm_up)

import limit  # asv_bench/limit.py (common put asv_bench on sys.path)

EVENTS = QUICK_EVENTS if QUICK else REF_EVENTS
SYMBOLS = [100, 5000]
TIERS = ["generic", "compiled"]


class Tiers:
    params = (list(LIMIT_PATTERNS), SYMBOLS, TIERS)
    param_names = ["pattern", "symbols", "tier"]
    timeout = 3600
    number = 1
    repeat = (1, 3, 30.0)
    rounds = 1
    warmup_time = 0.0
    setup_cache = staticmethod(make_data)

    def setup(self, cache, pattern, symbols, tier):
        self._jit = enter_tier()
        warm_up([pattern], tiers=(tier,))
        self.table = tier_table(cache, EVENTS, symbols)
        self.pattern = LIMIT_PATTERNS[pattern]

    def teardown(self, cache, pattern, symbols, tier):
        leave_tier(self._jit)

    def time_scan(self, cache, pattern, symbols, tier):
        scan(self.pattern, self.table, tier=tier)

    def peakmem_scan(self, cache, pattern, symbols, tier):
        scan(self.pattern, self.table, tier=tier)

    def track_peak_mib_above_input(self, cache, pattern, symbols, tier):
        peak, _ = peak_above(lambda: scan(self.pattern, self.table, tier=tier))
        return peak / MIB

    track_peak_mib_above_input.unit = "MiB"

    def track_events_per_second(self, cache, pattern, symbols, tier):
        dt, _ = best_time(lambda: scan(self.pattern, self.table, tier=tier), repeat=3, budget=30.0)
        return self.table.num_rows / dt

    track_events_per_second.unit = "events/s"

    def track_ratio_to_limit(self, cache, pattern, symbols, tier):
        """colcep's rate over the limit kernels' (the faster form), best of 3 each."""
        limit.warm_up()
        lim, n_lim = limit.best(pattern, self.table, repeat=3)
        cc, n_cc = best_time(lambda: scan(self.pattern, self.table, tier=tier), repeat=3, budget=30.0)
        assert n_lim == n_cc, (pattern, n_lim, n_cc)
        return lim / cc

    track_ratio_to_limit.unit = "x limit"
