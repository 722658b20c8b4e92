"""A batch's way in: any table-like input as Arrow, the first batch's schema bound and checked,
later batches held to it.

The Matcher keeps one :class:`InputSpec` (its settings that concern input) and the
:class:`Binding` the first batch fixed; both are plain values, so a snapshot stores the schema
and a restore binds it again.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from colcep.durations import to_units
from colcep.engine import conditions as cond
from colcep.engine.program import CompiledPattern
from colcep.engine.watermark import ARRIVAL
from colcep.errors import ColcepWarning, InputError, PatternError
from colcep.expr import Expr
from colcep.kernels.codes import TIME_MAX
from colcep.pattern import Pattern

DEFAULT_TIME_UNIT = "ms"  # an integer time column's unit when time_unit is not given
RESERVED = ("match_id", "stage", "row", "timed_out", "timeout_ts")  # colcep's output columns


def as_table(data: Any) -> pa.Table:
    """A pyarrow Table from a Table, RecordBatch, pandas or polars DataFrame."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "to_arrow"):  # polars
        return data.to_arrow()
    mod = type(data).__module__
    if mod.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise InputError(f"expected a pyarrow Table / RecordBatch or a pandas / polars DataFrame, got {type(data).__name__}")


def column_kind(t: pa.DataType) -> str:
    """What a condition reads a column as: ``cond.STR``, ``cond.NUM``, ``cond.BOOL`` or ``"unsupported"``."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or (
            pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type))):
        return cond.STR
    if pa.types.is_boolean(t):
        return cond.BOOL
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t) or pa.types.is_decimal(t):
        return cond.NUM
    return "unsupported"


def reserved_names(timeouts: bool) -> tuple[str, ...]:
    """colcep's own output columns (with ``timed_out`` and ``timeout_ts`` when asked for)."""
    return RESERVED if timeouts else RESERVED[:3]


@dataclass(frozen=True)
class Binding:
    """What the first batch fixed: its schema, column kinds, the window and delay in time units."""

    schema: pa.Schema
    kinds: dict
    window: int
    unit: str
    delay: int | None
    gap: np.ndarray = None  # per state, its window between consecutive events in time units (0: none)


@dataclass(frozen=True)
class InputSpec:
    """A Matcher's settings that concern its input."""

    program: CompiledPattern
    key_columns: list[str]
    time: str
    time_unit: str | None
    columns: list[str] | None
    timeouts: bool
    out_of_orderness: Any

    def output_columns(self, schema: pa.Schema) -> list[str]:
        """The input columns the output carries (the key columns come first on their own)."""
        if self.columns is None:
            return [c for c in schema.names if c not in self.key_columns and c != ARRIVAL]
        return [c for c in self.columns if c not in self.key_columns]

    def bind(self, schema: pa.Schema) -> Binding:
        """Check columns and types of the first batch's schema."""
        names = schema.names
        for k in self.key_columns:
            if k not in names:
                raise InputError(f"key column {k!r} is missing; the input has {names}")
        if self.time not in names:
            raise InputError(f"time column {self.time!r} is missing; the input has {names}")
        tt = schema.field(self.time).type
        if not (pa.types.is_integer(tt) or pa.types.is_timestamp(tt)):
            raise InputError(f"time column {self.time!r} must be an integer or timestamp column, not {tt}")
        if pa.types.is_unsigned_integer(tt) and tt.bit_width == 64:
            raise InputError(f"time column {self.time!r} is uint64; cast it to int64 (times past 2^63 cannot be "
                             "represented)")
        for k in self.key_columns:
            kt = schema.field(k).type
            if column_kind(kt) not in (cond.STR, cond.NUM, cond.BOOL) or pa.types.is_floating(kt):
                raise InputError(f"key column {k!r} must be a string, integer or boolean column, not {kt}")
        if self.columns is not None:
            missing = [c for c in self.columns if c not in names]
            if missing:
                raise InputError(f"output columns {missing} are missing; the input has {names}")
        reserved = reserved_names(self.timeouts)
        for c in self.output_columns(schema):
            if c in reserved:
                raise InputError(f"input column {c!r} collides with colcep's own output column {c!r}; rename it, or "
                                 f"leave it out with columns=[...] (colcep's columns are {', '.join(reserved)})")
        kinds = {f.name: column_kind(f.type) for f in schema}
        for st_name, e in _stage_conditions(self.program.pattern):
            for c in e.columns():
                if c in kinds and kinds[c] == "unsupported":
                    raise InputError(f"stage {st_name!r}: column {c!r} has type {schema.field(c).type}, which "
                                     "conditions cannot read (use numbers, strings, booleans or timestamps)")
            t = cond.infer_type(e, {k: v for k, v in kinds.items() if v != "unsupported"}, f"stage {st_name!r}")
            if t != cond.BOOL:
                raise PatternError(f"stage {st_name!r}: a condition must be boolean, got a {t} expression {e!r}")
        unit = tt.unit if pa.types.is_timestamp(tt) else (self.time_unit or DEFAULT_TIME_UNIT)
        delay = None
        if self.out_of_orderness is not None and self.out_of_orderness != "watermarks":
            delay = to_units(self.out_of_orderness, unit, "out_of_orderness", signed=True, exact=False,
                             error=InputError)
            if delay < 0:
                raise InputError(f"out_of_orderness must be >= 0, got {self.out_of_orderness!r}")
        window = self._window_units(unit)
        return Binding(schema=schema, kinds=kinds, window=window, unit=unit, delay=delay,
                       gap=self._gap_units(unit, window))

    def normalize(self, tbl: pa.Table, b: Binding) -> pa.Table:
        """The batch in the bound schema (columns selected, types cast exactly), checked."""
        if tbl.schema == b.schema:
            return tbl
        names = tbl.schema.names
        for f in b.schema:
            if f.name not in names:
                raise InputError(f"column {f.name!r} is missing from this batch (it was in the first one); "
                                 f"the batch has {names}")
        tt = tbl.schema.field(self.time).type
        if tt != b.schema.field(self.time).type:
            raise InputError(f"time column {self.time!r} changed type from {b.schema.field(self.time).type} to {tt}; "
                             "every batch must use the same type and unit (cast it before process())")
        tbl = tbl.select(b.schema.names)
        if tbl.schema != b.schema:
            cols = []
            for f, c in zip(b.schema, tbl.columns):
                if c.type != f.type:
                    try:
                        c = c.cast(f.type, safe=True)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                        raise InputError(f"column {f.name!r} changed type from {f.type} to {c.type} and cannot be "
                                         f"cast back exactly: {e}") from None
                cols.append(c)
            tbl = pa.Table.from_arrays(cols, schema=b.schema)
        return tbl

    def check_time_unit(self, tbl: pa.Table) -> None:
        """Warn when integer times read as milliseconds by default look like epoch times in
        another unit and the window is a duration (the likely mistake: seconds data, "10s")."""
        w = self.program.pattern.window
        if self.time_unit is not None or not pa.types.is_integer(tbl.schema.field(self.time).type) or \
                w is None or isinstance(w, (int, np.integer)):
            return
        col = tbl.column(self.time)
        t = col.drop_null()[0].as_py() if col.null_count < len(col) else None
        guess = _epoch_unit(t)
        if guess is not None and guess != DEFAULT_TIME_UNIT:
            warnings.warn(
                f"time column {self.time!r} looks like epoch {guess_name(guess)} (first value {t}), but integer "
                f"time is read as milliseconds unless time_unit= says otherwise, so within({w!r}) would be "
                f"{to_units(w, DEFAULT_TIME_UNIT, 'window', error=PatternError):,} of its units; pass "
                f"time_unit={guess!r} (or time_unit='ms' to silence this)", ColcepWarning, stacklevel=4)

    def _window_units(self, unit: str) -> int:
        w = self.program.pattern.window
        return 0 if w is None else _in_units(w, unit)

    def _gap_units(self, unit: str, window: int) -> np.ndarray:
        """Per state, its window between consecutive events in ``unit`` (0: none); one longer
        than the pattern's window (``window``, 0: none) is refused, as Flink does."""
        nfa = self.program.nfa
        out = np.zeros(len(nfa.state_window), np.int64)
        for s, w in enumerate(nfa.state_window):
            if w is not None:
                out[s] = _in_units(w, unit)
                if window > 0 and out[s] > window:
                    raise PatternError(
                        f"the window between the previous and the current event of state {nfa.state_names[s]!r} "
                        f"({w!r}) is longer than the pattern's window between its first and last event")
        return out


def _in_units(w: Any, unit: str) -> int:
    """A window ``w`` in ``unit``, within the int64 range of the time column."""
    units = to_units(w, unit, "window", error=PatternError)
    if units > TIME_MAX:
        raise PatternError(f"window {w!r} is {units} {unit}, beyond the int64 range of the time column; "
                           "use a shorter window or drop within()")
    return units


def _stage_conditions(p: Pattern) -> Iterator[tuple[str, Expr]]:
    for st in p.stages:
        for child in st.children:
            yield from _stage_conditions(child)
        for e in (st.condition, st.until):
            if e is not None:
                yield st.name, e


def _epoch_unit(t: Any) -> str | None:
    """The unit in which integer ``t`` is a time between 1973 and 2286 since the epoch, if any."""
    if t is None:
        return None
    t = abs(int(t))
    for unit, lo in (("s", 10**8), ("ms", 10**11), ("us", 10**14), ("ns", 10**17)):
        if lo <= t < lo * 100:
            return unit
    return None


def guess_name(unit: str) -> str:
    return {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}[unit]


def null_checks(key_columns: list[str], time: str, seq: str | None) -> list[tuple[str, str]]:
    """The ``(role, column)`` pairs a row cannot be matched without, in the order a row's
    reason names them: the key columns, the time column, the ``seq`` column (when there is one)."""
    return [("key", k) for k in key_columns] + [("time", time)] + ([("seq", seq)] if seq is not None else [])


def first_nulls(tbl: pa.Table, checks: list[tuple[str, str]]) -> np.ndarray:
    """Per row, the index in ``checks`` (``(role, column)`` pairs: the columns a row cannot do
    without) of the first column null in that row, or -1."""
    first = np.full(tbl.num_rows, -1, np.int64)
    for i in reversed(range(len(checks))):  # the first check a row fails wins
        col = tbl.column(checks[i][1])
        if col.null_count:
            first[col.is_null().to_numpy(zero_copy_only=False)] = i
    return first


def describe_row(tbl: pa.Table, i: int, time: str, seq: str | None = None, hide: tuple[str, ...] = ()) -> str:
    """Row ``i`` as a user finds it in the input: its ``seq`` (when there is one), then its values
    (the time as an integer in ``tbl``'s units, nulls as None)."""
    vals = {k: v for k, v in tbl.slice(i, 1).to_pylist()[0].items() if k not in hide}
    head = f"{seq}={vals.get(seq)} " if seq is not None and seq in vals else ""
    return head + "{" + ", ".join(f"{k!r}: {v!r}" for k, v in vals.items()) + "}"
