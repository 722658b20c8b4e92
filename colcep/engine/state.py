"""A Matcher's state: everything carried from one batch to the next, in one object.

Per key (CSR over key codes): the live runs (state, last buffer node, start time and position,
aggregate vector V), the completed matches held back by the skip strategy, and whether a STOP
state killed the key's start run. Shared by all keys: the match buffer (``kernels.buffer``),
the dictionaries of key values and strings, the input rows live nodes still refer to (for the
output columns), and the counters that number rows and matches.

With threads (``colcep.engine.shards``) the runs, held matches, buffer and ``start_dead`` live in
per-thread ``shards`` instead, each over its own keys; ``parts()`` lists whichever holds them.

The kernels mutate the buffer, ``start_dead`` and ``key_last_ts`` in place; ``checkpoint()``
copies exactly those, so a failed call can be undone with ``restore_from()``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from colcep.engine.keys import KeyCodes
from colcep.kernels import buffer as kbuf
from colcep.kernels.codes import OK

NODE_BYTES = 8 + 4 + 8 + 4  # row, stage, parent, ref


@dataclass
class Runs:
    """Live runs per key: ``ptr`` (n_keys + 1, CSR) and one entry per run."""

    ptr: np.ndarray
    state: np.ndarray
    node: np.ndarray
    start_ts: np.ndarray
    start_pos: np.ndarray
    v: np.ndarray  # (runs, v_width) float64

    @classmethod
    def empty(cls, v_width: int) -> "Runs":
        return cls(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64),
                   np.zeros(0, np.int64), np.zeros((0, v_width), np.float64))

    def arrays(self) -> tuple:
        return self.ptr, self.state, self.node, self.start_ts, self.start_pos, self.v

    NODE = 2  # the position of ``node`` in ``arrays()``


@dataclass
class Held:
    """Completed matches held back by the skip strategy, per key (CSR), in release order."""

    ptr: np.ndarray
    start_ts: np.ndarray
    start_pos: np.ndarray
    end_pos: np.ndarray
    node: np.ndarray

    @classmethod
    def empty(cls) -> "Held":
        return cls(np.zeros(1, np.int64), *(np.zeros(0, np.int64) for _ in range(4)))

    def arrays(self) -> tuple:
        return self.ptr, self.start_ts, self.start_pos, self.end_pos, self.node

    NODE = 4


@dataclass
class Buffer:
    """The shared match buffer's node arrays and ``meta`` (high water, free head, free count)."""

    row: np.ndarray
    stage: np.ndarray
    parent: np.ndarray
    ref: np.ndarray
    meta: np.ndarray

    @classmethod
    def empty(cls) -> "Buffer":
        return cls(*kbuf.new_buffer())

    def arrays(self) -> tuple:
        return self.row, self.stage, self.parent, self.ref, self.meta

    @classmethod
    def from_nodes(cls, row: np.ndarray, stage: np.ndarray, parent: np.ndarray, ref: np.ndarray) -> "Buffer":
        """A buffer holding exactly these nodes (compacted: no free slot), with room to grow."""
        n = row.shape[0]
        cap = max(1024, 2 * n)
        b = cls.empty() if n == 0 else cls(np.zeros(cap, np.int64), np.zeros(cap, np.int32),
                                           np.full(cap, -1, np.int64), np.zeros(cap, np.int32),
                                           np.array([0, -1, 0], np.int64))
        b.row[:n], b.stage[:n], b.parent[:n], b.ref[:n] = row, stage, parent, ref
        b.meta[:] = (n, -1, 0)
        return b

    @property
    def live(self) -> int:
        return int(self.meta[0] - self.meta[2])

    def copy(self) -> "Buffer":
        h = int(self.meta[0])
        out = Buffer.empty() if h == 0 else Buffer(*(np.array(a, copy=True) for a in self.arrays()))
        out.meta[:] = self.meta
        return out


def select_keys(x: "Runs | Held", codes: "list[int] | np.ndarray"):
    """The per-key CSR lists of ``codes`` only, in that order (a key past ``ptr``: empty)."""
    arrays = x.arrays()
    ptr = arrays[0]
    codes = np.asarray(codes, np.int64)
    n_old = ptr.shape[0] - 1
    have = codes < n_old
    c = np.where(have, codes, 0)
    starts = np.where(have, ptr[c], 0)
    counts = np.where(have, ptr[np.minimum(c + 1, n_old)] - starts, 0)
    new_ptr, sel = gather_lists(starts, counts)
    return type(x)(new_ptr, *(a[sel] for a in arrays[1:]))


def gather_lists(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR lists taken ``counts[i]`` items from ``starts[i]`` on: (their ``ptr``, the positions
    of their items in the source)."""
    ptr = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, np.repeat(starts - ptr[:-1], counts) + np.arange(ptr[-1], dtype=np.int64)


def step(holder: Any, pick: Callable[[tuple], Callable], invoke: Callable[..., tuple], tables: tuple, opts: tuple,
         stop: np.ndarray, batch: tuple, out: tuple, nm: int, ne: int) -> tuple:
    """One ``run_batch`` call over the carried state of ``holder`` (a MatcherState or a shard:
    ``runs``, ``held``, ``start_dead``, ``buffer``), its output appended to ``out`` after ``nm``
    matches of ``ne`` events. ``pick(args)`` chooses the kernel (the Matcher's tier),
    ``invoke(kernel, *args)`` calls it. The buffer is replaced whatever the status (the kernel
    may have grown it), the runs and held matches only on success (else the caller rolls back).
    Returns ``(out, nm, ne, status)``."""
    args = (tables, opts, stop, batch, holder.runs.arrays(), holder.held.arrays(), holder.start_dead,
            holder.buffer.arrays(), out, nm, ne)
    runs, held, buf, out, nm, ne, status = invoke(pick(args), *args)
    holder.buffer = Buffer(*buf)
    if status[0] == OK:
        holder.runs, holder.held = Runs(*runs), Held(*held)
    return out, nm, ne, status


@dataclass
class MatcherState:
    """Everything a Matcher carries between batches."""

    runs: Runs
    held: Held
    buffer: Buffer
    keys: KeyCodes
    strings: dict                       # string value -> code (literals first)
    start_dead: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    key_last_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rows_seen: int = 0                  # rows received (arrival positions)
    rows_fed: int = 0                   # rows given to the kernel (event time: in release order)
    matches_out: int = 0
    # input rows still referred to: (first row, table) blocks, or (row ids, table) after a restore
    retained: list = field(default_factory=list)
    # event time: rows waiting for the watermark (with their arrival row), and the watermark
    pending: pa.Table | None = None
    watermark: int | None = None
    ticked: int | None = None           # the watermark time last advanced to
    max_ts: int | None = None
    late_rows: int = 0
    history: object = None              # colcep.engine.history.History: rows prev / rolling still reach, or None
    shards: list | None = None          # with threads: colcep.engine.shards.Shard per thread (then runs .. start_dead unused)

    @classmethod
    def new(cls, key: "str | list[str] | None", v_width: int, literals: dict) -> "MatcherState":
        return cls(Runs.empty(v_width), Held.empty(), Buffer.empty(), KeyCodes(key), dict(literals))

    def ensure_keys(self, n_keys: int) -> None:
        """Per-key arrays cover ``n_keys`` keys."""
        if self.key_last_ts.shape[0] < n_keys:
            self.key_last_ts = np.concatenate(
                [self.key_last_ts, np.full(n_keys - self.key_last_ts.shape[0], np.iinfo(np.int64).min)])
        if self.start_dead.shape[0] < n_keys:
            self.start_dead = np.concatenate([self.start_dead, np.zeros(n_keys - self.start_dead.shape[0], np.uint8)])

    # ------------------------------------------------------------------ stage and commit
    def checkpoint(self) -> "MatcherState":
        """A copy to go back to: the arrays the kernels change in place are copied, the rest
        (replaced, never mutated) shared."""
        return replace(self, buffer=self.buffer.copy(), keys=self.keys.copy(), strings=dict(self.strings),
                       start_dead=self.start_dead.copy(), key_last_ts=self.key_last_ts.copy(),
                       retained=list(self.retained),
                       shards=None if self.shards is None else [s.checkpoint() for s in self.shards])

    def restore_from(self, saved: "MatcherState") -> None:
        """Become ``saved`` (a checkpoint of this state)."""
        self.__dict__.update(saved.__dict__)

    def parts(self) -> list:
        """What holds the runs, held matches, buffer and ``start_dead``: this state, or its shards."""
        return [self] if self.shards is None else self.shards

    # ------------------------------------------------------------------ figures
    @property
    def live_runs(self) -> int:
        return sum(int(p.runs.state.shape[0]) for p in self.parts())

    @property
    def live_nodes(self) -> int:
        return sum(p.buffer.live for p in self.parts())

    def nbytes(self) -> int:
        """Bytes the state holds: runs, held matches, the buffer's live nodes, retained rows."""
        parts = self.parts()
        runs = sum(a.nbytes for p in parts for a in p.runs.arrays())
        held = sum(a.nbytes for p in parts for a in p.held.arrays())
        rows = sum(t.nbytes for _, t in self.retained)
        pend = self.pending.nbytes if self.pending is not None else 0
        hist = self.history.nbytes if self.history is not None else 0
        return runs + held + self.live_nodes * NODE_BYTES + rows + pend + hist
