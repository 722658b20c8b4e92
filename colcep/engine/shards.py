"""Keys spread over threads: a Matcher's kernel state in shards.

With ``threads=T`` (T > 1) the key with code ``c`` (first-seen order) belongs to shard
``c % T`` as its local key ``c // T``. Each shard holds its keys' runs, held matches,
``start_dead`` and its own match buffer, so the shards' kernel calls share nothing and run at
once (the kernels release the GIL). Everything else stays in the one ``MatcherState``: key and
string codes, time checks, history, the rows kept for the output, event-time buffering, the
counters that number rows and matches.

A shard's rows of a batch are its part of the batch's layout (``colcep.engine.layout``); a
kernel call gets their columns gathered in key order and their positions in the batch, so the
rows and matches it writes are stream positions as in one thread (``colcep.engine.feed``). Each shard orders its matches for output (``emitted``), a merge finds their places
among all shards' (``places``: by emitting row, then key, as one thread emits them) and the
threads copy the events there (``place``), each a contiguous part: the output is the same for
any thread count. ``merged`` / ``split`` convert between shards and the one-thread layout
(snapshots are always written in that layout).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import numpy as np

from colcep.errors import InputError
from colcep.kernels import arrays as karr
from colcep.kernels.buffer import JOIN
from colcep.kernels.compact import compact_buffer
from colcep.engine.state import Buffer, Held, MatcherState, Park, Runs, all_runs, gather_lists, select_keys

PARALLEL_MIN_ROWS = 1 << 15  # a batch with fewer rows runs its shards one after another


def resolve_threads(threads: "int | None") -> int:
    """``threads`` checked; None: the cores this process may use."""
    if threads is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            return max(1, os.cpu_count() or 1)
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise InputError(f"threads must be a positive integer or None (all cores), got {threads!r}")
    return int(threads)


@dataclass
class Shard:
    """One thread's keys: their runs and held matches (CSR over local keys), ``start_dead``,
    the match buffer their nodes live in and their parked runs."""

    runs: Runs
    held: Held
    buffer: Buffer
    start_dead: np.ndarray
    park: Park = field(default_factory=Park.empty)

    @classmethod
    def empty(cls, v_width: int) -> "Shard":
        return cls(Runs.empty(v_width), Held.empty(), Buffer.empty(), np.zeros(0, np.uint8))

    def ensure_keys(self, n_keys: int) -> None:
        if self.start_dead.shape[0] < n_keys:
            self.start_dead = np.concatenate([self.start_dead, np.zeros(n_keys - self.start_dead.shape[0], np.uint8)])


def n_local(n_keys: int, s: int, T: int) -> int:
    """The number of keys of shard ``s`` among codes ``0 .. n_keys - 1``."""
    return max(0, (n_keys - s + T - 1) // T)


# ------------------------------------------------------------------------------ layout changes
def split(st: MatcherState, T: int) -> None:
    """Move the one-thread state's runs, held matches, buffer and ``start_dead`` into ``T``
    shards (each buffer compacted to what its keys reach)."""
    n_keys = st.keys.n
    st.runs, st.park = all_runs(st, n_keys), Park.empty()
    shards = []
    for s in range(T):
        codes = np.arange(s, n_keys, T, dtype=np.int64)
        runs, held = select_keys(st.runs, codes), select_keys(st.held, codes)
        n_runs = runs.node.shape[0]
        b = st.buffer
        row, stage, parent, ref, roots = compact_buffer(b.row, b.stage, b.parent, int(b.meta[0]),
                                                        np.concatenate([runs.node, held.node]).astype(np.int64))
        runs.node, held.node = roots[:n_runs], roots[n_runs:]
        dead = np.zeros(codes.shape[0], np.uint8)
        have = codes[codes < st.start_dead.shape[0]]
        dead[:have.shape[0]] = st.start_dead[have]
        shards.append(Shard(runs, held, Buffer.from_nodes(row, stage, parent, ref), dead))
    st.shards = shards
    st.runs, st.held, st.buffer = Runs.empty(st.runs.v.shape[1]), Held.empty(), Buffer.empty()
    st.start_dead = np.zeros(0, np.uint8)


def merged(st: MatcherState) -> MatcherState:
    """A copy of ``st`` in the one-thread layout (its shards put together over the global key
    codes); ``st`` itself is unchanged."""
    if st.shards is None:
        return st if st.park.live == 0 else replace(st, runs=all_runs(st, st.keys.n), park=Park.empty())
    T, n_keys = len(st.shards), st.keys.n
    rows, stages, parents, refs, parts_runs, parts_held = [], [], [], [], [], []
    base = 0
    for s, sh in enumerate(st.shards):
        runs = all_runs(sh, n_local(n_keys, s, T))
        n_runs = runs.node.shape[0]
        b = sh.buffer
        row, stage, parent, ref, roots = compact_buffer(b.row, b.stage, b.parent, int(b.meta[0]),
                                                        np.concatenate([runs.node, sh.held.node]).astype(np.int64))
        row = np.where(stage == JOIN, row + base, row)
        parent = np.where(parent >= 0, parent + base, parent)
        roots = np.where(roots >= 0, roots + base, roots)
        rows.append(row), stages.append(stage), parents.append(parent), refs.append(ref)
        parts_runs.append(replace(runs, node=roots[:n_runs]))
        parts_held.append(replace(sh.held, node=roots[n_runs:]))
        base += row.shape[0]
    dead = np.zeros(n_keys, np.uint8)
    for s, sh in enumerate(st.shards):
        k = min(sh.start_dead.shape[0], n_local(n_keys, s, T))
        dead[s:s + T * k:T] = sh.start_dead[:k]
    return replace(st, runs=_interleave(parts_runs, n_keys), held=_interleave(parts_held, n_keys),
                   buffer=Buffer.from_nodes(*(np.concatenate(x) for x in (rows, stages, parents, refs))),
                   start_dead=dead, shards=None, park=Park.empty())


def _interleave(parts: list, n_keys: int):
    """The shards' per-key CSR lists as one CSR over the global key codes."""
    T = len(parts)
    starts = np.zeros(n_keys, np.int64)
    counts = np.zeros(n_keys, np.int64)
    base = 0
    for s, p in enumerate(parts):
        ptr = p.ptr
        k = min(ptr.shape[0] - 1, n_local(n_keys, s, T))
        codes = np.arange(s, s + T * k, T)
        starts[codes] = base + ptr[:k]
        counts[codes] = ptr[1:k + 1] - ptr[:k]
        base += int(ptr[-1])
    ptr, sel = gather_lists(starts, counts)
    fields = zip(*(p.arrays()[1:] for p in parts))
    return type(parts[0])(ptr, *(np.concatenate(f)[sel] for f in fields))


# ------------------------------------------------------------------------------ one batch
MANY_RUNS = 1024  # carried runs past which a kernel call takes more rows ...
CHUNK_ROWS_PER_RUN = 16  # ... this many per run: a call loads and stores every carried run


def chunk_rows(chunk: int, runs: int) -> int:
    """Rows of the next kernel call: ``chunk``, or more with many carried runs, so that loading
    and storing them stays a small part of a call (kernels/park.py keeps the waiting ones
    untouched within a call)."""
    return max(chunk, CHUNK_ROWS_PER_RUN * runs) if runs > MANY_RUNS else chunk


@dataclass
class Emitted:
    """One shard's matches in emission order (``order`` into its kernel output ``out``): per
    match its sort key (emitting row, then global key), global key, event count and timed-out
    flag / time."""

    out: tuple
    order: np.ndarray
    sort_key: np.ndarray
    keys: np.ndarray
    n_events: np.ndarray
    flag: np.ndarray
    tts: np.ndarray


def emitted(out: tuple, nm: int, ne: int, s: int, T: int, lo: int, hi: int, n_keys: int) -> Emitted:
    """Shard ``s``'s kernel output in emission order (by emitting row in ``[lo, hi)``, those
    after ``hi`` last, as ``karr.matches_in_emission_order``). Each key lives in one shard, so
    the shards' matches interleave by ``sort_key``: the emitting row's position, and among those
    emitted after the rows (a watermark, the end of input) the key code, as the kernel visits
    keys. Runs on the shard's thread."""
    m_key, m_row, m_flag, m_tts, m_off = out[0][:nm], out[1][:nm], out[2][:nm], out[3][:nm], out[4][:nm + 1]
    order = karr.emission_order(m_row, lo, hi)
    keys = m_key[order] * T + s
    sort_key = np.minimum(m_row[order] - lo, hi - lo) * max(n_keys, 1) + keys
    return Emitted(out, order, sort_key, keys, np.diff(m_off)[order], m_flag[order].astype(np.int64), m_tts[order])


def places(found: list[Emitted]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per shard, each match's place among all shards' matches and the place of its first event."""
    ptr = np.zeros(len(found) + 1, np.int64)
    np.cumsum([e.sort_key.shape[0] for e in found], out=ptr[1:])
    place, first = karr.merge_places(np.concatenate([e.sort_key for e in found]),
                                     np.concatenate([e.n_events for e in found]), ptr)
    return ([place[ptr[s]:ptr[s + 1]] for s in range(len(found))],
            [first[ptr[s]:ptr[s + 1]] for s in range(len(found))])


def place(found: list[Emitted], at: list[np.ndarray], first: list[np.ndarray], lo: int, hi: int, first_id: int,
          rows: np.ndarray, stages: np.ndarray, ids: np.ndarray, keys: np.ndarray, flag: "np.ndarray | None",
          tts: "np.ndarray | None") -> None:
    """Write the events of the merged matches ``lo .. hi - 1`` (their places ``at``, first
    events ``first``, per shard) into the merged per-event arrays, match ids from ``first_id``.
    Threads fill disjoint ranges, each a contiguous part of the arrays (so they never write to
    the same cache lines); a shard's matches in a range are a slice of its own, in order."""
    for e, where, start in zip(found, at, first):
        i0, i1 = (int(x) for x in np.searchsorted(where, [lo, hi]))
        if i0 == i1:
            continue
        m_off, e_row, e_stage = e.out[4], e.out[5], e.out[6]
        karr.place_events(start, e.order, m_off, e_row, e_stage, where + first_id, e.keys, rows, stages, ids, keys,
                          i0, i1)
        if flag is not None:
            karr.place_events(start, e.order, m_off, e_row, e_stage, e.flag, e.tts, rows, stages, flag, tts, i0, i1)
