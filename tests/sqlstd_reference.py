"""A plain-Python reference of SQL:2016 row pattern recognition (MATCH_RECOGNIZE), as Trino
documents and runs it: the ground truth the standard-mode kernel (issue 28) is to be checked
against on small inputs. Backtracking in preferment order, so exponential in the worst case.

    rows = reference(query, columns, data)      # list of output tuples, or raises StdError

What it implements (Trino's docs/src/main/sphinx/sql/match-recognize.md):
- PATTERN: concatenation, alternation (left preferred), PERMUTE (lexicographic preference),
  grouping, ``^`` / ``$`` anchors, the empty pattern ``()``, exclusions ``{- ... -}``, the
  quantifiers ``* + ? {n} {n,} {,m} {n,m}``, greedy or reluctant (``?`` after), compiled as
  Trino compiles them (a bounded one unrolled, an unbounded one a loop) and searched depth first,
  a path that comes back to an instruction at the same row without consuming one being cut;
- the preferred match from each start row is the first one found in preferment order; empty
  matches are matches (numbered, shown by ONE ROW and ALL ROWS [SHOW EMPTY MATCHES]);
- ONE ROW PER MATCH (default), ALL ROWS PER MATCH [SHOW EMPTY MATCHES | OMIT EMPTY MATCHES |
  WITH UNMATCHED ROWS]; AFTER MATCH SKIP PAST LAST ROW (default) | TO NEXT ROW | TO [FIRST |
  LAST] v (the errors for skipping to the match's first row or to an absent variable);
- SUBSET union variables; DEFINE (undefined variables are true), evaluated with the candidate
  row labelled; expressions: column references prefixed by a variable (its last row, running)
  or not (the universal variable), PREV / NEXT (physical), FIRST / LAST (logical), nested
  ``PREV(LAST(A.x, 1), 2)``, RUNNING / FINAL, aggregates (count, sum, avg, min, max, max_by,
  min_by, array_agg) over a variable's rows, CLASSIFIER([v]), MATCH_NUMBER(), arithmetic,
  comparisons, AND / OR / NOT with SQL's three-valued logic, CASE, COALESCE, IS [NOT] NULL,
  BETWEEN, IN, ``||``, ABS.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterator

from sqlglot import exp

from colcep.lang.sql.standard.syntax import (AGGREGATES, ASSERT_START, CONSUME, JMP, MATCH, SPLIT, Query, StdError,
                                             _call, _ident, _is_call, _table_var, compile_pattern, parse)

__all__ = ["reference", "StdError"]


class TooLong(Exception):
    """The search went past its step budget (the backtracking is exponential on nested quantifiers)."""


# ====================================================================== matching
@dataclass(frozen=True)
class Label:
    pos: int
    var: str
    excluded: bool


class Matcher:
    """The preferred match from a start row: the first success of a depth-first search over the
    compiled pattern (``compile_pattern``), each split's preferred branch first. A path that comes
    back to an instruction it passed at the same row without consuming one is cut: this is what
    Trino's matcher does (it kills a thread equal to one already at that instruction and row), and
    it is the standard's rule that a quantified pattern does not loop on empty iterations."""

    def __init__(self, q: Query, rows: list[dict], number: int, budget: int | None = None):
        self.q, self.rows, self.n, self.number = q, rows, len(rows), number
        self.prog = compile_pattern(q.pattern)
        self.budget = budget

    def find(self, start: int) -> tuple[int, tuple] | None:
        """The preferred match from ``start``: (end, labels), or None."""
        return next(self.run(0, start, (), frozenset()), None)

    def accepts(self, var: str, cand: tuple) -> bool:
        cond = self.q.define.get(var)
        return cond is None or _truth(Eval(self, cand, len(cand) - 1, final=False).ev(cond))

    def run(self, pc: int, i: int, labels: tuple, passed: frozenset) -> Iterator[tuple[int, tuple]]:
        if self.budget is not None:
            self.budget -= 1
            if self.budget < 0:
                raise TooLong()
        ins = self.prog[pc]
        if ins.op == MATCH:
            yield i, labels
        elif ins.op == CONSUME:
            if i < self.n:
                cand = labels + (Label(i, ins.var, ins.excl),)
                if self.accepts(ins.var, cand):
                    yield from self.run(pc + 1, i + 1, cand, frozenset())
        elif pc not in passed:
            passed = passed | {pc}
            if ins.op == SPLIT:
                yield from self.run(ins.x, i, labels, passed)
                yield from self.run(ins.y, i, labels, passed)
            elif ins.op == JMP:
                yield from self.run(ins.x, i, labels, passed)
            elif (i == 0) if ins.op == ASSERT_START else (i == self.n):
                yield from self.run(pc + 1, i, labels, passed)


# ====================================================================== expressions
def _truth(v) -> bool:
    return v is True


class Eval:
    """Evaluates an expression for a match: ``labels`` the match's rows, ``cur`` the index (in
    ``labels``) of the row the evaluation stands on (running semantics see labels[:cur + 1])."""

    def __init__(self, matcher: Matcher, labels: tuple, cur: int, final: bool):
        self.mt, self.labels, self.cur, self.final = matcher, labels, cur, final
        self.rows = matcher.rows

    def visible(self, final: bool | None = None) -> tuple:
        f = self.final if final is None else final
        return self.labels if f else self.labels[:self.cur + 1]

    def var_rows(self, var: str | None, final: bool | None = None) -> list[int]:
        members = None if var is None else self.mt.q.subsets.get(var, {var})
        return [lb.pos for lb in self.visible(final) if members is None or lb.var in members]

    def label_of(self, pos: int) -> str | None:
        for lb in self.labels:
            if lb.pos == pos:
                return lb.var
        return None

    # ---- the variable an expression refers to (consistent within a navigation or aggregate)
    def ref_var(self, node) -> str | None:
        found = set()
        for c in node.find_all(exp.Column):
            if c.table:
                found.add(_table_var(c))
        for f in node.find_all(exp.Anonymous):
            if f.name.upper() in ("CLASSIFIER", "__ALLROWS") and f.expressions:
                found.add(_ident(f.expressions[0].sql()))
        if len(found) > 1:
            raise StdError(f"inconsistent pattern variable references: {sorted(found)}")
        return next(iter(found), None)

    def ev(self, node, at: int | None = None):
        """Value of ``node``; ``at``: column references read that row (inside a navigation)."""
        if isinstance(node, exp.Paren):
            return self.ev(node.this, at)
        if isinstance(node, exp.Alias):
            return self.ev(node.this, at)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return node.this
            v = float(node.this)
            return int(v) if re.fullmatch(r"-?\d+", node.this) else v
        if isinstance(node, exp.Boolean):
            return node.this
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Column):
            if at is None:
                var = _table_var(node) if node.table else None
                rows = self.var_rows(var)
                if not rows:
                    return None
                at = rows[-1]
            return self.rows[at].get(node.name.lower())
        if isinstance(node, exp.Neg):
            v = self.ev(node.this, at)
            return None if v is None else -v
        if isinstance(node, exp.Not):
            v = self.ev(node.this, at)
            return None if v is None else not v
        if isinstance(node, exp.And):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            if a is False or b is False:
                return False
            return None if a is None or b is None else True
        if isinstance(node, exp.Or):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            if a is True or b is True:
                return True
            return None if a is None or b is None else False
        if isinstance(node, exp.Is):
            v = self.ev(node.this, at)
            return v is None
        if isinstance(node, exp.Between):
            v, lo, hi = self.ev(node.this, at), self.ev(node.args["low"], at), self.ev(node.args["high"], at)
            return None if None in (v, lo, hi) else lo <= v <= hi
        if isinstance(node, exp.In):
            v = self.ev(node.this, at)
            vals = [self.ev(x, at) for x in node.expressions]
            return None if v is None else v in vals
        if isinstance(node, exp.DPipe):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            return None if a is None or b is None else f"{a}{b}"
        if isinstance(node, exp.Binary):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            if a is None or b is None:
                return None
            return _binary(node, a, b)
        if isinstance(node, exp.Case):
            for w in node.args.get("ifs", []):
                if _truth(self.ev(w.this, at)):
                    return self.ev(w.args["true"], at)
            d = node.args.get("default")
            return None if d is None else self.ev(d, at)
        if isinstance(node, exp.Coalesce):
            for x in [node.this, *node.expressions]:
                v = self.ev(x, at)
                if v is not None:
                    return v
            return None
        if isinstance(node, exp.Abs):
            v = self.ev(node.this, at)
            return None if v is None else abs(v)
        if isinstance(node, exp.Cast):
            return self.ev(node.this, at)
        if isinstance(node, (exp.Lower, exp.Upper)):
            v = self.ev(node.this, at)
            return None if v is None else (v.lower() if isinstance(node, exp.Lower) else v.upper())
        if isinstance(node, exp.Array):
            return [self.ev(x, at) for x in node.expressions]
        if isinstance(node, exp.ConcatWs):
            vals = [self.ev(x, at) for x in node.expressions]
            flat = [x for v in vals[1:] for x in (v if isinstance(v, list) else [v])]  # an array joins its elements
            sep, rest = vals[0], [v for v in flat if v is not None]
            return None if sep is None else sep.join(str(v) for v in rest)
        return self.func(node, at)

    def func(self, node, at):
        name, args, final = _call(node)
        if name == "MATCH_NUMBER":
            return self.mt.number
        if name == "CLASSIFIER":
            var = _ident(args[0].sql()) if args else None
            if at is None:
                rows = self.var_rows(var)
                if not rows:
                    return None
                at = rows[-1]
            return self.label_of(at)
        if name in ("PREV", "NEXT"):
            inner = args[0]
            n = 1 if len(args) < 2 else int(self.ev(args[1]))
            if n < 0:
                raise StdError("navigation offset must not be negative")
            iname = _call(inner)[0] if _is_call(inner) else None
            if iname in ("FIRST", "LAST"):
                base, expr_ = self.logical(inner)
            else:
                rows = self.var_rows(self.ref_var(inner))
                base, expr_ = (rows[-1] if rows else None), inner
            if base is None:
                return None
            target = base - n if name == "PREV" else base + n
            if not 0 <= target < len(self.rows):
                return None
            return self.ev(expr_, target)
        if name in ("FIRST", "LAST"):
            row, expr_ = self.logical(node)
            return None if row is None else self.ev(expr_, row)
        if name in AGGREGATES:
            return self.aggregate(name, args, final)
        raise StdError(f"function {name} not in the reference")

    def logical(self, node) -> tuple[int | None, Any]:
        name, args, final = _call(node)
        n = 0 if len(args) < 2 else int(self.ev(args[1]))
        if n < 0:
            raise StdError("navigation offset must not be negative")
        # FIRST counts from the match's first row and may reach past the current one (Trino: FIRST(x, 2)
        # in ALL ROWS PER MATCH is the third row's on every row); LAST counts back from the current
        rows = self.var_rows(self.ref_var(args[0]), True if name == "FIRST" else final)
        k = n if name == "FIRST" else len(rows) - 1 - n
        return (rows[k] if 0 <= k < len(rows) else None), args[0]

    def aggregate(self, name, args, final):
        allrows = bool(args) and _is_call(args[0]) and _call(args[0])[0] == "__ALLROWS"
        var = _ident(args[0].expressions[0].sql()) if allrows else (
            self.ref_var(exp.Tuple(expressions=[a.copy() for a in args])) if args else None)
        rows = self.var_rows(var, final)
        if name == "COUNT":
            if not args or allrows or isinstance(args[0], exp.Star):
                return len(rows)
            return sum(self.ev(args[0], r) is not None for r in rows)
        vals = [self.ev(args[0], r) for r in rows]
        if name == "ARRAY_AGG":
            return vals
        if name in ("ANY_VALUE", "ARBITRARY"):
            return next((v for v in vals if v is not None), None)
        if name in ("MAX_BY", "MIN_BY"):
            keyed = [(self.ev(args[1], r), v) for r, v in zip(rows, vals)]
            keyed = [kv for kv in keyed if kv[0] is not None]
            if not keyed:
                return None
            pick = max if name == "MAX_BY" else min
            return pick(keyed, key=lambda kv: kv[0])[1]
        vals = [v for v in vals if v is not None]
        if not vals:
            return None
        if name == "SUM":
            return sum(vals)
        if name == "AVG":
            return sum(vals) / len(vals)
        return (max if name == "MAX" else min)(vals)


def _binary(node, a, b):
    if isinstance(node, exp.Add):
        return a + b
    if isinstance(node, exp.Sub):
        return a - b
    if isinstance(node, exp.Mul):
        return a * b
    if isinstance(node, exp.Div):
        if b == 0:
            raise StdError("Division by zero")
        return a // b if isinstance(a, int) and isinstance(b, int) and a * b >= 0 else (
            int(a / b) if isinstance(a, int) and isinstance(b, int) else a / b)
    if isinstance(node, exp.Mod):
        return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else int(math.fmod(a, b))
    ops = {exp.EQ: lambda: a == b, exp.NEQ: lambda: a != b, exp.GT: lambda: a > b, exp.GTE: lambda: a >= b,
           exp.LT: lambda: a < b, exp.LTE: lambda: a <= b}
    for k, f in ops.items():
        if isinstance(node, k):
            return f()
    raise StdError(f"operator {type(node).__name__} not in the reference")


# ====================================================================== the run
def reference(query: str, columns: list[str], data: list[list], matcher: Any = None) -> list[tuple]:
    """The output rows of ``query`` over the table ``data`` (rows of ``columns``); ``matcher``: the
    class that finds a match (default ``Matcher``; ``sqlstd_threads.ThreadMatcher`` takes its place)."""
    q = parse(query)
    cols = [c.lower() for c in columns]
    table = [dict(zip(cols, r)) for r in data]
    groups: dict[tuple, list[dict]] = {}
    for r in table:
        groups.setdefault(tuple(r[c.lower()] for c in q.partition), []).append(r)
    out: list[list] = []
    for rows in groups.values():
        for c, desc, nulls_first in reversed(q.order):
            present = sorted((r for r in rows if r[c.lower()] is not None), key=lambda r: r[c.lower()], reverse=desc)
            absent = [r for r in rows if r[c.lower()] is None]
            rows = absent + present if nulls_first else present + absent
        out.extend(_partition(q, rows, cols, matcher or Matcher))
    if not q.select:
        return [tuple(v for _, v in r) for r in out]
    return [tuple(dict(reversed(r)).get(src) for src, _ in q.select) for r in out]


def _partition(q: Query, rows: list[dict], cols: list[str], matcher: Any) -> list[list]:
    out: list[list] = []
    number = 0
    s = 0
    n = len(rows)
    part_cols = [c.lower() for c in q.partition]
    order_cols = [c.lower() for c, _, _ in q.order]
    rest = [c for c in cols if c not in part_cols and c not in order_cols]
    measured: set[int] = set()

    def row_out(base: dict, meas: dict) -> list:
        """The output row as (name, value) pairs, in Trino's layout (an ORDER BY column listed twice
        comes out twice)."""
        r = [(c, base.get(c)) for c in part_cols]
        if q.rows != "one":
            r += [(c, base.get(c)) for c in order_cols]
        r += list(meas.items())
        if q.rows != "one":
            r += [(c, base.get(c)) for c in rest]
        return r

    while s < n:
        number += 1
        mt = matcher(q, rows, number)
        found = mt.find(s)
        if found is None:
            number -= 1
            if q.rows == "all_unmatched" and s not in measured:
                out.append(row_out(rows[s], {name: None for name, _ in q.measures}))
            s += 1
            continue
        end, labels = found
        if not labels:  # an empty match
            meas = {name: Eval(mt, (), -1, final=True).ev(e) for name, e in q.measures}
            if q.rows != "all_omit":
                out.append(row_out(rows[s], meas))
            s += 1
            continue
        if q.rows == "one":
            out.append(row_out(rows[s], {name: Eval(mt, labels, len(labels) - 1, final=_final(e)).ev(e)
                                         for name, e in q.measures}))
        else:
            for k, lb in enumerate(labels):
                measured.add(lb.pos)
                if lb.excluded:
                    continue
                ev = Eval(mt, labels, k, final=False)
                out.append(row_out(rows[lb.pos], {name: ev.ev(e) for name, e in q.measures}))
        s = _skip(q, s, end, labels)
    return out


def _final(e) -> bool:
    return True  # ONE ROW PER MATCH: evaluated from the match's last row, running = final


def _skip(q: Query, start: int, end: int, labels: tuple) -> int:
    kind = q.skip[0]
    if kind == "past":
        return end
    if kind == "next":
        return start + 1
    var = q.skip[1]
    members = q.subsets.get(var, {var})
    pos = [lb.pos for lb in labels if lb.var in members]
    if not pos:
        raise StdError("AFTER MATCH SKIP failed: pattern variable is not present in match")
    target = pos[0] if kind == "first" else pos[-1]
    if target == start:
        raise StdError("AFTER MATCH SKIP failed: cannot skip to first row of match")
    return target
