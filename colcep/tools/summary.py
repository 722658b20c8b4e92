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



def _codes(col: "pa.ChunkedArray | pa.Array") -> tuple[np.ndarray, list]:
    """A column's index per row into its distinct values, and those values (a dictionary
    column's own dictionary: nothing hashed)."""
    enc = dictionary_encoded(col)
    return enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist()


def _new_runs(values: np.ndarray, first: bool) -> np.ndarray:
    """Rows whose value differs from the row before (the first row: ``first``)."""
    new = np.empty(len(values), bool)
    new[0] = first
    np.not_equal(values[1:], values[:-1], out=new[1:])
    return new


def _value_counts(col: "pa.ChunkedArray | pa.Array") -> tuple[pa.Array, np.ndarray]:
    """The distinct values of a column and their rows (a dictionary column counted on its
    indices)."""
    if pa.types.is_dictionary(col.type):
        enc = dictionary_encoded(col)
        counts = np.bincount(enc.indices.to_numpy(zero_copy_only=False), minlength=len(enc.dictionary))
        seen = np.flatnonzero(counts)
        return enc.dictionary.take(pa.array(seen)), counts[seen]
    vc = pc.value_counts(col if isinstance(col, pa.Array) else col.combine_chunks())
    return vc.field("values"), vc.field("counts").to_numpy()


class _KeyCounts:
    """Rows per key value, summed over batches with little Python: each batch's counts are
    kept as arrays, and summed by Arrow whenever they reach ``_MERGE_ROWS`` rows."""

    _MERGE_ROWS = 1 << 20

    def __init__(self) -> None:
        self._parts: list[tuple[pa.Array, np.ndarray]] = []
        self._rows = 0

    def add(self, values: pa.Array, counts: np.ndarray) -> None:
        if len(values):
            self._parts.append((values, counts))
            self._rows += len(values)
            if self._rows >= self._MERGE_ROWS:
                self._merge()

    def _merge(self) -> None:
        if len(self._parts) > 1:
            t = pa.table({"v": pa.concat_arrays([v for v, _ in self._parts]),
                          "n": np.concatenate([c for _, c in self._parts])})
            t = t.group_by("v", use_threads=False).aggregate([("n", "sum")])
            self._parts = [(t.column("v").combine_chunks(), t.column("n_sum").to_numpy())]
            self._rows = len(self._parts[0][0])

    def counter(self) -> Counter:
        self._merge()
        return Counter(dict(zip(self._parts[0][0].to_pylist(), self._parts[0][1].tolist()))) if self._parts \
            else Counter()


def time_numbers(col: "pa.ChunkedArray | pa.Array") -> np.ndarray:
    """A time column as numbers: int64 (timestamps in their unit), or float64."""
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    return np.asarray(col.to_numpy(), dtype=np.float64 if pa.types.is_floating(col.type) else np.int64)


class TimeHistogram:
    """Counts of integer times (a timestamp's in its unit, a float's floor) in ``BINS`` equal
    bins, exact, in constant memory whatever the number of times: the bins' width is the smallest
    power of two whose bins, aligned to it, cover every time added (widened as times come), so
    the counts depend on the times alone, not on how they were split. ``type``: their Arrow type."""

    BINS = 1 << 12

    def __init__(self) -> None:
        self.counts = np.zeros(self.BINS, np.int64)
        self.width, self.origin = 1, 0  # bin i: [origin + i * width, origin + (i + 1) * width)
        self.lo: int | None = None  # the least and greatest time added
        self.hi: int | None = None
        self.type: pa.DataType | None = None

    def add(self, t: np.ndarray) -> None:
        if not len(t):
            return
        if t.dtype.kind == "f":
            t = np.floor(t)
        lo, hi = int(t.min()), int(t.max())
        self._cover(lo if self.lo is None else min(lo, self.lo), hi if self.hi is None else max(hi, self.hi))
        # (unsigned differences: no overflow between int64's extremes)
        off = (t.astype(np.int64, copy=False).view(np.uint64) - np.uint64(self.origin & 0xFFFFFFFFFFFFFFFF)) \
            // np.uint64(self.width)
        self.counts += np.bincount(off.astype(np.intp), minlength=self.BINS)

    def _cover(self, lo: int, hi: int) -> None:
        width = self.width
        while hi - (lo // width) * width >= self.BINS * width:
            width *= 2
        origin = (lo // width) * width
        if (width, origin) != (self.width, self.origin) and self.lo is not None:
            old, step, shift = self.counts, width // self.width, (self.origin - origin) // self.width
            self.counts = np.zeros(self.BINS, np.int64)
            for i in np.flatnonzero(old).tolist():  # (each old bin lies in one new bin: both aligned)
                self.counts[(shift + i) // step] += old[i]
        self.width, self.origin, self.lo, self.hi = width, origin, lo, hi

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def bars(self, bins: int) -> tuple[np.ndarray, np.ndarray]:
        """``bins`` equal bars from the least time on (each a whole number of bins): their
        counts and ``bins + 1`` edges (float64, in the times' unit)."""
        if self.lo is None:
            return np.zeros(bins, np.int64), np.arange(bins + 1, dtype=np.float64)
        first, last = (self.lo - self.origin) // self.width, (self.hi - self.origin) // self.width
        group = -(-(last - first + 1) // bins)
        counts = np.zeros(bins * group, np.int64)
        counts[:last - first + 1] = self.counts[first:last + 1]
        start = float(self.origin + first * self.width)
        return counts.reshape(bins, group).sum(axis=1), start + np.arange(bins + 1) * float(group * self.width)


class _One:
    """The counts of one pattern's output."""

    def __init__(self, key: str | None, time: str | None, starts: TimeHistogram | None = None):
        self.key, self.time = key, time
        self.matches = self.events = self.timed_out = 0
        self.has_timeouts = False
        self.stage_events: Counter = Counter()
        self.stage_matches: Counter = Counter()
        self.per_key = _KeyCounts()
        self.span: list | None = None
        self._prev_match: int | None = None  # the last row's match id, and its stage
        self._prev_stage: tuple | None = None
        self.starts = starts
        self._carry: Any = None  # the earliest time so far of the last row's match (its rows may go on)

    def add(self, t: pa.Table) -> None:
        self.has_timeouts = self.has_timeouts or "timed_out" in t.column_names
        if t.num_rows == 0:
            return
        ids = t.column("match_id").to_numpy()
        starts = _new_runs(ids, int(ids[0]) != self._prev_match)
        self._prev_match = int(ids[-1])
        stage: Any = None
        if "stage" in t.column_names:
            stage, names = _codes(t.column("stage"))
            stage_starts = starts | _new_runs(stage, (int(ids[0]), names[stage[0]]) != self._prev_stage)
            self._prev_stage = (self._prev_match, names[stage[-1]])
        done = np.ones(t.num_rows, bool)
        if "timed_out" in t.column_names:
            done = ~t.column("timed_out").to_numpy(zero_copy_only=False).astype(bool)
            self.timed_out += int(np.count_nonzero(starts & ~done))
        self.matches += int(np.count_nonzero(starts & done))
        self.events += int(np.count_nonzero(done))
        if not done.any():
            return
        every = bool(done.all())  # (no timed-out rows: nothing to leave out)
        for counter, rows in (() if stage is None else ((self.stage_events, stage if every else stage[done]),
                                                        (self.stage_matches, stage[stage_starts & done]))):
            counts = np.bincount(rows, minlength=len(names))
            counter.update({names[i]: int(counts[i]) for i in np.flatnonzero(counts)})
        if self.key is not None and self.key in t.column_names:
            self.per_key.add(*_value_counts(t.column(self.key).filter(pa.array(starts & done))))
        if self.time is not None and self.time in t.column_names:
            col = t.column(self.time)
            mm = pc.min_max(col if every else col.filter(pa.array(done)))
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            self.span = [lo, hi] if self.span is None else [min(self.span[0], lo), max(self.span[1], hi)]
            if self.starts is not None:
                self._start_times(col, starts, done, every)

    def _start_times(self, col: "pa.ChunkedArray | pa.Array", starts: np.ndarray, done: np.ndarray,
                     every: bool) -> None:
        """Each completed match's earliest time into ``self.starts`` (the first row is not always
        it: rows go by stage, and a loop of alternatives takes them in any order), a match's rows
        in any number of calls."""
        self.starts.type = col.type
        t = time_numbers(col)
        t, heads = (t, np.flatnonzero(starts)) if every else (t[done], np.flatnonzero(starts[done]))
        lead = heads[0] if heads.size else len(t)  # rows that go on with the last call's last match
        if lead:
            m = t[:lead].min()
            self._carry = m if self._carry is None else min(self._carry, m)
        if heads.size:
            mins = np.minimum.reduceat(t, heads)
            self.flush()
            self.starts.add(mins[:-1])
            self._carry = mins[-1]

    def flush(self) -> None:
        """The last match's first time counted (its rows are all in)."""
        if self._carry is not None:
            self.starts.add(np.array([self._carry]))
            self._carry = None

    def result(self, top: int) -> dict[str, Any]:
        out: dict[str, Any] = {"matches": self.matches, "matched_events": self.events}
        if self.has_timeouts:
            out["timed_out"] = self.timed_out
        out["events_per_stage"] = dict(self.stage_events)
        out["matches_per_stage"] = dict(self.stage_matches)
        per_key = self.per_key.counter()
        if per_key:
            out.update(_top_keys(per_key, top))
        if self.span is not None:
            out["time_span"] = list(self.span)
        return out


def _top_keys(per_key: Counter, top: int) -> dict[str, Any]:
    ranked = sorted(per_key.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"keys_with_matches": len(ranked), "top_keys": {str(k): int(v) for k, v in ranked[:top]}}


class Summary:
    """Counts of a match output, fed table by table (:meth:`add`) in the order it was written:
    matches, matched events, events and matches per stage, matches per key (the ``top`` keys),
    the time span of the matched events (when ``time`` is a column), timed-out partial matches
    when the output has them; ``named``: the output of several patterns (its ``pattern`` column
    names each row's), counted per pattern, with the totals. ``timeouts``: the output may hold
    timed-out partial matches (their count is then given, 0 included, even with no output).
    ``starts``: also count each completed match's first time in a :class:`TimeHistogram`, for a
    picture of the matches over time (:meth:`start_times`)."""

    def __init__(self, key: str | None, top: int = 10, time: str | None = None, named: bool = False,
                 timeouts: bool = False, starts: bool = False):
        self.key, self.top, self.time = key, top, time
        self._starts = TimeHistogram() if starts and time is not None else None
        self._one = _One(key, time, self._starts)
        self._one.has_timeouts = timeouts
        self._per: dict[str, _One] = {}
        self._named, self._timeouts = named, timeouts

    def add(self, t: "pa.Table | pa.RecordBatch") -> "Summary":
        t = t if isinstance(t, pa.Table) else pa.Table.from_batches([t])
        if not self._named:
            self._one.add(t)
            return self
        if t.num_rows == 0:
            return self
        codes, names = _codes(t.column(PATTERN_COL))
        # each pattern's rows come in runs (colcep writes a batch's output pattern by pattern):
        # each run is a slice of the table, nothing copied
        cuts = np.r_[np.flatnonzero(_new_runs(codes, True)), t.num_rows]
        rest = t.drop_columns([PATTERN_COL])
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            name = names[codes[a]]
            one = self._per.get(name)
            if one is None:
                one = self._per[name] = _One(self.key, self.time, self._starts)
                one.has_timeouts = self._timeouts
            one.add(rest.slice(a, b - a))
        return self

    def per_key(self) -> Counter:
        """Completed matches per key value (all patterns together)."""
        return sum((p.per_key.counter() for p in self._ones()), Counter())

    def start_times(self) -> TimeHistogram | None:
        """The completed matches' first times, counted (made with ``starts=True``; else None)."""
        if self._starts is None:
            return None
        for p in self._ones():
            p.flush()
        return self._starts

    def _ones(self) -> list[_One]:
        return list(self._per.values()) if self._named else [self._one]

    def result(self) -> dict[str, Any]:
        if not self._named:
            return self._one.result(self.top)
        per = {n: self._per[n] for n in sorted(self._per, key=str)}
        out: dict[str, Any] = {"matches": sum(p.matches for p in per.values()),
                               "matched_events": sum(p.events for p in per.values())}
        if self._timeouts or any(p.has_timeouts for p in per.values()):
            out["timed_out"] = sum(p.timed_out for p in per.values())
        out["events_per_stage"], out["matches_per_stage"] = {}, {}  # stage names are each pattern's own
        per_key = self.per_key()
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
