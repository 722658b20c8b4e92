"""Aggregates per key and window: the aggregation list (``{name: (column, func)}``), the
functions over each window's range of rows (count, sum, min, max, first, last, mean; nulls
skipped) and ``aggregate`` on an Arrow table."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa

from colcep.engine.keys import KeyCodes
from colcep.engine.matcher import as_table
from colcep.engine.watermark import time_values
from colcep.errors import InputError, WindowSpecError
from colcep.kernels import windows as kwin
from colcep.windows.assigners import WindowSpec, _resolve
from colcep.windows.layout import _check_columns, _gaps, _layout, _Layout, _time_unit, _window_columns

AGG_FUNCS = ("count", "sum", "min", "max", "first", "last", "mean")


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


def _aggregate_table(data: Any, window: WindowSpec, items: list[tuple[str, str | None, str]], key: str | None,
                     time: str, time_unit: str) -> pa.Table:
    """``aggregate`` in this process, windows evaluated once at the end of input (see
    ``colcep.windows.aggregate``); ``items`` as ``_parse_aggs`` gives them."""
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
