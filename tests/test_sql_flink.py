"""``colcep.sql(..., semantics="flink")`` against Flink 2.3 SQL itself: every case of the corpus
``tests/data/sql_flink.json`` (random MATCH_RECOGNIZE queries from ``tests/sqlgen.py`` and
probes of single rules, with the rows Flink gave or the error it raised, see ``flinksql.py``)
gives Flink's rows, or a SqlError where Flink refused the query or failed the job; the Spark
path gives the in-process result."""
import collections
import functools
import re

import pyarrow as pa
import pytest

import colcep as cc
from colcep.lang.sql import SqlError
from flinksql import (FINAL_WATERMARK, check, compare, engine_matches, flink_error, load, outcome, reference_matches,
                      reference_rows, rows_of, table, tie_sensitive, without_rowtime)

sql_cep = functools.partial(cc.sql, semantics="cep")  # colcep.sql's CEP-style mode (the default is "standard")

CASES = load()
# colcep's one deliberate divergence (conformance/SEMANTICS.md point 15): where matches held back
# behind an earlier partial match share their start event, Flink emits them in its heap's order.
# In SQL that is which match Flink reports when several from one start complete together or wait
# together: a reluctant loop before a variable that can take the same row (A+? B, A{2,}? B,
# A+? B* C, A+? B? C) or with a reluctant loop at the end (A+? B C*?, A+? B* C D*?)
TIES = {"g2_20", "g5_46", "s44_49", "s44_102", "s44_104", "s45_109", "s45_160", "s47_2", "s47_54", "s47_117",
        "s47_214", "w48_74", "w48_319"}
TICKS = table(next(c for c in CASES if c.get("expected")))      # 30 ticks of two symbols


def test_the_corpus_covers_what_it_claims():
    ran = [c for c in CASES if "error" not in c]
    assert len(CASES) >= 3200
    assert sum(bool(c["expected"]) for c in ran) >= 400, "queries that find matches"
    assert len(CASES) - len(ran) >= 500, "queries Flink refuses are in the corpus too"
    assert sum(any(v is None for r in c["rows"] for v in r) for c in ran) >= 200, "input with NULLs"
    text = " ".join(c["sql"] for c in ran)
    for feature in ("MATCH_ROWTIME()", "+?", "*?", "{2,}?", "WITHIN INTERVAL", "SKIP TO FIRST", "SKIP TO LAST",
                    "SKIP PAST LAST ROW", "SKIP TO NEXT ROW", "AVG(", "SUM(", "COUNT(", " / ", "IS NULL", ", 2)",
                    "NOT IN", "BETWEEN", "PREV(", "CASE WHEN", "ABS(", "FLOOR(", "CEIL(", "MOD(", "IS NOT NULL",
                    "A+? B* C", "A{1,}? B* C", "D*?)", "C*?)"):      # issue 44's shapes
        assert feature in text, feature
    # matches Flink emitted at the end of input (MATCH_ROWTIME: its final watermark)
    assert sum(any(FINAL_WATERMARK in map(str, r.values()) for r in c.get("expected") or []) for c in ran) >= 10
    reasons = collections.Counter(flink_error(c).split(".")[0] for c in CASES if "error" in c)
    for reason in ("Greedy quantifiers are not allowed as the last element of a Pattern yet",
                   "Optional pattern cannot be preceded by greedy pattern", "Could not skip to first element of a match",
                   "Reluctant optional variables are not supported yet"):
        assert reasons[reason], reason


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_flink_rows(case):
    problem = check(case)
    if case["id"] in TIES:
        # the divergence, shown: Flink's result hangs on its heap's order (the reference with
        # Flink's queue and with colcep's rule disagree), colcep gives its rule's matches, and
        # Flink's rows are those of the reference with Flink's queue (so nothing else differs:
        # not the compiled NFA, nor the translation of the quantifiers)
        assert problem is not None and problem.startswith("rows differ")
        assert tie_sensitive(case)
        assert engine_matches(case) == reference_matches(case, "colcep")
        assert compare(dict(case, expected=without_rowtime(case, case["expected"])),
                       reference_rows(case, "flink")) is None
        return
    assert problem is None, f"{case['sql']}\n{problem}"


def test_the_reference_agrees_with_colcep_on_the_corpus():
    """The tie check above is only as good as the reference: on the corpus's queries it finds
    colcep's matches (a sample, for time; the reference runs in plain Python)."""
    ran = [c for c in CASES if "error" not in c][::10]
    assert len(ran) > 40
    for c in ran:
        assert engine_matches(c) == reference_matches(c, "colcep"), c["sql"]


def test_cep_semantics_give_flink_rows_wherever_flink_runs_the_query():
    """The default semantics accept more than Flink does, and on what Flink runs (without its
    integer arithmetic and PREV, where the two differ on purpose) give the same rows. A skip
    to the first row of the first variable is refused before running there (any match would
    make the next one start where it started), where Flink fails once a match does.
    ``MATCH_ROWTIME()`` in MEASURES is the time of the match's last row here, where Flink's is
    the time it emits the match at: those columns are compared with the flink mode's rows
    instead, the others with Flink's."""
    def skips_to_the_first_row(sql):
        m = re.search(r"SKIP TO FIRST (\w+)\s+PATTERN \((\w+)([^ )]*)", sql)
        return m is not None and m.group(1) == m.group(2) and m.group(3) in ("", "+", "+?", "{2}", "{2}?", "{1,3}",
                                                                               "{1,3}?", "{2,}", "{2,}?", "{1}")
    same = [c for c in CASES if "error" not in c and " / " not in c["sql"] and "AVG(" not in c["sql"]
            and "PREV(" not in c["sql"] and not skips_to_the_first_row(c["sql"]) and c["id"] not in TIES]
    assert len(same) > 200
    for c in same:
        got = sql_cep(c["sql"], t=table(c))
        emitted = [a for a in re.findall(r"MATCH_ROWTIME\(\) AS (\w+)", c["sql"].split("DEFINE")[0])
                   if a in got.column_names]
        if emitted:     # the other columns: as the flink mode gives them, and as Flink does
            flink = sql_cep(c["sql"], semantics="flink", t=table(c))
            assert sorted(map(repr, flink.drop_columns(emitted).to_pylist())) == \
                sorted(map(repr, got.drop_columns(emitted).to_pylist())), c["sql"]
            got = got.drop_columns(emitted)
            c = dict(c, expected=[{k: v for k, v in r.items() if k not in emitted} for r in c["expected"]])
        assert compare(c, got.to_pylist()) is None, c["sql"]


def test_flink_refusals_name_the_clause():
    t = TICKS
    base = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES {m} {rows} PATTERN ({p}) " \
           "DEFINE A AS A.price > 8{d})"
    cases = [
        (dict(p="A B+"), "PATTERN: greedy quantifiers are not allowed as the last element"),
        (dict(p="A{,2} B"), "PATTERN: a quantifier without a lower bound"),
        (dict(p="A+ B? C"), "PATTERN: an optional variable cannot be preceded by a greedy one (A+)"),
        (dict(p="A B?? C"), "PATTERN: the reluctant optional quantifier ?? is not supported"),
        (dict(p="A+ B?? C{,2}"), "PATTERN: an optional variable cannot be preceded by a greedy one (A+)"),
        (dict(p="(A | B) C"), "PATTERN: alternation and PERMUTE"),
        (dict(p="(A B)+? C"), "PATTERN: group patterns are not supported yet"),
        (dict(rows="ALL ROWS PER MATCH"), "ROWS PER MATCH: Flink SQL runs only ONE ROW PER MATCH"),
        (dict(m="MATCH_NUMBER() AS n"), "MEASURES n: MATCH_NUMBER() is unsupported"),
        (dict(m="CLASSIFIER() AS c"), "MEASURES c: CLASSIFIER() is unsupported"),
        (dict(m="PREV(A.price) AS p"), "MEASURES p: PREV / NEXT cannot be used in MEASURES"),
        (dict(m="RUNNING LAST(A.price) AS p"), "MEASURES p: RUNNING is unsupported"),
        (dict(d=", B AS B.price > PREV(B.price)"), "DEFINE B: physical offsets within the partition"),
        (dict(d=", B AS B.price > NEXT(price)"), "DEFINE B: physical offsets within the partition"),
        (dict(m="A.price AS value"), "MEASURES: 'value' is a reserved word in Flink SQL"),
    ]
    for parts, message in cases:
        kw = dict(m="A.id AS a", rows="", p="A B", d="") | parts
        q = base.format(**kw)
        with pytest.raises(SqlError, match="^" + re.escape(message)):
            sql_cep(q, semantics="flink", t=t)
        if parts.get("p") not in ("A B?? C", "A+ B? C", "A+ B?? C{,2}"):
            sql_cep(q, t=t)         # colcep's own semantics run it (these two rules are colcep's as well)
    with pytest.raises(ValueError, match="semantics must be one of 'standard', 'cep', 'flink'"):
        sql_cep(base.format(m="A.id AS a", rows="", p="A B", d=""), semantics="oracle", t=t)


# Flink's MATCH_ROWTIME in MEASURES: the time its CEP operator emits the match at
# (colcep/lang/sql/rowtime.py, from MatchCodeGenerator and CepOperator); the corpus's probes of
# it (sqlgen.ROWTIME_PROBES), each with the times Flink gave
ROWTIME = {
    "rowtime_released_by_a_row": ["04.000"],            # [A2 B3] waits for the partial match from 1; row 4 ends it
    "rowtime_released_by_a_row_next": ["04.000"],
    "rowtime_released_other_key_between": ["08.000"],   # the next row of its own partition
    "rowtime_two_released_together": ["06.000", "06.000"],   # two waiting matches, out with one time
    "rowtime_never_released": [],                       # no WITHIN: the partial match never ends
    "rowtime_window_later_row": ["08.999"],             # the watermark (9 s - 1 ms) times the partial match out
    "rowtime_window_other_key": ["08.999"],             # ... moved by another partition's row
    "rowtime_window_row_inside_other_key": ["29.999"],
    "rowtime_window_watermark_ms": ["06.299"],          # the first watermark at or past 1 s + 5 s
    "rowtime_window_edge": ["06.000"],                  # the key's next row is at exactly 1 s + 5 s: its time
    "rowtime_window_edge_other_key": ["06.000"],
    "rowtime_timeout_and_failure_at_one_row": ["07.000"],   # one partial match timed out, the other failed at 7 s
    "rowtime_timeout_then_failure": ["08.000"],
    "rowtime_timeouts_one_by_one": ["08.499"],          # the later of two partial matches times out last
    "rowtime_window_end": [FINAL_WATERMARK],            # the end of input: Flink's final watermark
    "rowtime_window_row_inside_end": [FINAL_WATERMARK],
}


def test_match_rowtime_is_when_flink_emits_the_match():
    """``MATCH_ROWTIME()`` in ``MEASURES`` is the time Flink emits the match at: its last row's
    time, or, for a match that waited behind a partial match that started earlier, the time of
    the row on which that partial match failed, or the watermark (the latest time less 1 ms) that
    timed it out, or the final watermark (Long.MAX_VALUE ms) at the end of input. The cep mode
    keeps the time of the match's last row."""
    by_id = {c["id"]: c for c in CASES}
    for name, want in ROWTIME.items():
        case = by_id[name]
        want = [w if w == FINAL_WATERMARK else f"2024-01-01 09:30:{w}" for w in want]
        assert sorted(r["rt"] for r in case["expected"]) == want, name     # (the corpus: Flink's own times)
        got = rows_of(sql_cep(case["sql"], semantics="flink", t=table(case)))
        assert sorted(r["rt"] if r["rt"] == FINAL_WATERMARK else f"{r['rt']:%Y-%m-%d %H:%M:%S.%f}"[:-3]
                      for r in got) == want, name
        got = sql_cep(case["sql"], t=table(case))       # cep: the last row's time
        assert got.column("rt").to_pylist() == got.column("bt").to_pylist(), name


@pytest.mark.parametrize("semantics", ["cep", "flink"])
def test_match_rowtime_and_proctime(semantics):
    import datetime as dt
    t = TICKS
    q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES MATCH_ROWTIME() AS r, "
         "LAST(B.ts) AS b, MATCH_PROCTIME() AS p PATTERN (A B) DEFINE A AS A.price > 8, B AS MATCH_ROWTIME() > A.ts)")
    before = dt.datetime.now(dt.timezone.utc)
    out = sql_cep(q, semantics=semantics, t=t)
    after = dt.datetime.now(dt.timezone.utc)
    assert out.num_rows > 3
    assert out.column("r").to_pylist() == out.column("b").to_pylist()
    assert all(before - dt.timedelta(milliseconds=1) <= p <= after for p in out.column("p").to_pylist())


def test_a_skip_flink_fails_on_is_a_sql_error_only_when_a_match_hits_it():
    t = pa.table({"sym": ["X"] * 4, "ts": pa.array([1000, 2000, 3000, 4000], pa.timestamp("ms")),
                  "price": [5, 9, 4, 12]})
    q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(B.price) AS b "
         "AFTER MATCH SKIP TO FIRST {target} PATTERN (A B? C) DEFINE A AS A.price > {lo}, B AS B.price > 9, "
         "C AS C.price < 6)")
    with pytest.raises(SqlError, match=r"^AFTER MATCH SKIP TO FIRST B: a match has no row of B .*Flink fails the "
                                       r"job here \('Could not skip to B"):
        sql_cep(q.format(target="B", lo=8), semantics="flink", t=t)     # A 9, C 4: no B in the match
    with pytest.raises(SqlError, match=r"^AFTER MATCH SKIP TO FIRST A: the target is the first row of a match"):
        sql_cep(q.format(target="A", lo=8), semantics="flink", t=t)
    assert sql_cep(q.format(target="A", lo=100), semantics="flink", t=t).num_rows == 0   # no match, no failure
    # colcep's own semantics do not skip where the target has no row
    assert sql_cep(q.format(target="B", lo=8), t=t).to_pylist() == [{"sym": "X", "b": None}]


@pytest.mark.spark
def test_spark_gives_the_in_process_rows(spark):
    """The cases through ``colcep.sql`` on a Spark DataFrame give the in-process rows, or the
    SqlError (a failure found while matching fails the Spark job with its message): every
    refusal (raised before Spark runs), every probe of MATCH_ROWTIME (a partition's rows alone
    do not say when Flink emits a match: the stream's times are given to each), a sixth of the
    cases where Flink found matches or failed the job, a tenth of those without matches (a
    Spark job here costs 0.15-0.25 s, so all of them would take 6-8 minutes of CI)."""
    from concurrent.futures import ThreadPoolExecutor

    refused = [c for c in CASES if "error" in c and not c["rows"]]
    ran = [c for c in CASES if c.get("expected") or ("error" in c and c["rows"])]
    rowtime = [c for c in ran if c["id"] in ROWTIME]
    cases = refused + rowtime + [c for c in ran[::6] if c["id"] not in ROWTIME] + \
        [c for c in CASES if c.get("expected") == []][::10]
    assert len(cases) > 600
    with ThreadPoolExecutor(4) as pool:      # Spark jobs from 4 threads: its scheduling overlaps
        on_spark = list(pool.map(lambda c: outcome(c, spark), cases))
    for case, got in zip(cases, on_spark):
        assert got == outcome(case), case["sql"]


def test_measures_case_null_branches_and_integer_division_by_zero():
    t = pa.table({"sym": ["X"] * 3, "ts": pa.array([1000, 2000, 3000], pa.timestamp("ms")), "id": [1, 2, 3],
                  "d": pa.array([2, 0, 3], pa.int32())})
    q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES {m} AS x "
         "AFTER MATCH SKIP PAST LAST ROW PATTERN (A) DEFINE A AS A.id > 0)")
    got = sql_cep(q.format(m="CASE WHEN A.d > 2 THEN A.id * 1.5 ELSE NULL END"), semantics="flink", t=t)
    assert got.column("x").to_pylist() == [None, None, 4.5]
    assert sql_cep(q.format(m="A.id / A.d"), t=t).column("x").to_pylist() == [0.5, float("inf"), 1.0]
    with pytest.raises(SqlError, match=r"^MEASURES x: an integer division by zero \(Flink fails the job"):
        sql_cep(q.format(m="A.id / A.d"), semantics="flink", t=t)
    with pytest.raises(SqlError, match=r"^MEASURES x: an integer MOD by zero"):
        sql_cep(q.format(m="MOD(A.id, A.d)"), semantics="flink", t=t)


@pytest.mark.parametrize("semantics", ["cep", "flink"])
def test_aggregates_skip_nulls(semantics):
    """SQL's SUM, AVG and COUNT of a column skip its NULLs, in DEFINE (the row being tested
    included) and MEASURES; the SUM of no values is NULL."""
    t = pa.table({"sym": ["X"] * 5, "ts": pa.array([1000 * i for i in range(1, 6)], pa.timestamp("ms")),
                  "id": [1, 2, 3, 4, 5], "v": pa.array([None, None, 4.0, None, 8.0])})
    q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES SUM(A.v) AS s, AVG(A.v) AS a, "
         "COUNT(A.v) AS n, COUNT(*) AS rows_ AFTER MATCH SKIP PAST LAST ROW PATTERN (A{{{k}}}) DEFINE A AS {cond})")
    cases = [(2, "SUM(A.v) IS NULL", [[None, None, 0, 2]]),                 # rows 1-2: no values
             (3, "COUNT(A.v) < 2", [[4.0, 4.0, 1, 3]]),                     # rows 1-3: one value
             (3, "AVG(A.v) = 4 OR AVG(A.v) IS NULL", [[4.0, 4.0, 1, 3]]),   # 4 / 1 value, not / 3 rows
             (5, "SUM(A.v) IS NULL OR SUM(A.v) > 0", [[12.0, 6.0, 2, 5]])]
    for k, cond, want in cases:
        out = sql_cep(q.format(k=k, cond=cond), semantics=semantics, t=t).to_pylist()
        assert [[r["s"], r["a"], r["n"], r["rows_"]] for r in out] == want, cond


@pytest.mark.parametrize("semantics", ["cep", "flink"])
def test_nulls_follow_three_valued_logic(semantics):
    """A row whose value is NULL satisfies neither a comparison nor its negation, and NOT, AND,
    OR, CASE, ABS and BETWEEN keep SQL's UNKNOWN; IS NULL sees it."""
    t = pa.table({"sym": ["X"] * 6, "ts": pa.array([1000 * i for i in range(1, 7)], pa.timestamp("ms")),
                  "id": [1, 2, 3, 4, 5, 6], "price": pa.array([7, None, 3, None, 9, 2], pa.int64())})
    rows = {"A.price > 5": [1, 5], "NOT (A.price > 5)": [3, 6], "A.price > 5 OR A.price IS NULL": [1, 2, 4, 5],
            "NOT (A.price > 5 AND A.id > 0)": [3, 6], "A.price > 5 OR A.id = 2": [1, 2, 5],
            "NOT (A.price > 5 OR A.id = 2)": [3, 6], "NOT (A.price NOT BETWEEN 2 AND 7)": [1, 3, 6],
            "CASE WHEN A.price > 5 THEN TRUE WHEN A.id = 4 THEN TRUE ELSE FALSE END": [1, 4, 5],
            "NOT (ABS(A.price - 5) < 3)": [5, 6], "ABS(A.price) IS NULL": [2, 4], "FLOOR(A.price) IS NULL": [2, 4],
            "CASE WHEN A.price > 5 THEN TRUE END": [1, 5],
            "NOT (CASE WHEN A.id > 0 THEN A.price > 5 ELSE FALSE END)": [3, 6],
            "(A.price > 5) = TRUE": [1, 5]}
    for cond, want in rows.items():
        q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.id AS a "
             f"AFTER MATCH SKIP PAST LAST ROW PATTERN (A) DEFINE A AS {cond})")
        assert sql_cep(q, semantics=semantics, t=t).column("a").to_pylist() == want, cond


def test_edges_int64_extremes_nan_and_a_colliding_helper_name():
    """Integers beyond 2^53 round as conditions compute (float64), in the helper columns too;
    NaN is a value SUM carries; an input column named like a column colcep adds is an error
    naming it."""
    big = 2 ** 62
    t = pa.table({"sym": ["X"] * 4, "ts": pa.array([1000, 2000, 3000, 4000], pa.timestamp("ms")),
                  "v": pa.array([big, None, -big, 7], pa.int64()), "f": [1.0, float("nan"), None, 2.0]})
    q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.v) AS fv, B.v / 3 AS d, "
         "SUM(B.v * 2) AS s2, SUM(A.f) AS s AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) "
         "DEFINE B AS LAST(A.v) IS NULL OR B.v < A.v)")
    for semantics in ("cep", "flink"):
        rows = sql_cep(q, semantics=semantics, t=t).to_pylist()
        assert [(r["fv"], r["s2"]) for r in rows] == [(None, float(-big * 2))]
        assert rows[0]["d"] == pytest.approx(-big / 3, rel=1e-15) and rows[0]["s"] != rows[0]["s"]   # NaN
    with pytest.raises(SqlError, match=r"^FROM: the input has a column '__colcep_filled_v'"):
        sql_cep(q, semantics="flink", t=t.append_column("__colcep_filled_v", pa.array([1, 2, 3, 4])))
