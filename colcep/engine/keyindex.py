"""A hash table from one key column's values to their codes, kept across batches
(:class:`KeyIndex`, over ``kernels.keyhash``): a batch's key column coded in one pass over its
Arrow buffers, where Arrow would first dictionary-encode it (a hash table made per batch) and
Python then map that dictionary's values to the codes.

It serves a key of one column of strings, binary or integers (``kind_of``); ``KeyCodes`` keeps
the values themselves and decides when to use it. The index holds the codes ``[0, n)``, the same
codes ``KeyCodes`` gives those values.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from colcep.kernels import keyhash as kh

_STR, _BYTES, _INT = "str", "bytes", "int"
_INT_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32())


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.view()
    a.flags.writeable = False
    return a


_NO_OFFS32 = _read_only(np.zeros(0, np.int32))
_NO_OFFS64 = _read_only(np.zeros(0, np.int64))
_NO_BYTES = _read_only(np.zeros(0, np.uint8))
_NO_INTS = _NO_OFFS64


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """Int64 arrays one after the other (the one itself when alone)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, np.int64)


def kind_of(t: pa.DataType) -> str | None:
    """Which values of an Arrow type the index codes (None: the type is left to Arrow)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _STR
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _BYTES
    if t in _INT_TYPES:
        return _INT
    return None


class KeyIndex:
    """The codes of the values of one kind (``kind_of``) seen so far: ``n`` of them."""

    def __init__(self, kind: str):
        self.kind = kind
        self.n = 0
        self._slots = np.full(1 << 10, -1, np.int64)
        self._word = np.zeros(1 << 9, np.uint64)
        self._len = np.zeros(1 << 9, np.int64)
        self._off = np.zeros((1 << 9) + 1, np.int64)
        self._arena = np.zeros(1 << 12, np.uint8)

    # ------------------------------------------------------------------ coding
    def encode(self, arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """The codes of ``arr``'s rows (no nulls; of this index's kind), new values numbered on
        from ``n`` in first-seen order, and the row where each new one was first seen."""
        out = np.empty(len(arr), np.int64)
        args = self._arrays(arr)
        i0, firsts = 0, []
        while True:  # (a call stops when the table is full: it notes at most its free entries' first rows)
            n0 = self.n
            first = np.empty(self._word.shape[0] - n0, np.int64)
            i0, self.n = kh.encode(*args, i0, self._slots, self._word, self._len, self._off, self._arena, n0, True,
                                   out, first)
            firsts.append(first[:self.n - n0])
            if i0 < 0:
                return out, _joined(firsts)
            self._grow(self._more_bytes(arr, i0))

    def look_up(self, arr: pa.Array) -> np.ndarray:
        """The codes of ``arr``'s rows, -1 for a value not in the index (changes nothing: threads
        may look up at once)."""
        out = np.empty(len(arr), np.int64)
        kh.encode(*self._arrays(arr), 0, self._slots, self._word, self._len, self._off, self._arena, self.n, False,
                  out, out[:0])
        return out

    def encode_chunks(self, chunks: Sequence[pa.Array], slices: int = 1,
                      run_all: "Callable[[list], list] | None" = None) -> tuple[np.ndarray, pa.Array | None]:
        """``encode`` over a column's chunks in order: the codes, and the new values' first
        rows as one array of positions in the column (None when no value is new). With
        ``run_all``, the chunks are first looked up in ``slices`` parts at once on threads; only
        a batch with new values is then coded again, in order."""
        n = sum(len(c) for c in chunks)
        if run_all is not None and slices > 1 and n:
            col = pa.chunked_array(chunks, chunks[0].type)
            bounds = [n * i // slices for i in range(slices + 1)]
            parts = run_all([partial(self._look_up_column, col.slice(a, b - a)) for a, b in zip(bounds, bounds[1:])])
            codes = np.concatenate(parts)
            if codes.shape[0] == 0 or codes.min() >= 0:
                return codes, None
        codes, firsts, at = [], [], 0
        for c in chunks:
            got, first = self.encode(c)
            codes.append(got)
            if first.shape[0]:
                firsts.append(first + at)
            at += len(c)
        return _joined(codes), (pa.array(_joined(firsts)) if firsts else None)

    def _look_up_column(self, col: pa.ChunkedArray) -> np.ndarray:
        return _joined([self.look_up(c) for c in col.chunks])

    def add(self, values: Sequence) -> None:
        """Index ``values`` (Python values of this kind, none indexed yet) as the next codes."""
        if not values:
            return
        n0 = self.n
        if self.kind == _STR:
            arr = pa.array(values, pa.large_string())
        elif self.kind == _BYTES:
            arr = pa.array(values, pa.large_binary())
        else:
            arr = pa.array(values, pa.int64())
        codes, _ = self.encode(arr)
        if self.n != n0 + len(values) or not np.array_equal(codes, np.arange(n0, self.n)):
            raise RuntimeError("colcep: key values added to the index twice")  # (a bug of ours)

    def truncate(self, n: int) -> None:
        """Forget the codes from ``n`` on."""
        if n < self.n:
            self.n = n
            self._slots[:] = -1
            kh.rehash(self._slots, self._word, self._len, self._off, self._arena, n)

    # ------------------------------------------------------------------ the arrays
    def _arrays(self, arr: pa.Array) -> tuple:
        """``kh.encode``'s first arguments for ``arr`` (offsets, bytes, integers), read-only
        arrays: one compiled signature whatever the column's offsets and where its values came from."""
        if self.kind == _INT:
            ints = _read_only(np.asarray(arr.to_numpy(zero_copy_only=False), np.int64))
            return _NO_OFFS32, _NO_OFFS64, _NO_BYTES, ints
        bufs = arr.buffers()
        wide = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
        offs = _read_only(np.frombuffer(bufs[1], np.int64 if wide else np.int32)[arr.offset:arr.offset + len(arr) + 1])
        data = _read_only(np.frombuffer(bufs[2], np.uint8)) if bufs[2] is not None else _NO_BYTES
        return ((_NO_OFFS32, offs) if wide else (offs, _NO_OFFS64)) + (data, _NO_INTS)

    def _more_bytes(self, arr: pa.Array, row: int) -> int:
        """The bytes beyond the first 8 of ``arr``'s value at ``row``."""
        if self.kind == _INT:
            return 0
        v = arr[row].as_py()
        return max(0, len(v.encode() if isinstance(v, str) else v) - 8)

    def _grow(self, more_bytes: int) -> None:
        """Room for one more key of ``more_bytes`` tail bytes: the arrays doubled where short,
        the slots rehashed."""
        n = self.n
        if n + 1 > self._word.shape[0]:
            cap = 2 * self._word.shape[0]
            self._word = np.concatenate([self._word, np.zeros(cap - self._word.shape[0], np.uint64)])
            self._len = np.concatenate([self._len, np.zeros(cap - self._len.shape[0], np.int64)])
            self._off = np.concatenate([self._off, np.zeros(cap + 1 - self._off.shape[0], np.int64)])
        used = int(self._off[n])
        if used + more_bytes > self._arena.shape[0]:
            self._arena = np.concatenate(
                [self._arena, np.zeros(max(self._arena.shape[0], used + more_bytes), np.uint8)])
        if 2 * (n + 1) > self._slots.shape[0]:
            self._slots = np.full(2 * self._slots.shape[0], -1, np.int64)
            kh.rehash(self._slots, self._word, self._len, self._off, self._arena, n)
