"""The state of windows that fire by trigger: Flink's window operator over a stream of batches.

``FiringState.step`` runs one batch through ``colcep.kernels.triggers.step`` and returns the
firings, each a range of the rows it evaluated; the rows a live window still holds stay in
``rows`` (an Arrow table, row id = position) until no window holds them.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colcep.errors import SnapshotError
from colcep.kernels import triggers as kt
from colcep.windows.triggers import FiringProgram, check_delta_columns, delta_values

I64_MAX = int(np.iinfo(np.int64).max)


@dataclass
class Fired:
    """Firings of one step, in emission order: ``key`` codes, ``start`` / ``end`` (time windows),
    ``seq`` per window, ``kind`` (0 early, 1 on time, 2 late), and the rows each evaluated:
    ``rows.take(pos[lo[f]:hi[f]])``, in time order (ties: the order the window received them);
    ``received[lo[f]:hi[f]]`` are the same rows in the order Flink's window function gets them."""

    key: np.ndarray
    start: np.ndarray
    end: np.ndarray
    seq: np.ndarray
    kind: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    pos: np.ndarray
    received: np.ndarray
    rows: pa.Table
    late: np.ndarray  # uint8 per row of the step's batch


def _read_only(*arrays: np.ndarray) -> list[np.ndarray]:
    """The batch's inputs as contiguous read-only views (int64 or float64): one kernel signature
    whatever their source (Arrow gives read-only arrays, numpy writable ones)."""
    out = []
    for a in arrays:
        v = np.ascontiguousarray(a, np.float64 if a.dtype.kind == "f" else np.int64).view()
        v.flags.writeable = False
        out.append(v)
    return out


class FiringState:
    """Windows, trigger state, timers and the rows they hold, carried from batch to batch."""

    def __init__(self, prog: FiringProgram):
        self.prog = prog
        self._st = kt.new_state(1, prog.n_leaves, prog.tcap)
        self.rows: pa.Table | None = None
        self._rts = np.zeros(0, np.int64)
        self._rv = np.zeros(0, np.float64)

    def step(self, tbl: pa.Table, ts: np.ndarray, codes: np.ndarray, n_keys: int, wm_before: np.ndarray,
             wm_end: int, gaps: np.ndarray) -> Fired:
        p = self.prog
        base = 0 if self.rows is None else self.rows.num_rows
        rows = tbl if self.rows is None else pa.concat_tables([self.rows, tbl])
        check_delta_columns(tbl.schema, p)
        trig_v = delta_values(tbl, p.trigger_column)
        ev_v = delta_values(tbl, p.evictor_column)
        rts = np.concatenate([self._rts, ts])
        rv = np.concatenate([self._rv, ev_v])
        ids = np.arange(base, base + tbl.num_rows, dtype=np.int64)
        sl, tm, ls, lf, nd, kh, kw, kn, sc = self._st
        sl, tm, ls, lf, nd, kh, kw, kn, fi, log, late = kt.step(
            p.prog, p.ev_th, p.nk, p.ni, p.nf, p.nparent, p.leaf_of, p.leaf_kind,
            sl, tm, ls, lf, nd, kh, kw, kn, sc, rts, rv, *_read_only(codes, ids, ts, trig_v, wm_before),
            np.int64(wm_end), np.int64(n_keys), *_read_only(gaps))
        self._st = (sl, tm, ls, lf, nd, kh, kw, kn, sc)
        lo, hi = fi[:, 5].copy(), fi[:, 6].copy()
        pos = log[kt.time_sorted_segments(rts[log], lo, hi)]
        fired = Fired(fi[:, 0].copy(), fi[:, 1].copy(), fi[:, 2].copy(), fi[:, 3].copy(), fi[:, 4].copy(),
                      lo, hi, pos, log, rows, late)
        self._keep_live(rows, rts, rv)
        return fired

    def _keep_live(self, rows: pa.Table, rts: np.ndarray, rv: np.ndarray) -> None:
        """Keep only the rows a window still holds (renumbered), when they are at most half."""
        sl, nd, sc = self._st[0], self._st[4], self._st[-1]
        n = rows.num_rows
        live = kt.live_rows(sl, nd, sc, n).view(bool)
        n_live = int(live.sum())
        if n_live * 2 > n:
            self.rows, self._rts, self._rv = rows, rts, rv
            return
        keep = np.flatnonzero(live)
        new_id = np.full(n, -1, np.int64)
        new_id[keep] = np.arange(keep.shape[0], dtype=np.int64)
        kt.renumber_rows(sl, nd, sc, new_id)
        self.rows = rows.take(pa.array(keep, pa.int64())) if n_live else rows.slice(0, 0)
        self._rts, self._rv = rts[keep], rv[keep]

    def next_timer(self) -> int | None:
        """The earliest timer any window holds (None: none), for a streaming engine's wake-up."""
        sl, tm, sc = self._st[0], self._st[1], self._st[-1]
        t = kt.next_timer(sl, tm, sc)
        return None if t == kt.I64_MAX else int(t)

    @property
    def empty(self) -> bool:
        """No window is open."""
        return bool((self._st[5] < 0).all())

    def snapshot(self) -> bytes:
        """The state as bytes: the program's fingerprint, then the arrays (numpy's format), then
        the rows (Arrow IPC)."""
        buf = io.BytesIO()
        for a in (self.prog.fingerprint(), *self._st, self._rts, self._rv):
            np.save(buf, a, allow_pickle=False)
        if self.rows is not None:
            with pa.ipc.new_stream(buf, self.rows.schema) as w:
                w.write_table(self.rows)
        return buf.getvalue()

    @classmethod
    def restore(cls, prog: FiringProgram, data: bytes) -> "FiringState":
        """The state of ``snapshot``; a SnapshotError if it was taken under another program (a
        query restarted from its checkpoint with another window, trigger or evictor)."""
        fs = cls(prog)
        buf = io.BytesIO(data)
        try:
            taken = np.load(buf, allow_pickle=False)
        except ValueError as exc:
            raise SnapshotError(f"not a window state snapshot: {exc}") from exc
        if not np.array_equal(taken, prog.fingerprint()):
            raise SnapshotError("this window state was kept under another window, trigger, evictor or allowed "
                                "lateness; restart the query from a new checkpoint, or with the specification it had")
        arrays = [np.load(buf, allow_pickle=False) for _ in range(len(fs._st) + 2)]
        fs._st = tuple(arrays[:-2])
        fs._rts, fs._rv = arrays[-2], arrays[-1]
        rest = buf.read()
        fs.rows = pa.ipc.open_stream(rest).read_all() if rest else None
        return fs

    @property
    def held_rows(self) -> int:
        """Rows some window still holds."""
        return 0 if self.rows is None else self.rows.num_rows
