"""A batch's rows in the order the kernel calls read them, made once for every pattern.

The rows go to their key's shard (key code ``c``: shard ``c % T``, local key ``c // T``); each
shard's rows are cut into kernel calls of consecutive rows (arrival order: what one call reads
stays in the cache), and each call's rows are grouped by key, a key's rows in arrival order, so
that a call reads each key's events one after the other in memory (1.6x faster on P1 at 100
symbols than reading them through an index). The columns the conditions read are put into this
order once per shard (:meth:`Layout.gather_shard`); each pattern evaluates its conditions over them, so
nothing is gathered per pattern: twenty patterns over one batch group and gather it once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from colcep.kernels import arrays as karr


@dataclass(frozen=True)
class Call:
    """One kernel call: the layout's rows ``[lo, hi)``, ``key_ptr`` their split by local key
    (offsets within the call); ``last``: the shard's last call (a tick goes with it)."""

    lo: int
    hi: int
    key_ptr: np.ndarray
    last: bool


class Layout:
    """``rows``: the batch's row positions in layout order; shard ``s`` holds
    ``rows[shard_lo[s]:shard_lo[s + 1]]`` in the calls ``calls(s)`` (a shard without rows has
    one empty call when ``with_tick``: time still advances for its keys). The split into shards
    is made at once; each shard's calls when first asked for (``calls(s)``: on the thread that
    steps the shard, beside the others), its part of ``rows`` with them."""

    def __init__(self, codes: np.ndarray, n_keys: int, threads: int, chunk: list[int], with_tick: bool):
        self._codes = np.ascontiguousarray(codes, np.int64)
        self._by_shard, self.shard_lo = karr.shard_rows(self._codes, threads)
        self.rows = np.empty(self._codes.shape[0], np.int64)
        n = self._codes.shape[0]
        self._dest = np.empty(n, np.int32 if n < 2**31 else np.int64)  # where each row went (shard, arrival order)
        self._chunk = [max(int(c), 1) for c in chunk]
        self._n_keys, self._threads, self._with_tick = n_keys, threads, with_tick
        self._calls: list[list[Call] | None] = [None] * threads
        longest = max(min(int(self.shard_lo[s + 1] - self.shard_lo[s]), self._chunk[s]) for s in range(threads))
        self.order = np.arange(longest, dtype=np.int64)  # 0, 1, ...: a call's rows in the order given

    def calls(self, s: int) -> list[Call]:
        """Shard ``s``'s kernel calls (laid out at the first call: one thread per shard)."""
        made = self._calls[s]
        if made is None:
            lo, hi = int(self.shard_lo[s]), int(self.shard_lo[s + 1])
            n_local = max(0, (self._n_keys - s + self._threads - 1) // self._threads)
            call_lo, key_ptr = karr.layout_shard(self._codes, self._by_shard, lo, hi, n_local, self._threads,
                                                 self._chunk[s], self.rows, self._dest)
            made = [Call(int(call_lo[c]), int(call_lo[c + 1]), key_ptr[c], c == call_lo.shape[0] - 2)
                    for c in range(call_lo.shape[0] - 1)]
            if not made and self._with_tick:
                made = [Call(lo, lo, np.zeros(n_local + 1, np.int64), True)]
            self._calls[s] = made
        return made

    def gather_shard(self, a: np.ndarray, s: int) -> np.ndarray:
        """Shard ``s``'s values of the batch column ``a`` (one value per row), in layout order."""
        lo, hi = int(self.shard_lo[s]), int(self.shard_lo[s + 1])
        self.calls(s)
        if a.dtype.itemsize != 8:
            return a[self.rows[lo:hi]]
        # the values' bytes as read-only int64s: one compiled signature for every column
        src = (a if a.flags.c_contiguous else np.ascontiguousarray(a)).view(np.int64)
        src.flags.writeable = False
        out = np.empty(hi - lo, np.int64)
        karr.scatter_rows(src, self._by_shard, self._dest, lo, hi, out)
        return out.view(a.dtype)

    def shard(self, a: np.ndarray, s: int) -> np.ndarray:
        """Shard ``s``'s part of ``a`` (in layout order; the last axis is the rows)."""
        return a[..., self.shard_lo[s]:self.shard_lo[s + 1]]


def build(codes: np.ndarray, n_keys: int, threads: int, chunk: list[int], with_tick: bool) -> Layout:
    """The layout of a batch with key ``codes`` over ``n_keys`` keys and ``threads`` shards,
    calls of ``chunk[s]`` rows in shard ``s``."""
    return Layout(codes, n_keys, threads, chunk, with_tick)
