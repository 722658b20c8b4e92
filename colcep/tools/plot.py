"""Pictures of what a scan found (PNG, with matplotlib: ``pip install colcep[plot]``).

    from colcep.tools.plot import plot_key, plot_overview, plot_scan
    fig = plot_key(ticks, out, "S0008", key="name", time="ts", column="price")   # one key, matches marked
    fig.savefig("S0008.png")
    plot_overview(out, key="name", time="ts", out="overview.png")               # a whole scan
    plot_scan("out/matches")                                                     # a ``colcep scan`` output folder

``plot_key`` draws one key's ``column`` (the price, or any numeric column) over time and marks
every matched event of that key with its stage (one colour and marker per stage; the events of
one match are joined by a thin line). ``plot_overview`` draws matches over time (matches started
per time bin) and the keys with the most matches. ``plot_scan`` reads a folder written by
``colcep scan`` (its ``_summary.json`` names the input) and draws both in one picture.

Every function returns the matplotlib ``Figure`` and, given ``out=``, also writes it as PNG. No
pyplot state is used, so the functions work in scripts, servers and notebooks alike.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.many import PATTERN_COL
from colcep.engine.matcher import as_table
from colcep.tools.file_scan import parquet_batches
from colcep.tools.summary import Summary, TimeHistogram, time_numbers, unique_match_ids

__all__ = ["match_starts", "plot_key", "plot_overview", "plot_scan", "scan_picture_path"]

_MARKERS = ["o", "^", "s", "D", "v", "P", "X", "*", "<", ">"]
_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH_AFTER_S = 3.15e8  # integer times later than 1980-01-01 (in seconds) are drawn as dates


def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("colcep.tools.plot needs matplotlib: pip install 'colcep[plot]'") from exc
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _table(data: Any) -> pa.Table:
    """A table from a path (Parquet / CSV) or anything ``colcep.engine.matcher.as_table`` reads
    (a match table of several patterns gets one id per match: ``summary.unique_match_ids``)."""
    if isinstance(data, (str, os.PathLike)):
        return unique_match_ids(_read(data))
    return unique_match_ids(as_table(data))


def _dataset(path: str | os.PathLike):
    import pyarrow.dataset as ds

    p = Path(path)
    fmt = "csv" if p.suffix.lower() == ".csv" or (p.is_dir() and any(p.glob("*.csv"))) else "parquet"
    return ds.dataset(str(p), format=fmt, partitioning="hive" if fmt == "parquet" else None)


def _read(path: str | os.PathLike, columns: Sequence[str] | None = None, filt=None) -> pa.Table:
    d = _dataset(path)
    cols = [c for c in columns if c in d.schema.names] if columns is not None else None
    return d.to_table(columns=cols, filter=filt)


class _TimeAxis:
    """How a time column is drawn: Arrow timestamps and epoch-like integers as dates, other
    integers (times since some start) as seconds, minutes or hours."""

    def __init__(self, typ: pa.DataType, lo: float, hi: float, unit: str):
        self.unit = unit
        self.dates = pa.types.is_timestamp(typ) or (pa.types.is_integer(typ)
                                                    and lo / _UNIT_PER_SECOND[unit] > _EPOCH_AFTER_S)
        span_s = (hi - lo) / _UNIT_PER_SECOND[unit] if not pa.types.is_timestamp(typ) else 0.0
        self.scale, self.label = ((3600.0, "h") if span_s > 3 * 3600 else (60.0, "min") if span_s > 180
                                  else (1.0, "s"))

    def values(self, arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if pa.types.is_timestamp(arr.type):
            return arr.to_numpy(zero_copy_only=False) if isinstance(arr, pa.Array) else \
                np.asarray(arr.to_numpy())
        x = np.asarray(arr.to_numpy(), dtype=np.int64) if pa.types.is_integer(arr.type) else \
            np.asarray(arr.to_numpy(), dtype=np.float64)
        if self.dates:
            return x.astype(f"datetime64[{self.unit}]")
        return x / (_UNIT_PER_SECOND[self.unit] * self.scale)

    def xlabel(self, time: str) -> str:
        return f"{time} (UTC)" if self.dates else f"{time} ({self.label})"


def _axis_for(col: pa.ChunkedArray | pa.Array, time_unit: str) -> _TimeAxis:
    if pa.types.is_timestamp(col.type):
        return _TimeAxis(col.type, 0, 0, col.type.unit)
    mm = pc.min_max(col)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return _TimeAxis(col.type, float(lo or 0), float(hi or 0), time_unit)


def _save(fig, out: str | os.PathLike | None):
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.partial-{os.getpid()}.png")
        try:
            fig.savefig(tmp, format="png")
            os.replace(tmp, out)
        finally:
            if tmp.exists():
                tmp.unlink()
    return fig


def _match_events(matches: pa.Table, data: pa.Table | None, time: str, column: str, seq: str | None) -> pa.Table:
    """The matched events with their time and ``column``: taken from the match table, or
    looked up in ``data`` by ``row`` = ``seq`` when the matches do not carry them."""
    missing = [c for c in (time, column) if c not in matches.column_names]
    if not missing:
        return matches
    if data is None or seq is None or seq not in data.column_names:
        raise ValueError(f"the matches have no {missing} column(s): scan with them in the output columns, or pass "
                         "the input data and its row identity column (seq)")
    look = data.select([seq, *missing]).rename_columns(["row", *missing])
    if look.schema.field("row").type != matches.schema.field("row").type:
        look = look.set_column(0, "row", look.column("row").cast(matches.schema.field("row").type))
    return matches.join(look, "row", join_type="left outer")


def plot_key(data: Any, matches: Any, key_value: Any, *, key: str | None = "name", time: str = "ts",
             column: str = "price", time_unit: str = "ms", seq: str | None = "id", max_matches: int | None = None,
             title: str | None = None, out: str | os.PathLike | None = None, ax=None, total: int | None = None):
    """One key's ``column`` over time with each match's events marked by stage.

    data: the input rows (a Table, DataFrame or a Parquet / CSV path); only ``key_value``'s rows
        are drawn. ``None`` draws the matched events alone.
    matches: the match table (``colcep.match`` / ``colcep scan`` output, or its folder).
    key_value: the key to draw (ignored when ``key`` is None).
    column: the numeric column drawn (default ``price``).
    time_unit: the unit of an integer time column (as for ``colcep.match``).
    seq: the input column the matches' ``row`` refers to, used when the matches lack ``time``
        or ``column``.
    max_matches: draw only the time range of the key's first ``max_matches`` matches (a zoom).
    out: also write the figure as PNG there. ax: draw into this matplotlib Axes instead of a
        new figure (the Axes' figure is returned).
    total: the key's number of matches, when ``matches`` holds only its first ``max_matches``
        (the title tells it).

    Returns the matplotlib Figure. The marked points are the matched events of the key in the
    drawn range, one per event (timed-out partial matches are left out).
    """
    matches = _table(matches)
    if "timed_out" in matches.column_names:
        matches = matches.filter(pc.invert(pc.fill_null(matches.column("timed_out"), False)))
    if key is not None:
        matches = matches.filter(pc.equal(matches.column(key), pa.scalar(key_value, matches.schema.field(key).type)))
    if data is not None:
        if isinstance(data, (str, os.PathLike)):
            import pyarrow.dataset as ds

            flt = ds.field(key) == key_value if key is not None else None
            span = _zoom(matches, time, max_matches)  # only the rows drawn: a day's file is read in a few row groups
            if span is not None:
                near = (ds.field(time) >= span[0]) & (ds.field(time) <= span[1])
                flt = near if flt is None else flt & near
            data = _read(data, [c for c in (key, time, column, seq) if c], flt)
        else:
            data = _table(data)
            if key is not None:
                data = data.filter(pc.equal(data.column(key), pa.scalar(key_value, data.schema.field(key).type)))
        data = data.sort_by(time)
    ev = _match_events(matches, data, time, column, seq)
    ev = ev.sort_by([("match_id", "ascending"), (time, "ascending")]) if ev.num_rows else ev
    n_all = total if total is not None else len(pc.unique(ev.column("match_id"))) if ev.num_rows else 0
    if max_matches is not None and ev.num_rows:
        first_ids = pc.unique(ev.column("match_id")).slice(0, max_matches)
        ev = ev.filter(pc.is_in(ev.column("match_id"), first_ids))
        lo, hi = _padded(time_numbers(ev.column(time)))
        if data is not None:
            dt = time_numbers(data.column(time))
            data = data.filter(pa.array((dt >= lo) & (dt <= hi)))
    ref = data.column(time) if data is not None and data.num_rows else ev.column(time)
    axis = _axis_for(ref, time_unit)
    if ax is None:
        fig = _figure(12, 4.5)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    if data is not None and data.num_rows:
        ax.plot(axis.values(data.column(time)), data.column(column).to_numpy(zero_copy_only=False),
                color="0.55", lw=0.8, zorder=1, label=f"{column} ({data.num_rows:,} rows)")
    n_matches = len(pc.unique(ev.column("match_id"))) if ev.num_rows else 0
    if ev.num_rows:
        from matplotlib.collections import LineCollection

        tx = axis.values(ev.column(time))
        y = ev.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
        ids = ev.column("match_id").to_numpy()
        cut = np.flatnonzero(np.diff(ids)) + 1
        xs = tx.astype("datetime64[ns]").astype(np.int64) if axis.dates else tx
        segs = [np.column_stack([a, b]) for a, b in zip(np.split(xs, cut), np.split(y, cut)) if len(a) > 1]
        if segs and not axis.dates:
            ax.add_collection(LineCollection(segs, colors="0.2", linewidths=0.6, alpha=0.5, zorder=2))
        elif segs:
            import matplotlib.dates as mdates

            segs = [np.column_stack([mdates.date2num(s[:, 0].astype("datetime64[ns]")), s[:, 1]]) for s in segs]
            ax.add_collection(LineCollection(segs, colors="0.2", linewidths=0.6, alpha=0.5, zorder=2))
        stages = list(dict.fromkeys(ev.column("stage").to_pylist()))
        st = np.asarray(ev.column("stage").to_pylist(), dtype=object)
        cmap = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                "tab:olive", "tab:cyan", "tab:gray"]
        for i, s in enumerate(stages):
            sel = st == s
            ax.scatter(tx[sel], y[sel], s=28, marker=_MARKERS[i % len(_MARKERS)], color=cmap[i % len(cmap)],
                       edgecolors="black", linewidths=0.4, zorder=3, label=f"stage {s} ({int(sel.sum()):,} events)")
    ax.set_xlabel(axis.xlabel(time))
    ax.set_ylabel(column)
    ax.grid(True, alpha=0.3)
    who = f"{key_value}: " if key is not None else ""
    which = f"its first {n_matches:,} of {n_all:,} matches" if n_matches < n_all else \
        f"{n_matches:,} match{'es' if n_matches != 1 else ''}"
    ax.set_title(title or f"{who}{column} over time, {which} marked by stage")
    ax.legend(loc="best", fontsize=8, framealpha=0.85)
    return _save(fig, out)


def plot_overview(matches: Any, *, key: str | None = "name", time: str = "ts", time_unit: str = "ms",
                  bins: int = 60, top: int = 15, title: str | None = None, out: str | os.PathLike | None = None,
                  axes: Sequence[Any] | None = None):
    """Matches over time for a whole scan: matches started per time bin (left) and the keys
    with the most matches (right, when there is a key). ``matches`` (a table, or a ``colcep
    scan`` folder, read a batch at a time) needs the ``time`` column. Returns the matplotlib
    Figure (also written as PNG to ``out``)."""
    batches, names = _match_batches(matches, (PATTERN_COL, "match_id", "timed_out", key, time))
    if time not in names:
        raise ValueError(f"the matches have no {time!r} column: scan with it in the output columns")
    has_keys = key is not None and key in names
    start, per_key = match_starts(batches, key if has_keys else None, time)
    return _draw_overview(start, per_key, key=key, time=time, time_unit=time_unit, bins=bins, top=top, title=title,
                          out=out, axes=axes)


def _match_batches(matches: Any, columns: Sequence[Any]) -> "tuple[Iterator[pa.RecordBatch], list[str]]":
    """The record batches of those of ``columns`` a match table or folder has (a folder read a
    batch at a time), and its column names."""
    if isinstance(matches, (str, os.PathLike)):
        import pyarrow.dataset as ds

        d = _dataset(matches)
        cols = [c for c in dict.fromkeys(columns) if c is not None and c in d.schema.names]
        if isinstance(d.format, ds.ParquetFileFormat):  # a row group at a time: little memory
            return parquet_batches(str(matches), [PATTERN_COL], cols, 1 << 20), d.schema.names
        return d.to_batches(columns=cols), d.schema.names
    t = as_table(matches)
    cols = [c for c in dict.fromkeys(columns) if c is not None and c in t.column_names]
    return iter(t.select(cols).to_batches()), t.column_names


def match_starts(batches: "Iterable[pa.RecordBatch]", key: str | None, time: str) -> "tuple[TimeHistogram, dict]":
    """Each match's first ``time`` (one per match, timed-out partial matches left out), counted
    in a :class:`~colcep.tools.summary.TimeHistogram`, and the number of matches per ``key``
    value, from record batches of a match table in its order (a match's rows are consecutive: a
    new ``match_id``, or ``pattern``, starts the next match), a batch at a time
    (:class:`~colcep.tools.summary.Summary`): a scan's output of any size in constant memory."""
    counted: Summary | None = None
    for b in batches:
        if counted is None:
            counted = Summary(key, time=time, named=PATTERN_COL in b.schema.names, starts=True)
        counted.add(b)
    if counted is None:
        return TimeHistogram(), {}
    return counted.start_times(), dict(counted.per_key())


def _draw_overview(start: TimeHistogram, per_key: dict, *, key: str | None, time: str, time_unit: str, bins: int,
                   top: int, title: str | None, out: Any, axes: Any):
    has_keys = key is not None and bool(per_key)
    if axes is None:
        fig = _figure(12, 4)
        if has_keys:
            gs = fig.add_gridspec(1, 3)
            ax_t, ax_k = fig.add_subplot(gs[0, :2]), fig.add_subplot(gs[0, 2])
        else:
            ax_t, ax_k = fig.add_subplot(), None
    else:
        ax_t, ax_k = axes[0], (axes[1] if len(axes) > 1 else None)
        fig = ax_t.figure
    n = start.total
    if n:
        typ = start.type or pa.int64()
        axis = _TimeAxis(typ, start.lo, start.hi, typ.unit if pa.types.is_timestamp(typ) else time_unit)
        counts, edges = start.bars(bins)
        if axis.dates:
            import matplotlib.dates as mdates

            unit = typ.unit if pa.types.is_timestamp(typ) else time_unit
            edges = mdates.date2num(edges.astype(np.int64).astype(f"datetime64[{unit}]").astype("datetime64[ns]"))
            ax_t.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="tab:blue", alpha=0.8)
            ax_t.xaxis_date()
            width = f"{(edges[1] - edges[0]) * 86400:,.0f} s"
        else:
            edges = edges / (_UNIT_PER_SECOND[axis.unit] * axis.scale)
            ax_t.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="tab:blue", alpha=0.8)
            width = _span((edges[1] - edges[0]) * axis.scale)
        ax_t.set_xlabel(axis.xlabel(time))
        ax_t.set_ylabel(f"matches started per {width}")
    ax_t.set_title(title or f"{n:,} matches over time")
    ax_t.grid(True, axis="y", alpha=0.3)
    if ax_k is not None and has_keys and n:
        nk = len(per_key)
        best = sorted(per_key.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0]))[:top]
        names = [str(v) for v, _ in best][::-1]
        vals = [c for _, c in best][::-1]
        ax_k.barh(names, vals, color="tab:orange", alpha=0.85)
        ax_k.set_xlabel("matches")
        ax_k.set_title(f"top {len(names)} of {nk:,} {key}s with matches")
        ax_k.tick_params(axis="y", labelsize=8)
        ax_k.grid(True, axis="x", alpha=0.3)
    return _save(fig, out)


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1000:.3g} ms"


def _padded(t: np.ndarray) -> tuple[int, int]:
    """The drawn time range around times ``t``: their span and a twentieth of it each side."""
    lo, hi = int(t.min()), int(t.max())
    pad = max(1, (hi - lo) // 20)
    return lo - pad, hi + pad


def _zoom(matches: pa.Table, time: str, max_matches: int | None) -> tuple[int, int] | None:
    """The time range ``plot_key`` draws for its first ``max_matches`` matches, from the matches
    alone (None when they cannot tell it: no such limit, no integer ``time`` column)."""
    if max_matches is None or not matches.num_rows or time not in matches.column_names or \
            not pa.types.is_integer(matches.schema.field(time).type):
        return None
    ids = matches.column("match_id")
    first = pc.unique(ids.take(pc.sort_indices(ids))).slice(0, max_matches)  # (as plot_key takes them)
    return _padded(time_numbers(matches.filter(pc.is_in(ids, first)).column(time)))


def _key_value(v: Any, typ: pa.DataType) -> Any:
    """A key value as the summary writes it (a string) in the key column's type."""
    return int(v) if pa.types.is_integer(typ) else v


def _key_rows(out_dir: Path, key: str, value: Any, columns: Sequence[Any],
              first: int | None) -> tuple[pa.Table, int]:
    """One key's rows of a scan's output folder, only those of its ``first`` matches (timed-out
    partial matches left out; None: all), and its number of matches. The key, pattern and match
    ids are read first, row group by row group (the key as a dictionary: no string made per
    row); the other ``columns`` only of the row groups that hold the rows drawn."""
    import pyarrow.dataset as ds

    fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns={key, PATTERN_COL}),
                               default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))
    data = ds.dataset(str(out_dir), format=fmt, partitioning="hive")
    names = data.schema.names
    ident = [c for c in (PATTERN_COL, "match_id", "timed_out") if c in names]
    groups = [rg for frag in data.get_fragments() for rg in frag.split_by_row_group()]
    hits = []
    for i, rg in enumerate(groups):
        t = rg.to_table(schema=data.schema, columns=[key, *ident])
        hit = _equal(t.column(key), value)
        if "timed_out" in ident:
            hit &= ~pc.fill_null(t.column("timed_out"), False).to_numpy(zero_copy_only=False)
        at = np.flatnonzero(hit)
        if at.size:
            hits.append(t.select(ident).take(pa.array(at)).append_column("_group", pa.array(np.full(at.size, i)))
                        .append_column("_at", pa.array(at)))
    cols = [c for c in dict.fromkeys(columns) if c is not None and c in names]
    if not hits:
        return data.schema.empty_table().select(cols), 0
    hits_t = unique_match_ids(pa.concat_tables(hits))
    uid = hits_t.column("match_id").to_numpy()
    ids = np.unique(uid)
    if first is not None:
        hits_t = hits_t.filter(pa.array(np.isin(uid, ids[:first])))
    parts = []
    group, at = hits_t.column("_group").to_numpy(), hits_t.column("_at").to_numpy()
    for i in np.unique(group):
        parts.append(groups[i].to_table(schema=data.schema, columns=cols).take(pa.array(at[group == i])))
    return pa.concat_tables(parts), len(ids)


def _equal(col: pa.ChunkedArray, value: Any) -> np.ndarray:
    """Rows of ``col`` equal to ``value`` (a dictionary column compared on its indices)."""
    if not pa.types.is_dictionary(col.type):
        return pc.fill_null(pc.equal(col, pa.scalar(value, col.type)), False).to_numpy(zero_copy_only=False)
    out = [np.zeros(len(c), bool) for c in col.chunks]
    for c, o in zip(col.chunks, out):
        i = pc.index(c.dictionary, pa.scalar(value, c.dictionary.type)).as_py()
        if i >= 0:
            np.equal(c.indices.to_numpy(zero_copy_only=False), i, out=o)
    return np.concatenate(out) if out else np.zeros(0, bool)


def scan_picture_path(out_dir: str | os.PathLike) -> Path:
    """Where ``colcep scan`` puts the picture of ``out_dir``: beside it, ``<out_dir>.png``."""
    p = Path(out_dir)
    return p.with_name(p.name + ".png")


def plot_scan(out_dir: str | os.PathLike, *, key_value: Any = None, column: str = "price",
              max_matches: int | None = 12, data: Any = None, out: str | os.PathLike | None = None,
              overview: "tuple[TimeHistogram, dict] | None" = None):
    """The picture of a ``colcep scan`` output folder: matches over time and the top keys,
    above one key's ``column`` with its matches marked (``key_value``, default the key with the
    most matches; zoomed to its first ``max_matches`` matches; skipped when the input or the
    column is not available). ``data`` overrides the input named in ``_summary.json``.
    ``overview``: the matches' first times and matches per key (as :func:`match_starts` gives
    them), when the caller counted them as the folder was written (``colcep scan`` does:
    :meth:`colcep.tools.summary.Summary.start_times`); then only the drawn key's rows are read.
    Returns the Figure; ``out`` (default ``<out_dir>.png``) receives the PNG.

    The folder is read a batch at a time for the overview, and only the drawn key's rows for
    the key's picture: a day's scan of 10^8 matched events is drawn in little memory."""
    import pyarrow.dataset as ds

    out_dir = Path(out_dir)
    summary = json.loads((out_dir / "_summary.json").read_text()) if (out_dir / "_summary.json").is_file() else {}
    key, time, seq = summary.get("key", "name"), summary.get("time", "ts"), summary.get("seq")
    unit = summary.get("time_unit") or "ms"
    d = _dataset(out_dir)
    names = d.schema.names
    if time not in names:
        raise ValueError(f"the matches have no {time!r} column: scan with it in the output columns")
    has_keys = key is not None and key in names
    top = summary.get("result", {}).get("top_keys")
    if key_value is None and has_keys and top:
        key_value = _key_value(next(iter(top)), d.schema.field(key).type)
    key_cols = ("match_id", "timed_out", key, time, "stage", "row", column, seq)
    mine: list = []
    total = None  # (the key's matches, when only its first are read)
    if overview is not None:
        start, per_key = overview
    else:  # one pass: the overview's figures, and the drawn key's rows when the summary names it
        wanted = (PATTERN_COL, "match_id", "timed_out", key, time) + \
            (key_cols if key_value is not None or key is None else ())

        def batches() -> Iterator[pa.RecordBatch]:
            for b in _match_batches(out_dir, wanted)[0]:
                if key is not None and key_value is not None:
                    mine.append(b.filter(pc.equal(b.column(key), pa.scalar(key_value, b.schema.field(key).type))))
                yield b

        start, per_key = match_starts(batches(), key if has_keys else None, time)
    if key is not None and key_value is None and has_keys and per_key:  # (no summary: a second pass for the key)
        key_value = _key_value(min(per_key, key=lambda v: (-per_key[v], v is None, v)), d.schema.field(key).type)
        mine = [d.to_table(filter=ds.field(key) == key_value)]
    elif overview is not None and key is not None and key_value is not None:
        rows, total = _key_rows(out_dir, key, key_value, (PATTERN_COL, *key_cols), max_matches)
        mine = rows.to_batches()
    if data is None and summary.get("input") and "," not in summary["input"] and Path(summary["input"]).exists():
        data = summary["input"]
    can_key = start.total > 0 and (key is None or key_value is not None) and \
        (column in names or (data is not None and seq is not None))
    fig = _figure(12, 8 if can_key else 4)
    if can_key:
        gs = fig.add_gridspec(2, 3, height_ratios=[1, 1.25])
        top_axes = [fig.add_subplot(gs[0, :2]), fig.add_subplot(gs[0, 2])] if key else [fig.add_subplot(gs[0, :])]
        ax_key = fig.add_subplot(gs[1, :])
    else:
        gs = fig.add_gridspec(1, 3)
        top_axes = [fig.add_subplot(gs[0, :2]), fig.add_subplot(gs[0, 2])] if key else [fig.add_subplot(gs[0, :])]
        ax_key = None
    name = summary.get("pattern", "")
    _draw_overview(start, per_key, key=key, time=time, time_unit=unit, bins=60, top=15, out=None, axes=top_axes,
                   title=f"{name}: {start.total:,} matches over time" if name else None)
    if ax_key is not None:
        rows = d.to_table() if key is None else pa.Table.from_batches(mine) if mine else d.schema.empty_table()
        plot_key(data, unique_match_ids(rows), key_value, key=key, time=time, column=column, time_unit=unit, seq=seq,
                 max_matches=max_matches, ax=ax_key, total=total)
    return _save(fig, scan_picture_path(out_dir) if out is None else out)

