"""``colcep plot``: a scan's matches drawn as PNG (:mod:`colcep.tools.plot`), the overview or one
key's column over time with its matches marked."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from colcep.errors import InputError


def add_parser(sub) -> None:
    """The ``plot`` subcommand and its arguments."""
    pl = sub.add_parser("plot", help="draw a scan's matches as PNG (overview, or one key's price with its matches)",
                        description="Draw the matches of a `colcep scan` output folder as PNG. Without --key: "
                                    "matches over time and the top keys, above the top key's price with its "
                                    "first matches marked. With --key: that key's column over time with each "
                                    "match's events marked by stage.")
    pl.add_argument("matches", help="a `colcep scan` output folder (its _summary.json names the input)")
    pl.add_argument("--key", dest="key_value", metavar="VALUE", help="the key to draw, e.g. S0008 (default: "
                                                                     "the overview)")
    pl.add_argument("--column", default="price", help="the column drawn over time (default price)")
    pl.add_argument("--data", help="the scanned input, if it moved since the scan (Parquet or CSV)")
    pl.add_argument("--first", type=int, metavar="M", help="zoom to the time range of the key's first M matches "
                                                          "(default: all with --key, 12 in the overview)")
    pl.add_argument("--out", help="the PNG to write (default: <matches>.png, or <matches>_<key>.png with --key)")


def run(a: argparse.Namespace) -> int:
    """Draw what ``a`` asks for; the exit status."""
    from colcep.tools.plot import plot_key, plot_scan, scan_picture_path

    folder = Path(a.matches)
    if not folder.is_dir():
        raise InputError(f"{a.matches!r} is not a folder of matches (the --out of `colcep scan`)")
    summary_file = folder / "_summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    data = a.data or (summary.get("input") if summary.get("input") and Path(summary["input"]).exists() else None)
    if a.key_value is None:
        png = Path(a.out) if a.out else scan_picture_path(folder)
        plot_scan(folder, column=a.column, max_matches=a.first if a.first is not None else 12, data=data, out=png)
    else:
        png = Path(a.out) if a.out else folder.with_name(f"{folder.name}_{a.key_value}.png")
        key = summary.get("key", "name")
        import pyarrow.dataset as ds

        matches = ds.dataset(str(folder), format="parquet").to_table()
        value: Any = a.key_value
        if key in matches.column_names and pa.types.is_integer(matches.schema.field(key).type):
            value = int(value)
        if key in matches.column_names and not pc.any(pc.equal(matches.column(key), value)).as_py():
            raise InputError(f"no matches for {key} = {a.key_value!r} in {a.matches}")
        if data is None and a.column not in matches.column_names:
            raise InputError(f"the matches have no {a.column!r} column and the input is not found: give --data")
        plot_key(data, matches, value, key=key, time=summary.get("time", "ts"), column=a.column,
                 time_unit=summary.get("time_unit") or "ms", seq=summary.get("seq"), max_matches=a.first,
                 title=None, out=png)
    print(f"wrote {png}")
    return 0
