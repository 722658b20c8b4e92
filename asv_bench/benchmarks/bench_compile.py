"""Compile time: the first scans of a fresh process, with an empty Numba disk cache (cold) and
with the cache a previous process left (warm).

Each measurement runs a child Python: it imports colcep (or the yardstick), then times its
first scan of each benchmark pattern over a small table, which is dominated by compiling (cold)
or loading (warm) the kernels. ``NUMBA_CACHE_DIR`` points the child at the cache: a new empty
directory for ``cold``, the one ``setup_cache`` filled for ``warm``.
"""
import json
import os
import subprocess
import sys
import tempfile

from .common import ASV_BENCH, QUICK

CHILD = {
    "colcep": r"""
import json, time
t0 = time.perf_counter()
import colcep
from colcep.tools.examples import BENCHMARK_PATTERNS
from colcep.tools.ticks import make_ticks
t1 = time.perf_counter()
ticks = make_ticks(2000, 10, 7)
first = {}
for name, p in BENCHMARK_PATTERNS.items():
    s = time.perf_counter()
    m = colcep.Matcher(p, key="name", time="ts", columns=[])
    m.process(ticks)
    m.close()
    first[name] = time.perf_counter() - s
print(json.dumps({"import": t1 - t0, "first": first}))
""",
    "yardstick": r"""
import json, sys, time
sys.path.insert(0, %r)
t0 = time.perf_counter()
import yardstick
from colcep.tools.ticks import make_ticks
t1 = time.perf_counter()
ticks = make_ticks(2000, 10, 7)
first = {}
for name in yardstick.KERNELS:
    s = time.perf_counter()
    yardstick.run(name, ticks)
    first[name] = time.perf_counter() - s
print(json.dumps({"import": t1 - t0, "first": first}))
""" % str(ASV_BENCH),
}


def run_child(what: str, cache_dir: str | None) -> dict:
    """Run the child for ``what`` with NUMBA_CACHE_DIR=cache_dir (None: as this process has it)."""
    env = dict(os.environ)
    env.pop("NUMBA_DISABLE_JIT", None)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", CHILD[what]], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def fill_caches() -> dict:
    """setup_cache: one cold run per kind into its own cache directory, for the warm runs."""
    dirs = {}
    for what in CHILD:
        if QUICK:  # the smoke test does not pay ~40 s of cold compiles: warm runs use the default cache
            dirs[what] = None
            continue
        d = os.path.abspath(f"numba_cache_{what}")
        os.makedirs(d, exist_ok=True)
        run_child(what, d)
        dirs[what] = d
    return dirs


fill_caches.timeout = 900


class Compile:
    """Seconds from the first call to the end of the first scan of each of P1..P4 (import
    excluded): ``cold`` compiles every kernel, ``warm`` loads them from the disk cache."""

    params = (["colcep", "yardstick"], ["cold", "warm"])
    param_names = ["engine", "cache"]
    timeout = 900
    rounds = 1
    repeat = 1
    setup_cache = staticmethod(fill_caches)

    def setup(self, dirs, engine, cache):
        self.tmp = None
        if cache == "cold" and not QUICK:
            self.tmp = tempfile.TemporaryDirectory(prefix="numba_cold_")
            self.dir = self.tmp.name
        else:
            self.dir = dirs[engine]

    def teardown(self, dirs, engine, cache):
        if self.tmp is not None:
            self.tmp.cleanup()

    def track_first_scans_seconds(self, dirs, engine, cache):
        return sum(run_child(engine, self.dir)["first"].values())

    track_first_scans_seconds.unit = "seconds"
