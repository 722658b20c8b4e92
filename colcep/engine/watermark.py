"""Event time: rows held until the watermark passes them, late rows set aside.

As Flink's CEP operator in event time: a row is buffered until the watermark reaches its
time, then released in (time, arrival) order; a row whose time is at or behind the watermark
when it arrives is late and goes to the side output. The watermark is Flink's
``BoundedOutOfOrdernessWatermarks`` (``max time seen - out_of_orderness - 1``), raised further by
explicit watermarks, and never goes back.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from colcep.errors import InputError

ARRIVAL = "__colcep_arrival"  # the hidden column carrying a row's arrival position
I64_MIN = int(np.iinfo(np.int64).min)


def time_values(tbl: pa.Table, time: str, row0: int = 0) -> np.ndarray:
    """The time column as contiguous, read-only int64 (a timestamp as its integer), without a copy
    where Arrow allows: one layout, so one compiled signature of every kernel reading it. A null
    is an InputError naming its row (``row0``: the position of the table's first row in the stream)."""
    col = tbl.column(time)
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"time column {time!r} has a null at row {row0 + row}")
    if not pa.types.is_int64(col.type):
        col = col.cast(pa.int64())
    ts = np.ascontiguousarray(col.to_numpy(), dtype=np.int64)
    ts.flags.writeable = False
    return ts


def bounded(max_ts: int, delay: int) -> int:
    """``BoundedOutOfOrdernessWatermarks``: ``max_ts - delay - 1``, I64_MIN where that would pass it."""
    return max_ts - delay - 1 if max_ts >= I64_MIN + delay + 1 else I64_MIN


def bounded_array(max_ts: np.ndarray, delay: int) -> np.ndarray:
    """``bounded`` of each entry of an int64 array."""
    lim = I64_MIN + delay + 1
    return np.where(max_ts >= lim, max_ts - delay - 1, I64_MIN)


def next_watermark(current: int | None, max_ts: int | None, delay: int | None, explicit: int | None) -> int | None:
    """The watermark after a batch: never lower than ``current``."""
    cands = [w for w in (current, explicit) if w is not None]
    if delay is not None and max_ts is not None:
        cands.append(bounded(max_ts, delay))
    return max(cands) if cands else None


def release(pending: pa.Table | None, time: str, watermark: int | None,
            everything: bool = False) -> tuple[pa.Table | None, pa.Table | None]:
    """``(released, still pending)``: the pending rows with time <= watermark (all of them with
    ``everything``), sorted by (time, arrival)."""
    if pending is None or pending.num_rows == 0:
        return None, pending
    ts = time_values(pending, time)
    arrival = np.asarray(pending.column(ARRIVAL).to_numpy(), np.int64)
    due = np.ones(len(ts), bool) if everything else (ts <= watermark if watermark is not None else np.zeros(len(ts), bool))
    if not due.any():
        return None, pending
    idx = np.flatnonzero(due)
    idx = idx[np.lexsort((arrival[idx], ts[idx]))]
    rest = np.flatnonzero(~due)
    released = pending.take(pa.array(idx))
    return released, (pending.take(pa.array(rest)) if len(rest) else None)
