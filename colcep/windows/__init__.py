"""Flink's window assigners on columns: assign windows, aggregate per key and window, stream.

    bars = ohlc(ticks, Tumbling("1min"), key="name")                 # open high low close volume count
    agg = aggregate(ticks, Sliding("10s", "2s"), {"vwap_num": ("pv", "sum")}, key="name")
    tagged = assign(ticks, Session("30s"), key="name")              # + window_start, window_end

Assignment follows Flink's event-time assigners exactly (``colcep.kernels.windows`` holds the
transcriptions): ``TumblingEventTimeWindows``, ``SlidingEventTimeWindows``, (Dynamic)
``EventTimeSessionWindows`` with ``TimeWindow.mergeWindows``, ``KeyedStream.countWindow`` and
``GlobalWindows``. Windows are half-open ``[window_start, window_end)`` in the time column's
unit and type. Durations are integers in the time column's unit, strings (``"500ms"``,
``"1min"``, ``"-8h"``) or ``timedelta``; an integer time column is read in ``time_unit``.

``assign``, ``aggregate`` and ``ohlc`` also take a pyspark DataFrame and return one (Arrow
batches through ``mapInArrow``, or Spark's own ``groupBy`` for tumbling / sliding windows);
``WindowAggregator`` is the streaming form, with a watermark and a side output of late rows.

The modules, one concern each:

- :mod:`~colcep.windows.assigners`: the window specifications (Flink's assigners);
- :mod:`~colcep.windows.layout`: rows into windows, each key's windows as ranges of its rows;
- :mod:`~colcep.windows.aggregation`: the aggregates over each window's rows;
- :mod:`~colcep.windows.aggregator`: :class:`WindowAggregator`, the streaming window operator;
- :mod:`~colcep.windows.triggers`: triggers and evictors, as data (``colcep.triggers``);
- :mod:`~colcep.windows.firings`: the state of windows that fire by trigger;
- :mod:`~colcep.windows.api`: :func:`assign`, :func:`aggregate`, :func:`ohlc` on a table, or on a
  pyspark DataFrame through :mod:`colcep.spark.windows`.
"""
from colcep.errors import WindowSpecError
from colcep.windows.aggregation import AGG_FUNCS
from colcep.windows.aggregator import WindowAggregator
from colcep.windows.api import aggregate, assign, ohlc
from colcep.windows.assigners import Count, Global, Session, Sliding, Tumbling, WindowSpec

__all__ = ["Tumbling", "Sliding", "Session", "Count", "Global", "WindowSpec", "WindowSpecError",
           "assign", "aggregate", "ohlc", "WindowAggregator", "AGG_FUNCS"]
