"""SQL MATCH_RECOGNIZE in standard mode (``colcep.sql(..., semantics="standard")``): Trino's own
tests as data, the kernel against the plain-Python reference on random queries, and the edges
(errors, nulls, strings, capacity, Ctrl-C)."""
from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import colcep
from colcep.errors import CapacityError
from colcep.kernels import rowpattern as K
from colcep.lang.sql.standard import run as std_run
from colcep.lang.sql.standard.syntax import StdError
from sqlstd_reference import Matcher, TooLong, reference
from sqlstd_threads import ThreadMatcher
from test_sql_standard_reference import CASES, _norm
from test_sql_standard_threads import defines, parts, refs

RUN = [c for c in CASES if "skip" not in c]


def _table(columns: list[str], rows: list[list]) -> pa.Table:
    if not rows:
        return pa.table({c: pa.array([], pa.null()) for c in columns})
    return pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)})


def _rows(out: pa.Table) -> list[tuple]:
    return [tuple(_norm(v) for v in r) for r in zip(*[c.to_pylist() for c in out.columns])]


def _by_partition(rows: list[tuple]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


def std(query: str, **tables) -> pa.Table:
    return colcep.sql(query, semantics="standard", **tables)


# ------------------------------------------------------------------------------ Trino's tests
@pytest.mark.parametrize("case", RUN, ids=[c["name"] for c in RUN])
def test_trinos_results(case):
    t = _table(case["input"]["columns"], case["input"]["rows"])
    exp_ = case["expected"]
    if "error" in exp_:
        with pytest.raises(StdError) as err:
            std(case["query"], t=t)
        words = [w for w in exp_["error"].lower().replace(":", " ").split() if len(w) > 3][:4]
        assert any(w in str(err.value).lower() for w in words), (exp_["error"], str(err.value))
        return
    got = _rows(std(case["query"], t=t))
    want = [tuple(_norm(v) for v in r) for r in exp_.get("rows", [])]
    if exp_.get("ordered") or exp_.get("empty"):
        assert got == want
    else:
        assert Counter(got) == Counter(want)


def test_the_corpus_covers_the_standards_features():
    feats = Counter(f for c in RUN for f in c["features"])
    for f in ("pattern can match empty (empty matches)", "anchor ^ (partition start)", "anchor $ (partition end)",
              "exclusion {- -}", "SUBSET (union variables)", "reluctant quantifier", "FINAL semantics",
              "nested navigation PREV/NEXT(FIRST/LAST(...))", "OMIT EMPTY MATCHES", "WITH UNMATCHED ROWS",
              "AFTER MATCH SKIP TO NEXT ROW", "AFTER MATCH SKIP TO FIRST var", "delimited (case-sensitive) pattern "
              "variable", "PERMUTE", "aggregate in DEFINE (sum)"):
        assert feats[f] >= 1, f


def test_oracles_documented_v_shape():
    """Oracle's Data Warehousing Guide, "SQL for Pattern Matching", Example 1 (the ticker table of
    its tutorial, ACME's April 2011 prices): three V shapes, each starting where the last ended."""
    prices = [12, 17, 19, 21, 25, 12, 15, 20, 24, 25, 19, 15, 25, 25, 14, 12, 14, 24, 23, 22]
    t = pa.table({"symbol": ["ACME"] * 20, "tstamp": [f"2011-04-{d:02d}" for d in range(1, 21)], "price": prices})
    out = std("""SELECT * FROM Ticker MATCH_RECOGNIZE (
                     PARTITION BY symbol ORDER BY tstamp
                     MEASURES STRT.tstamp AS start_tstamp, LAST(DOWN.tstamp) AS bottom_tstamp,
                              LAST(UP.tstamp) AS end_tstamp
                     ONE ROW PER MATCH
                     AFTER MATCH SKIP TO LAST UP
                     PATTERN (STRT DOWN+ UP+)
                     DEFINE DOWN AS DOWN.price < PREV(DOWN.price), UP AS UP.price > PREV(UP.price)) MR""", Ticker=t)
    assert [tuple(r.values()) for r in out.to_pylist()] == [
        ("ACME", "2011-04-05", "2011-04-06", "2011-04-10"), ("ACME", "2011-04-10", "2011-04-12", "2011-04-13"),
        ("ACME", "2011-04-14", "2011-04-16", "2011-04-18")]


# ------------------------------------------------------------------------------ against the reference
MEASURES = ["CLASSIFIER() AS c", "MATCH_NUMBER() AS n", "FINAL LAST(A.value) AS fl", "COUNT(U.*) AS cu",
            "SUM(B.value) AS sb", "FIRST(value, 1) AS f1", "PREV(value) AS pv", "CLASSIFIER(U) AS cl",
            "RUNNING LAST(C.value, 1) AS lc", "NEXT(FIRST(B.value), 2) AS nf"]
ROWS = ["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
        "ALL ROWS PER MATCH OMIT EMPTY MATCHES", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]
SKIPS = ["PAST LAST ROW", "TO NEXT ROW", "TO FIRST A", "TO LAST C", "TO U", "TO FIRST U"]


def _random_query(rng: random.Random) -> str:
    pat, present, union, known = parts(rng)
    rows = rng.choice(ROWS)
    if "UNMATCHED" in rows and "{-" in pat:
        rows = "ALL ROWS PER MATCH"
    meas = ", ".join(rng.sample([m for m in MEASURES if refs(m) <= known], 3))
    skip = rng.choice([s for s in SKIPS if refs(s) <= known])
    part = "PARTITION BY p " if rng.random() < 0.5 else ""
    return (f"SELECT * FROM t MATCH_RECOGNIZE ({part}ORDER BY id MEASURES {meas} {rows} AFTER MATCH SKIP {skip} "
            f"PATTERN ({pat}) SUBSET U = ({union}) DEFINE {defines(rng, present, known)})")


@pytest.mark.parametrize("seed", range(12))
def test_kernel_equals_the_reference_on_random_queries(seed):
    rng = random.Random(1000 + seed)
    checked = errors = 0
    for _ in range(40):
        query = _random_query(rng)
        n = rng.randint(0, 12)
        data = [[i, rng.randint(0, 1), rng.choice([None] + [rng.randint(0, 5)] * 6)] for i in range(n)]
        try:
            want = reference(query, ["id", "p", "value"], data, lambda *a: Matcher(*a, budget=50_000))
        except TooLong:
            continue
        except StdError:
            with pytest.raises(StdError):
                std(query, t=_table(["id", "p", "value"], data))
            errors += 1
            continue
        got = _rows(std(query, t=_table(["id", "p", "value"], data)))
        want = [tuple(_norm(v) for v in r) for r in want]
        if "PARTITION BY" in query:  # partitions come out in either order, each in its own order
            got, want = _by_partition(got), _by_partition(want)
        assert got == want, query
        checked += 1
    assert checked >= 20 and errors <= checked


def test_nested_quantifiers_are_linear():
    """``(A+)+ B`` with no B: backtracking tries every split of the A rows from every start;
    the kernel keeps one thread per instruction and agrees with the thread prototype."""
    n = 3000
    t = pa.table({"id": np.arange(n), "value": np.arange(n)})
    q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS k ONE ROW PER MATCH "
         "PATTERN ((A+)+ B) DEFINE A AS value >= 0, B AS value = {b})")
    assert std(q.format(b=-1), t=t).num_rows == 0
    got = std(q.format(b=n - 1), t=t)
    assert got.column("k").to_pylist() == [n]
    from sqlstd_reference import parse
    small = [{"id": i, "value": i} for i in range(12)]
    tm = ThreadMatcher(parse(q.format(b=11)), small, 1)
    assert tm.find(0)[0] == 12


# ------------------------------------------------------------------------------ the standard's rules
def _ticks():
    return pa.table({"id": [1, 2, 3, 4, 5, 6], "value": [10, 20, 15, 25, 30, 5], "p": ["x"] * 6})


def test_preferment_prefers_the_left_alternative_even_when_it_completes_later():
    q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
         "PATTERN ((A B C | A) ) DEFINE A AS value = 10)")
    assert std(q, t=_ticks()).column("c").to_pylist() == ["A", "B", "C"]


def test_greedy_last_variable_takes_every_row_reluctant_the_fewest():
    base = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(B.*) AS nb ONE ROW PER MATCH PATTERN ({})" \
           " DEFINE B AS value > 0)"
    assert std(base.format("A B+"), t=_ticks()).column("nb").to_pylist() == [5]
    assert std(base.format("A B+?"), t=_ticks()).column("nb").to_pylist() == [1, 1, 1]


def test_empty_matches_anchors_and_exclusions():
    t = _ticks()
    q = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS n, COUNT(*) AS k {rows} " \
        "PATTERN ({pat}) DEFINE A AS value < 100)"
    one = std(q.format(rows="ONE ROW PER MATCH", pat="B* A?? B*"), t=t.filter(pa.array([False] * 6)))
    assert one.num_rows == 0
    none = std(q.format(rows="ONE ROW PER MATCH", pat="A*?"), t=t)
    assert none.column("k").to_pylist() == [0] * 6 and none.column("n").to_pylist() == [1, 2, 3, 4, 5, 6]
    assert std(q.format(rows="ALL ROWS PER MATCH OMIT EMPTY MATCHES", pat="A*?"), t=t).num_rows == 0
    assert std(q.format(rows="ALL ROWS PER MATCH", pat="^ A"), t=t).column("id").to_pylist() == [1]
    assert std(q.format(rows="ALL ROWS PER MATCH", pat="A $"), t=t).column("id").to_pylist() == [6]
    excl = std(q.format(rows="ALL ROWS PER MATCH", pat="A {- A -} A"), t=t)
    assert excl.column("id").to_pylist() == [1, 3, 4, 6] and excl.column("k").to_pylist() == [1, 3, 1, 3]


def test_final_and_running_in_all_rows():
    q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES RUNNING LAST(A.value) AS r, FINAL LAST(A.value) AS f,"
         " FINAL COUNT(*) AS k ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS value < 28)")
    out = std(q, t=_ticks())
    assert out.column("r").to_pylist() == [10, 20, 15, 25, 5]
    assert out.column("f").to_pylist() == [25, 25, 25, 25, 5]
    assert out.column("k").to_pylist() == [4, 4, 4, 4, 1]


def test_subset_classifier_and_skip_to_a_union():
    q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER(U) AS cu ONE ROW PER MATCH "
         "AFTER MATCH SKIP TO LAST U PATTERN (A B C) SUBSET U = (A, B) DEFINE A AS value < 100)")
    out = std(q, t=_ticks())
    assert out.column("cu").to_pylist() == ["B"] * 4


@pytest.mark.parametrize("skip,message", [
    ("TO FIRST A", "cannot skip to first row of match"),
    ("TO B", "pattern variable is not present in match"),
])
def test_skip_errors_are_the_standards(skip, message):
    q = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS k AFTER MATCH SKIP {skip} "
         "PATTERN (A B?) DEFINE B AS value > 100)")
    with pytest.raises(StdError, match=message):
        std(q, t=_ticks())


def test_quoted_labels_are_case_sensitive():
    q = ('SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH '
         'PATTERN ("a" a) DEFINE "a" AS value = 10, a AS value = 20)')
    assert std(q, t=_ticks()).column("c").to_pylist() == ["a", "A"]


def test_strings_nulls_and_partitions():
    t = pa.table({"id": [1, 2, 3, 4, 5, 6], "g": ["b", "a", "b", "a", "b", None],
                  "s": ["up", "down", None, "up", "zz", "up"], "value": [1.0, None, 3.0, float("nan"), 5.0, 6.0]})
    q = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY g ORDER BY id MEASURES COUNT(*) AS k, "
         "FIRST(A.id) AS first_id ONE ROW PER MATCH PATTERN (A+) DEFINE A AS s >= 'up' AND value IS NOT NULL)")
    out = std(q, t=t)
    # partitions in key order, NULL last; a NaN reads as NULL in DEFINE (documented): row 4 does not match
    assert out.to_pylist() == [{"g": "b", "k": 1, "first_id": 1}, {"g": "b", "k": 1, "first_id": 5},
                               {"g": None, "k": 1, "first_id": 6}]


# ------------------------------------------------------------------------------ bad input, limits
def test_errors_name_what_is_wrong():
    t = _ticks()
    with pytest.raises(StdError, match="no column 'nope'"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS nope > 1)", t=t)
    with pytest.raises(StdError, match="ORDER BY: no column"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY zz PATTERN (A))", t=t)
    with pytest.raises(StdError, match="FINAL"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS FINAL LAST(A.value) > 1)", t=t)
    with pytest.raises(StdError, match="Division by zero"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS value / (id - id) > 1)", t=t)
    with pytest.raises(StdError, match="differ only in case"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A))", t=t.append_column("ID", t.column("id")))
    with pytest.raises(StdError, match="2\\*\\*53"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS big > 0)",
            t=t.append_column("big", pa.array([2 ** 62] * 6)))
    with pytest.raises(StdError, match="unknown table"):
        std("SELECT * FROM other MATCH_RECOGNIZE (ORDER BY id PATTERN (A))", t=t, u=t)


def test_a_search_holding_too_many_threads_is_a_capacity_error(monkeypatch):
    """Navigating to labels keeps every thread (no pruning): ``(A | B)*`` doubles them per row."""
    monkeypatch.setattr(std_run, "MAX_THREADS", 64)
    t = pa.table({"id": np.arange(40), "value": np.zeros(40)})
    q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN ((A | B)* C) "
         "DEFINE C AS PREV(CLASSIFIER()) = 'Z')")
    with pytest.raises(CapacityError, match="threads"):
        std(q, t=t)


def test_the_kernel_stops_on_its_flag():
    from colcep.lang.sql.standard.program import compile_program
    from colcep.lang.sql.standard.syntax import parse
    prog = compile_program(parse("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A+) DEFINE A AS value > 0)"),
                           {"id": "int", "value": "int"})
    cols = np.ones((1, 100))
    res = K.match_partitions(prog.op, prog.arg, prog.x, prog.y, prog.c_lo, prog.c_hi, prog.code, prog.walks,
                             prog.w_lo, prog.w_hi, np.array([0.0]), prog.in_set, prog.last_n, prog.last_off,
                             prog.first_n, prog.first_off, prog.cnt_off, prog.lab_off, prog.agg_set, prog.agg_col,
                             prog.agg_off, prog.width, prog.dedup, np.zeros(1), cols, np.array([0, 100]),
                             prog.skip_kind, prog.skip_set, np.full((1, 100), 2, np.int8), np.ones(100, bool), 1000,
                             np.ones(1, np.int8))
    assert res[7] == K.ERR_STOPPED and res[6] == 0


def test_within_is_flinks_extension():
    with pytest.raises(StdError, match="semantics='cep'"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A B) WITHIN INTERVAL '1' SECOND "
            "DEFINE B AS value > 1)", t=_ticks())


# ------------------------------------------------------------------------------ on Spark
SPARK_QUERY = """SELECT * FROM ticks MATCH_RECOGNIZE (
    {partition} ORDER BY ts, id
    MEASURES FIRST(UP.ts) AS start_ts, FINAL LAST(UP.price) AS top, COUNT(UP.price) AS ups, CLASSIFIER() AS cls,
             MATCH_NUMBER() AS n, PREV(UP.price) AS before_top
    {rows} AFTER MATCH SKIP {skip}
    PATTERN ({pattern})
    DEFINE UP AS UP.price > PREV(UP.price), DOWN AS DOWN.price < 0.9995 * LAST(UP.price))"""


@pytest.mark.spark
@pytest.mark.parametrize("partition, rows, skip, pattern", [
    ("PARTITION BY name", "ONE ROW PER MATCH", "PAST LAST ROW", "UP{2,} DOWN"),
    ("PARTITION BY name", "ALL ROWS PER MATCH", "TO NEXT ROW", "UP+? (DOWN | UP){2} $"),
    ("", "ALL ROWS PER MATCH WITH UNMATCHED ROWS", "PAST LAST ROW", "UP{2,} DOWN*")])
def test_spark_equals_in_process(partition, rows, skip, pattern, spark):
    from colcep.spark.sql import sql as spark_sql
    from colcep.tools.ticks import make_ticks

    ticks = make_ticks(20_000 if partition else 2_000, symbols=10 if partition else 1, seed=4)
    q = SPARK_QUERY.format(partition=partition, rows=rows, skip=skip, pattern=pattern)
    want = std(q, ticks=ticks)
    got = spark_sql(q, ticks=spark.createDataFrame(ticks).repartition(3), semantics="standard")
    assert got.columns == want.column_names
    key = lambda r: tuple((v is None, v) for v in r.values())  # noqa: E731
    assert want.num_rows > 20
    assert sorted(got.toArrow().to_pylist(), key=key) == sorted(want.to_pylist(), key=key)


def test_dictionary_timestamp_and_decimal_columns():
    """Columns as Parquet gives them: dictionary-encoded strings and numbers, timestamps, decimals."""
    import datetime as dt
    import decimal
    t = pa.table({
        "ts": pa.array([dt.datetime(2026, 1, 1, 0, 0, s) for s in range(5)], pa.timestamp("ms")),
        "sym": pa.array(["x", "y", "x", "x", "y"]).dictionary_encode(),
        "qty": pa.array([1, 5, 7, 2, 9]).dictionary_encode(),
        "px": pa.array([decimal.Decimal("1.5"), decimal.Decimal("2.5"), decimal.Decimal("3.5"), decimal.Decimal("1.0"),
                        decimal.Decimal("4.0")], pa.decimal128(5, 2)),
    })
    q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS t0, COUNT(*) AS n ONE ROW PER MATCH "
         "PATTERN (A B+) DEFINE A AS sym = 'x', B AS qty > PREV(qty) AND px > A.px AND ts > A.ts)")
    out = std(q, t=t)
    assert out.column("n").to_pylist() == [3, 2]
    assert out.column("t0").to_pylist() == [dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 1, 0, 0, 3)]


def _one(query: str, t: pa.Table) -> list:
    return std(query, t=t).to_pylist()


def test_times_compare_across_units_and_at_nanoseconds():
    import datetime as dt
    secs = pa.array([dt.datetime(2026, 1, 1, 0, 0, s) for s in range(3)], pa.timestamp("s"))
    t = pa.table({"id": [1, 2, 3], "a": secs, "b": secs.cast(pa.timestamp("ms")),
                  "d": pa.array([dt.date(2019, 1, 1)] * 3), "ns": pa.array([1577836800000000000 + k * 100
                                                                            for k in range(3)], pa.timestamp("ns"))})
    q = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN ({p}) " \
        "DEFINE {d})"
    assert _one(q.format(p="A+", d="A AS A.a = A.b AND A.d < A.b"), t) == [{"n": 3}]
    assert _one(q.format(p="A B+", d="B AS B.ns > PREV(B.ns)"), t) == [{"n": 3}]
    ordered = std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY d, ns DESC MEASURES FIRST(A.id) AS f ONE ROW PER MATCH "
                  "PATTERN (A) DEFINE A AS true)", t=t)
    assert ordered.column("f").to_pylist() == [3, 2, 1]


def test_order_by_nulls_first_and_last_and_dictionary_columns():
    t = pa.table({"id": [2, None, 1], "cat": pa.array(["b", "c", "a"]).dictionary_encode()})
    q = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY {o} MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A))"
    assert std(q.format(o="id"), t=t).column("id").to_pylist() == [1, 2, None]
    assert std(q.format(o="id NULLS FIRST"), t=t).column("id").to_pylist() == [None, 1, 2]
    assert std(q.format(o="id DESC NULLS FIRST"), t=t).column("id").to_pylist() == [None, 2, 1]
    assert std(q.format(o="cat DESC"), t=t).column("id").to_pylist() == [None, 2, 1]
    out = std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY cat MEASURES MIN(A.cat) AS lo, array_agg(A.cat) AS cats, "
              "CASE WHEN A.id > 1 THEN A.cat ELSE 'zz' END AS pick ONE ROW PER MATCH PATTERN (A+))", t=t)
    assert out.to_pylist() == [{"lo": "a", "cats": ["a", "b", "c"], "pick": "zz"}]


def test_max_by_ties_and_integer_arguments_agree_between_define_and_measures():
    t = pa.table({"id": [1, 2, 3], "k": [0, 0, 0], "value": [5, 1, 7]})
    out = std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES max_by(value, k) AS m, COUNT(*) AS n "
              "ONE ROW PER MATCH PATTERN (A+) DEFINE A AS max_by(value, k) <> 1)", t=t)
    assert out.to_pylist() == [{"m": 5, "n": 3}]               # ties: the first row, in DEFINE as in MEASURES
    t = pa.table({"id": [1, 2, 3], "value": [3, 4, 1]})
    q = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (A+ B) " \
        "DEFINE B AS {c})"
    assert _one(q.format(c="SUM(A.value + 0) / 2 = 3"), t) == [{"n": 3}]        # 7 / 2 = 3: integers
    assert _one(q.format(c="FLOOR(B.value / 2.0) = 0 AND CAST(A.value AS DOUBLE) / 2 = 2"), t) == [{"n": 3}]


def test_scalar_functions_run_in_define_and_measures():
    t = pa.table({"id": [1, 2, 3], "s": [" ab ", "cd", "x"], "v": [2.5, 3.5, -1.25]})
    out = std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES ROUND(A.v) AS r, CAST(A.v AS BIGINT) AS i, "
              "LENGTH(TRIM(A.s)) AS n, SUBSTRING(A.s, 2, 2) AS sub, CONCAT(A.s, 'z') AS cz ALL ROWS PER MATCH "
              "PATTERN (A) DEFINE A AS LENGTH(TRIM(s)) >= 1 AND CEIL(v) > -2)", t=t)
    assert out.column("r").to_pylist() == [3.0, 4.0, -1.0] and out.column("i").to_pylist() == [3, 4, -1]
    assert out.column("n").to_pylist() == [2, 2, 1] and out.column("sub").to_pylist() == ["ab", "d", ""]
    assert out.column("cz").to_pylist() == [" ab z", "cdz", "xz"]
    assert _one("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (A+) "
                "DEFINE A AS MOD(v, 0.0) IS NULL)", t) == [{"n": 3}]       # a double MOD by zero is NaN


@pytest.mark.parametrize("query, message", [
    ("MEASURES SUM(PREV(A.value)) AS x PATTERN (A+)", "PREV cannot be nested in SUM"),
    ("MEASURES LAST(SUM(A.value)) AS x PATTERN (A+)", "SUM cannot be nested in LAST"),
    ("MEASURES PREV(NEXT(A.value)) AS x PATTERN (A+)", "NEXT cannot be nested in PREV"),
    ("PATTERN (A B) DEFINE B AS COUNT(DISTINCT A.value) > 1", "DISTINCT"),
    ("PATTERN (A{3,1})", "upper bound below its lower"),
    ("PATTERN (A B) DEFINE B AS B.s > 5", "cannot compare a string with a number"),
    ("PATTERN (A B) DEFINE B AS A.s || B.s = 'ab'", "several variables"),
    ("ORDER BY id SIDEWAYS PATTERN (A)", "ORDER BY: expected ASC"),
])
def test_refusals_say_which_rule(query, message):
    t = pa.table({"id": [1, 2], "value": [1, 2], "s": ["a", "b"]})
    q = "SELECT * FROM t MATCH_RECOGNIZE (" + ("" if query.startswith("ORDER") else "ORDER BY id ") + query + ")"
    with pytest.raises(StdError, match=message):
        std(q, t=t)


def test_columns_named_as_colceps_helpers_or_twice():
    t = pa.table({"p": [1, 1, 2], "__p": [3, 2, 1], "value": [1, 2, 3]})
    out = std("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY __p MEASURES FIRST(A.value) AS f "
              "ONE ROW PER MATCH PATTERN (A) DEFINE A AS true)", t=t)
    assert out.to_pylist() == [{"p": 1, "f": 2}, {"p": 1, "f": 1}, {"p": 2, "f": 3}]
    twice = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["x", "x"])
    with pytest.raises(StdError, match="two columns named 'x'"):
        std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x PATTERN (A))", t=twice)


def test_ctrl_c_stops_a_long_query_promptly():
    """A query that searches to the end of the partition from every row (``A+ B`` with no B, SKIP
    TO NEXT ROW: quadratic, minutes of work) stops within the grace period of Ctrl-C."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import os, signal, sys, threading, time
        import numpy as np, pyarrow as pa, colcep
        from colcep.engine import interrupt
        n = 400_000
        t = pa.table({"id": np.arange(n), "v": np.ones(n)})
        q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS k AFTER MATCH SKIP TO NEXT ROW "
             "PATTERN (A+ B) DEFINE A AS v > 0, B AS v < 0)")
        colcep.sql(q, t=t.slice(0, 100))                      # the kernel loaded before the clock starts
        sent = []
        def send():
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        threading.Timer(1.5, send).start()
        try:
            colcep.sql(q, t=t)
        except KeyboardInterrupt:
            took = time.monotonic() - sent[0]
            print(f"interrupted {took:.2f} s after the signal")
            sys.exit(0 if took < interrupt.GRACE_SECONDS else 3)
        sys.exit(2)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "s after the signal" in res.stdout


def test_dates_far_from_the_epoch_order_and_compare_exactly():
    import datetime as dt
    t = pa.table({"d": pa.array([dt.date(2300, 1, 1), dt.date(2000, 1, 1), dt.date(9999, 12, 31),
                                 dt.date(1500, 1, 1)]), "x": [1, 2, 3, 4]})
    out = std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY d MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
              "PATTERN (A B*) DEFINE B AS B.d > PREV(B.d))", t=t)
    assert out.column("x").to_pylist() == [4, 2, 1, 3] and out.column("c").to_pylist() == ["A", "B", "B", "B"]


def test_time_arithmetic_and_time_against_number_are_refused():
    import datetime as dt
    t = pa.table({"id": [1, 2], "ts": pa.array([dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 2)])})
    for cond in ("B.ts - PREV(B.ts) < 5000000", "B.ts < 5000000"):
        with pytest.raises(StdError, match="time"):
            std(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A B) DEFINE B AS {cond})", t=t)


def test_casts_guards_and_exact_integers():
    t = pa.table({"id": [1, 2, 3], "s": ["10", "9", "8"], "f": [1.25, 1.23, 1.26], "x": [6, 0, 9], "y": [2, 0, 3],
                  "big": [1577836800123456789, 7, -7]})
    q = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {m} ALL ROWS PER MATCH PATTERN (A) DEFINE A AS {d})"
    assert std(q.format(m="A.id AS i", d="CAST(A.s AS DOUBLE) > 8.5"), t=t).column("i").to_pylist() == [1, 2]
    assert std(q.format(m="CAST(A.f AS DECIMAL(3,1)) AS r", d="true"), t=t).column("r").to_pylist() == [1.3, 1.2, 1.3]
    out = std(q.format(m="CASE WHEN A.y = 0 THEN NULL ELSE A.x / A.y END AS q, A.big / 1000 AS b, "
                         "A.big % 1000 AS md", d="CASE WHEN A.y = 0 THEN false ELSE ROUND(A.x / A.y) >= 2 END"), t=t)
    assert out.column("q").to_pylist() == [3, 3]
    assert out.column("b").to_pylist() == [1577836800123456, 0] and out.column("md").to_pylist() == [789, -7]
    with pytest.raises(StdError, match="immediate nesting"):
        std(q.format(m="PREV(FIRST(A.x) + 1) AS p", d="true"), t=t)


def test_numeric_and_string_functions_follow_trino():
    t = pa.table({"id": [1, 2, 3], "s": ["  ab  ", "xxhixx", "hello"], "x": [15, 14, 25], "v": [15.5, 2.4, -2.5]})
    out = std("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES ROUND(A.x, -1) AS r1, ROUND(A.v, -1) AS r2, "
              "TRIM(LEADING FROM A.s) AS lt, TRIM(BOTH 'x' FROM A.s) AS tx, SUBSTRING(A.s, 0) AS s0, "
              "SUBSTRING(A.s, -3) AS s3, SUBSTRING(A.s, -3, 2) AS s32 ALL ROWS PER MATCH PATTERN (A) "
              "DEFINE A AS ROUND(A.v) <> 0 OR CEIL(PREV(A.v)) < FLOOR(A.x))", t=t)
    assert out.column("r1").to_pylist() == [20, 10, 30] and out.column("r2").to_pylist() == [20.0, 0.0, -0.0]
    assert out.column("lt").to_pylist() == ["ab  ", "xxhixx", "hello"]
    assert out.column("tx").to_pylist() == ["  ab  ", "hi", "hello"]
    assert out.column("s0").to_pylist() == ["", "", ""]
    assert out.column("s3").to_pylist() == ["b  ", "ixx", "llo"] and out.column("s32").to_pylist() == ["b ", "ix", "ll"]
    q = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B) " \
        "DEFINE B AS {c})"
    assert _one(q.format(c="ROUND(B.x - PREV(B.x)) = -1 AND FLOOR(AVG(A.v)) = 15"), t) == [{"n": 2}]
    assert _one(q.format(c="CAST(PREV(B.v) AS BIGINT) = 16"), t) == [{"n": 2}]
    with pytest.raises(StdError, match="several variables|not supported"):
        std(q.format(c="lower(PREV(B.s)) = 'x'"), t=t)


def test_quoted_names_and_decimal_order():
    import decimal
    t = pa.table({"p": [1, 1], "o": pa.array([decimal.Decimal("1.5"), decimal.Decimal("0.5")], pa.decimal128(3, 1)),
                  "x": [1, 2]})
    out = std('SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY "p" ORDER BY "o" MEASURES FIRST(A.x) AS f '
              'ONE ROW PER MATCH PATTERN (A B) DEFINE B AS true)', t=t)
    assert out.to_pylist() == [{"p": 1, "f": 2}]
