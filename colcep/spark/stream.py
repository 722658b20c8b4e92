"""colcep on Spark Structured Streaming: pattern state per bucket of keys in Spark's state store.

    from colcep.spark import local_session, match_stream
    ticks = (spark.readStream.schema(schema).parquet("incoming/")
             .withWatermark("ts", "5 seconds"))                       # Spark's event-time watermark
    out = match_stream(ticks, pattern, key="name", time="ts", timeouts=True)
    q = (out.writeStream.format("parquet").option("checkpointLocation", "chk/")
            .outputMode("append").start("matches/"))

``match_stream`` groups the stream by a bucket of keys (``hash(key) mod buckets``, Spark's own
hash, so a replay puts every key in the same bucket) and runs ``applyInPandasWithState``: for
each bucket of a micro-batch, its colcep state (a :class:`~colcep.Matcher` snapshot of its keys,
``Matcher.snapshot()`` bytes) is restored, the bucket's new rows are matched (each key's
partial matches are its own, as in one Matcher over all keys), and the snapshot is stored back
in Spark's state store, versioned with the micro-batch, so a query restarted from its checkpoint
replays exactly what it had not committed. A call per bucket rather than per key is what makes
a micro-batch cost what matching costs: a call's fixed cost (restore, snapshot, Spark's pandas
round trip) is paid per bucket. ``buckets=0`` keeps one group per key.

Event time: Spark's watermark (``withWatermark`` on the time column; Spark computes it from the
previous micro-batches) is colcep's watermark: the Matcher is built with
``out_of_orderness="watermarks"`` and each call passes Spark's watermark, so rows wait until
it passes them and are then matched in (time, arrival) order. Rows at or behind the watermark
when they arrive are late: they come out as rows with ``late = true`` (never dropped, and Spark
does not drop them either: the operator does not see the watermarked column itself). A key
that holds waiting rows or partial matches under ``within`` asks for an event-time timeout at
its next deadline (a bucket: the earliest of its keys'), so a quiet key is called again when the
watermark passes it: waiting rows are released and partial matches time out (``timed_out`` rows,
trailing ``not_followed_by``) without a new row of that key.

The output has one row per matched event, as :func:`colcep.spark.match`: ``match_id`` (a
counter per group kept in the state, so ``(key, match_id)`` identifies a match and is the same
after any restart with the same ``buckets``), the key, ``stage``, ``row`` (the ``seq`` column's
value, or without ``seq`` the row's arrival number within its group), ``timed_out`` / ``timeout_ts`` (with
``timeouts=True``), ``late``, ``rejected`` and the selected columns; a late row has ``late = true``,
null ``match_id`` and ``stage``, and its columns.

Bad rows: a row the matcher cannot take (a null in a key column, the time column or the ``seq``
column) comes out at once with ``rejected`` = the reason (``"key column 'name' is null"``), null
``match_id`` and ``stage``, its ``seq`` as ``row`` and its columns; every other row is matched as if
it had not been there, and the query goes on. ``bad_rows="fail"`` fails the micro-batch instead,
with an error that names the row by its ``seq`` and values.

Times: any timestamp Spark holds, before 1970 too. Spark's watermark starts at 0 (1970-01-01) and
never goes below it: rows wait until it is positive, and a key's event-time timer is clamped to
Spark's smallest (1 ms), so it fires with the first watermark past its deadline.

The step of a group (:func:`step`: one key's rows, or a bucket's) needs no Spark; tests drive it
directly.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.errors import CapacityError, InputError
from colcep.engine.inputs import describe_row, first_nulls, null_checks
from colcep.engine.keys import key_names, normalize_key
from colcep.engine.matcher import DEFAULT_MAX_PARTIAL_MATCHES, Matcher
from colcep.pattern import KeyedPattern, Pattern, with_key
from colcep.engine.tiers import DEFAULT_TIER, check_tier
from colcep.engine.watermark import time_values
from colcep.spark.batch import CompiledOnce

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["match_stream", "step", "KeyState", "StreamSpec", "stream_spec", "state_report",
           "DEFAULT_KEY_STATE_BYTES", "LATE", "REJECTED", "BAD_ROWS", "timer_ms", "check_buckets"]

#: Bound on one group's (a bucket's) stored state (snapshot bytes) and on its match buffer.
DEFAULT_KEY_STATE_BYTES = 64 << 20
#: Buckets of keys per shuffle partition when ``match_stream(buckets=None)``.
BUCKETS_PER_PARTITION = 4
#: The output column flagging late rows.
LATE = "late"
#: The output column giving why a row was rejected (null: the row was taken).
REJECTED = "rejected"
#: What ``bad_rows=`` takes: flag bad rows in the output and go on, or fail the micro-batch.
BAD_ROWS = ("flag", "fail")
_WM_COL = "__colcep_wm"          # carries the watermark metadata, never late (see match_stream)
_BUCKET_COL = "__colcep_bucket"  # the group: hash(key) mod buckets
_WM_FAR = "2261-12-31 00:00:00"  # within pandas' nanosecond range
_DELAY_KEY = "spark.watermarkDelayMs"
_RESERVED = ("match_id", "stage", "row", "timed_out", "timeout_ts", LATE, REJECTED)


# ============================================================================ the step of a group
@dataclass(frozen=True)
class StreamSpec(CompiledOnce):
    """What each group's step needs, shipped to the executors as plain data."""

    pattern: Pattern
    key: "str | list[str]"
    time: str                    # int64 microseconds in ``in_schema``
    seq: str | None
    columns: tuple[str, ...]     # user output columns, key excluded
    timeouts: bool
    max_partial_matches: int
    max_state_bytes: int
    in_schema: pa.Schema         # the rows a step receives
    out_schema: pa.Schema        # the rows a step returns
    tier: str = DEFAULT_TIER     # the kernel tier (colcep.Matcher)
    bad_rows: str = "flag"       # one of BAD_ROWS

    @property
    def row(self) -> str:
        return self.seq or "row"

    @property
    def time_unit(self) -> str:
        return "us"

    @property
    def key_columns(self) -> list[str]:
        return key_names(self.key)

    def matcher(self) -> Matcher:
        return Matcher(self.program, key=self.key, time=self.time,
                       columns=[c for c in self.in_schema.names if c not in self.key_columns], timeouts=self.timeouts,
                       time_unit="us", max_partial_matches=self.max_partial_matches,
                       max_state_bytes=self.max_state_bytes, out_of_orderness="watermarks",
                       tier=self.tier, threads=1)  # a task keeps to its core


@dataclass(frozen=True)
class KeyState:
    """One group's stored state (a key's, or a bucket of keys'): its Matcher's snapshot (None while
    the Matcher holds no partial or held match), its rows waiting for the watermark (Arrow IPC
    bytes, or None), and the numbers its match ids and row numbers continue from."""

    snapshot: bytes | None = None
    pending: bytes | None = None
    id_base: int = 0
    row_base: int = 0

    def as_tuple(self) -> tuple:
        return (self.snapshot, self.pending, self.id_base, self.row_base)

    @property
    def nbytes(self) -> int:
        return len(self.snapshot or b"") + len(self.pending or b"")


def stream_spec(schema: pa.Schema, pattern: "Pattern | KeyedPattern", key: "str | Sequence[str] | None" = None, time: str = "ts",
                columns: Sequence[str] | None = None, *, seq: str | None = None, timeouts: bool = False,
                max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
                max_state_bytes: int = DEFAULT_KEY_STATE_BYTES, out_time_type: pa.DataType | None = None,
                tier: str = DEFAULT_TIER, bad_rows: str = "flag") -> StreamSpec:
    """The step spec for rows with Arrow ``schema`` (the time column an int64 of microseconds);
    validated by binding the pattern. Used by :func:`match_stream` and, without Spark, by tests."""
    pattern, key = with_key(pattern, key)
    from colcep.spark.batch import _arrow_kind, _check_columns

    if key is None:
        raise InputError("match_stream needs a key column (key=...): each key's partial matches are its own")
    if bad_rows not in BAD_ROWS:
        raise InputError(f"bad_rows must be one of {BAD_ROWS}, got {bad_rows!r}")
    key = normalize_key(key, time)
    keys = key_names(key)
    fields = {f.name: f.type for f in schema}
    out_cols = _check_columns(fields, _arrow_kind, pattern, key, time, seq, columns)
    clash = [c for c in [*keys, *out_cols] if c in _RESERVED]
    if clash:
        raise InputError(f"column {clash[0]!r} clashes with an output column of match_stream "
                         f"({', '.join(_RESERVED)}); rename it or leave it out of columns")
    from colcep.spark.batch import _pattern_columns

    need = [c for c in dict.fromkeys([*keys, time, seq, *_pattern_columns(pattern), *out_cols]) if c is not None]
    in_schema = pa.schema([schema.field(c) for c in need])
    tt = out_time_type or pa.timestamp("us", tz="UTC")
    out = [pa.field("match_id", pa.int64()), *(schema.field(k) for k in keys), pa.field("stage", pa.string()),
           pa.field("row", pa.int64())]
    if timeouts:
        out += [pa.field("timed_out", pa.bool_()), pa.field("timeout_ts", tt)]
    out += [pa.field(LATE, pa.bool_()), pa.field(REJECTED, pa.string())]
    out += [pa.field(c, tt) if c == time else schema.field(c) for c in out_cols]
    spec = StreamSpec(pattern, key, time, seq, tuple(out_cols), bool(timeouts), int(max_partial_matches),
                      int(max_state_bytes), in_schema, pa.schema(out), check_tier(tier), bad_rows)
    m = spec.matcher()  # binds the pattern: condition types, the window in microseconds
    m.process(in_schema.empty_table())
    return spec


def step(spec: StreamSpec, rows: pa.Table | None, state: KeyState | None,
         watermark: int | None) -> tuple[pa.Table, KeyState, int | None]:
    """One group's work in one micro-batch (a key's, or a bucket of keys': each key is matched on
    its own, as by one Matcher over all of them).

    ``rows``: the group's rows of this micro-batch (``spec.in_schema``, any order; None or empty on
    a timer); ``state``: what the previous micro-batch stored (None for a new group);
    ``watermark``: the micro-batch's event-time watermark in microseconds (None: none yet).
    Returns the output rows (``spec.out_schema``: matches, time-outs, late rows), the state to
    store and the next time (microseconds) the group must be called at even without rows (None:
    only when rows come). Deterministic: the same arguments give the same results.

    Rows with a null key, time or ``seq`` are rejected (:data:`REJECTED`; with
    ``bad_rows="fail"`` an InputError naming the row). Rows at or behind the watermark are late. The others wait in the state until the watermark
    reaches them and then go to the group's Matcher (``out_of_orderness="watermarks"``) with the
    watermark, in (time, ``seq``, key, other values) order, whichever micro-batch they came in
    and in whatever order: the order of the batch path, and the same on any replay."""
    state = state or KeyState()
    late = rejected = None
    waiting = _read_rows(state.pending) if state.pending is not None else None
    if rows is not None and rows.num_rows:
        rows = rows.select(spec.in_schema.names)
        if rows.schema != spec.in_schema:
            rows = rows.cast(spec.in_schema)
        rejected, rows = _reject(spec, rows)
        if watermark is not None:
            is_late = time_values(rows, spec.time) <= watermark
            if is_late.any():
                late, rows = _in_order(spec, rows.filter(pa.array(is_late))), rows.filter(pa.array(~is_late))
        waiting = rows if waiting is None else pa.concat_tables([waiting, rows])
    due = None
    if watermark is not None and waiting is not None and waiting.num_rows:
        is_due = time_values(waiting, spec.time) <= watermark
        if is_due.any():
            due, waiting = waiting.filter(pa.array(is_due)), waiting.filter(pa.array(~is_due))
    out = []
    m = None
    if state.snapshot is not None or due is not None:
        m = _restore(spec, state.snapshot) if state.snapshot is not None else spec.matcher()
        feed = _in_order(spec, due) if due is not None else spec.in_schema.empty_table()
        matches = m.process(feed, watermark=watermark) if watermark is not None else m.process(feed)
        if matches.num_rows:
            out.append(_matches_out(spec, matches, state))
    if rejected is not None:
        out.append(_flagged_out(spec, *rejected))
    if late is not None and late.num_rows:
        out.append(_flagged_out(spec, late))
    table = pa.concat_tables(out) if out else spec.out_schema.empty_table()
    pending = None
    wake = None
    if waiting is not None and waiting.num_rows:
        pending = _write_rows(_in_order(spec, waiting))  # sorted: the same bytes on any replay
        wake = int(time_values(waiting, spec.time).min())
    if m is None:
        new = KeyState(None, pending, state.id_base, state.row_base)
    elif m.is_idle:
        new = KeyState(None, pending, state.id_base + m.matches_emitted, state.row_base + m.rows_received)
    else:
        new = KeyState(m.snapshot(), pending, state.id_base, state.row_base)
        deadline = m.next_deadline
        if deadline is not None:
            wake = deadline if wake is None else min(wake, deadline)
    if new.nbytes > spec.max_state_bytes:
        raise CapacityError(
            f"{_whose(spec, m, waiting)}: its state is {new.nbytes:,} bytes "
            f"({0 if m is None else m.live_partial_matches:,} live partial matches, "
            f"{0 if pending is None else waiting.num_rows:,} rows waiting for the watermark), over the bound "
            f"max_state_bytes={spec.max_state_bytes:,}; tighten the pattern (within(), a more selective condition, "
            "a skip strategy), lower the watermark delay, spread the keys over more buckets, or raise the bound")
    return table, new, wake


def _reject(spec: StreamSpec, rows: pa.Table) -> tuple[tuple[pa.Table, pa.Array] | None, pa.Table]:
    """Splits off the rows the matcher cannot take: ``((bad rows, their reasons) or None, good rows)``.
    A row's reason is its first null among the key columns, the time column and ``seq``."""
    checks = null_checks(spec.key_columns, spec.time, spec.seq)
    reason = first_nulls(rows, checks)
    bad = reason >= 0
    if not bad.any():
        return None, rows
    if spec.bad_rows == "fail":
        i = int(np.flatnonzero(bad)[0])
        role, c = checks[reason[i]]
        raise InputError(f"{role} column {c!r} is null in the row {describe_row(rows, i, spec.time, spec.seq)}; "
                         "drop or fill such rows, or use bad_rows='flag' to have them come out flagged while the "
                         "query goes on")
    texts = pa.array([f"{role} column {c!r} is null" for role, c in checks])
    flagged = rows.filter(pa.array(bad))
    order = _order(spec, flagged)
    return (flagged.take(order), texts.take(pa.array(reason[bad])).take(order)), rows.filter(pa.array(~bad))


def _whose(spec: StreamSpec, m: Matcher | None, waiting: pa.Table | None) -> str:
    """The group a capacity error is about: ``key 'a'``, or ``the bucket of keys 'a', 'b', ...``."""
    keys = dict.fromkeys(m.keys if m is not None else [])
    if waiting is not None and waiting.num_rows:
        cols = [waiting.column(k).to_pylist() for k in spec.key_columns]
        keys.update(dict.fromkeys(zip(*cols) if len(cols) > 1 else cols[0]))
    keys = list(keys)
    if len(keys) == 1:
        return f"key {keys[0]!r}"
    shown = ", ".join(repr(k) for k in keys[:5]) + (f" and {len(keys) - 5:,} more" if len(keys) > 5 else "")
    return f"the bucket of keys {shown}"


def _write_rows(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


def _read_rows(b: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(b)).read_all()


def _restore(spec: StreamSpec, snapshot: bytes) -> Matcher:
    m = Matcher.restore(spec.program, snapshot, tier=spec.tier)
    keys = m._state.keys
    if keys.types[0] is not None and pa.types.is_null(keys.types[0]):
        # a snapshot taken while all the key's rows still waited for the watermark records the
        # key type as null (no key value fed yet); the key's own type is known here
        keys.types = [spec.in_schema.field(k).type for k in spec.key_columns]
    return m


def _in_order(spec: StreamSpec, rows: pa.Table) -> pa.Table:
    """The rows in a deterministic order whatever order they came in: by time, then ``seq``, then
    the key (rows of a bucket's keys may share a time and a ``seq``), then the other columns, so
    that replays agree, and agree with the batch path (which sorts each key's rows by time and
    seq)."""
    return rows.take(_order(spec, rows))


def _order(spec: StreamSpec, rows: pa.Table) -> pa.Array:
    rest = [c for c in rows.column_names if c not in (spec.time, spec.seq) and c not in spec.key_columns]
    cols = [spec.time] + ([spec.seq] if spec.seq is not None else []) + spec.key_columns + rest
    return pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in cols])


def _to_out_time(spec: StreamSpec, a: Any, field: pa.Field) -> pa.Array:
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    return a.cast(pa.int64()).cast(pa.timestamp("us")).cast(field.type) if not pa.types.is_timestamp(a.type) \
        else a.cast(field.type)


def _matches_out(spec: StreamSpec, t: pa.Table, state: KeyState) -> pa.Table:
    schema = spec.out_schema
    n = t.num_rows
    cols = [pc.add(t.column("match_id"), pa.scalar(state.id_base, pa.int64())),
            *(t.column(k) for k in spec.key_columns), t.column("stage"),
            t.column(spec.seq).cast(pa.int64()) if spec.seq is not None else
            pc.add(t.column("row"), pa.scalar(state.row_base, pa.int64()))]
    if spec.timeouts:
        cols += [t.column("timed_out"), _to_out_time(spec, t.column("timeout_ts"), schema.field("timeout_ts"))]
    cols += [pa.array(np.zeros(n, bool)), pa.nulls(n, pa.string())]
    for c in spec.columns:
        cols.append(_to_out_time(spec, t.column(c), schema.field(c)) if c == spec.time else t.column(c))
    return pa.Table.from_arrays([_cast(c, f.type) for c, f in zip(cols, schema)], schema=schema)


def _flagged_out(spec: StreamSpec, t: pa.Table, rejected: pa.Array | None = None) -> pa.Table:
    """Rows that are not matched, with their columns: late ones (``rejected`` None) or rejected
    ones (``rejected``: each row's reason)."""
    schema = spec.out_schema
    n = t.num_rows
    cols = []
    for f in schema:
        if f.name in spec.key_columns:
            cols.append(t.column(f.name))
        elif f.name == "row":
            cols.append(t.column(spec.seq).cast(pa.int64()) if spec.seq is not None else pa.nulls(n, pa.int64()))
        elif f.name == LATE:
            cols.append(pa.array(np.full(n, rejected is None)))
        elif f.name == REJECTED:
            cols.append(pa.nulls(n, pa.string()) if rejected is None else rejected)
        elif f.name in spec.columns:
            cols.append(_to_out_time(spec, t.column(f.name), f) if f.name == spec.time else t.column(f.name))
        else:  # match_id, stage, timed_out, timeout_ts
            cols.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays([_cast(c, f.type) for c, f in zip(cols, schema)], schema=schema)


def _cast(c: Any, t: pa.DataType) -> Any:
    return c if c.type == t else c.cast(t)


# ============================================================================ on Spark
class _StreamFn:
    """The function given to ``applyInPandasWithState``: one :func:`step` per group (a bucket of
    keys, or a key, ``buckets=0``) and call. The state row records ``buckets``: a query restarted
    from its checkpoint with another count (keys would meet state kept under other buckets)
    fails at once instead of matching wrongly."""

    def __init__(self, spec: StreamSpec, buckets: int):
        self.spec, self.buckets = spec, buckets

    def __call__(self, key: tuple, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        from colcep.spark.batch import _warm_kernels

        quiet_worker()
        spec = self.spec
        _warm_kernels(spec)
        parts = [_from_pandas(p, spec.in_schema) for p in pdfs if len(p)]
        rows = pa.concat_tables(parts) if parts else None
        wm_ms = _watermark_ms(state)
        prev = None
        if state.exists:
            *kept, buckets = state.get
            check_buckets(buckets, self.buckets)
            prev = KeyState(*kept)
        out, new, wake = step(spec, rows, prev, wm_ms * 1000 if wm_ms > 0 else None)
        if state.exists or new != KeyState():  # (a group of rejected rows alone keeps no state)
            state.update(new.as_tuple() + (self.buckets,))
        if wake is not None:
            state.setTimeoutTimestamp(timer_ms(wake, wm_ms))
        if out.num_rows:
            yield out.to_pandas()


#: What pandas 2.x says when PySpark 4's worker pads a micro-batch's output with all-NA rows
#: (``pd.concat`` in its ``applyInPandasWithState`` loop), once per micro-batch.
_PADDING_WARNING = "The behavior of DataFrame concatenation with empty or all-NA entries is deprecated"


def quiet_worker() -> None:
    """Ignore, in the Python worker that calls it, the one FutureWarning PySpark's own code
    raises once the micro-batch's calls are done (:data:`_PADDING_WARNING`): the worker's
    stderr is the console's. Warnings filters are per process: the driver's do not reach it."""
    warnings.filterwarnings("ignore", message=re.escape(_PADDING_WARNING), category=FutureWarning)


def check_buckets(stored: int, now: int) -> None:
    """A group's state was stored under ``stored`` buckets: the query must run with as many."""
    if stored != now:
        def say(n: int) -> str:
            return "a group per key (buckets=0)" if n == 0 else f"{n} buckets of keys"
        raise InputError(
            f"this query's checkpoint holds state kept in {say(stored)}, but match_stream now groups the keys "
            f"in {say(now)}; restart it with match_stream(..., buckets={stored}) (the default follows "
            "spark.sql.shuffle.partitions), or from a new checkpoint")


def _from_pandas(pdf: Any, schema: pa.Schema) -> pa.Table:
    """A group's rows as Spark hands them (pandas) in ``schema``, converted column by column as
    ``pa.Table.from_pandas`` would (NaN becomes null), without its pandas metadata work: 0.1 ms
    instead of 0.5 ms for 500 rows, paid per group and micro-batch."""
    return pa.Table.from_arrays([pa.Array.from_pandas(pdf[f.name], type=f.type) for f in schema], schema=schema)


def timer_ms(wake: int, watermark_ms: int) -> int:
    """The event-time timeout (ms) that has Spark call a key once its watermark passes ``wake``
    (us): Spark calls a key when the watermark is past the timestamp, and takes only a positive
    timestamp not behind the watermark, so a deadline at or before 1970 is clamped to 1 ms."""
    return max(-(-wake // 1000) - 1, watermark_ms, 1)


def _watermark_ms(state: Any) -> int:
    """The micro-batch's watermark. The operator's input has no watermarked column of its own
    (so that Spark does not drop late rows), so ``getCurrentWatermarkMs()`` refuses; the state
    object holds the watermark all the same."""
    wm = getattr(state, "_event_time_watermark_ms", None)
    if wm is None:  # pragma: no cover - other pyspark versions
        wm = state.getCurrentWatermarkMs()
    return int(wm) if wm is not None and wm > 0 else 0


def _state_struct():
    from pyspark.sql import types as T

    return T.StructType([T.StructField("snapshot", T.BinaryType(), True),
                         T.StructField("pending", T.BinaryType(), True),
                         T.StructField("id_base", T.LongType(), False),
                         T.StructField("row_base", T.LongType(), False),
                         T.StructField("buckets", T.LongType(), False)])


def match_stream(df: "DataFrame", pattern: "Pattern | KeyedPattern", key: "str | Sequence[str] | None" = None, time: str = "ts",
                 columns: Sequence[str] | None = None, *, seq: str | None = None, timeouts: bool = False,
                 max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
                 max_state_bytes: int = DEFAULT_KEY_STATE_BYTES, tier: str = DEFAULT_TIER,
                 bad_rows: str = "flag", buckets: int | None = None) -> "DataFrame":
    """Find ``pattern`` per ``key`` in a streaming DataFrame; returns a streaming DataFrame of
    matches (one row per matched event) and late rows, to write in ``append`` mode.

    Parameters
    ----------
    df: a streaming DataFrame with a watermark on ``time`` (``df.withWatermark(time, "5 seconds")``):
        Spark's watermark is colcep's; rows behind it come out with ``late = true``.
    pattern: a colcep Pattern; ``within`` windows are event time.
    key: the key column, or a sequence of columns (a composite key); each key's partial matches
        are its own, kept in Spark's state store with those of its bucket.
    time: the event-time column, a timestamp (conditions that read it see microseconds).
    columns: input columns copied into the output (None: all; []: none).
    seq: an integer column that orders rows with equal time within a micro-batch (e.g. an
        arrival id) and becomes the output's ``row``; without it rows of equal time are ordered
        by their key and values, and ``row`` is the row's number within its group (bucket).
    timeouts: also emit timed-out partial matches (``timed_out``, ``timeout_ts``).
    max_partial_matches: bound on one key's live partial matches.
    max_state_bytes: bound on one group's state (a bucket's keys together, or one key's with
        ``buckets=0``: their match buffer and stored snapshot).
    A key or bucket over a bound fails the micro-batch with ``CapacityError`` naming the key(s) and
    figures.
    tier: the kernel tier of every group's Matcher (:func:`colcep.spark.match`).
    bad_rows: ``"flag"`` (default): a row with a null key, time or ``seq`` comes out with
        ``rejected`` = the reason and the query goes on; ``"fail"``: it fails the micro-batch with
        an InputError naming the row.
    buckets: the groups Spark keeps state and timers for: keys go to bucket ``hash(key) mod
        buckets``. None (default): ``BUCKETS_PER_PARTITION`` per shuffle partition; 0: one group
        per key (a call per key and micro-batch). Keep it when restarting a query from its
        checkpoint (the state is stored per bucket).
    """
    pattern, key = with_key(pattern, key)
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    from colcep.spark.batch import _to_arrow

    if not isinstance(pattern, Pattern):
        raise InputError(f"match_stream() needs a colcep Pattern, got {type(pattern).__name__}")
    if not df.isStreaming:
        raise InputError("match_stream() needs a streaming DataFrame (spark.readStream...); for data at rest use "
                         "colcep.spark.match()")
    fields = {f.name: f for f in df.schema.fields}
    if time not in fields:
        raise InputError(f"time column {time!r} is missing; the input has {list(fields)}")
    tf = fields[time]
    if not isinstance(tf.dataType, T.TimestampType):
        raise InputError(f"time column {time!r} must be a timestamp (Spark's watermark needs one), not "
                         f"{tf.dataType.simpleString()}; e.g. F.timestamp_millis(col) for epoch milliseconds")
    delay = tf.metadata.get(_DELAY_KEY)
    if delay is None:
        raise InputError(f"the stream has no watermark on {time!r}: call df.withWatermark({time!r}, '5 seconds') "
                         "first (Spark's event-time watermark decides when rows are matched and which are late)")
    spark = df.sparkSession
    n = _n_buckets(spark, buckets)
    sel = {}
    for c in df.columns:
        if c == time:
            sel[c] = F.unix_micros(F.col(c)).alias(c)  # plain microseconds, without the watermark mark
        else:
            sel[c] = F.col(c).alias(c, metadata={})
    plain = df.select(*sel.values())
    arrow_in = _to_arrow(spark, plain.schema)
    tz = spark.conf.get("spark.sql.session.timeZone", "UTC")
    spec = stream_spec(arrow_in, pattern, key, time, columns, seq=seq, timeouts=timeouts,
                       max_partial_matches=max_partial_matches, max_state_bytes=max_state_bytes,
                       out_time_type=pa.timestamp("us", tz=tz), tier=tier, bad_rows=bad_rows)
    # The operator must see a watermarked column, or Spark refuses event-time timeouts; a
    # constant far-future one is never late, so Spark drops no row: colcep decides lateness.
    # (one projection of the input: what a micro-batch plans)
    extra = [F.lit(_WM_FAR).cast("timestamp").alias(_WM_COL, metadata={_DELAY_KEY: int(delay)})]
    in_struct = {f.name: f for f in plain.schema.fields}
    out_fields = [T.StructField("match_id", T.LongType(), True),
                  *(T.StructField(k, in_struct[k].dataType, True) for k in spec.key_columns),
                  T.StructField("stage", T.StringType(), True), T.StructField("row", T.LongType(), True)]
    if timeouts:
        out_fields += [T.StructField("timed_out", T.BooleanType(), True),
                       T.StructField("timeout_ts", T.TimestampType(), True)]
    out_fields += [T.StructField(LATE, T.BooleanType(), False), T.StructField(REJECTED, T.StringType(), True)]
    out_fields += [T.StructField(c, T.TimestampType() if c == time else in_struct[c].dataType, True)
                   for c in spec.columns]

    if n:
        extra.append(F.pmod(F.hash(*(F.col(k) for k in spec.key_columns)), F.lit(n)).alias(_BUCKET_COL))
    proj = df.select(*(sel[c] for c in spec.in_schema.names), *extra)
    return proj.groupBy(*([_BUCKET_COL] if n else spec.key_columns)).applyInPandasWithState(
        _StreamFn(spec, n), T.StructType(out_fields), _state_struct(), "append", GroupStateTimeout.EventTimeTimeout)


def _n_buckets(spark: Any, buckets: int | None) -> int:
    """The number of key buckets (0: a group per key)."""
    if buckets is None:
        parts = spark.conf.get("spark.sql.shuffle.partitions", "200")
        return BUCKETS_PER_PARTITION * (int(parts) if str(parts).isdigit() else 200)
    if isinstance(buckets, bool) or not isinstance(buckets, (int, np.integer)) or buckets < 0:
        raise InputError(f"buckets must be a whole number >= 0 (0: a group per key), got {buckets!r}")
    return int(buckets)


def state_report(query: "StreamingQuery") -> dict:
    """The state of ``match_stream``'s operator after the query's last micro-batch, from its
    progress: the groups holding state (buckets of keys, or keys with ``buckets=0``), bytes in
    memory and on the latest state version, and bytes per group."""
    prog = query.lastProgress
    ops = (prog or {}).get("stateOperators") or []
    groups = sum(int(o.get("numRowsTotal", 0)) for o in ops)
    mem = sum(int(o.get("memoryUsedBytes", 0)) for o in ops)
    disk = sum(int((o.get("customMetrics") or {}).get("stateOnCurrentVersionSizeBytes", 0)) for o in ops)
    return {"batch": (prog or {}).get("batchId"), "groups": groups, "memory_bytes": mem, "version_bytes": disk,
            "bytes_per_group": (disk / groups) if groups else 0.0,
            "memory_bytes_per_group": (mem / groups) if groups else 0.0}
