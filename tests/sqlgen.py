"""Random MATCH_RECOGNIZE queries over small tick tables, in the case format of the Flink SQL
oracle (``../shared/tools/flink_sql_oracle``): ``{"id", "sql", "rows", "schema"}``.

The corpus ``tests/data/sql_flink.json`` holds such cases with the rows Flink 2.3 SQL gave
(``expected``) or the error it raised (``error``); ``tests/test_sql_flink.py`` runs colcep on
them. To grow or regenerate it::

    python tests/sqlgen.py --n 300 --seed 1 -o /tmp/cases.json
    $FLINK_VENV/bin/python tests/flinksql_oracle.py /tmp/cases.json --sort -o /tmp/flink.json \\
        2> /tmp/flink.log                  # the shared oracle, mended for Flink's final watermark
    python tests/sqlgen.py --absorb /tmp/flink.json [more] --logs /tmp/flink.log [more] \\
        -o tests/data/sql_flink.json      # the logs: the oracle's stderr, for the causes of failed jobs

(``--absorb`` keeps Flink's message of an error without the Java stack, the rows as lists, and
no rows for a query Flink refused before running it.)

The queries draw on what Flink SQL's MATCH_RECOGNIZE has (PARTITION BY, every quantifier greedy
and reluctant, the skip modes, WITHIN, aggregates, FIRST/LAST with offsets, MATCH_ROWTIME in
DEFINE and MEASURES) and on a few things it refuses, so both sides are checked. The corpus holds
random queries (ids ``g<seed>_<i>``, seeds 1 to 5), ``--probes`` (PROBES and ROWTIME_PROBES),
issue 44's shapes ``--shapes --n 300`` with seeds 44, 45, ``--within`` 46 and ``--hold`` 47 (ids
``s<seed>_<i>``) and ``--timing --n 400 --seed 48`` (ids ``w48_<i>``).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re

VARS = ["A", "B", "C", "D"]
QUANTS = ["", "", "", "+", "*", "?", "{2}", "{1,3}", "{2,}", "+?", "*?", "{1,3}?", "{2,}?", "{2}?", "{0,1}"]
LAST_QUANTS = ["", "", "", "?", "{2}", "+?", "*?", "{1,3}?", "{2,}?"]   # Flink refuses a greedy last variable
REFUSED = ["??", "{,2}", "{0,3}", "+", "*", "{1,3}"]     # reluctant optional, from 0, greedy (as the last)
T0 = dt.datetime(2024, 1, 1, 9, 30, 0)
SCHEMA = {"id": "INT", "sym": "STRING", "price": "INT", "vol": "INT", "px": "DOUBLE", "ts": "TIMESTAMP(3)"}


def rows(rng: random.Random, n: int, nulls: float = 0.0) -> list[dict]:
    """``n`` ticks of two symbols, one per second or two, ``price`` and ``vol`` small integers
    (so conditions hold often), ``px`` a price with cents; each of the three NULL with
    probability ``nulls``."""
    out, t = [], T0
    for i in range(n):
        t += dt.timedelta(seconds=rng.choice([1, 1, 2]))
        r = {"id": i + 1, "sym": rng.choice("XY"), "price": rng.randint(5, 15), "vol": rng.randint(1, 9),
             "px": round(rng.uniform(9.5, 10.5), 2), "ts": t.strftime("%Y-%m-%d %H:%M:%S.000")}
        for c in ("price", "vol", "px"):
            if rng.random() < nulls:
                r[c] = None
        out.append(r)
    return out


def _num_col(rng: random.Random) -> str:
    return rng.choice(["price", "price", "vol", "px"])


def _const(rng: random.Random, c: str) -> str:
    return {"price": str(rng.randint(6, 14)), "vol": str(rng.randint(2, 8)),
            "px": f"{rng.uniform(9.7, 10.3):.2f}"}[c]


def condition(rng: random.Random, var: str, earlier: list[str], depth: int = 0, loose: bool = False) -> str:
    """A DEFINE condition for ``var`` (``earlier``: the variables before it in the pattern);
    ``loose``: conditions that hold more often (no AND, no equality)."""
    kind = rng.choice(["cmp_const", "cmp_prev_var", "cmp_last_self", "agg", "agg", "first_last", "and", "or",
                       "null", "not", "arith", "count", "div", "decimal", "in", "between", "unqualified", "abs",
                       "floor", "mod", "case", "prev", "is_null"])
    if loose and kind == "and":
        kind = "or"
    if depth > 1 and kind in ("and", "or", "not"):
        kind = "cmp_const"
    c = _num_col(rng)
    op = rng.choice([">", "<", ">=", "<=", "<>"] if loose else [">", "<", ">=", "<=", "=", "<>"])
    if kind == "cmp_const":
        return f"{var}.{c} {op} {_const(rng, c)}"
    if kind == "cmp_prev_var" and earlier:
        return f"{var}.{c} {op} {rng.choice(earlier)}.{c}"
    if kind == "cmp_last_self":
        return f"{var}.{c} {op} LAST({var}.{c}, {rng.choice([1, 1, 2])})"
    if kind == "first_last":
        fn = rng.choice(["FIRST", "LAST"])
        other = rng.choice(earlier + [var])
        n = rng.choice(["", "", ", 1", ", 2"])
        return f"{var}.{c} {op} {fn}({other}.{c}{n})"
    if kind == "agg":
        fn = rng.choice(["SUM", "AVG", "MIN", "MAX"])
        other = rng.choice(earlier + [var, var])
        scale = {"SUM": 3, "AVG": 1, "MIN": 1, "MAX": 1}[fn]
        bound = {"price": rng.randint(6, 14) * scale, "vol": rng.randint(2, 8) * scale,
                 "px": round(rng.uniform(9.7, 10.3) * scale, 2)}[c]
        return f"{fn}({other}.{c}) {rng.choice(['<', '>', '<=', '>='])} {bound}"
    if kind == "count":
        other = rng.choice(earlier + [var])
        return f"COUNT({other}.{c}) {rng.choice(['<', '<=', '>'])} {rng.randint(1, 3)}"
    if kind == "and":
        return f"({condition(rng, var, earlier, depth + 1)}) AND ({condition(rng, var, earlier, depth + 1)})"
    if kind == "or":
        return (f"({condition(rng, var, earlier, depth + 1, loose)}) OR "
                f"({condition(rng, var, earlier, depth + 1, loose)})")
    if kind == "not":
        return f"NOT ({condition(rng, var, earlier, depth + 1, loose)})"
    if kind == "null":
        return f"LAST({var}.{c}, 1) IS {rng.choice(['', 'NOT '])}NULL OR {var}.{c} {op} LAST({var}.{c}, 1)"
    if kind == "arith" and earlier:
        other = rng.choice(earlier)
        return f"{var}.{c} {op} {other}.{c} + {rng.choice(['1', '2', '-1'])}"
    if kind == "div":
        other = rng.choice(earlier + [var])
        return f"{var}.{c} / 2 {op} {other}.{c} / {rng.choice(['3', '2', '4'])}"
    if kind == "decimal" and earlier:
        return f"{var}.{c} {rng.choice(['>', '<'])} {rng.choice(earlier)}.{c} * {rng.choice(['1.1', '0.9', '1.05'])}"
    if kind == "in":
        return f"{var}.vol {rng.choice(['', 'NOT '])}IN ({rng.randint(1, 4)}, {rng.randint(5, 9)})"
    if kind == "between":
        lo = rng.randint(6, 10)
        return f"{var}.price {rng.choice(['', 'NOT '])}BETWEEN {lo} AND {lo + rng.randint(1, 4)}"
    if kind == "unqualified":
        return f"{c} {op} {_const(rng, c)}"
    if kind == "abs":
        return f"ABS({var}.{c} - {_const(rng, c)}) {rng.choice(['<', '>'])} {rng.choice(['1', '2', '0.2'])}"
    if kind == "floor":
        return f"{rng.choice(['FLOOR', 'CEIL'])}({var}.px) {rng.choice(['=', '<>'])} 10"
    if kind == "mod":
        return f"MOD({var}.{rng.choice(['price', 'vol'])}, {rng.choice([2, 3])}) {rng.choice(['=', '<>'])} 0"
    if kind == "case":
        other = rng.choice(earlier + [var])
        return (f"CASE WHEN {other}.{c} {op} {_const(rng, c)} THEN {var}.vol > {rng.randint(2, 6)} "
                f"{rng.choice(['ELSE TRUE ', 'ELSE FALSE ', ''])}END")
    if kind == "prev":
        target = rng.choice(["", f"{rng.choice(earlier)}." if earlier else ""])
        return f"{var}.{c} {op} PREV({target}{c}{rng.choice(['', ', 2'])})"
    if kind == "is_null":
        return f"{rng.choice(['', 'NOT '])}({var}.{c} IS NULL) {rng.choice(['OR', 'AND'])} {var}.vol > 3"
    return f"{var}.{c} {op} {_const(rng, c)}"


def measure(rng: random.Random, variables: list[str], i: int) -> str:
    v = rng.choice(variables)
    c = rng.choice(["id", "id", "price", "vol", "px", "ts"])
    kind = rng.choice(["col", "first", "last", "last_n", "agg", "count", "rowtime", "div", "unqualified", "case",
                       "abs"])
    if kind == "col":
        e = f"{v}.{c}"
    elif kind in ("first", "last"):
        e = f"{kind.upper()}({v}.{c})"
    elif kind == "last_n":
        e = f"{rng.choice(['FIRST', 'LAST'])}({v}.{c}, {rng.choice([1, 2])})"
    elif kind == "agg":
        e = f"{rng.choice(['SUM', 'AVG', 'MIN', 'MAX'])}({v}.{_num_col(rng)})"
    elif kind == "count":
        e = rng.choice([f"COUNT({v}.id)", "COUNT(*)"])
    elif kind == "div":
        e = f"{v}.{_num_col(rng)} / {rng.choice(['2', '3', '2.5'])}"
    elif kind == "unqualified":
        e = f"{rng.choice(['FIRST', 'LAST', 'SUM', 'MAX'])}({_num_col(rng)})"
    elif kind == "case":
        e = (f"CASE WHEN {v}.price > {rng.randint(6, 14)} THEN {v}.vol {rng.choice(['WHEN ' + v + '.vol > 4 THEN 0 ', ''])}"
             f"{rng.choice(['ELSE -1 ', ''])}END")
    elif kind == "abs":
        e = f"ABS({v}.{_num_col(rng)} - 10)"
    else:
        e = "MATCH_ROWTIME()"
    return f"{e} AS m{i}"


def query(rng: random.Random, loose: bool = False) -> tuple[str, list[str]]:
    while True:
        n = rng.randint(2, 4)
        variables = VARS[:n]
        quants = [rng.choice(QUANTS) for _ in variables[:-1]] + [rng.choice(LAST_QUANTS)]
        if rng.random() < 0.1:          # now and then a quantifier Flink refuses
            quants[rng.randrange(n)] = rng.choice(REFUSED)
        if not all(q in ("*", "?", "*?", "??", "{,2}", "{0,1}", "{0,3}") for q in quants):
            break
    pattern = " ".join(v + q for v, q in zip(variables, quants))
    defined = [v for v in variables if rng.random() < 0.8]
    define = ",\n    ".join(f"{v} AS {condition(rng, v, variables[:variables.index(v)], loose=loose)}" for v in defined)
    if not define:
        define = f"{variables[0]} AS {variables[0]}.price > 0"
    measures = ", ".join(measure(rng, variables, i) for i in range(rng.randint(1, 4)))
    skip = rng.choice(["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW",
                       f"AFTER MATCH SKIP TO FIRST {rng.choice(variables)}",
                       f"AFTER MATCH SKIP TO LAST {rng.choice(variables)}", ""])
    within = rng.choice(["", "", f" WITHIN INTERVAL '{rng.choice([3, 5, 10])}' SECOND"])
    part = rng.choice(["PARTITION BY sym ", "PARTITION BY sym ", ""])
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (\n  {part}ORDER BY ts\n  MEASURES {measures}\n  ONE ROW PER MATCH\n"
           f"  {skip}\n  PATTERN ({pattern}){within}\n  DEFINE {define}\n)")
    return sql, variables


def cases(n: int, seed: int, max_rows: int = 30, loose: bool = False, nulls: float = 0.0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sql, _ = query(rng, loose)
        out.append({"id": f"g{seed}_{i}", "sql": sql, "rows": rows(rng, rng.randint(12, max_rows), nulls),
                    "schema": SCHEMA})
    return out


# Issue 44's shapes: a reluctant loop before a variable that can take the same row, a reluctant
# loop (a star above all) at the end, each with MATCH_ROWTIME() under every skip, with and
# without WITHIN. Conditions on one column with overlapping ranges, so that several splits of the
# same rows complete together and matches wait behind longer partial matches.
SHAPES = ["A+? B", "A{2,}? B", "A{1,3}? B", "A*? B", "A+? B C", "A+? B* C", "A{1,}? B* C", "A+? B+ C",
          "A+? B? C", "A+? B{1,3}? C", "A+? B+? C", "A{2,}? B{2} C", "A B*?", "A B C*?", "A+? B C*?",
          "A B+? C*?", "A B* C D*?", "A B+?", "A B C{2,}?", "A B{1,3}?", "A B? C D+?", "A+? B* C D*?"]
SKIPS = ["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW", "AFTER MATCH SKIP TO FIRST {v}",
         "AFTER MATCH SKIP TO LAST {v}", ""]


def _shape_condition(rng: random.Random, var: str, earlier: list[str], hold: bool = False) -> str:
    if hold and earlier and rng.random() < 0.5:     # beat the first row: early partial matches wait long
        return f"{var}.price > FIRST({earlier[0]}.price) + {rng.randint(1, 4)}"
    c = rng.choice(["price", "price", "price", "vol"])
    kind = rng.random()
    if kind < 0.6:
        return f"{var}.{c} {rng.choice(['>', '>=', '<', '<='])} {_const(rng, c)}"
    if kind < 0.75 and earlier:
        return f"{var}.{c} {rng.choice(['>', '<', '>=', '<='])} {rng.choice(earlier)}.{c}"
    if kind < 0.85:
        return f"{var}.{c} {rng.choice(['>', '<'])} LAST({var}.{c}, 1) OR LAST({var}.{c}, 1) IS NULL"
    return condition(rng, var, earlier, loose=True)


def shape_query(rng: random.Random, within: bool = False, hold: bool = False) -> str:
    pattern = rng.choice(SHAPES)
    variables = re.findall(r"[A-Z]", pattern)
    define = ",\n    ".join(f"{v} AS {_shape_condition(rng, v, variables[:i], hold)}" for i, v in enumerate(variables)
                            if rng.random() < 0.9) or "A AS A.price > 6"
    m = ["MATCH_ROWTIME() AS rt"]
    for v in variables:
        m += [f"FIRST({v}.id) AS f{v.lower()}", f"LAST({v}.id) AS l{v.lower()}"][:rng.choice([1, 2, 2])]
    m.append(rng.choice(["COUNT(*) AS n", f"COUNT({variables[1]}.id) AS n", "LAST(ts) AS lt", "FIRST(ts) AS ft"]))
    skip = rng.choice(SKIPS).format(v=rng.choice(variables))
    interval = f" WITHIN INTERVAL '{rng.choice([2, 3, 4, 5, 8])}' SECOND"
    within = interval if within else rng.choice(["", "", interval])
    part = rng.choice(["PARTITION BY sym ", "PARTITION BY sym ", ""])
    return (f"SELECT * FROM t MATCH_RECOGNIZE (\n  {part}ORDER BY ts\n  MEASURES {', '.join(m)}\n"
            f"  ONE ROW PER MATCH\n  {skip}\n  PATTERN ({pattern}){within}\n  DEFINE {define}\n)")


def shape_cases(n: int, seed: int, max_rows: int = 24, within: bool = False, hold: bool = False) -> list[dict]:
    """``n`` queries of issue 44's shapes (``SHAPES``) over ticks, ids ``s<seed>_<i>`` (``within``:
    each with ``WITHIN``; ``hold``: half the later variables must beat the first row, so that
    matches wait behind earlier partial matches more often)."""
    rng = random.Random(seed)
    return [{"id": f"s{seed}_{i}", "sql": shape_query(rng, within, hold), "rows": rows(rng, rng.randint(10, max_rows)),
             "schema": SCHEMA} for i in range(n)]


def timing_cases(n: int, seed: int) -> list[dict]:
    """``n`` queries where matches wait behind earlier partial matches that time out (``WITHIN``),
    so that Flink emits them at a watermark (MATCH_ROWTIME; ids ``w<seed>_<i>``): the later
    variables must mostly beat the first row, over 3-4 partitions whose rows are 0.3-1 s apart
    (Flink's watermark moves with each row that far apart), so that a partition's partial match
    times out on another's row."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        pattern = rng.choice(["A+? B", "A{2,}? B", "A+? B C*?", "A+? B? C", "A+? B{1,2}? C", "A B+? C"])
        variables = re.findall(r"[A-Z]", pattern)
        define = [f"A AS A.price > {rng.randint(5, 7)}"] + [
            f"{v} AS {v}.price > FIRST(A.price) + {rng.randint(2, 5)}" if rng.random() < 0.8 else
            f"{v} AS {v}.price {rng.choice(['>', '<'])} {rng.randint(6, 14)}" for v in variables[1:]]
        measures = ["MATCH_ROWTIME() AS rt", "FIRST(A.id) AS fa", "LAST(A.id) AS la"] + \
            [f"LAST({v}.id) AS l{v.lower()}" for v in variables[1:]]
        sql = _probe(pattern, define=", ".join(define), measures=", ".join(measures),
                     skip=rng.choice(SKIPS[:2] + [f"AFTER MATCH SKIP TO LAST {variables[-1]}", ""]),
                     within=f" WITHIN INTERVAL '{rng.choice([2, 3, 4])}' SECOND")
        ms, data, syms = 0, [], "WXYZ"[:rng.choice([3, 4])]
        for j in range(rng.randint(16, 30)):
            ms += rng.choice([300, 500, 700, 1000])
            data.append(_tick(j + 1, ms, rng.randint(5, 15), rng.choice(syms)))
        out.append({"id": f"w{seed}_{i}", "sql": sql, "rows": data, "schema": SCHEMA})
    return out


def _probe(pattern: str, define: str = "A AS A.price > 8", measures: str = "FIRST(A.id) AS fa",
           rpm: str = "ONE ROW PER MATCH", skip: str = "AFTER MATCH SKIP PAST LAST ROW", part: str = "PARTITION BY sym ",
           within: str = "", order: str = "ts") -> str:
    return (f"SELECT * FROM t MATCH_RECOGNIZE (\n  {part}ORDER BY {order}\n  MEASURES {measures}\n  {rpm}\n  {skip}\n"
            f"  PATTERN ({pattern}){within}\n  DEFINE {define}\n)")


PROBES = {      # one rule each: what Flink accepts, refuses, and how it navigates and types
    "all_rows": _probe("A B", rpm="ALL ROWS PER MATCH"),
    "match_number": _probe("A B", measures="MATCH_NUMBER() AS n"),
    "classifier": _probe("A B", measures="CLASSIFIER() AS c"),
    "prev_unqualified": _probe("A B", define="A AS A.price > 8, B AS B.price > PREV(price)"),
    "prev_self": _probe("A B", define="A AS A.price > 8, B AS B.price > PREV(B.price)"),
    "prev_self_2": _probe("A B", define="A AS A.price > 8, B AS B.price > PREV(B.price, 2)"),
    "prev_other": _probe("A B", define="A AS A.price > 8, B AS B.price > PREV(A.price)"),
    "prev_at_first_row": _probe("A B", define="A AS A.price > PREV(price), B AS B.vol > 0"),
    "prev_other_multi": _probe("A{2,}? B", define="A AS A.vol > 1, B AS B.price > PREV(A.price)"),
    "prev_2_unqualified": _probe("A B C", define="C AS C.price > PREV(price, 2)"),
    "next_define": _probe("A B", define="A AS A.price > 8, B AS B.price > NEXT(B.price)"),
    "next_unqualified": _probe("A B", define="A AS A.price < NEXT(price)"),
    "prev_measure": _probe("A B", measures="PREV(B.price) AS p"),
    "in_list": _probe("A B", define="A AS A.price IN (8, 9, 10), B AS B.vol > 2"),
    "between": _probe("A B", define="A AS A.price BETWEEN 8 AND 10, B AS B.vol > 2"),
    "running": _probe("A B", measures="RUNNING LAST(A.price) AS p"),
    "final": _probe("A B", measures="FINAL LAST(A.price) AS p"),
    "final_aggregates": _probe("A+? B", measures="FINAL SUM(A.vol) AS s, FINAL COUNT(*) AS c"),
    "quant_0_1": _probe("A{0,1} B"), "quant_1": _probe("A{1} B"), "quant_0_inf": _probe("A{0,} B"),
    "quant_2_reluctant": _probe("A{2}? B"), "quant_1_3": _probe("A{1,3} B"),
    "skip_to_var": _probe("A B+? C", skip="AFTER MATCH SKIP TO B"),
    "skip_absent_without_match": _probe("A B? C", define="A AS A.price > 100", skip="AFTER MATCH SKIP TO FIRST B"),
    "count_star": _probe("A B", measures="COUNT(*) AS c"),
    "count_var_star": _probe("A+? B", measures="COUNT(A.*) AS c"),
    "count_define": _probe("A+? B", define="A AS COUNT(A.price) < 3, B AS COUNT(*) > 2"),
    "unqualified_define": _probe("A B", define="A AS price > 8, B AS vol > 2"),
    "unqualified_measures": _probe("A B", measures="LAST(price) AS p, SUM(vol) AS s"),
    "rowtime_arg": _probe("A B", measures="MATCH_ROWTIME(ts) AS p"),
    "rowtime_define": _probe("A B", define="A AS A.price > 8, B AS MATCH_ROWTIME() > A.ts"),
    "alternation": _probe("A | B"), "group": _probe("(A B)+? C"), "permute": _probe("PERMUTE(A, B)"),
    "sum_expression": _probe("A+? B", measures="SUM(A.price * A.vol) AS s"),
    "avg_int": _probe("A+? B", define="A AS AVG(A.price) > 9, B AS B.vol > 2",
                      measures="AVG(A.price) AS a, COUNT(A.id) AS c"),
    "avg_int_negative": _probe("A{2,}? B", define="A AS A.vol > 1",
                               measures="AVG(A.price - 12) AS a, SUM(A.price) / 3 AS s, (0 - A.price) / 4 AS d"),
    "int_division": _probe("A B", define="A AS A.price / 2 > 4, B AS B.vol > 2",
                           measures="A.price / 2 AS h, A.px / 2 AS g"),
    "decimal_literal": _probe("A B", define="A AS A.price * 1.1 > 10, B AS B.vol > 2", measures="A.price * 1.1 AS h"),
    "sum_of_no_rows": _probe("A*? B", define="B AS SUM(A.vol) < 10"),
    "not_sum_of_no_rows": _probe("A*? B", define="B AS NOT (SUM(A.vol) >= 10)"),
    "avg_of_no_rows": _probe("A*? B", define="B AS AVG(A.vol) IS NULL"),
    "min_of_no_rows_or": _probe("A*? B", define="B AS MIN(A.vol) > 3 OR B.price > 12"),
    "first_last_offsets": _probe("A+? B{2,}? C", define="A AS A.price > 6, C AS C.price > LAST(B.price, 1) AND "
                                 "FIRST(B.vol, 1) > 2 AND LAST(A.price, 1) IS NULL",
                                 measures="FIRST(B.id, 1) AS x, LAST(A.id, 1) AS y"),
    "first_offset_self": _probe("A{3,}? B", define="A AS A.price >= FIRST(A.price, 1) OR FIRST(A.price, 1) IS NULL, "
                                "B AS B.vol > 2"),
    "offsets_measures": _probe("A{2,}? B", define="A AS A.vol > 1",
                               measures="FIRST(A.id, 1) AS f1, LAST(A.id, 1) AS l1, FIRST(A.id, 5) AS f5"),
    "last_2_unqualified": _probe("A{2,}? B", define="A AS A.vol > 1, B AS B.price > LAST(price, 2)"),
    "within_ms": _probe("A B", within=" WITHIN INTERVAL '1500' MILLISECOND"),
    "within_hour": _probe("A B", within=" WITHIN INTERVAL '1' HOUR"),
    "within_fraction": _probe("A B", within=" WITHIN INTERVAL '1.5' SECOND"),
    "true_define": _probe("A B", define="A AS TRUE"),
    "negation": _probe("A B", define="A AS -A.price < -8"),
    "case_when": _probe("A B", define="A AS CASE WHEN A.price > 8 THEN TRUE ELSE FALSE END"),
    "abs": _probe("A B", define="A AS ABS(A.price - 10) < 2"),
    "mod": _probe("A B", define="A AS MOD(A.price, 2) = 0"),
    "null_comparison": _probe("A B", define="A AS A.price > NULL OR A.price > 12"),
    "string_comparison": _probe("A B", define="A AS A.sym = 'X', B AS B.sym <> A.sym"),
    "order_tie_breaker": _probe("A B", order="ts, id"),
    "reserved_alias": _probe("A B", measures="MATCH_ROWTIME() AS r, A.ts AS at"),
    "cast_rowtime": _probe("A B", measures="CAST(MATCH_ROWTIME() AS BIGINT) AS r"),
    "no_partition": _probe("A B+? C", part="", define="B AS B.price > A.price, C AS C.vol < 3"),
    # a reluctant variable then a greedy one: two splits of the same rows complete on the same row
    "reluctant_then_greedy_next": _probe("A+? B* C", define="A AS A.price > 6, B AS B.vol > 3, C AS C.vol <= 3",
                                         skip="AFTER MATCH SKIP TO NEXT ROW",
                                         measures="FIRST(A.id) AS fa, LAST(A.id) AS la, COUNT(B.id) AS nb, C.id AS c"),
    "reluctant_then_greedy_past": _probe("A{1,}? B* C", define="A AS A.price > 6, B AS B.vol > 3, C AS C.vol <= 3",
                                         measures="FIRST(A.id) AS fa, LAST(A.id) AS la, COUNT(B.id) AS nb, C.id AS c"),
    "reluctant_then_greedy_last": _probe("A{1,}? B* C", define="A AS A.price > 6, B AS B.vol > 3, C AS C.vol <= 3",
                                         skip="AFTER MATCH SKIP TO LAST A",
                                         measures="FIRST(A.id) AS fa, LAST(A.id) AS la, COUNT(B.id) AS nb, C.id AS c"),
}


def _tick(i: int, ms: int, price: int, sym: str = "X") -> dict:
    t = T0 + dt.timedelta(milliseconds=ms)
    return {"id": i, "sym": sym, "price": price, "vol": 5, "px": 10.0, "ts": t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}


def _rowtime_probe(skip: str = "AFTER MATCH SKIP PAST LAST ROW", within: str = "") -> str:
    # A+? B where B must beat the first A by 5: a partial match from a high first A lives on (and
    # holds back the matches of later starts) until a row is neither A nor such a B
    return _probe("A+? B", define="A AS A.price > 5, B AS B.price > FIRST(A.price) + 5", skip=skip,
                  measures="FIRST(A.id) AS fa, LAST(B.id) AS lb, MATCH_ROWTIME() AS rt, LAST(B.ts) AS bt",
                  within=within)


_W5 = " WITHIN INTERVAL '5' SECOND"
_HELD = [_tick(1, 1000, 10), _tick(2, 2000, 6), _tick(3, 3000, 12)]   # [A2 B3] waits for the partial match from 1
ROWTIME_PROBES = {   # when Flink emits a match (MATCH_ROWTIME), one situation each: (query, rows)
    "rowtime_released_by_a_row": (_rowtime_probe(), _HELD + [_tick(4, 4000, 1)]),
    "rowtime_released_by_a_row_next": (_rowtime_probe("AFTER MATCH SKIP TO NEXT ROW"), _HELD + [_tick(4, 4000, 1)]),
    "rowtime_released_other_key_between": (_rowtime_probe(), _HELD + [_tick(5, 5000, 1, "Y"), _tick(4, 8000, 1)]),
    "rowtime_never_released": (_rowtime_probe(), _HELD),
    "rowtime_two_released_together": (_rowtime_probe("AFTER MATCH SKIP TO NEXT ROW"), [
        _tick(1, 1000, 10), _tick(2, 2000, 6), _tick(3, 3000, 12), _tick(4, 4000, 7), _tick(5, 5000, 13),
        _tick(6, 6000, 1)]),
    "rowtime_window_later_row": (_rowtime_probe(within=_W5), _HELD + [_tick(4, 9000, 8)]),
    "rowtime_window_other_key": (_rowtime_probe(within=_W5), _HELD + [_tick(4, 9000, 8, "Y"),
                                                                      _tick(5, 20000, 8, "Y")]),
    "rowtime_window_end": (_rowtime_probe(within=_W5), _HELD),
    "rowtime_window_row_inside_end": (_rowtime_probe(within=_W5), _HELD + [_tick(4, 4000, 8)]),
    "rowtime_window_row_inside_other_key": (_rowtime_probe(within=_W5), _HELD + [_tick(4, 4000, 8),
                                                                                 _tick(5, 30000, 8, "Y")]),
    "rowtime_window_edge": (_rowtime_probe(within=_W5), _HELD + [_tick(4, 6000, 8)]),
    "rowtime_window_edge_other_key": (_rowtime_probe(within=_W5), _HELD + [_tick(4, 6000, 8), _tick(5, 7000, 8, "Y")]),
    # Flink emits a watermark with a row when it moved by more than 200 ms (so these are 300 ms apart)
    "rowtime_window_watermark_ms": (_rowtime_probe(within=_W5), _HELD + [
        _tick(4, 5700, 8, "Y"), _tick(5, 6000, 8, "Y"), _tick(6, 6300, 8, "Y"), _tick(7, 9000, 8)]),
    # the first partial match times out and the second fails on the same row: out at the row's time
    "rowtime_timeout_and_failure_at_one_row": (_rowtime_probe(within=_W5), [
        _tick(1, 1000, 10), _tick(2, 3000, 11), _tick(3, 4000, 6), _tick(4, 5000, 12), _tick(5, 7000, 1)]),
    "rowtime_timeout_then_failure": (_rowtime_probe(within=_W5), [
        _tick(1, 1000, 10), _tick(2, 3000, 11), _tick(3, 4000, 6), _tick(4, 5000, 12), _tick(5, 7000, 5, "Y"),
        _tick(6, 8000, 1)]),
    "rowtime_timeouts_one_by_one": (_rowtime_probe(within=_W5), [
        _tick(1, 1000, 10), _tick(2, 3000, 11), _tick(3, 4000, 6), _tick(4, 5000, 12), _tick(5, 6500, 7, "Y"),
        _tick(6, 7500, 7, "Y"), _tick(7, 8500, 7, "Y"), _tick(8, 9500, 7)]),
}


def probes(seed: int = 5) -> list[dict]:
    data = rows(random.Random(seed), 30)
    return [{"id": name, "sql": sql, "rows": data, "schema": SCHEMA} for name, sql in PROBES.items()] + \
        [{"id": name, "sql": sql, "rows": r, "schema": SCHEMA} for name, (sql, r) in ROWTIME_PROBES.items()]


def _causes(log: str) -> dict[str, str]:
    """Per failed case of an oracle run, the root cause in its full Java trace (the oracle's
    stderr: each trace followed by ``# <id>: ERROR``); the output keeps only 2,000 characters."""
    out, trace = {}, []
    for line in open(log):
        m = re.match(r"# (\S+): ERROR", line)
        if m:
            causes = re.findall(r"^Caused by: [\w.$]+: (.+)", "".join(trace), re.M)
            if causes:
                out[m.group(1)] = causes[-1].strip()
            trace = []
        elif line.startswith("# "):
            trace = []
        else:
            trace.append(line)
    return out


def absorb(paths: list[str], logs: list[str] | None = None) -> list[dict]:
    """The oracle's outputs as corpus cases: Flink's error message without the Java stack (the
    last ``...Exception: message`` of the trace, or the root cause from the oracle's log for a
    job that failed), input rows as lists in schema order."""
    out = []
    for i, path in enumerate(paths):
        causes = _causes(logs[i]) if logs else {}
        for case in json.load(open(path)):
            c = {"id": case["id"], "sql": case["sql"], "schema": case["schema"],
                 "rows": [[r.get(k) for k in case["schema"]] for r in case["rows"]]}
            if "error" in case:
                msgs = re.findall(r"(?:Exception|Error): (.+)", case["error"])
                c["error"] = causes.get(case["id"]) or (msgs[-1] if msgs else case["error"].splitlines()[0]).strip()
                if "Job execution failed" in c["error"]:
                    raise ValueError(f"{case['id']}: the job failed; pass the oracle's log (--logs) for its cause")
                if not c["error"].startswith("Could not skip"):
                    c["rows"] = []      # refused before running: the rows do not matter
            else:
                c["expected"] = case["expected"]
            out.append(c)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-rows", type=int, default=30)
    ap.add_argument("--loose", action="store_true", help="conditions that hold more often")
    ap.add_argument("--nulls", type=float, default=0.0, help="the probability of a NULL price, vol or px")
    ap.add_argument("--absorb", nargs="+", metavar="ORACLE_OUTPUT", help="build the corpus from oracle outputs")
    ap.add_argument("--logs", nargs="+", metavar="ORACLE_STDERR", help="the oracle runs' stderr, one per output")
    ap.add_argument("--probes", action="store_true", help="the cases of PROBES, one rule each")
    ap.add_argument("--shapes", action="store_true", help="issue 44's shapes (SHAPES), ids s<seed>_<i>")
    ap.add_argument("--within", action="store_true", help="with --shapes: every query with WITHIN")
    ap.add_argument("--hold", action="store_true", help="with --shapes: conditions that make matches wait")
    ap.add_argument("--timing", action="store_true", help="matches released by timeouts (timing_cases), ids w<seed>_<i>")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    with open(a.output, "w") as f:
        if a.absorb:
            f.write("[\n" + ",\n".join(json.dumps(c) for c in absorb(a.absorb, a.logs)) + "\n]\n")
        else:
            json.dump(probes() if a.probes else shape_cases(a.n, a.seed, a.max_rows, a.within, a.hold) if a.shapes else
                      timing_cases(a.n, a.seed) if a.timing else
                      cases(a.n, a.seed, a.max_rows, a.loose, a.nulls), f, indent=1)


if __name__ == "__main__":
    main()
