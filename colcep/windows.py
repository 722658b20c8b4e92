"""Flink's window assigners on columns: assign windows, aggregate per key and window, stream.

    bars = ohlc(ticks, Tumbling("1min"), key="name")                 # open high low close volume count
    agg = aggregate(ticks, Sliding("10s", "2s"), {"vwap_num": ("pv", "sum")}, key="name")
    tagged = assign(ticks, Session("30s"), key="name")              # + window_start, window_end

Assignment follows Flink's event-time assigners exactly (``colcep.kernels.windows`` holds the
transcriptions): ``TumblingEventTimeWindows``, ``SlidingEventTimeWindows``, (Dynamic)
``EventTimeSessionWindows`` with ``TimeWindow.mergeWindows``, ``KeyedStream.countWindow`` and
``GlobalWindows``. Windows are half-open ``[window_start, window_end)`` in the time column's
unit and type. Durations are integers in the time column's unit, strings (``"500ms"``,
``"1min"``, ``"-8h"``) or ``timedelta``; an integer time column is read in ``time_unit``.

``assign``, ``aggregate`` and ``ohlc`` also take a pyspark DataFrame and return one (Arrow
batches through ``mapInArrow``, or Spark's own ``groupBy`` for tumbling / sliding windows);
``WindowAggregator`` is the streaming form, with a watermark and a side output of late rows.
"""
from __future__ import annotations

import datetime as _dt
import functools
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.errors import InputError, WindowSpecError
from colcep.engine.keys import KeyCodes
from colcep.kernels import arrays as karr
from colcep.kernels import windows as kwin
from colcep.durations import check_duration as _check_duration
from colcep.durations import to_units as _to_units
from colcep.engine.matcher import as_table
from colcep.engine.watermark import bounded, bounded_array, next_watermark, time_values
from colcep.firings import Fired, FiringState
from colcep.triggers import KINDS, Evictor, Trigger, check_delta_columns, compile_firing

__all__ = ["Tumbling", "Sliding", "Session", "Count", "Global", "WindowSpec", "WindowSpecError",
           "assign", "aggregate", "ohlc", "WindowAggregator", "AGG_FUNCS"]

AGG_FUNCS = ("count", "sum", "min", "max", "first", "last", "mean")
_TIME_UNITS = ("s", "ms", "us", "ns")
_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max


# ---------------------------------------------------------------------------------- window specs
class WindowSpec:
    """Base class of the window specifications (Flink's window assigners)."""

    time_based = True


@dataclass(frozen=True)
class Tumbling(WindowSpec):
    """``TumblingEventTimeWindows.of(size, offset)``: ``start = ts - (ts - offset + size) % size``
    (``TimeWindow.getWindowStartWithOffset``). Windows depend on ``offset`` modulo ``size``
    only, so negative offsets and offsets larger than the size give the grid shifted by
    ``offset mod size`` (size 3, offset 4: [1, 4), [4, 7)...). Flink 2.3 refuses ``|offset| >=
    size`` (and Sliding's ``|offset| >= slide``); colcep takes the offset modulo, the same grid.
    """

    size: Any
    offset: Any = 0

    def __post_init__(self):
        _check_duration(self.size, "Tumbling size")
        _check_duration(self.offset, "Tumbling offset", signed=True)


@dataclass(frozen=True)
class Sliding(WindowSpec):
    """``SlidingEventTimeWindows.of(size, slide, offset)``: a row at ``ts`` belongs to every
    window ``[start, start + size)`` with ``start`` from ``lastStart = getWindowStartWithOffset(ts,
    offset % slide, slide)`` down by ``slide`` while ``start > ts - size``. When ``slide`` does
    not divide ``size`` rows belong to ``floor`` or ``ceil(size / slide)`` windows; with ``slide >
    size`` rows between windows belong to none (Flink drops them, and so do assign/aggregate)."""

    size: Any
    slide: Any
    offset: Any = 0

    def __post_init__(self):
        _check_duration(self.size, "Sliding size")
        _check_duration(self.slide, "Sliding slide")
        _check_duration(self.offset, "Sliding offset", signed=True)


@dataclass(frozen=True)
class Session(WindowSpec):
    """``EventTimeSessionWindows.withGap(gap)``, or with ``gap_column`` the dynamic form
    (``DynamicEventTimeSessionWindows``: the gap is read per row and must be > 0). Each row
    opens ``[ts, ts + gap)``; per key, windows sorted by start merge while they intersect
    (``start <= other.end && end >= other.start``, so touching windows merge) into their cover."""

    gap: Any = None
    gap_column: str | None = None

    def __post_init__(self):
        if (self.gap is None) == (self.gap_column is None):
            raise WindowSpecError("Session needs exactly one of gap (fixed) or gap_column (dynamic)")
        if self.gap is not None:
            _check_duration(self.gap, "Session gap")
        elif not isinstance(self.gap_column, str) or not self.gap_column:
            raise WindowSpecError(f"Session gap_column must be a column name, got {self.gap_column!r}")

    @classmethod
    def dynamic(cls, gap_column: str) -> "Session":
        """Session windows whose gap is read from ``gap_column`` (time column units or a duration)."""
        return cls(gap_column=gap_column)


@dataclass(frozen=True)
class Count(WindowSpec):
    """``KeyedStream.countWindow(size[, slide])``: windows by row count per key, counted in
    input (arrival) order. Tumbling: every ``size`` rows. Sliding: every ``slide`` rows, over
    the last ``size`` rows (the first firings hold fewer: ``CountEvictor`` keeps what there is).
    Flink never fires the rows after the last firing; ``partial=True`` also evaluates what the
    window holds at the end of input."""

    size: int
    slide: int | None = None
    partial: bool = False

    time_based = False

    def __post_init__(self):
        for name, v in (("size", self.size), ("slide", self.slide)):
            if v is None and name == "slide":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise WindowSpecError(f"Count {name} must be a positive int (rows), got {v!r}")


@dataclass(frozen=True)
class Global(WindowSpec):
    """``GlobalWindows``: every row of a key in one window, evaluated at the end of input
    (Flink's default NeverTrigger would never fire; this is a bounded job's end-of-input)."""

    time_based = False


@dataclass(frozen=True)
class _Resolved:
    kind: str  # sliding (tumbling too) | session | count | global
    size: int = 0
    slide: int = 0
    offset: int = 0
    gap: int = 0
    gap_column: str | None = None
    purging: bool = False
    partial: bool = False


def _resolve(window: WindowSpec, unit: str) -> _Resolved:
    if isinstance(window, Tumbling):
        size = _to_units(window.size, unit, "Tumbling size")
        return _Resolved("sliding", size, size, _to_units(window.offset, unit, "Tumbling offset", True) % size)
    if isinstance(window, Sliding):
        slide = _to_units(window.slide, unit, "Sliding slide")
        return _Resolved("sliding", _to_units(window.size, unit, "Sliding size"), slide,
                         _to_units(window.offset, unit, "Sliding offset", True) % slide)
    if isinstance(window, Session):
        gap = _to_units(window.gap, unit, "Session gap") if window.gap is not None else 0
        return _Resolved("session", gap=gap, gap_column=window.gap_column)
    if isinstance(window, Count):
        slide = int(window.slide) if window.slide is not None else int(window.size)
        return _Resolved("count", int(window.size), slide, purging=window.slide is None, partial=window.partial)
    if isinstance(window, Global):
        return _Resolved("global")
    raise WindowSpecError(f"expected a window spec (Tumbling, Sliding, Session, Count, Global), got {window!r}")


# ---------------------------------------------------------------------------------- input
def _time_unit(tt: pa.DataType, time: str, time_unit: str) -> str:
    if pa.types.is_timestamp(tt):
        return tt.unit
    if pa.types.is_integer(tt):
        if time_unit not in _TIME_UNITS:
            raise InputError(f"time_unit must be one of {list(_TIME_UNITS)}, got {time_unit!r}")
        return time_unit
    raise InputError(f"time column {time!r} must be an integer or timestamp column, not {tt}")


def _check_columns(tbl: pa.Table, key: str | None, time: str) -> None:
    names = tbl.column_names
    if time not in names:
        raise InputError(f"time column {time!r} is missing; the input has {names}")
    if key is not None and key not in names:
        raise InputError(f"key column {key!r} is missing; the input has {names}")
    if key is not None:
        kt = tbl.schema.field(key).type
        if pa.types.is_floating(kt) or pa.types.is_nested(kt):
            raise InputError(f"key column {key!r} must be a string, integer, boolean or temporal column, not {kt}")


def _gaps(tbl: pa.Table, spec: _Resolved, unit: str, row0: int = 0) -> np.ndarray:
    """The session gap per row (dynamic) or the fixed gap; dynamic gaps must be > 0."""
    if spec.gap_column is None:
        return np.array([spec.gap], np.int64)
    name = spec.gap_column
    if name not in tbl.column_names:
        raise InputError(f"gap column {name!r} is missing; the input has {tbl.column_names}")
    col = tbl.column(name)
    if pa.types.is_duration(col.type):
        col = col.cast(pa.duration(unit))
    elif not pa.types.is_integer(col.type):
        raise InputError(f"gap column {name!r} must be an integer (time column units) or duration column, "
                         f"not {col.type}")
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"gap column {name!r} has a null at row {row0 + row}; a dynamic session gap "
                         "must satisfy 0 < gap")
    gaps = np.ascontiguousarray(col.cast(pa.int64()).to_numpy(), dtype=np.int64)
    bad = np.flatnonzero(gaps <= 0)
    if bad.size:
        r = int(bad[0])
        raise InputError(f"gap column {name!r} at row {row0 + r} is {int(gaps[r])}: a dynamic session gap "
                         "must satisfy 0 < gap (Flink: DynamicEventTimeSessionWindows)")
    return gaps


@dataclass
class _Layout:
    """Rows grouped by key (``order``: positions to input rows) and the windows as ranges."""

    order: np.ndarray
    w_key: np.ndarray
    w_lo: np.ndarray
    w_hi: np.ndarray
    w_start: np.ndarray | None = None
    w_end: np.ndarray | None = None
    w_id: np.ndarray | None = None


def _layout(ts: np.ndarray, codes: np.ndarray, n_keys: int, spec: _Resolved, gaps: np.ndarray | None,
            base: np.ndarray | None = None, fired: np.ndarray | None = None) -> _Layout:
    order, key_ptr = karr.group_by_key(codes, n_keys)
    if spec.kind != "count":  # count windows count in input (arrival) order
        ts_g = ts[order]
        if kwin.first_unsorted(ts_g, key_ptr) >= 0:
            order = np.lexsort((ts, codes))  # stable: ties keep input order
            ts_g = ts[order]
    if spec.kind in ("sliding", "session"):
        if spec.kind == "sliding":
            k, s, lo, hi = kwin.time_windows(ts_g, key_ptr, spec.size, spec.slide, spec.offset)
            return _Layout(order, k, lo, hi, w_start=s, w_end=s + spec.size)
        g = gaps[order] if gaps.shape[0] > 1 or ts.shape[0] == 1 else gaps
        k, s, e, lo, hi = kwin.session_windows(ts_g, g, key_ptr)
        return _Layout(order, k, lo, hi, w_start=s, w_end=e)
    if spec.kind == "count":
        z = np.zeros(n_keys, np.int64)
        k, wid, lo, hi = kwin.count_windows(key_ptr, spec.size, spec.slide, spec.purging, spec.partial,
                                            z if base is None else base, z if fired is None else fired)
        return _Layout(order, k, lo, hi, w_id=wid)
    nonempty = np.flatnonzero(key_ptr[1:] > key_ptr[:-1])
    return _Layout(order, nonempty.astype(np.int64), key_ptr[nonempty], key_ptr[nonempty + 1],
                   w_id=np.zeros(nonempty.shape[0], np.int64))


def _time_array(values: np.ndarray, tt: pa.DataType) -> pa.Array:
    arr = pa.array(values, pa.int64())
    return arr.cast(tt) if pa.types.is_timestamp(tt) else arr


def _window_columns(lay: _Layout, sel: np.ndarray | slice, tt: pa.DataType) -> dict[str, pa.Array]:
    if lay.w_id is not None:
        return {"window_id": pa.array(lay.w_id[sel], pa.int64())}
    return {"window_start": _time_array(lay.w_start[sel], tt), "window_end": _time_array(lay.w_end[sel], tt)}


def _with_columns(tbl: pa.Table, cols: dict[str, pa.Array]) -> pa.Table:
    for name, arr in cols.items():
        if name in tbl.column_names:
            raise InputError(f"the input already has a column {name!r}, which assign() adds; rename it")
        tbl = tbl.append_column(name, arr)
    return tbl


# ---------------------------------------------------------------------------------- assign
def assign(data: Any, window: WindowSpec, key: str | None = None, time: str = "ts",
           time_unit: str = "ms") -> Any:
    """The input rows with their window: ``window_start`` and ``window_end`` (time windows, in
    the time column's type) or ``window_id`` (count and global windows, numbered per key).

    Rows keep input order. A sliding window row appears once per window (ascending start);
    rows in no window (sliding gaps, count rows Flink never fires) are left out. A pyspark
    DataFrame gives a pyspark DataFrame."""
    if _is_spark(data):
        return _spark_assign(data, window, key, time, time_unit)
    tbl = as_table(data)
    _check_columns(tbl, key, time)
    unit = _time_unit(tbl.schema.field(time).type, time, time_unit)
    spec = _resolve(window, unit)
    tt = tbl.schema.field(time).type
    ts = time_values(tbl, time)
    if spec.kind == "sliding":  # row-local: Flink assigns each row on its own, whatever its key
        if key is not None:
            KeyCodes(key).check_nulls(tbl)
        if spec.size == spec.slide:  # tumbling: one window per row
            starts = kwin.tumbling_assign(ts, spec.size, spec.offset)
            out = tbl
        else:
            rows, starts = kwin.sliding_assign(ts, spec.size, spec.slide, spec.offset)
            out = tbl.take(pa.array(rows, pa.int64()))
        return _with_columns(out, {"window_start": _time_array(starts, tt),
                                   "window_end": _time_array(starts + spec.size, tt)})
    keys = KeyCodes(key)
    codes = keys.encode(tbl)
    gaps = _gaps(tbl, spec, unit) if spec.kind == "session" else None
    lay = _layout(ts, codes, keys.n, spec, gaps)
    total = int((lay.w_hi - lay.w_lo).sum())
    pos, win = kwin.explode_ranges(lay.w_lo, lay.w_hi, total)
    if spec.kind == "count" and not spec.purging:  # evictor windows overlap (a partial one too)
        rows = lay.order[pos]
        perm = np.argsort(rows, kind="stable")
        rows, win = rows[perm], win[perm]
    else:  # at most one window per row: scatter
        win_of = np.full(tbl.num_rows, -1, np.int64)
        win_of[lay.order[pos]] = win
        rows = np.flatnonzero(win_of >= 0)
        win = win_of[rows]
    out = tbl if rows.shape[0] == tbl.num_rows else tbl.take(pa.array(rows, pa.int64()))
    return _with_columns(out, _window_columns(lay, win, tt))


# ---------------------------------------------------------------------------------- aggregate
def _parse_aggs(aggs: Any) -> list[tuple[str, str | None, str]]:
    """``{name: (column, func)}`` / ``{name: "count"}`` or ``[(column, func), ...]`` (named
    ``column_func``) to ``[(name, column, func)]``."""
    items: list[tuple[str, str | None, str]] = []
    if isinstance(aggs, Mapping):
        for name, v in aggs.items():
            if isinstance(v, str):
                v = (None, v)
            if not (isinstance(v, tuple) and len(v) == 2):
                raise WindowSpecError(f"aggregation {name!r} must be (column, func) or 'count', got {v!r}")
            items.append((str(name), v[0], v[1]))
    elif isinstance(aggs, Iterable) and not isinstance(aggs, str):
        for v in aggs:
            if not (isinstance(v, tuple) and len(v) == 2):
                raise WindowSpecError(f"an aggregation must be a (column, func) pair, got {v!r}")
            items.append((v[1] if v[0] is None else f"{v[0]}_{v[1]}", v[0], v[1]))
    else:
        raise WindowSpecError(f"aggs must be a dict {{name: (column, func)}} or a list of (column, func), "
                              f"got {aggs!r}")
    seen = set()
    for name, column, func in items:
        if func not in AGG_FUNCS:
            raise WindowSpecError(f"aggregation {name!r}: unknown function {func!r}; use one of {list(AGG_FUNCS)}")
        if column is None and func != "count":
            raise WindowSpecError(f"aggregation {name!r}: {func} needs a column (only count counts rows)")
        if name in seen:
            raise WindowSpecError(f"aggregation name {name!r} is used twice")
        seen.add(name)
    return items


def _check_agg_types(schema: pa.Schema, items: list[tuple[str, str | None, str]]) -> None:
    for name, column, func in items:
        if column is None:
            continue
        if column not in schema.names:
            raise InputError(f"aggregation {name!r}: column {column!r} is missing; the input has {schema.names}")
        t = schema.field(column).type
        numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
        if func in ("sum", "mean") and not numeric:
            raise InputError(f"aggregation {name!r}: column {column!r} has type {t}; {func} needs a numeric "
                             "or boolean column")
        if func in ("min", "max") and not (numeric or pa.types.is_timestamp(t) or pa.types.is_duration(t)
                                           or pa.types.is_date(t)):
            raise InputError(f"aggregation {name!r}: column {column!r} has type {t}; {func} needs a numeric "
                             "or temporal column")


def _agg_values(col: pa.ChunkedArray) -> np.ndarray:
    """float64 for floating columns, int64 otherwise (booleans as 0 / 1); nulls as 0."""
    t = col.type
    if pa.types.is_floating(t):
        return np.ascontiguousarray(col.cast(pa.float64()).fill_null(0.0).to_numpy(), dtype=np.float64)
    if pa.types.is_date32(t):
        col = col.cast(pa.int32())
    elif pa.types.is_boolean(t):
        col = col.cast(pa.int8())
    return np.ascontiguousarray(col.cast(pa.int64()).fill_null(0).to_numpy(), dtype=np.int64)


def _take_positions(col: pa.ChunkedArray, order: np.ndarray, pos: np.ndarray) -> pa.Array:
    """``col`` at the input rows behind sorted positions ``pos`` (-1: null)."""
    none = pos < 0
    rows = order[np.where(none, 0, pos)] if order.shape[0] else np.zeros(pos.shape[0], np.int64)
    out = col.take(pa.array(rows, pa.int64(), mask=none if none.any() else None))
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def _agg_table(tbl: pa.Table, lay: _Layout, items: list[tuple[str, str | None, str]], keys: KeyCodes,
               tt: pa.DataType, sel: np.ndarray | None = None) -> pa.Table:
    """One row per window of ``lay`` (or of the windows ``sel``): key, window columns, aggregates."""
    if sel is not None:
        lay = _Layout(lay.order, lay.w_key[sel], lay.w_lo[sel], lay.w_hi[sel],
                      None if lay.w_start is None else lay.w_start[sel],
                      None if lay.w_end is None else lay.w_end[sel], None if lay.w_id is None else lay.w_id[sel])
    cols: dict[str, pa.Array] = {}
    if keys.name is not None:
        cols[keys.name] = keys.take(lay.w_key)
    cols.update(_window_columns(lay, slice(None), tt))
    for name, _, _ in items:
        if name in cols:
            raise WindowSpecError(f"aggregation name {name!r} clashes with an output column; rename it")
    valid_of: dict = {}
    cfl_of: dict = {}
    smm_of: dict = {}
    for name, column, func in items:
        if column is None:
            cols[name] = pa.array(lay.w_hi - lay.w_lo, pa.int64())
            continue
        col = tbl.column(column)
        if column not in valid_of:
            valid_of[column] = np.zeros(0, np.uint8) if col.null_count == 0 else np.ascontiguousarray(
                col.is_valid().to_numpy(zero_copy_only=False)[lay.order], dtype=np.uint8)
        valid = valid_of[column]
        if func in ("count", "first", "last", "mean"):
            if column not in cfl_of:
                cfl_of[column] = kwin.range_count_first_last(valid, lay.w_lo, lay.w_hi)
            cnt, first, last = cfl_of[column]
        if func in ("sum", "min", "max", "mean") and column not in smm_of:
            smm_of[column] = kwin.range_sum_min_max(_agg_values(col)[lay.order], valid, lay.w_lo, lay.w_hi)
        if func == "count":
            cols[name] = pa.array(cnt, pa.int64())
        elif func in ("first", "last"):
            cols[name] = _take_positions(col, lay.order, first if func == "first" else last)
        elif func in ("min", "max"):
            _, amin, amax = smm_of[column]
            cols[name] = _take_positions(col, lay.order, amin if func == "min" else amax)
        elif func == "sum":
            cols[name] = pa.array(smm_of[column][0])
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = smm_of[column][0].astype(np.float64) / cnt
            cols[name] = pa.array(mean, pa.float64(), mask=cnt == 0)
    return pa.table(cols)


def aggregate(data: Any, window: WindowSpec, aggs: Any, key: str | None = None, time: str = "ts",
              time_unit: str = "ms", engine: str = "auto", *, trigger: Trigger | None = None,
              evictor: Evictor | None = None, allowed_lateness: Any = None, out_of_orderness: Any = 0,
              order: str | None = None) -> Any:
    """One row per key and non-empty window: the key, ``window_start`` / ``window_end`` (or
    ``window_id``) and the aggregates, ordered by key (first seen) then window.

    ``aggs``: ``{name: (column, func)}`` with func in count, sum, min, max, first, last, mean
    (``(None, "count")`` or ``"count"`` counts rows), or a list of ``(column, func)`` named
    ``column_func``. Nulls are skipped; over no values count and sum are 0, the rest null.
    first / last follow time order (ties: input order; count windows: input order). ``engine``
    applies to pyspark DataFrames only: "arrow" (mapInArrow), "native" (Spark groupBy;
    tumbling and sliding windows) or "auto" (native where it applies, measured faster).

    With a ``trigger``, an ``evictor`` or an ``allowed_lateness`` (``colcep.triggers``), windows
    fire as Flink's window operator fires them over the rows in input order, the watermark
    after each row being ``max time so far - out_of_orderness - 1`` (a per-event watermark
    generator): one row per firing, with ``firing`` (0, 1, ... per key and window) and ``kind``
    (``early``: before the watermark reached the window's end; ``on_time``: when it did;
    ``late``: for a row that came later, within ``allowed_lateness``), rows a window no longer
    takes being dropped as Flink drops them (``WindowAggregator.pop_late`` has them). ``order``:
    a column giving the arrival order (in process: the input's order; on Spark: the time column)."""
    items = _parse_aggs(aggs)
    if _firing_mode(trigger, evictor, allowed_lateness):
        if _is_spark(data):
            return _spark_firings(data, window, items, key, time, time_unit, trigger, evictor, allowed_lateness,
                                  out_of_orderness, order)
        agg = WindowAggregator(window, dict((n, (c, f)) for n, c, f in items), key=key, time=time,
                               time_unit=time_unit, out_of_orderness=out_of_orderness, trigger=trigger,
                               evictor=evictor, allowed_lateness=allowed_lateness, watermarks="row")
        if order is not None:  # the arrival order is the order column's (stable: ties keep input order)
            data = as_table(data)
            if order not in data.column_names:
                raise InputError(f"order column {order!r} is missing; the input has {data.column_names}")
            data = data.sort_by(order)
        first = agg.process(data)
        rest = agg.close()
        return first if rest.num_rows == 0 else pa.concat_tables([first, rest])
    if order is not None:
        raise WindowSpecError("order= applies to windows that fire by trigger (trigger=, evictor= or "
                              "allowed_lateness=) on Spark")
    if _is_spark(data):
        return _spark_aggregate(data, window, items, key, time, time_unit, engine)
    tbl = as_table(data)
    _check_columns(tbl, key, time)
    tt = tbl.schema.field(time).type
    unit = _time_unit(tt, time, time_unit)
    spec = _resolve(window, unit)
    _check_agg_types(tbl.schema, items)
    ts = time_values(tbl, time)
    keys = KeyCodes(key)
    codes = keys.encode(tbl)
    gaps = _gaps(tbl, spec, unit) if spec.kind == "session" else None
    lay = _layout(ts, codes, keys.n, spec, gaps)
    return _agg_table(tbl, lay, items, keys, tt)


def ohlc(data: Any, window: Any = "1min", key: str | None = None, time: str = "ts",
         price: str = "price", volume: str | None = "volume", time_unit: str = "ms", engine: str = "auto",
         **firing: Any) -> Any:
    """Bars: ``open high low close`` of ``price`` (first, max, min, last in time order), the
    ``volume`` sum (unless None) and the row ``count`` per key and window; a duration (string,
    int, timedelta) means ``Tumbling(window)``. ``trigger``, ``evictor``, ``allowed_lateness``,
    ``out_of_orderness`` and ``order`` as in ``aggregate``: a bar per firing."""
    if not isinstance(window, WindowSpec):
        window = Tumbling(window)
    aggs = {"open": (price, "first"), "high": (price, "max"), "low": (price, "min"), "close": (price, "last")}
    if volume is not None:
        aggs["volume"] = (volume, "sum")
    aggs["count"] = (None, "count")
    return aggregate(data, window, aggs, key=key, time=time, time_unit=time_unit, engine=engine, **firing)


# ---------------------------------------------------------------------------------- streaming
class WindowAggregator:
    """Windowed aggregation over a stream of batches, as Flink's WindowOperator in event time.

        agg = WindowAggregator(Tumbling("1min"), {"n": "count"}, key="name", out_of_orderness="5s")
        for batch in batches:
            bars = agg.process(batch)   # the windows this batch's watermark fired
            late = agg.pop_late()       # rows that arrived behind the watermark (or None)
        bars = agg.close()

    The watermark is Flink's ``BoundedOutOfOrdernessWatermarks``, advanced after each batch:
    ``max ts seen - out_of_orderness - 1`` (or the ``watermark`` given to ``process``, if
    larger); it never goes back. A time window fires once the watermark reaches its
    ``window_end - 1``. A row with ``ts <= watermark`` on arrival is late (allowed lateness 0,
    ``WindowOperator.isElementLate``): Flink drops it (``numLateRecordsDropped``); here it is
    counted in ``late_rows`` and kept in the side output ``pop_late()``. ``close()`` is the
    final watermark (+infinity). Count windows fire on row counts in arrival order (no
    watermark, no late rows); the global window fires at ``close()``.

    With a ``trigger``, an ``evictor`` or an ``allowed_lateness`` (see ``aggregate``), each
    firing is a row with ``firing`` and ``kind``; ``watermarks="row"`` moves the watermark after
    every row (Flink's per-event generator) instead of after every batch.
    """

    def __init__(self, window: WindowSpec, aggs: Any, key: str | None = None, time: str = "ts",
                 time_unit: str = "ms", out_of_orderness: Any = 0, *, trigger: Trigger | None = None,
                 evictor: Evictor | None = None, allowed_lateness: Any = None, watermarks: str = "batch"):
        self.window = window
        self.items = _parse_aggs(aggs)
        self.key, self.time, self.time_unit = key, time, time_unit
        if not isinstance(window, WindowSpec):
            raise WindowSpecError(f"expected a window spec (Tumbling, Sliding, Session, Count, Global), got {window!r}")
        if _to_units(out_of_orderness, "ns", "out_of_orderness", signed=True, exact=False) < 0:
            raise WindowSpecError(f"out_of_orderness must be >= 0, got {out_of_orderness!r}")
        if watermarks not in ("batch", "row"):
            raise WindowSpecError(f"watermarks must be 'batch' or 'row', got {watermarks!r}")
        if watermarks == "row" and not _firing_mode(trigger, evictor, allowed_lateness):
            raise WindowSpecError("watermarks='row' applies to windows that fire by trigger (trigger=, evictor= or "
                                  "allowed_lateness=)")
        self._firing_args = (trigger, evictor, allowed_lateness) if _firing_mode(trigger, evictor, allowed_lateness) \
            else None
        if self._firing_args is not None:
            _firing_program(window, *self._firing_args, "ns")  # the rules, before any data
            for name, _, _ in self.items:
                if name in ("firing", "kind"):
                    raise WindowSpecError(f"aggregation name {name!r} clashes with an output column; rename it")
        self._row_watermarks = watermarks == "row"
        self._firing: FiringState | None = None
        self._last_fired: Fired | None = None  # the last step's firings (tests read the rows each evaluated)
        self._delay_arg = out_of_orderness
        self._keys = KeyCodes(key)
        self._spec: _Resolved | None = None
        self._schema: pa.Schema | None = None
        self._pending: pa.Table | None = None
        self._wm = _I64_MIN
        self._max_ts = _I64_MIN
        self._late: list[pa.Table] = []
        self.late_rows = 0
        self._rows_seen = 0
        self._base = np.zeros(0, np.int64)   # count windows: per key, count of rows before the pending ones
        self._fired = np.zeros(0, np.int64)  # count windows: per key, count at the last firing
        self._closed = False

    @property
    def watermark(self) -> int | None:
        """The current watermark in time column units (None before the first)."""
        return None if self._wm == _I64_MIN else int(self._wm)

    def pop_late(self) -> pa.Table | None:
        """The late rows received since the last call (Flink's late-data side output), or None."""
        out = pa.concat_tables(self._late) if self._late else None
        self._late = []
        return out

    def process(self, batch: Any, watermark: Any = None) -> pa.Table:
        """Feed one batch; returns the windows whose end the new watermark reached."""
        if self._closed:
            raise InputError("this WindowAggregator is closed; create a new one for a new stream")
        tbl = self._bind(as_table(batch))
        row0 = self._rows_seen
        ts = time_values(tbl, self.time, row0)
        if self._firing is not None:
            return self._process_firings(tbl, ts, row0, watermark)
        self._rows_seen += tbl.num_rows
        self._keys.encode(tbl, row0)  # a null key names its row
        spec = self._spec
        if spec.kind == "session":
            _gaps(tbl, spec, self._unit, row0)
        timed = spec.kind in ("sliding", "session")
        if timed:
            late = ts <= self._wm
            if late.any():
                self.late_rows += int(late.sum())
                self._late.append(tbl.filter(pa.array(late)))
                tbl = tbl.filter(pa.array(~late))
            if ts.shape[0]:
                self._max_ts = max(self._max_ts, int(ts.max()))  # late rows advance it too, as in Flink
        self._pending = tbl if self._pending is None else pa.concat_tables([self._pending, tbl])
        new_wm = next_watermark(None if self._wm == _I64_MIN else self._wm,
                                self._max_ts if timed and self._max_ts != _I64_MIN else None, self._delay,
                                None if watermark is None else self._time_value(watermark))
        return self._fire(_I64_MIN if new_wm is None else new_wm, final=False)

    def close(self) -> pa.Table:
        """End of input: the final watermark fires every window still open."""
        if self._closed:
            raise InputError("close() was already called")
        self._closed = True
        if self._spec is None:
            return pa.table({})
        if self._firing is not None:
            empty = self._schema.empty_table()
            none = np.zeros(0, np.int64)
            return self._run_firings(empty, time_values(empty, self.time), none, none, _I64_MAX)
        return self._fire(_I64_MAX, final=True)

    # -------------------------------------------------------------- internals
    def _bind(self, tbl: pa.Table) -> pa.Table:
        if self._schema is None:
            _check_columns(tbl, self.key, self.time)
            _check_agg_types(tbl.schema, self.items)
            self._tt = tbl.schema.field(self.time).type
            self._unit = _time_unit(self._tt, self.time, self.time_unit)
            self._spec = _resolve(self.window, self._unit)
            self._delay = _to_units(self._delay_arg, self._unit, "out_of_orderness", signed=True)
            if self._firing_args is not None:
                prog = _firing_program(self.window, *self._firing_args, self._unit)
                check_delta_columns(tbl.schema, prog)  # before the schema is bound: a bad first batch binds nothing
                self._firing = FiringState(prog)
            self._schema = tbl.schema
            return tbl
        for f in self._schema:
            if f.name not in tbl.column_names or tbl.schema.field(f.name).type != f.type:
                raise InputError(f"column {f.name!r} ({f.type}) is missing or changed type in this batch")
        return tbl if tbl.schema == self._schema else tbl.select(self._schema.names)

    def _time_value(self, x: Any) -> int:
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return int(x)
        if pa.types.is_timestamp(self._tt):
            return int(pa.scalar(x, type=self._tt).value)
        raise InputError(f"watermark must be an int in the time column's units, got {x!r}")

    def _process_firings(self, tbl: pa.Table, ts: np.ndarray, row0: int, watermark: Any) -> pa.Table:
        """One batch through the firing state: the watermark before each row, then after the batch."""
        explicit = None if watermark is None else self._time_value(watermark)
        if self._spec.kind == "session":
            _gaps(tbl, self._spec, self._unit, row0)
        codes = self._keys.encode(tbl, row0)  # a null key names its row; the last check before the state changes
        if self._row_watermarks and ts.shape[0]:
            cm = np.maximum.accumulate(ts)
            after = bounded_array(cm, self._delay)
            np.maximum(after, self._wm, out=after)
            before = np.empty_like(after)
            before[0] = self._wm
            before[1:] = after[:-1]
            max_ts = max(self._max_ts, int(cm[-1]))
        else:
            before = np.full(ts.shape[0], self._wm, np.int64)
            max_ts = max(self._max_ts, int(ts.max())) if ts.shape[0] else self._max_ts
        new_wm = next_watermark(None if self._wm == _I64_MIN else self._wm,
                                None if max_ts == _I64_MIN else max_ts, self._delay, explicit)
        out = self._run_firings(tbl, ts, codes, before, _I64_MIN if new_wm is None else new_wm)
        self._rows_seen += tbl.num_rows
        self._max_ts = max_ts
        return out

    def _run_firings(self, tbl: pa.Table, ts: np.ndarray, codes: np.ndarray, before: np.ndarray,
                     new_wm: int) -> pa.Table:
        gaps = _gaps(tbl, self._spec, self._unit) if self._spec.kind == "session" and tbl.num_rows \
            else np.array([self._spec.gap], np.int64)
        fired = self._firing.step(tbl, ts, codes, self._keys.n, np.ascontiguousarray(before, np.int64), new_wm,
                                  gaps)
        self._wm = max(self._wm, new_wm)
        self._last_fired = fired
        late = fired.late.view(bool)
        if late.any():
            self.late_rows += int(late.sum())
            self._late.append(tbl.filter(pa.array(late)))
        return _fired_table(fired, self.items, self._keys, self._tt, self._spec.kind == "global")

    def _fire(self, new_wm: int, final: bool) -> pa.Table:
        spec, tbl = self._spec, self._pending
        old_wm, self._wm = self._wm, new_wm
        ts = time_values(tbl, self.time)
        codes = self._keys.encode(tbl)
        n = ts.shape[0]
        if spec.kind in ("sliding", "session"):
            gaps = _gaps(tbl, spec, self._unit) if spec.kind == "session" else None
            lay = _layout(ts, codes, self._keys.n, spec, gaps)
            mx = lay.w_end - 1  # TimeWindow.maxTimestamp()
            sel = np.flatnonzero((mx > old_wm) & (mx <= new_wm))
            last_end = np.full(n, _I64_MIN, np.int64)  # a row stays while one of its windows is open
            total = int((lay.w_hi - lay.w_lo).sum())
            pos, win = kwin.explode_ranges(lay.w_lo, lay.w_hi, total)
            np.maximum.at(last_end, lay.order[pos], lay.w_end[win])
            keep = last_end - 1 > new_wm
        elif spec.kind == "count":
            n_keys = self._keys.n
            if self._base.shape[0] < n_keys:
                pad = np.zeros(n_keys - self._base.shape[0], np.int64)
                self._base, self._fired = np.concatenate([self._base, pad]), np.concatenate([self._fired, pad])
            run = _Resolved("count", spec.size, spec.slide, purging=spec.purging, partial=final and spec.partial)
            lay = _layout(ts, codes, n_keys, run, None, self._base, self._fired)
            sel = None
            counts = np.bincount(codes, minlength=n_keys)
            self._fired = np.maximum(self._fired, ((self._base + counts) // spec.slide) * spec.slide)
            keep_from = self._fired if spec.purging else np.maximum(self._fired - spec.size, 0)
            key_ptr = np.zeros(n_keys + 1, np.int64)
            np.cumsum(counts, out=key_ptr[1:])
            abs_idx = np.empty(n, np.int64)  # each pending row's index among its key's rows
            abs_idx[lay.order] = np.arange(n) - np.repeat(key_ptr[:-1] - self._base, counts)
            keep = abs_idx >= keep_from[codes]
            self._base = np.maximum(self._base, keep_from)
        else:  # global: fires at the end of input only
            lay = _layout(ts, codes, self._keys.n, spec, None)
            sel = None if final else np.zeros(0, np.int64)
            keep = np.full(n, not final)
        out = _agg_table(tbl, lay, self.items, self._keys, self._tt, sel)
        self._pending = tbl if keep.all() else tbl.filter(pa.array(keep))
        return out


def _firing_mode(trigger: Any, evictor: Any, allowed_lateness: Any) -> bool:
    return trigger is not None or evictor is not None or allowed_lateness is not None


def _firing_program(window: WindowSpec, trigger: Any, evictor: Any, allowed_lateness: Any, unit: str):
    spec = _resolve(window, unit)
    lateness = 0 if allowed_lateness is None else _to_units(allowed_lateness, unit, "allowed_lateness", signed=True)
    return compile_firing(spec.kind, spec.size, spec.slide, spec.offset, spec.gap, trigger, evictor, lateness, unit)


def _fired_table(fired: Fired, items: list, keys: KeyCodes, tt: pa.DataType, global_window: bool) -> pa.Table:
    """One row per firing, by key (first seen), window and firing: the key, the window, ``firing``,
    ``kind`` and the aggregates over the rows the firing evaluated."""
    o = np.lexsort((fired.seq, fired.end, fired.start, fired.key))
    lay = _Layout(fired.pos, fired.key[o], fired.lo[o], fired.hi[o])
    if global_window:
        lay.w_id = np.zeros(o.shape[0], np.int64)
    else:
        lay.w_start, lay.w_end = fired.start[o], fired.end[o]
    out = _agg_table(fired.rows, lay, items, keys, tt)
    at = (keys.name is not None) + (1 if global_window else 2)
    out = out.add_column(at, "firing", pa.array(fired.seq[o], pa.int64()))
    kinds = pa.DictionaryArray.from_arrays(pa.array(fired.kind[o].astype(np.int8)), pa.array(list(KINDS)))
    return out.add_column(at + 1, "kind", kinds.cast(pa.string()))


# ---------------------------------------------------------------------------------- Spark
def _is_spark(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark.sql") and hasattr(data, "mapInArrow")


@dataclass(frozen=True)
class _SparkPlan:
    """What a Spark task runs: plain data, shipped to the Python workers by value."""

    mode: str  # assign | aggregate
    window: WindowSpec
    key: str | None
    time: str
    time_unit: str
    aggs: tuple = ()
    firing: tuple = ()  # trigger, evictor, allowed_lateness, out_of_orderness
    final_wm: int | None = None  # firings: the watermark after the last row of all (before the end of input)

    def run(self, tbl: pa.Table) -> pa.Table:
        if self.mode == "firings":
            return _firings_given(tbl, self)
        if self.mode == "assign":
            return assign(tbl, self.window, key=self.key, time=self.time, time_unit=self.time_unit)
        return aggregate(tbl, self.window, {n: (c, f) for n, c, f in self.aggs}, key=self.key, time=self.time,
                         time_unit=self.time_unit)


def _arrow_partition(plan: _SparkPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body. Row-local assignment (tumbling, sliding) runs per batch; otherwise the
    partition arrives sorted by (key, time) and a key's rows are gathered across batches (a key
    may span batch boundaries) and run as soon as the next key starts."""
    spec = plan.window
    if plan.mode == "assign" and isinstance(spec, (Tumbling, Sliding)):
        for b in batches:
            yield from plan.run(pa.Table.from_batches([b])).to_batches()
        return
    carry: list[pa.RecordBatch] = []
    carry_key: Any = None
    for b in batches:
        if b.num_rows == 0:
            continue
        if plan.key is None:
            carry.append(b)
            continue
        kcol = b.column(plan.key)
        last = kcol[b.num_rows - 1]
        same = pc.fill_null(pc.equal(kcol, last), False).to_numpy(zero_copy_only=False)
        start_last = b.num_rows - (int(np.argmin(same[::-1])) if not same.all() else b.num_rows)
        if start_last > 0:
            done = carry + [b.slice(0, start_last)]
            yield from plan.run(pa.Table.from_batches(done)).to_batches()
            carry = [b.slice(start_last)]
        else:
            if carry and not carry_key.equals(last):
                yield from plan.run(pa.Table.from_batches(carry)).to_batches()
                carry = []
            carry.append(b)
        carry_key = last
    if carry:
        yield from plan.run(pa.Table.from_batches(carry)).to_batches()


_WM, _ID, _PART = "__colcep_wm", "__colcep_id", "__colcep_part"


def _firings_given(tbl: pa.Table, plan: _SparkPlan) -> pa.Table:
    """The firings of some keys' rows, in arrival order, each with the watermark it met (``_WM``)."""
    names = tbl.column_names
    before = (np.ascontiguousarray(tbl.column(_WM).to_numpy(), dtype=np.int64) if _WM in names
              else np.zeros(tbl.num_rows, np.int64))
    tbl = tbl.drop_columns([c for c in (_WM, _ID) if c in names])
    trigger, evictor, lateness, delay = plan.firing
    agg = WindowAggregator(plan.window, {n: (c, f) for n, c, f in plan.aggs}, key=plan.key, time=plan.time,
                           time_unit=plan.time_unit, out_of_orderness=delay, trigger=trigger, evictor=evictor,
                           allowed_lateness=lateness)
    tbl = agg._bind(tbl)
    ts = time_values(tbl, plan.time)
    out = agg._run_firings(tbl, ts, agg._keys.encode(tbl), before, _I64_MIN if plan.final_wm is None else plan.final_wm)
    empty = tbl.slice(0, 0)  # then the end of input, as close() after the last batch in process
    rest = agg._run_firings(empty, time_values(empty, plan.time), np.zeros(0, np.int64), np.zeros(0, np.int64),
                            _I64_MAX)
    agg._closed = True
    return out if rest.num_rows == 0 else pa.concat_tables([out, rest])


def _spark_firings(df: Any, window: WindowSpec, items: list, key: str | None, time: str, time_unit: str,
                   trigger: Any, evictor: Any, lateness: Any, delay: Any, order: str | None) -> Any:
    """Firings on Spark: the rows in ``order`` (then key, time and a row id for ties), the watermark
    each meets computed over all of them (a range-partitioned pass: each partition starts from the
    highest time of the partitions before it), then every key's rows stepped in that order."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    plan = _SparkPlan("firings", window, key, time, time_unit, tuple(items), (trigger, evictor, lateness, delay))
    schema = _spark_output_schema(df, plan)  # validates columns, types and the specification
    order = time if order is None else order
    if order not in df.columns:
        raise InputError(f"order column {order!r} is missing; the input has {df.columns}")
    is_ts = isinstance(df.schema[time].dataType, (T.TimestampType, T.TimestampNTZType))
    unit = "us" if is_ts else _time_unit(pa.int64(), time, time_unit)
    delay_u = _to_units(delay, unit, "out_of_orderness", signed=True)
    ties = [order] + ([key] if key is not None else []) + [time, _ID]
    # one range partitioning, computed once (Spark samples its bounds anew in every job): the
    # partitions' highest times and the watermarks come from the same partitions
    ranged = (df.withColumn(_ID, F.monotonically_increasing_id()).repartitionByRange(*ties)
              .sortWithinPartitions(*ties).withColumn(_PART, F.spark_partition_id()).localCheckpoint(eager=True))
    highest = dict(ranged.mapInArrow(functools.partial(_partition_max, time), "p long, m long").collect())
    before: dict[int, int] = {}
    run = None
    for p in sorted(highest):
        before[p] = run
        run = highest[p] if run is None else max(run, highest[p])
    if run is not None:
        plan = replace(plan, final_wm=bounded(run, delay_u))
    arrow_in = ranged.drop(_PART).schema.add(_WM, T.LongType(), nullable=False)
    marked = ranged.mapInArrow(functools.partial(_watermark_partition, before, time, delay_u), arrow_in)
    group = [key] if key is not None else []
    sort = group + [order, time, _ID]
    shuffled = marked.repartition(key) if key is not None else marked.repartition(1)
    return shuffled.sortWithinPartitions(*sort).mapInArrow(functools.partial(_arrow_partition, plan), schema)


def _partition_max(time: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the partition's id and highest time, read as the watermarks read it."""
    part, high = None, None
    for b in batches:
        if b.num_rows:
            part = b.column(_PART)[0].as_py()
            m = int(time_values(pa.Table.from_batches([b]), time).max())
            high = m if high is None else max(high, m)
    if part is not None:
        yield pa.record_batch({"p": [part], "m": [high]}, schema=pa.schema([("p", pa.int64()), ("m", pa.int64())]))


def _watermark_partition(before: dict, time: str, delay: int,
                         batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each row with the watermark it meets, ``max time before it - delay - 1``."""
    run = None
    started = False
    for b in batches:
        if b.num_rows == 0:
            continue
        if not started:
            run = before.get(b.column(_PART)[0].as_py())
            started = True
        ts = time_values(pa.Table.from_batches([b]), time)
        cm = np.maximum.accumulate(ts)
        prev = np.empty_like(cm)
        prev[0] = _I64_MIN if run is None else run
        prev[1:] = cm[:-1]
        if run is not None:
            np.maximum(prev, run, out=prev)
        run = int(cm[-1]) if run is None else max(run, int(cm[-1]))
        wm = bounded_array(prev, delay)
        yield b.drop_columns([_PART]).append_column(_WM, pa.array(wm, pa.int64()))


def _spark_output_schema(df: Any, plan: _SparkPlan):
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    arrow_in = to_arrow_schema(df.schema, timezone="UTC")
    out = plan.run(arrow_in.empty_table())
    return from_arrow_schema(out.schema, prefer_timestamp_ntz=False)


def _spark_prepare(df: Any, plan: _SparkPlan, sort: bool):
    if not sort:
        return df
    if plan.key is None:
        return df.repartition(1).sortWithinPartitions(plan.time)
    return df.repartition(plan.key).sortWithinPartitions(plan.key, plan.time)


def _spark_assign(df: Any, window: WindowSpec, key: str | None, time: str, time_unit: str) -> Any:
    plan = _SparkPlan("assign", window, key, time, time_unit)
    schema = _spark_output_schema(df, plan)
    row_local = isinstance(window, (Tumbling, Sliding))
    return _spark_prepare(df, plan, sort=not row_local).mapInArrow(functools.partial(_arrow_partition, plan), schema)


def _spark_aggregate(df: Any, window: WindowSpec, items: list, key: str | None, time: str, time_unit: str,
                     engine: str) -> Any:
    if engine not in ("auto", "arrow", "native"):
        raise WindowSpecError(f"engine must be 'auto', 'arrow' or 'native', got {engine!r}")
    if engine == "native" and not isinstance(window, (Tumbling, Sliding)):
        raise WindowSpecError("engine='native' supports Tumbling and Sliding windows; use 'arrow' for "
                              f"{type(window).__name__}")
    plan = _SparkPlan("aggregate", window, key, time, time_unit, tuple(items))
    schema = _spark_output_schema(df, plan)  # also validates columns and types
    if engine == "native" or (engine == "auto" and isinstance(window, (Tumbling, Sliding))):
        return _spark_native_aggregate(df, plan, schema)
    return _spark_prepare(df, plan, sort=True).mapInArrow(functools.partial(_arrow_partition, plan), schema)


def _spark_native_aggregate(df: Any, plan: _SparkPlan, schema: Any) -> Any:
    """Tumbling / sliding windows with Spark's own expressions and groupBy: ``start = t -
    pmod(t - offset, slide)`` (floor modulo, as Flink's start), exploded over the
    ``n = (lastStart - (t - size) - 1) div slide + 1`` windows of the row."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    tfield = df.schema[plan.time].dataType
    is_ts = isinstance(tfield, (T.TimestampType, T.TimestampNTZType))
    unit = "us" if is_ts else _time_unit(pa.int64(), plan.time, plan.time_unit)
    spec = _resolve(plan.window, unit)
    t = F.unix_micros(F.col(plan.time)) if is_ts else F.col(plan.time).cast("long")
    size, slide, off = F.lit(spec.size), F.lit(spec.slide), F.lit(spec.offset)
    last = t - F.pmod(t - off, slide)
    tmp = "__colcep_t"
    d = df.withColumn(tmp, t)
    if spec.size == spec.slide:
        d = d.withColumn("__colcep_s", last)
    else:  # integer `div`, exact for any long
        n = F.expr(f"(__colcep_last - (__colcep_t - {spec.size}) - 1) div {spec.slide} + 1")
        d = (d.withColumn("__colcep_last", last).where(F.col("__colcep_last") > F.col(tmp) - size)
             .withColumn("__colcep_n", n)
             .withColumn("__colcep_s", F.explode(F.sequence(F.col("__colcep_last") - (F.col("__colcep_n") - 1) * slide,
                                                            F.col("__colcep_last"), slide))))
    exprs = []
    for name, column, func in plan.aggs:
        c = F.col(column) if column is not None else None
        if func == "count":
            e = F.count(F.lit(1)) if c is None else F.count(c)
        elif func == "sum":
            e = F.coalesce(F.sum(c), F.lit(0))
        elif func == "mean":
            e = F.avg(c)
        elif func == "min":
            e = F.min(c)
        elif func == "max":
            e = F.max(c)
        else:
            order = F.when(c.isNotNull(), F.col(tmp))
            e = F.min_by(c, order) if func == "first" else F.max_by(c, order)
        exprs.append(e.alias(name))
    group = ([plan.key] if plan.key is not None else []) + ["__colcep_s"]
    out = d.groupBy(*group).agg(*exprs)
    s = F.col("__colcep_s")
    start = F.timestamp_micros(s) if is_ts else s
    end = F.timestamp_micros(s + size) if is_ts else s + size
    out = out.withColumn("window_start", start).withColumn("window_end", end)
    return out.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
