"""One batch through the step kernels, for one Matcher or several at once (a ManyMatcher's).

What does not depend on the pattern is done once per batch: the key codes, the layout of the
rows for the kernel calls (:mod:`colcep.engine.layout`), and the columns the conditions read,
gathered into that layout once per shard. Then each shard (one per thread) steps its keys for
every pattern in turn: the pattern's conditions over the shard's gathered columns, then its
kernel calls, while those columns are still in the cache. Each Matcher keeps its own state,
output, match ids and errors; when one fails the caller undoes them all (the first pattern's
failure is raised, a bound before an interrupt).
"""
from __future__ import annotations

import queue
from functools import partial
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from colcep.engine import kernel_cache as cache
from colcep.engine import heap, interrupt
from colcep.engine import layout
from colcep.engine import shards as shd
from colcep.engine.state import step
from colcep.engine.watermark import time_values
from colcep.kernels import buffer as kbuf
from colcep.kernels import nfa as knfa
from colcep.kernels.codes import NO_TICK, OK

Matcher = Any  # colcep.engine.matcher.Matcher (which imports this module)

OUT_KEEP_EVENTS = 1 << 20  # the kernel's output arrays are kept for the next batch up to this size
_NO_TIMES = np.zeros(0, np.int64)
_NO_TIMES.flags.writeable = False  # as time_values gives it: one compiled signature


def new_out() -> tuple:
    """The kernel's output arrays (matches, their event offsets, events), reused from batch to
    batch while they stay small."""
    return (np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64, np.int32), np.empty(64, np.int64),
            np.zeros(65, np.int64), np.empty(256, np.int64), np.empty(256, np.int32))


def feed(ms: list[Matcher], tbls: "list[pa.Table | None]", tick: int | None = None) -> list[pa.Table]:
    """Each Matcher of ``ms`` over its ``tbls`` (one batch: rows in time order per key, each
    Matcher's columns of it; None: no rows), then, with ``tick``, every key's time advanced to it
    (a watermark; TIME_MAX: the end of input); returns each one's output. The Matchers share one
    ``KeyCodes``, their thread count and the rows fed so far (``colcep.engine.many.lockstep``; one
    Matcher trivially)."""
    lead, tbl = ms[0], tbls[0]
    row0, T = lead._state.rows_fed, lead.threads
    if tbl is None or tbl.num_rows == 0:
        n, codes, ts = 0, np.zeros(0, np.int64), _NO_TIMES
        if tbl is not None:
            lead._state.keys.encode(tbl, row0)  # (checks the key columns, learns their types)
    else:
        n = tbl.num_rows
        codes = lead._key_codes(tbl, row0)
        ts = time_values(tbl, lead.time, row0)
    if n == 0 and tick is None:
        return [m._empty_output() for m in ms]
    n_keys = lead._state.keys.n
    lead._check_order(codes, ts, n_keys, row0)
    for m in ms[1:]:  # (fed the same rows: each key's last time is the lead's)
        m._state.ensure_keys(n_keys)
        m._state.key_last_ts[:n_keys] = lead._state.key_last_ts[:n_keys]
    chunks = [max(m._chunk_rows(s, n_keys) for m in ms) for s in range(T)]
    lay = layout.build(codes, n_keys, T, chunks, tick is not None)
    numeric: dict[tuple, np.ndarray] = {}  # (name, type) -> the column as float64: one copy for all patterns
    envs = [m._columns(t, n, numeric, codes, ts, n_keys) for m, t in zip(ms, tbls)]
    tick_ts = tick if tick is not None else NO_TICK
    if lead._state.shards is None:
        cols = _ShardColumns(lay, 0, ts)
        events = [_one_thread(m, lay, cols, env, row0, n, tick_ts) for m, env in zip(ms, envs)]
        return [m._finish(t, n, row0, ev) for m, t, ev in zip(ms, tbls, events)]
    found = _threads(ms, lay, envs, ts, row0, n, n_keys, tick_ts)
    return _outputs(ms, tbls, found, row0, n)


def _outputs(ms: list[Matcher], tbls: list, found: list[list], row0: int, n: int) -> list[pa.Table]:
    """Each pattern's output of the batch from its shards' matches (``found``), the patterns
    shared out among the threads (each pattern's placing and output one after another in one
    thread): the work after the kernels does not wait on one thread."""
    stop = interrupt.new_stop_flag()
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for i in sorted(range(len(ms)), key=lambda i: -sum(e.order.shape[0] for e in found[i])):
        todo.put(i)  # (the most matches first)
    outs: list = [None] * len(ms)

    def work() -> None:
        while not stop[0]:  # (another pattern failed, or Ctrl-C: the call is undone)
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            m = ms[i]
            outs[i] = m._finish(tbls[i], n, row0, m._placed(found[i], stop, n))

    n_events = sum(int(e.n_events.sum()) for f in found for e in f)
    interrupt.call_all([work] * min(ms[0].threads, len(ms)), stop=stop, parallel=n_events >= shd.PARALLEL_MIN_ROWS)
    return outs


class _ShardColumns:
    """Shard ``s``'s rows of the batch's columns in layout order, each gathered once: the
    patterns share the numeric columns (the same arrays), not their string codes or history;
    and the values of their conditions that are equal across patterns, each evaluated once."""

    def __init__(self, lay: layout.Layout, s: int, ts: np.ndarray):
        lay.calls(s)  # (the shard laid out here: on its own thread)
        self.rows = lay.shard(lay.rows, s)
        self._lay, self._s = lay, s
        self.ts = lay.gather_shard(ts, s)
        self.ts.flags.writeable = False  # as time_values gives it
        self._got: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.conditions: dict[tuple, np.ndarray] = {}  # values of conditions equal across patterns

    def env(self, arrival: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {}
        for name, a in arrival.items():
            got = self._got.get(id(a))
            if got is None:  # (the source array is kept with it: its id stays its own)
                got = self._got[id(a)] = (a, self._lay.gather_shard(a, self._s))
            out[name] = got[1]
        return out


def _step_shard(m: Matcher, part, s: int, lay: layout.Layout, cols: _ShardColumns, arrival: dict, row0: int,
                tick_ts: int, stop: np.ndarray, out: tuple, invoke: Callable, bounds: Callable[[], tuple],
                progress: Callable[[int, int], None] | None) -> tuple:
    """Pattern ``m``'s kernel calls over shard ``s`` (``part``: its state, or the shard):
    its conditions over the shard's columns, then a call per layout call; returns ``(out, nm,
    ne, status)`` (the first failed status ends it). ``bounds()``: the call's bounds
    (``Matcher._call_bounds``); ``progress(rows of the shard done, matches)`` after each call."""
    prog = m.program
    masks, values, start = m._conditions(cols.env(arrival), cols.rows.shape[0], cols.conditions)
    calls = lay.calls(s)
    base = int(lay.shard_lo[s])
    tables = prog.tables(m._bound.gap)
    nm = ne = 0
    status = np.zeros(3, np.int64)
    for c in calls:
        a, b = c.lo - base, c.hi - base
        if len(calls) > 1:  # (a slice of a 2-D array is not contiguous: one compiled signature)
            mk, vs = np.ascontiguousarray(masks[:, a:b]), np.ascontiguousarray(values[:, a:b])
        else:
            mk, vs = masks, values
        batch = (c.key_ptr, lay.order[:b - a], np.int64(row0), cols.ts[a:b], mk, vs, start[a:b], cols.rows[a:b])
        max_runs, max_slots, max_out, max_all = bounds()
        part.buffer.meta[kbuf.META_MAX] = max_slots
        opts = prog.options(m._bound.window, m.timeouts, max_runs, max_slots, tick_ts if c.last else NO_TICK,
                            max_out, max_all)
        out, nm, ne, status = step(part, m._tier.run_batch, invoke, tables, opts, stop, batch, out, nm, ne)
        if status[0] != OK:
            break
        if progress is not None:
            progress(b, nm)
    return out, nm, ne, status


def _one_thread(m: Matcher, lay: layout.Layout, cols: _ShardColumns, arrival: dict, row0: int, n: int,
                tick_ts: int) -> tuple:
    """Pattern ``m``'s calls in this thread (Ctrl-C stops each), bounds as its state grows;
    returns its matches in emission order (``Matcher._in_emission_order``)."""
    st = m._state
    stop = interrupt.new_stop_flag()
    cache.notice_compile()
    heap.keep()
    report = m.on_progress
    progress = None if report is None else (lambda rows, nm: report(row0 + rows, st.matches_out + nm))
    m._out, nm, ne, status = _step_shard(m, st, 0, lay, cols, arrival, row0, tick_ts, stop, m._out,
                                         partial(interrupt.call, stop=stop), lambda: m._call_bounds([st])[0],
                                         progress)
    m._raise_status(status, int(status[1]))
    m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage = m._out
    events = m._in_emission_order(m_key[:nm], m_row[:nm], m_flag[:nm], m_tts[:nm], m_off[:nm + 1], e_row[:ne],
                                  e_stage[:ne], row0, row0 + n)
    if e_row.shape[0] > OUT_KEEP_EVENTS:
        m._out = new_out()
    return events


def _threads(ms: list[Matcher], lay: layout.Layout, envs: list[dict], ts: np.ndarray, row0: int, n: int,
             n_keys: int, tick_ts: int) -> list[tuple]:
    """Every pattern over every shard, the shards at once on threads (a big batch), each
    stepping its keys for every pattern in turn; per pattern its shards' matches
    (``shards.emitted``, one per shard)."""
    T = ms[0].threads
    stop = interrupt.new_stop_flag()
    cache.notice_compile()
    heap.keep()
    plans = []
    for m in ms:  # the bound of the state is for all shards: each may grow into its share of what is free now
        shards = m._state.shards
        for s, sh in enumerate(shards):
            sh.ensure_keys(shd.n_local(n_keys, s, T))
        done = np.zeros((T, 2), np.int64) if m.on_progress is not None else None
        plans.append((m._call_bounds(shards), [sh.buffer.live for sh in shards], done))

    def task(s: int) -> list[tuple]:
        cols = _ShardColumns(lay, s, ts)
        res = []
        for m, arrival, (bounds, _, done) in zip(ms, envs, plans):
            progress = None if done is None else partial(_count, done, s)
            out, nm, ne, status = _step_shard(m, m._state.shards[s], s, lay, cols, arrival, row0, tick_ts, stop,
                                              m._shard_out[s], _invoke, partial(_fixed, bounds[s]), progress)
            if status[0] != OK:
                stop[0] = 1  # the batch fails: the other shards need not finish it
                res.append((out, status, None))
                break
            res.append((out, status, shd.emitted(out, nm, ne, s, T, row0, row0 + n, n_keys)))
        return res

    def report() -> None:
        for m, (_, _, done) in zip(ms, plans):
            if done is not None:
                m.on_progress(row0 + int(done[:, 0].sum()), m._state.matches_out + int(done[:, 1].sum()))
    tick = report if any(p[2] is not None for p in plans) else None
    # (a tick without rows, the end of input with every key's runs timed out, is as big a batch)
    live = sum(sh.runs.state.shape[0] for m in ms for sh in m._state.shards) if tick_ts != NO_TICK else 0
    results = interrupt.call_all([partial(task, s) for s in range(T)], stop=stop,
                                 parallel=n + live >= shd.PARALLEL_MIN_ROWS,
                                 tick=tick)
    if tick is not None:
        tick()
    _raise_first(ms, results, [p[1] for p in plans])
    found = []
    for i, m in enumerate(ms):
        for s in range(T):
            out = results[s][i][0]
            m._shard_out[s] = out if out[5].shape[0] <= OUT_KEEP_EVENTS else new_out()
        found.append([results[s][i][2] for s in range(T)])
    return found


def _raise_first(ms: list[Matcher], results: list[list[tuple]], live: list[list[int]]) -> None:
    """Raise the failure of the first pattern that exceeded a bound (the first of its keys in
    key order), else ``KeyboardInterrupt`` if any call was interrupted."""
    T = ms[0].threads
    interrupted = False
    for i, m in enumerate(ms):
        failed = [(r[i][1], int(r[i][1][1]) * T + s) for s, r in enumerate(results)
                  if len(r) > i and r[i][1][0] != OK]
        bounds = [f for f in failed if f[0][0] != knfa.ERR_INTERRUPTED]
        if bounds:
            status, code = min(bounds, key=lambda f: f[1])
            if status[0] == knfa.ERR_NODES:  # the nodes of all shards, as one buffer counts them
                status[2] += sum(live[i]) - live[i][code % T]
            m._raise_status(status, code)
        interrupted = interrupted or bool(failed)
    if interrupted:
        raise KeyboardInterrupt


def _count(done: np.ndarray, s: int, rows: int, nm: int) -> None:
    done[s, 0], done[s, 1] = rows, nm


def _fixed(bounds: tuple) -> tuple:
    return bounds


def _invoke(kernel: Callable, *args) -> tuple:
    return kernel(*args)
