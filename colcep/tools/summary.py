"""What a scan found, counted as its output goes by: :class:`Summary` and :func:`summarize`;
:func:`format_matches` prints the first matches.

A summary takes the output table by table, in the order colcep writes it (each match's rows
together, its stages in pattern order: a match starts where its ``(pattern, match_id)`` changes,
a stage where its ``(pattern, match_id, stage)`` does), so its memory is the keys and stages it
counts, never the output: a trading day's 10^8 matched events are summarised as they are written.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.keys import dictionary_encoded
from colcep.engine.many import PATTERN_COL


def _changes(cols: list[pa.ChunkedArray | pa.Array], prev: tuple | None) -> np.ndarray:
    """Rows whose values in ``cols`` differ from the row before (``prev``: the values of the row
    before the first, or None)."""
    n = len(cols[0])
    new = np.zeros(n, bool)
    if n == 0:
        return new
    for c in cols:
        if n > 1:
            new[1:] |= pc.not_equal(c.slice(1), c.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    new[0] = prev is None or tuple(c[0].as_py() for c in cols) != prev
    return new


class _One:
    """The counts of one pattern's output."""

    def __init__(self, key: str | None, time: str | None):
        self.key, self.time = key, time
        self.matches = self.events = self.timed_out = 0
        self.has_timeouts = False
        self.stage_events: Counter = Counter()
        self.stage_matches: Counter = Counter()
        self.per_key: Counter = Counter()
        self.span: list | None = None
        self._prev_match: tuple | None = None
        self._prev_stage: tuple | None = None

    def add(self, t: pa.Table) -> None:
        self.has_timeouts = self.has_timeouts or "timed_out" in t.column_names
        if t.num_rows == 0:
            return
        ids, stage = t.column("match_id"), t.column("stage")
        starts = _changes([ids], self._prev_match)
        stage_starts = _changes([ids, stage], self._prev_stage)
        self._prev_match = (ids[-1].as_py(),)
        self._prev_stage = (ids[-1].as_py(), stage[-1].as_py())
        done = np.ones(t.num_rows, bool)
        if "timed_out" in t.column_names:
            done = ~t.column("timed_out").to_numpy(zero_copy_only=False).astype(bool)
            self.timed_out += int(np.count_nonzero(starts & ~done))
        self.matches += int(np.count_nonzero(starts & done))
        self.events += int(np.count_nonzero(done))
        if not done.any():
            return
        every = bool(done.all())  # (no timed-out rows: nothing to leave out)

        def kept(c: pa.ChunkedArray) -> pa.ChunkedArray:
            return c if every else c.filter(pa.array(done))

        self.stage_events.update(_counts(kept(stage)))
        self.stage_matches.update(_counts(stage.filter(pa.array(stage_starts & done))))
        if self.key is not None and self.key in t.column_names:
            self.per_key.update(_counts(t.column(self.key).filter(pa.array(starts & done))))
        if self.time is not None and self.time in t.column_names:
            mm = pc.min_max(kept(t.column(self.time)))
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            self.span = [lo, hi] if self.span is None else [min(self.span[0], lo), max(self.span[1], hi)]

    def result(self, top: int) -> dict[str, Any]:
        out: dict[str, Any] = {"matches": self.matches, "matched_events": self.events}
        if self.has_timeouts:
            out["timed_out"] = self.timed_out
        out["events_per_stage"] = dict(self.stage_events)
        out["matches_per_stage"] = dict(self.stage_matches)
        if self.per_key:
            out.update(_top_keys(self.per_key, top))
        if self.span is not None:
            out["time_span"] = list(self.span)
        return out


def _counts(a: "pa.ChunkedArray | pa.Array") -> dict:
    """Value -> rows, in first-seen order."""
    if len(a) == 0:
        return {}
    vc = pc.value_counts(a if isinstance(a, pa.Array) else a.combine_chunks())
    return dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()))


def _top_keys(per_key: Counter, top: int) -> dict[str, Any]:
    ranked = sorted(per_key.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"keys_with_matches": len(ranked), "top_keys": {str(k): int(v) for k, v in ranked[:top]}}


class Summary:
    """Counts of a match output, fed table by table (:meth:`add`) in the order it was written:
    matches, matched events, events and matches per stage, matches per key (the ``top`` keys),
    the time span of the matched events (when ``time`` is a column), timed-out partial matches
    when the output has them; ``named``: the output of several patterns (its ``pattern`` column
    names each row's), counted per pattern, with the totals. ``timeouts``: the output may hold
    timed-out partial matches (their count is then given, 0 included, even with no output)."""

    def __init__(self, key: str | None, top: int = 10, time: str | None = None, named: bool = False,
                 timeouts: bool = False):
        self.key, self.top, self.time = key, top, time
        self._one = _One(key, time)
        self._one.has_timeouts = timeouts
        self._per: dict[str, _One] = {}
        self._named, self._timeouts = named, timeouts

    def add(self, t: "pa.Table | pa.RecordBatch") -> "Summary":
        t = t if isinstance(t, pa.Table) else pa.Table.from_batches([t])
        if not self._named:
            self._one.add(t)
            return self
        names = t.column(PATTERN_COL)
        # each pattern's rows come in runs (colcep writes a batch's output pattern by pattern):
        # each run is a slice of the table, nothing copied
        cuts = np.r_[np.flatnonzero(_changes([names], None)), t.num_rows]
        rest = t.drop_columns([PATTERN_COL])
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            name = names[a].as_py()
            one = self._per.get(name)
            if one is None:
                one = self._per[name] = _One(self.key, self.time)
                one.has_timeouts = self._timeouts
            one.add(rest.slice(a, b - a))
        return self

    def result(self) -> dict[str, Any]:
        if not self._named:
            return self._one.result(self.top)
        per = {n: self._per[n] for n in sorted(self._per, key=str)}
        out: dict[str, Any] = {"matches": sum(p.matches for p in per.values()),
                               "matched_events": sum(p.events for p in per.values())}
        if self._timeouts or any(p.has_timeouts for p in per.values()):
            out["timed_out"] = sum(p.timed_out for p in per.values())
        out["events_per_stage"], out["matches_per_stage"] = {}, {}  # stage names are each pattern's own
        per_key = sum((p.per_key for p in per.values()), Counter())
        if per_key:
            out.update(_top_keys(per_key, self.top))
        spans = [p.span for p in per.values() if p.span is not None]
        if spans:
            out["time_span"] = [min(a for a, _ in spans), max(b for _, b in spans)]
        out["patterns"] = {n: {k: v for k, v in p.result(self.top).items()
                               if k in ("matches", "matched_events", "timed_out")} for n, p in per.items()}
        return out


def summarize(matches: pa.Table, key: str | None, top: int = 10, time: str | None = None,
              named: bool = False) -> dict[str, Any]:
    """The :class:`Summary` of a whole match table (each match's rows together, as colcep
    writes them); ``named``: the output of several patterns."""
    return Summary(key, top, time, named, "timed_out" in matches.column_names).add(matches).result()


def unique_match_ids(matches: pa.Table) -> pa.Table:
    """``matches`` with one id per match also across patterns (each pattern numbers its own
    from 0): with a ``pattern`` column, ``match_id`` is made of the pattern's place and its own
    id, for showing and drawing. Without one, the table as it is."""
    if PATTERN_COL not in matches.column_names or matches.num_rows == 0:
        return matches
    codes = dictionary_encoded(matches.column(PATTERN_COL)).indices
    ids = matches.column("match_id").to_numpy()
    uid = codes.to_numpy(zero_copy_only=False).astype(np.int64) * (int(ids.max()) + 1) + ids
    return matches.set_column(matches.schema.get_field_index("match_id"), "match_id", pa.array(uid))


def format_matches(matches: pa.Table, key: str | None, limit: int = 5) -> str:
    """The first ``limit`` matches, one line each: key, then per stage its rows and values."""
    if matches.num_rows == 0:
        return "(no matches)"
    matches = unique_match_ids(matches)
    ids = matches.column("match_id").to_numpy()
    first_ids = list(dict.fromkeys(ids[: max(1, limit) * 64].tolist()))[:limit]
    sub = matches.filter(pc.is_in(matches.column("match_id"), pa.array(first_ids, pa.int64()))).to_pylist()
    skip = {"match_id", "stage", "row", "timed_out", "timeout_ts", key}
    lines = []
    for mid in first_ids:
        evs = [r for r in sub if r["match_id"] == mid]
        head = f"{evs[0][key]}: " if key is not None else ""
        parts = []
        for r in evs:
            vals = " ".join(f"{c}={_fmt(v)}" for c, v in r.items() if c not in skip)
            parts.append(f"{r['stage']}[row {r['row']}{' ' + vals if vals else ''}]")
        lines.append(f"  match {mid}: {head}" + " ".join(parts))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
