"""Rows in the order matching needs: each key's rows in (time, seq) order, nothing more.

A Matcher steps a key's events in time order; keys may interleave in any way, and rows of a
key with the same time are taken in the order they come (a Spark scan sorts them by its row
identity ``seq``, so an in-process scan that must agree with it wants them in ``seq`` order).
:class:`StreamOrder` checks that a stream of batches is already so ordered, batch by batch,
as it is read (input in time order, or in key-then-time order, streams through unsorted);
:func:`key_time_order` orders a whole table in linear time when it is not (key codes, a
stable counting pass by key, and a merge sort only of the keys whose rows are out of order).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from colcep.engine.keys import KeyCodes
from colcep.engine.watermark import I64_MIN, time_values
from colcep.kernels import arrays as karr


def _seq_values(tbl: pa.Table, seq: str | None, n: int, row0: int) -> np.ndarray:
    """The tie-breaker as contiguous, read-only int64 (as ``time_values`` gives the time: one
    layout, so one compiled signature of the kernels that read both)."""
    if seq is None:
        out = np.arange(row0, row0 + n, dtype=np.int64)
    else:
        out = np.ascontiguousarray(tbl.column(seq).to_numpy(zero_copy_only=False), dtype=np.int64)
    out.flags.writeable = False
    return out


class StreamOrder:
    """Checks, batch by batch, that a stream's rows come in (time, seq) order per key."""

    def __init__(self, key: "str | list[str] | None", time: str, seq: str | None = None):
        self.keys = KeyCodes(key)
        self.time, self.seq = time, seq
        self.rows = 0
        self._ts = np.full(64, I64_MIN, np.int64)
        self._seq = np.full(64, I64_MIN, np.int64)

    def check(self, batch: "pa.Table | pa.RecordBatch") -> int:
        """The first row of ``batch`` that comes before an earlier row of its key, or -1 (the
        batch is then part of the stream; after a row out of order, the stream stays as it was)."""
        tbl = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        n = tbl.num_rows
        mark = self.keys.mark()
        codes = self.keys.encode(tbl, self.rows)
        ts = time_values(tbl, self.time, self.rows)
        seq = _seq_values(tbl, self.seq, n, self.rows)
        if self.keys.n > self._ts.shape[0]:
            size = max(2 * self._ts.shape[0], self.keys.n)
            self._ts = _grown(self._ts, size)
            self._seq = _grown(self._seq, size)
        bad = int(karr.first_out_of_order_by(codes, ts, seq, self._ts, self._seq))
        if bad >= 0:
            self.keys.rollback(mark)
        else:
            self.rows += n
        return bad

    def describe(self, batch: "pa.Table | pa.RecordBatch", row: int) -> str:
        """Row ``row`` of ``batch`` in words, for a message."""
        r = {c: batch.column(c)[row].as_py() for c in [*self.keys.names, self.time, *([self.seq] if self.seq else [])]}
        return f"stream row {self.rows + row} {r}"


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    b = np.full(size, I64_MIN, np.int64)
    b[:a.shape[0]] = a
    return b


def key_time_order(tbl: pa.Table, key: Any, time: str, seq: str | None = None,
                   interleaved: bool = False) -> np.ndarray | None:
    """The rows of ``tbl`` grouped by key (first-seen order), each key's rows in (time, seq)
    order, ties in input order: a permutation, or None when ``tbl`` is in that order already
    (``interleaved``: or when each key's rows are, however the keys interleave: what a Matcher
    needs). Linear in the rows when each key's rows are in order."""
    keys = KeyCodes(key)
    codes = keys.encode(tbl)
    ts = time_values(tbl, time)
    sq = _seq_values(tbl, seq, tbl.num_rows, 0)
    n_keys = max(keys.n, 1)
    if interleaved and karr.first_out_of_order_by(codes, ts, sq, np.full(n_keys, I64_MIN, np.int64),
                                                   np.full(n_keys, I64_MIN, np.int64)) < 0:
        return None
    order, moved = karr.key_time_order(codes, ts, sq, n_keys)
    return order if moved else None
