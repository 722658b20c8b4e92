"""MEASURES (and the one-row expressions DEFINE leaves to Arrow), evaluated column-at-a-time
with Arrow over the matches the kernel found.

A :class:`Frame` is a set of positions where expressions are evaluated: one per output row,
each in a match (``m``), standing on its row ``k`` of the match (RUNNING sees the match's rows up
to it, FINAL all of them). Navigation finds rows by counting labels (cumulative counts per
variable set over the matches' labels), an aggregate expands each position into its rows and
groups them back with Arrow.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from colcep.lang.sql.standard.program import ref_var
from colcep.lang.sql.standard.syntax import AGGREGATES, StdError, _call, _ident, _is_call, _table_var, int_literal


@dataclass
class Matches:
    """What the kernel found, over the input in partition-then-ORDER-BY order."""
    table: pa.Table               # the input
    perm: np.ndarray              # its rows in partition-then-ORDER-BY order (row numbers below are positions here)
    names: dict[str, str]         # lower-case column name -> the table's
    variables: list[str]
    subsets: dict[str, set]
    start: np.ndarray             # per match: first row, end (exclusive), number, label offset
    end: np.ndarray
    number: np.ndarray
    lab: np.ndarray
    lab_var: np.ndarray           # per label: variable index
    pstart: np.ndarray            # per match: its partition's rows
    pend: np.ndarray

    def members(self, var: str | None) -> np.ndarray:
        """Per variable index: in ``var``'s set (None: the universal variable)?"""
        if var is None:
            return np.ones(len(self.variables), bool)
        names = self.subsets.get(var, {var})
        if not names <= set(self.variables):
            raise StdError(f"MEASURES: {var!r} is not a pattern variable or SUBSET ({', '.join(self.variables)})")
        return np.array([v in names for v in self.variables], bool)


class Frame:
    """Positions to evaluate at: match ``m`` (-1: none, every measure is null), standing on its
    row ``k`` (-1: before its first; running semantics see rows 0..k)."""

    def __init__(self, mt: Matches, m: np.ndarray, k: np.ndarray, running: bool, clause: str = "MEASURES"):
        self.mt, self.m, self.k, self.running, self.clause = mt, m, k, running, clause
        self.n = len(m)
        ok = m >= 0
        mm = np.where(ok, m, 0)
        self.ok = ok
        self.mstart = np.where(ok, mt.start[mm] if len(mt.start) else 0, 0)
        self.mlen = np.where(ok, (mt.end - mt.start)[mm] if len(mt.start) else 0, 0)
        self.mlab = np.where(ok, mt.lab[mm] if len(mt.start) else 0, 0)
        self._cum: dict = {}

    # -- rows ------------------------------------------------------------------------------
    def visible(self, final: bool) -> np.ndarray:
        return self.mlen if final or not self.running else np.minimum(self.k + 1, self.mlen)

    def _counts(self, var: str | None):
        if var not in self._cum:
            mask = self.mt.members(var)[self.mt.lab_var] if len(self.mt.lab_var) else np.zeros(0, bool)
            self._cum[var] = (np.concatenate([[0], np.cumsum(mask, dtype=np.int64)]), np.flatnonzero(mask))
        return self._cum[var]

    def rows_of(self, var: str | None, fn: str, n: int, final: bool) -> np.ndarray:
        """The row of ``FIRST / LAST(var, n)`` at each position (-1: none). FIRST counts from the
        match's first row over the whole match, as Trino does."""
        vis = self.visible(final or fn == "FIRST")
        if var is None:
            idx = n if fn == "FIRST" else vis - 1 - n
            return np.where(self.ok & (idx >= 0) & (idx < vis), self.mstart + idx, -1)
        cs, pos = self._counts(var)
        lo = cs[self.mlab]
        hi = cs[self.mlab + vis]
        j = lo + n if fn == "FIRST" else hi - 1 - n
        good = self.ok & (j >= lo) & (j < hi)
        out = np.full(self.n, -1, np.int64)
        out[good] = self.mstart[good] + pos[j[good]] - self.mlab[good]
        return out

    def label_at(self, rows: np.ndarray) -> pa.Array:
        """The variable each row is labelled with in the position's match (null outside it)."""
        inside = self.ok & (rows >= self.mstart) & (rows < self.mstart + self.mlen)
        out = np.full(self.n, -1, np.int64)
        out[inside] = self.mt.lab_var[self.mlab[inside] + rows[inside] - self.mstart[inside]]
        names = pa.array(self.mt.variables, pa.string())
        return names.take(pa.array(out, mask=out < 0))

    def gather(self, column: str, rows: np.ndarray) -> pa.Array:
        name = self.mt.names.get(column.lower())
        if name is None:
            raise StdError(f"{self.clause}: no column {column!r} in the input (columns: "
                           f"{', '.join(self.mt.table.column_names)})")
        col = self.mt.table.column(name)
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        col = col.dictionary_decode() if pa.types.is_dictionary(col.type) else col
        return col.take(pa.array(self.mt.perm[np.maximum(rows, 0)], mask=rows < 0))

    # -- values ----------------------------------------------------------------------------
    def ev(self, node, final: bool, at: np.ndarray | None = None):  # noqa: C901 - one dispatch
        """``node``'s value at every position (an Arrow array or scalar); ``at``: the rows that
        column references read (inside a navigation or an aggregate)."""
        if isinstance(node, (exp.Paren, exp.Alias)):
            return self.ev(node.this, final, at)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return pa.scalar(node.this, pa.string())
            return pa.scalar(int(node.this)) if re.fullmatch(r"-?\d+", node.this) else pa.scalar(float(node.this))
        if isinstance(node, exp.Boolean):
            return pa.scalar(bool(node.this))
        if isinstance(node, exp.Null):
            return pa.scalar(None)
        if isinstance(node, exp.Column):
            if at is None:
                at = self.rows_of(_table_var(node) if node.table else None, "LAST", 0, final)
            return self.gather(node.name, at)
        if isinstance(node, exp.Neg):
            return pc.negate(self.ev(node.this, final, at))
        if isinstance(node, exp.Not):
            return pc.invert(self.ev(node.this, final, at))
        if isinstance(node, exp.And):
            return pc.and_kleene(self.ev(node.left, final, at), self.ev(node.right, final, at))
        if isinstance(node, exp.Or):
            return pc.or_kleene(self.ev(node.left, final, at), self.ev(node.right, final, at))
        if isinstance(node, exp.Is):
            return pc.is_null(self.ev(node.this, final, at))
        if isinstance(node, exp.Between):
            v = self.ev(node.this, final, at)
            return pc.and_kleene(pc.greater_equal(v, self.ev(node.args["low"], final, at)),
                                 pc.less_equal(v, self.ev(node.args["high"], final, at)))
        if isinstance(node, exp.In):
            v = self.ev(node.this, final, at)
            vals = [self.ev(e, final, at) for e in node.expressions]
            out = None
            for x in vals:
                eq = pc.equal(v, x)
                out = eq if out is None else pc.or_kleene(out, eq)
            return out
        ops = {exp.Add: pc.add_checked, exp.Sub: pc.subtract_checked, exp.Mul: pc.multiply_checked,
               exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.LT: pc.less, exp.LTE: pc.less_equal,
               exp.GT: pc.greater, exp.GTE: pc.greater_equal}
        if type(node) in ops:
            return ops[type(node)](self.ev(node.left, final, at), self.ev(node.right, final, at))
        if isinstance(node, (exp.Div, exp.Mod)):
            a, b = self.ev(node.left, final, at), self.ev(node.right, final, at)
            ints = pa.types.is_integer(a.type) and pa.types.is_integer(b.type)
            if ints:                                  # exact, truncated toward zero, as in Trino
                if pc.any(pc.equal(b, 0)).as_py():
                    if self.clause != "DEFINE":
                        raise StdError(f"{self.clause}: Division by zero ({node.sql()!r})")
                    # a DEFINE function's column is computed for every row, taken or not: NULL there
                    b = pc.if_else(pc.equal(b, 0), pa.scalar(None, b.type), b)
                q = pc.divide(a, b)
                return q if isinstance(node, exp.Div) else pc.subtract(a, pc.multiply(b, q))
            a, b = pc.cast(a, pa.float64()), pc.cast(b, pa.float64())
            if isinstance(node, exp.Div):
                return pc.divide(a, b)
            return pc.subtract(a, pc.multiply(b, pc.trunc(pc.divide(a, b))))
        if isinstance(node, exp.DPipe):
            return pc.binary_join_element_wise(self._str(node.left, final, at), self._str(node.right, final, at), "")
        if isinstance(node, exp.ConcatWs):
            sep, *parts = node.expressions
            vals = []
            for p in parts:
                v = self.ev(p, final, at)
                vals.append(pc.binary_join(pc.cast(v, pa.list_(pa.string())), self.ev(sep, final, at))
                            if pa.types.is_list(v.type) else pc.cast(v, pa.string()))
            return pc.binary_join_element_wise(*vals, self.ev(sep, final, at), null_handling="skip")
        if isinstance(node, exp.Lower):
            return pc.utf8_lower(self.ev(node.this, final, at))
        if isinstance(node, exp.Upper):
            return pc.utf8_upper(self.ev(node.this, final, at))
        if isinstance(node, exp.Abs):
            return pc.abs(self.ev(node.this, final, at))
        if isinstance(node, (exp.Floor, exp.Ceil)):
            v = self.ev(node.this, final, at)
            return v if pa.types.is_integer(v.type) else (pc.floor if isinstance(node, exp.Floor) else pc.ceil)(v)
        if isinstance(node, exp.Round):
            v = self.ev(node.this, final, at)
            digits = int_literal(node.args.get("decimals"), 0, f"{self.clause}: ROUND")
            if pa.types.is_integer(v.type) and digits >= 0:
                return v
            return pc.round(v, digits, round_mode="half_towards_infinity")
        if isinstance(node, exp.Length):
            return pc.utf8_length(self._str(node.this, final, at))
        if isinstance(node, exp.Trim):
            v = self._str(node.this, final, at)
            chars = node.args.get("expression")
            side = str(node.args.get("position") or "BOTH").upper()
            if chars is None:
                fn = {"LEADING": pc.utf8_ltrim_whitespace, "TRAILING": pc.utf8_rtrim_whitespace}.get(
                    side, pc.utf8_trim_whitespace)
                return fn(v)
            if not (isinstance(chars, exp.Literal) and chars.is_string):
                raise StdError(f"{self.clause}: TRIM takes literal characters ({node.sql()!r})")
            fn = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}.get(side, pc.utf8_trim)
            return fn(v, chars.this)
        if isinstance(node, exp.Substring):
            start = int_literal(node.args.get("start"), None, f"{self.clause}: SUBSTRING")
            n = int_literal(node.args.get("length"), None, f"{self.clause}: SUBSTRING")
            v = self._str(node.this, final, at)
            if start == 0 or (n is not None and n <= 0):        # Trino: position 0 gives ''
                return pc.utf8_slice_codeunits(v, 0, 0)
            a = start - 1 if start > 0 else start           # a negative start counts from the end
            stop = None if n is None else a + n
            if a < 0 and stop is not None and stop >= 0:    # ... and a length past the end stops there
                stop = None
            return pc.utf8_slice_codeunits(v, a, stop)
        if isinstance(node, exp.Concat):
            return pc.binary_join_element_wise(*[self._str(e, final, at) for e in node.expressions], "")
        if isinstance(node, exp.Cast):
            return self._cast(self.ev(node.this, final, at), node.to)
        if isinstance(node, exp.Coalesce):
            return pc.coalesce(*[self.ev(a, final, at) for a in [node.this, *node.expressions]])
        if isinstance(node, exp.Case):
            return self._case(node, final, at)
        if _is_call(node):
            return self._call(node, final, at)
        raise StdError(f"{self.clause}: {node.sql()!r} is not supported")

    def _str(self, node, final, at):
        v = self.ev(node, final, at)
        return v if pa.types.is_string(v.type) else pc.cast(v, pa.string())

    def _cast(self, v, to):
        t = to.this
        T = exp.DataType.Type
        target = {T.VARCHAR: pa.string(), T.CHAR: pa.string(), T.BIGINT: pa.int64(), T.INT: pa.int32(),
                  T.SMALLINT: pa.int16(), T.TINYINT: pa.int8(), T.DOUBLE: pa.float64(), T.FLOAT: pa.float32(),
                  T.BOOLEAN: pa.bool_(), T.DECIMAL: pa.float64()}.get(t)
        if target is None:
            raise StdError(f"{self.clause}: CAST to {to.sql()} is not supported")
        if pa.types.is_string(v.type) and (pa.types.is_integer(target) or pa.types.is_floating(target)):
            v = self._cast_checked(v, pa.float64(), to)
        if pa.types.is_integer(target) and pa.types.is_floating(v.type):   # a double to an integer rounds
            v = pc.round(v, round_mode="half_towards_infinity")
        scale = to.expressions[1].this.this if t == T.DECIMAL and len(to.expressions) > 1 else None
        if scale is not None:                                                # DECIMAL(p, s) rounds to s digits
            v = pc.round(self._cast_checked(v, pa.float64(), to), int(scale), round_mode="half_towards_infinity")
        return self._cast_checked(v, target, to)

    def _cast_checked(self, v, target, to):
        try:
            return pc.cast(v, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise StdError(f"{self.clause}: cannot cast to {to.sql()}: {e}") from None

    def subset(self, idx: np.ndarray) -> "Frame":
        """The positions ``idx`` of this frame."""
        return Frame(self.mt, self.m[idx], self.k[idx], self.running, self.clause)

    def _case(self, node, final, at):
        """Each branch evaluated only where it is taken (a guarded division fails nowhere else)."""
        left = np.arange(self.n)
        parts, where = [], []
        branches = [(w.this if node.this is None else exp.EQ(this=node.this.copy(), expression=w.this.copy()),
                     w.args["true"]) for w in node.args.get("ifs") or []]
        d = node.args.get("default")
        for cond, value in branches + [(None, d if d is not None else exp.Null())]:
            sub = self.subset(left)
            sub_at = at[left] if at is not None else None
            if cond is not None:
                taken = sub._full(pc.fill_null(sub._full(sub.ev(cond, final, sub_at)), False)).to_numpy(
                    zero_copy_only=False).astype(bool)
                idx = left[taken]
                left = left[~taken]
            else:
                idx = left
            if len(idx) or not parts:
                one = self.subset(idx)
                parts.append(one._full(one.ev(value, final, at[idx] if at is not None else None)))
                where.append(idx)
        types = {v.type for v in parts if not pa.types.is_null(v.type)}
        if len(types) > 1 and any(pa.types.is_string(t) or pa.types.is_large_string(t) for t in types):
            raise StdError(f"{self.clause}: the branches of {node.sql()!r} mix strings and other types")
        if len(types) > 1 and all(pa.types.is_integer(t) for t in types):
            common = pa.int64()
        else:
            common = types.pop() if len(types) == 1 else (pa.float64() if types else pa.null())
        values = pa.concat_arrays([pc.cast(v, common) for v in parts])
        order = np.empty(self.n, np.int64)
        order[np.concatenate(where)] = np.arange(self.n)
        return values.take(pa.array(order))

    def _full(self, v) -> pa.Array:
        if isinstance(v, pa.Scalar):
            return pa.array([v.as_py()] * self.n, v.type if not pa.types.is_null(v.type) else None)
        return v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v

    def _call(self, node, final, at):  # noqa: C901
        name, args, fin = _call(node)
        if fin is not None:
            final = fin
        if name == "MATCH_NUMBER":
            num = self.mt.number[np.where(self.ok, self.m, 0)] if len(self.mt.number) else np.zeros(self.n, np.int64)
            return pa.array(num, mask=~self.ok)
        if name == "CLASSIFIER":
            var = _ident(args[0].sql()) if args else None
            return self.label_at(at if at is not None else self.rows_of(var, "LAST", 0, final))
        if name in ("PREV", "NEXT"):
            inner = args[0]
            n = _offset(args, 1, 1)
            if _is_call(inner) and _call(inner)[0] in ("FIRST", "LAST"):
                iname, iargs, ifin = _call(inner)
                base = self.rows_of(ref_var(iargs[0]), iname, _offset(iargs, 1, 0), final if ifin is None else ifin)
                expr_ = iargs[0]
            else:
                base, expr_ = self.rows_of(ref_var(inner), "LAST", 0, final), inner
            target = base + (-n if name == "PREV" else n)
            pstart = self.mt.pstart[np.where(self.ok, self.m, 0)] if len(self.mt.pstart) else 0
            pend = self.mt.pend[np.where(self.ok, self.m, 0)] if len(self.mt.pend) else 0
            target = np.where((base >= 0) & (target >= pstart) & (target < pend), target, -1)
            return self.ev(expr_, final, target)
        if name in ("FIRST", "LAST"):
            return self.ev(args[0], final, self.rows_of(ref_var(args[0]), name, _offset(args, 1, 0), final))
        if name in AGGREGATES:
            return self._aggregate(name, args, final)
        raise StdError(f"{self.clause}: the function {name} is not supported")

    def _aggregate(self, name: str, args, final: bool):
        allrows = bool(args) and _is_call(args[0]) and _call(args[0])[0] == "__ALLROWS"
        if allrows:
            var = _ident(args[0].expressions[0].sql())
        elif args and not isinstance(args[0], exp.Star):
            var = ref_var(exp.Tuple(expressions=[a.copy() for a in args]))
        else:
            var = None
        # every position's rows of var: (position, row) pairs
        vis = self.visible(final)
        if var is None:
            cnt = np.where(self.ok, vis, 0)
        else:
            cs, pos = self._counts(var)
            lo = cs[self.mlab]
            cnt = np.where(self.ok, cs[self.mlab + vis] - lo, 0)
        j = np.repeat(np.arange(self.n), cnt)
        ramp = np.arange(len(j)) - np.repeat(np.cumsum(cnt) - cnt, cnt)   # 0, 1, ... within each position
        rows = self.mstart[j] + (ramp if var is None else pos[lo[j] + ramp] - self.mlab[j])
        if name == "COUNT" and (not args or allrows or isinstance(args[0], exp.Star)):
            return pa.array(cnt.astype(np.int64))
        sub = self.subset(j)
        vals = sub._full(sub.ev(args[0], final, rows))
        groups = pa.array(j, pa.int64())
        if name in ("MAX_BY", "MIN_BY"):
            key = sub._full(sub.ev(args[1], final, rows))
            keep = pc.is_valid(key)
            t = pa.table({"j": groups, "v": vals, "k": key}).filter(keep)
            t = t.sort_by([("j", "ascending"), ("k", "descending" if name == "MAX_BY" else "ascending")])
            return self._first_of_each(t, vals.type)
        fn = {"COUNT": "count", "SUM": "sum", "AVG": "mean", "MIN": "min", "MAX": "max", "ARRAY_AGG": "list",
              "ANY_VALUE": "first", "ARBITRARY": "first"}[name]
        if fn == "first":
            return self._first_of_each(pa.table({"j": groups, "v": vals}).filter(pc.is_valid(vals)), vals.type)
        g = pa.table({"j": groups, "v": vals}).group_by("j", use_threads=False).aggregate([("v", fn)])
        res = g.column(f"v_{fn}").combine_chunks()
        out = self._spread(g.column("j").to_numpy(), res, res.type)
        if name == "COUNT":
            out = pc.fill_null(out, 0)
        if name == "ARRAY_AGG":
            out = pc.if_else(pc.greater(pa.array(cnt), 0), out, pa.scalar([], out.type))
            out = pc.if_else(pa.array(self.ok), out, pa.scalar(None, out.type))
        return out

    def _first_of_each(self, t: pa.Table, type_) -> pa.Array:
        """Per position, the value ``v`` of its first pair in ``t`` (pairs grouped by position ``j``)."""
        jj = t.column("j").to_numpy()
        first = np.r_[True, jj[1:] != jj[:-1]] if len(jj) else np.zeros(0, bool)
        return self._spread(jj[first], t.column("v").combine_chunks().filter(pa.array(first)), type_)

    def _spread(self, j: np.ndarray, values: pa.Array, type_) -> pa.Array:
        idx = np.full(self.n, -1, np.int64)
        idx[j] = np.arange(len(j))
        return values.take(pa.array(idx, mask=idx < 0)) if len(values) else pa.nulls(self.n, type_)


def _offset(args, k: int, default: int) -> int:
    return int_literal(args[k] if len(args) > k else None, default, "a navigation's offset", non_negative=True)


def rowwise(node, table: pa.Table, names: dict[str, str]) -> pa.Array:
    """A one-row expression over every row of ``table`` (a DEFINE derived column)."""
    n = table.num_rows
    mt = Matches(table, np.arange(n, dtype=np.int64), names, [], {}, *[np.zeros(0, np.int64)] * 7)
    f = Frame(mt, np.zeros(n, np.int64), np.zeros(n, np.int64), False, clause="DEFINE")
    return f._full(f.ev(node, True, np.arange(n, dtype=np.int64)))
