"""The Arrow driver: batches in, matches out.

    m = Matcher(pattern, key="symbol", time="ts")
    for batch in reader:
        out = m.process(batch)      # matches completed so far (pyarrow.Table)
    out = m.close()                 # end of input: what the final watermark releases

Per batch the driver validates the key and time columns, groups the rows by key (stable,
so ties in time keep arrival order), evaluates event-only conditions column-at-a-time into
masks, and makes one kernel call (``colcep.kernels.nfa.run_batch``) for all keys. A key's
partial matches are carried to the next batch; batches are kept only while a live partial
match still refers to their rows.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import conditions as cond
from .compiler import NFAProgram, compile_pattern
from .errors import CapacityError, InputError, PatternError
from .keys import KeyCodes
from .kernels import arrays as karr
from .kernels import buffer as kbuf
from .kernels import nfa as knfa
from .pattern import Pattern, parse_duration

_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
DEFAULT_MAX_PARTIAL_MATCHES = 1_000_000
CHUNK_ROWS = 1 << 14  # rows per kernel call: what one call reads stays in the cache ...
CHUNK_ROWS_PER_KEY = 64  # ... but at least this many per key, or per-key work dominates
OUT_KEEP_EVENTS = 1 << 20  # the kernel's output arrays are kept for the next batch up to this size


def _new_out() -> tuple:
    """The kernel's output arrays (matches, their event offsets, events), reused from batch to
    batch while they stay small."""
    return (np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64, np.int32), np.empty(64, np.int64),
            np.zeros(65, np.int64), np.empty(256, np.int64), np.empty(256, np.int32))


def as_table(data: Any) -> pa.Table:
    """A pyarrow Table from a Table, RecordBatch, pandas or polars DataFrame."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "to_arrow"):  # polars
        return data.to_arrow()
    mod = type(data).__module__
    if mod.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise InputError(f"expected a pyarrow Table / RecordBatch or a pandas / polars DataFrame, got {type(data).__name__}")


def _column_kind(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t) or (
            pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type))):
        return cond.STR
    if pa.types.is_boolean(t):
        return cond.BOOL
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t) or pa.types.is_decimal(t):
        return cond.NUM
    return "unsupported"


class Matcher:
    """Finds ``pattern`` in a stream of Arrow batches, per key, in time order.

    Parameters
    ----------
    pattern: the Pattern to match.
    key: column partitioning the stream (Flink's ``keyBy``); None for one stream.
    time: the event-time column: integer or Arrow timestamp; rows must be in time order per key.
    columns: input columns copied into the output (None: all; []: none, compact output).
    timeouts: also emit timed-out partial matches (flagged ``timed_out``).
    time_unit: unit of an integer time column ("s", "ms", "us", "ns"), used to read string /
        timedelta windows; an integer window is always in the column's own unit.
    max_partial_matches: bound on live partial matches per key; exceeding it raises
        CapacityError naming the key (no partial match is ever dropped silently).
    """

    def __init__(self, pattern: Pattern, key: str | None = None, time: str = "ts",
                 columns: Sequence[str] | None = None, timeouts: bool = False, time_unit: str = "ms",
                 max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES):
        if not isinstance(pattern, Pattern):
            raise PatternError(f"Matcher needs a colcep Pattern, got {type(pattern).__name__}")
        if time_unit not in _UNIT_SECONDS:
            raise InputError(f"time_unit must be one of {sorted(_UNIT_SECONDS)}, got {time_unit!r}")
        self.program: NFAProgram = compile_pattern(pattern)
        self.key = key
        self.time = time
        self.columns = None if columns is None else list(columns)
        self.timeouts = bool(timeouts)
        self.time_unit = time_unit
        self.max_partial_matches = int(max_partial_matches)
        self._strings: dict = {}
        self._lowered: cond.Lowered | None = None
        self._schema: pa.Schema | None = None
        self._window = 0
        self._keys = KeyCodes(key)
        self._key_last_ts = np.zeros(0, np.int64)
        self._start_dead = np.zeros(0, np.uint8)
        self._rows_seen = 0
        self._matches_out = 0
        self._retained: list[tuple[int, pa.Table]] = []
        self._closed = False
        v = 1
        self._runs = (np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64),
                      np.zeros(0, np.int64), np.zeros((0, v), np.float64))
        self._held = (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                      np.zeros(0, np.int64))
        self._buf = kbuf.new_buffer()
        self._out = _new_out()

    # ------------------------------------------------------------------ public API
    def process(self, batch: Any) -> pa.Table:
        """Feed one batch (Table, RecordBatch, pandas / polars DataFrame); returns the matches
        (and timed-out partial matches, if asked) that this batch completed."""
        if self._closed:
            raise InputError("this Matcher is closed; create a new one for a new stream")
        return self._run(as_table(batch), flush=False)

    def close(self) -> pa.Table:
        """End of input: time advances to +infinity, as a bounded Flink job's final watermark,
        which times out open partial matches and releases matches held by ``within``."""
        if self._closed:
            raise InputError("close() was already called")
        out = self._run(None, flush=True)
        self._closed = True
        return out

    @property
    def live_partial_matches(self) -> int:
        """Partial matches currently alive, over all keys."""
        return int(self._runs[1].shape[0])

    @property
    def buffer_nodes(self) -> int:
        """Events currently held in the shared buffer (nodes)."""
        n_row, _, _, n_ref, meta = self._buf
        return int(kbuf.live_nodes(n_ref, meta[0]))

    # ------------------------------------------------------------------ binding
    def _bind(self, schema: pa.Schema) -> None:
        """Check columns and types against the first batch's schema and lower the conditions."""
        names = schema.names
        if self.key is not None and self.key not in names:
            raise InputError(f"key column {self.key!r} is missing; the input has {names}")
        if self.time not in names:
            raise InputError(f"time column {self.time!r} is missing; the input has {names}")
        tt = schema.field(self.time).type
        if not (pa.types.is_integer(tt) or pa.types.is_timestamp(tt)):
            raise InputError(f"time column {self.time!r} must be an integer or timestamp column, not {tt}")
        if self.key is not None:
            kt = schema.field(self.key).type
            if _column_kind(kt) not in (cond.STR, cond.NUM, cond.BOOL) or pa.types.is_floating(kt):
                raise InputError(f"key column {self.key!r} must be a string, integer or boolean column, not {kt}")
        if self.columns is not None:
            missing = [c for c in self.columns if c not in names]
            if missing:
                raise InputError(f"output columns {missing} are missing; the input has {names}")
        kinds = {f.name: _column_kind(f.type) for f in schema}
        for st_name, e in self._stage_conditions():
            cols = e.columns()
            for c in cols:
                if c in kinds and kinds[c] == "unsupported":
                    raise InputError(f"stage {st_name!r}: column {c!r} has type {schema.field(c).type}, which "
                                     "conditions cannot read (use numbers, strings, booleans or timestamps)")
            t = cond.infer_type(e, {k: v for k, v in kinds.items() if v != "unsupported"}, f"stage {st_name!r}")
            if t != cond.BOOL:
                raise PatternError(f"stage {st_name!r}: a condition must be boolean, got a {t} expression {e!r}")
        self._lowered = cond.lower(self.program.conditions, self.program.stage_names, self._strings)
        self._merge = cond.merge_tables(self.program, self._lowered)
        self._schema = schema
        self._kinds = kinds
        self._window = self._window_units(tt)
        v = max(1, self._lowered.v_width)
        r = self._runs
        self._runs = r[:5] + (np.zeros((0, v), np.float64),)

    def _stage_conditions(self):
        def walk(p: Pattern):
            for st in p.stages:
                if st.group is not None:
                    yield from walk(st.group)
                for e in (st.condition, st.until):
                    if e is not None:
                        yield st.name, e
        yield from walk(self.program.pattern)

    def _window_units(self, tt: pa.DataType) -> int:
        w = self.program.pattern.window
        if w is None:
            return 0
        secs = parse_duration(w)
        if isinstance(secs, int):
            return secs
        unit = tt.unit if pa.types.is_timestamp(tt) else self.time_unit
        units = secs / _UNIT_SECONDS[unit]
        out = int(round(units))
        if out <= 0 or abs(units - out) > 1e-6 * max(1.0, units):
            raise PatternError(f"window {w!r} is not a whole number of the time column's unit ({unit})")
        return out

    # ------------------------------------------------------------------ per batch
    def _times(self, tbl: pa.Table) -> np.ndarray:
        col = tbl.column(self.time)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"time column {self.time!r} has a null at row {self._rows_seen + row}")
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        return np.asarray(col.to_numpy(), dtype=np.int64)

    def _env(self, tbl: pa.Table, needed: set[str]) -> dict[str, np.ndarray]:
        env = {}
        for name in needed:
            col = tbl.column(name)
            kind = self._kinds[name]
            if kind == cond.STR:
                env[name] = self._string_codes(col)
            else:
                if pa.types.is_timestamp(col.type):
                    col = col.cast(pa.int64())
                arr = col.to_numpy() if col.num_chunks == 1 and col.null_count == 0 else \
                    col.to_numpy(zero_copy_only=False)
                env[name] = np.asarray(arr, dtype=np.float64)
        return env

    def _string_codes(self, col: pa.ChunkedArray) -> np.ndarray:
        enc = col.combine_chunks()
        if not pa.types.is_dictionary(enc.type):
            enc = pc.dictionary_encode(enc)
        dict_vals = enc.dictionary.to_pylist()
        mapping = np.array([float(self._strings.setdefault(v, len(self._strings))) if v is not None else np.nan
                            for v in dict_vals] + [np.nan], np.float64)
        idx = enc.indices.fill_null(len(dict_vals)).to_numpy(zero_copy_only=False)
        return mapping[idx]

    def _run(self, tbl: pa.Table | None, flush: bool) -> pa.Table:
        if tbl is None:
            if self._lowered is None:  # closed before any data
                return self._empty_output()
            n = 0
            codes = np.zeros(0, np.int64)
            ts = np.zeros(0, np.int64)
        else:
            if self._lowered is None:
                self._bind(tbl.schema)
            elif tbl.schema != self._schema:
                self._check_schema(tbl.schema)
            n = tbl.num_rows
            codes = self._keys.encode(tbl, self._rows_seen)
            ts = self._times(tbl)
        lw = self._lowered
        n_keys = self._keys.n
        if self._key_last_ts.shape[0] < n_keys:
            self._key_last_ts = np.concatenate(
                [self._key_last_ts, np.full(n_keys - self._key_last_ts.shape[0], np.iinfo(np.int64).min)])
        if self._start_dead.shape[0] < n_keys:
            self._start_dead = np.concatenate([self._start_dead, np.zeros(n_keys - self._start_dead.shape[0], np.uint8)])
        bad = karr.first_out_of_order(codes, ts, self._key_last_ts)
        if bad >= 0:
            k = self._keys.values[codes[bad]]
            raise InputError(
                f"time column {self.time!r} is not in order for key {k!r}: row {self._rows_seen + int(bad)} "
                f"has time {int(ts[bad])}, earlier than the previous event of that key; sort the input by time "
                "(colcep.match() sorts for you)")
        needed = set()
        for e in lw.mask_exprs + lw.col_exprs:
            needed |= e.columns()
        env = self._env(tbl, needed) if n else {c: np.zeros(0) for c in needed}
        masks = np.zeros((max(1, len(lw.mask_exprs)), n), np.uint8)
        for i, e in enumerate(lw.mask_exprs):
            masks[i] = cond.evaluate(e, env, n, self._strings)
        cols = np.zeros((max(1, len(lw.col_exprs)), n), np.float64)
        for i, e in enumerate(lw.col_exprs):
            cols[i] = cond.evaluate(e, env, n, self._strings)
        start_mask = self._start_mask(masks, n)
        # The kernel reads each key's rows through the key order; in chunks of CHUNK_ROWS rows
        # (in arrival order) those reads stay in the cache. Every call appends to the same
        # (pooled) output arrays.
        nm = ne = 0
        chunk = max(CHUNK_ROWS, CHUNK_ROWS_PER_KEY * n_keys)
        for lo in range(0, max(n, 1), chunk):
            hi = min(n, lo + chunk)
            last = hi == n
            nm, ne = self._kernel(codes[lo:hi], n_keys, self._rows_seen + lo, ts[lo:hi], masks[:, lo:hi],
                                  cols[:, lo:hi], start_mask[lo:hi], flush and last, nm, ne)
        if tbl is not None and self.columns != []:
            self._retained.append((self._rows_seen, tbl))
        self._rows_seen += n
        m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage = self._out
        out = self._output(m_key[:nm], m_row[:nm], m_flag[:nm], m_tts[:nm], m_off[:nm + 1], e_row[:ne],
                           e_stage[:ne], self._rows_seen - n, self._rows_seen)
        if e_row.shape[0] > OUT_KEEP_EVENTS:
            self._out = _new_out()
        self._trim_retained()
        return out

    def _kernel(self, codes, n_keys, row0, ts, masks, cols, start_mask, flush, nm, ne):
        """One kernel call over rows in arrival order, appending its matches to ``self._out``
        after ``nm`` matches of ``ne`` events; returns the new counts."""
        order, key_ptr = karr.group_by_key(codes, n_keys)
        lw, p = self._lowered, self.program
        skip = p.pattern.skip_strategy
        skip_stage = p.stage_names.index(skip.stage) if skip.stage is not None else -1
        res = knfa.run_batch(
            p.state_kind, p.state_stage, p.start_state, p.trans_ptr, p.trans_action, p.trans_target, p.trans_cond,
            lw.cond_kind, lw.cond_a, lw.cond_b, lw.code, lw.consts, lw.vg_stage, lw.vg_col, lw.cond_thr, *self._merge,
            self._window, skip.code, skip_stage, self.timeouts, self.max_partial_matches, flush,
            n_keys, key_ptr, order, row0, ts, masks, cols, start_mask,
            *self._runs, *self._held, self._start_dead, *self._buf[:4], self._buf[4], *self._out, nm, ne)
        (r_ptr, r_state, r_node, r_sts, r_spos, r_v, h_ptr, h_sts, h_spos, h_epos, h_node,
         n_row, n_stage, n_parent, n_ref, m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne, status) = res
        self._buf = (n_row, n_stage, n_parent, n_ref, self._buf[4])
        self._out = (m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage)
        if status[0] == knfa.ERR_CAPACITY:
            raise CapacityError(
                f"key {self._keys.values[int(status[1])]!r} holds {int(status[2])} live partial matches, over the "
                f"bound max_partial_matches={self.max_partial_matches}; tighten the pattern (within(), a more "
                "selective condition, a skip strategy) or raise the bound")
        self._runs = (r_ptr, r_state, r_node, r_sts, r_spos, r_v)
        self._held = (h_ptr, h_sts, h_spos, h_epos, h_node)
        return nm, ne

    def _check_schema(self, schema: pa.Schema) -> None:
        for name in {self.time, self.key} - {None}:
            if name not in schema.names:
                raise InputError(f"column {name!r} is missing from this batch; the input has {schema.names}")
        for f in self._schema:
            if f.name not in schema.names:
                raise InputError(f"column {f.name!r} is missing from this batch (it was in the first one)")
            if _column_kind(schema.field(f.name).type) != self._kinds[f.name]:
                raise InputError(f"column {f.name!r} changed type from {f.type} to {schema.field(f.name).type}")

    def _start_mask(self, masks: np.ndarray, n: int) -> np.ndarray:
        """Rows at which the start run could take an event (a key with no live run skips the rest)."""
        p, lw = self.program, self._lowered
        seen, stack, conds = set(), [p.start_state], []
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            for t in range(p.trans_ptr[s], p.trans_ptr[s + 1]):
                if p.trans_action[t] == knfa.PROCEED:
                    stack.append(int(p.trans_target[t]))
                elif p.trans_action[t] == knfa.TAKE:
                    conds.append(int(p.trans_cond[t]))
        out = np.zeros(n, np.uint8)
        for c in conds:
            neg = False
            while c >= 0 and lw.cond_kind[c] == knfa.COND_NOT:
                c, neg = int(lw.cond_a[c]), not neg
            if c < 0 or lw.cond_kind[c] != knfa.COND_MASK:
                return np.ones(n, np.uint8)
            out |= masks[lw.cond_a[c]] ^ neg
        return out

    # ------------------------------------------------------------------ output
    def _empty_output(self) -> pa.Table:
        return self._output(*(np.zeros(0, np.int64) for _ in range(4)), np.zeros(1, np.int64),
                            np.zeros(0, np.int64), np.zeros(0, np.int32))

    def output_schema(self, schema: pa.Schema | None = None) -> pa.Schema:
        """The schema of the tables ``process`` returns, given the input schema."""
        schema = schema or self._schema
        fields = [pa.field("match_id", pa.int64(), False)]
        if self.key is not None and schema is not None:
            fields.append(pa.field(self.key, schema.field(self.key).type))
        fields += [pa.field("stage", pa.string(), False), pa.field("row", pa.int64(), False)]
        if self.timeouts:
            fields += [pa.field("timed_out", pa.bool_(), False), pa.field("timeout_ts", pa.int64())]
        if schema is not None:
            for c in self._output_columns(schema):
                fields.append(schema.field(c))
        return pa.schema(fields)

    def _output_columns(self, schema: pa.Schema) -> list[str]:
        if self.columns is None:
            return [c for c in schema.names if c != self.key]
        return [c for c in self.columns if c != self.key]

    def _output(self, m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage, lo: int = 0, hi: int = 0) -> pa.Table:
        """The matches as a table, in emission order: by emitting row (in ``[lo, hi)``, or at
        the end of input), then in kernel order."""
        nm, first_id = m_key.shape[0], self._matches_out
        order, rows, stages, ids, keys = karr.matches_in_emission_order(m_row, m_key, m_off, e_row, e_stage, lo, hi,
                                                                        first_id)
        self._matches_out += nm
        schema = self.output_schema()
        cols: dict[str, pa.Array] = {"match_id": pa.array(ids, pa.int64())}
        if self.key is not None:
            cols[self.key] = self._keys.take(keys).cast(schema.field(self.key).type)
        cols["stage"] = pa.array(self.program.stage_names, pa.string()).take(stages)
        cols["row"] = pa.array(rows, pa.int64())
        if self.timeouts:
            q = ids - first_id  # each event's match, in emission order
            flags = m_flag[order][q].astype(bool)
            tts = m_tts[order][q]
            cols["timed_out"] = pa.array(flags)
            cols["timeout_ts"] = pa.array(tts, pa.int64(), mask=~flags)
        if self._schema is not None:
            out_cols = self._output_columns(self._schema)
            if out_cols:
                data = self._gather(rows, out_cols)
                for c in out_cols:
                    cols[c] = data.column(c)
        return pa.table(cols, schema=schema)

    def _gather(self, rows: np.ndarray, names: list[str]) -> pa.Table:
        if not self._retained:
            return pa.table({c: pa.array([], self._schema.field(c).type) for c in names})
        base = self._retained[0][0]
        full = pa.concat_tables([t.select(names) for _, t in self._retained])
        return full.take(pa.array(rows - base, pa.int64()))

    def _trim_retained(self) -> None:
        if not self._retained:
            return
        n_row, n_stage, _, n_ref, meta = self._buf
        oldest = int(kbuf.min_live_row(n_row, n_stage, n_ref, meta[0]))
        if oldest < 0:
            oldest = self._rows_seen
        while self._retained and self._retained[0][0] + self._retained[0][1].num_rows <= oldest:
            self._retained.pop(0)


def match(data: Any, pattern: Pattern, key: str | None = None, time: str = "ts",
          columns: Sequence[str] | None = None, timeouts: bool = False, time_unit: str = "ms",
          max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES) -> pa.Table:
    """One-shot matching over a whole table (or an iterable of batches, already in time
    order per key). A table is stably sorted by time first when it is not in order, so ties
    keep their input order. Row positions in the output refer to the input as given."""
    m = Matcher(pattern, key=key, time=time, columns=columns, timeouts=timeouts, time_unit=time_unit,
                max_partial_matches=max_partial_matches)
    if isinstance(data, (pa.Table, pa.RecordBatch)) or hasattr(data, "to_arrow") or \
            type(data).__module__.startswith("pandas"):
        tbl = as_table(data)
        if time in tbl.column_names and not _is_sorted(tbl, time, key):
            return _match_unsorted(m, tbl, time)
        parts = [m.process(tbl)]
    else:
        parts = [m.process(b) for b in data]
    parts.append(m.close())
    return pa.concat_tables(parts)


def _is_sorted(tbl: pa.Table, time: str, key: str | None) -> bool:
    col = tbl.column(time)
    if col.null_count or tbl.num_rows < 2:
        return True  # nulls are reported by the Matcher
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    ts = np.asarray(col.to_numpy(), np.int64)
    return bool(np.all(ts[1:] >= ts[:-1]))


def _match_unsorted(m: Matcher, tbl: pa.Table, time: str) -> pa.Table:
    ts = tbl.column(time)
    if pa.types.is_timestamp(ts.type):
        ts = ts.cast(pa.int64())
    order = np.argsort(np.asarray(ts.to_numpy(), np.int64), kind="stable")
    out = pa.concat_tables([m.process(tbl.take(pa.array(order))), m.close()])
    return out.set_column(out.schema.get_field_index("row"), "row", pa.array(order[out.column("row").to_numpy()]))
