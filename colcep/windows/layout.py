"""Rows into windows: the input's checks, each key's windows as ranges of its rows in time order
(the layout every aggregate and firing reads), the window columns, and ``assign`` on an Arrow
table (``colcep/kernels/windows.py`` holds the assigners' transcriptions)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from colcep.engine.keys import KeyCodes
from colcep.engine.matcher import as_table
from colcep.engine.watermark import time_values
from colcep.errors import InputError
from colcep.kernels import arrays as karr
from colcep.kernels import windows as kwin
from colcep.windows.assigners import WindowSpec, _resolve, _Resolved

_TIME_UNITS = ("s", "ms", "us", "ns")


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


def _assign_table(data: Any, window: WindowSpec, key: str | None, time: str, time_unit: str) -> pa.Table:
    """``assign`` in this process (see ``colcep.windows.assign``)."""
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
