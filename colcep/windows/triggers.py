"""Flink's window triggers and evictors, as data: when a window fires, and which rows it keeps.

    from colcep import triggers as tr
    ohlc(ticks, Tumbling("1h"), key="name", trigger=tr.ContinuousEventTime("1min"),
         allowed_lateness="5min", out_of_orderness="2s")             # early, on-time and late bars
    aggregate(ticks, Tumbling("5min"), aggs, key="name", trigger=tr.Purging(tr.Count(100) | tr.EventTime()))
    aggregate(ticks, Tumbling("5min"), aggs, key="name", evictor=tr.CountEvictor(100))

Triggers (``org.apache.flink.streaming.api.windowing.triggers``): ``EventTime`` (the default
for time windows: fire when the watermark passes the window's end, and once more for each
late row within the allowed lateness), ``Count(n)`` (every ``n`` rows of the window; not at its
end), ``ContinuousEventTime(interval)`` (every ``interval`` of event time, and at the end),
``Delta(threshold, column)`` (when ``column`` has moved by more than ``threshold`` since the
row of the last firing, or the window's first row), ``Purging(trigger)`` (empty the window at
each firing of ``trigger``). ``a | b`` (``AnyOf``) fires when any of them fires and purges when
any purges; every one of them sees every row and timer (colcep's, not Flink's: Flink has no
such combinator; an OR trigger written for Flink the same way gives the same firings).

Evictors (``...windowing.evictors``), applied to what a firing evaluates: ``CountEvictor(n)``
(keep the last ``n`` rows), ``TimeEvictor(size)`` (keep rows with ``time > max time - size``),
``DeltaEvictor(threshold, column)`` (drop rows whose ``column`` is ``threshold`` or more away
from the last row's); ``after=True`` evicts after the evaluation instead (what the next firing
sees). Rows are in the order the window received them (arrival; after a session merge, the
order Flink's merged list state has).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from colcep.durations import check_duration, to_units
from colcep.errors import InputError, WindowSpecError
from colcep.kernels import triggers as kt

__all__ = ["Trigger", "EventTime", "Count", "ContinuousEventTime", "Delta", "Purging", "AnyOf",
           "Evictor", "CountEvictor", "TimeEvictor", "DeltaEvictor", "FiringProgram", "compile_firing",
           "check_delta_columns", "KINDS"]

KINDS = ("early", "on_time", "late")


class Trigger:
    """Base class of the triggers; ``a | b`` fires when either does."""

    can_merge = True

    def __or__(self, other: "Trigger") -> "AnyOf":
        if not isinstance(other, Trigger):
            return NotImplemented
        return AnyOf(*(self.triggers if isinstance(self, AnyOf) else (self,)),
                     *(other.triggers if isinstance(other, AnyOf) else (other,)))


@dataclass(frozen=True)
class EventTime(Trigger):
    """``EventTimeTrigger``: fire when the watermark reaches the window's ``end - 1``; a row that
    arrives later (within the allowed lateness) fires the window again at once."""


@dataclass(frozen=True)
class Count(Trigger):
    """``CountTrigger.of(n)``: fire at every ``n``-th row the window receives (the count restarts
    at each firing; sessions add their counts up when they merge). It does not fire at the
    window's end: combine it, ``Count(n) | EventTime()``, for bars of n rows or the window."""

    n: int

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n <= 0:
            raise WindowSpecError(f"trigger Count(n): n must be a positive int (rows), got {self.n!r}")


@dataclass(frozen=True)
class ContinuousEventTime(Trigger):
    """``ContinuousEventTimeTrigger.of(interval)``: fire every ``interval`` of event time from the
    window's first row (at ``t - t % interval + interval``, Java's remainder), and at its end. A
    watermark that jumps several intervals fires once per interval, as Flink's timers do."""

    interval: Any

    def __post_init__(self):
        check_duration(self.interval, "trigger ContinuousEventTime interval")


@dataclass(frozen=True)
class Delta(Trigger):
    """``DeltaTrigger.of(threshold, |a - b| on column)``: fire when ``column`` differs by more than
    ``threshold`` from its value at the last firing (at first: the window's first row). It
    cannot merge, so Flink refuses it on session windows, and so does colcep."""

    threshold: float
    column: str

    can_merge = False

    def __post_init__(self):
        _check_threshold(self.threshold, "trigger Delta")
        _check_column_name(self.column, "trigger Delta")


@dataclass(frozen=True)
class Purging(Trigger):
    """``PurgingTrigger.of(trigger)``: every firing of ``trigger`` also empties the window (its
    trigger state stays: a ``Count`` counts on, a ``Delta`` compares with its last firing)."""

    trigger: Trigger

    def __post_init__(self):
        if not isinstance(self.trigger, Trigger):
            raise WindowSpecError(f"Purging(trigger) needs a trigger, got {self.trigger!r}")

    @property
    def can_merge(self) -> bool:  # type: ignore[override]
        return self.trigger.can_merge


class AnyOf(Trigger):
    """Fires when any of ``triggers`` fires, purges when any purges; each sees every row and timer."""

    def __init__(self, *triggers: Trigger):
        if len(triggers) < 2 or not all(isinstance(t, Trigger) for t in triggers):
            raise WindowSpecError(f"AnyOf needs two or more triggers, got {triggers!r}")
        self.triggers = tuple(triggers)

    @property
    def can_merge(self) -> bool:  # type: ignore[override]
        return all(t.can_merge for t in self.triggers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyOf) and other.triggers == self.triggers

    def __hash__(self) -> int:
        return hash(("AnyOf", self.triggers))

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.triggers))


class Evictor:
    """Base class of the evictors."""


@dataclass(frozen=True)
class CountEvictor(Evictor):
    """``CountEvictor.of(n, after)``: keep the last ``n`` rows the window received."""

    n: int
    after: bool = False

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 0:
            raise WindowSpecError(f"CountEvictor(n): n must be an int >= 0 (rows), got {self.n!r}")


@dataclass(frozen=True)
class TimeEvictor(Evictor):
    """``TimeEvictor.of(size, after)``: keep the rows with ``time > max time in the window - size``."""

    size: Any
    after: bool = False

    def __post_init__(self):
        check_duration(self.size, "TimeEvictor size", signed=True)
        if to_units(self.size, "ns", "TimeEvictor size", signed=True, exact=False) < 0:
            raise WindowSpecError(f"TimeEvictor size must be >= 0, got {self.size!r}")


@dataclass(frozen=True)
class DeltaEvictor(Evictor):
    """``DeltaEvictor.of(threshold, |a - b| on column, after)``: drop the rows whose ``column`` is
    ``threshold`` or more away from the last row's (a NaN difference keeps the row)."""

    threshold: float
    column: str
    after: bool = False

    def __post_init__(self):
        _check_threshold(self.threshold, "DeltaEvictor")
        _check_column_name(self.column, "DeltaEvictor")


def _check_threshold(x: Any, what: str) -> None:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or math.isnan(float(x)):
        raise WindowSpecError(f"{what} threshold must be a number, got {x!r}")


def _check_column_name(c: Any, what: str) -> None:
    if not isinstance(c, str) or not c:
        raise WindowSpecError(f"{what} column must be a column name, got {c!r}")


# ------------------------------------------------------------------ compiled form
@dataclass
class FiringProgram:
    """What the kernel runs: the assigner, the trigger tree (post-order), the evictor."""

    prog: np.ndarray        # int64 [P_LEN]
    ev_th: float
    nk: np.ndarray          # node kind
    ni: np.ndarray          # node int parameter (n, interval)
    nf: np.ndarray          # node float parameter (threshold)
    nparent: np.ndarray
    leaf_of: np.ndarray     # node -> leaf index (-1: composite)
    leaf_kind: np.ndarray
    trigger_column: str | None
    evictor_column: str | None

    def fingerprint(self) -> np.ndarray:
        """The program as one int64 array: equal exactly when the programs are."""
        return np.concatenate([self.prog, [len(self.nk)], self.nk, self.ni, self.nf.view(np.int64), self.nparent,
                               np.array([self.ev_th]).view(np.int64)])

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_kind.shape[0])

    @property
    def tcap(self) -> int:
        return kt.t_cap(int(self.nk.shape[0]))


def _post_order(trigger: Trigger) -> list[tuple[Trigger, int]]:
    out: list[tuple[Trigger, int]] = []

    def visit(t: Trigger) -> int:
        kids = [t.trigger] if isinstance(t, Purging) else list(t.triggers) if isinstance(t, AnyOf) else []
        kid_ids = [visit(k) for k in kids]
        out.append((t, -1))
        me = len(out) - 1
        for k in kid_ids:
            out[k] = (out[k][0], me)
        return me

    visit(trigger)
    return out


def _uses(trigger: Trigger, kind: type) -> bool:
    if isinstance(trigger, kind):
        return True
    if isinstance(trigger, Purging):
        return _uses(trigger.trigger, kind)
    return isinstance(trigger, AnyOf) and any(_uses(t, kind) for t in trigger.triggers)


def compile_firing(window_kind: str, size: int, slide: int, offset: int, gap: int, trigger: Trigger | None,
                   evictor: Evictor | None, lateness: int, unit: str) -> FiringProgram:
    """Check a window / trigger / evictor combination as Flink does and compile it."""
    assigner = {"sliding": kt.SLIDING, "session": kt.SESSION, "global": kt.GLOBAL}.get(window_kind)
    if assigner is None:
        raise WindowSpecError("Count windows fire by their own CountTrigger (and CountEvictor); for another "
                              "trigger or evictor over rows counted per key, use Global() with trigger=...")
    if trigger is None:
        if assigner == kt.GLOBAL:
            raise WindowSpecError("Global windows that fire by trigger need one (Flink's default for GlobalWindows, "
                                  "NeverTrigger, never fires): trigger=Count(n), ContinuousEventTime(...) or Delta(...)")
        trigger = EventTime()
    if not isinstance(trigger, Trigger):
        raise WindowSpecError(f"trigger must be a colcep.triggers trigger (EventTime, Count, ContinuousEventTime, "
                              f"Delta, Purging, a | b), got {trigger!r}")
    if evictor is not None and not isinstance(evictor, Evictor):
        raise WindowSpecError(f"evictor must be CountEvictor, TimeEvictor or DeltaEvictor, got {evictor!r}")
    if assigner == kt.SESSION and not trigger.can_merge:
        raise WindowSpecError("A merging window assigner cannot be used with a trigger that does not support "
                              f"merging (Flink: WindowedStream.trigger): {trigger!r} on Session windows; a Delta "
                              "trigger cannot merge")
    if assigner == kt.GLOBAL and _uses(trigger, EventTime):
        raise WindowSpecError("EventTime triggers fire at a time window's end; Global windows have none (Flink: "
                              "EventTimeTrigger on GlobalWindows fails, GlobalWindow cannot be cast to TimeWindow). "
                              "Give Global() a Count, ContinuousEventTime or Delta trigger")
    if lateness < 0:
        raise WindowSpecError(f"The allowed lateness cannot be negative (Flink), got {lateness}")
    nodes = _post_order(trigger)
    kinds = {EventTime: kt.T_EVENT_TIME, Count: kt.T_COUNT, ContinuousEventTime: kt.T_CONTINUOUS,
             Delta: kt.T_DELTA, Purging: kt.T_PURGING, AnyOf: kt.T_ANY}
    nk, ni, nf, npar, leaf_of, leaf_kind = [], [], [], [], [], []
    delta_cols = set()
    for t, parent in nodes:
        k = kinds[type(t)]
        nk.append(k)
        npar.append(parent)
        ni.append(int(t.n) if isinstance(t, Count) else
                  to_units(t.interval, unit, "trigger ContinuousEventTime interval") if isinstance(t, ContinuousEventTime)
                  else 0)
        nf.append(float(t.threshold) if isinstance(t, Delta) else 0.0)
        if k in (kt.T_PURGING, kt.T_ANY):
            leaf_of.append(-1)
        else:
            leaf_of.append(len(leaf_kind))
            leaf_kind.append(k)
        if isinstance(t, Delta):
            delta_cols.add(t.column)
    if len(delta_cols) > 1:
        raise WindowSpecError(f"the Delta triggers of one specification read one column, got {sorted(delta_cols)}")
    for what, v in (("allowed_lateness", lateness), ("window size", size), ("slide", slide), ("offset", offset),
                    ("gap", gap), *(("trigger parameter", x) for x in ni)):
        if not -2**63 <= v < 2**63:
            raise WindowSpecError(f"{what} {v} does not fit in 64 bits (the time column's integers)")
    prog = np.zeros(kt.P_LEN, np.int64)
    prog[kt.P_ASSIGNER] = assigner
    prog[kt.P_SIZE], prog[kt.P_SLIDE], prog[kt.P_OFFSET], prog[kt.P_GAP] = size, slide, offset, gap
    prog[kt.P_LATENESS] = lateness
    ev_th = 0.0
    ev_col = None
    ev_n = 0
    if isinstance(evictor, CountEvictor):
        prog[kt.P_EV_KIND], ev_n = kt.E_COUNT, int(evictor.n)
    elif isinstance(evictor, TimeEvictor):
        prog[kt.P_EV_KIND], ev_n = kt.E_TIME, to_units(evictor.size, unit, "TimeEvictor size", signed=True)
    elif isinstance(evictor, DeltaEvictor):
        prog[kt.P_EV_KIND], ev_th, ev_col = kt.E_DELTA, float(evictor.threshold), evictor.column
    if not ev_n < 2**63:
        raise WindowSpecError(f"evictor parameter {ev_n} does not fit in 64 bits")
    prog[kt.P_EV_N] = ev_n
    if evictor is not None:
        prog[kt.P_EV_AFTER] = int(bool(evictor.after))
    a64 = lambda x: np.array(x, np.int64)  # noqa: E731
    return FiringProgram(prog, ev_th, a64(nk), a64(ni), np.array(nf, np.float64), a64(npar), a64(leaf_of),
                         a64(leaf_kind), next(iter(delta_cols), None), ev_col)


def check_delta_columns(schema: pa.Schema, prog: FiringProgram) -> None:
    """The Delta trigger's and DeltaEvictor's columns exist and are numeric."""
    for column, what in ((prog.trigger_column, "trigger Delta"), (prog.evictor_column, "DeltaEvictor")):
        if column is None:
            continue
        if column not in schema.names:
            raise InputError(f"{what} column {column!r} is missing; the input has {schema.names}")
        t = schema.field(column).type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise InputError(f"{what} column {column!r} has type {t}; a delta needs a numeric column")


def delta_values(tbl: pa.Table, column: str | None) -> np.ndarray:
    """A delta column as float64 (a null is NaN: never more than a threshold away)."""
    if column is None:
        return np.zeros(tbl.num_rows, np.float64)
    c = tbl.column(column)
    return np.ascontiguousarray(c.cast(pa.float64()).fill_null(float("nan")).to_numpy(), dtype=np.float64)
