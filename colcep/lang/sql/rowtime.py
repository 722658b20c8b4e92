"""``MATCH_ROWTIME()`` in ``MEASURES`` as Flink 2.3 SQL computes it (``semantics="flink"``): the
time at which Flink's CEP operator emits the match, which is not always the time of its last row.

Flink's rule, from its source:

- ``MatchCodeGenerator.visitCall`` (flink-table-planner, ``codegen/MatchCodeGenerator.scala``)
  generates ``MATCH_ROWTIME`` as ``GenerateUtils.generateRowtimeAccess``: the ``timestamp()`` of
  the ``PatternProcessFunction.Context`` the measures are computed with (in ``DEFINE`` the
  condition's context: the current row's time, unchanged here).
- ``CepOperator.processMatchedSequences`` (flink-cep, ``operator/CepOperator.java``) sets that
  timestamp (``setTimestamp``) to the time it was called with: in ``processEvent`` the time of the
  row being processed; in ``advanceTime`` the time the operator advanced to.
- ``CepOperator.onEventTime``, when the watermark passes a timer of a key: for each of the key's
  buffered times up to the watermark in order, ``advanceTime(t)`` then ``processEvent`` for its
  rows; then ``advanceTime(watermark)``. ``processEvent`` registers a timer at ``t + WITHIN`` when
  a partial match starts (``NFAState.isNewStartPartialMatch``).
- ``NFA.process`` and ``NFA.advanceTime`` emit what ``processMatchesAccordingToSkipStrategy``
  releases: a completed match waits while a partial match that started earlier is alive (every
  SQL ``AFTER MATCH SKIP`` is a skip strategy) and comes out when the last such partial match
  fails on a row, is pruned, or times out.

So a match comes out at the time of the row that completed it, or, when it waited: at the time
of the row on which the last earlier partial match failed (several matches waiting for one
partial match come out together, with one time), or where that partial match timed out: at the
first watermark that reaches its start time plus ``WITHIN``, or at the time of the key's next
row when that is exactly the start plus ``WITHIN`` (``advanceTime(t)`` before the row). The
watermark is the one of Flink's operator reading the table as a stream in time order (the
project's oracle, ``WATERMARK FOR ts AS ts - INTERVAL '0.001' SECOND``): after each row, the
latest time so far minus one unit of the time column (``WatermarkAssignerOperator.processElement``
emits it at once when it moved by more than 200 ms, so for rows that far apart it is exact). It
depends on the rows of every partition. A match released by the end of input comes out at the
final watermark, ``Long.MAX_VALUE`` milliseconds (+292278994-08-17 07:12:55.807): here the
largest value of the time column's type, the same for ``TIMESTAMP(3)`` (Python's ``datetime``
cannot hold it: ``to_pylist`` raises, ``to_pandas`` does not).

How: one run of the engine gives, per match, the row whose processing emitted it
(``Matcher.emitting_rows``), or that time advancing did; with ``WITHIN``, also the partial matches
that timed out there (``timeouts=True``). Where a waiting match came out with partial matches that
timed out, a second run in event time ticks the watermark at each time Flink's would have timed
them out, so that the engine releases the match at the right tick.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.durations import NS
from colcep.engine.matcher import Matcher
from colcep.engine.watermark import time_values

FINAL_WATERMARK = np.iinfo(np.int64).max       # the end of input: Flink's final watermark, Long.MAX_VALUE


def wanted(q: Any) -> bool:
    """Whether the query's ``MEASURES`` read ``MATCH_ROWTIME()`` in Flink mode."""
    from sqlglot import exp

    from colcep.lang.sql.syntax import function_name
    return q.flink and any(function_name(f) == "MATCH_ROWTIME" for _, node, _ in q.measures
                           for f in node.find_all(exp.Anonymous, exp.Func))


def match_emitted(prep: Any, time_unit: str, stream_times: "np.ndarray | None" = None) -> tuple[pa.Table, np.ndarray]:
    """The matches of a prepared query (as ``colcep.match`` gives them) and, indexed by match id,
    the time Flink emits each at (in the time column's units; ``FINAL_WATERMARK``: the end of
    input). ``stream_times``: the distinct times of the whole stream, in those units, where the
    table is a part of it (a Spark partition); by default the table's own."""
    ts = time_values(prep.work, prep.q.time)
    windowed = prep.pattern.window is not None
    out, rows, marks = _run(prep, time_unit, windowed, [], ts)
    if windowed:
        times = np.unique(ts) if stream_times is None else np.asarray(stream_times, np.int64)
        ticks = _ticks(out, rows, ts, prep.key_codes, times, _lag(prep.work.schema.field(prep.q.time).type,
                                                                   time_unit))
        if ticks:
            out, rows, marks = _run(prep, time_unit, False, ticks, ts)
        else:
            out = out.filter(pc.invert(out.column("timed_out"))).drop_columns(["timed_out", "timeout_ts"])
    return out, np.where(rows >= 0, ts[np.maximum(rows, 0)], marks)


def _lag(time_type: pa.DataType, time_unit: str) -> int:
    """How far the watermark stays behind the latest time, in the time column's units: one
    millisecond (Flink's event time is in milliseconds), one unit where the unit is coarser."""
    unit = time_type.unit if pa.types.is_timestamp(time_type) else time_unit
    return max(1, NS["ms"] // NS[unit])


def _run(prep: Any, time_unit: str, timeouts: bool, ticks: list[int],
         ts: np.ndarray) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The engine over the prepared table (times ``ts``) on one thread: its output, and per match
    (by id) the row whose processing emitted it (-1: time advancing did) and the watermark time
    advanced to then. With ``ticks``, in event time: fed up to each tick, the watermark set to it,
    so that time advances to each (``FINAL_WATERMARK`` at the end)."""
    work, time = prep.work, prep.q.time
    m = Matcher(prep.pattern, key=prep.key, time=time, columns=[], timeouts=timeouts, time_unit=time_unit, threads=1,
                out_of_orderness="watermarks" if ticks else None)
    m.emitting_rows = []
    parts, marks = [], []

    def call(batch: pa.Table | None, watermark: int) -> None:
        parts.append(m.close() if batch is None else m.process(batch, watermark=watermark))
        n = sum(a.shape[0] for a in m.emitting_rows) - sum(x.shape[0] for x in marks)
        marks.append(np.full(n, watermark, np.int64))

    lo = 0
    for w in ticks:
        hi = int(np.searchsorted(ts, w, "right"))
        call(work.slice(lo, hi - lo), w)
        lo = hi
    if ticks:
        parts.append(m.process(work.slice(lo)))      # rows after the last tick wait for the end of input
    else:
        parts.append(m.process(work))
    call(None, int(FINAL_WATERMARK))
    rows = np.concatenate(m.emitting_rows) if m.emitting_rows else np.zeros(0, np.int64)
    return pa.concat_tables(parts), rows, np.concatenate(marks)


def _ticks(out: pa.Table, emitting: np.ndarray, ts: np.ndarray, key_codes: np.ndarray, times: np.ndarray,
           lag: int) -> list[int]:
    """The watermarks at which Flink times out the partial matches that matches waited for (from
    a run with ``timeouts=True``): for each emission (a key, and its row or the end of input) that
    released a match completed before it, for each partial match timed out there, the first
    watermark (a later time of the stream, ``times``, less ``lag``) at or past its start plus
    ``WITHIN``, where that comes before the emitting row."""
    if out.num_rows == 0:
        return []
    mid = out.column("match_id").to_numpy()
    rows = out.column("row").to_numpy()
    first = np.r_[0, np.flatnonzero(np.diff(mid)) + 1]          # a match's events are contiguous
    at = emitting[mid[first]]
    last_row = np.maximum.reduceat(rows, first)
    key = key_codes[rows[first]]
    timed_out = out.column("timed_out").to_numpy(zero_copy_only=False)[first]
    deadline = out.column("timeout_ts").to_numpy(zero_copy_only=False)[first]
    # where a waiting match came out: it did not time out and came out after its last row
    waited = {(int(k), int(e)) for k, e, r, t in zip(key, at, last_row, timed_out) if not t and e != r}
    ticks = set()
    for k, e, t, d in zip(key, at, timed_out, deadline):
        if t and (int(k), int(e)) in waited:
            i = int(np.searchsorted(times, d + lag, "left"))    # the first watermark past the deadline
            if i < times.shape[0] and (e < 0 or times[i] - lag < ts[e]):
                ticks.add(int(times[i]) - lag)
    return sorted(ticks)
