"""``assign``, ``aggregate`` and ``ohlc``: on an Arrow table (or what ``colcep.match`` reads) in
this process, on a pyspark DataFrame through ``colcep.spark.windows`` (imported when one is given:
``import colcep`` never needs pyspark)."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from colcep.engine.matcher import as_table
from colcep.errors import InputError, WindowSpecError
from colcep.windows.aggregation import _aggregate_table, _parse_aggs
from colcep.windows.aggregator import WindowAggregator, _firing_mode
from colcep.windows.assigners import Tumbling, WindowSpec
from colcep.windows.layout import _assign_table
from colcep.windows.triggers import Evictor, Trigger

__all__ = ["assign", "aggregate", "ohlc"]


def _is_spark(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark.sql") and hasattr(data, "mapInArrow")


def assign(data: Any, window: WindowSpec, key: str | None = None, time: str = "ts",
           time_unit: str = "ms") -> Any:
    """The input rows with their window: ``window_start`` and ``window_end`` (time windows, in
    the time column's type) or ``window_id`` (count and global windows, numbered per key).

    Rows keep input order. A sliding window row appears once per window (ascending start);
    rows in no window (sliding gaps, count rows Flink never fires) are left out. A pyspark
    DataFrame gives a pyspark DataFrame."""
    if _is_spark(data):
        from colcep.spark.windows import _spark_assign

        return _spark_assign(data, window, key, time, time_unit)
    return _assign_table(data, window, key, time, time_unit)


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
            from colcep.spark.windows import _spark_firings

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
        from colcep.spark.windows import _spark_aggregate

        return _spark_aggregate(data, window, items, key, time, time_unit, engine)
    return _aggregate_table(data, window, items, key, time, time_unit)


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
