"""Flink 2.3 SQL's dialect of MATCH_RECOGNIZE (``semantics="flink"``): what Flink refuses
before running a query, as a SqlError naming the clause and Flink's reason. What Flink fails
on while running (a skip without its target) is checked where the matches are
(:mod:`colcep.lang.sql.run`); the rules that change results (integer arithmetic, PREV) are
in the lowering (:mod:`colcep.lang.sql.query`)."""
from __future__ import annotations

import re
from typing import Any

from colcep.lang.sql.flink_reserved import RESERVED
from colcep.lang.sql.syntax import _err, function_args, function_name

_CLAUSE_OF = {"measures": "MEASURES", "define": "DEFINE", "partition_by": "PARTITION BY", "order": "ORDER BY",
              "expressions": "SELECT", "from": "FROM", "from_": "FROM"}


def _reserved_words(q: Any) -> None:
    """An unquoted identifier that Flink's parser reserves (``AT``, ``VALUE``, ``COUNT``...)."""
    from sqlglot import exp

    why = "is a reserved word in Flink SQL; quote it (`{0}`) or rename it (Flink SQL refuses it)"
    for ident in q.tree.find_all(exp.Identifier):
        if ident.quoted or ident.name.upper() not in RESERVED:
            continue
        node, clause = ident, "SELECT"
        while node.parent is not None:
            if isinstance(node.parent, (exp.MatchRecognize, exp.Select)) and node.arg_key in _CLAUSE_OF:
                clause = _CLAUSE_OF[node.arg_key]
                break
            node = node.parent
        raise _err(clause, ident.name, f"{ident.name!r} " + why.format(ident.name))
    for var in q.variables:
        if var.upper() in RESERVED:
            raise _err("PATTERN", var, f"{var!r} " + why.format(var))


def refused_by_flink(q: Any) -> None:
    """What Flink 2.3 SQL refuses before running a query, as a SqlError naming the clause and
    Flink's reason, checked in the order Flink meets them (so a query with several faults gets
    Flink's first): parsing, validation of MEASURES, planning, the pattern variable by variable
    (its DEFINE, then its quantifier), the MEASURES' code, and last the compiled pattern."""
    from sqlglot import exp

    _reserved_words(q)                                                      # the parser
    if q.window is not None and q.window.endswith("ms"):
        raise _err("WITHIN", q.window, "Flink SQL's WITHIN takes SECOND, MINUTE, HOUR or DAY" + _FLINK)
    for name, node, _ in q.measures:                                        # validation
        for f in node.find_all(exp.Anonymous, exp.Func):
            fn = function_name(f)
            if fn == "MATCH_NUMBER":
                raise _err(f"MEASURES {name}", f, "MATCH_NUMBER() is unsupported" + _FLINK)
            if fn in ("PREV", "NEXT", "LAG", "LEAD"):
                raise _err(f"MEASURES {name}", f, "PREV / NEXT cannot be used in MEASURES" + _FLINK)
        for c in node.find_all(exp.Column):
            if isinstance(c.this, exp.Star) and c.table:
                raise _err(f"MEASURES {name}", c, f"unknown field '*' of {c.table}" + _FLINK)
    if q.all_rows:                                                          # planning
        raise _err("ROWS PER MATCH", "ALL ROWS PER MATCH", "Flink SQL runs only ONE ROW PER MATCH" + _FLINK)
    previous = None
    for it in q.items:                                                      # translation, in pattern order
        if it.kind == "alt":
            raise _err("PATTERN", it.text, "alternation and PERMUTE: Flink's CEP has no branching patterns" + _FLINK)
        if it.kind == "group":
            raise _err("PATTERN", it.text, "group patterns are not supported yet" + _FLINK)
        _define(q, it.name)
        if re.search(r"\{\s*,", it.text):
            raise _err("PATTERN", it.text, "a quantifier without a lower bound ({,m}): Flink's times(from, to) "
                       "needs from > 0; write {0,m}" + _FLINK)
        if (it.lo, it.hi) in ((0, 1), (0, None)) and previous is not None and _greedy(previous):   # ? and *
            raise _err("PATTERN", it.text, f"an optional variable cannot be preceded by a greedy one ({previous.text})"
                       + _FLINK)
        if it.reluctant and (it.lo, it.hi) == (0, 1):
            raise _err("PATTERN", it.text, "the reluctant optional quantifier ?? is not supported" + _FLINK)
        previous = it
    for name, node, frame in q.measures:                                    # the MEASURES' code
        if frame == "RUNNING":
            raise _err(f"MEASURES {name}", "RUNNING", "RUNNING is unsupported" + _FLINK)
        for f in node.find_all(exp.Anonymous, exp.Func):
            if function_name(f) == "CLASSIFIER":
                raise _err(f"MEASURES {name}", f, "CLASSIFIER() is unsupported" + _FLINK)
    if _greedy(q.items[-1]):                                                # the NFA
        raise _err("PATTERN", q.items[-1].text, "greedy quantifiers are not allowed as the last element of a "
                   "pattern: end it with a single variable or a reluctant quantifier" + _FLINK)


_FLINK = " (Flink SQL refuses it)"


def _greedy(it) -> bool:
    """Flink's translation makes a quantified variable greedy unless reluctant, optional or exact."""
    return not it.reluctant and it.lo != it.hi and (it.lo, it.hi) != (0, 1)


def _define(q: Any, var: str) -> None:
    """A DEFINE condition Flink cannot generate code for."""
    from sqlglot import exp
    node = q.define.get(var)
    for f in node.find_all(exp.Anonymous, exp.Func) if node is not None else ():
        fn, args = function_name(f), function_args(f)
        if fn in ("NEXT", "LEAD") or (fn in ("PREV", "LAG") and args and isinstance(args[0], exp.Column)
                                      and args[0].table == var):
            raise _err(f"DEFINE {var}", f, "physical offsets within the partition are not supported" + _FLINK)
        if fn in ("MATCH_NUMBER", "CLASSIFIER"):
            raise _err(f"DEFINE {var}", f, f"{fn}() is unsupported" + _FLINK)
