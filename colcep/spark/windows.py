"""Windows of a pyspark DataFrame (``colcep.windows.assign``, ``aggregate`` and ``ohlc`` handed
one): Arrow batches through ``mapInArrow``, a key's rows to one task; Spark's own ``groupBy``
for tumbling and sliding windows (``engine="native"``); windows that fire by trigger over the
rows in arrival order, each row with the watermark it meets."""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.durations import to_units as _to_units
from colcep.engine.watermark import bounded, bounded_array, time_values
from colcep.errors import InputError, WindowSpecError
from colcep.windows.aggregation import _aggregate_table
from colcep.windows.aggregator import _I64_MAX, _I64_MIN, WindowAggregator
from colcep.windows.assigners import Sliding, Tumbling, WindowSpec, _resolve
from colcep.windows.layout import _assign_table, _time_unit


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
            return _assign_table(tbl, self.window, self.key, self.time, self.time_unit)
        return _aggregate_table(tbl, self.window, list(self.aggs), self.key, self.time, self.time_unit)


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
