#!/usr/bin/env python3
"""Where a kernel's time goes: ``perf`` with the names of Numba's compiled functions.

Numba's JIT code has no symbols for ``perf``. This script runs ``colcep.match`` of one pattern,
then writes ``/tmp/perf-<pid>.map`` (the format ``perf report`` reads for JIT code) with the
address and size of every function Numba has compiled or loaded, and the generated step's
machine code to ``--dump`` (for ``objdump``), so that samples land on ``run_key``,
``buffer.compare_completed``, ``arrays.layout_shard`` ... rather than on bare addresses:

    perf record -F 2999 -o /tmp/perf.data python asv_bench/perf_map.py P2 --symbols 5000
    perf report -i /tmp/perf.data --no-children --sort sym
    python asv_bench/perf_map.py --hot /tmp/perf.data      # the step's hottest 64-byte blocks
    objdump -D -b binary -mi386:x86-64 --start-address=0x4b00 --stop-address=0x4f40 /tmp/run_key.bin

A pattern is a benchmark id (``P1``..``P5``) or a desk name (``colcep.tools.examples``).
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import os
import subprocess
import sys
import time


def symbols() -> list[tuple[int, int, str]]:
    """(address, size, name) of every function in Numba's JIT engine, by address; a size is
    the distance to the next function."""
    from numba.core.registry import cpu_target

    engine = cpu_target.target_context.codegen()._engine
    found = []
    for name in engine._defined_symbols:
        try:
            address = engine._ee.get_function_address(name)
        except Exception:  # noqa: BLE001 - not a function
            continue
        if address:
            found.append((address, name))
    found.sort()
    return [(a, min(b - a, 1 << 20), name) for (a, name), (b, _) in zip(found, found[1:] + [(found[-1][0] + 4096, "")])]


def write_map(syms: list[tuple[int, int, str]], dump: str) -> None:
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as f:
        for address, size, name in syms:
            f.write(f"{address:x} {size:x} {name}\n")
    steps = [(a, n, s) for a, n, s in syms if s.startswith("_ZN") and "colcep_step_" in s and "run_key" in s
             and not s.startswith("_ZN7cpython")]
    for address, size, name in steps[:1]:
        with open(dump, "wb") as f:
            f.write(ctypes.string_at(address, size))
        with open(dump + ".addr", "w") as f:
            f.write(f"{address:x} {size}\n")


def hot(data: str, dump: str, top: int) -> None:
    """The step's hottest 64-byte blocks in ``perf`` samples (offsets into ``dump``)."""
    address, size = (int(x, 16) if i == 0 else int(x) for i, x in enumerate(open(dump + ".addr").read().split()))
    ips = subprocess.run(["perf", "script", "-i", data, "-F", "ip"], capture_output=True, text=True).stdout.split()
    blocks: collections.Counter = collections.Counter()
    for x in ips:
        ip = int(x, 16)
        if address <= ip < address + size:
            blocks[(ip - address) // 64 * 64] += 1
    total = sum(blocks.values())
    print(f"{total} samples in the step")
    for off, n in blocks.most_common(top):
        print(f"  {off:#06x}  {n:6d}  {100 * n / max(total, 1):5.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pattern", nargs="?", default="P2")
    ap.add_argument("--symbols", type=int, default=5000)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--tier", default="compiled")
    ap.add_argument("--dump", default="/tmp/run_key.bin")
    ap.add_argument("--hot", metavar="PERF_DATA", help="print the step's hottest blocks from a recorded run")
    a = ap.parse_args()
    if a.hot:
        hot(a.hot, a.dump, 25)
        return
    import colcep as cc
    from colcep.tools.examples import benchmark_pattern, desk_patterns
    from colcep.tools.ticks import make_ticks

    desk = desk_patterns()
    p = desk[a.pattern] if a.pattern in desk else benchmark_pattern(a.pattern)
    ticks = make_ticks(a.events, a.symbols, 7)
    kw = dict(key="name", time="ts", columns=[], threads=1, tier=a.tier)
    cc.match(ticks.slice(0, 100_000), p, **kw)
    c0 = time.process_time()
    for _ in range(a.repeat):
        cc.match(ticks, p, **kw)
    print(f"{(time.process_time() - c0) / a.repeat * 1e3:.1f} ms of CPU a match", file=sys.stderr)
    write_map(symbols(), a.dump)


if __name__ == "__main__":
    main()
