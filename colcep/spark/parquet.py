"""Parquet already laid out by key: Spark hands out the files, executors read them with pyarrow."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.kernel_cache import kernel_compiles
from colcep.engine.matcher import DEFAULT_MAX_PARTIAL_MATCHES
from colcep.engine.ordering import key_time_order
from colcep.engine.tiers import DEFAULT_TIER
from colcep.errors import InputError
from colcep.engine.keys import dictionary_encoded, key_names
from colcep.pattern import KeyedPattern, Pattern, with_key
from colcep.engine.progress import progress_wanted
from colcep.spark.progress import spark_scan_meter
from colcep.spark.batch import (ID_BITS, ROW_COL, KeyedStream, ScanMetrics, _out_fields, _Spec,
                                _to_arrow, _warm_kernels, arrow_spec)
from colcep.spark.session import DEFAULT_BATCH_ROWS, local_session

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

# write_by_key: how many files (key ranges) when the caller does not say
BUCKET_ROWS = 1 << 21        # at most about 2 M rows a file: a file is read whole, by one task
BUCKET_MIN_ROWS = 1 << 14    # but files of at least 16,384 rows: more files would cost more than they spread
BUCKETS_TO_SPREAD = 64       # enough files for many tasks, where the rows allow
MAX_BUCKETS = 1024           # never more files than this by default


def default_buckets(rows: int, keys: int) -> int:
    """The number of files :func:`write_by_key` writes for ``rows`` rows over ``keys`` keys:
    enough that no file has much more than ``BUCKET_ROWS`` rows, and up to
    ``BUCKETS_TO_SPREAD`` when there are rows enough (``BUCKET_MIN_ROWS`` a file) to spread
    over that many tasks; at most ``MAX_BUCKETS`` and at most one a key."""
    n = max(-(-int(rows) // BUCKET_ROWS), min(BUCKETS_TO_SPREAD, int(rows) // BUCKET_MIN_ROWS))
    return max(1, min(n, int(keys), MAX_BUCKETS))


def write_by_key(table: pa.Table, path: str | os.PathLike, key: str, time: str, *, seq: str | None = None,
                 buckets: int | None = None, row_group_size: int = 1 << 20) -> list[str]:
    """Write ``table`` to the folder ``path`` in the layout :func:`match_parquet` reads best:
    ``part-00000.parquet``, ``part-00001.parquet``, ... each holding a range of whole keys
    (the files' key ranges do not overlap, so the driver proves the layout from the files'
    statistics alone), its rows sorted by (key, time, ``seq``), so the tasks read them without
    sorting. Returns the files written, in key order.

    ``buckets`` is the number of key ranges (files), cut near every ``rows / buckets`` rows so
    the files hold about as many rows each (a key is never split: a key larger than that gets
    a file of its own, and fewer files result). The default is
    :func:`default_buckets`: about 2 M rows a file at most, up to 64 files where there are rows
    enough for them, never more than 1,024, however many keys there are (where one folder per
    key, Hive partitions, needs one directory per key and pyarrow refuses more than 1,024 at
    once). Files named ``part-*.parquet`` already in ``path`` are replaced; anything else there
    (but names starting with ``_`` or ``.``, which readers skip) is refused. The rows are
    sorted by Arrow (``sort_indices`` on the key's rank in its dictionary, the time and
    ``seq``); a null key is refused.
    """
    import pyarrow.parquet as pq

    for c in (key, time) + ((seq,) if seq else ()):
        if c not in table.column_names:
            raise InputError(f"write_by_key: no column {c!r} (columns: {table.column_names})")
    k = table.column(key)
    if k.null_count:
        raise InputError(f"write_by_key: the key column {key!r} has {k.null_count} null(s)")
    if buckets is not None and int(buckets) < 1:
        raise InputError(f"write_by_key: buckets must be at least 1, got {buckets}")
    n = table.num_rows
    if pa.types.is_dictionary(k.type):
        k = k.cast(k.type.value_type)
    enc = dictionary_encoded(k)
    keys = len(enc.dictionary)
    rank = np.empty(keys, np.int64)  # each dictionary entry's place in key order
    rank[pc.sort_indices(enc.dictionary).to_numpy()] = np.arange(keys, dtype=np.int64)
    row_rank = rank[enc.indices.to_numpy(zero_copy_only=False)]
    cols = {"k": row_rank, "t": table.column(time)} | ({"s": table.column(seq)} if seq else {})
    order = pc.sort_indices(pa.table(cols), sort_keys=[(c, "ascending") for c in cols])
    table = table.take(order)
    row_rank = row_rank[order.to_numpy()]
    # a key's file: the one of `buckets` equal shares of the rows its middle row falls in (so a
    # key larger than a share gets a file of its own rather than swelling its neighbours')
    b = int(buckets) if buckets is not None else default_buckets(n, keys)
    per_key = np.bincount(row_rank, minlength=keys)
    key_bucket = (2 * np.cumsum(per_key) - per_key) * b // max(2 * n, 1)
    row_bucket = key_bucket[row_rank]
    cuts = np.r_[0, np.flatnonzero(np.diff(row_bucket)) + 1, n]  # n = 0: one empty file
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    ours = [f for f in os.listdir(path) if f.startswith("part-") and f.endswith(".parquet")]
    other = [f for f in os.listdir(path) if f not in ours and not f.startswith(("_", "."))]
    if other:  # readers would take them for part of the data (a Hive folder name=.../ of an older layout)
        raise InputError(f"write_by_key: {path} holds other data ({sorted(other)[:3]}); give an empty or new folder")
    for f in ours:
        os.remove(os.path.join(path, f))
    sorting = pq.SortingColumn.from_ordering(table.schema, [(c, "ascending") for c in (key, time, seq) if c])
    files = []
    for i, (lo, hi) in enumerate(zip(cuts[:-1].tolist(), cuts[1:].tolist())):
        f = os.path.join(path, f"part-{i:05d}.parquet")
        pq.write_table(table.slice(lo, hi - lo), f, row_group_size=row_group_size, sorting_columns=sorting)
        files.append(f)
    return files


@dataclass(frozen=True)
class _FileGroup:
    """The files holding some whole keys; ``key_value`` is set for a Hive partition."""

    files: tuple[str, ...]
    key_value: Any = None
    from_partition: bool = False


@dataclass(frozen=True)
class _ParquetPlan:
    spec: _Spec
    groups: tuple[_FileGroup, ...]
    filesystem: Any
    file_schema: pa.Schema  # the files' own columns (Hive partition columns excluded)
    read_columns: tuple[str, ...]
    key_type: pa.DataType | None
    batch_rows: int
    row_generated: bool = field(default=False)


class _FileGroupMatcher:
    """The function given to ``mapInArrow`` over ``spark.range(groups)``: reads each group
    with pyarrow and matches it."""

    def __init__(self, plan: _ParquetPlan, metrics: ScanMetrics | None):
        self.plan = plan
        self.metrics = metrics

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t0 = time.perf_counter()
        c0 = kernel_compiles()
        warm = _warm_kernels(self.plan.spec)
        c1 = kernel_compiles()
        rows = matches = 0
        for b in batches:
            for gid in b.column(0).to_pylist():
                tbl = _read_group(self.plan, gid)
                stream = KeyedStream(self.plan.spec, gid << ID_BITS)
                for off in range(0, max(tbl.num_rows, 1), self.plan.batch_rows):
                    for t in stream.feed(tbl.slice(off, self.plan.batch_rows)):
                        yield from t.to_batches()
                for t in stream.finish():
                    yield from t.to_batches()
                rows += stream.rows
                matches += stream.matches
        if self.metrics is not None:
            self.metrics.add(rows=rows, matches=matches, tasks=1, task_seconds=time.perf_counter() - t0,
                             warm_seconds=warm, warm_workers=int(warm > 0), compiles=kernel_compiles() - c0,
                             late_compiles=kernel_compiles() - c1)


def _read_group(plan: _ParquetPlan, gid: int) -> pa.Table:
    import pyarrow.dataset as ds

    spec, g = plan.spec, plan.groups[gid]
    data = ds.dataset(list(g.files), format="parquet", filesystem=plan.filesystem, schema=plan.file_schema)
    tbl = data.to_table(columns=list(plan.read_columns))
    n = tbl.num_rows
    if g.from_partition:
        tbl = tbl.append_column(pa.field(spec.key, plan.key_type),
                                pa.array([g.key_value], plan.key_type).take(pa.array(np.zeros(n, np.int32))))
    if plan.row_generated:
        tbl = tbl.append_column(ROW_COL, pa.array((np.int64(gid) << ID_BITS) + np.arange(n, dtype=np.int64)))
    sort = [spec.time, spec.row]
    key = spec.key if spec.key is not None and not g.from_partition else None
    if key is not None:
        sort.insert(0, key)
    if n > 1 and not _is_sorted(tbl, sort):
        # each key's rows together, in (time, row) order: linear in the rows (no sort over the key's values)
        KeyedStream(spec).check_nulls(tbl)  # a null named by the row's seq and values, before ordering
        order = key_time_order(tbl, key, spec.time, spec.row)
        if order is not None:
            tbl = tbl.take(pa.array(order))
    return tbl


def _is_sorted(tbl: pa.Table, cols: list[str]) -> bool:
    """True when the rows are in ascending lexicographic order of ``cols`` (False with a null in
    them: the caller then sorts, and the matcher reports the null).

    Linear and cheap: a column is compared only on the adjacent pairs the columns before it tie
    on, numeric and time columns in numpy; the first column (the key, for files holding many
    keys) is compared for equality only, and for order only where it changes."""
    n = tbl.num_rows
    if n < 2:
        return True
    tie: np.ndarray | None = None  # pairs (i, i + 1) equal in every column so far; None: all of them
    for c in cols:
        a = tbl.column(c)
        if a.null_count:
            return False
        if pa.types.is_timestamp(a.type) or pa.types.is_date(a.type) or pa.types.is_duration(a.type):
            a = a.cast(pa.int64())
        ties = n - 1 if tie is None else int(np.count_nonzero(tie))
        if not ties:
            return True
        if pa.types.is_integer(a.type) or pa.types.is_floating(a.type):
            v = a.to_numpy()
            if ties * 8 > n:  # most pairs still tie: compare all of them, masked
                x, y = v[:-1], v[1:]
                if np.any(y < x if tie is None else (y < x) & tie):
                    return False
                tie = y == x if tie is None else (y == x) & tie
                continue
            at = np.flatnonzero(tie)
            x, y = v[at], v[at + 1]
            if np.any(y < x):
                return False
            eq = y == x
        elif tie is None:  # the first column, not numeric (a string key): order only where it changes
            tie = pc.equal(a.slice(1), a.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            ch = pa.array(np.flatnonzero(~tie))
            if len(ch) and pc.any(pc.less(a.take(pc.add(ch, 1)), a.take(ch))).as_py():
                return False
            continue
        else:
            at = np.flatnonzero(tie)
            x, y = a.take(pa.array(at)), a.take(pa.array(at + 1))
            if pc.any(pc.less(y, x)).as_py():
                return False
            eq = pc.equal(y, x).to_numpy(zero_copy_only=False)
        tie = np.zeros(n - 1, bool)
        tie[at] = eq
    return True


def match_parquet(path: str | os.PathLike | Sequence[str], pattern: "Pattern | KeyedPattern", key: str | None = None, time: str = "ts",
                  columns: Sequence[str] | None = None, *, spark: "SparkSession | None" = None,
                  seq: str | None = None, timeouts: bool = False, time_unit: str = "ms",
                  max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES, num_partitions: int | None = None,
                  partitioning: str | None = "hive", batch_rows: int = DEFAULT_BATCH_ROWS,
                  metrics: ScanMetrics | None = None, tier: str = DEFAULT_TIER,
                  progress: bool | None = None) -> "DataFrame":
    """Match Parquet data already laid out by key, read by the executors with pyarrow.

    The layout must keep every key in one place: files that each hold whole keys (checked on
    the driver from the files' statistics; :func:`write_by_key` writes them, key ranges sorted
    by (key, time, seq), for any number of keys) or Hive partitions on the key
    (``path/name=S0001/*.parquet``). Spark only hands out the file groups (one per file, or
    run of files of one key, or per Hive partition); each task reads its groups with pyarrow,
    checks their order (a linear pass), sorts them by (key, time, seq) only when they are not
    in order, and matches them. Executors must reach ``path`` (a shared file system or an
    object store URI pyarrow can open).

    Output and ``tier`` as :func:`match`; ``row`` is ``seq`` when given, else ``group << 40 | position``
    of the row in its group's files (in path order), and match ids are ``group << 40 | n``.

    ``progress``: a meter of the job that runs the returned DataFrame (its write, ``toPandas``,
    ...): rows done of the input's (counted from the Parquet footers), rows/s, matches so far
    and tasks done, as ``colcep.match`` draws it (a notebook's display, a line redrawn on a
    terminal, a line every 10 s in a log), from Spark's status tracker and ``metrics`` (made
    when not given); rows and matches count once a task has finished. None (default): on when
    stderr is a terminal or this is a notebook; True: always; False: never. See
    :class:`colcep.spark.progress.SparkScanMeter`.
    """
    pattern, key = with_key(pattern, key)
    import pyarrow.dataset as ds
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema

    if not isinstance(pattern, Pattern):
        raise InputError(f"match_parquet() needs a colcep Pattern, got {type(pattern).__name__}")
    if len(key_names(key, time)) > 1:
        raise InputError(f"match_parquet() takes one key column, got key={list(key)}; use colcep.spark.match() "
                         "(the shuffle path) for a composite key")
    spark = spark or local_session()
    fs, base = _filesystem(path)
    try:
        data = ds.dataset(base, format="parquet", filesystem=fs, partitioning=partitioning)
    except (FileNotFoundError, OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot open the Parquet data at {path!r}: {exc}") from exc
    schema = data.schema
    part_names: set[str] = set()
    for frag in data.get_fragments():
        part_names |= set(ds.get_partition_keys(frag.partition_expression))
    spec = arrow_spec(schema, pattern, key, time, columns, seq=seq, timeouts=timeouts, time_unit=time_unit,
                      max_partial_matches=max_partial_matches, tier=tier)
    need = [c for c in spec.in_schema.names if c != ROW_COL]
    if any(c in part_names and c != key for c in need):
        raise InputError(f"only the key may be a Hive partition column; {sorted(part_names - {key})} are too")
    groups = _file_groups(data, key, key in part_names)
    file_schema = pa.schema([f for f in schema if f.name not in part_names])
    read_cols = tuple(c for c in need if c not in part_names)
    in_struct = from_arrow_schema(pa.schema([schema.field(c) for c in need]), prefer_timestamp_ntz=False)
    sf = {f.name: f for f in in_struct.fields}
    out_struct = T.StructType(_out_fields([sf[key]] if key is not None else [], timeouts,
                                          [sf[c] for c in spec.columns]))
    spec = replace(spec, out_schema=_to_arrow(spark, out_struct))
    plan = _ParquetPlan(spec, tuple(groups), fs, file_schema, read_cols,
                        schema.field(key).type if key is not None else None, int(batch_rows), seq is None)
    n = max(1, min(len(groups), int(num_partitions or int(spark.conf.get("spark.sql.shuffle.partitions")))))
    ids = spark.range(0, len(groups), 1, numPartitions=n)
    watch = progress_wanted(progress)
    if watch and metrics is None:
        metrics = ScanMetrics(spark)
    out = ids.mapInArrow(_FileGroupMatcher(plan, metrics), out_struct)
    if watch:
        spark_scan_meter(progress, out, spark.sparkContext, metrics, n, "colcep.spark.match_parquet",
                         _count_rows(data))
    return out


def _count_rows(data) -> int | None:
    """The dataset's rows from its Parquet footers (None when they cannot be read)."""
    try:
        return int(data.count_rows())
    except Exception:  # noqa: BLE001 - only for the progress meter
        return None


def _filesystem(path: Any) -> tuple[Any, Any]:
    import pyarrow.fs as pafs

    if isinstance(path, (list, tuple)):
        paths = [str(p) for p in path]
        if all("://" not in p for p in paths):
            return pafs.LocalFileSystem(), [os.path.abspath(p) for p in paths]
        fs, _ = pafs.FileSystem.from_uri(paths[0])
        return fs, [pafs.FileSystem.from_uri(p)[1] for p in paths]
    p = os.fspath(path)
    if "://" not in p:
        return pafs.LocalFileSystem(), os.path.abspath(p)
    return pafs.FileSystem.from_uri(p)


def _file_groups(data, key: str | None, key_is_partition: bool) -> list[_FileGroup]:
    """Group the files so that each key lies in exactly one group; sorted for determinism."""
    import pyarrow.dataset as ds

    frags = sorted(data.get_fragments(), key=lambda f: f.path)
    if not frags:
        raise InputError("no Parquet files found")
    if key is None:
        return [_FileGroup(tuple(f.path for f in frags))]
    if key_is_partition:
        by_key: dict[Any, list[str]] = {}
        for f in frags:
            v = ds.get_partition_keys(f.partition_expression).get(key)
            if v is None:
                raise InputError(f"file {f.path} has no {key}=... partition directory (or a null key)")
            by_key.setdefault(v, []).append(f.path)
        return [_FileGroup(tuple(by_key[v]), v, True) for v in sorted(by_key)]
    spans = []
    for f in frags:
        if f.metadata.num_rows:
            lo, hi = _key_range(f, key)
            spans.append((lo, hi, f.path))
    spans.sort(key=lambda s: (s[0], s[1], s[2]))
    groups: list[list] = []
    for lo, hi, p in spans:
        if groups and lo <= groups[-1][1]:
            g = groups[-1]
            if not (lo == hi == g[0] == g[1]):  # only files of one and the same single key may share a group
                raise InputError(f"key {key!r} is not laid out by file: {g[2][-1]} holds keys {g[0]!r}..{g[1]!r} "
                                 f"and {p} holds {lo!r}..{hi!r}; use colcep.spark.match() (the shuffle path), "
                                 "or rewrite the data with colcep.spark.write_by_key()")
            g[2].append(p)
        else:
            groups.append([lo, hi, [p]])
    return [_FileGroup(tuple(g[2])) for g in groups]


def _key_range(frag, key: str) -> tuple[Any, Any]:
    md = frag.metadata
    idx = md.schema.to_arrow_schema().get_field_index(key)
    lo = hi = None
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(idx).statistics
        if md.row_group(i).num_rows == 0:
            continue
        if st is None or not st.has_min_max or st.null_count:
            raise InputError(f"file {frag.path} has no min/max statistics for key {key!r} (or has null keys); "
                             "use colcep.spark.match() (the shuffle path)")
        lo = st.min if lo is None else min(lo, st.min)
        hi = st.max if hi is None else max(hi, st.max)
    return lo, hi

