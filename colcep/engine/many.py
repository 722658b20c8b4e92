"""Several patterns over one stream in one pass: :class:`ManyMatcher` and :func:`match_many`.

Each pattern keeps its own Matcher, so each keeps exactly its own semantics and output (its
match ids, its skip strategy, its timeouts); what the patterns share is done once per batch
(:func:`process_all`, :mod:`colcep.engine.feed`): reading and ordering the input, the key codes
(one ``KeyCodes`` for all), the layout of the rows for the kernel calls and the columns the
conditions read, gathered into it; with threads, each thread steps its keys for every pattern.
The output is every pattern's, one after the other per batch, with the pattern's name in a
first column ``pattern``.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from colcep.engine.feed import feed
from colcep.engine.inputs import as_table
from colcep.engine.keys import dictionary_encoded, key_names, normalize_key
from colcep.engine.matcher import (DEFAULT_MAX_PARTIAL_MATCHES, DEFAULT_MAX_STATE_BYTES, NAMES_TYPE, Matcher, match_all,
                                   scan_input)
from colcep.engine.tiers import DEFAULT_TIER
from colcep.errors import InputError
from colcep.kernels.codes import TIME_MAX
from colcep.pattern import with_key
from colcep.engine.progress import scan_progress, scanning

#: The output column naming the pattern a row matched.
PATTERN_COL = "pattern"


def _common_key(patterns: Mapping[str, Any], key: Any) -> Any:
    """The key of every pattern: ``key``, or the one their queries bring (all the same)."""
    keys = {name: with_key(p, key)[1] for name, p in patterns.items()}
    distinct = {tuple(key_names(k)) for k in keys.values()}
    if len(distinct) > 1:
        shown = ", ".join(f"{n!r}: {k!r}" for n, k in keys.items())
        raise InputError(f"the patterns are keyed differently ({shown}); match_many matches one stream "
                         "partitioned one way: give the same key to all")
    return next(iter(keys.values()))


class ManyMatcher:
    """One :class:`~colcep.Matcher` per named pattern, fed the same batches.

    ``patterns``: name -> Pattern (or a front-end query with its key, or a compiled pattern);
    names are strings. The other arguments are :class:`~colcep.Matcher`'s, the same for every
    pattern. ``process`` and ``close`` return every pattern's output with its name in the column
    ``pattern`` (dictionary-encoded over all the names, as ``stage`` is over the stage names). A
    call that raises leaves every pattern's state as it was before it.
    Snapshots are per pattern: ``matchers[name].snapshot()`` (and ``Matcher.restore``).
    """

    def __init__(self, patterns: Mapping[str, Any], key: "str | Sequence[str] | None" = None, time: str = "ts",
                 columns: Sequence[str] | None = None, timeouts: bool = False, time_unit: str | None = None,
                 max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
                 max_state_bytes: int = DEFAULT_MAX_STATE_BYTES, out_of_orderness: Any = None,
                 threads: int | None = 1, tier: str = DEFAULT_TIER, schema: pa.Schema | None = None):
        if not isinstance(patterns, Mapping) or not patterns:
            raise InputError("match_many takes a non-empty mapping of pattern names to patterns, e.g. "
                             "{'spike': p1, 'breakout': p2}")
        bad = [n for n in patterns if not isinstance(n, str) or not n]
        if bad:
            raise InputError(f"pattern names must be non-empty strings, got {bad[0]!r}")
        if columns is not None and PATTERN_COL in columns:
            raise InputError(f"output column {PATTERN_COL!r} collides with match_many's column naming each row's "
                             "pattern; rename it in the input")
        self.key = normalize_key(_common_key(patterns, key), time)
        self.time = time
        self.matchers: dict[str, Matcher] = {
            name: Matcher(with_key(p, key)[0], key=self.key, time=time, columns=columns, timeouts=timeouts,
                          time_unit=time_unit, max_partial_matches=max_partial_matches,
                          max_state_bytes=max_state_bytes, out_of_orderness=out_of_orderness, threads=threads,
                          tier=tier, schema=schema)
            for name, p in patterns.items()}
        lockstep(list(self.matchers.values()))
        self._encoded: dict[str, pa.DataType] = {}  # key columns this object encodes, and their type
        self._names = pa.array(list(self.matchers), pa.string())  # the pattern column's dictionary

    def process(self, batch: Any, watermark: Any = None) -> pa.Table:
        """Feed one batch to every pattern; returns what it completed, pattern by pattern."""
        tbl = as_table(batch)
        if next(iter(self.matchers.values())).out_of_orderness is not None:
            # each pattern codes the keys of the rows its watermark releases: hash the strings once
            for k in key_names(self.key):
                if k in tbl.column_names and not pa.types.is_dictionary(tbl.schema.field(k).type):
                    self._encoded.setdefault(k, tbl.schema.field(k).type)
            tbl = keys_encoded(tbl, key_names(self.key))
        if PATTERN_COL in tbl.column_names and any(m.columns is None for m in self.matchers.values()):
            raise InputError(f"the input has a column {PATTERN_COL!r}, which match_many's output uses for the "
                             "pattern's name; rename it or choose the output columns (columns=)")
        return self._named(process_all(list(self.matchers.values()), tbl, watermark))

    def close(self) -> pa.Table:
        """End of input for every pattern (see :meth:`colcep.Matcher.close`)."""
        return self._named(close_all(list(self.matchers.values())))

    def _named(self, outs: list[pa.Table]) -> pa.Table:
        return pa.concat_tables([with_pattern(i, self._decoded(out), self._names) for i, out in enumerate(outs)],
                                promote_options="permissive")

    def _decoded(self, out: pa.Table) -> pa.Table:
        """``out`` with the key as the input has it, not as encoded for the patterns."""
        for k in key_names(self.key):
            if k in out.column_names and pa.types.is_dictionary(out.schema.field(k).type) and k in self._encoded:
                f = out.schema.field(k)
                out = out.set_column(out.schema.get_field_index(k), f.with_type(self._encoded[k]),
                                     out.column(k).cast(self._encoded[k]))
        return out

    def pop_late(self) -> pa.Table | None:
        """The late rows received since the last call (event time; the same rows for every
        pattern, since they share the watermark), or None."""
        late = [m.pop_late() for m in self.matchers.values()][0]
        return None if late is None else self._decoded(late)

    @property
    def watermark(self) -> int | None:
        return next(iter(self.matchers.values())).watermark

    @property
    def live_partial_matches(self) -> int:
        return sum(m.live_partial_matches for m in self.matchers.values())

    @property
    def matches_emitted(self) -> int:
        """Matches emitted so far, all patterns together."""
        return sum(m.matches_emitted for m in self.matchers.values())

    @property
    def rows_received(self) -> int:
        return next(iter(self.matchers.values())).rows_received

    @property
    def state_bytes(self) -> int:
        """Bytes the patterns' states hold (each Matcher's ``state_bytes``), the input rows they
        keep for the output counted once: the patterns keep the same tables."""
        ms = list(self.matchers.values())
        kept = {id(t): t.nbytes for m in ms for _, t in m._state.retained}
        return sum(m.state_bytes - m._state.retained_bytes() for m in ms) + sum(kept.values())


def lockstep(ms: list[Matcher]) -> None:
    """Make new Matchers, to be fed the same batches by :func:`process_all`, share one
    ``KeyCodes`` (a batch's keys are coded once for all) and leave undo to it."""
    for m in ms:
        m._state.keys = ms[0]._state.keys
        m._guarded = False  # process_all rolls every pattern back when one fails


def process_all(ms: list[Matcher], tbl: pa.Table, watermark: Any = None) -> list[pa.Table]:
    """``[m.process(tbl, watermark) for m in ms]`` as one call (Matchers made ``lockstep``): if
    one raises, all are rolled back. In processing time the batch is stepped in one pass for all
    of them (``colcep.engine.feed``); in event time each takes the rows its watermark releases,
    in turn."""
    tbl = as_table(tbl)
    rows = {m.rows_received for m in ms}
    if len(rows) > 1:
        raise InputError(f"the patterns fed together have received different rows ({sorted(rows)}): one was fed "
                         "on its own; feed them only together (their key codes are shared)")

    def run() -> list[pa.Table]:
        if ms[0].out_of_orderness is None:
            for m in ms:
                m._check_process(watermark)
            return feed(ms, [m._normalized(tbl) for m in ms])
        return [m.process(tbl, watermark=watermark) for m in ms]
    return atomically(ms, run)


def close_all(ms: list[Matcher]) -> list[pa.Table]:
    """``[m.close() for m in ms]`` as one call (Matchers made ``lockstep``; see
    :func:`process_all`): in processing time the end of input is one pass for all of them."""
    def run() -> list[pa.Table]:
        if ms[0].out_of_orderness is None and all(m._bound is not None for m in ms):
            for m in ms:
                m._check_open()
            outs = feed(ms, [None] * len(ms), int(TIME_MAX))
            for m in ms:
                m._closed = True
            return outs
        return [m.close() for m in ms]
    return atomically(ms, run)


def atomically(ms: list[Matcher], run: Callable[[], list[pa.Table]]) -> list[pa.Table]:
    """``run()``, which changes the Matchers ``ms`` (made ``lockstep``), as one call: if it
    raises, every one of them is rolled back."""
    done: list[tuple[Matcher, tuple, bool]] = []
    try:
        for m in ms:
            done.append((m, m._begin(), m._closed))
        outs = run()
    except BaseException:
        for m, saved, closed in done:
            m._roll_back(saved)
            m._closed = closed
        raise
    for m in ms:
        m._state.commit()
    return outs


def with_pattern(i: int, out: pa.Table, names: pa.Array, dictionary: bool = True) -> pa.Table:
    """Pattern ``i``'s output table with its name (``names[i]``) in a first column ``pattern``:
    dictionary-encoded over ``names`` (type ``NAMES_TYPE``), or strings (not ``dictionary``)."""
    if not dictionary:
        return out.add_column(0, pa.field(PATTERN_COL, pa.string(), False), _repeated(names[i].as_py(), out.num_rows))
    idx = pa.array(np.full(out.num_rows, i, np.int32))
    return out.add_column(0, pa.field(PATTERN_COL, NAMES_TYPE, False), pa.DictionaryArray.from_arrays(idx, names))


def _repeated(s: str, n: int) -> pa.Array:
    """``s`` ``n`` times, its buffers written at once (2-4x ``pa.repeat``'s speed)."""
    b = s.encode()
    if not b or (n + 1) * len(b) > np.iinfo(np.int32).max:
        return pa.repeat(pa.scalar(s, pa.string()), n)
    offsets = np.arange(0, (n + 1) * len(b), len(b), dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b * n))


def keys_encoded(tbl: pa.Table, keys: list[str]) -> pa.Table:
    """``tbl`` with its string key columns dictionary-encoded, once for all patterns."""
    for k in keys:
        if k not in tbl.column_names:
            continue  # each Matcher says it is missing
        col = tbl.column(k)
        t = col.type
        if (pa.types.is_string(t) or pa.types.is_large_string(t)) and tbl.num_rows:
            tbl = tbl.set_column(tbl.schema.get_field_index(k), k, dictionary_encoded(col))
    return tbl


def match_many(data: Any, patterns: Mapping[str, Any], key: "str | Sequence[str] | None" = None, time: str = "ts",
               columns: Sequence[str] | None = None, timeouts: bool = False, time_unit: str | None = None,
               max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
               max_state_bytes: int = DEFAULT_MAX_STATE_BYTES, threads: int | None = None,
               tier: str = DEFAULT_TIER, progress: bool | None = None) -> pa.Table:
    """:func:`colcep.match` for several patterns in one pass over ``data``: the output is each
    pattern's own (as ``colcep.match(data, patterns[name], ...)`` gives it: match ids, rows,
    columns) with the pattern's name in a first column ``pattern``. ``patterns``: a mapping of
    names to patterns. A table is put in time order per key once for all of them."""
    data, is_table, threads, total = scan_input(data, threads)  # the same rules as match()
    mm = ManyMatcher(patterns, key=key, time=time, columns=columns, timeouts=timeouts, time_unit=time_unit,
                     max_partial_matches=max_partial_matches, max_state_bytes=max_state_bytes, threads=threads,
                     tier=tier)
    meter = scan_progress(progress, "colcep.match_many", total)
    if meter is not None:  # rows done: the mean over the patterns (each steps the whole batch in turn)
        done = dict.fromkeys(mm.matchers, 0)
        for name, m in mm.matchers.items():
            m.on_progress = lambda rows, _n, me=name: (done.__setitem__(me, rows), meter.update(
                sum(done.values()) // len(done), mm.matches_emitted))
    with scanning(meter, lambda: (mm.rows_received, mm.matches_emitted)):
        return match_all(mm, data, is_table, time, mm.key, meter)
