"""A batch's rows in the order the kernel calls read them, made once for every pattern.

The rows go to their key's shard (key code ``c``: shard ``c % T``, local key ``c // T``); each
shard's rows are cut into kernel calls of consecutive rows (arrival order: what one call reads
stays in the cache), and each call's rows are grouped by key, a key's rows in arrival order, so
that a call reads each key's events one after the other in memory (1.6x faster on P1 at 100
symbols than reading them through an index). The columns the conditions read are gathered into
this order once (:meth:`Layout.gather`); each pattern evaluates its conditions over them, so
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


@dataclass(frozen=True)
class Layout:
    """``rows``: the batch's row positions in layout order; shard ``s`` holds
    ``rows[shard_lo[s]:shard_lo[s + 1]]`` in the calls ``calls[s]`` (a shard without rows has
    one empty call when ``with_tick``: time still advances for its keys)."""

    rows: np.ndarray
    shard_lo: np.ndarray
    calls: list[list[Call]]
    order: np.ndarray  # 0, 1, ...: a call's rows in the order given (the kernel's ``order``)

    def gather(self, a: np.ndarray) -> np.ndarray:
        """The batch column ``a`` (one value per row) in layout order."""
        return a[self.rows]

    def shard(self, a: np.ndarray, s: int) -> np.ndarray:
        """Shard ``s``'s part of ``a`` (in layout order; the last axis is the rows)."""
        return a[..., self.shard_lo[s]:self.shard_lo[s + 1]]


def build(codes: np.ndarray, n_keys: int, threads: int, chunk: list[int], with_tick: bool) -> Layout:
    """The layout of a batch with key ``codes`` over ``n_keys`` keys and ``threads`` shards,
    calls of ``chunk[s]`` rows in shard ``s``."""
    rows, call_lo, call_shard, kp_off, key_ptr = karr.layout_rows(
        np.ascontiguousarray(codes, np.int64), n_keys, threads, np.array(chunk, np.int64))
    shard_lo = np.zeros(threads + 1, np.int64)
    calls: list[list[Call]] = [[] for _ in range(threads)]
    for c in range(call_shard.shape[0]):
        s = int(call_shard[c])
        calls[s].append(Call(int(call_lo[c]), int(call_lo[c + 1]), key_ptr[kp_off[c]:kp_off[c + 1]], False))
    at = 0
    for s in range(threads):
        shard_lo[s] = at
        if calls[s]:
            at = calls[s][-1].hi
            last = calls[s][-1]
            calls[s][-1] = Call(last.lo, last.hi, last.key_ptr, True)
        elif with_tick:
            n_local = max(0, (n_keys - s + threads - 1) // threads)
            calls[s].append(Call(at, at, np.zeros(n_local + 1, np.int64), True))
    shard_lo[threads] = at
    longest = max((c.hi - c.lo for cs in calls for c in cs), default=0)
    return Layout(rows, shard_lo, calls, np.arange(longest, dtype=np.int64))
