"""Memory: peak RSS of the benchmark scans, and a stream through one Matcher whose memory must
track the live partial matches, not the stream length.

asv's ``peakmem_`` is the peak RSS of the whole benchmark process, so it includes the input
table read in ``setup``; ``track_peak_mib_above_input`` resets the peak (Linux) just before the
scan and reports only what the scan adds. The stream benchmarks run ``asv_bench/memory_stream.py``
in-process; its command line runs the 10^8-event stream by hand (docs/benchmarks.md).
"""
from .common import (MIB, QUICK, GridScan, enter_tier, leave_tier, peak_above, scan,
                     warm_up, yardstick_scan)

STREAM_EVENTS = [20_000] if QUICK else [10**6, 10**7]
STREAM_PATTERNS = ["P1", "P4"]


class ScanMemory(GridScan):
    """Peak memory of the scans of bench_patterns.Scan."""

    def peakmem_colcep(self, cache, pattern, events, symbols):
        scan(self.pattern, self.table)

    def peakmem_yardstick(self, cache, pattern, events, symbols):
        yardstick_scan(pattern, self.table)

    def track_peak_mib_above_input(self, cache, pattern, events, symbols):
        peak, _ = peak_above(lambda: scan(self.pattern, self.table))
        return peak / MIB

    track_peak_mib_above_input.unit = "MiB"


class StreamMemory:
    """Many batches through one Matcher (asv_bench/memory_stream.py) on either kernel tier: RSS
    growth between the first and the last quarter of the stream (flat: about 0), and bytes of
    matcher state per live partial match (the tiers share the state layout). The quick smoke run
    interprets the compiled tier's generated step (as in bench_tiers)."""

    params = (STREAM_PATTERNS, STREAM_EVENTS, ["generic", "compiled"])
    param_names = ["pattern", "events", "tier"]
    timeout = 3600
    rounds = 1
    repeat = 1

    def setup(self, pattern, events, tier):
        import memory_stream  # asv_bench/memory_stream.py (common put asv_bench on sys.path)

        self._jit = enter_tier()
        warm_up([pattern], tiers=(tier,))
        self._stream = memory_stream
        self._summary = None

    def teardown(self, pattern, events, tier):
        leave_tier(self._jit)

    def _run(self, pattern, events, tier):
        if self._summary is None:
            batch = max(1_000, events // 50)
            records = self._stream.stream(pattern, events=events, batch=batch, symbols=100, tier=tier)
            self._summary = self._stream.summarise(records)
        return self._summary

    def track_rss_growth_mib(self, pattern, events, tier):
        return self._run(pattern, events, tier)["rss_growth_mib"]

    track_rss_growth_mib.unit = "MiB"

    def track_bytes_per_live_partial_match(self, pattern, events, tier):
        return self._run(pattern, events, tier)["bytes_per_live_pm"]

    track_bytes_per_live_partial_match.unit = "bytes"

    def track_max_live_partial_matches(self, pattern, events, tier):
        return self._run(pattern, events, tier)["max_live_pm"]

    track_max_live_partial_matches.unit = "partial matches"
