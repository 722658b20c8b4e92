"""The window assigners as specifications: ``Tumbling``, ``Sliding``, ``Session``, ``Count`` and
``Global`` (Flink's ``TumblingEventTimeWindows``, ``SlidingEventTimeWindows``, (Dynamic)
``EventTimeSessionWindows``, ``KeyedStream.countWindow`` and ``GlobalWindows``), checked when made
and resolved to integers in the time column's unit (``_resolve``) once the input is known."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from colcep.durations import check_duration as _check_duration
from colcep.durations import to_units as _to_units
from colcep.errors import WindowSpecError

__all__ = ["WindowSpec", "Tumbling", "Sliding", "Session", "Count", "Global"]


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
