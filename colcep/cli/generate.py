"""``colcep generate``: synthetic ticks (:mod:`colcep.tools.ticks`) written as Parquet or CSV, and
the tick options it shares with ``colcep scan --events N``."""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from colcep.errors import InputError
from colcep.engine.progress import num as _num


def _tick_options(g, default_events: int | None) -> None:
    """The synthetic-tick options, spelled the same in ``scan`` and ``generate``."""
    if default_events is None:
        g.add_argument("--events", type=int, metavar="N", help="instead of input paths: generate N synthetic ticks "
                                                               "(id, name, ts in ms, price, volume) and scan them")
        g.add_argument("--generate", type=int, dest="events", metavar="N", help=argparse.SUPPRESS)  # old spelling
    else:
        g.add_argument("--events", type=int, default=default_events, metavar="N",
                       help=f"number of ticks (default {default_events:,})")
    g.add_argument("--symbols", type=int, default=100, metavar="K",
                   help="number of symbols, the key column 'name' (default 100)")
    g.add_argument("--seed", type=int, default=7, help="random seed; the same seed gives the same ticks (default 7)")
    g.add_argument("--by-key", action="store_true",
                   help="write the ticks laid out by symbol, the layout --direct reads: a folder of files "
                        "part-00000.parquet, ... each holding a range of whole symbols sorted by (name, ts, id); "
                        "any number of symbols (colcep.spark.write_by_key)")
    g.add_argument("--buckets", type=int, metavar="B",
                   help="with --by-key: the number of files (key ranges); default from the data: at most about "
                        "2 M rows a file, up to 64 files where each gets 16,384 rows or more, at most 1,024")


def _check_tick_options(a: argparse.Namespace) -> None:
    if a.buckets is not None and not a.by_key:
        raise InputError("--buckets sets the number of files of --by-key; add --by-key")
    if a.buckets is not None and a.buckets < 1:
        raise InputError(f"--buckets must be at least 1, got {a.buckets}")


def _write_ticks_atomic(path: Path, events: int, symbols: int, seed: int, by_key: bool,
                        buckets: int | None = None) -> Path:
    """``write_ticks`` to a hidden name beside ``path``, renamed at the end (an interrupted
    run leaves no half file that a later scan would reuse)."""
    from colcep.tools.ticks import write_ticks

    tmp = path.with_name(f".{path.stem}.partial-{os.getpid()}{path.suffix}")
    try:
        write_ticks(tmp, events, symbols, seed, partition_by_key=by_key, buckets=buckets)
        if by_key and path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
    return path


def add_parser(sub) -> None:
    """The ``generate`` subcommand and its arguments."""
    gen = sub.add_parser("generate", help="write synthetic ticks (Parquet or CSV by suffix)",
                         description="Write synthetic ticks: id, name (the symbol), ts (ms), price (a random walk "
                                     "per symbol), volume.")
    _tick_options(gen, 1_000_000)
    gen.add_argument("--out", required=True, help="the file to write: .parquet or .csv (a folder with --by-key)")


def run(a: argparse.Namespace) -> int:
    """Write the ticks ``a`` asks for; the exit status."""
    t0 = time.perf_counter()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _check_tick_options(a)
    p = _write_ticks_atomic(out, a.events, a.symbols, a.seed, a.by_key, a.buckets)
    print(f"wrote {_num(a.events)} ticks over {a.symbols} symbols to {p} in {time.perf_counter() - t0:.1f} s")
    return 0
