"""History in conditions: ``prev`` and ``rolling`` columns, computed per key and carried.

A pattern's ``prev(column, k)`` and ``rolling(column, func, rows=..., within=...)`` nodes are
event-only: for each batch they become float columns (like ``col``), computed before the
kernel runs by ``kernels.history.history_batch`` over, per key, the rows carried from earlier
batches followed by the batch's rows of that key. What is carried (:class:`History`) is per key
the last rows any node can still reach (the last ``k`` / ``rows`` rows, the rows less than
``within`` before the key's latest one): their times and the values of the nodes' sources
(one column per distinct source expression). It is part of the Matcher's state, so it goes
through checkpoints (a failed call leaves it as it was) and snapshots (``colcep.engine.codec``: the
optional ``history.*`` section of a format-1 snapshot).

Rows are seen in the order the kernel sees them: arrival order per key (event time: release
order, i.e. time order). A key's first rows have a null history.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from colcep.engine import conditions as cond
from colcep.durations import to_units
from colcep.errors import PatternError
from colcep.expr import Expr
from colcep.kernels import history as khist
from colcep.kernels.arrays import group_by_key

_FUNCS = {"sum": khist.F_SUM, "mean": khist.F_MEAN, "min": khist.F_MIN, "max": khist.F_MAX,
          "count": khist.F_COUNT}


@dataclass(frozen=True)
class History:
    """The rows carried per key (CSR over key codes; a key past ``ptr``'s end carries none):
    ``count`` the rows each key has had, ``ts`` the carried rows' times, ``vals`` (n_sources,
    rows) their source values (NaN: null; strings as the Matcher's dictionary codes). Replaced on
    every batch, never changed in place."""

    ptr: np.ndarray
    count: np.ndarray
    ts: np.ndarray
    vals: np.ndarray

    @classmethod
    def empty(cls, n_sources: int) -> "History":
        return cls(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                   np.zeros((n_sources, 0), np.float64))

    @property
    def nbytes(self) -> int:
        return int(self.ptr.nbytes + self.count.nbytes + self.ts.nbytes + self.vals.nbytes)

    def select(self, codes: list[int]) -> "History":
        """The rows of keys ``codes`` only, renumbered 0..len(codes)-1 (snapshots of some keys)."""
        n_old = self.ptr.shape[0] - 1
        idx = [np.arange(self.ptr[c], self.ptr[c + 1]) if c < n_old else np.zeros(0, np.int64) for c in codes]
        sel = np.concatenate(idx).astype(np.int64) if idx else np.zeros(0, np.int64)
        ptr = np.concatenate([[0], np.cumsum([len(i) for i in idx])]).astype(np.int64)
        count = np.array([self.count[c] if c < n_old else 0 for c in codes], np.int64)
        return History(ptr, count, self.ts[sel], self.vals[:, sel])

    def check(self, n_keys: int, n_sources: int, rows_fed: int) -> "str | None":
        """What is wrong with these arrays for ``n_keys`` keys and ``n_sources`` sources, after
        ``rows_fed`` rows, or None."""
        p = self.ptr
        if p.ndim != 1 or p.shape[0] < 1 or p.shape[0] > n_keys + 1 or p[0] != 0 or (np.diff(p) < 0).any():
            return "its history does not fit its keys"
        if self.count.shape != (p.shape[0] - 1,) or (self.count < np.diff(p)).any():
            return "its history's row counts do not fit its keys"
        over = np.flatnonzero(self.count > rows_fed)
        if over.size:
            return f"its history counts more rows than were fed, at index {int(over[0])}"
        if self.ts.shape != (int(p[-1]),) or self.vals.ndim != 2 or self.vals.shape != (n_sources, int(p[-1])):
            return "its history does not fit this pattern"
        return None


@dataclass(frozen=True)
class Plan:
    """A program's history nodes as kernel specs: the distinct sources and one spec per node."""

    nodes: tuple           # Expr per spec
    sources: tuple         # Expr per source
    kind: np.ndarray
    src: np.ndarray
    func: np.ndarray
    rows: np.ndarray
    within: tuple          # the durations as given, resolved per time unit
    cur: np.ndarray

    @property
    def n_sources(self) -> int:
        return len(self.sources)


def plan(nodes: list[Expr]) -> Plan | None:
    """The Plan for a program's history nodes (``Lowered.hist_exprs``); None when it has none."""
    if not nodes:
        return None
    sources: dict = {}
    kind, src, func, rows, within, cur = [], [], [], [], [], []
    for e in nodes:
        if e.op == "prev":
            s, k = e.args
            kind.append(khist.PREV), func.append(0), rows.append(k), within.append(None), cur.append(0)
        else:
            f, s, r, w, c = e.args
            kind.append(khist.ROLL), func.append(_FUNCS[f]), rows.append(r or 0), within.append(w)
            cur.append(int(c))
        src.append(sources.setdefault(s.key(), (len(sources), s))[0])
    return Plan(tuple(nodes), tuple(s for _, s in sources.values()), np.array(kind, np.int8),
                np.array(src, np.int64), np.array(func, np.int8), np.array(rows, np.int64), tuple(within),
                np.array(cur, np.int8))


def window_units(p: Plan, unit: str) -> np.ndarray:
    """Each spec's ``within`` in time column units (0: none)."""
    out = np.zeros(len(p.within), np.int64)
    for i, w in enumerate(p.within):
        if w is not None:
            out[i] = to_units(w, unit, f"rolling(..., within={w!r})", exact=False, error=PatternError)
            if out[i] <= 0:
                raise PatternError(f"rolling(..., within={w!r}) is shorter than one unit of the time column ({unit})")
    return out


def advance(hist: History | None, p: Plan, env: dict, codes: np.ndarray, ts: np.ndarray, n_keys: int,
            unit: str, strings: dict) -> tuple[History, dict]:
    """The history columns of a batch (``env`` holds its source columns, ``codes`` its key codes
    and ``ts`` its times, rows in time order per key) and the History to carry on. Adds nothing
    to ``env`` and does not change ``hist``: the caller adds the columns and keeps the new one."""
    if hist is None:
        hist = History.empty(p.n_sources)
    n = ts.shape[0]
    vals = np.empty((p.n_sources, n), np.float64)
    for i, s in enumerate(p.sources):
        vals[i] = cond.evaluate(s, env, n, strings)
    order, key_ptr = group_by_key(codes, n_keys)
    out, ptr, count, hts, hvals = khist.history_batch(
        hist.ptr, hist.count, hist.ts, hist.vals, order, key_ptr, np.ascontiguousarray(ts, np.int64), vals, p.kind,
        p.src, p.func, p.rows, window_units(p, unit), p.cur)
    cols = {cond.hist_name(e): out[i] for i, e in enumerate(p.nodes)}
    return History(ptr, count, hts, hvals), cols
