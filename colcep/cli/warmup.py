"""``colcep warmup``: colcep's kernels compiled into this machine's cache now
(:mod:`colcep.tools.warmup`), for images, cluster init scripts and CI."""
from __future__ import annotations

import argparse
import time

from colcep.errors import InputError


def add_parser(sub) -> None:
    """The ``warmup`` subcommand and its arguments."""
    w = sub.add_parser("warmup", help="compile the kernels for this machine now (images, cluster init scripts)",
                       description="Compile colcep's kernels into this machine's cache (colcep.engine.kernel_cache) "
                                   "ahead of the first scan, independent groups in parallel processes; what is "
                                   "cached already is only loaded.")
    w.add_argument("--groups", help="comma-separated kernel groups (default: all of cep,cep-step,sql,windows)")
    w.add_argument("--processes", type=int, metavar="N", help="processes at once (default: the cores, one per group)")
    w.add_argument("--host-tuned", action="store_true",
                   help="compile for this machine's CPU even the kernels colcep ships compiled for any CPU of its "
                        "kind (a few percent faster on some patterns; ~90 s on 2 cores)")


def run(a: argparse.Namespace) -> int:
    """Compile (or load) the kernel groups ``a`` names; the exit status."""
    from colcep.engine import kernel_cache as cache
    from colcep.tools.warmup import warmup

    if a.processes is not None and a.processes < 1:
        raise InputError(f"--processes must be at least 1, got {a.processes}")
    t0 = time.perf_counter()
    groups = [g for g in a.groups.split(",") if g] if a.groups else None
    warmup(groups, a.processes, report=lambda line: print(f"colcep warmup: {line}", flush=True), host_tuned=a.host_tuned)
    print(f"colcep warmup: kernels ready in {cache.cache_dir()} ({time.perf_counter() - t0:.1f} s)")
    return 0
