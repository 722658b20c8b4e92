"""Does ``max_state_bytes`` bound memory? Runaway patterns in a child process whose address space
is limited (``RLIMIT_AS``) to its size before the scan plus a headroom: each must end in
``CapacityError``, not ``MemoryError`` nor a kill (issue 22 part 3; docs/benchmarks.md, "Memory";
docs/engineering/2026-11-25-state-between-calls-issue-22.md, "A bound that bounds memory").

    python asv_bench/memory_bound.py                      # every case, 1 GiB bound, 1.5 GiB headroom
    python asv_bench/memory_bound.py --cases p5 --bound-mib 256 --headroom-mib 384

Each child builds its input and warms the kernels up, reads its address-space size (``VmSize``),
sets ``RLIMIT_AS`` to that plus the headroom, scans, and prints one JSON line: the outcome, the
state's bytes at the last good batch, and the peaks above the baseline (address space
``VmPeak``, resident ``VmHWM``). ``run_case`` is what the asv benchmark (bench_memory) and the
test (tests/test_memory_bound.py) call.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = ["merged_kleene", "combinations", "skip_till_any", "p5", "matches"]

_CHILD = r"""
import json, re, resource, sys, time
import numpy as np, pyarrow as pa
import colcep as cc
from colcep import col, first, last, sum as csum

case, bound, headroom, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def status(field):
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+)\s+kB", f.read(), re.M).group(1)) * 1024

def rising(n):
    return pa.table({"ts": pa.array(np.arange(n), pa.int64()), "price": pa.array(1.0 + np.arange(n) * 1e-6)})

key = None
batch = 10_000
if case == "merged_kleene":  # merged runs (one per start) under a window: a buffer quadratic in the window
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > 0).one_or_more()
         .followed_by("c").where(col("price") < 0).within(10**9))
    tbl = rising(rows)
elif case == "combinations":  # allow_combinations with an aggregate: nothing merges, 2^k runs
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > csum("price", of="b") - 10**9).one_or_more()
         .allow_combinations().followed_by("c").where(col("price") < 0))
    tbl, batch = rising(rows), 5
elif case == "skip_till_any":  # skip till any pairs that never complete: runs quadratic in the events
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > last("price", of="a"))
         .followed_by_any("c").where(col("price") < 0).within(10**9))
    tbl = rising(rows)
elif case == "p5":  # P5: a big-volume tick, then the first tick above 1.05x its price within 1 h; prices fall
    n_keys = 100
    k = np.arange(rows) % n_keys
    tbl = pa.table({"name": pa.array([f"S{i:03d}" for i in range(n_keys)]).take(pa.array(k)),
                    "ts": pa.array(np.arange(rows) // 10, pa.int64()),
                    "price": pa.array(1000.0 - np.arange(rows) * 1e-5),
                    "volume": pa.array(np.full(rows, 1000.0))})
    p = (cc.Pattern.begin("a").where(col("volume") > 500)
         .followed_by("b").where(col("price") > last("price", of="a") * 1.05).within("1h"))
    key, batch = "name", 1_000_000
elif case == "matches":  # skip till any pairs that all complete: the matches of one batch explode
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > 0).within(10**9))
    tbl, batch = rising(rows), rows
else:
    raise SystemExit(f"unknown case {case!r}")

warm = cc.Matcher(p, key=key, time="ts", columns=[])
warm.process(tbl.slice(0, 4))  # kernels loaded, worker threads made
warm._tier.wait(600)  # (and a compiled step this machine built before, which loads in the background)
base = status("VmSize")
resource.setrlimit(resource.RLIMIT_AS, (base + headroom, base + headroom))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM from here
rss0 = status("VmRSS")
m = cc.Matcher(p, key=key, time="ts", columns=[], max_state_bytes=bound)
outcome, msg, state, t0, fed = "finished", "", 0, time.perf_counter(), 0
try:
    for lo in range(0, tbl.num_rows, batch):
        m.process(tbl.slice(lo, batch))
        fed = lo + batch
        state = max(state, m.state_bytes)
    m.close()
except cc.CapacityError as e:
    outcome, msg = "CapacityError", str(e)
except MemoryError as e:
    outcome, msg = "MemoryError", repr(e)
print(json.dumps({"case": case, "outcome": outcome, "message": msg[:300], "rows_fed": min(fed, tbl.num_rows),
                  "max_state_mib": state / 2**20, "state_after_mib": m.state_bytes / 2**20,
                  "peak_as_mib": (status("VmPeak") - base) / 2**20, "peak_rss_mib": (status("VmHWM") - rss0) / 2**20,
                  "seconds": time.perf_counter() - t0}))
"""

ROWS = {"merged_kleene": 200_000, "combinations": 60, "skip_till_any": 200_000, "p5": 12_000_000,
        "matches": 200_000}
#: Inputs that exceed a 64 MiB bound in seconds (the test suite's and the quick benchmarks').
SMALL_ROWS = {"merged_kleene": 50_000, "combinations": 60, "skip_till_any": 50_000, "p5": 1_000_000,
              "matches": 50_000}


def run_case(case: str, bound: int = 1 << 30, headroom: int = 3 << 29, rows: int | None = None,
             timeout: float = 1800) -> dict:
    """One case in a child process; its JSON line as a dict (``outcome`` "killed" with the
    signal, or "error" with stderr, when the child printed none)."""
    res = subprocess.run([sys.executable, "-c", _CHILD, case, str(bound), str(headroom), str(rows or ROWS[case])],
                         capture_output=True, text=True, timeout=timeout)
    for line in res.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    kind = "killed" if res.returncode < 0 else "error"
    return {"case": case, "outcome": kind, "returncode": res.returncode, "message": res.stderr[-2000:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--bound-mib", type=int, default=1024)
    ap.add_argument("--headroom-mib", type=int, default=1536)
    ap.add_argument("--rows", type=int, default=None)
    args = ap.parse_args()
    for case in args.cases.split(","):
        r = run_case(case, args.bound_mib << 20, args.headroom_mib << 20, args.rows)
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
