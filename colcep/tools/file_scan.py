"""A scan of files in this process: the input streamed batch by batch, the matches written as found.

Input whose rows come in (time, seq) order per key (ticks in arrival order, or files laid out
by key and sorted by time, as ``colcep generate --by-key`` and ``write_by_key`` write them)
is matched as it is read, so memory follows the matcher's state and the batches in flight,
not the input. Input that is not is read whole and ordered in linear time
(:func:`colcep.engine.ordering.key_time_order`), never by a comparison sort over the key's
strings. Either way each key's rows reach the Matcher in (time, seq) order, as a Spark scan
sorts them, so the two give the same matches.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from colcep.engine.interrupt import parallel_seconds
from colcep.engine.ordering import StreamOrder, key_time_order
from colcep.spark.batch import ROW_COL, Streams, _Spec

#: Stages of a file scan, in the order they happen to a batch.
STAGES = ("reading", "ordering", "matching", "writing")


@dataclass
class FileScan:
    """What a scan did: rows, matches, whether it streamed, and seconds per stage."""

    rows: int = 0
    matches: int = 0
    streamed: bool = True
    disorder: str | None = None  # the first row out of order, in words, when it did not stream
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))

    parallel: float = 0.0  # seconds during which the kernels (or the output's parts) ran on several threads

    def _parallel_since(self, p0: float) -> "FileScan":
        self.parallel = parallel_seconds() - p0
        return self

    @contextmanager
    def timing(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - t0


class _OutOfOrder(Exception):
    pass


def scan_batches(specs: "_Spec | Mapping[str, _Spec]", batches: Callable[[], Iterable[pa.RecordBatch]],
                 read_all: Callable[[], pa.Table], write: Callable[[pa.Table], None],
                 restart: Callable[[str], None], threads: int = 1, batch_rows: int = 500_000,
                 progress: Callable[[FileScan], None] | None = None) -> FileScan:
    """Match ``batches()`` (the input's columns ``in_schema`` has, without the generated row
    column) with one pattern's spec, or several named ones (their output with a ``pattern``
    column: :attr:`Streams.schema`), on ``threads`` threads, handing each output table to
    ``write``. At the first row out of (time, seq) order for its key, ``restart(that row in
    words)`` (the output so far is to be discarded) and the input is read whole
    (``read_all()``), ordered and matched. ``progress`` is called after each batch."""
    p0 = parallel_seconds()
    res = FileScan()
    try:
        _stream(Streams(specs, threads, grouped=False), _whole(batches(), batch_rows), write, res, progress)
        return res._parallel_since(p0)
    except _OutOfOrder as exc:
        disorder = str(exc)
    restart(disorder)
    res = FileScan(streamed=False, disorder=disorder)
    streams = Streams(specs, threads, grouped=False)
    spec = streams.first
    with res.timing("reading"):
        tbl = _with_row_ids(spec, read_all(), 0)
    streams.check_nulls(tbl)
    with res.timing("ordering"):
        perm = key_time_order(tbl, spec.key, spec.time, spec.row)
        if perm is not None:
            tbl = tbl.take(pa.array(perm))
    for off in range(0, tbl.num_rows, batch_rows):
        _feed(streams, tbl.slice(off, batch_rows), write, res)
        if progress is not None:
            progress(res)
    _finish(streams, write, res)
    return res._parallel_since(p0)


def _whole(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """``batches`` gathered into tables of at least ``rows`` rows (the last may hold fewer). A
    Parquet row group that is no multiple of the batch size leaves a short batch at its end (a
    file of 2^20-row groups read 500,000 at a time: one batch in three of 48,576 rows), and each
    call costs the same per key whatever its rows (~1 us a key and pattern)."""
    held: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        if b.num_rows:
            held.append(b)
            n += b.num_rows
        if n >= rows:
            yield pa.Table.from_batches(held)
            held, n = [], 0
    if held:
        yield pa.Table.from_batches(held)


def _stream(streams: Streams, batches: Iterable[pa.Table], write: Callable[[pa.Table], None],
            res: FileScan, progress: Callable[[FileScan], None] | None) -> None:
    it = read_ahead(_prepared(streams, batches, res), 1)
    try:
        while True:
            with res.timing("reading"):  # (waiting for the next batch, read and checked ahead)
                got = next(it, None)
            if got is None:
                break
            tbl, disorder = got
            if disorder is not None:
                raise _OutOfOrder(f"{disorder} comes before an earlier row of its key")
            _feed(streams, tbl, write, res)
            if progress is not None:
                progress(res)
    finally:
        it.close()  # (stops the thread that prepares batches)
    _finish(streams, write, res)


def _prepared(streams: Streams, batches: Iterable[pa.Table], res: FileScan) -> Iterator[tuple[pa.Table, str | None]]:
    """Each batch with its row ids, checked for nulls and for its keys' (time, seq) order:
    ``(batch, None)``, or ``(batch, its first row out of order, in words)`` and no more. Run a
    batch ahead on a thread of its own (``read_ahead``), beside the matching of the one before;
    a null is an error raised where its batch would have come."""
    spec = streams.first
    order = StreamOrder(spec.key, spec.time, spec.row)
    rows = 0
    for b in batches:
        tbl = _with_row_ids(spec, b, rows)
        rows += tbl.num_rows
        streams.check_nulls(tbl)
        with res.timing("ordering"):
            bad = order.check(tbl)
        if bad >= 0:
            yield tbl, order.describe(tbl, bad)
            return
        yield tbl, None


def _with_row_ids(spec: _Spec, tbl: pa.Table, row0: int) -> pa.Table:
    """Without a ``seq`` column, each row's place in the input is its identity."""
    if spec.row != ROW_COL:
        return tbl
    return tbl.append_column(ROW_COL, pa.array(np.arange(row0, row0 + tbl.num_rows, dtype=np.int64)))


def _feed(streams: Streams, tbl: pa.Table, write: Callable[[pa.Table], None], res: FileScan) -> None:
    with res.timing("matching"):
        outs = streams.feed(tbl)
    res.rows += tbl.num_rows
    res.matches = streams.matches
    _write(outs, write, res)


def _write(outs: list[pa.Table], write: Callable[[pa.Table], None], res: FileScan) -> None:
    """A batch's output tables (one per pattern) written as one: one call, fewer row groups."""
    if outs:
        with res.timing("writing"):
            write(outs[0] if len(outs) == 1 else pa.concat_tables(outs))


def _finish(streams: Streams, write: Callable[[pa.Table], None], res: FileScan) -> None:
    with res.timing("matching"):
        outs = streams.finish()
    res.matches = streams.matches
    _write(outs, write, res)


def warm_kernels(specs: "Mapping[str, _Spec]", data: Any, columns: list[str]) -> None:
    """Call every kernel specialisation a scan of ``specs`` (by name) calls, on the first rows of
    ``data`` (a ``pyarrow.dataset.Dataset``; ``columns``: those the scan reads): some 33,000 rows,
    ordered, through a throw-away stream of each pattern (and of all of them together), whole
    and as one small call. Raises the input's ``ColcepError`` where the rows are bad."""
    import pyarrow.compute as pc

    from colcep.engine import matcher
    from colcep.spark import KeyedStream

    spec = next(iter(specs.values()))
    # more rows than one kernel call takes: a batch split into calls passes its column
    # matrices as slices (another Numba specialisation than a whole small batch)
    sample = data.head(2 * int(getattr(matcher, "CHUNK_ROWS", 1 << 14)) + 1, columns=columns)
    if spec.row not in sample.column_names:
        sample = sample.append_column(ROW_COL, pa.array(np.arange(sample.num_rows, dtype=np.int64)))
    sample = sample.drop_null()
    keys = [spec.key] if isinstance(spec.key, str) else list(spec.key or [])
    sample = sample.take(pc.sort_indices(sample, sort_keys=[(c, "ascending") for c in (*keys, spec.time, spec.row)]))
    StreamOrder(spec.key, spec.time, spec.row).check(sample)  # the order check's and the order's kernels
    key_time_order(sample, spec.key, spec.time, spec.row)
    for part in (sample, sample.slice(0, 1000)):  # split into kernel calls, and one call
        for one in specs.values():
            stream = KeyedStream(one)
            stream.feed(part)
            stream.finish()
        if len(specs) > 1:
            streams = Streams(specs, grouped=False)
            streams.feed(part)
            streams.finish()


def parquet_batches(paths: Any, key_columns: list[str], columns: list[str], batch_rows: int,
                    partitioning: Any = "hive", ahead: int = 2) -> Iterator[pa.RecordBatch]:
    """The ``columns`` of Parquet ``paths`` in batches of at most ``batch_rows`` rows, in file
    order, the key columns read as dictionaries (codes straight from the file's pages).

    Memory follows the batches in flight, not the file: one row group is read at a time, on a
    thread of its own that keeps at most ``ahead`` batches ready (decoding releases the GIL, so it
    overlaps with the matching). Arrow's dataset scanner over the whole file, even without read
    ahead, held more and more of it for a consumer slower than itself: 0.9-1.4 GB after 6 x 10^7
    ticks, against 0.04 GB row group by row group; and a row group's column chunks are not
    buffered whole first (``pre_buffer``: ~2 GB reading a 1.7 GB file of 10^8 ticks)."""
    import pyarrow.dataset as ds

    fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=set(key_columns)),
                               default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))
    data = ds.dataset(paths, format=fmt, partitioning=partitioning)

    def row_groups() -> Iterator[pa.RecordBatch]:
        for frag in data.get_fragments():
            for rg in frag.split_by_row_group():
                yield from rg.to_batches(schema=data.schema, columns=columns, batch_size=batch_rows,
                                         batch_readahead=0, fragment_readahead=0)

    return read_ahead(row_groups(), ahead)


def read_ahead(items: Iterable[Any], ahead: int) -> Iterator[Any]:
    """``items``, produced on a thread of its own at most ``ahead`` items before they are taken.
    An error of ``items`` is raised where the item would have come; closing the iterator (or
    an error of the consumer, Ctrl-C) stops the thread at its next item."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=max(1, ahead))
    stop = threading.Event()
    end = object()

    def put(item: tuple) -> bool:  # False: the consumer has gone
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for x in items:
                if not put((x, None)):
                    return
            put((end, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            put((end, e))

    worker = threading.Thread(target=produce, name="colcep-reader", daemon=True)
    worker.start()
    try:
        while True:
            x, err = q.get()
            if x is end:
                if err is not None:
                    raise err
                return
            yield x
    finally:
        stop.set()


__all__ = ["FileScan", "STAGES", "scan_batches", "parquet_batches", "read_ahead"]
