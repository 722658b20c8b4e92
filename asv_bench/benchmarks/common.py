"""Shared pieces of the colcep benchmarks: sizes, patterns, tick data, scans, memory probes.

Sizes come from the environment so one suite serves CI, a laptop and the big hand runs:

- ``COLCEP_BENCH_QUICK=1``: ~10^4 events, every benchmark runs in seconds (the CI smoke test,
  ``tests/test_benchmarks.py``);
- ``COLCEP_BENCH_EVENTS=100000,1000000`` / ``COLCEP_BENCH_SYMBOLS=100``: a subset of the grid
  (default 10^5, 10^6, 10^7 events over 100 and 5,000 symbols).

The tick data is made once per ``asv run`` by ``setup_cache`` (``make_data``) with
``colcep.tools.ticks.make_ticks`` (the algorithm of ``shared/bench/gen_ticks.py``, seed 7) and kept as
Parquet files in asv's cache directory; each benchmark's ``setup`` reads the one it needs.
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import colcep
from colcep.engine import codegen
from colcep.tools.examples import BENCHMARK_PATTERNS
from colcep.engine.program import CompiledPattern
from colcep.expr import col, first, last
from colcep.pattern import Pattern
from colcep.tools.ticks import make_ticks

ASV_BENCH = Path(__file__).resolve().parents[1]
if str(ASV_BENCH) not in sys.path:
    sys.path.insert(0, str(ASV_BENCH))
import yardstick  # noqa: E402  (asv_bench/yardstick.py: the hand-specialised loops)


def _ints(name: str, default: list[int]) -> list[int]:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    return [int(float(x)) for x in raw.split(",") if x.strip()]


QUICK = os.environ.get("COLCEP_BENCH_QUICK", "") not in ("", "0")
SEED = 7
QUICK_EVENTS = 10_000

#: the scan grid: events x symbols
EVENTS = _ints("COLCEP_BENCH_EVENTS", [QUICK_EVENTS] if QUICK else [10**5, 10**6, 10**7])
SYMBOLS = _ints("COLCEP_BENCH_SYMBOLS", [100, 5000])
#: the size of the single-point benchmarks (ratio to the yardstick, targets): 10^6 x 100
REF_EVENTS = QUICK_EVENTS if QUICK else _ints("COLCEP_BENCH_REF_EVENTS", [10**6])[0]
REF_SYMBOLS = 100

#: the benchmark patterns of shared/bench/patterns.json, as translated in colcep.tools.examples: P1-P4
#: (the grid, the yardstick loops, the targets) and with P5 (many live partial matches) the tiers
#: against the limit kernels and the sweeps
PATTERNS: dict[str, Pattern] = {k: p for k, p in BENCHMARK_PATTERNS.items() if k in yardstick.KERNELS}
PATTERN_NAMES = list(PATTERNS)
LIMIT_PATTERNS: dict[str, Pattern] = dict(BENCHMARK_PATTERNS)

#: the issue's targets (one core, after JIT warm-up, 10^6 events over 100 symbols), events/s
TARGETS = {"P1": 50e6, "P2": 15e6, "P3": 10e6, "P4": 3e6}
RATIO_TARGET = 0.4

MIB = 1 << 20


# ----------------------------------------------------------------------------- data
def data_file(events: int, symbols: int) -> str:
    return f"ticks_{events}_{symbols}_{SEED}.parquet"


def make_data() -> dict:
    """setup_cache: write every (events, symbols) tick set of the grid (and the reference size)
    into asv's cache directory; returns {(events, symbols): path}."""
    sizes = {(e, s) for e in EVENTS for s in SYMBOLS} | {(REF_EVENTS, REF_SYMBOLS)}
    out = {}
    for events, symbols in sorted(sizes):
        path = os.path.abspath(data_file(events, symbols))
        if not os.path.exists(path):
            pq.write_table(make_ticks(events, symbols, SEED), path + ".tmp", row_group_size=1 << 20)
            os.replace(path + ".tmp", path)
        out[(events, symbols)] = path
    return out


make_data.timeout = 1800  # 2 x 10^7 events are generated in about a minute


def load(cache: dict, events: int, symbols: int) -> pa.Table:
    """The tick table for one grid point (from the setup_cache files, or made on the spot)."""
    path = cache.get((events, symbols)) if cache else None
    if path and os.path.exists(path):
        return pq.read_table(path)
    return make_ticks(events, symbols, SEED)


# ----------------------------------------------------------------------------- scans
def scan(pattern: Pattern, table: pa.Table, tier: str = "generic", threads: int = 1) -> int:
    """Run ``pattern`` over ``table`` with one Matcher (process + close) on kernel ``tier`` and
    ``threads`` threads, materialising every match as colcep's compact output (match_id, key,
    stage, row); returns the number of matches."""
    m = colcep.Matcher(pattern, key="name", time="ts", columns=[], tier=tier, threads=threads)
    a = m.process(table)
    b = m.close()
    return _n_matches(a) + _n_matches(b)


def _n_matches(out: pa.Table) -> int:
    if out.num_rows == 0:
        return 0
    ids = out.column("match_id")
    return int(ids[-1].as_py()) - int(ids[0].as_py()) + 1  # ids are consecutive per Matcher


def yardstick_scan(name: str, table: pa.Table) -> int:
    return int(yardstick.run(name, table).shape[0])


_WARM = set()


def warm_up(names=None, tiers=("generic",)) -> None:
    """Compile / load from the disk cache every kernel a scan uses (colcep's ``tiers`` and the
    yardstick), so timings are after JIT warm-up."""
    names = PATTERN_NAMES if names is None else list(names)
    todo = [(n, t) for n in names for t in tiers if (n, t) not in _WARM]
    if not todo:
        return
    tiny = make_ticks(500, 5, SEED)
    for n, t in todo:
        scan(LIMIT_PATTERNS[n], tiny, tier=t)
        _WARM.add((n, t))
    yardstick.warm_up()


def enter_tier() -> bool:
    """Call in ``setup`` of a benchmark with a ``tier`` parameter: in the quick smoke run (CI) the
    compiled tier interprets its generated step (``COLCEP_STEP_JIT=0``) instead of compiling one
    per pattern shape (~10-20 s each), so its figures there mean nothing. Returns what
    ``leave_tier`` restores."""
    jit = codegen.JIT
    if QUICK:
        codegen.JIT = False
    return jit


def leave_tier(jit: bool) -> None:
    codegen.JIT = jit


def tier_table(cache: dict, events: int, symbols: int) -> pa.Table:
    """``load`` for the benchmarks with a ``tier`` parameter: in the quick smoke run only its
    first 2,000 rows (the interpreted generated step takes ~0.1 ms an event)."""
    table = load(cache, events, symbols)
    return table.slice(0, 2_000) if QUICK else table


def best_time(fn, repeat: int = 3, budget: float = 60.0) -> tuple[float, object]:
    """Best wall time of up to ``repeat`` calls (fewer once ``budget`` seconds are spent)."""
    best, result, spent = float("inf"), None, 0.0
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
        if spent > budget:
            break
    return best, result


# ----------------------------------------------------------------------------- scaling patterns
def rare_pair(window_ms: int) -> Pattern:
    """Skip-till-any pairs that almost never complete: every tick with volume > 600 opens a
    partial match that lives for the whole window (a 5 % rise within it is > 5 sigma), so the
    live partial matches grow linearly with the window while matches stay near zero."""
    return (Pattern.begin("a").where(col("volume") > 600.0)
            .followed_by_any("b").where(col("price") > last("price", of="a") * 1.05)
            .within(window_ms))


def any_triple(window_ms: int) -> Pattern:
    """P4's shape (rising triples, skip till any match) with another window."""
    return (Pattern.begin("a").where(col("volume") > 600.0)
            .followed_by_any("b").where(col("price") > last("price", of="a"))
            .followed_by_any("c").where(col("price") > last("price", of="b"))
            .within(window_ms))


def kleene_combinations(window_ms: int) -> Pattern:
    """A Kleene plus under skip till any (``allow_combinations``) that almost never completes:
    after a tick with volume > 600, any combination of ticks above its price, then a 5 % drop
    below it. Unmerged, a start's branches double with every such tick (2^k runs); merged
    (SASE+ 4.2.2: the later conditions read only ``a``) a start keeps one run per state."""
    return (Pattern.begin("a").where(col("volume") > 600.0)
            .followed_by_any("b").where(col("price") > first("price", of="a")).one_or_more().allow_combinations()
            .followed_by("c").where(col("price") < first("price", of="a") * 0.95)
            .within(window_ms))


def stream_scan(pattern: Pattern, table: pa.Table, batches: int = 20) -> tuple[int, float, int, int]:
    """Feed ``table`` to one Matcher in ``batches`` slices; returns (matches, mean live partial
    matches after each slice, max live partial matches, matcher state bytes at that max)."""
    m = colcep.Matcher(pattern, key="name", time="ts", columns=[])
    n = table.num_rows
    step = max(1, -(-n // batches))
    matches, live, at_max = 0, [], (0, 0)
    for lo in range(0, n, step):
        matches += _n_matches(m.process(table.slice(lo, step)))
        live.append(m.live_partial_matches)
        if live[-1] >= at_max[0]:
            at_max = (live[-1], matcher_state_bytes(m))
    matches += _n_matches(m.close())
    return matches, float(np.mean(live)) if live else 0.0, at_max[0], at_max[1]


# ----------------------------------------------------------------------------- memory probes
def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            m = re.search(rf"^{field}:\s+(\d+)\s+kB", f.read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


def rss_bytes() -> int:
    """Current resident set size (Linux /proc; elsewhere the peak, as the best available)."""
    kib = _status_kib("VmRSS")
    if kib is not None:
        return kib * 1024
    return peak_rss_bytes()


def peak_rss_bytes() -> int:
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib * 1024
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def reset_peak_rss() -> bool:
    """Reset the peak RSS to the current RSS (Linux >= 4.0: ``/proc/self/clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_above(fn) -> tuple[int, object]:
    """(peak RSS above the RSS before the call, in bytes; the call's result)."""
    reset_peak_rss()
    before = rss_bytes()
    result = fn()
    return max(0, peak_rss_bytes() - before), result


def matcher_state_bytes(m: colcep.Matcher) -> int:
    """Bytes of the numpy arrays a Matcher holds between batches (runs, held matches, shared
    buffer, per-key arrays: allocated capacity, slack included), found by walking its attributes
    and those of colcep's objects it holds (its state, the state's parts), so it follows renames;
    not the program's tables nor the pooled output arrays (``_out``: scratch sized by the
    largest batch's matches). ``Matcher.state_bytes`` is the live part of the same."""
    seen: set[int] = set()

    def walk(x) -> int:
        if id(x) in seen or isinstance(x, CompiledPattern):
            return 0
        seen.add(id(x))
        if isinstance(x, np.ndarray):  # a view counts as the whole array it views (its capacity)
            return walk(x.base) if isinstance(x.base, np.ndarray) else int(x.nbytes)
        if isinstance(x, (tuple, list)):
            return sum(walk(y) for y in x)
        if isinstance(x, dict):
            return sum(walk(y) for y in x.values())
        if type(x).__module__.startswith("colcep.") and hasattr(x, "__dict__"):
            return sum(walk(v) for k, v in vars(x).items() if k not in ("_retained", "_out"))
        return 0

    return sum(walk(v) for k, v in vars(m).items() if k not in ("program", "_retained", "_out"))


class GridScan:
    """Shared set-up of the benchmarks over the (pattern, events, symbols) grid: the table is
    made once in ``setup_cache`` and the kernels are warm before timing."""

    params = (PATTERN_NAMES, EVENTS, SYMBOLS)
    param_names = ["pattern", "events", "symbols"]
    timeout = 3600  # P2/P3 over 10^7 events are slow while the engine is a general NFA
    rounds = 1
    setup_cache = staticmethod(make_data)

    def setup(self, cache, pattern, events, symbols):
        warm_up([pattern])
        self.table = load(cache, events, symbols)
        self.pattern = PATTERNS[pattern]
