"""The Arrow driver: batches in, matches out.

    m = Matcher(pattern, key="symbol", time="ts")
    for batch in reader:
        out = m.process(batch)      # matches completed so far (pyarrow.Table)
    out = m.close()                 # end of input: what the final watermark releases

Per batch the driver validates the key and time columns, groups the rows by key (stable,
so ties in time keep arrival order), evaluates event-only conditions column-at-a-time into
masks, and makes one kernel call (``colcep.kernels.nfa.run_batch``) for all keys. A key's
partial matches are carried to the next batch; batches are kept only while a live partial
match still refers to their rows. With ``threads`` > 1 the keys are spread over shards
(``colcep.engine.shards``) whose kernel calls run at once; the output is the same.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from colcep.engine import codec
from colcep.engine import conditions as cond
from colcep.engine import history as hist
from colcep.engine import interrupt
from colcep.engine import shards as shd
from colcep.durations import TIME_UNITS, check_duration, to_units
from colcep.errors import CapacityError, InputError, PatternError
from colcep.kernels import arrays as karr
from colcep.kernels import buffer as kbuf
from colcep.kernels import nfa as knfa
from colcep.kernels.codes import OK, TIME_MAX
from colcep.kernels.runs import last_taken
from colcep.kernels.vm import VW
from colcep.engine.inputs import Binding, InputSpec, as_table, reserved_names
from colcep.engine.keys import dictionary_encoded, key_names, normalize_key
from colcep.pattern import KeyedPattern, Pattern, with_key
from colcep.engine.progress import scan_progress, scanning
from colcep.engine.program import CompiledPattern
from colcep.engine.program import compile as compile_program
from colcep.engine.tiers import DEFAULT_TIER, Tier, check_tier
from colcep.engine.feed import feed, new_out
from colcep.engine.state import NODE_BYTES, MatcherState
from colcep.engine.watermark import ARRIVAL, next_watermark, release, time_values

DEFAULT_MAX_PARTIAL_MATCHES = 1_000_000
DEFAULT_MAX_STATE_BYTES = 4 << 30  # the bound on what the state and a call allocate: 4 GiB
CHUNK_ROWS = 1 << 14  # rows per kernel call: what one call reads stays in the cache ...
CHUNK_ROWS_PER_KEY = 256  # ... but at least this many per key, or per-key work dominates (64: 5-13 % slower at 5,000)
SHARD_CHUNKS = 4  # a thread's calls take this many CHUNK_ROWS of its rows: fewer calls, fewer waits for the GIL
OUTPUT_PARALLEL_ROWS = 1 << 13  # with threads, an output of this many events makes its parts at once
NAMES_TYPE = pa.dictionary(pa.int32(), pa.string())  # the output's stage (and match_many's pattern) column
TRIM_ROWS = 1 << 12  # input rows fed between two looks for input blocks no longer referred to (at least)
# max_state_bytes bounds everything a call holds (docs/guide/state.md, "Bounds on the state"): of it,
WORK_SHARE = 4  # ... a quarter for the kernel's work arrays (the runs of the key it steps) ...
RUNS_SHARE = 4  # ... a quarter for the runs of all keys (the old arrays, and the kernel's new ones as they grow) ...
# ... and the rest for the match buffer (its old and new arrays while it grows), rows kept for the
# output, history, held matches. The matches of one call (kernel arrays, then the output table)
# are not state: they may take up to the bound again, beside it.
OUT_EVENT_BYTES = 128  # an output event, all told: kernel arrays, emission order, the output's own columns
OUT_COLUMN_BYTES = 16  # ... and per input column copied into the output
WALK_BYTES = 16  # with merging, the kernel's path scratch (kernels.buffer.walk_paths): per buffer slot


def run_bytes(v_width: int) -> int:
    """Bytes of a run in the state's runs arrays (state, node, start time and position, V)."""
    return 4 + 8 + 8 + 8 + 8 * v_width


def work_bytes_per_run(per_run: int, v_width: int) -> int:
    """Bytes of ``run_batch``'s work arrays per live run of the key it steps: they are sized
    for ``2 * per_run`` slots a run (runs ``W`` in two halves with their V arena, this event's
    completed matches, merge scratch and hash table, the held-match and pending queues: about
    ``270 + 32 * v_width`` bytes a slot), and a growing array is copied (x1.5)."""
    return int(1.5 * 2 * per_run * (270 + 32 * v_width))


class Matcher:
    """Finds ``pattern`` in a stream of Arrow batches, per key, in time order.

    Parameters
    ----------
    pattern: the Pattern to match, a CompiledPattern (``colcep.compile``) shared by many Matchers,
        or a front-end's query that carries its key (``colcep.sase(...)``: its key is ``key``).
    key: column partitioning the stream (Flink's ``keyBy``), or a sequence of columns (a
        composite key: one partition per combination of values, e.g. ``["symbol", "venue"]``);
        None for one stream. Key columns come first in the output, under their own names.
    time: the event-time column: integer or Arrow timestamp.
    columns: input columns copied into the output (None: all; []: none, compact output).
    timeouts: also emit timed-out partial matches (flagged ``timed_out``).
    time_unit: unit of an integer time column ("s", "ms", "us", "ns"), used to read string /
        timedelta windows; an integer window is always in the column's own unit. None (default):
        milliseconds, and a warning when the first batch's times look like epoch times in
        another unit (e.g. seconds, where ``within("10s")`` would be 1,000 times too wide).
    max_partial_matches: bound on live partial matches per key; exceeding it raises
        CapacityError naming the key (no partial match is ever dropped silently).
    max_state_bytes: bound on the bytes the state holds (``state_bytes``, arrays at their
        capacity, all keys) and a call allocates besides (the kernel's work arrays: a quarter;
        the call's matches: an eighth); exceeding it raises CapacityError naming the key.
    out_of_orderness: None (default): rows must arrive in time order per key, else InputError.
        A duration (``"5s"``, a timedelta or an int in the column's unit): event time as Flink's
        CEP operator does it; rows wait until the watermark (``max time - out_of_orderness - 1``,
        or a ``watermark`` given to ``process``) passes them and are matched in (time, arrival)
        order; rows at or behind the watermark are late: ``pop_late()`` returns them.
        ``"watermarks"``: only the watermarks given to ``process`` release rows.
    threads: keys are spread over this many threads (the kernels run at once; the output is the
        same for any number); None: all cores. Default 1 (a streaming operator, e.g. a Spark
        task, keeps to its core). A batch below ``colcep.engine.shards.PARALLEL_MIN_ROWS`` rows runs
        its shards one after another.
    schema: the input's schema, when known before the first batch: checked and bound at once (as
        the first batch's would be), so even a Matcher that never gets a row closes with the
        output's exact types. Without it, ``close()`` before any batch gives the output's columns
        with the key and ``columns`` typed null (their types are not known yet).
    tier: the step kernel (``colcep.engine.tiers``): "auto" (default) runs the generic kernel and,
        once the Matcher has stepped ``tiers.AUTO_MIN_ROWS`` (10^6) rows, compiles the pattern's
        step in a background thread and switches to it between batches once ready; "generic"
        always interprets the pattern; "compiled" runs the per-key step generated for the
        pattern's shape (``colcep.engine.stepgen``: compiled once per machine and shape, ~5-10 s of
        CPU, then cached on disk; patterns that differ only in constants share it), built before
        the first batch. A pattern whose step is not generated (a state with over 64 edges) runs on
        the generic kernel (with a warning under "compiled"). "specialised" is taken as "compiled".

    A call that raises leaves the Matcher as it was before the call (fix the batch, call again);
    Ctrl-C stops a call promptly with ``KeyboardInterrupt``, the state again as before the call.

    ``on_progress`` (an attribute, None by default): a callable ``(rows_done, matches_so_far)``
    that ``process`` and ``close`` call between kernel calls (and, with threads, every 50 ms
    while they run), in the calling thread; it should return at once when it has nothing to
    draw. ``colcep.match(..., progress=...)`` sets it to its meter.
    """

    def __init__(self, pattern: "Pattern | CompiledPattern", key: "str | Sequence[str] | None" = None, time: str = "ts",
                 columns: Sequence[str] | None = None, timeouts: bool = False, time_unit: str | None = None,
                 max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
                 max_state_bytes: int = DEFAULT_MAX_STATE_BYTES, out_of_orderness: Any = None,
                 threads: int | None = 1, tier: str = DEFAULT_TIER, schema: pa.Schema | None = None):
        check_tier(tier)
        pattern, key = with_key(pattern, key)
        if not isinstance(pattern, (Pattern, CompiledPattern)):
            raise PatternError(f"Matcher needs a colcep Pattern (or a colcep.sase query), got {type(pattern).__name__}")
        if time_unit is not None and time_unit not in TIME_UNITS:
            raise InputError(f"time_unit must be one of {sorted(TIME_UNITS)}, got {time_unit!r}")
        if out_of_orderness is not None and out_of_orderness != "watermarks":
            check_duration(out_of_orderness, "out_of_orderness", signed=True, error=InputError)
        self.program: CompiledPattern = compile_program(pattern)
        self._tier = Tier(self.program, tier)
        self._hist_plan = hist.plan(self.program.lowered.hist_exprs)  # prev / rolling columns, or None
        self.key = normalize_key(key, time)  # None, a name, or a list of two or more names
        self.key_columns: list[str] = key_names(self.key)
        self.time = time
        self.columns = None if columns is None else list(columns)
        self.timeouts = bool(timeouts)
        self.time_unit = time_unit
        self.max_partial_matches = int(max_partial_matches)
        self.max_state_bytes = int(max_state_bytes)
        self.out_of_orderness = out_of_orderness
        self.threads = shd.resolve_threads(threads) if key is not None else 1
        reserved = reserved_names(self.timeouts)
        for c in self.columns or []:
            if c in reserved:
                raise InputError(f"output column {c!r} collides with colcep's own output column {c!r}; "
                                 "rename it in the input (colcep's columns are " + ", ".join(reserved) + ")")
        self._inputs = InputSpec(self.program, self.key_columns, time, time_unit, self.columns, self.timeouts,
                                 out_of_orderness)
        self._bound: Binding | None = None if schema is None else self._inputs.bind(schema)
        self._empty_cache = self._schema_cache = (False, None)  # (binding, output) made for it
        self._stage_names = pa.array(self.program.stage_names, pa.string())  # the stage column's dictionary
        self._state = MatcherState.new(key, self.program.v_width, self.program.literals)
        if self.threads > 1:
            self._state.shards = [shd.Shard.empty(self.program.v_width) for _ in range(self.threads)]
        self._out = new_out()
        self._shard_out = [new_out() for _ in range(self.threads)]
        self._late: list[pa.Table] = []
        self._closed = False
        self._failed: BaseException | None = None
        self._guarded = True  # calls roll back on failure by themselves (False: a ManyMatcher does)
        self._unit_checked = False
        # a progress meter: called as (rows done, matches so far) between kernel calls, from the
        # thread that called process / close (colcep.match sets it; it must be cheap when not due)
        self.on_progress: Callable[[int, int], None] | None = None
        # when each match was emitted (colcep.lang.sql.rowtime: Flink SQL's MATCH_ROWTIME): None, or a
        # list to which a call appends, per match of its output in order, the row (as the output's
        # ``row`` counts) whose processing emitted it, -1 where time advancing to the call's watermark
        # or the end of input did. One thread only.
        self.emitting_rows: list[np.ndarray] | None = None

    # ------------------------------------------------------------------ public API
    def process(self, batch: Any, watermark: Any = None) -> pa.Table:
        """Feed one batch (Table, RecordBatch, pandas / polars DataFrame); returns the matches
        (and timed-out partial matches, if asked) that this batch completed. ``watermark``
        (event time only) follows the batch's rows: no row at or before this time will come
        any more (the batch's own rows are judged late against the watermark before it)."""
        self._check_process(watermark)
        tbl = as_table(batch)
        return self._atomically(lambda: self._process(tbl, watermark))

    def close(self) -> pa.Table:
        """End of input: time advances to +infinity, as a bounded Flink job's final watermark,
        which releases every waiting row, times out open partial matches and releases matches
        held by ``within``."""
        self._check_open()
        out = self._atomically(self._close)
        self._closed = True
        return out

    def pop_late(self) -> pa.Table | None:
        """The late rows received since the last call (Flink's late-data side output), or None."""
        out = pa.concat_tables(self._late, promote_options="permissive") if self._late else None
        self._late = []
        return out

    @property
    def watermark(self) -> int | None:
        """The current watermark (event time), in time column units."""
        return self._state.watermark

    @property
    def kernel_tier(self) -> str | None:
        """The step kernel the last batch ran on: "generic" or "compiled" (None before any)."""
        return self._tier.active

    @property
    def late_rows(self) -> int:
        return self._state.late_rows

    @property
    def live_partial_matches(self) -> int:
        """Partial matches currently alive, over all keys."""
        return self._state.live_runs

    @property
    def buffer_nodes(self) -> int:
        """Events currently held in the match buffer (nodes; all shards)."""
        return self._state.live_nodes

    @property
    def is_idle(self) -> bool:
        """Nothing is carried: no partial or held match, no row waiting for the watermark, no
        key whose start a STOP state ended, no row that ``prev`` / ``rolling`` still reach (such a
        Matcher can be dropped and made anew)."""
        st = self._state
        h = st.history
        return (st.live_runs == 0 and all(p.held.node.shape[0] == 0 and not bool(p.start_dead.any())
                                          for p in st.parts())
                and (st.pending is None or st.pending.num_rows == 0)
                and (h is None or (h.ts.shape[0] == 0 and not bool(h.count.any()))))

    @property
    def next_deadline(self) -> int | None:
        """The earliest time at which this Matcher may emit without a new row: the window end of
        its oldest partial or held match (None without one, or without a window). A watermark
        at that time times it out; the deadline only moves later."""
        st, b = self._state, self._bound
        gaps = b is not None and b.gap is not None and bool(b.gap.any())
        if b is None or (b.window <= 0 and not gaps):
            return None
        ends = []
        if b.window > 0:
            ends = [min(int(a.min()) + b.window, int(TIME_MAX)) for p in st.parts()
                    for a in (p.runs.start_ts, p.held.start_ts, p.park.start_ts()) if a.shape[0]]
        if gaps:  # a run's window since its last taken event (kept in its V's last group: ``last_taken``)
            for p in st.parts():
                w = b.gap[p.runs.state]
                if w.any():
                    v = p.runs.v
                    last = last_taken.py_func(v.reshape(-1), np.arange(v.shape[0]) * v.shape[1], v.shape[1] - VW)
                    last, w = last[w > 0], w[w > 0]
                    ends.append(int(np.where(last > TIME_MAX - w, TIME_MAX, last + w).min()))
        return min(ends) if ends else None

    @property
    def matches_emitted(self) -> int:
        """Matches (and timed-out partial matches) emitted so far: the next match id."""
        return self._state.matches_out

    @property
    def rows_received(self) -> int:
        """Rows given to ``process`` so far (late rows included): the next row's position."""
        return self._state.rows_seen

    @property
    def keys(self) -> list:
        """The key values seen so far, in first-seen order (tuples for a composite key)."""
        return list(self._state.keys.values)

    @property
    def state_bytes(self) -> int:
        """Bytes the state holds, every array at its capacity (runs, held matches, the match
        buffer, per-key arrays, input rows kept for the output, rows waiting for the watermark,
        history, the pooled output arrays): what ``max_state_bytes`` bounds between calls."""
        return self._state.nbytes() + self._out_bytes()

    def snapshot(self, keys: Sequence[Any] | None = None) -> bytes:
        """The state as bytes (``colcep.engine.codec``: versioned, checksummed, bound to this pattern's
        fingerprint), compacted to what is live; ``keys``: only those keys' state (tuples for a
        composite key). A threaded Matcher writes its shards as one state: it restores into
        any thread count."""
        self._check_open()
        settings = {"key": self.key, "time": self.time, "columns": self.columns, "timeouts": self.timeouts,
                    "time_unit": self.time_unit, "max_partial_matches": self.max_partial_matches,
                    "max_state_bytes": self.max_state_bytes, "out_of_orderness": self.out_of_orderness}
        schema = None if self._bound is None else self._bound.schema
        return codec.encode(codec.Snapshot(settings, self._state, schema), self.program.fingerprint, keys)

    @classmethod
    def restore(cls, pattern: "Pattern | CompiledPattern", data: bytes, threads: int | None = 1,
                tier: str = DEFAULT_TIER) -> "Matcher":
        """A Matcher that continues from ``snapshot()`` bytes exactly where it stopped, on
        ``threads`` threads and kernel ``tier`` (any, whatever the snapshotted Matcher used: the
        tiers share the state layout). The pattern must compile to the same program (its
        fingerprint is checked)."""
        program = compile_program(pattern)
        snap = codec.decode(program, data)
        m = cls(program, **snap.settings, threads=threads, tier=tier)
        m._state = snap.state
        if m.threads > 1:
            shd.split(m._state, m.threads)
        if snap.schema is not None:
            m._bound = m._inputs.bind(snap.schema)
        return m

    # ------------------------------------------------------------------ stage and commit
    def _check_process(self, watermark: Any) -> None:
        """``process`` may take a batch (and ``watermark``) now."""
        self._check_open()
        if watermark is not None and self.out_of_orderness is None:
            raise InputError("watermark= needs event time: create the Matcher with out_of_orderness=...")

    def _check_open(self) -> None:
        if self._failed is not None:
            raise InputError(f"this Matcher cannot continue: an earlier call failed and its state could not be "
                             f"restored ({self._failed!r})")
        if self._closed:
            raise InputError("this Matcher is closed; create a new one for a new stream")

    def _atomically(self, step):
        if not self._guarded:  # a ManyMatcher holds this call's undo with its other patterns'
            return step()
        saved = self._begin()
        try:
            out = step()
        except BaseException:
            self._roll_back(saved)
            raise
        self._state.commit()
        return out

    def _begin(self) -> tuple:
        """What a failed call goes back to (``_roll_back``); a call that succeeds ends with
        ``self._state.commit()``. (``ManyMatcher`` holds several Matchers' until all succeed.)"""
        return self._state.checkpoint(), self._bound, list(self._late)

    def _roll_back(self, saved: tuple) -> None:
        saved_state, saved_bound, saved_late = saved
        try:
            self._state.restore_from(saved_state, settled=interrupt.settled())
            self._bound, self._late = saved_bound, saved_late
            self._out = new_out()  # an interrupted kernel may still write to the old ones
            self._shard_out = [new_out() for _ in range(self.threads)]
        except BaseException as e:  # pragma: no cover - nothing above allocates much
            self._failed = e

    # ------------------------------------------------------------------ per batch
    def _process(self, tbl: pa.Table, watermark: Any) -> pa.Table:
        tbl = self._normalized(tbl)
        if self.out_of_orderness is None:
            return self._feed(tbl)
        st, b = self._state, self._bound
        n, row0 = tbl.num_rows, st.rows_seen
        ts = time_values(tbl, self.time, row0)
        if self.key is not None:
            st.keys.check_nulls(tbl, row0)
        tbl = tbl.append_column(ARRIVAL, pa.array(np.arange(row0, row0 + n, dtype=np.int64)))
        st.rows_seen += n
        if st.watermark is not None:  # a row at or behind the watermark is late
            late = ts <= st.watermark
            if late.any():
                st.late_rows += int(late.sum())
                self._late.append(tbl.filter(pa.array(late)).drop_columns([ARRIVAL]))
                tbl, ts = tbl.filter(pa.array(~late)), ts[~late]
        if ts.shape[0]:
            st.max_ts = int(ts.max()) if st.max_ts is None else max(st.max_ts, int(ts.max()))
            st.pending = tbl if st.pending is None else pa.concat_tables([st.pending, tbl])
        wm = None if watermark is None else to_units(watermark, b.unit, "watermark", signed=True, error=InputError)
        st.watermark = next_watermark(st.watermark, st.max_ts, b.delay, wm)
        released, st.pending = release(st.pending, self.time, st.watermark)
        # a watermark tick: time advances to the watermark for every key, so quiet keys time out
        tick = st.watermark if st.watermark is not None and st.watermark != st.ticked else None
        st.ticked = st.watermark
        return self._feed(released, tick=tick)

    def _normalized(self, tbl: pa.Table) -> pa.Table:
        """The batch checked and bound to the input schema (the first batch binds it)."""
        if self._bound is None:
            self._bound = self._inputs.bind(tbl.schema)
        tbl = self._inputs.normalize(tbl, self._bound)
        if not self._unit_checked and tbl.num_rows:
            self._unit_checked = True
            self._inputs.check_time_unit(tbl)
        return tbl

    def _close(self) -> pa.Table:
        if self._bound is None:  # closed before any data
            return self._empty_output()
        released = None
        if self.out_of_orderness is not None:
            released, self._state.pending = release(self._state.pending, self.time, None, everything=True)
        return self._feed(released, tick=int(TIME_MAX))

    def _feed(self, tbl: pa.Table | None, tick: int | None = None) -> pa.Table:
        """Run the kernel over ``tbl`` (rows in time order per key; None: no rows), then, with
        ``tick``, advance every key's time to it (a watermark; TIME_MAX: the end of input)."""
        return feed([self], [tbl], tick)[0]

    # (the steps of colcep.engine.feed that depend on the pattern)
    def _key_codes(self, tbl: pa.Table, row0: int) -> np.ndarray:
        keys = self._state.keys
        if self.threads > 1 and tbl.num_rows >= shd.PARALLEL_MIN_ROWS:
            return keys.encode(tbl, row0, self.threads, partial(interrupt.call_all, stop=interrupt.new_stop_flag()))
        return keys.encode(tbl, row0)

    def _check_order(self, codes: np.ndarray, ts: np.ndarray, n_keys: int, row0: int) -> None:
        """Every key's rows in time order, after its rows of earlier batches; the state covers ``n_keys``."""
        st = self._state
        st.ensure_keys(n_keys)
        bad = karr.first_out_of_order(codes, ts, st.key_last_ts)
        if bad >= 0:
            k = st.keys.values[codes[bad]]
            raise InputError(
                f"time column {self.time!r} is not in order for key {k!r}: row {row0 + int(bad)} "
                f"has time {int(ts[bad])}, earlier than the previous event of that key; sort the input by time "
                "(colcep.match() sorts for you) or use event time (out_of_orderness=...)")

    def _chunk_rows(self, s: int, n_keys: int) -> int:
        """The rows this pattern would have a kernel call of shard ``s`` take. In chunks of
        CHUNK_ROWS rows (in arrival order) a call's reads stay in the cache; a call loads and
        stores every carried run: many runs make longer calls (``shards.chunk_rows``)."""
        st = self._state
        if st.shards is None:
            return shd.chunk_rows(max(CHUNK_ROWS, CHUNK_ROWS_PER_KEY * n_keys), st.runs.state.shape[0])
        k = shd.n_local(n_keys, s, self.threads)
        return shd.chunk_rows(max(SHARD_CHUNKS * CHUNK_ROWS, CHUNK_ROWS_PER_KEY * k),
                              st.shards[s].runs.state.shape[0])

    def _columns(self, tbl: pa.Table | None, n: int, numeric: dict, codes: np.ndarray, ts: np.ndarray,
                 n_keys: int) -> dict[str, np.ndarray]:
        """The columns this pattern's conditions read, in arrival order: numeric ones as float64
        (from ``numeric`` by name and type, made there when missing: shared with other patterns), strings as this
        pattern's codes, and its ``prev`` / ``rolling`` columns (the history advances here)."""
        st, lw = self._state, self.program.lowered
        needed = set()
        for e in lw.mask_exprs + lw.col_exprs:
            needed |= e.columns()
        env = {}
        for name in needed:
            if not n:
                env[name] = numeric.setdefault((name, None), np.zeros(0))
            elif self._bound.kinds[name] == cond.STR:
                env[name] = self._string_codes(tbl.column(name))
            else:
                col = tbl.column(name)
                key = (name, col.type)
                if key not in numeric:
                    if pa.types.is_timestamp(col.type):
                        col = col.cast(pa.int64())
                    arr = col.to_numpy() if col.num_chunks == 1 and col.null_count == 0 else \
                        col.to_numpy(zero_copy_only=False)
                    numeric[key] = np.asarray(arr, dtype=np.float64)
                env[name] = numeric[key]
        if self._hist_plan is not None:  # prev / rolling: per key, over the rows carried from earlier batches
            st.history, hcols = hist.advance(st.history, self._hist_plan, env, codes, ts, n_keys, self._bound.unit,
                                             st.strings)
            env.update(hcols)
        return env

    def _conditions(self, env: dict[str, np.ndarray], n: int,
                    shared: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The event-only conditions over ``n`` rows of the columns ``env``: masks, values and
        the rows where the start run could take an event (``CompiledPattern.start_mask``).
        ``shared``: values of conditions evaluated for other patterns over the same columns
        (``conditions.shared_key``), taken from it and added to it."""
        lw, strings = self.program.lowered, self._state.strings

        def value(e):
            key = None if shared is None else cond.shared_key(e, env)
            if key is None:
                return cond.evaluate(e, env, n, strings)
            got = shared.get(key)
            if got is None:
                got = shared[key] = cond.evaluate(e, env, n, strings)
            return got
        masks = np.zeros((max(1, len(lw.mask_exprs)), n), np.uint8)
        for i, e in enumerate(lw.mask_exprs):
            masks[i] = value(e)
        cols = np.zeros((max(1, len(lw.col_exprs)), n), np.float64)
        for i, e in enumerate(lw.col_exprs):
            cols[i] = value(e)
        return masks, cols, self.program.start_mask(masks, n)

    def _finish(self, tbl: pa.Table | None, n: int, row0: int, events: tuple) -> pa.Table:
        """After the kernel calls: keep the rows the output may still need, count them, and make
        the output of ``events`` (the matches in emission order)."""
        st = self._state
        if n and (self.columns != [] or self.out_of_orderness is not None):
            st.retain((row0, tbl))
        st.rows_fed += n
        if self.out_of_orderness is None:
            st.rows_seen = st.rows_fed
        out = self._output(*events)
        self._trim_retained()
        return out

    def _string_codes(self, col: pa.ChunkedArray) -> np.ndarray:
        strings = self._state.strings
        enc = dictionary_encoded(col)
        dict_vals = enc.dictionary.to_pylist()
        mapping = np.array([float(strings.setdefault(v, len(strings))) if v is not None else np.nan
                            for v in dict_vals] + [np.nan], np.float64)
        idx = enc.indices.fill_null(len(dict_vals)).to_numpy(zero_copy_only=False)
        return mapping[idx]

    def _out_bytes(self) -> int:
        """Bytes of the pooled kernel output arrays (kept between calls while small)."""
        return sum(a.nbytes for out in [self._out] + self._shard_out for a in out)

    def _call_bounds(self, parts: list) -> list:
        """Per part (the state or its shards, all stepped in this call): ``(max_runs, max_slots,
        max_out)``, the kernel's bounds from ``max_state_bytes``: the runs of a key (their work
        arrays take at most ``1 / WORK_SHARE`` of it; and ``max_partial_matches``), the buffer's
        slots while it grows (old and new arrays together: what the state does not hold
        otherwise, shared by the parts) and the call's output events (up to the bound again,
        beside the state: the output is the caller's, not state)."""
        st, prog, B = self._state, self.program, self.max_state_bytes
        T = len(parts)
        per_run = prog.per_run(self.timeouts)
        slot_bytes = NODE_BYTES + (WALK_BYTES if prog.merging(self.timeouts) else 0)
        work, out, runs = B // WORK_SHARE, B, B // RUNS_SHARE
        max_runs = max(1, min(self.max_partial_matches, work // work_bytes_per_run(per_run, prog.v_width)))
        n_cols = len(self._inputs.output_columns(self._bound.schema)) + (self.out_of_orderness is not None)
        max_out = max(1, out // T // (OUT_EVENT_BYTES + OUT_COLUMN_BYTES * n_cols))
        # the old runs, the kernel's new ones and, while those grow, their old copy: 3 x at most
        max_all_runs = max(1, runs // T // (3 * run_bytes(prog.v_width)))
        caps = [int(p.buffer.row.shape[0]) for p in st.parts()]
        other = st.other_bytes() + self._out_bytes()  # rows, history, ...
        room = B - work - runs - other - sum(caps) * slot_bytes
        share = max(0, room // T // slot_bytes)
        return [(max_runs, max(1, int(p.buffer.row.shape[0]) + share), max_out, max_all_runs) for p in parts]

    def _raise_status(self, status: np.ndarray, code: int) -> None:
        """Raise what a kernel's failed ``status`` means (``code``: the key's global code)."""
        if status[0] == knfa.ERR_INTERRUPTED:
            raise KeyboardInterrupt
        if status[0] == OK:
            return
        key = self._state.keys.values[code]
        tighten = "tighten the pattern (within(), a more selective condition, a skip strategy) or raise the bound"
        if status[0] == knfa.ERR_CAPACITY:
            runs = int(status[2])
            if runs < 0:
                raise CapacityError(
                    f"the keys hold {-runs:,} live partial matches in all (at key {key!r}): their arrays need "
                    f"{-runs * 3 * run_bytes(self.program.v_width) / 2**20:,.2f} MiB while they grow, over a quarter "
                    f"of the bound max_state_bytes={self.max_state_bytes:,}; {tighten}. Nothing of this batch was "
                    "applied.")
            if runs > self.max_partial_matches:
                raise CapacityError(
                    f"key {key!r} holds {runs} live partial matches, over the bound max_partial_matches="
                    f"{self.max_partial_matches}; {tighten}. Nothing of this batch was applied.")
            per = work_bytes_per_run(self.program.per_run(self.timeouts), self.program.v_width)
            raise CapacityError(
                f"key {key!r} holds {runs:,} live partial matches: stepping them needs "
                f"{runs * per / 2**20:,.2f} MiB of work arrays ({per:,} bytes each), over a quarter of the bound "
                f"max_state_bytes={self.max_state_bytes:,}; {tighten}. Nothing of this batch was applied.")
        if status[0] == knfa.ERR_NODES:
            raise CapacityError(
                f"key {key!r} needs more of the shared match buffer: it holds {int(status[2]):,} events of live "
                f"partial matches ({int(status[2]) * NODE_BYTES / 2**20:,.2f} MiB; the state holds "
                f"{self.state_bytes / 2**20:,.2f} MiB), at the bound max_state_bytes={self.max_state_bytes:,}; "
                f"{tighten}. Nothing of this batch was applied.")
        if status[0] == knfa.ERR_OUTPUT:
            raise CapacityError(
                f"the matches of this call reach {int(status[2]):,} events (at key {key!r}): the output would take "
                f"more than the bound max_state_bytes={self.max_state_bytes:,} (the output of one call is made at "
                "once): feed smaller batches, tighten the pattern or raise the bound. Nothing of this batch was "
                "applied.")

    def _placed(self, found: list, stop: np.ndarray, n: int) -> tuple:
        """The shards' matches (``shards.emitted``, one per shard) in their places among all
        shards', as ``_in_emission_order`` gives one thread's (each shard writes its own, at once)."""
        st, T = self._state, self.threads
        if self.emitting_rows is not None:
            raise RuntimeError("Matcher.emitting_rows needs threads=1")
        at, first = shd.places(found)
        n_matches = sum(e.order.shape[0] for e in found)
        n_events = sum(int(e.n_events.sum()) for e in found)
        rows, ids, keys = (np.empty(n_events, np.int64) for _ in range(3))
        stages = np.empty(n_events, np.int32)
        flag, tts = (np.empty(n_events, np.int64), np.empty(n_events, np.int64)) if self.timeouts else (None, None)
        parts = [n_matches * j // T for j in range(T + 1)]  # each thread fills a contiguous part
        interrupt.call_all([partial(shd.place, found, at, first, a, b, st.matches_out, rows, stages, ids, keys, flag,
                                    tts) for a, b in zip(parts, parts[1:])],
                           stop=stop, parallel=n_events >= OUTPUT_PARALLEL_ROWS)
        return rows, stages, ids, keys, None if flag is None else flag.astype(bool), tts, n_matches

    # ------------------------------------------------------------------ output
    def _empty_output(self) -> pa.Table:
        """``process``'s output without matches (made once per bound input schema: most calls of
        a stream in small batches return it)."""
        if self._empty_cache[0] is not self._bound:
            self._empty_cache = (self._bound, self.output_schema().empty_table())
        return self._empty_cache[1]

    def output_schema(self, schema: pa.Schema | None = None) -> pa.Schema:
        """The schema of the tables ``process`` returns, given the input schema."""
        if schema is None:
            if self._schema_cache[0] is not self._bound:
                self._schema_cache = (self._bound, self._output_schema(None))
            return self._schema_cache[1]
        return self._output_schema(schema)

    def _output_schema(self, schema: pa.Schema | None) -> pa.Schema:
        schema = schema or (self._bound.schema if self._bound is not None else None)
        fields = [pa.field("match_id", pa.int64(), False)]
        # before any batch the input's types are unknown: the key and the chosen columns typed null
        fields += [pa.field(k, schema.field(k).type if schema is not None else pa.null()) for k in self.key_columns]
        fields += [pa.field("stage", NAMES_TYPE, False), pa.field("row", pa.int64(), False)]
        if self.timeouts:
            fields += [pa.field("timed_out", pa.bool_(), False), pa.field("timeout_ts", pa.int64())]
        if schema is not None:
            fields += [schema.field(c) for c in self._inputs.output_columns(schema)]
        else:
            fields += [pa.field(c, pa.null()) for c in self.columns or [] if c not in self.key_columns]
        return pa.schema(fields)

    def _in_emission_order(self, m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage, lo: int = 0, hi: int = 0):
        """The kernel's matches in emission order, by emitting row (in ``[lo, hi)``, or at the end
        of input), then in kernel order: per event ``(rows, stages, ids, keys, timed_out,
        timeout_ts)`` (the last two None without timeouts), and the number of matches."""
        first_id = self._state.matches_out
        order, rows, stages, ids, keys = karr.matches_in_emission_order(m_row, m_key, m_off, e_row, e_stage, lo, hi,
                                                                        first_id)
        if self.emitting_rows is not None:
            at = m_row[order]
            self.emitting_rows.append(np.where(at < hi, at, -1))
        flags = tts = None
        if self.timeouts:
            q = ids - first_id  # each event's match, in emission order
            flags = m_flag[order][q].astype(bool)
            tts = m_tts[order][q]
        return rows, stages, ids, keys, flags, tts, m_key.shape[0]

    def _output(self, rows, stages, ids, keys, flags, tts, nm: int) -> pa.Table:
        """The matches as a table (``_in_emission_order``'s arrays), numbered on from the last."""
        if nm == 0:
            return self._empty_output()
        st = self._state
        st.matches_out += nm
        schema = self.output_schema()
        cols: dict[str, Any] = {"match_id": pa.array(ids, pa.int64())}
        # the columns that copy values (Arrow takes, which release the GIL) are made at once with threads
        made: dict[str, Any] = {}
        if self.key_columns:
            made[KEYS] = (lambda: st.keys.arrays(keys)) if len(keys) else (lambda: None)
        out_cols, event_time = [], self.out_of_orderness is not None
        if self._bound is not None:
            out_cols = self._inputs.output_columns(self._bound.schema)
            if out_cols or (event_time and len(rows)):
                made[ARRIVAL] = partial(self._gather, rows, out_cols + ([ARRIVAL] if event_time else []))
        if self.threads > 1 and len(rows) >= OUTPUT_PARALLEL_ROWS:
            made = dict(zip(made, interrupt.call_all(list(made.values()), stop=interrupt.new_stop_flag())))
        else:
            made = {name: fn() for name, fn in made.items()}
        for i, k in enumerate(self.key_columns):
            key_type = schema.field(k).type
            got = made[KEYS][i] if made[KEYS] is not None else pa.array([], key_type)
            cols[k] = got if got.type == key_type else got.cast(key_type)
        cols["stage"] = pa.DictionaryArray.from_arrays(pa.array(stages, pa.int32()), self._stage_names)
        cols["row"] = pa.array(rows, pa.int64())
        if self.timeouts:
            cols["timed_out"] = pa.array(flags)
            cols["timeout_ts"] = pa.array(tts, pa.int64(), mask=~flags)
        if ARRIVAL in made:  # the input columns (and arrival rows) of the matched rows
            data = made[ARRIVAL]
            for c in out_cols:
                cols[c] = data.column(c)
            if event_time:
                cols["row"] = data.column(ARRIVAL).combine_chunks()
        return pa.table(cols, schema=schema)

    def _gather(self, rows: np.ndarray, names: list[str]) -> pa.Table:
        """Columns ``names`` of the fed rows ``rows`` (positions in feeding order), from the
        retained blocks that hold them only (time: the rows and the number of blocks, not the
        retained rows). Each record batch of a block gives its rows by one take; never a take over
        several (Arrow would first copy them all into one: ~30 MB a call over two blocks of 2^20
        ticks, once per pattern and batch)."""
        blocks = self._state.retained
        if not blocks:
            return pa.table({c: pa.array([], self._bound.schema.field(c).type if c != ARRIVAL else pa.int64())
                             for c in names})
        if not len(rows):
            return pa.Table.from_batches([], schema=blocks[-1][1].select(names).schema)
        # only the blocks from the oldest row's on are split into their record batches
        tail = blocks[max(int(np.searchsorted(_firsts(blocks), rows.min(), side="right")) - 1, 0):]
        parts = [p for a, t in tail for p in _record_batches(a, t.select(names))]
        which = np.searchsorted(_firsts(parts), rows, side="right") - 1
        lo, hi = int(which.min()), int(which.max())
        if lo < 0:
            raise RuntimeError(f"row {int(rows.min())} is not among the retained input rows")  # (a bug of ours)
        if lo == hi:
            return pa.Table.from_batches([_take_rows(*parts[lo], rows)])
        # rows of several batches: each batch's taken at once, in batch order, then put back in
        # the rows' order (a stable sort by batch: a radix sort on small integers)
        order = np.argsort(which - lo if hi - lo > 0xFFFF else (which - lo).astype(np.uint16), kind="stable")
        bounds = np.searchsorted(which[order], np.arange(lo, hi + 2))
        got = pa.Table.from_batches([_take_rows(*parts[lo + i], rows[order[bounds[i]:bounds[i + 1]]])
                                     for i in np.flatnonzero(np.diff(bounds))]).combine_chunks()
        back = np.empty_like(order)
        back[order] = np.arange(order.shape[0])
        return got.take(pa.array(back, pa.int64()))

    def _trim_retained(self) -> None:
        """Drop the input blocks no live node refers to any more. Finding the oldest row a live
        node refers to reads the whole buffer, so it is done once the rows fed since the last
        time reach a quarter of the buffer's slots (at least ``TRIM_ROWS``): time per row stays
        constant whatever the state holds, and at most that many rows are kept too long."""
        st = self._state
        if not st.retained or st.rows_fed < st.trim_due:
            return
        high = sum(int(p.buffer.meta[0]) for p in st.parts())
        st.trim_due = st.rows_fed + max(TRIM_ROWS, high // 4)
        oldest = st.rows_fed
        for p in st.parts():
            buf = p.buffer
            r = int(kbuf.min_live_row(buf.row, buf.stage, buf.ref, buf.meta[0]))
            if r >= 0:
                oldest = min(oldest, r)
        keep = st.retained
        while keep and _block_end(keep[0]) <= oldest:
            keep = keep[1:]
        st.retained = keep


KEYS = object()  # the key columns among the output's parts


def _firsts(pieces: list[tuple]) -> np.ndarray:
    """The first row of each (start, rows) piece: a block or a record batch of one."""
    return np.array([int(a[0]) if isinstance(a, np.ndarray) else a for a, _ in pieces], np.int64)


def _record_batches(start: "int | np.ndarray", t: pa.Table) -> Iterator[tuple["int | np.ndarray", pa.RecordBatch]]:
    """A retained block's record batches, each with its first row (or its rows' positions)."""
    off = 0
    for rb in t.to_batches():
        if rb.num_rows:
            yield (start[off:off + rb.num_rows] if isinstance(start, np.ndarray) else start + off), rb
            off += rb.num_rows


def _take_rows(start: "int | np.ndarray", rb: pa.RecordBatch, rows: np.ndarray) -> pa.RecordBatch:
    """The rows ``rows`` (positions in feeding order) of record batch ``rb``, whose first is
    ``start`` (or whose rows' positions, ascending, are ``start``)."""
    pos = np.searchsorted(start, rows) if isinstance(start, np.ndarray) else rows - start
    return rb.take(pa.array(pos, pa.int64()))


def _block_end(block: tuple) -> int:
    start, t = block
    return int(start[-1]) + 1 if isinstance(start, np.ndarray) else start + t.num_rows


def match(data: Any, pattern: "Pattern | KeyedPattern", key: "str | Sequence[str] | None" = None, time: str = "ts",
          columns: Sequence[str] | None = None, timeouts: bool = False, time_unit: str | None = None,
          max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES,
          max_state_bytes: int = DEFAULT_MAX_STATE_BYTES, threads: int | None = None,
          tier: str = DEFAULT_TIER, progress: bool | None = None) -> pa.Table:
    """One-shot matching over a whole table (or an iterable of batches, already in time
    order per key). A table that is not in time order per key is ordered first: its rows grouped
    by key (in first-seen order), each key's in time order, ties in input order (linear time);
    its matches are the same, their ids follow that order. Row positions in the output refer to
    the input as given.
    ``threads``: keys are spread over this many threads, None (default): all cores; a table
    below ``colcep.engine.shards.PARALLEL_MIN_ROWS`` rows uses one. The output is the same for any number.
    ``pattern`` may be a front-end's query with its key (``colcep.sase(...)``).

    ``progress``: a meter of rows done (of the total, when known), rows/s and matches so far,
    updated between kernel calls at most twice a second: in a notebook an output updated in
    place, on a terminal one line redrawn on stderr, elsewhere (a log) a line every 10 s, and a
    last line when the scan ends or is interrupted. None (default): on when stderr is a
    terminal or this is a notebook; True: always; False: never. The output is the same."""
    pattern, key = with_key(pattern, key)
    data, is_table, threads, total = scan_input(data, threads)
    m = Matcher(pattern, key=key, time=time, columns=columns, timeouts=timeouts, time_unit=time_unit,
                max_partial_matches=max_partial_matches, max_state_bytes=max_state_bytes, threads=threads,
                tier=tier)
    meter = scan_progress(progress, "colcep.match", total)
    if meter is not None:
        m.on_progress = meter.update
    with scanning(meter, lambda: (m.rows_received, m.matches_emitted)):
        return match_all(m, data, is_table, time, key, meter)


def scan_input(data: Any, threads: int | None) -> tuple[Any, bool, int, int | None]:
    """``(data, is_table, threads, rows)``: a one-shot scan's input as it is taken (a table
    normalised to Arrow, or an iterable of batches), the threads to use (one for a table below
    ``PARALLEL_MIN_ROWS`` rows) and its rows when known."""
    threads = shd.resolve_threads(threads)
    is_table = isinstance(data, (pa.Table, pa.RecordBatch)) or hasattr(data, "to_arrow") or \
        type(data).__module__.startswith("pandas")
    if not is_table:
        return data, False, threads, _total_rows(data)
    data = as_table(data)
    return data, True, 1 if data.num_rows < shd.PARALLEL_MIN_ROWS else threads, data.num_rows


def match_all(m: Any, data: Any, is_table: bool, time: str, key: Any, meter: Any = None) -> pa.Table:
    """``m.process`` over all of ``data`` (a table, put in time order per key first, or batches),
    then ``m.close()``; the output's ``row`` refers to ``data`` as given."""
    if is_table:
        tbl, order = in_time_order(data, time, key)
        out = pa.concat_tables([m.process(tbl), m.close()])
        if order is None:
            return out
        return out.set_column(out.schema.get_field_index("row"), "row", pa.array(order[out.column("row").to_numpy()]))
    parts = []
    for b in data:
        parts.append(m.process(b))
        if meter is not None:
            meter.update(m.rows_received, m.matches_emitted)
    parts.append(m.close())
    return pa.concat_tables(parts)


def _total_rows(data: Any) -> int | None:
    """The rows of a list or tuple of batches (None for any other iterable: it is read once)."""
    if isinstance(data, (list, tuple)) and all(hasattr(b, "num_rows") for b in data):
        return sum(int(b.num_rows) for b in data)
    return None


def _is_sorted(tbl: pa.Table, time: str, key: Any) -> bool:
    col = tbl.column(time)
    if col.null_count or tbl.num_rows < 2:
        return True  # nulls are reported by the Matcher
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    ts = np.asarray(col.to_numpy(), np.int64)
    return bool(np.all(ts[1:] >= ts[:-1]))


def _keyable(t: pa.DataType) -> bool:
    """A key column's type the order check encodes (any other: the Matcher says what is wrong)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)


def in_time_order(tbl: pa.Table, time: str, key: Any) -> tuple[pa.Table, np.ndarray | None]:
    """``tbl`` with each key's rows in time order, and the permutation applied (None: none was
    needed). A table in time order, or in time order per key (e.g. grouped by key), is taken as
    it is; any other is ordered in linear time (:func:`colcep.engine.ordering.key_time_order`,
    ties in input order). Input a Matcher would refuse is left to it to say what is wrong."""
    from colcep.engine.keys import KeyCodes
    from colcep.engine.ordering import key_time_order

    if time not in tbl.column_names or _is_sorted(tbl, time, key):
        return tbl, None
    t = tbl.schema.field(time).type
    keyable = all(k in tbl.column_names and _keyable(tbl.schema.field(k).type) for k in key_names(key))
    if not keyable or not (pa.types.is_integer(t) or pa.types.is_timestamp(t)):
        return tbl, None
    KeyCodes(key).check_nulls(tbl)  # before ordering, so that an error names the row as given
    order = key_time_order(tbl, key, time, interleaved=True)
    return (tbl, None) if order is None else (tbl.take(pa.array(order)), order)
