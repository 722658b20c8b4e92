"""Flink 2.3 SQL's dialect of MATCH_RECOGNIZE (``semantics="flink"``): what Flink refuses
before running a query, as a SqlError naming the clause and Flink's reason. What Flink fails
on while running (a skip without its target) is checked where the matches are
(:mod:`colcep.lang.sql.run`); the rules that change results (integer arithmetic, PREV) are
in the lowering (:mod:`colcep.lang.sql.query`)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from colcep.lang.sql.flink_reserved import RESERVED
from colcep.lang.sql.query import _err

if TYPE_CHECKING:
    from colcep.lang.sql.query import _Query

_CLAUSE_OF = {"measures": "MEASURES", "define": "DEFINE", "partition_by": "PARTITION BY", "order": "ORDER BY",
              "expressions": "SELECT", "from": "FROM", "from_": "FROM"}


def _reserved_words(q: "_Query") -> None:
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


def refused_by_flink(q: "_Query") -> None:
    """What Flink 2.3 SQL refuses before running a query, as a SqlError naming the clause and
    Flink's reason (colcep's own semantics, ``"cep"``, runs all of it)."""
    from sqlglot import exp

    flink = " (Flink SQL refuses it)"
    _reserved_words(q)
    if q.all_rows:
        raise _err("ROWS PER MATCH", "ALL ROWS PER MATCH", "Flink SQL runs only ONE ROW PER MATCH" + flink)
    for it in q.items:
        if it.kind == "alt":
            raise _err("PATTERN", it.text, "alternation and PERMUTE: Flink's CEP has no branching patterns" + flink)
        if it.kind == "group":
            raise _err("PATTERN", it.text, "group patterns are not supported yet" + flink)
        if re.search(r"\{\s*,", it.text):
            raise _err("PATTERN", it.text, "a quantifier without a lower bound ({,m}): Flink's times(from, to) "
                       "needs from > 0; write {0,m}" + flink)
    last = q.items[-1]
    if not last.reluctant and last.lo != last.hi and (last.lo, last.hi) != (0, 1):
        raise _err("PATTERN", last.text, "greedy quantifiers are not allowed as the last element of a pattern: end "
                   "it with a single variable or a reluctant quantifier" + flink)
    if q.window is not None and q.window.endswith("ms"):
        raise _err("WITHIN", q.window, "Flink SQL's WITHIN takes SECOND, MINUTE, HOUR or DAY" + flink)
    for name, node, frame in q.measures:
        if frame == "RUNNING":
            raise _err(f"MEASURES {name}", "RUNNING", "RUNNING is unsupported" + flink)
        for f in node.find_all(exp.Anonymous, exp.Func):
            fn = f.name.upper() if isinstance(f, exp.Anonymous) else type(f).__name__.upper()
            if fn in ("MATCH_NUMBER", "CLASSIFIER"):
                raise _err(f"MEASURES {name}", f, f"{fn}() is unsupported" + flink)
            if fn in ("PREV", "NEXT", "LAG", "LEAD"):
                raise _err(f"MEASURES {name}", f, "PREV / NEXT cannot be used in MEASURES" + flink)
        for c in node.find_all(exp.Column):
            if isinstance(c.this, exp.Star) and c.table:
                raise _err(f"MEASURES {name}", c, f"unknown field '*' of {c.table}" + flink)
    for var, node in q.define.items():
        for f in node.find_all(exp.Anonymous, exp.Func):
            fn = f.name.upper() if isinstance(f, exp.Anonymous) else type(f).__name__.upper()
            args = f.expressions if isinstance(f, exp.Anonymous) else [f.this]
            if fn in ("NEXT", "LEAD") or (fn in ("PREV", "LAG") and args and isinstance(args[0], exp.Column)
                                          and args[0].table == var):
                raise _err(f"DEFINE {var}", f, "physical offsets within the partition are not supported" + flink)
            if fn in ("MATCH_NUMBER", "CLASSIFIER"):
                raise _err(f"DEFINE {var}", f, f"{fn}() is unsupported" + flink)
