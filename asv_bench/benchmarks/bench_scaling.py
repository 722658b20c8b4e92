"""How the cost per event grows with the number of live partial matches.

Skip till any match keeps a partial match alive for every start event inside the window, so
growing the window grows the live partial matches a new event must visit:

- ``RarePairs``: a(volume > 600) followedByAny b(price > 1.05 x a.price) within W. The live
  partial matches grow linearly with W and almost none complete, so the cost is the NFA step
  over live runs alone. ``track_ns_per_run_step`` divides the time per event by the mean live
  partial matches of one key: flat means cost linear in live partial matches.
- ``Triples``: P4's shape (rising triples) within W: live partial matches and matches both grow
  superlinearly; the cost includes materialising the matches.
- ``KleeneCombinations``: a Kleene plus under skip till any (``allow_combinations``): without
  merging a start's runs double with every matching tick (2^k); with merging of equivalent runs
  (SASE+ 4.2.2) the live partial matches grow linearly with W, like ``RarePairs``.

``track_state_bytes_per_live_pm``: the bytes of numpy arrays the Matcher holds (allocated
capacity: runs, held matches, shared buffer) at the batch with the most live partial matches,
divided by that number.

The table is fed in 20 batches to one Matcher; live partial matches are sampled after each.
"""
from .common import QUICK, any_triple, best_time, kleene_combinations, load, make_data, rare_pair, stream_scan, warm_up

EVENTS = 10_000 if QUICK else 100_000
SYMBOLS = 100


class RarePairs:
    params = [[1, 4] if QUICK else [1, 4, 16, 64]]
    param_names = ["window_s"]
    timeout = 1800
    number = 1
    repeat = (1, 3, 30.0)
    rounds = 1
    warmup_time = 0.0
    setup_cache = staticmethod(make_data)
    make = staticmethod(rare_pair)

    def setup(self, cache, window_s):
        warm_up([])
        self.table = load(cache, EVENTS, SYMBOLS)
        self.pattern = self.make(int(window_s * 1000))
        stream_scan(self.make(1000), self.table.slice(0, 2000))  # compile this pattern's kernels

    def time_scan(self, cache, window_s):
        stream_scan(self.pattern, self.table)

    def peakmem_scan(self, cache, window_s):
        stream_scan(self.pattern, self.table)

    def track_mean_live_partial_matches(self, cache, window_s):
        return stream_scan(self.pattern, self.table)[1]

    track_mean_live_partial_matches.unit = "partial matches"

    def track_matches(self, cache, window_s):
        return stream_scan(self.pattern, self.table)[0]

    track_matches.unit = "matches"

    def track_ns_per_event(self, cache, window_s):
        dt, _ = best_time(lambda: stream_scan(self.pattern, self.table), repeat=1)
        return dt / self.table.num_rows * 1e9

    track_ns_per_event.unit = "ns"

    def track_ns_per_run_step(self, cache, window_s):
        dt, (_, live, _, _) = best_time(lambda: stream_scan(self.pattern, self.table), repeat=1)
        per_key = max(live / SYMBOLS, 1e-9)
        return dt / self.table.num_rows / per_key * 1e9

    track_ns_per_run_step.unit = "ns"

    def track_state_bytes_per_live_pm(self, cache, window_s):
        _, _, peak_live, state = stream_scan(self.pattern, self.table)
        return state / max(peak_live, 1)

    track_state_bytes_per_live_pm.unit = "bytes"


class Triples(RarePairs):
    params = [[0.5, 1] if QUICK else [0.5, 1, 2, 4]]
    make = staticmethod(any_triple)


class KleeneCombinations(RarePairs):
    make = staticmethod(kleene_combinations)
