"""Windows that fire by trigger on Structured Streaming: Flink's window operator per key.

    from colcep import triggers as tr
    ticks = spark.readStream...withWatermark("ts", "2 seconds")
    vwap = aggregate_stream(ticks, Tumbling("1h"), {"pv": ("pv", "sum"), "v": ("volume", "sum")}, key="name",
                            trigger=tr.ContinuousEventTime("1min"), allowed_lateness="5min")
    vwap.writeStream.outputMode("append")...   # upsert by (name, window_start, firing)

Each key's windows, trigger state, timers and held rows live in Spark's state store (one group
per key, ``applyInPandasWithState``); Spark's event-time timeout wakes a key when the watermark
passes its next timer. The watermark is Spark's (``withWatermark``: the highest event time of
the previous micro-batches minus the delay), so a micro-batch is processed as
``WindowAggregator(..., watermarks="batch")`` processes a batch: its rows at the watermark it
starts with (in time order, or ``order``'s), then the timers up to the next watermark fire.
Rows behind a window's allowed lateness are dropped, as Flink drops them.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from colcep.engine.keys import KeyCodes
from colcep.engine.watermark import time_values
from colcep.errors import InputError
from colcep.spark.stream import _DELAY_KEY, _WM_COL, _WM_FAR, _from_pandas, _watermark_ms, quiet_worker, timer_ms
from colcep.spark.windows import _firings_given, _SparkPlan
from colcep.windows.aggregation import _parse_aggs
from colcep.windows.aggregator import _fired_table, _firing_mode, _firing_program
from colcep.windows.assigners import WindowSpec, _resolve
from colcep.windows.firings import FiringState
from colcep.windows.layout import _gaps

__all__ = ["aggregate_stream"]

_I64_MIN = int(np.iinfo(np.int64).min)


class _WindowFn:
    """applyInPandasWithState body: one key's rows of a micro-batch (or its timeout)."""

    def __init__(self, plan: _SparkPlan, in_schema: pa.Schema, order: str | None):
        self.plan, self.in_schema, self.order = plan, in_schema, order
        trigger, evictor, lateness, _ = plan.firing
        self.unit = plan.time_unit
        self.us = 1000 if self.unit == "ms" else 1  # microseconds per time unit
        self.prog = _firing_program(plan.window, trigger, evictor, lateness, self.unit)
        self.spec = _resolve(plan.window, self.unit)

    def __call__(self, key: tuple, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        quiet_worker()
        plan = self.plan
        parts = [_from_pandas(p, self.in_schema) for p in pdfs if len(p)]
        rows = pa.concat_tables(parts) if parts else self.in_schema.empty_table()
        if rows.num_rows:
            sort = ([(self.order, "ascending")] if self.order else []) + [(plan.time, "ascending")]
            rows = rows.sort_by(sort)
        wm_ms = _watermark_ms(state)
        wm = wm_ms * 1000 // self.us if wm_ms > 0 else _I64_MIN
        fs = FiringState.restore(self.prog, state.get[0]) if state.exists else FiringState(self.prog)
        keys = KeyCodes(plan.key)
        keys.encode(pa.table({plan.key: pa.array([key[0]], self.in_schema.field(plan.key).type)}))
        ts = time_values(rows, plan.time)
        gaps = _gaps(rows, self.spec, self.unit) if self.spec.kind == "session" and rows.num_rows \
            else np.array([self.spec.gap], np.int64)
        fired = fs.step(rows, ts, np.zeros(rows.num_rows, np.int64), 1, np.full(rows.num_rows, wm, np.int64), wm,
                        gaps)
        out = _fired_table(fired, plan.aggs, keys, pa.int64(), self.spec.kind == "global")
        if fs.empty:
            if state.exists:
                state.remove()
        else:
            state.update((fs.snapshot(),))
            nxt = fs.next_timer()
            if nxt is not None:
                state.setTimeoutTimestamp(timer_ms(nxt * self.us, wm_ms))
        if out.num_rows:
            pdf = out.to_pandas()
            for c in ("window_start", "window_end"):
                if c in pdf:
                    import pandas as pd

                    pdf[c] = pd.to_datetime(pdf[c], unit=self.unit, utc=True)
            yield pdf


def aggregate_stream(df: Any, window: WindowSpec, aggs: Any, key: str, time: str = "ts", *,
                     trigger: Any = None, evictor: Any = None, allowed_lateness: Any = None,
                     order: str | None = None, time_unit: str = "us") -> Any:
    """Windowed aggregates of a streaming DataFrame, a row per firing (``colcep.windows.aggregate``
    with a trigger, evictor or allowed lateness): the key, ``window_start`` / ``window_end``
    (timestamps; ``window_id`` for Global), ``firing``, ``kind`` and the aggregates, in
    ``append`` mode; a sink upserts by (key, window, firing). ``df`` needs a watermark on
    ``time`` (a timestamp column). ``time_unit``: the unit windows are computed in, "us" (Spark's
    timestamps) or "ms" (Flink's: a window's last instant is ``end - 1 ms``, and int durations are
    milliseconds); aggregates of the time column itself come out as integers of that unit."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.streaming.state import GroupStateTimeout

    from colcep.spark.batch import _to_arrow

    items = _parse_aggs(aggs)
    if not _firing_mode(trigger, evictor, allowed_lateness):
        trigger = None
        allowed_lateness = 0  # the default EventTime trigger: one firing per window, and late ones
    if not getattr(df, "isStreaming", False):
        raise InputError("aggregate_stream() needs a streaming DataFrame; for data at rest use "
                         "colcep.windows.aggregate(df, ..., trigger=...)")
    fields = {f.name: f for f in df.schema.fields}
    for what, c in (("time", time), ("key", key), ("order", order)):
        if c is not None and c not in fields:
            raise InputError(f"{what} column {c!r} is missing; the input has {list(fields)}")
    if not isinstance(fields[time].dataType, T.TimestampType):
        raise InputError(f"time column {time!r} must be a timestamp (Spark's watermark needs one), not "
                         f"{fields[time].dataType.simpleString()}")
    delay = fields[time].metadata.get(_DELAY_KEY)
    if delay is None:
        raise InputError(f"the stream has no watermark on {time!r}: call df.withWatermark({time!r}, '5 seconds') first")
    if time_unit not in ("us", "ms"):
        raise InputError(f"time_unit must be 'us' or 'ms', got {time_unit!r}")
    to_int = F.unix_millis if time_unit == "ms" else F.unix_micros
    sel = [to_int(F.col(c)).alias(c) if c == time else F.col(c).alias(c, metadata={}) for c in df.columns]
    plain = df.select(*sel)
    spark = df.sparkSession
    in_schema = _to_arrow(spark, plain.schema)
    plan = _SparkPlan("firings", window, key, time, time_unit, tuple(items), (trigger, evictor, allowed_lateness, 0))
    fn = _WindowFn(plan, in_schema, order)  # checks the specification
    out_arrow = _firings_given(in_schema.empty_table(), plan).schema
    out_struct = from_arrow_schema(out_arrow, prefer_timestamp_ntz=False)
    out_fields = [T.StructField(f.name, T.TimestampType(), True) if f.name in ("window_start", "window_end")
                  else f for f in out_struct.fields]
    state_struct = T.StructType([T.StructField("snapshot", T.BinaryType(), True)])
    marked = plain.select("*", F.lit(_WM_FAR).cast("timestamp").alias(_WM_COL, metadata={_DELAY_KEY: int(delay)}))
    return marked.groupBy(key).applyInPandasWithState(fn, T.StructType(out_fields), state_struct, "append",
                                                      GroupStateTimeout.EventTimeTimeout)
