"""``WindowAggregator``: windowed aggregation over a stream of batches, as Flink's WindowOperator
in event time, with a watermark and a side output of late rows; with a trigger, an evictor or
an allowed lateness, windows fire by trigger through ``colcep.windows.firings.FiringState``."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from colcep.durations import to_units as _to_units
from colcep.engine.keys import KeyCodes
from colcep.engine.matcher import as_table
from colcep.engine.watermark import bounded_array, next_watermark, time_values
from colcep.errors import InputError, WindowSpecError
from colcep.kernels import windows as kwin
from colcep.windows.aggregation import _agg_table, _check_agg_types, _parse_aggs
from colcep.windows.assigners import WindowSpec, _resolve, _Resolved
from colcep.windows.firings import Fired, FiringState
from colcep.windows.layout import _check_columns, _gaps, _layout, _Layout, _time_unit
from colcep.windows.triggers import KINDS, Evictor, Trigger, check_delta_columns, compile_firing

__all__ = ["WindowAggregator"]

_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max


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
