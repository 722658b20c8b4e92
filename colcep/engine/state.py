"""A Matcher's state: everything carried from one batch to the next, in one object.

Per key (CSR over key codes): the live runs (state, last buffer node, start time and position,
aggregate vector V), the completed matches held back by the skip strategy, and whether a STOP
state killed the key's start run. Waiting runs are parked (``kernels.park``: a pool and per-key
heaps, kept and changed in place from one call to the next; ``Park``); ``runs`` lists the
others. Shared by all keys: the match buffer (``kernels.buffer``),
the dictionaries of key values and strings, the input rows live nodes still refer to (for the
output columns), and the counters that number rows and matches.

With threads (``colcep.engine.shards``) the runs, held matches, buffer and ``start_dead`` live in
per-thread ``shards`` instead, each over its own keys; ``parts()`` lists whichever holds them.

A call is made undoable with ``checkpoint()`` and ends with ``commit()`` or
``restore_from()``, in time proportional to what it touched, not to the state: the runs and
held matches are replaced wholesale by the kernel's outputs, so the checkpoint keeps the old
arrays; the buffer and the park, changed in place, open an undoable call
(``kernels.buffer.open_call``, ``kernels.park.open_call``: the nodes and parked runs live before
the call keep their slots until it ends); the key and string codes only
grow, so the checkpoint notes their lengths; ``start_dead`` and ``key_last_ts`` (one item a
key) are copied.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from colcep.engine.keys import KeyCodes
from colcep.kernels import buffer as kbuf
from colcep.kernels import park as kpark
from colcep.kernels.codes import OK

NODE_BYTES = kbuf.NODE_BYTES  # row, stage, parent, ref


@dataclass
class Runs:
    """Live runs per key: ``ptr`` (n_keys + 1, CSR) and one entry per run."""

    ptr: np.ndarray
    state: np.ndarray
    node: np.ndarray
    start_ts: np.ndarray
    start_pos: np.ndarray
    v: np.ndarray  # (runs, v_width) float64
    cap: int = -1  # the arrays' capacity in runs, when they are views of longer kernel arrays (-1: their length)

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
    cap: int = -1  # as Runs.cap

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
                                           kbuf.new_meta())
        b.row[:n], b.stage[:n], b.parent[:n], b.ref[:n] = row, stage, parent, ref
        b.meta[:3] = (n, -1, 0)
        return b

    @property
    def live(self) -> int:
        """Slots in use: live nodes (and, while a call is open, the nodes it freed that were
        live before it: their slots are kept until it ends)."""
        return int(self.meta[0] - self.meta[2])

    @property
    def nbytes(self) -> int:
        """Bytes of the node arrays at their capacity."""
        return sum(a.nbytes for a in self.arrays())

    def copy(self) -> "Buffer":
        h = int(self.meta[0])
        out = Buffer.empty() if h == 0 else Buffer(*(np.array(a, copy=True) for a in self.arrays()))
        out.meta[:] = self.meta
        return out


@dataclass
class Park:
    """The parked runs of a part (``kernels.park``): one tuple of arrays the kernel changes in
    place (and replaces when it grows them)."""

    arrays: tuple

    @classmethod
    def empty(cls) -> "Park":
        return cls(kpark.new_park(0, 0, 1, 0))  # run_batch fits it to the program (kernels.park.fit_park)

    @property
    def live(self) -> int:
        return int(self.arrays[kpark.P_PM][kpark.PM_LIVE])

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays)

    def _live_slots(self) -> np.ndarray:
        a = self.arrays
        high = min(int(a[kpark.P_PM][kpark.PM_HIGH]), a[kpark.P_SEQ].shape[0])
        return np.flatnonzero(a[kpark.P_SEQ][:high] >= 0)

    def nodes(self) -> np.ndarray:
        """The buffer nodes of the parked runs (roots of the buffer, as the listed runs' are)."""
        return self.arrays[kpark.P_NODE][self._live_slots()]

    def start_ts(self) -> np.ndarray:
        return self.arrays[kpark.P_STS][self._live_slots()]

    def copy(self) -> "Park":
        return Park(kpark.copy_park(self.arrays))


def all_runs(holder: Any, n_keys: int) -> Runs:
    """Every run of ``holder`` (a MatcherState or a shard) over its first ``n_keys`` keys, listed
    or parked, as one CSR list in start order (the layout of snapshots and of ``select_keys``)."""
    if holder.park.live == 0:
        return holder.runs
    return Runs(*kpark.export_runs(holder.park.arrays, max(n_keys, holder.runs.ptr.shape[0] - 1),
                                   *holder.runs.arrays()))


@dataclass
class Saved:
    """What ``MatcherState.checkpoint`` keeps to undo a call: the state object's fields (all
    replaced, not mutated, by a call, but for the buffer, the codes and the per-key arrays, whose
    undo is noted here), per part the runs and held matches whose nodes are the roots the buffer
    goes back to."""

    fields: dict
    keys: tuple
    n_strings: int
    parts: list  # per part: (runs, held, buffer, start_dead, park)


def _cap_bytes(a: np.ndarray) -> int:
    """Bytes of the array ``a`` is a view of (its capacity)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return int(a.nbytes)


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


_UNDO_READY = []


def _undo_ready() -> None:
    """Compile (or load) the undo kernels before the first call that may need them, once per
    process: a call interrupted on a machine that never undid one would otherwise wait for
    their compile (seconds) before it stops. Run on an empty buffer and park, which they leave
    as they are."""
    if not _UNDO_READY:
        park = Park.empty()
        kpark.undo_call(park.arrays)
        buf = Buffer.empty()
        kbuf.undo_call(buf.row, buf.stage, buf.parent, buf.ref, buf.meta, np.zeros(0, np.int64))
        _UNDO_READY.append(True)


def step(holder: Any, pick: Callable[[tuple], Callable], invoke: Callable[..., tuple], tables: tuple, opts: tuple,
         stop: np.ndarray, batch: tuple, out: tuple, nm: int, ne: int) -> tuple:
    """One ``run_batch`` call over the carried state of ``holder`` (a MatcherState or a shard:
    ``runs``, ``held``, ``start_dead``, ``buffer``), its output appended to ``out`` after ``nm``
    matches of ``ne`` events. ``pick(args)`` chooses the kernel (the Matcher's tier),
    ``invoke(kernel, *args)`` calls it. The buffer and the park are replaced whatever the status
    (the kernel may have grown them), the runs and held matches only on success (else the caller
    rolls back).
    Returns ``(out, nm, ne, status)``."""
    args = (tables, opts, stop, batch, holder.runs.arrays(), holder.held.arrays(), holder.start_dead,
            holder.buffer.arrays(), holder.park.arrays, out, nm, ne)
    runs, held, buf, park, out, nm, ne, status = invoke(pick(args), *args)
    holder.buffer = Buffer(*buf)
    holder.park = Park(park)
    if status[0] == OK:
        n_runs, n_held = holder.runs.state.shape[0], holder.held.node.shape[0]
        holder.runs, holder.held = Runs(*runs), Held(*held)
        holder.runs.cap = kernel_capacity(n_runs, holder.runs.state.shape[0])
        holder.held.cap = kernel_capacity(n_held, holder.held.node.shape[0])
    return out, nm, ne, status


def kernel_capacity(n_in: int, n_out: int) -> int:
    """The capacity of ``run_batch``'s new runs (held matches) arrays, ``n_out`` long, when it was
    given ``n_in``: it starts them at ``max(16, n_in)`` and doubles them (at least) when they
    fill, so the capacity is that start, or at most twice ``n_out`` (Numba does not tell)."""
    c0 = max(16, n_in)
    return c0 if n_out <= c0 else 2 * n_out


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
    trim_due: int = 0                   # rows_fed at which the retained rows are next trimmed (Matcher._trim_retained)
    shards: list | None = None          # with threads: colcep.engine.shards.Shard per thread (then runs .. park unused)
    park: Park = field(default_factory=Park.empty)  # the parked runs (the others are in ``runs``)

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
    def checkpoint(self) -> Saved:
        """What to go back to if the call now starting fails (``restore_from``), or to drop
        when it succeeds (``commit``). Time: the keys (their per-key arrays are copied), not
        the runs or the buffer."""
        _undo_ready()
        parts = []
        for p in self.parts():
            kbuf.open_call(p.buffer.meta)
            kpark.open_call(p.park.arrays[kpark.P_PM])
            parts.append((p.runs, p.held, p.buffer, p.start_dead.copy(), p.park))
        fields = dict(self.__dict__, key_last_ts=self.key_last_ts.copy())
        return Saved(fields, self.keys.mark(), len(self.strings), parts)

    def commit(self) -> None:
        """The call succeeded: the buffers' slots and parked runs' slots it freed become reusable."""
        for p in self.parts():
            b = p.buffer
            kbuf.close_call(b.parent, b.ref, b.meta)
            kpark.close_call(p.park.arrays)

    def restore_from(self, saved: Saved, settled: bool = True) -> None:
        """Become the state ``saved`` was taken of. ``settled``: no kernel of the failed call
        still runs (one that missed its stop flag may: then each buffer is undone in a copy,
        and the arrays it may still write to are left to it)."""
        self.__dict__.update(saved.fields)
        self.keys.rollback(saved.keys)
        for s in list(self.strings)[saved.n_strings:]:
            del self.strings[s]
        for p, (runs, held, buf, dead, park) in zip(self.parts(), saved.parts):
            p.runs, p.held, p.start_dead = runs, held, dead
            # the arrays of before the call (a kernel that grew them wrote to them before, to
            # its copy after: the nodes and parked runs to keep are intact in both), so the
            # capacity is as before
            if not settled:
                buf, park = buf.copy(), park.copy()
            p.park = Park(kpark.undo_call(park.arrays))
            roots = np.concatenate([runs.node, held.node, p.park.nodes()]).astype(np.int64)
            kbuf.undo_call(buf.row, buf.stage, buf.parent, buf.ref, buf.meta, roots)
            p.buffer = buf
    def parts(self) -> list:
        """What holds the runs, held matches, buffer and ``start_dead``: this state, or its shards."""
        return [self] if self.shards is None else self.shards

    # ------------------------------------------------------------------ figures
    @property
    def live_runs(self) -> int:
        return sum(int(p.runs.state.shape[0]) + p.park.live for p in self.parts())

    @property
    def live_nodes(self) -> int:
        return sum(p.buffer.live for p in self.parts())

    def retain(self, block: tuple) -> None:
        """Keep the input rows of ``block`` ((first row, table)) for the output."""
        cached, old = self.__dict__.get("_retained_cache"), self.retained
        self.retained = old + [block]
        if cached is not None and cached[0] is old:
            self.__dict__["_retained_cache"] = (self.retained, cached[1] + block[1].nbytes)

    def retained_bytes(self) -> int:
        """Bytes of the retained input rows (cached: the list is replaced, never changed, and
        ``retain`` adds a block's bytes to the total, so a call does not visit every block)."""
        cached = self.__dict__.get("_retained_cache")
        if cached is None or cached[0] is not self.retained:
            cached = (self.retained, sum(t.nbytes for _, t in self.retained))
            self.__dict__["_retained_cache"] = cached
        return cached[1]

    def run_bytes(self) -> int:
        """Bytes of the runs', parked runs' and held matches' arrays, at their capacity (all parts)."""
        total = 0
        for p in self.parts():
            total += p.park.nbytes
            for x in (p.runs, p.held):
                arrays = x.arrays()
                if x.cap < 0:
                    total += sum(_cap_bytes(a) for a in arrays)
                else:
                    total += arrays[0].nbytes + x.cap * sum(a.itemsize * (a.shape[1] if a.ndim == 2 else 1)
                                                            for a in arrays[1:])
        return total

    def buffer_bytes(self) -> int:
        """Bytes of the match buffers' arrays, at their capacity (all parts)."""
        return sum(p.buffer.nbytes for p in self.parts())

    def nbytes(self) -> int:
        """Bytes the state holds, every array at its capacity: runs, held matches, the match
        buffer, the per-key arrays, the input rows kept for the output, rows waiting for the
        watermark, history (not the Python objects of the key and string codes)."""
        return self.run_bytes() + self.buffer_bytes() + self.other_bytes()

    def other_bytes(self) -> int:
        """Bytes of what the state holds besides runs, held matches and buffers: the per-key
        arrays, the retained input rows, rows waiting for the watermark, history."""
        keyed = sum(_cap_bytes(a) for a in (self.start_dead, self.key_last_ts))
        keyed += sum(_cap_bytes(p.start_dead) for p in self.shards or [])
        rows = self.retained_bytes()
        pend = self.pending.nbytes if self.pending is not None else 0
        hist = self.history.nbytes if self.history is not None else 0
        return keyed + rows + pend + hist
