"""Batch scans on Spark: :func:`match` runs one Matcher pass per task through ``DataFrame.mapInArrow``.

``match`` projects the input to the columns the pattern and the output need, repartitions
by the key, sorts each partition by (key, time, row identity) and runs one
:class:`~colcep.Matcher` pass per task over the Arrow batches. A key's partial matches are
carried across batch boundaries; a key is closed (its window-held matches and timeouts
released, as at the end of a stream) once the next key has started. The result has the
in-process output's shape (``match_id``, key, ``stage``, ``row``, optionally ``timed_out``
and ``timeout_ts``, then the selected columns), where ``row`` is the row identity: the
``seq`` column when given, else an id Spark assigns to each input row. Match ids are
``partition << 40 | n``: unique over the job and the same for the same input and partitioning.

Where the input is Parquet already laid out by key (Hive partitions ``key=value/`` or files
that each hold whole keys), :func:`match_parquet` lets Spark hand out the files and the
executors read them with pyarrow, skipping the JVM's row conversion.

On a cluster whose executors do not have colcep installed, ``ship(spark)`` adds a zip of
colcep to the session (or pass ``dist/colcep-<version>.zip`` from ``make dist`` to
``spark-submit --py-files``); see :mod:`colcep.spark.ship`.

pyspark is imported lazily: ``import colcep`` never needs it.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.kernel_cache import compile_lock, kernel_compiles
from colcep.errors import InputError
from colcep.expr import Expr
from colcep.engine.inputs import as_table, describe_row, first_nulls, null_checks
from colcep.engine.keys import key_names, normalize_key
from colcep.engine.many import PATTERN_COL, close_all, keys_encoded, lockstep, process_all, with_pattern
from colcep.engine.matcher import DEFAULT_MAX_PARTIAL_MATCHES, NAMES_TYPE, Matcher
from colcep.pattern import KeyedPattern, Pattern, with_key
from colcep.engine.progress import progress_wanted
from colcep.spark.progress import spark_scan_meter
from colcep.engine.program import CompiledPattern
from colcep.engine.program import compile as compile_program
from colcep.engine.tiers import DEFAULT_TIER, check_tier

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["match", "match_many", "output_schema", "ScanMetrics", "KeyedStream", "Streams", "arrow_spec", "ID_BITS",
           "ROW_COL"]

#: Match ids (and generated row ids of the Parquet path) are ``part << ID_BITS | n``.
ID_BITS = 40
ROW_COL = "__colcep_row"
_RESERVED = ("match_id", "stage", "row", "timed_out", "timeout_ts")


# ============================================================================ per task
class CompiledOnce:
    """For a frozen spec with a ``pattern``: its program, compiled once (on the driver, or once
    per task) and reused by every Matcher of the task."""

    @property
    def program(self) -> CompiledPattern:
        prog = self.__dict__.get("_program")
        if prog is None:
            prog = compile_program(self.pattern)
            object.__setattr__(self, "_program", prog)
        return prog


@dataclass(frozen=True)
class _Spec(CompiledOnce):
    """Everything a task needs, shipped to the executors as plain data."""

    pattern: Pattern
    key: "str | list[str] | None"
    time: str
    row: str  # the column holding the row identity
    columns: tuple[str, ...]  # user output columns, key excluded
    timeouts: bool
    time_unit: str
    max_partial_matches: int
    in_schema: pa.Schema  # Arrow schema of the rows a task receives
    out_schema: pa.Schema  # Arrow schema Spark expects back
    tier: str = DEFAULT_TIER  # the kernel tier of every task's Matcher

    @property
    def key_columns(self) -> list[str]:
        return key_names(self.key)

    def matcher(self, threads: int = 1) -> Matcher:
        """A Matcher of this spec; one thread by default: a Spark task keeps to its core."""
        cols = list(dict.fromkeys(self.columns + (self.row,)))
        return Matcher(self.program, key=self.key, time=self.time,
                       columns=[c for c in cols if c not in self.key_columns],
                       timeouts=self.timeouts, time_unit=self.time_unit,
                       max_partial_matches=self.max_partial_matches, tier=self.tier,
                       threads=threads)


class KeyedStream:
    """Matches a stream of Arrow batches sorted by key (then time), as one Spark task sees it.

    Keys are contiguous; a key may span any number of batches and a batch may hold any
    number of keys. One Matcher covers a run of batches and is closed once a key that it
    did not hold starts, so a finished key's state lives at most until the next batch.
    With ``grouped=False`` keys may interleave (each key's rows in time order, as in a file of
    ticks in arrival order): one Matcher on ``threads`` threads takes every batch.
    Output tables follow the spec's ``out_schema``; match ids count up from ``id_base``.
    """

    def __init__(self, spec: _Spec, id_base: int = 0, *, grouped: bool = True, threads: int = 1):
        self.spec = spec
        self._grouped = grouped and spec.key is not None
        self._threads = int(threads)
        self._base = int(id_base)  # first id of the current Matcher
        self._hi = 0  # ids the current Matcher has used
        self._m: Matcher | None = None
        self._open: list[pa.Scalar] | None = None  # the key the current Matcher may still receive
        self.rows = 0
        self.matches = 0

    def feed(self, batch: pa.RecordBatch | pa.Table) -> list[pa.Table]:
        """Push one batch; returns the output tables it completed (possibly none)."""
        n = batch.num_rows
        if n == 0:
            return []
        self.check_nulls(batch)
        self.rows += n
        out: list[pa.Table] = []
        if not self._grouped:
            self._emit(out, self.matcher().process(batch))
            return out
        keys = [batch.column(k) for k in self.spec.key_columns]
        start = 0
        if self._m is not None:
            same = pc.equal(keys[0], self._open[0])
            for a, v in zip(keys[1:], self._open[1:]):
                same = pc.and_(same, pc.equal(a, v))
            k = int(pc.sum(same).as_py() or 0)
            if k and not pc.all(same.slice(0, k)).as_py():
                shown = [v.as_py() for v in self._open]
                raise InputError(f"the input is not grouped by the key column {self.spec.key!r}: key "
                                 f"{shown[0] if len(shown) == 1 else tuple(shown)!r} appears again after other keys")
            if k:
                self._emit(out, self._m.process(batch.slice(0, k)))
            if k == n:
                return out
            self._close_matcher(out)
            start = k
        self._m = self.spec.matcher()
        self._emit(out, self._m.process(batch.slice(start)))
        self._open = [a[n - 1] for a in keys]
        return out

    def matcher(self) -> Matcher:
        """The Matcher that takes every batch (``grouped=False``), made at the first."""
        if self._m is None:
            self._m = self.spec.matcher(self._threads)
        return self._m

    def took(self, n: int, out: pa.Table) -> list[pa.Table]:
        """``feed``'s output for a batch of ``n`` rows (``grouped=False``) that ``matcher()``
        took apart, giving ``out``."""
        self.rows += n
        res: list[pa.Table] = []
        self._emit(res, out)
        return res

    def check_nulls(self, batch: pa.RecordBatch | pa.Table) -> None:
        """A null key, time or seq is an InputError naming the row as the input has it (its seq
        and values), not by its place in this task's sorted share of the rows."""
        spec = self.spec
        seq = None if spec.row == ROW_COL else spec.row
        checks = null_checks(spec.key_columns, spec.time, seq)
        if not any(batch.column(c).null_count for _, c in checks):
            return
        first = first_nulls(batch, checks)
        i = int(np.flatnonzero(first >= 0)[0])
        role, c = checks[first[i]]
        raise InputError(f"{role} column {c!r} has a null in the row {describe_row(batch, i, spec.time, seq, (ROW_COL,))}"
                         "; drop or fill such rows before matching")

    def finish(self, closed: pa.Table | None = None) -> list[pa.Table]:
        """End of the task's input: close the open keys (``closed``: what ``matcher().close()``
        gave, called apart)."""
        out: list[pa.Table] = []
        if self._m is not None:
            self._close_matcher(out, closed)
        return out

    def _close_matcher(self, out: list[pa.Table], closed: pa.Table | None = None) -> None:
        self._emit(out, self._m.close() if closed is None else closed)
        self._base += self._hi
        self._hi = 0
        self._m = None

    def _emit(self, out: list[pa.Table], tbl: pa.Table) -> None:
        if tbl.num_rows == 0:
            return
        spec = self.spec
        local = tbl.column("match_id")
        span = pc.min_max(local)
        lo, hi = int(span["min"].as_py()), int(span["max"].as_py())
        self._hi = max(self._hi, hi + 1)
        cols = [pc.add(local, pa.scalar(self._base, pa.int64()))]
        cols += [tbl.column(k) for k in spec.key_columns]
        cols += [tbl.column("stage"), tbl.column(spec.row).cast(pa.int64())]
        if spec.timeouts:
            cols += [tbl.column("timed_out"), tbl.column("timeout_ts")]
        cols += [tbl.column(c) for c in spec.columns]
        res = pa.Table.from_arrays(cols, schema=spec.out_schema) if _same_types(cols, spec.out_schema) else \
            pa.Table.from_arrays([c.cast(f.type) for c, f in zip(cols, spec.out_schema)], schema=spec.out_schema)
        self.matches += hi - lo + 1  # a call's matches are numbered on, each with a row at least
        out.append(res)


class Streams:
    """One :class:`KeyedStream` per pattern, fed the same batches: one spec, or several by name
    (then each output table carries its pattern's name first, ``pattern``, and the key is
    dictionary-encoded once for all of them; ungrouped, their Matchers step each batch in one
    pass, ``colcep.engine.many.process_all``). ``grouped``, ``threads``, ``id_base``: as for
    :class:`KeyedStream`."""

    def __init__(self, specs: "_Spec | Mapping[str, _Spec]", threads: int = 1, *, grouped: bool = True,
                 id_base: int = 0):
        self.specs = dict(specs) if isinstance(specs, Mapping) else {"": specs}
        self.named = isinstance(specs, Mapping) and len(self.specs) > 1
        self.first = next(iter(self.specs.values()))
        self.streams = {n: KeyedStream(s, id_base, grouped=grouped, threads=threads) for n, s in self.specs.items()}
        self.schema = self.first.out_schema
        self._lockstep = self.named and not grouped
        self._matchers: list[Matcher] | None = None
        # the pattern column typed as the stage column: dictionary-encoded in Arrow, strings for Spark
        self._dictionary = self.first.out_schema.field("stage").type == NAMES_TYPE
        self._names = pa.array(list(self.specs), pa.string())
        self._index = {n: i for i, n in enumerate(self.specs)}
        if self.named:
            self.schema = pa.schema([pa.field(PATTERN_COL, self.first.out_schema.field("stage").type, False),
                                     *self.first.out_schema])

    @property
    def rows(self) -> int:
        return next(iter(self.streams.values())).rows

    @property
    def matches(self) -> int:
        return sum(s.matches for s in self.streams.values())

    def check_nulls(self, tbl: "pa.Table | pa.RecordBatch") -> None:
        next(iter(self.streams.values())).check_nulls(tbl)

    def feed(self, batch: "pa.Table | pa.RecordBatch") -> list[pa.Table]:
        if self.named and not self._lockstep:  # (lockstep, the shared KeyCodes codes them once)
            batch = keys_encoded(as_table(batch), self.first.key_columns)
        if self._lockstep and batch.num_rows:
            self.check_nulls(batch)
            if self._matchers is None:
                self._matchers = [s.matcher() for s in self.streams.values()]
                lockstep(self._matchers)
            outs = process_all(self._matchers, batch)
            return [self._name(n, t) for (n, s), out in zip(self.streams.items(), outs)
                    for t in s.took(batch.num_rows, out)]
        return [self._name(n, t) for n, s in self.streams.items() for t in s.feed(batch)]

    def finish(self) -> list[pa.Table]:
        if self._matchers is not None:
            closed = close_all(self._matchers)
            return [self._name(n, t) for (n, s), c in zip(self.streams.items(), closed) for t in s.finish(c)]
        return [self._name(n, t) for n, s in self.streams.items() for t in s.finish()]

    def _name(self, name: str, t: pa.Table) -> pa.Table:
        return with_pattern(self._index[name], t, self._names, self._dictionary) if self.named else t


def with_dictionary_keys(spec: _Spec) -> _Spec:
    """``spec`` with its string key columns dictionary-encoded in the output (the key codes the
    Matcher keeps over the keys seen: no string copied per row), for Arrow and Parquet output
    (Spark's types have no dictionaries)."""
    def typed(f: pa.Field) -> pa.Field:
        text = pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        return f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in spec.key_columns and text else f

    return replace(spec, out_schema=pa.schema([typed(f) for f in spec.out_schema]))


def arrow_spec(schema: pa.Schema, pattern: "Pattern | KeyedPattern", key: "str | Sequence[str] | None" = None, time: str = "ts",
               columns: Sequence[str] | None = None, *, seq: str | None = None, timeouts: bool = False,
               time_unit: str = "ms", max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
               tier: str = DEFAULT_TIER) -> _Spec:
    """The task spec for input with Arrow ``schema`` (validated; without ``seq`` the rows
    must carry a generated ``__colcep_row`` column). Used without Spark by the CLI's
    in-process scan and by tests: ``KeyedStream(arrow_spec(...))``."""
    pattern, key = with_key(pattern, key)
    key = normalize_key(key, time)
    fields = {f.name: f.type for f in schema}
    out_cols = _check_columns(fields, _arrow_kind, pattern, key, time, seq, columns)
    need = [c for c in dict.fromkeys([*key_names(key), time, seq, *_pattern_columns(pattern), *out_cols])
            if c is not None]
    in_fields = [schema.field(c) for c in need] + ([pa.field(ROW_COL, pa.int64())] if seq is None else [])
    out = [pa.field("match_id", pa.int64(), False)]
    out += [schema.field(k) for k in key_names(key)]
    out += [pa.field("stage", NAMES_TYPE, False), pa.field("row", pa.int64(), False)]
    if timeouts:
        out += [pa.field("timed_out", pa.bool_(), False), pa.field("timeout_ts", pa.int64())]
    out += [schema.field(c) for c in out_cols]
    spec = _Spec(pattern, key, time, seq or ROW_COL, tuple(out_cols), bool(timeouts), time_unit,
                 int(max_partial_matches), pa.schema(in_fields), pa.schema(out), check_tier(tier))
    _validate_pattern(spec)
    return spec


def _same_types(cols: list, schema: pa.Schema) -> bool:
    return all(c.type == f.type for c, f in zip(cols, schema))


# ---------------------------------------------------------------------------- worker set-up
_WARM: dict[str, float] = {}  # warm-up key of a spec -> seconds this process spent warming it up


def _warm_key(spec: _Spec) -> str:
    """What decides which kernel specialisations a task calls: the pattern and the input's types."""
    key = spec.__dict__.get("_warm_key")
    if key is None:
        import hashlib
        import pickle

        try:
            blob = pickle.dumps((spec.pattern, spec.in_schema, spec.key, spec.time, spec.row, spec.timeouts,
                                 spec.time_unit))
        except Exception:  # noqa: BLE001 - an unpicklable pattern still runs; it is warmed up per task
            blob = repr(spec).encode()
        key = hashlib.sha1(blob).hexdigest()
        object.__setattr__(spec, "_warm_key", key)
    return key


def _warm_table(spec: _Spec) -> pa.Table:
    """Synthetic rows of the task's input schema that make the Matcher call the kernels as a
    large real batch does: more rows than one kernel call takes (the Matcher splits them into
    calls) over at most CHUNK_ROWS / CHUNK_ROWS_PER_KEY keys. Values are zeros: only the types
    and array layouts matter to Numba. Rows reach kernels an empty batch does not call (the
    history columns of ``prev`` / ``rolling``: 3 more specialisations on a cold cache), and a
    layout that would depend on the batch size is covered too."""
    from colcep.engine import matcher as mm

    chunk = int(getattr(mm, "CHUNK_ROWS", 1 << 14))
    per_key = int(getattr(mm, "CHUNK_ROWS_PER_KEY", 64))
    n = 2 * chunk + 1
    n_keys = max(1, min(chunk // max(per_key, 1), 256))
    idx = np.arange(n, dtype=np.int64)
    cols = []
    for f in spec.in_schema:
        t = f.type
        if f.name in spec.key_columns:
            if pa.types.is_boolean(t):
                arr = pa.array(idx % 2 == 1)
            elif pa.types.is_integer(t):
                arr = pa.array(idx % n_keys).cast(t)
            else:
                arr = pa.array([f"k{i}" for i in range(n_keys)]).take(pa.array(idx % n_keys)).cast(t)
        elif f.name == spec.time or f.name == spec.row:
            arr = pa.array(idx).cast(t)
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or \
                pa.types.is_timestamp(t):
            arr = pa.array(np.zeros(n, np.int64)).cast(t)
        elif pa.types.is_boolean(t):
            arr = pa.array(np.zeros(n, bool))
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            arr = pa.array([""]).take(pa.array(np.zeros(n, np.int32))).cast(t)
        else:
            arr = pa.nulls(n, t)
        cols.append(arr)
    return pa.Table.from_arrays(cols, schema=spec.in_schema)


def _warm_kernels(spec: _Spec) -> float:
    """Load (or, on a cold cache, compile) the kernel specialisations this spec's tasks call,
    once per worker process and pattern, before the task's rows run.

    The worker processes of a machine take the machine-wide lock first
    (:func:`colcep.engine.kernel_cache.compile_lock`), so one compiles and writes the on-disk cache (a folder
    that does not depend on the application, :mod:`colcep.engine.kernel_cache`) while the others wait and then
    load it: Numba compiles once per machine. Returns the seconds spent (0 when this process had
    already warmed this pattern up)."""
    key = _warm_key(spec)
    if key in _WARM:
        return 0.0
    t0 = time.perf_counter()
    with compile_lock():
        m = spec.matcher()
        m.process(spec.in_schema.empty_table())  # a whole (contiguous) batch: the small-batch layout
        m.close()
        try:  # a batch larger than one kernel call (the Matcher splits it into calls), kept cheap:
            # a low bound on partial matches stops a pattern that the zeros happen to satisfy
            small = replace(spec, max_partial_matches=min(spec.max_partial_matches, 64))
            object.__setattr__(small, "_program", spec.program)
            m = small.matcher()
            warm = _warm_table(spec)
            m.process(warm)
            m.close()
            from colcep.engine.ordering import key_time_order  # (match_parquet orders file groups with it)

            key_time_order(warm, spec.key, spec.time, spec.row)
        except Exception:  # noqa: BLE001 - e.g. a CapacityError on the synthetic rows, after the compile
            pass
    _WARM[key] = time.perf_counter() - t0
    return _WARM[key]


class ScanMetrics:
    """Spark accumulators a job fills in: rows and batches read, matches, tasks, task
    seconds, the seconds worker processes spent warming the kernels up for the pattern
    (loading them, or compiling under the machine's lock: ``warm_seconds``; ``warm_workers``:
    how many worker processes did so), ``compiles``: the kernel specialisations the workers
    compiled during the job (Numba cache misses; 0 when every worker loaded them from the
    machine's cache), and ``late_compiles``: those compiled after the warm-up, while rows ran
    (outside the machine's lock; 0 when the warm-up covered what the tasks call). Values are
    complete once the action that ran the job has returned."""

    _FIELDS = ("rows", "batches", "matches", "tasks", "task_seconds", "warm_seconds", "warm_workers", "compiles",
               "late_compiles")

    def __init__(self, spark: "SparkSession"):
        sc = spark.sparkContext
        for f in self._FIELDS:
            setattr(self, "_" + f, sc.accumulator(0.0 if f.endswith("seconds") else 0))

    def __getattr__(self, name: str) -> Any:
        if name in ScanMetrics._FIELDS:
            return self.__dict__["_" + name].value
        raise AttributeError(name)

    def add(self, **values: float) -> None:
        for k, v in values.items():
            self.__dict__["_" + k].add(v)

    def as_dict(self) -> dict[str, float]:
        return {f: getattr(self, f) for f in self._FIELDS}

    def on_task(self, callback: "Callable[[], None] | None") -> None:
        """Call ``callback()`` on the driver each time a task's values have been added (on
        PySpark's accumulator thread, before Spark counts the task finished: the last task's
        call comes before the action returns); None removes it. A task sends all of its
        accumulators in one message, in the order this object made them, so the hook sits on
        the last one: the task's rows and matches are in when it runs."""
        acc = self.__dict__["_" + self._FIELDS[-1]]
        listened = _listened()
        if callback is None:
            if isinstance(acc, listened):
                acc.__class__ = listened.__mro__[1]
                acc.__dict__.pop("_listener", None)
            return
        if not isinstance(acc, listened):
            acc.__class__ = listened
        acc._listener = callback


@functools.lru_cache(maxsize=None)
def _listened():
    """A driver-side accumulator class that calls ``_listener()`` after each update (pickled to
    the executors as a plain accumulator: ``Accumulator.__reduce__``); pyspark is imported on
    first use."""
    from pyspark.accumulators import Accumulator

    class Listened(Accumulator):
        def add(self, term):
            super().add(term)
            listener = self.__dict__.get("_listener")
            if listener is not None and not self._deserialized:
                try:
                    listener()
                except Exception:  # noqa: BLE001 - a progress meter never fails the job
                    pass

    return Listened


class _TaskMatcher:
    """The function given to ``mapInArrow``: per task (partition), one KeyedStream per pattern
    (one spec, or several by name: their rows carry the pattern's name first), fed every batch."""

    def __init__(self, specs: "_Spec | dict[str, _Spec]", metrics: ScanMetrics | None):
        self.specs = specs
        self.metrics = metrics

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        t0 = time.perf_counter()
        c0 = kernel_compiles()
        specs = self.specs.values() if isinstance(self.specs, dict) else [self.specs]
        warm = sum(_warm_kernels(spec) for spec in specs)
        c1 = kernel_compiles()
        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        streams = Streams(self.specs, id_base=part << ID_BITS)
        n_batches = 0
        for b in batches:
            n_batches += 1
            for t in streams.feed(b):
                yield from t.to_batches()
        for t in streams.finish():
            yield from t.to_batches()
        if self.metrics is not None:
            self.metrics.add(rows=streams.rows, batches=n_batches, matches=streams.matches, tasks=1,
                             task_seconds=time.perf_counter() - t0, warm_seconds=warm, warm_workers=int(warm > 0),
                             compiles=kernel_compiles() - c0, late_compiles=kernel_compiles() - c1)


# ============================================================================ driver side
def _spark_types():
    from pyspark.sql import types as T

    return T


def _pattern_columns(pattern: Pattern) -> dict[str, list[str]]:
    """Column -> the stages whose conditions read it."""
    out: dict[str, list[str]] = {}

    def walk(p: Pattern) -> None:
        for st in p.stages:
            for child in st.children:
                walk(child)
            for e in (st.condition, st.until):
                if isinstance(e, Expr):
                    for c in sorted(e.columns()):
                        out.setdefault(c, []).append(st.name)
    walk(pattern)
    return out


def _check_columns(fields: dict[str, Any], kind_of, pattern: Pattern, key: Any, time_col: str,
                   seq: str | None, columns: Sequence[str] | None) -> list[str]:
    """Validate names and types (``kind_of(type) -> 'int' | 'time' | 'num' | 'str' | 'bool' |
    'other'``); returns the user's output columns (key columns excluded)."""
    names = list(fields)
    keys = key_names(key, time_col)
    for role, c in [("key", k) for k in keys] + [("time", time_col), ("seq", seq)]:
        if c is not None and c not in fields:
            raise InputError(f"{role} column {c!r} is missing; the input has {names}")
    if ROW_COL in fields:
        raise InputError(f"the input has a column named {ROW_COL!r}, which colcep reserves")
    if kind_of(fields[time_col]) not in ("int", "time"):
        raise InputError(f"time column {time_col!r} must be an integer or timestamp column, not "
                         f"{fields[time_col]}")
    for k in keys:
        if kind_of(fields[k]) not in ("int", "str", "bool"):
            raise InputError(f"key column {k!r} must be a string, integer or boolean column, not {fields[k]}")
    if seq is not None and kind_of(fields[seq]) != "int":
        raise InputError(f"seq column {seq!r} (the tie-breaker and row identity) must be an integer column, "
                         f"not {fields[seq]}")
    for c, stages in _pattern_columns(pattern).items():
        if c not in fields:
            raise InputError(f"stage {stages[0]!r} reads column {c!r}, which is missing; the input has {names}")
        if kind_of(fields[c]) == "other":
            raise InputError(f"stage {stages[0]!r}: column {c!r} has type {fields[c]}, which conditions cannot "
                             "read (use numbers, strings, booleans or timestamps)")
    if columns is None:
        out = [c for c in names if c not in keys]
    else:
        out = list(dict.fromkeys(columns))
        missing = [c for c in out if c not in fields]
        if missing:
            raise InputError(f"output columns {missing} are missing; the input has {names}")
        out = [c for c in out if c not in keys]
    clash = [c for c in keys + out if c in _RESERVED]
    if clash:
        raise InputError(f"column {clash[0]!r} clashes with an output column of colcep "
                         f"({', '.join(_RESERVED)}); rename it or leave it out of columns")
    return out


def _spark_kind(t: "DataType") -> str:
    T = _spark_types()
    if isinstance(t, T.IntegralType):
        return "int"
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):
        return "time"
    if isinstance(t, (T.FractionalType,)):
        return "num"
    if isinstance(t, T.StringType):
        return "str"
    if isinstance(t, T.BooleanType):
        return "bool"
    return "other"


def _arrow_kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_timestamp(t):
        return "time"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "num"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or (
            pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type))):
        return "str"
    if pa.types.is_boolean(t):
        return "bool"
    return "other"


def _to_arrow(spark: "SparkSession", schema: "StructType") -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    large = str(spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower() == "true"
    tz = spark.conf.get("spark.sql.session.timeZone", "UTC")
    try:
        return to_arrow_schema(schema, timezone=tz, prefers_large_types=large)
    except Exception as exc:  # unsupported Spark types
        raise InputError(f"these columns cannot be sent to Python as Arrow: {exc}") from exc


def _out_fields(key_fields: list, timeouts: bool, col_fields: list) -> list:
    T = _spark_types()
    fields = [T.StructField("match_id", T.LongType(), False)]
    fields += [T.StructField(f.name, f.dataType, True) for f in key_fields]
    fields += [T.StructField("stage", T.StringType(), False), T.StructField("row", T.LongType(), False)]
    if timeouts:
        fields += [T.StructField("timed_out", T.BooleanType(), False), T.StructField("timeout_ts", T.LongType(), True)]
    return fields + [T.StructField(f.name, f.dataType, True) for f in col_fields]


def _validate_pattern(spec: _Spec) -> None:
    """Bind the pattern to the input schema on the driver (condition types, window units):
    errors surface before the job, and this machine's kernel cache is warm for the workers."""
    with compile_lock():
        m = spec.matcher()
        m.process(spec.in_schema.empty_table())
        m.close()


def output_schema(df: "DataFrame", pattern: "Pattern | KeyedPattern", key: "str | Sequence[str] | None" = None, time: str = "ts",
                  columns: Sequence[str] | None = None, *, timeouts: bool = False) -> "StructType":
    """The Spark schema :func:`match` returns for ``df``."""
    pattern, key = with_key(pattern, key)
    T = _spark_types()
    fields = {f.name: f for f in df.schema.fields}
    out_cols = _check_columns({k: f.dataType for k, f in fields.items()}, _spark_kind, pattern, key, time, None,
                              columns)
    return T.StructType(_out_fields([fields[k] for k in key_names(key)], timeouts, [fields[c] for c in out_cols]))


def match(df: "DataFrame", pattern: "Pattern | KeyedPattern", key: "str | Sequence[str] | None" = None, time: str = "ts",
          columns: Sequence[str] | None = None, *, seq: str | None = None, timeouts: bool = False,
          time_unit: str = "ms", max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
          num_partitions: int | None = None, check_nulls: bool = True,
          metrics: ScanMetrics | None = None, tier: str = DEFAULT_TIER, progress: bool | None = None) -> "DataFrame":
    """Find ``pattern`` in a Spark DataFrame, per ``key``, in ``time`` order; returns a lazy
    DataFrame of matches (one row per matched event).

    Parameters
    ----------
    df: the input; only the key, time, seq, condition and output columns are shuffled.
    pattern: a colcep Pattern.
    key: the partition column (Flink's ``keyBy``), or a sequence of columns (a composite key);
        None matches one stream in one task.
    time: integer or timestamp event-time column.
    columns: input columns copied into the output (None: all; []: none).
    seq: an integer column that orders rows with equal time (unique per key, e.g. an arrival
        id) and becomes the output's ``row``. Without it Spark's ``monotonically_increasing_id``
        of the input row is used: deterministic for the same input files and partitioning.
    timeouts, time_unit, max_partial_matches: as for :class:`colcep.Matcher`.
    num_partitions: tasks after the repartition by key (default: spark.sql.shuffle.partitions, 200
        unless the session sets it; ``default_partitions(spark, rows)`` picks one from the data and
        the cores, as ``colcep scan`` does).
    check_nulls: run a quick JVM query for nulls in the key / time / seq columns (when their
        schema allows nulls), so that they are reported before the job starts.
    metrics: a :class:`ScanMetrics` to fill in while the job runs.
    tier: every task's kernel tier (:class:`colcep.Matcher`): ``"auto"`` or ``"compiled"``
        compile the pattern's step once per executor machine and shape (~10-20 s of CPU, then
        Numba's disk cache), worth it for long scans.
    progress: a meter of the job that runs the returned DataFrame, from Spark's status tracker
        and ``metrics`` (made when not given): its matching stage's tasks, the rows and matches
        of the finished ones, rows/s (no total: counting the input would be a job of its own).
        None (default): on when stderr is a terminal or this is a notebook; True / False.
        As :func:`match_parquet`; see :class:`colcep.spark.progress.SparkScanMeter`.

    Arrow batch size is the session's ``spark.sql.execution.arrow.maxRecordsPerBatch``
    (read when the job runs); any size works, large ones (>= 100 000) are faster.
    """
    pattern, key = with_key(pattern, key)
    if not isinstance(pattern, Pattern):
        raise InputError(f"match() needs a colcep Pattern, got {type(pattern).__name__}")
    parts, specs, out_struct, n = _plan(df, {"": pattern}, key, time, columns, seq, timeouts, time_unit,
                                        max_partial_matches, num_partitions, check_nulls, tier)
    return _run(parts, _TaskMatcher(specs[""], metrics), out_struct, n, progress, metrics, "colcep.spark.match")


def match_many(df: "DataFrame", patterns: "dict[str, Pattern | KeyedPattern]",
               key: "str | Sequence[str] | None" = None, time: str = "ts", columns: Sequence[str] | None = None, *,
               seq: str | None = None, timeouts: bool = False, time_unit: str = "ms",
               max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES, num_partitions: int | None = None,
               check_nulls: bool = True, metrics: ScanMetrics | None = None, tier: str = DEFAULT_TIER,
               progress: bool | None = None) -> "DataFrame":
    """:func:`match` for several patterns in one job: the rows are projected, shuffled and sorted
    once, and each task runs every pattern over them. The output is each pattern's own (as
    ``match(df, patterns[name], ...)`` gives it, match ids included) with the pattern's name in a
    first column ``pattern``. ``patterns``: a mapping of names to patterns, all keyed alike."""
    from colcep.engine.many import _common_key

    if not isinstance(patterns, dict) or not patterns or not all(isinstance(n, str) and n for n in patterns):
        raise InputError("match_many takes a non-empty mapping of pattern names (strings) to patterns")
    key = _common_key(patterns, key)
    pats = {name: with_key(p, key)[0] for name, p in patterns.items()}
    for name, p in pats.items():
        if not isinstance(p, Pattern):
            raise InputError(f"pattern {name!r}: match_many needs colcep Patterns, got {type(p).__name__}")
    if columns is not None and PATTERN_COL in columns or columns is None and PATTERN_COL in df.columns:
        raise InputError(f"the output column {PATTERN_COL!r} names each row's pattern; rename the input's "
                         f"{PATTERN_COL!r} column or leave it out of columns")
    parts, specs, out_struct, n = _plan(df, pats, key, time, columns, seq, timeouts, time_unit,
                                        max_partial_matches, num_partitions, check_nulls, tier)
    T = _spark_types()
    out_struct = T.StructType([T.StructField(PATTERN_COL, T.StringType(), False), *out_struct.fields])
    return _run(parts, _TaskMatcher(specs, metrics), out_struct, n, progress, metrics, "colcep.spark.match_many")


def _plan(df: "DataFrame", patterns: "dict[str, Pattern]", key: Any, time: str, columns: Sequence[str] | None,
          seq: str | None, timeouts: bool, time_unit: str, max_partial_matches: int, num_partitions: int | None,
          check_nulls: bool, tier: str) -> tuple:
    """The rows every pattern needs, shuffled by key and sorted; each pattern's task spec; the
    output's Spark schema; the number of tasks."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    T = _spark_types()
    fields = {f.name: f for f in df.schema.fields}
    key = normalize_key(key, time)
    keys = key_names(key)
    kinds = {k: f.dataType for k, f in fields.items()}
    out_cols = [_check_columns(kinds, _spark_kind, p, key, time, seq, columns) for p in patterns.values()][0]
    read = [c for p in patterns.values() for c in _pattern_columns(p)]
    need = [c for c in dict.fromkeys([*keys, time, seq, *read, *out_cols]) if c is not None]
    if check_nulls:
        _check_nulls(df, {c: role for role, c in [("key", k) for k in keys] + [("time", time), ("seq", seq)]
                          if c is not None and fields[c].nullable})
    proj = df.select(*need)
    row = seq
    if seq is None:
        row = ROW_COL
        proj = proj.withColumn(ROW_COL, F.monotonically_increasing_id())
    in_schema = _to_arrow(spark, proj.schema)
    out_struct = T.StructType(_out_fields([fields[k] for k in keys], timeouts, [fields[c] for c in out_cols]))
    out_schema = _to_arrow(spark, out_struct)
    specs = {}
    for name, p in patterns.items():
        specs[name] = _Spec(p, key, time, row, tuple(out_cols), bool(timeouts), time_unit, int(max_partial_matches),
                            in_schema, out_schema, check_tier(tier))
        _validate_pattern(specs[name])
    if key is None:
        n = 1
        parts = proj.repartition(1).sortWithinPartitions(time, row)
    else:
        n = int(num_partitions or int(spark.conf.get("spark.sql.shuffle.partitions")))
        if n < 1:
            raise InputError(f"num_partitions must be positive, got {n}")
        parts = proj.repartition(n, *keys).sortWithinPartitions(*keys, time, row)
    return parts, specs, out_struct, n


def _run(parts: "DataFrame", task: Any, out_struct: "StructType", n: int, progress: bool | None,
         metrics: "ScanMetrics | None", what: str) -> "DataFrame":
    watch = progress_wanted(progress)
    if watch and metrics is None:
        metrics = ScanMetrics(parts.sparkSession)
        task.metrics = metrics
    out = parts.mapInArrow(task, out_struct)
    if watch:  # the matching stage has the n tasks of the repartition (which adaptive execution keeps)
        spark_scan_meter(progress, out, parts.sparkSession.sparkContext, metrics, n, what)
    return out


def _check_nulls(df: "DataFrame", roles: dict[str, str]) -> None:
    """One JVM query (no Python workers) for a null in the given columns; the error shows the
    first such row whole (its first 12 columns), so that it can be found in the input."""
    cols = list(roles)
    if not cols:
        return
    from pyspark.sql import functions as F

    cond = F.col(cols[0]).isNull()
    for c in cols[1:]:
        cond = cond | F.col(c).isNull()
    shown = list(dict.fromkeys([*cols, *df.columns]))[:12]
    bad = df.where(cond).select(*shown).limit(1).collect()
    if bad:
        r = bad[0].asDict()
        c = next(c for c in cols if r[c] is None)
        raise InputError(f"{roles[c]} column {c!r} has nulls (e.g. the row {r}); drop or fill them before "
                         "matching")


