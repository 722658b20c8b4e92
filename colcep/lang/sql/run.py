"""Running a MATCH_RECOGNIZE query in process: order and partition the table, match the
query's Pattern through the engine, evaluate MEASURES over the matches."""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.inputs import as_table
from colcep.engine.keys import KeyCodes
from colcep.engine.matcher import match
from colcep.errors import PatternError
from colcep.lang.sql.query import (SqlError, _analyse, _arrow_eval, _err, _Helpers, _int_typed, _Query, as_float64,
                                    _query_pattern, case_branches, function_args, function_name, helpers_for, NULL_SENTINEL)
from colcep.lang.sql import rowtime
from colcep.lang.sql.limits import deep_stack
from colcep.skip import SkipToFirst, SkipToLast

def run(query: str, time_unit: str = "ms", semantics: str = "cep", _stream_times: Any = None,
        **tables: Any) -> pa.Table:
    """The query over in-process tables (pyarrow Tables, pandas or polars DataFrames): the
    matches through the engine, then MEASURES per match (see :func:`colcep.sql`).
    ``_stream_times``: where the table is one part of a stream (a Spark partition), the distinct
    times of the whole stream, for Flink's MATCH_ROWTIME (:mod:`colcep.lang.sql.rowtime`)."""
    with deep_stack(query):
        return _run(query, time_unit, semantics, tables, _stream_times)


def _run(query: str, time_unit: str, semantics: str, tables: dict, stream_times: Any = None) -> pa.Table:
    prep = prepare(query, semantics, tables)
    emitted = None
    try:
        if rowtime.wanted(prep.q):     # Flink's MATCH_ROWTIME: when each match is emitted
            out, emitted = rowtime.match_emitted(prep, time_unit, stream_times)
        else:
            out = match(prep.work, prep.pattern, key=prep.key, time=prep.q.time, columns=[], time_unit=time_unit)
    except SqlError:
        raise
    except PatternError as exc:     # the engine's checks against the input's types: a stage is a DEFINE
        msg = str(exc)
        raise SqlError(re.sub(r"^stage '([^']*)'", r"DEFINE \1", msg) if msg.startswith("stage '") else
                       f"PATTERN: {msg}") from None
    return prep.measures.evaluate(out, prep.work, prep.key_codes, prep.order_idx, emitted)


@dataclass
class Prepared:
    """A query ready to match: its Pattern and the table it runs on (rows in ORDER BY order,
    helper columns added)."""
    q: _Query
    pattern: Any
    work: pa.Table
    key: "str | list[str] | None"
    key_codes: np.ndarray
    order_idx: Any
    measures: "_Measures"


def prepare(query: str, semantics: str, tables: dict) -> Prepared:
    """The query analysed and its table ordered, with the lag / lead and expression columns
    that DEFINE and MEASURES read (the engine's input)."""
    q = _analyse(query, tables, semantics)
    tbl = as_table(tables[q.table])
    columns = tbl.column_names
    for c in q.partition + q.order:
        if c not in columns:
            clause = "PARTITION BY" if c in q.partition else "ORDER BY"
            raise _err(clause, c, f"no column {c!r} in table {q.table} (columns: {', '.join(columns)})")
    helpers = helpers_for(q, tbl.schema, frozenset(c for c in columns if tbl.column(c).null_count))
    pattern = _query_pattern(q, columns, helpers)
    # measures may need lag / lead columns too: resolve them before the table is prepared
    ev = _Measures(q, columns, helpers)
    for name, node, _ in q.measures:
        ev.scan(name, node)
    added = [h for h, _ in helpers.derived.values()] + list(helpers.fills.values()) + list(helpers.shifts.values())
    for h in added:
        if h in columns:
            raise SqlError(f"FROM: the input has a column {h!r}, a name colcep gives a column it adds for this query; "
                           "rename that column")

    # order: by time, then the tie breakers (stable), then the partition key
    n = tbl.num_rows
    sort_keys = [(c, "ascending") for c in q.order]
    order_idx = pc.sort_indices(tbl, sort_keys=sort_keys) if n else pa.array([], pa.uint64())
    work = tbl.take(order_idx)
    key = None
    key_codes = np.zeros(n, np.int64)
    if q.partition:
        for c in q.partition:
            if work.column(c).null_count:
                raise _err("PARTITION BY", c, f"column {c!r} has nulls")
        key = q.partition[0] if len(q.partition) == 1 else list(q.partition)  # a composite match key
        key_codes = KeyCodes(key).encode(work)
    for hname, node in helpers.derived.values():      # expressions inside aggregates, FIRST, LAST
        v = _arrow_eval(node, work, helpers.ints)
        work = work.append_column(hname, v if not isinstance(v, pa.Scalar) else pa.array([v.as_py()] * n, pa.float64()))
    for cname, hname in helpers.fills.items():        # FIRST / LAST of a column with NULLs
        work = work.append_column(hname, pc.fill_null(as_float64(work.column(cname)), NULL_SENTINEL))
    # lag / lead columns per partition (PREV / NEXT)
    if helpers.shifts:
        by_key = np.argsort(key_codes, kind="stable")
        kc = key_codes[by_key]
        for (cname, k), hname in helpers.shifts.items():
            # in key order (stable: time order within a key), the row k later (k > 0) or earlier
            pos = np.arange(n)
            tgt = pos + k
            ok = (tgt >= 0) & (tgt < n)
            ok[ok] = kc[pos[ok]] == kc[tgt[ok]]
            idx = np.full(n, -1, np.int64)
            idx[by_key[pos[ok]]] = by_key[tgt[ok]]
            take = pa.array(idx, mask=idx < 0)
            work = work.append_column(hname, work.column(cname).take(take))
    return Prepared(q, pattern, work, key, key_codes, order_idx, ev)


class _Measures:
    """MEASURES and the output table."""

    def __init__(self, q: _Query, columns: list[str], helpers: _Helpers):
        self.q = q
        self.columns = columns
        self.helpers = helpers
        self.running = False

    # -- checking, and the lag / lead columns the measures need -----------------------
    def scan(self, name: str, node) -> None:
        from sqlglot import exp
        for c in node.find_all(exp.Column):
            if isinstance(c.this, exp.Star):
                continue
            if c.table and c.table not in self.q.variables:
                raise _err(f"MEASURES {name}", c, f"{c.table!r} is not a pattern variable "
                           f"({', '.join(self.q.variables)})")
            if c.name not in self.columns:
                raise _err(f"MEASURES {name}", c, f"no column {c.name!r} in the input")
        for f in node.find_all(exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count, exp.First, exp.Last):
            arg = f.this
            if arg is not None and not isinstance(arg, (exp.Column, exp.Star, exp.Distinct)):
                self.helpers.expression(arg, f"MEASURES {name}", self.q.variables, self.columns)
        for f in node.find_all(exp.Anonymous, exp.Func):
            fn = function_name(f)
            if fn in ("PREV", "NEXT", "LAG", "LEAD"):
                args = function_args(f)
                k = int(args[1].this) if len(args) > 1 and isinstance(args[1], exp.Literal) else 1
                if not args or not isinstance(args[0], exp.Column):
                    raise _err(f"MEASURES {name}", f, f"{fn} takes a column")
                self.helpers.shifted(args[0].name, -k if fn in ("PREV", "LAG") else k)

    # -- evaluation --------------------------------------------------------------------
    def evaluate(self, out: pa.Table, work: pa.Table, key_codes: np.ndarray, order_idx,
                 emitted: np.ndarray | None = None) -> pa.Table:
        """The output rows of the matches ``out``; ``emitted``: per match id the time it was
        emitted at (Flink mode's MATCH_ROWTIME, :mod:`colcep.lang.sql.rowtime`)."""
        from sqlglot import exp
        q = self.q
        mid = out.column("match_id").to_numpy()
        rows = out.column("row").to_numpy()
        stages = out.column("stage").to_numpy(zero_copy_only=False).astype(object)
        # matches in emission order, their events by row
        uniq, first_pos = np.unique(mid, return_index=True)
        order_m = np.argsort(first_pos, kind="stable")
        mids = uniq[order_m]
        rank = np.empty(len(uniq), np.int64)
        rank[order_m] = np.arange(len(uniq))
        mpos = rank[np.searchsorted(uniq, mid)] if len(mid) else np.zeros(0, np.int64)
        ev = np.lexsort((rows, mpos))
        self.mpos, self.rows, self.stages = mpos[ev], rows[ev], stages[ev]
        self.nm = len(mids)
        self.emitted = None if emitted is None else emitted[mids]
        self.work = work
        self.starts = np.searchsorted(self.mpos, np.arange(self.nm), "left")
        self.ends = np.searchsorted(self.mpos, np.arange(self.nm), "right")
        self.last_row = self.rows[self.ends - 1] if self.nm else np.zeros(0, np.int64)
        first_row = self.rows[self.starts] if self.nm else np.zeros(0, np.int64)
        # MATCH_NUMBER: 1, 2, ... per partition in emission order
        kc = key_codes[first_row] if self.nm else np.zeros(0, np.int64)
        by = np.lexsort((np.arange(self.nm), kc))
        num = np.empty(self.nm, np.int64)
        if self.nm:
            ks = kc[by]
            grp_start = np.r_[0, np.flatnonzero(ks[1:] != ks[:-1]) + 1]
            run = np.arange(self.nm) - np.repeat(grp_start, np.diff(np.r_[grp_start, self.nm]))
            num[by] = run + 1
        self.match_number = num
        if q.flink and isinstance(q.skip, (SkipToFirst, SkipToLast)):
            self._flink_skip_check(first_row)

        cols: dict[str, pa.Array] = {}
        if not q.all_rows:
            for c in q.partition:
                cols[c] = work.column(c).take(pa.array(first_row)) if self.nm else work.column(c).slice(0, 0)
            self.running = False          # ONE ROW PER MATCH: running and final values are the same
            for name, node, _ in q.measures:
                cols[name] = self._combine_chunks(self.value(name, node))
        else:
            ev_match = self.mpos
            take_ev = pa.array(self.rows)
            for c in q.partition + [c for c in q.order if c not in q.partition]:
                cols[c] = work.column(c).take(take_ev)
            for name, node, frame in q.measures:
                # RUNNING (the default with ALL ROWS PER MATCH): over the match's rows up to this one
                self.running = frame != "FINAL"
                v = self._combine_chunks(self.value(name, node))
                cols[name] = v if self.running else v.take(pa.array(ev_match))
            for c in self.columns:
                if c not in cols:
                    cols[c] = work.column(c).take(take_ev)
        table = pa.table({k: self._combine_chunks(v) for k, v in cols.items()})
        return self._select(table)

    def _flink_skip_check(self, first_row: np.ndarray) -> None:
        """Flink fails the job on the first match it emits whose skip target has no row, or whose
        target row is the match's first (the next match would start where this one did): of the
        matches that would, the one completing first."""
        skip = self.q.skip
        to_first = isinstance(skip, SkipToFirst)
        clause = f"AFTER MATCH SKIP TO {'FIRST' if to_first else 'LAST'} {skip.stage}"
        sel = np.flatnonzero(self.stages == skip.stage)
        missing = np.bincount(self.mpos[sel], minlength=self.nm) == 0
        # the events are ordered by (match, row): a match's first / last event of the target
        at = np.searchsorted(self.mpos[sel], np.arange(self.nm), "left" if to_first else "right")
        at = at if to_first else at - 1
        target = np.full(self.nm, -1, np.int64)
        target[~missing] = self.rows[sel][at[~missing]]
        failing = np.flatnonzero(missing | (target == first_row))
        if not len(failing):
            return
        m = int(failing[np.argmin(self.last_row[failing])])
        if missing[m]:
            raise SqlError(f"{clause}: a match has no row of {skip.stage} (the match ending at "
                           f"{self._time_at(self.last_row[m])}); Flink fails the job here ('Could not skip to "
                           f"{skip.stage}. No such element in the found match')")
        raise SqlError(f"{clause}: the target is the first row of a match (the match starting at "
                       f"{self._time_at(first_row[m])}), so the next match would start where this one did; "
                       "Flink fails the job here ('Could not skip to first element of a match')")

    def _time_at(self, row: int) -> Any:
        return self.work.column(self.q.time)[int(row)].as_py()

    @staticmethod
    def _combine_chunks(a):
        return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a

    def _select(self, table: pa.Table) -> pa.Table:
        from sqlglot import exp
        sel = self.q.select
        if len(sel) == 1 and isinstance(sel[0], exp.Star):
            return table
        out = {}
        for s in sel:
            node, name = (s.this, s.alias) if isinstance(s, exp.Alias) else (s, None)
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                out.update({c: table.column(c) for c in table.column_names})
                continue
            if not isinstance(node, exp.Column):
                raise _err("SELECT", s, "only columns of the MATCH_RECOGNIZE output (or *) can be selected")
            if node.table and node.table not in (self.q.alias, self.q.table):
                raise _err("SELECT", s, f"unknown table {node.table!r}")
            if node.name not in table.column_names:
                raise _err("SELECT", s, f"no column {node.name!r} in the MATCH_RECOGNIZE output "
                           f"({', '.join(table.column_names)})")
            out[name or node.name] = table.column(node.name)
        return pa.table(out)

    # -- one measure -------------------------------------------------------------------
    def _events_of(self, var: str | None) -> np.ndarray:
        """Positions (into the sorted event arrays) of the events of ``var`` (None: all)."""
        if var is None:
            return np.arange(len(self.rows))
        return np.flatnonzero(self.stages == var)

    def _nth(self, var: str | None, n: int, from_end: bool) -> np.ndarray:
        """Per match (running: per event, over the match's events up to it), the input row of the
        n-th first / last event of var (-1 if none)."""
        if self.running:
            return self._running_nth(var, n, from_end)
        sel = self._events_of(var)
        mp = self.mpos[sel]
        lo = np.searchsorted(mp, np.arange(self.nm), "left")
        hi = np.searchsorted(mp, np.arange(self.nm), "right")
        pos = hi - 1 - n if from_end else lo + n
        ok = (pos >= lo) & (pos < hi)
        out = np.full(self.nm, -1, np.int64)
        out[ok] = self.rows[sel[pos[ok]]]
        return out

    def _gather(self, column: str, rows: np.ndarray) -> pa.Array:
        c = self.work.column(column)
        return self._combine_chunks(c.take(pa.array(rows, mask=rows < 0))) if len(rows) else \
            self._combine_chunks(c.slice(0, 0))

    def _running_counts(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per event: how many events of ``mask`` its match has up to it, and how many before
        the match (an index into ``flatnonzero(mask)``)."""
        cs = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
        before = cs[self.starts][self.mpos] if len(self.mpos) else np.zeros(0, np.int64)
        return cs[1:] - before, before

    def _running_nth(self, var: str | None, n: int, from_end: bool) -> np.ndarray:
        mask = np.ones(len(self.rows), bool) if var is None else (self.stages == var)
        cnt, before = self._running_counts(mask)
        pos = np.flatnonzero(mask)
        k = cnt - 1 - n if from_end else np.full(len(cnt), n)
        ok = (k >= 0) & (k < cnt)
        out = np.full(len(cnt), -1, np.int64)
        out[ok] = self.rows[pos[before[ok] + k[ok]]]
        return out

    def _running_agg(self, func: str, column: str | None, var: str | None) -> pa.Array:
        mask = np.ones(len(self.rows), bool) if var is None else (self.stages == var)
        if column is None:                                    # COUNT(*)
            return pa.array(self._running_counts(mask)[0])
        vals = self._gather(column, self.rows)
        if not (pa.types.is_integer(vals.type) or pa.types.is_floating(vals.type)):
            raise SqlError(f"MEASURES: a RUNNING {func.upper()} needs a numeric column, {column!r} is {vals.type}; "
                           "use FINAL")
        x = as_float64(vals).to_numpy(zero_copy_only=False)
        m = mask & ~np.isnan(x)
        n, _ = self._running_counts(m)
        if func == "count":
            return pa.array(n)
        if func in ("sum", "avg"):
            cs = np.concatenate([[0.0], np.cumsum(np.where(m, x, 0.0))])
            tot = cs[1:] - (cs[self.starts][self.mpos] if len(self.mpos) else 0.0)
            res = tot if func == "sum" else tot / np.maximum(n, 1)
            arr = pa.array(res, mask=n == 0)
            return arr.cast(vals.type) if func == "sum" and pa.types.is_integer(vals.type) else arr
        y = np.where(m, x, np.nan)
        ufunc = np.fmin if func == "min" else np.fmax
        for a, b in zip(self.starts, self.ends):
            y[a:b] = ufunc.accumulate(y[a:b])
        arr = pa.array(y, mask=n == 0)
        return arr.cast(vals.type) if pa.types.is_integer(vals.type) else arr

    def _agg(self, func: str, column: str | None, var: str | None) -> pa.Array:
        if self.running:
            return self._running_agg(func, column, var)
        sel = self._events_of(var)
        mp = self.mpos[sel]
        if column is None:                     # COUNT(*)
            counts = np.bincount(mp, minlength=self.nm) if self.nm else np.zeros(0, np.int64)
            return pa.array(counts.astype(np.int64))
        vals = self._gather(column, self.rows[sel])
        t = pa.table({"m": pa.array(mp, pa.int64()), "v": vals})
        fn = {"avg": "mean", "count": "count"}.get(func, func)
        g = t.group_by("m").aggregate([("v", fn)])
        res_type = g.column(f"v_{fn}").type
        idx = np.full(self.nm, -1, np.int64)
        idx[g.column("m").to_numpy()] = np.arange(g.num_rows)
        res = self._combine_chunks(g.column(f"v_{fn}")).take(pa.array(idx, mask=idx < 0))
        if func == "count":
            res = pc.fill_null(res, 0)
        return res.cast(res_type)

    def value(self, name: str, node):  # noqa: C901 - one dispatch
        from sqlglot import exp
        clause = f"MEASURES {name}"
        if isinstance(node, exp.Paren):
            return self.value(name, node.this)
        size = len(self.rows) if self.running else self.nm
        if isinstance(node, exp.Literal):
            if node.is_string:
                return pa.array([node.this] * size, pa.string())
            if re.fullmatch(r"\d+", node.this):
                return pa.array([int(node.this)] * size, pa.int64())
            return pa.array([float(node.this)] * size, pa.float64())
        if isinstance(node, exp.Null):
            return pa.nulls(size)
        if isinstance(node, exp.Column):
            var = node.table or None
            return self._gather(node.name, self._nth(var, 0, True))
        if isinstance(node, exp.Neg):
            return pc.negate(self.value(name, node.this))
        ops = {exp.Add: pc.add, exp.Sub: pc.subtract, exp.Mul: pc.multiply, exp.Div: pc.divide,
               exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.LT: pc.less, exp.LTE: pc.less_equal,
               exp.GT: pc.greater, exp.GTE: pc.greater_equal, exp.And: pc.and_kleene, exp.Or: pc.or_kleene}
        for cls, f in ops.items():
            if type(node) is cls:
                a, b = self.value(name, node.this), self.value(name, node.expression)
                if isinstance(node, exp.Div):
                    a, b = as_float64(a), as_float64(b)
                    if _int_typed(node, self.helpers.ints):      # Flink: INT / INT is an INT, truncated
                        if pc.any(pc.equal(b, 0.0)).as_py():
                            raise _err(clause, node, "an integer division by zero (Flink fails the job: / by zero)")
                        return pc.cast(pc.trunc(f(a, b)), pa.int64())
                return f(a, b)
        if isinstance(node, exp.Not):
            return pc.invert(self.value(name, node.this))
        if isinstance(node, exp.Boolean):
            return pa.array([bool(node.this)] * size, pa.bool_())
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return pc.is_null(self.value(name, node.this))
        if isinstance(node, exp.Case):
            branches = case_branches(node)
            conds = [pc.fill_null(self.value(name, cond), False) for cond, _ in branches[:-1]]
            vals = [self.value(name, value) for _, value in branches]
            types = {v.type for v in vals if not pa.types.is_null(v.type)}     # NULL branches take the others' type
            common = (types.pop() if len(types) == 1 else pa.float64()) if types else pa.null()
            vals = [pc.cast(v, common, safe=False) for v in vals]
            return pc.case_when(pc.make_struct(*conds, field_names=[str(i) for i in range(len(conds))]), *vals)
        if isinstance(node, exp.Abs):
            return pc.abs(self.value(name, node.this))
        if isinstance(node, (exp.Floor, exp.Ceil)):
            v = self.value(name, node.this)
            return v if pa.types.is_integer(v.type) else (pc.floor if isinstance(node, exp.Floor) else pc.ceil)(v)
        if isinstance(node, exp.Mod):      # the sign of the dividend, as SQL (and Java) have it
            a, b = self.value(name, node.this), self.value(name, node.expression)
            if _int_typed(node, self.helpers.ints) and pc.any(pc.equal(b, 0)).as_py():
                raise _err(clause, node, "an integer MOD by zero (Flink fails the job: / by zero)")
            r = pc.subtract(a, pc.multiply(b, pc.trunc(pc.divide(as_float64(a), as_float64(b)))))
            return pc.cast(r, a.type) if pa.types.is_integer(a.type) and pa.types.is_integer(b.type) else r
        if isinstance(node, (exp.First, exp.Last)):
            return self._first_last(clause, node, isinstance(node, exp.Last),
                                    [node.this] + ([node.expression] if node.expression is not None else []))
        if isinstance(node, (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count)):
            func = type(node).__name__.lower()
            arg = node.this
            if isinstance(arg, exp.Star):
                return self._agg("count", None, None)
            if isinstance(arg, exp.Column) and isinstance(arg.this, exp.Star):
                return self._agg("count", None, arg.table or None)
            if isinstance(arg, exp.Distinct):
                raise _err(clause, node, "DISTINCT aggregates are not supported (as in Flink)")
            if not isinstance(arg, exp.Column):
                var, hname = self.helpers.expression(arg, clause, self.q.variables, self.columns)
                res = self._agg(func, hname, var)
            else:
                res = self._agg(func, arg.name, arg.table or None)
            if func == "avg" and _int_typed(node, self.helpers.ints):     # Flink: AVG of an INT is an INT
                res = pc.cast(pc.trunc(res), pa.int64())
            return res
        if isinstance(node, exp.Anonymous) or (isinstance(node, exp.Func) and function_name(node) in
                                                ("PREV", "NEXT", "LAG", "LEAD")):
            fn, args = function_name(node), function_args(node)
            if fn == "CLASSIFIER":
                if self.running:
                    return pa.array(self.stages.tolist(), pa.string())     # the row's variable
                last_pos = self.ends - 1
                return pa.array(self.stages[last_pos].tolist() if self.nm else [], pa.string())
            if fn == "MATCH_ROWTIME":
                if args and not (isinstance(args[0], exp.Column) and args[0].name == self.q.time):
                    raise _err(clause, node, f"MATCH_ROWTIME takes no argument or the time column {self.q.time!r}")
                if self.emitted is not None:    # flink: the time the match is emitted at (rowtime.py)
                    return pa.array(self.emitted, pa.int64()).cast(self.work.schema.field(self.q.time).type)
                # cep: the time of the match's last row (so far, when running)
                return self._gather(self.q.time, self.rows if self.running else self.last_row)
            if fn == "MATCH_PROCTIME":      # processing time: when the match is evaluated
                now = pa.scalar(dt.datetime.now(dt.timezone.utc), pa.timestamp("ms", "UTC"))
                return pa.array([now.as_py()] * size, now.type)
            if fn == "MATCH_NUMBER":
                return pa.array(self.match_number[self.mpos] if self.running else self.match_number)
            if fn in ("FIRST", "LAST"):
                return self._first_last(clause, node, fn == "LAST", args)
            if fn in ("PREV", "NEXT", "LAG", "LEAD"):
                k = int(args[1].this) if len(args) > 1 else 1
                c = args[0]
                h = self.helpers.shifted(c.name, -k if fn in ("PREV", "LAG") else k)
                return self._gather(h, self._nth(c.table or None, 0, True))
            raise _err(clause, node, f"unsupported function {node.name}()")
        if isinstance(node, exp.Func):
            raise _err(clause, node, f"unsupported function {type(node).__name__.upper()}()")
        raise _err(clause, node, f"unsupported expression ({type(node).__name__})")

    def _first_last(self, clause: str, node, from_end: bool, args) -> pa.Array:
        from sqlglot import exp
        if not args:
            raise _err(clause, node, "FIRST / LAST take a column")
        n = 0
        if len(args) > 1:
            a = args[1]
            if not isinstance(a, exp.Literal) or a.is_string or not re.fullmatch(r"\d+", a.this):
                raise _err(clause, node, "the offset must be a non-negative integer literal")
            n = int(a.this)
        c = args[0]
        if not isinstance(c, exp.Column):
            var, hname = self.helpers.expression(c, clause, self.q.variables, self.columns)
            return self._gather(hname, self._nth(var, n, from_end))
        return self._gather(c.name, self._nth(c.table or None, n, from_end))


