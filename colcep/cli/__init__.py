"""The ``colcep`` command line.

    colcep scan --events 1000000 --symbols 100 --pattern paper_query3 --out out/matches
    colcep scan data/ticks.parquet --pattern my_pattern.py --key name --time ts --out out/m
    colcep scan data/by_symbol/ --direct --pattern p1 --out out/m      # Parquet laid out by key
    colcep generate --events 1000000 --symbols 20000 --by-key --out data/by_symbol   # that layout
    colcep scan ticks.csv --pattern three_rising --in-process --out out/m
    colcep plot out/matches --key S0008                                # one key's price, matches marked
    colcep generate --events 1000000 --symbols 100 --out out/ticks.parquet
    colcep patterns
    colcep warmup                                                      # compile the kernels now

One module per subcommand, each with ``add_parser(sub)`` (its arguments) and ``run(args)``
(the command, returning the exit status): :mod:`~colcep.cli.scan`, :mod:`~colcep.cli.plot`,
:mod:`~colcep.cli.generate`, :mod:`~colcep.cli.patterns` and :mod:`~colcep.cli.warmup`; what
they are made of (synthetic ticks, built-in patterns, the in-process file scan, the summary, the
pictures, the warm-up) is in :mod:`colcep.tools`. ``python -m colcep.cli`` runs :func:`main`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from colcep.cli import generate, patterns, plot, scan, warmup
from colcep.errors import ColcepError

__all__ = ["main"]

#: The subcommands, in the order ``colcep --help`` lists them.
COMMANDS = {"scan": scan, "plot": plot, "generate": generate, "patterns": patterns, "warmup": warmup}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="colcep", description="Complex event processing on columnar data.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for command in COMMANDS.values():
        command.add_parser(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``colcep`` command; returns the exit status (0 ok, 2 a usage or input
    error, 130 interrupted)."""
    a = _parser().parse_args(argv)
    try:
        return COMMANDS[a.command].run(a)
    except ColcepError as exc:
        print(f"colcep: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ncolcep: interrupted; nothing was written to --out (partial output removed)"
              if a.command == "scan" else "\ncolcep: interrupted", file=sys.stderr)
        return 130
