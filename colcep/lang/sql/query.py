"""SQL ``MATCH_RECOGNIZE`` over Arrow, pandas and polars tables, compiled to a colcep Pattern::

    out = colcep.sql('''
        SELECT * FROM Ticker MATCH_RECOGNIZE (
            PARTITION BY symbol ORDER BY rowtime
            MEASURES START_ROW.rowtime AS start_tstamp, LAST(PRICE_DOWN.rowtime) AS bottom_tstamp,
                     LAST(PRICE_UP.rowtime) AS end_tstamp
            ONE ROW PER MATCH
            AFTER MATCH SKIP TO LAST PRICE_UP
            PATTERN (START_ROW PRICE_DOWN+ PRICE_UP) WITHIN INTERVAL '1' HOUR
            DEFINE PRICE_DOWN AS (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price)
                                 OR PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
                   PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1))''', Ticker=ticks)

The query is parsed by sqlglot (the ``PATTERN`` body by a small lark grammar, Flink's ``WITHIN``
located with sqlglot's tokenizer). Semantics are Flink SQL's, whose MATCH_RECOGNIZE is itself
compiled to Flink CEP: concatenation is strict contiguity (``next``), quantified variables are
``consecutive()`` loops, greedy by default (``greedy()``) and reluctant with a trailing ``?``.

- ``PARTITION BY`` columns: the match key (several columns: a composite key, ``key=[...]``); the
  output starts with them. ``ORDER BY``: the time column first (ascending; an integer column
  in ``time_unit`` or an Arrow timestamp), then tie breakers.
- ``PATTERN``: variables with ``* + ? {n} {n,} {n,m} {,m}``, each greedy or reluctant (``+?``);
  parenthesised groups (colcep group patterns; a group's quantifier must be reluctant or exact,
  Flink CEP has no greedy groups); alternation ``A B | C`` (``Pattern.any_of``, beyond Flink SQL;
  at top level and in groups, quantified as groups are; a variable may repeat in different
  alternatives) and ``PERMUTE(A, B, C)``, the alternation of every order in lexicographic order
  of the listed terms (the standard's preference). Every alternative is tried; under a skip the
  match completing first wins, the left one among matches on the same rows (SQL's preferment
  would take the left alternative even when it completes later). Not supported: ``{- -}``,
  anchors, the reluctant optional ``??`` (as in Flink), patterns or alternatives that can match
  no row.
- ``WITHIN INTERVAL '10' SECOND`` (Flink's extension): the match's window.
- ``DEFINE``: per variable a condition (a variable without one matches every row). ``X.col``
  in ``X``'s own condition is the current row; ``Y.col`` of another variable is its last row
  so far; an unqualified ``col`` is the current row. ``FIRST(X.col, n)``, ``LAST(X.col, n)``
  of any variable of the top-level sequence: a variable's rows are contiguous, so the n-th last
  is ``n`` rows before its last one (colcep's ``prev``) and the n-th first ``n`` after its first
  one (a lead column, as ``NEXT`` below). Running
  aggregates ``SUM AVG MIN MAX COUNT`` over ``X.col`` (including the current row when ``X`` is
  the variable being defined) or over all rows so far (``SUM(col)``); arithmetic, comparisons,
  ``AND OR NOT``, ``IS [NOT] NULL``, ``IN``, ``BETWEEN``. Aggregates, ``FIRST`` and ``LAST``
  also take arithmetic over one variable's columns (``SUM(A.price * A.volume)``: in DEFINE
  colcep's aggregates over expressions, in MEASURES a column computed first). ``SUM``, ``AVG``
  and ``COUNT(X.col)`` skip NULLs as SQL's do (in DEFINE, ``COUNT`` of a column that is not
  numeric, or of one whose type is unknown, as in :func:`compile_query` over column names,
  counts rows). ``FIRST``/``LAST`` (and ``X.col`` of another variable) are the value at that
  row, NULL included: colcep's ``first``/``last`` skip NULLs, so a column that holds NULLs is
  read through a helper column carrying them as ``NULL_SENTINEL`` (the Pattern of
  :func:`compile_query`, which sees no data, skips them). ``PREV(col, k)`` of the
  current row is the partition's k-th previous row, which may lie outside the match: colcep's
  ``prev(col, k)`` (``colcep.engine.history``: computed per key and carried across batches and
  snapshots, so the Pattern of :func:`compile_query` runs on streams as it is), as is the
  ``LAST(X.col, n)`` above. ``NEXT(col, k)`` looks ahead, so over a whole table colcep computes
  it as a lead column of the partition before matching.
- ``MEASURES`` (final values, or running ones with ALL ROWS PER MATCH, below): ``X.col`` (the
  last row of ``X``), ``FIRST``/``LAST(X.col, n)``, ``SUM AVG MIN MAX COUNT`` (``COUNT(*)``,
  ``COUNT(X.*)``), ``PREV``/``NEXT(X.col, k)`` (rows around the last row of ``X``),
  ``CLASSIFIER()``, ``MATCH_NUMBER()`` (1, 2, ... per partition), arithmetic. Unqualified
  columns range over the whole match.
- ``ONE ROW PER MATCH`` (default): partition columns + measures. ``ALL ROWS PER MATCH``: one
  row per matched row: partition columns, order columns, measures, then the other input columns;
  measures are ``RUNNING`` by default (SQL standard: over the match's rows up to this one, so
  ``CLASSIFIER()`` is the row's variable), ``FINAL LAST(A.price)`` gives the match's final value.
- ``AFTER MATCH SKIP PAST LAST ROW | TO NEXT ROW | TO FIRST x | TO LAST x | TO x``; without the
  clause, ``TO NEXT ROW`` (Calcite's and so Flink's default). Where Flink raises at run time
  when ``x`` has no row in the match, colcep does not skip.
- The outer ``SELECT`` takes ``*`` or columns of the MATCH_RECOGNIZE output, with aliases.

- SQL's NULL semantics in DEFINE: a comparison with NULL is unknown, ``AND OR NOT`` are
  three-valued and a row matches where its condition is TRUE (``NOT (SUM(A.v) >= 10)`` is not
  true while ``A`` has no row); ``SUM`` of no rows is NULL. ``CASE``, ``ABS``, ``MOD``,
  ``FLOOR``, ``CEIL`` and ``MATCH_ROWTIME()`` (the time of the match's last row) in DEFINE and
  MEASURES; ``MATCH_PROCTIME()`` in MEASURES.

Two semantics (``semantics=`` of :func:`colcep.sql`):

- ``"cep"`` (the default): all of the above.
- ``"flink"``: Flink 2.3 SQL, checked against Flink itself (``tests/test_sql_flink.py``): the
  queries Flink runs give Flink's rows, the ones it refuses a SqlError with Flink's reason
  (ALL ROWS PER MATCH, alternation, PERMUTE, groups, a greedy last variable, ``{,m}``, an
  optional variable after a greedy one, ``??``, RUNNING, CLASSIFIER, MATCH_NUMBER,
  PREV/NEXT in MEASURES, NEXT and PREV of the variable being defined in DEFINE,
  WITHIN in milliseconds, a word Flink reserves used unquoted), and a run where Flink fails
  the job (``AFTER MATCH SKIP TO FIRST|LAST x`` on a match without ``x``, or whose target is
  the match's first row) a SqlError saying so. Two rules differ from ``"cep"``: integer
  arithmetic is Flink's (``INT / INT`` and ``AVG`` of an integer column are integers, truncated
  toward zero; ``"cep"`` gives doubles, as the standard does; an integer division by zero in
  MEASURES is a SqlError, as Flink fails the job, in DEFINE colcep compares the infinity where
  Flink fails), and ``PREV(col, n)`` /
  ``PREV(X.col, n)`` in DEFINE navigate the match's rows (``LAST(col, n)``, ``LAST(X.col, n)``),
  where ``"cep"`` reads the partition's previous row.

Errors are :class:`SqlError` (a ``PatternError``) naming the clause and the token. A Spark
DataFrame as the table runs the query on Spark (:mod:`colcep.spark.sql`);
:func:`compile_query` gives the Pattern alone.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from colcep.errors import PatternError
from colcep.lang.sql.flink import refused_by_flink
from colcep.lang.sql.limits import (MAX_CONDITION_CASES, MAX_CONDITION_SIZE, check_pattern, check_query, check_tree,
                                   deep_stack)
from colcep.lang.sql.syntax import SqlError, _err, case_branches, function_args, function_name
from colcep.expr import Expr, col, count, first, last, lit, prev
from colcep.expr import _agg as _make_agg
from colcep.pattern import Pattern
from colcep.skip import AfterMatchSkipStrategy, SkipPastLastEvent, SkipToFirst, SkipToLast, SkipToNext


# ============================================================================ WITHIN and parsing
_INTERVAL_UNITS = {"MILLISECOND": "ms", "MILLISECONDS": "ms", "SECOND": "s", "SECONDS": "s", "MINUTE": "min",
                   "MINUTES": "min", "HOUR": "h", "HOURS": "h", "DAY": "d", "DAYS": "d"}


def _split_within(query: str) -> tuple[str, str | None]:
    """Take Flink's ``WITHIN INTERVAL 'n' UNIT`` out of the query (sqlglot does not know it),
    located with sqlglot's tokenizer; returns (query without it, colcep window or None)."""
    toks = _tokens(query)
    for i, t in enumerate(toks):
        if t.text.upper() == "WITHIN" and i + 1 < len(toks) and toks[i + 1].text.upper() == "INTERVAL":
            if i + 3 >= len(toks):
                raise _err("WITHIN", "WITHIN INTERVAL", "expected INTERVAL 'n' SECOND|MINUTE|HOUR|DAY|MILLISECOND")
            val, unit = toks[i + 2], toks[i + 3]
            u = unit.text.upper()
            if not re.fullmatch(r"\d+(\.\d+)?", val.text.strip()) or u not in _INTERVAL_UNITS:
                raise _err("WITHIN", f"INTERVAL '{val.text}' {unit.text}",
                           "expected INTERVAL 'n' SECOND|MINUTE|HOUR|DAY|MILLISECOND")
            window = f"{val.text.strip()}{_INTERVAL_UNITS[u]}"
            return query[:t.start] + " " * (unit.end + 1 - t.start) + query[unit.end + 1:], window
    return query, None


def _normalise_skip(query: str) -> str:
    """``AFTER MATCH SKIP TO x`` is ``SKIP TO LAST x`` (SQL standard); sqlglot parses only the
    long form, so the LAST is put in (tokens located with sqlglot's tokenizer)."""
    toks = _tokens(query)
    words = [t.text.upper() for t in toks]
    for i in range(len(toks) - 4):
        if words[i:i + 4] == ["AFTER", "MATCH", "SKIP", "TO"] and words[i + 4] not in ("FIRST", "LAST", "NEXT"):
            at = toks[i + 4].start
            return query[:at] + "LAST " + query[at:]
    return query


def _tokens(query: str) -> list:
    from sqlglot.errors import TokenError
    from sqlglot.tokens import Tokenizer
    try:
        return Tokenizer().tokenize(query)
    except TokenError as exc:
        raise SqlError(f"syntax error: {exc}") from None


def _parse_sql(query: str):
    import sqlglot
    from sqlglot.errors import ParseError, TokenError
    try:
        trees = sqlglot.parse(query, read="snowflake")
    except ParseError as exc:
        e = exc.errors[0] if exc.errors else {}
        raise SqlError(f"syntax error at line {e.get('line', '?')}, column {e.get('col', '?')} near "
                       f"{e.get('highlight', '')!r}: {e.get('description', str(exc))}") from None
    except TokenError as exc:
        raise SqlError(f"syntax error: {exc}") from None
    except RecursionError:
        raise
    except Exception as exc:  # noqa: BLE001 - sqlglot fails on some malformed input with its own errors
        raise SqlError(f"syntax error: {exc}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise SqlError(f"expected one SELECT statement, got {len(trees)}")
    return trees[0]


# ============================================================================ PATTERN
_ROW_PATTERN = r"""
?start: alt
?alt: seq ("|" seq)*
seq: term+
term: primary quant?
?primary: NAME                       -> var
        | "(" alt ")"                -> group
        | PERMUTE "(" alt ("," alt)* ")" -> permute
quant: base RELUCTANT?
base: STAR | PLUS | QMARK | RANGE
STAR: "*"
PLUS: "+"
QMARK: "?"
RELUCTANT: "?"
RANGE: /\{\s*\d*\s*(,\s*\d*\s*)?\}/
PERMUTE.2: /PERMUTE(?=\s*\()/i
NAME: /[A-Za-z_][A-Za-z_0-9]*/ | /"[^"]+"/
%import common.WS
%ignore WS
"""


@lru_cache(maxsize=1)
def _pattern_parser():
    from lark import Lark
    return Lark(_ROW_PATTERN, parser="lalr")


@dataclass
class _Item:
    kind: str                 # var | group | alt
    name: str | None
    items: "list[_Item] | None"   # a group's elements
    lo: int = 1
    hi: int | None = 1
    reluctant: bool = False
    text: str = ""
    alts: "list[list[_Item]] | None" = None  # an alternation's branches

    def variables(self) -> list[str]:
        """The variables in this item, in pattern order, each once."""
        if self.kind == "var":
            return [self.name]
        out: list[str] = []
        for branch in (self.alts if self.kind == "alt" else [self.items or []]):
            for it in branch:
                out.extend(v for v in it.variables() if v not in out)
        return out


MAX_PERMUTE = 5  # PERMUTE of n terms is an alternation of n! sequences


def _parse_pattern(text: str) -> list[_Item]:
    from lark import Tree
    from lark.exceptions import UnexpectedInput
    t = text.strip()
    for bad, what in (("{-", "exclusion {- -}"), ("^", "the anchor ^"), ("$", "the anchor $")):
        if bad in t.upper():
            raise _err("PATTERN", bad, f"{what} is not supported")
    try:
        tree = _pattern_parser().parse(t)
    except UnexpectedInput as exc:
        pos = getattr(exc, "pos_in_stream", None) or 0
        raise _err("PATTERN", t[pos:pos + 10] or t, f"unexpected input at column {getattr(exc, 'column', '?')} of "
                   f"({t})") from None

    def seq(node) -> list[_Item]:
        if isinstance(node, Tree) and node.data == "alt":   # A B | C: an alternation item
            branches = [seq(c) for c in node.children]
            return [_Item("alt", None, None, text="(" + " | ".join(_text(b) for b in branches) + ")", alts=branches)]
        terms = [term(c) for c in node.children] if isinstance(node, Tree) and node.data == "seq" else [term(node)]
        out = []
        for it in terms:     # a group without a quantifier is its elements
            out.extend(it.items if it.kind == "group" and it.lo == it.hi == 1 and not it.reluctant else [it])
        return out

    def term(node) -> _Item:
        if node.data != "term":          # a bare primary
            prim, q = node, None
        else:
            prim, q = node.children[0], (node.children[1] if len(node.children) > 1 else None)
        if prim.data == "var":
            name = str(prim.children[0]).strip('"')
            it = _Item("var", name, None, text=name)
        elif prim.data == "permute":
            it = permute([seq(c) for c in prim.children[1:]])
        else:
            inner = seq(prim.children[0])
            if len(inner) == 1 and inner[0].kind == "alt":   # (A | B): the alternation itself
                it = inner[0]
            else:
                it = _Item("group", None, inner, text="(" + _text(inner) + ")")
        if q is not None:
            b = str(q.children[0].children[0])
            it.reluctant = len(q.children) > 1 and q.children[1] is not None
            if b == "*":
                it.lo, it.hi = 0, None
            elif b == "+":
                it.lo, it.hi = 1, None
            elif b == "?":
                it.lo, it.hi = 0, 1
            else:
                m = re.fullmatch(r"\{\s*(\d*)\s*(,\s*(\d*)\s*)?\}", b)
                assert m
                lo_s, comma, hi_s = m.group(1), m.group(2), m.group(3)
                if comma is None:
                    if not lo_s:
                        raise _err("PATTERN", b, "an empty quantifier")
                    it.lo = it.hi = int(lo_s)
                else:
                    it.lo = int(lo_s) if lo_s else 0
                    it.hi = int(hi_s) if hi_s else None
                if (it.hi is not None and (it.hi < 1 or it.hi < it.lo)) or (comma is None and it.lo < 1):
                    raise _err("PATTERN", it.text + b, "invalid quantifier bounds (need 0 <= n <= m, m > 0)")
            it.text += b + ("?" if it.reluctant else "")
        return it

    def permute(terms: list[list[_Item]]) -> _Item:
        """PERMUTE(X, Y, ...): the alternation of the terms' orders, in the lexicographic order
        of their positions (the SQL standard's preference order)."""
        text = "PERMUTE(" + ", ".join(_text(t) for t in terms) + ")"
        if len(terms) > MAX_PERMUTE:
            raise _err("PATTERN", text, f"PERMUTE of more than {MAX_PERMUTE} terms ({len(terms)}! orders) is not "
                       "supported")
        if len(terms) == 1:
            return _Item("group", None, terms[0], text=text)
        branches = [[x for t in order for x in t] for order in itertools.permutations(terms)]
        return _Item("alt", None, None, text=text, alts=branches)

    return seq(tree)


def _size(items: list[_Item]) -> int:
    """The pattern's positions written out: a quantified item repeated ``m`` times for ``{n,m}``,
    ``n + 1`` for ``{n,}`` (the NFA's states, about)."""
    total = 0
    for it in items:
        if it.kind == "var":
            inner = 1
        elif it.kind == "alt":
            inner = sum(_size(b) for b in it.alts or [])
        else:
            inner = _size(it.items or [])
        total += inner * max(it.hi if it.hi is not None else it.lo + 1, 1)
    return total


def _text(items: list[_Item]) -> str:
    return " ".join(it.text for it in items)


def _can_be_empty(items: list[_Item]) -> bool:
    return all(it.lo == 0 or (it.kind == "group" and _can_be_empty(it.items or []))
               or (it.kind == "alt" and any(_can_be_empty(b) for b in it.alts or [])) for it in items)


def _build_pattern(items: list[_Item], conds: dict[str, Expr], seen: list[str]) -> Pattern:
    p: Pattern | None = None
    for it in items:
        if it.kind == "var":
            if it.name in seen:
                raise _err("PATTERN", it.name, "a variable can appear only once in the pattern, or once in each "
                           "alternative of an alternation")
            seen.append(it.name)
            target: "str | Pattern" = it.name
        elif it.kind == "alt":
            alts = []
            for branch in it.alts or []:
                if _can_be_empty(branch):
                    raise _err("PATTERN", it.text, f"the alternative ({_text(branch)}) can match no row; make the "
                               "whole alternation optional instead, e.g. (A | B)?")
                alts.append(_build_pattern(branch, conds, list(seen)))
            seen.extend(v for v in it.variables() if v not in seen)
            target = Pattern.any_of(*alts)
        else:
            if _can_be_empty(it.items or []):
                raise _err("PATTERN", it.text, "a group that can match no row is not supported")
            target = _build_pattern(it.items or [], conds, seen)
        try:
            p = Pattern.begin(target) if p is None else p.next(target)
            if it.kind == "var" and it.name in conds:
                p = p.where(conds[it.name])
            p = _quantify(p, it)
        except SqlError:
            raise
        except PatternError as exc:
            raise _err("PATTERN", it.text, str(exc)) from None
    assert p is not None
    return p


def _quantify(p: Pattern, it: _Item) -> Pattern:
    """A quantifier as Flink SQL translates it (``StreamExecMatch.PatternVisitor.applyQuantifier``,
    flink-table-planner): a consecutive loop, ``greedy()`` unless reluctant, optional or exact.
    A reluctant loop is then just a loop that is not greedy: ``NFACompiler`` gives it no
    condition of its own (only a greedy loop folds "not its own condition" into what follows,
    ``updateWithGreedyCondition``), so every split of the rows runs and the match completing
    first wins. Of several matches from one start completing on one row, or waiting together
    behind an earlier partial match, which one Flink reports (and the skip keeps) is the order
    of its ``PriorityQueue`` of partial and completed matches, keyed by the start row only:
    colcep orders them by its own rule there (docs/semantics.md, ties among held-back matches)."""
    lo, hi, greedy = it.lo, it.hi, not it.reluctant
    if lo == 1 and hi == 1:
        if it.reluctant:
            raise _err("PATTERN", it.text, "a reluctant quantifier needs a repetition")
        return p
    if lo == 0 and hi == 1:
        if it.reluctant:
            raise _err("PATTERN", it.text, "the reluctant optional quantifier ?? is not supported (as in Flink)")
        return p.optional()
    if it.kind != "var" and greedy and lo != hi:
        what, eg = ("an alternation", "(A | B)+?") if it.kind == "alt" else ("a group", "(A B)+?")
        raise _err("PATTERN", it.text, f"a greedy quantifier on {what} is not supported (Flink CEP has no greedy "
                   f"group patterns); make it reluctant, e.g. {eg}")
    if hi is None:
        if lo <= 1:
            p = p.one_or_more()
            if lo == 0:
                p = p.optional()
        else:
            p = p.times_or_more(lo)
    else:
        p = p.times(lo, hi) if lo != hi else p.times(lo)
    p = p.consecutive()
    if greedy and it.kind == "var" and lo != hi:     # as Flink: an exact count is never greedy
        p = p.greedy()
    return p


# ============================================================================ values with cases
# A DEFINE value is a list of (guard, expr) alternatives whose guards are exclusive and
# exhaustive (None = always): FIRST(X.col) in X's own condition is the current row while X has
# no row yet and first(col, of=X) after, MIN(X.col) the smaller of min(of=X) and the current row.
Alts = list  # [(Expr | None, Expr)]


def _boolean_nodes() -> tuple:
    from sqlglot import exp
    return (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between,
            exp.Boolean)


def _and(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None:
        return b
    return a if b is None else a & b


class _TooManyCases(Exception):
    """A DEFINE value split into more than ``MAX_CONDITION_CASES`` alternatives."""


def _cases(alts: Alts) -> Alts:
    if len(alts) > MAX_CONDITION_CASES:
        raise _TooManyCases
    return alts


def _combine(xs: Alts, ys: Alts, fn) -> Alts:
    if len(xs) * len(ys) > MAX_CONDITION_CASES:
        raise _TooManyCases
    return [(_and(g1, g2), fn(e1, e2)) for g1, e1 in xs for g2, e2 in ys]


def _tree_size(e: Expr) -> int:
    """The nodes of ``e`` as a tree, a part shared by several parents counted at each (what the
    engine's compiler walks), in time linear in the distinct nodes."""
    sizes: dict[int, int] = {}
    todo = [e]
    while todo:
        node = todo[-1]
        kids = [a for a in node.args if isinstance(a, Expr) and id(a) not in sizes]
        if kids:
            todo.extend(kids)
            continue
        todo.pop()
        sizes[id(node)] = 1 + sum(sizes[id(a)] for a in node.args if isinstance(a, Expr))
    return sizes[id(e)]


def _collapse(alts: Alts) -> Expr:
    """A boolean alternative list as one condition."""
    out: Expr | None = None
    for g, e in alts:
        term = e if g is None else g & e
        out = term if out is None else out | term
    assert out is not None
    return out


class _Define:
    """DEFINE conditions to colcep expressions."""

    def __init__(self, variables: list[str], columns: list[str], helpers: "_Helpers", items: list,
                 flink: bool = False, time: str | None = None):
        self.flink = flink
        self.time = time
        self.items = items
        self.vars = variables
        self.columns = columns
        self.helpers = helpers

    def condition(self, var: str, node) -> Expr:
        """``var``'s condition; a SqlError past ``MAX_CONDITION_CASES`` or ``MAX_CONDITION_SIZE``
        (CASE, ABS, FLOOR, CEIL and aggregates of ``var`` itself split a value into cases)."""
        self.var = var
        self.node = node
        why = (f"the condition splits into more cases than colcep's limit of {MAX_CONDITION_CASES:,} (CASE, ABS, "
               "FLOOR, CEIL and aggregates of the variable being defined split a value by cases)")
        try:
            cond = _collapse(self.truth(node, True))
        except _TooManyCases:
            raise _err(f"DEFINE {var}", "", why) from None
        size = _tree_size(cond)
        if size > MAX_CONDITION_SIZE:
            raise _err(f"DEFINE {var}", "", f"the condition expands to {size:,} terms, more than colcep's limit of "
                       f"{MAX_CONDITION_SIZE:,} (a CASE's WHEN is repeated in each of its branches' conditions)")
        return cond

    _NEGATED = {"__eq__": "__ne__", "__ne__": "__eq__", "__lt__": "__ge__", "__ge__": "__lt__",
                "__gt__": "__le__", "__le__": "__gt__"}

    def truth(self, node, want: bool) -> Alts:
        """Where a boolean SQL expression is TRUE (``want``) or FALSE: SQL's three-valued logic
        on colcep's two-valued conditions. A comparison with a null is neither (colcep's
        comparisons are false on nulls both ways), NOT swaps TRUE and FALSE, AND and OR
        combine them as Kleene logic does; DEFINE holds where its condition is TRUE."""
        from sqlglot import exp
        if isinstance(node, exp.Paren):
            return self.truth(node.this, want)
        if isinstance(node, exp.Not):
            return self.truth(node.this, not want)
        if isinstance(node, (exp.And, exp.Or)):
            both = isinstance(node, exp.And) == want       # TRUE of AND, FALSE of OR: both sides
            return _combine(self.truth(node.this, want), self.truth(node.expression, want),
                            (lambda a, b: a & b) if both else (lambda a, b: a | b))
        cmps = {exp.EQ: "__eq__", exp.NEQ: "__ne__", exp.LT: "__lt__", exp.LTE: "__le__", exp.GT: "__gt__",
                exp.GTE: "__ge__"}
        if type(node) in cmps:
            meth = cmps[type(node)] if want else self._NEGATED[cmps[type(node)]]
            return _combine(self.value(node.this), self.value(node.expression),
                            lambda a, b, m=meth: getattr(a, m)(b))
        if isinstance(node, exp.Between):
            x = self.value(node.this)
            lo = _combine(x, self.value(node.args["low"]), lambda a, b: (a >= b) if want else (a < b))
            hi = _combine(x, self.value(node.args["high"]), lambda a, b: (a <= b) if want else (a > b))
            return _combine(lo, hi, (lambda a, b: a & b) if want else (lambda a, b: a | b))
        if isinstance(node, exp.In):
            vals = []
            for v in node.expressions:
                if not isinstance(v, exp.Literal):
                    raise _err(f"DEFINE {self.var}", v, "IN takes a list of literals")
                vals.append(v.this if v.is_string else float(v.this))
            return [(g, e.is_in(vals) if want else ~e.is_in(vals) & ~e.is_null()) for g, e in self.value(node.this)]
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _err(f"DEFINE {self.var}", node, "only IS NULL / IS NOT NULL")
            return [(g, e.is_null() if want else ~e.is_null()) for g, e in self.value(node.this)]
        if isinstance(node, exp.Boolean):
            return [(None, lit(bool(node.this) == want) == 1.0)]
        if isinstance(node, exp.Null):
            return [(None, lit(None) == 1.0)]
        if isinstance(node, exp.Case):
            return self._case(node, lambda v: self.truth(v, want))
        # a boolean-valued operand (a column read as a condition): TRUE where it is, FALSE where it is not null
        return [(g, e if want else ~e & ~e.is_null()) for g, e in self.value(node)]

    def _col(self, node) -> tuple[str | None, str]:
        from sqlglot import exp
        if not isinstance(node, exp.Column):
            raise _err(f"DEFINE {self.var}", node, "expected a column reference")
        table = node.table or None
        name = node.name
        if table is not None and table not in self.vars:
            raise _err(f"DEFINE {self.var}", node, f"{table!r} is not a pattern variable "
                       f"(variables: {', '.join(self.vars)})")
        if name not in self.columns:
            raise _err(f"DEFINE {self.var}", node, f"no column {name!r} in the input "
                       f"(columns: {', '.join(self.columns)})")
        return table, name

    def _offset(self, node, args) -> int:
        if len(args) < 2:
            return 0
        from sqlglot import exp
        a = args[1]
        if not isinstance(a, exp.Literal) or a.is_string or not re.fullmatch(r"\d+", a.this):
            raise _err(f"DEFINE {self.var}", node, "the offset must be a non-negative integer literal")
        return int(a.this)

    def value(self, node) -> Alts:  # noqa: C901 - one dispatch over sqlglot node types
        from sqlglot import exp
        clause = f"DEFINE {self.var}"
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Literal):
            return [(None, lit(node.this if node.is_string else float(node.this)))]
        if isinstance(node, exp.Boolean):
            return [(None, lit(bool(node.this)) == 1.0)]
        if isinstance(node, exp.Null):
            return [(None, lit(None))]
        if isinstance(node, exp.Neg):
            return [(g, -e) for g, e in self.value(node.this)]
        if isinstance(node, exp.Column):
            table, name = self._col(node)
            if table is None or table == self.var:
                return [(None, col(name))]
            return self._at_row(last, name, [table])
        arith = {exp.Add: "__add__", exp.Sub: "__sub__", exp.Mul: "__mul__", exp.Div: "__truediv__"}
        if type(node) in arith:
            meth = "quot" if isinstance(node, exp.Div) and _int_typed(node, self.helpers.ints) else arith[type(node)]
            return _combine(self.value(node.this), self.value(node.expression),   # quot: Flink's INT / INT
                            lambda a, b, m=meth: getattr(a, m)(b))
        if isinstance(node, _boolean_nodes()):    # a condition used as a value: where it is TRUE
            return self.truth(node, True)
        if isinstance(node, (exp.First, exp.Last)):
            return self._first_last(node, "first" if isinstance(node, exp.First) else "last",
                                    [node.this] + ([node.expression] if node.expression is not None else []))
        if isinstance(node, (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count)):
            return self._aggregate(node)
        if isinstance(node, exp.Anonymous):
            fn = node.name.upper()
            if fn in ("PREV", "NEXT"):
                return self._physical(node, fn, node.expressions)
            if fn in ("FIRST", "LAST"):
                return self._first_last(node, fn.lower(), node.expressions)
            if fn == "MATCH_ROWTIME":      # the time of the match's last row so far: the current row's
                return [(None, col(self.time))]
            raise _err(clause, node, f"unsupported function {node.name}()")
        if isinstance(node, exp.Case):
            return self._case(node, self.value)
        if isinstance(node, (exp.Abs, exp.Floor, exp.Ceil)):     # by cases, NULL in NULL out
            out = []
            for g, e in self.value(node.this):
                t = e.quot(1.0)
                cases = {exp.Abs: [(e >= 0, e), (e < 0, -e)], exp.Floor: [(e >= t, t), (e < t, t - 1)],
                         exp.Ceil: [(e <= t, t), (e > t, t + 1)]}[type(node)]
                out += [(_and(g, when), v) for when, v in cases] + [(_and(g, e.is_null()), lit(None))]
            return _cases(out)
        if isinstance(node, exp.Mod):      # the sign of the dividend, as SQL (and Java) have it
            return _combine(self.value(node.this), self.value(node.expression), lambda a, b: a - b * a.quot(b))
        if isinstance(node, exp.Func) and function_name(node) in ("PREV", "NEXT", "LAG", "LEAD"):
            fn = {"LAG": "PREV", "LEAD": "NEXT"}.get(function_name(node), function_name(node))
            return self._physical(node, fn, function_args(node))
        if isinstance(node, exp.Func):
            raise _err(clause, node, f"unsupported function {type(node).__name__.upper()}()")
        raise _err(clause, node, f"unsupported expression ({type(node).__name__})")

    def _case(self, node, branch_value) -> Alts:
        """CASE [x] WHEN c THEN v ... [ELSE d] END: each branch's ``branch_value`` (its value, or
        where it is TRUE or FALSE) under the guard that its WHEN is TRUE and no earlier one was
        (a WHEN that is NULL falls through, and no ELSE is ELSE NULL, as in SQL)."""
        out: Alts = []
        before: Expr | None = None          # no earlier WHEN was TRUE
        for cond, value in case_branches(node):
            hit = None if cond is None else _collapse(self.truth(cond, True))
            out += [(_and(_and(before, hit), g), e) for g, e in branch_value(value)]
            before = None if cond is None else _and(before, ~hit)
        return _cases(out)

    def _first_last(self, node, fn: str, args, n: int | None = None) -> Alts:
        """``FIRST``/``LAST(X.col, n)``: the n-th row from X's first / last row. A variable's rows
        are contiguous (concatenation is strict contiguity, loops are consecutive), so the n-th
        last row of X is the row n before X's last one (``last(prev(col, n), of=X)``) and the
        n-th first is the row n after X's first one (``first(next(col, n), of=X)``, a lead
        column of the partition), both while X has more than n rows; with X the variable being
        defined, the current row counts as its latest."""
        from sqlglot import exp
        clause = f"DEFINE {self.var}"
        if not args:
            raise _err(clause, node, f"{fn.upper()} needs a column")
        if isinstance(args[0], exp.Column):
            table, name = self._col(args[0])
            value: Expr = col(name)
            field: "str | Expr" = name
        else:
            table, value = self._expression(args[0])
            field = value
            name = None
        n = self._offset(node, args) if n is None else n
        own = table is None or table == self.var
        of = self.vars if table is None else [table]
        agg = first if fn == "first" else last
        if n == 0:
            if not own or fn == "last":
                return [(None, value)] if own else self._at_row(agg, field, of)
            c = count(of=of)
            return [(c == 0, value)] + self._at_row(first, field, of, c > 0)
        if not self._contiguous(table):
            raise _err(clause, node, f"{fn.upper()}(..., {n}) of a variable inside a group or an alternation is not "
                       "supported: its rows need not be contiguous")
        c = count(of=of)          # rows of the set before the current one
        if fn == "last":
            if own and n == 1:    # the row before the current one: the set's last so far
                return self._at_row(last, field, of)
            if own:               # the current row is the set's last: n rows back
                return [(c >= n, prev(value, n)), (c < n, lit(None))]
            return self._at_row(last, field, of, c > n, lambda v: prev(v, n)) + [(c <= n, lit(None))]
        if name is None:
            raise _err(clause, node, f"FIRST(..., {n}) takes a column, not an expression")
        ahead = (lambda v: col(self.helpers.shifted(v.args[0], n)))      # the row n after, a lead column
        if own:
            return self._at_row(first, name, of, c > n, ahead) + [(c == n, value), (c < n, lit(None))]
        return self._at_row(first, name, of, c > n, ahead) + [(c <= n, lit(None))]

    def _at_row(self, agg, field: "str | Expr", of: list[str], guard: Expr | None = None,
                shift=lambda v: v) -> Alts:
        """``agg`` (colcep's ``first``/``last``) of ``shift(field)`` over ``of``: SQL's FIRST/LAST,
        the value at that row, NULL included. colcep's skip NULLs, so a column holding NULLs is
        read through a helper column carrying them as ``NULL_SENTINEL``."""
        if not (isinstance(field, str) and field in self.helpers.nullable):
            return [(guard, agg(shift(col(field)) if isinstance(field, str) else shift(field), of=of))]
        v = agg(shift(col(self.helpers.filled(field))), of=of)
        return [(_and(guard, v.is_null() | (v == NULL_SENTINEL)), lit(None)), (_and(guard, v != NULL_SENTINEL), v)]

    def _contiguous(self, table: str | None) -> bool:
        """Whether ``table``'s rows (None: the match's) form one contiguous run of the partition:
        a variable of the top-level sequence, not inside a group or an alternation."""
        if table is None:
            return True
        return any(it.kind == "var" and it.name == table for it in self.items)

    def _aggregate(self, node) -> Alts:
        from sqlglot import exp
        clause = f"DEFINE {self.var}"
        func = type(node).__name__.lower()
        arg = node.this
        if isinstance(arg, exp.Star) or (func == "count" and isinstance(arg, exp.Column) and
                                         isinstance(arg.this, exp.Star)):
            if func != "count":
                raise _err(clause, node, "only COUNT takes *")
            table = arg.table if isinstance(arg, exp.Column) and arg.table else None
            of = self.vars if table is None else [table]
            own = table is None or table == self.var
            return [(None, count(of=of) + 1 if own else count(of=of))]
        if isinstance(arg, exp.Distinct):
            raise _err(clause, node, "DISTINCT aggregates are not supported (as in Flink)")
        if isinstance(arg, exp.Column):
            table, name = self._col(arg)
            c: Expr = col(name)
            field: "str | Expr" = name
        else:
            table, c = self._expression(arg)
            field = c
        own = table is None or table == self.var
        of = tuple(self.vars if table is None else [table])
        so_far = _make_agg(func, field, of)
        isnull, notnull = c.is_null(), ~c.is_null()
        if func == "count" and not (isinstance(field, str) and field in self.helpers.numeric):
            return [(None, so_far + 1 if own else so_far)]     # rows: colcep's count (module docstring)
        # SQL's aggregates skip NULLs: the values so far are the sum of 1 per non-null value
        values = _make_agg("sum", c * 0.0 + 1.0, of)
        if func == "count":
            return [(None, values)] if not own else [(isnull, values), (notnull, values + 1)]
        if func == "sum":             # the SUM of no values is NULL (colcep's sum is 0)
            if not own:
                return [(values == 0, lit(None)), (values > 0, so_far)]
            return [(isnull & (values == 0), lit(None)), (isnull & (values > 0), so_far), (notnull, so_far + c)]
        integer = func == "avg" and _int_typed(node, self.helpers.ints)    # Flink: AVG of an INT is an INT
        if not own:
            return [(None, so_far.quot(1.0) if integer else so_far)]
        if func == "avg":
            s = _make_agg("sum", field, of)
            mean = (s + c).quot(values + 1) if integer else (s + c) / (values + 1)
            return [(isnull, so_far.quot(1.0) if integer else so_far), (notnull, mean)]
        # min / max: the current row if it is the first non-null value or beats the others
        better = (c < so_far) if func == "min" else (c > so_far)
        return [(isnull, so_far), (notnull & (so_far.is_null() | better), c),
                (notnull & ~so_far.is_null() & ~better, so_far)]

    def _physical(self, node, fn: str, args) -> Alts:
        clause = f"DEFINE {self.var}"
        if not args:
            raise _err(clause, node, f"{fn} needs a column")
        n = self._offset(node, args) if len(args) > 1 else 1
        if self.flink:         # Flink navigates the match's rows: PREV(X.col, n) is LAST(X.col, n)
            return self._first_last(node, "last", args[:1], n)
        table, name = self._col(args[0])
        if table is not None and table != self.var:
            raise _err(clause, node, f"{fn} of another variable's row is not supported in DEFINE; use "
                       f"{fn}({self.var}.{name}) or {fn}({name}) (the current row)")
        if fn == "PREV":       # the partition's n-th previous row: colcep's prev(), carried on streams
            return [(None, prev(name, n) if n > 0 else col(name))]
        return [(None, col(self.helpers.shifted(name, n)) if n > 0 else col(name))]

    def _expression(self, node) -> tuple[str | None, Expr]:
        """(the variable an arithmetic expression inside an aggregate, FIRST or LAST reads, or None;
        the expression over the current row's columns)."""
        from sqlglot import exp
        clause = f"DEFINE {self.var}"
        table, _ = self.helpers.expression(node, clause, self.vars, self.columns, register=False)   # checks it

        def conv(n) -> Expr:
            if isinstance(n, exp.Paren):
                return conv(n.this)
            if isinstance(n, exp.Column):
                return col(n.name)
            if isinstance(n, exp.Literal):
                return lit(float(n.this))
            if isinstance(n, exp.Neg):
                return -conv(n.this)
            meth = {exp.Add: "__add__", exp.Sub: "__sub__", exp.Mul: "__mul__", exp.Div: "__truediv__"}[type(n)]
            if isinstance(n, exp.Div) and _int_typed(n, self.helpers.ints):
                meth = "quot"
            return getattr(conv(n.this), meth)(conv(n.expression))
        return table, conv(node)


class _Helpers:
    """Columns colcep adds before matching: lag / lead columns for PREV / NEXT, and the values
    of expressions that aggregates, FIRST and LAST take (``SUM(A.price * A.volume)``)."""

    def __init__(self, ints: frozenset = frozenset(), numeric: frozenset = frozenset(),
                 nullable: frozenset = frozenset()):
        self.ints = ints          # integer columns, typed as Flink types them (Flink mode only)
        self.numeric = numeric    # numeric columns (COUNT(X.col) skips their NULLs)
        self.nullable = nullable  # numeric columns holding NULLs: FIRST / LAST read them through filled()
        self.fills: dict[str, str] = {}
        self.shifts: dict[tuple[str, int], str] = {}
        self.derived: dict[str, tuple[str, Any]] = {}     # expression text -> (column, expression)

    def filled(self, column: str) -> str:
        """The helper column holding ``column`` with its NULLs as ``NULL_SENTINEL``."""
        return self.fills.setdefault(column, f"__colcep_filled_{column}")

    def shifted(self, column: str, k: int) -> str:
        key = (column, k)
        if key not in self.shifts:
            self.shifts[key] = f"__colcep_{'prev' if k < 0 else 'next'}{abs(k)}_{column}"
        return self.shifts[key]

    def expression(self, node, clause: str, variables: list[str], columns: list[str],
                   register: bool = True) -> tuple[str | None, str]:
        """(the variable the expression reads, or None; the helper column holding its value);
        ``register=False`` only checks the expression (the column name is then None)."""
        from sqlglot import exp
        tables = set()
        for c in node.find_all(exp.Column):
            if isinstance(c.this, exp.Star):
                raise _err(clause, node, "* inside an expression")
            if c.table and c.table not in variables:
                raise _err(clause, c, f"{c.table!r} is not a pattern variable ({', '.join(variables)})")
            if c.name not in columns:
                raise _err(clause, c, f"no column {c.name!r} in the input")
            tables.add(c.table or None)
        if len(tables) > 1:
            raise _err(clause, node, "an expression inside an aggregate, FIRST or LAST must read one pattern "
                       "variable (as in Flink: SUM(A.price * A.tax), not AVG(A.price * B.tax))")
        for n in node.walk():
            if not isinstance(n, (exp.Column, exp.Identifier, exp.Literal, exp.Add, exp.Sub, exp.Mul, exp.Div,
                                  exp.Neg, exp.Paren)):
                raise _err(clause, n, "only arithmetic (+ - * /) of columns and numbers inside an aggregate, "
                           "FIRST or LAST")
        if not register:
            return (next(iter(tables)) if tables else None), None
        bare = node.copy()
        for c in bare.find_all(exp.Column):
            c.set("table", None)
        key = bare.sql()
        if key not in self.derived:
            self.derived[key] = (f"__colcep_expr{len(self.derived)}", bare)
        return (next(iter(tables)) if tables else None), self.derived[key][0]


def _int_typed(node, ints: frozenset) -> bool:
    """Whether Flink SQL types an expression as an integer: integer columns (``ints``) and
    literals, + - * / of integers, SUM MIN MAX FIRST LAST PREV of one, COUNT, and AVG of an
    integer (Flink's AVG of an INT is an INT). ``ints`` is empty outside Flink mode."""
    from sqlglot import exp
    if not ints:
        return False
    if isinstance(node, (exp.Paren, exp.Neg, exp.Abs, exp.Floor, exp.Ceil)):
        return _int_typed(node.this, ints)
    if isinstance(node, exp.Mod):
        return _int_typed(node.this, ints) and _int_typed(node.expression, ints)
    if isinstance(node, exp.Case):
        values = [b.args["true"] for b in node.args.get("ifs") or []] + [node.args.get("default")]
        return all(v is None or isinstance(v, exp.Null) or _int_typed(v, ints) for v in values)
    if isinstance(node, exp.Column):
        return node.name in ints
    if isinstance(node, exp.Literal):
        return not node.is_string and re.fullmatch(r"\d+", node.this) is not None
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
        return _int_typed(node.this, ints) and _int_typed(node.expression, ints)
    if isinstance(node, exp.Count):
        return True
    if isinstance(node, (exp.Sum, exp.Min, exp.Max, exp.Avg, exp.First, exp.Last)):
        return _int_typed(node.this, ints)
    if isinstance(node, exp.Anonymous) and node.name.upper() in ("FIRST", "LAST", "PREV") and node.expressions:
        return _int_typed(node.expressions[0], ints)
    return False


def as_float64(values):
    """Values as float64, as colcep's conditions compute (an integer beyond 2^53 rounds, it
    does not fail)."""
    return pc.cast(values, pa.float64(), safe=False)


def _arrow_eval(node, tbl: pa.Table, ints: frozenset = frozenset()):
    """The value of an arithmetic expression over a table's columns (float64; a division of
    integers truncated, in Flink mode, where ``ints`` names the integer columns)."""
    from sqlglot import exp
    if isinstance(node, exp.Paren):
        return _arrow_eval(node.this, tbl, ints)
    if isinstance(node, exp.Column):
        return as_float64(tbl.column(node.name))
    if isinstance(node, exp.Literal):
        return pa.scalar(float(node.this), pa.float64())
    if isinstance(node, exp.Neg):
        return pc.negate(_arrow_eval(node.this, tbl, ints))
    f = {exp.Add: pc.add, exp.Sub: pc.subtract, exp.Mul: pc.multiply, exp.Div: pc.divide}[type(node)]
    out = f(_arrow_eval(node.this, tbl, ints), _arrow_eval(node.expression, tbl, ints))
    return pc.trunc(out) if isinstance(node, exp.Div) and _int_typed(node, ints) else out


# ============================================================================ the query
@dataclass
class _Query:
    table: str
    alias: str | None
    select: list
    partition: list[str]
    time: str
    order: list[str]
    measures: list            # (name, node)
    all_rows: bool
    skip: AfterMatchSkipStrategy
    items: list[_Item]
    variables: list[str]
    define: dict              # var -> node
    window: str | None
    semantics: str = "cep"
    tree: Any = None          # the parsed SELECT

    @property
    def flink(self) -> bool:
        return self.semantics == "flink"


SEMANTICS = ("cep", "flink")


def _analyse(query: str, tables: "dict[str, Any] | None", semantics: str = "cep") -> _Query:
    """The query parsed and checked, within the limits of :mod:`colcep.lang.sql.limits`."""
    if semantics not in SEMANTICS:
        raise ValueError(f"semantics must be one of {', '.join(map(repr, SEMANTICS))}, got {semantics!r}")
    check_query(query)
    with deep_stack(query):
        q = _analyse_query(query, tables, semantics)
        if q.flink:
            refused_by_flink(q)
        return q


def _analyse_query(query: str, tables: "dict[str, Any] | None", semantics: str) -> _Query:
    from sqlglot import exp
    text, window = _split_within(query)
    tree = _parse_sql(_normalise_skip(text))
    if not isinstance(tree, exp.Select):
        raise _err("SELECT", tree, "expected SELECT ... FROM table MATCH_RECOGNIZE (...)")
    for clause in ("where", "group", "having", "order", "limit", "joins", "qualify", "distinct"):
        if tree.args.get(clause):
            raise _err(clause.upper(), tree.args[clause] if not isinstance(tree.args[clause], list)
                       else tree.args[clause][0], "only SELECT ... FROM table MATCH_RECOGNIZE (...) is supported")
    mr = tree.args.get("match")
    if mr is None:
        raise _err("FROM", tree.args.get("from_") or tree, "expected MATCH_RECOGNIZE after the table")
    frm = tree.args.get("from_")
    if frm is None or not isinstance(frm.this, exp.Table) or not frm.this.name:
        raise _err("FROM", frm or tree, "expected a table name")
    tname = frm.this.name
    if tables is not None and tname not in tables:
        raise _err("FROM", frm.this, f"unknown table {tname!r}: pass it as colcep.sql(query, {tname}=table)")
    alias = mr.args.get("alias")
    alias = alias.name if alias is not None else None
    # PARTITION BY / ORDER BY
    part = []
    for c in mr.args.get("partition_by") or []:
        if not isinstance(c, exp.Column) or c.table:
            raise _err("PARTITION BY", c, "expected a column name")
        part.append(c.name)
    order_node = mr.args.get("order")
    if order_node is None or not order_node.expressions:
        raise _err("ORDER BY", "MATCH_RECOGNIZE", "MATCH_RECOGNIZE needs ORDER BY with the time column first")
    order = []
    for i, o in enumerate(order_node.expressions):
        if not isinstance(o.this, exp.Column) or o.this.table:
            raise _err("ORDER BY", o, "expected a column name")
        if o.args.get("desc"):
            if i == 0:
                raise _err("ORDER BY", o, "the time column must be in ascending order")
            raise _err("ORDER BY", o, "descending tie breakers are not supported")
        order.append(o.this.name)
    # rows per match
    rows = mr.args.get("rows")
    rows_s = " ".join(rows.name.upper().split()) if rows is not None else "ONE ROW PER MATCH"
    if rows_s not in ("ONE ROW PER MATCH", "ALL ROWS PER MATCH"):
        raise _err("ROWS PER MATCH", rows, "expected ONE ROW PER MATCH or ALL ROWS PER MATCH")
    # PATTERN
    pnode = mr.args.get("pattern")
    if pnode is None:
        raise _err("PATTERN", mr, "missing PATTERN")
    items = _parse_pattern(pnode.name)
    variables: list[str] = []
    for it in items:
        variables.extend(v for v in it.variables() if v not in variables)
    check_pattern(len(variables), _size(items))
    if _can_be_empty(items):
        raise _err("PATTERN", pnode.name, "a pattern that can match no row is not supported (as in Flink)")
    # AFTER MATCH SKIP
    after = mr.args.get("after")
    skip: AfterMatchSkipStrategy = SkipToNext()
    if after is not None:
        s = " ".join(after.name.split())
        m = re.fullmatch(r"(?i)AFTER MATCH SKIP (PAST LAST ROW|TO NEXT ROW|TO FIRST (\S+)|TO LAST (\S+)|TO (\S+))", s)
        if not m:
            raise _err("AFTER MATCH SKIP", s, "expected PAST LAST ROW, TO NEXT ROW, TO FIRST x, TO LAST x or TO x")
        what = m.group(1).upper()
        if what == "PAST LAST ROW":
            skip = SkipPastLastEvent()
        elif what == "TO NEXT ROW":
            skip = SkipToNext()
        else:
            var = (m.group(2) or m.group(3) or m.group(4)).strip('"')
            if var not in variables:
                raise _err("AFTER MATCH SKIP", s, f"{var!r} is not a pattern variable ({', '.join(variables)})")
            first_var = items[0].name if items[0].kind == "var" else None
            if m.group(2) and var == first_var and items[0].lo > 0 and semantics != "flink":
                raise _err("AFTER MATCH SKIP", s, "SKIP TO FIRST of the first variable would start the next match "
                           "where this one started (Flink fails at run time)")
            skip = SkipToFirst(var) if m.group(2) else SkipToLast(var)
    # DEFINE
    define = {}
    for d in mr.args.get("define") or []:
        name = d.alias
        if name not in variables:
            raise _err("DEFINE", d.args.get("alias") or d, f"{name!r} is not a variable of the PATTERN "
                       f"({', '.join(variables)})")
        if name in define:
            raise _err("DEFINE", d.args.get("alias") or d, f"{name!r} is defined twice")
        check_tree(f"DEFINE {name}", d.this)
        define[name] = d.this
    measures = []
    for mnode in mr.args.get("measures") or []:
        frame = str(mnode.args.get("window_frame") or "").upper() or None     # RUNNING | FINAL | None
        a = mnode.this
        if not isinstance(a, exp.Alias):
            raise _err("MEASURES", a, "each measure needs a name: <expression> AS name")
        check_tree(f"MEASURES {a.alias}", a.this)
        measures.append((a.alias, a.this, frame))
    for e in tree.expressions:
        check_tree("SELECT", e)
    return _Query(tname, alias, list(tree.expressions), part, order[0], order, measures,
                  rows_s == "ALL ROWS PER MATCH", skip, items, variables, define, window, semantics, tree)


def compile_query(query: str, columns: "list[str] | pa.Schema", semantics: str = "cep") -> Pattern:
    """The Pattern a MATCH_RECOGNIZE query runs, for input with these columns. It reads only
    the input's columns (``PREV`` and ``LAST(X.col, n)`` become ``prev()``, aggregates over
    expressions colcep's own), so it runs on streams, in a Matcher or on Spark, except for
    ``NEXT(col, k)`` and ``FIRST(X.col, k)`` in DEFINE, which read the helper column
    ``__colcep_next<k>_<col>`` that :func:`sql` adds before matching. ``columns`` as a schema
    gives SQL's typing (integer arithmetic in Flink mode, COUNT skipping NULLs)."""
    with deep_stack(query):
        q = _analyse(query, None, semantics)
        return _query_pattern(q, list(columns.names) if isinstance(columns, pa.Schema) else list(columns),
                              helpers_for(q, columns))


def helpers_for(q: _Query, schema: "pa.Schema | list[str]", nullable: frozenset = frozenset()) -> "_Helpers":
    """The helper registry for a query over ``schema`` (column names alone: types unknown),
    ``nullable`` the numeric columns that hold NULLs."""
    if not isinstance(schema, pa.Schema):
        return _Helpers()
    ints = frozenset(f.name for f in schema if pa.types.is_integer(f.type))
    numeric = frozenset(f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    return _Helpers(ints if q.flink else frozenset(), numeric, nullable & numeric)


NULL_SENTINEL = -1.2345678901234567e307   # a NULL carried through colcep's first / last (a value no tick has)


def _query_pattern(q, columns: list[str], helpers: "_Helpers") -> Pattern:
    """The query's Pattern: DEFINE conditions over ``columns`` (helper columns registered in
    ``helpers``), PATTERN, WITHIN and AFTER MATCH SKIP."""
    cx = _Define(q.variables, columns, helpers, q.items, q.flink, q.time)
    conds = {v: cx.condition(v, node) for v, node in q.define.items()}
    p = _build_pattern(q.items, conds, [])
    if q.window is not None:
        p = p.within(q.window)
    return p.skip(q.skip)
