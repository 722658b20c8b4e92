"""SQL MATCH_RECOGNIZE (colcep.sql): the ticker examples of Flink's MATCH_RECOGNIZE documentation,
each clause against hand-written Patterns, inputs (Arrow, pandas, polars) and errors."""
import functools
import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

import colcep as cc
from colcep import col, last
from colcep.lang.sql import SqlError, compile_query

sql_cep = functools.partial(cc.sql, semantics="cep")  # colcep.sql's CEP-style mode (the default is "standard")

T0 = dt.datetime(2011, 4, 1, 10, 0, 0)


def ticker(prices, taxes=None, step=dt.timedelta(seconds=1), symbol="ACME", t0=T0):
    n = len(prices)
    return pa.table({"symbol": [symbol] * n,
                     "rowtime": pa.array([t0 + step * i for i in range(n)], pa.timestamp("ms")),
                     "price": pa.array(prices, pa.int64()), "tax": pa.array(taxes or [1] * n, pa.int64())})


def ts(h, m, s=0, day=T0.date()):
    return dt.datetime(day.year, day.month, day.day, h, m, s)


# ----------------------------------------------------------------------------- Flink's documentation
def test_doc_price_down_then_up():
    data = ticker([12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19])
    out = sql_cep("""
        SELECT *
        FROM Ticker
            MATCH_RECOGNIZE (
                PARTITION BY symbol
                ORDER BY rowtime
                MEASURES
                    START_ROW.rowtime AS start_tstamp,
                    LAST(PRICE_DOWN.rowtime) AS bottom_tstamp,
                    LAST(PRICE_UP.rowtime) AS end_tstamp
                ONE ROW PER MATCH
                AFTER MATCH SKIP TO LAST PRICE_UP
                PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
                DEFINE
                    PRICE_DOWN AS
                        (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price) OR
                            PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
                    PRICE_UP AS
                        PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
            ) MR""", Ticker=data)
    assert out.column_names == ["symbol", "start_tstamp", "bottom_tstamp", "end_tstamp"]
    assert out.to_pylist() == [{"symbol": "ACME", "start_tstamp": ts(10, 0, 4), "bottom_tstamp": ts(10, 0, 7),
                                "end_tstamp": ts(10, 0, 8)}]


def test_doc_aggregation_average_below_threshold():
    data = ticker([12, 17, 13, 16, 25, 2, 4, 10, 15, 25, 25, 30])
    out = sql_cep("""
        SELECT * FROM Ticker MATCH_RECOGNIZE (
            PARTITION BY symbol ORDER BY rowtime
            MEASURES FIRST(A.rowtime) AS start_tstamp, LAST(A.rowtime) AS end_tstamp, AVG(A.price) AS avgPrice
            ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
            PATTERN (A+ B)
            DEFINE A AS AVG(A.price) < 15) MR""", Ticker=data)
    assert out.to_pylist() == [
        {"symbol": "ACME", "start_tstamp": ts(10, 0, 0), "end_tstamp": ts(10, 0, 3), "avgPrice": 14.5},
        {"symbol": "ACME", "start_tstamp": ts(10, 0, 5), "end_tstamp": ts(10, 0, 10), "avgPrice": 13.5}]


@pytest.mark.parametrize("quant, want", [("B*", [16]), ("B*?", [13, 16])])
def test_doc_greedy_and_reluctant(quant, want):
    data = ticker([10, 11, 12, 13, 14, 16], taxes=[1, 2, 1, 2, 1, 2], symbol="XYZ",
                  t0=dt.datetime(2018, 9, 17, 10, 0, 2))
    out = sql_cep(f"""
        SELECT * FROM Ticker MATCH_RECOGNIZE(
            PARTITION BY symbol ORDER BY rowtime
            MEASURES C.price AS lastPrice
            ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
            PATTERN (A {quant} C)
            DEFINE A AS A.price > 10, B AS B.price < 15, C AS C.price > 12)""", Ticker=data)
    assert out.column("lastPrice").to_pylist() == want


def test_doc_within_interval():
    data = ticker([20, 17, 18, 11, 14, 9, 15, 14, 24, 1, 19], step=dt.timedelta(minutes=20))
    q_within = """
        SELECT * FROM Ticker MATCH_RECOGNIZE(
            PARTITION BY symbol ORDER BY rowtime
            MEASURES C.rowtime AS dropTime, A.price - C.price AS dropDiff
            ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
            PATTERN (A B* C) WITHIN INTERVAL '1' HOUR
            DEFINE
                B AS B.price > A.price - 10,
                C AS C.price < A.price - 10)"""          # (the docs miss the comma after the B definition)
    out = sql_cep(q_within, Ticker=data)
    # The docs print dropDiff 14: the drop from 15 at 12:00 to 1 at 13:00, a span of exactly one hour.
    # Flink CEP's window edge is exclusive (conformance/SEMANTICS.md point 1: last.ts - first.ts <
    # within, checked against Flink 2.3), so that match is out and the one from 14 at 12:20 is found.
    assert out.to_pylist() == [{"symbol": "ACME", "dropTime": ts(13, 0), "dropDiff": 13}]
    wider = sql_cep(q_within.replace("'1' HOUR", "'61' MINUTE"), Ticker=data)
    assert wider.to_pylist() == [{"symbol": "ACME", "dropTime": ts(13, 0), "dropDiff": 14}]
    # without the window the earlier, slower drop (20 -> 9 over 1 h 40 min) matches too
    no_window = sql_cep("""SELECT * FROM Ticker MATCH_RECOGNIZE(PARTITION BY symbol ORDER BY rowtime
            MEASURES C.rowtime AS dropTime, A.price - C.price AS dropDiff AFTER MATCH SKIP PAST LAST ROW
            PATTERN (A B* C) DEFINE B AS B.price > A.price - 10, C AS C.price < A.price - 10)""", Ticker=data)
    assert no_window.to_pylist()[0] == {"symbol": "ACME", "dropTime": ts(11, 40), "dropDiff": 11}


def test_doc_output_mode():
    data = ticker([10, 12, 13, 11], taxes=[1, 2, 1, 2], symbol="XYZ", t0=dt.datetime(2018, 9, 17, 10, 0, 2))
    q = """SELECT * FROM Ticker MATCH_RECOGNIZE(
            PARTITION BY symbol ORDER BY rowtime
            MEASURES FIRST(A.price) AS startPrice, LAST(A.price) AS topPrice, B.price AS lastPrice
            ONE ROW PER MATCH {skip}
            PATTERN (A+ B)
            DEFINE A AS LAST(A.price, 1) IS NULL OR A.price > LAST(A.price, 1),
                   B AS B.price < LAST(A.price))"""
    out = sql_cep(q.format(skip="AFTER MATCH SKIP PAST LAST ROW"), Ticker=data)
    assert out.to_pylist() == [{"symbol": "XYZ", "startPrice": 10, "topPrice": 13, "lastPrice": 11}]
    # the docs leave out the AFTER MATCH clause: its default, SKIP TO NEXT ROW, keeps the runs that
    # started at 12 and 13 (Flink CEP's skipToNext prunes only runs of the match's first row)
    out = sql_cep(q.format(skip=""), Ticker=data)
    assert out.to_pylist() == [{"symbol": "XYZ", "startPrice": 10, "topPrice": 13, "lastPrice": 11},
                               {"symbol": "XYZ", "startPrice": 12, "topPrice": 13, "lastPrice": 11},
                               {"symbol": "XYZ", "startPrice": 13, "topPrice": 13, "lastPrice": 11}]


AFTER = """SELECT * FROM Ticker MATCH_RECOGNIZE(
            PARTITION BY symbol ORDER BY rowtime
            MEASURES SUM(A.price) AS sumPrice, FIRST(rowtime) AS startTime, LAST(rowtime) AS endTime
            ONE ROW PER MATCH
            {after}
            PATTERN (A+ C)
            DEFINE A AS SUM(A.price) < 30)"""


@pytest.mark.parametrize("after, want", [
    ("AFTER MATCH SKIP PAST LAST ROW", [(26, 1, 4), (17, 5, 7)]),
    ("AFTER MATCH SKIP TO NEXT ROW", [(26, 1, 4), (24, 2, 5), (25, 3, 6), (22, 4, 7), (17, 5, 7)]),
    ("AFTER MATCH SKIP TO LAST A", [(26, 1, 4), (25, 3, 6), (17, 5, 7)]),
])
def test_doc_after_match_strategies(after, want):
    data = ticker([7, 9, 10, 5, 10, 7, 14], taxes=[1, 2, 1, 2, 2, 2, 2], symbol="XYZ",
                  t0=dt.datetime(2018, 9, 17, 10, 0, 1))
    out = sql_cep(AFTER.format(after=after), Ticker=data).to_pylist()
    sec = lambda t: t.second  # noqa: E731
    assert [(r["sumPrice"], sec(r["startTime"]), sec(r["endTime"])) for r in out] == want


def test_doc_skip_to_first_of_the_first_variable_is_refused():
    with pytest.raises(SqlError, match=r"^AFTER MATCH SKIP: SKIP TO FIRST of the first variable"):
        sql_cep(AFTER.format(after="AFTER MATCH SKIP TO FIRST A"), Ticker=ticker([1, 2]))


# ----------------------------------------------------------------------------- clauses vs hand-written Patterns
def pkey(p):
    def stages(pat):
        return tuple((s.name, s.connect, None if s.condition is None else s.condition.key(), s.quantifier,
                      None if s.group is None else stages(s.group),
                      None if s.alternatives is None else tuple(stages(a) for a in s.alternatives))
                     for s in pat.stages)
    return stages(p), p.window, p.skip_strategy


COLS = ["symbol", "rowtime", "price", "tax"]
ANY, B = cc.Pattern.any_of, cc.Pattern.begin


def mr(pattern, define="", after="AFTER MATCH SKIP PAST LAST ROW", within=""):
    return (f"SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES A.price AS p "
            f"{after} PATTERN ({pattern}) {within} {('DEFINE ' + define) if define else ''})")


@pytest.mark.parametrize("pattern, want", [
    ("A B", cc.Pattern.begin("A").next("B")),
    ("A B+ C", cc.Pattern.begin("A").next("B").one_or_more().consecutive().greedy().next("C")),
    ("A B+? C", cc.Pattern.begin("A").next("B").one_or_more().consecutive().next("C")),
    ("A B* C", cc.Pattern.begin("A").next("B").one_or_more().optional().consecutive().greedy().next("C")),
    ("A B*? C", cc.Pattern.begin("A").next("B").one_or_more().optional().consecutive().next("C")),
    ("A B? C", cc.Pattern.begin("A").next("B").optional().next("C")),
    # an exact count is never greedy (Flink's translation), so an optional variable may follow it
    ("A B{3} C", cc.Pattern.begin("A").next("B").times(3).consecutive().next("C")),
    ("A B{3} C?", cc.Pattern.begin("A").next("B").times(3).consecutive().next("C").optional()),
    ("A B{2,} C", cc.Pattern.begin("A").next("B").times_or_more(2).consecutive().greedy().next("C")),
    ("A B{2,4}? C", cc.Pattern.begin("A").next("B").times(2, 4).consecutive().next("C")),
    ("A B{,3} C", cc.Pattern.begin("A").next("B").times(0, 3).consecutive().greedy().next("C")),
    ("A B{0,} C", cc.Pattern.begin("A").next("B").one_or_more().optional().consecutive().greedy().next("C")),
    ("A+ B", cc.Pattern.begin("A").one_or_more().consecutive().greedy().next("B")),
    ("A (B C) D", cc.Pattern.begin("A").next("B").next("C").next("D")),
    ("A (B C)+? D", cc.Pattern.begin("A").next(cc.Pattern.begin("B").next("C")).one_or_more().consecutive()
     .next("D")),
    ("A (B C){2} D", cc.Pattern.begin("A").next(cc.Pattern.begin("B").next("C")).times(2).consecutive().next("D")),
    # alternation: colcep's any_of, strict like every SQL concatenation; PERMUTE: the orders
    ("A (B | C) D", cc.Pattern.begin("A").next(ANY(B("B"), B("C"))).next("D")),
    ("A | B C", cc.Pattern.begin(ANY(B("A"), B("B").next("C")))),
    ("(A | B C) D", cc.Pattern.begin(ANY(B("A"), B("B").next("C"))).next("D")),
    ("A (B | C D)+? E", cc.Pattern.begin("A").next(ANY(B("B"), B("C").next("D"))).one_or_more().consecutive()
     .next("E")),
    ("A (B | C){2} D", cc.Pattern.begin("A").next(ANY(B("B"), B("C"))).times(2).consecutive().next("D")),
    ("A (B | C)? D", cc.Pattern.begin("A").next(ANY(B("B"), B("C"))).optional().next("D")),
    ("A (B | (C | D) E)", cc.Pattern.begin("A").next(ANY(B("B"), cc.Pattern.begin(ANY(B("C"), B("D"))).next("E")))),
    ("(A B | A C+)", cc.Pattern.begin(ANY(B("A").next("B"), B("A").next("C").one_or_more().consecutive().greedy()))),
    ("PERMUTE(A, B, C)", cc.Pattern.begin(ANY(*(B(x).next(y).next(z) for x, y, z in
                                               ("ABC", "ACB", "BAC", "BCA", "CAB", "CBA"))))),
    ("X PERMUTE(A, B+) Y", cc.Pattern.begin("X").next(ANY(B("A").next("B").one_or_more().consecutive().greedy(),
                                                          B("B").one_or_more().consecutive().greedy().next("A")))
     .next("Y")),
    ("PERMUTE(A)", cc.Pattern.begin("A")),
])
def test_pattern_quantifiers(pattern, want):
    got = compile_query(mr(pattern), COLS)
    assert pkey(got) == pkey(want.skip(cc.SkipPastLastEvent()))


@pytest.mark.parametrize("after, skip", [
    ("", cc.SkipToNext()), ("AFTER MATCH SKIP PAST LAST ROW", cc.SkipPastLastEvent()),
    ("AFTER MATCH SKIP TO NEXT ROW", cc.SkipToNext()), ("AFTER MATCH SKIP TO FIRST B", cc.SkipToFirst("B")),
    ("AFTER MATCH SKIP TO LAST B", cc.SkipToLast("B")), ("AFTER MATCH SKIP TO B", cc.SkipToLast("B")),
])
def test_after_match_skip(after, skip):
    assert compile_query(mr("A B+", after=after), COLS).skip_strategy == skip


@pytest.mark.parametrize("within, window", [("WITHIN INTERVAL '10' SECOND", "10s"),
                                            ("WITHIN INTERVAL '5' MINUTE", "5min"),
                                            ("within interval '2' hour", "2h"), ("WITHIN INTERVAL '1' DAY", "1d"),
                                            ("WITHIN INTERVAL '250' MILLISECOND", "250ms")])
def test_within(within, window):
    assert compile_query(mr("A B", within=within), COLS).window == window


@pytest.mark.parametrize("define, cond_b", [
    ("B AS B.price > A.price", col("price") > last("price", of="A")),
    ("B AS price > 10 AND tax <> 2", (col("price") > 10) & (col("tax") != 2)),
    ("B AS B.price BETWEEN 1 AND 5 OR B.symbol IN ('X', 'Y')",
     ((col("price") >= 1) & (col("price") <= 5)) | col("symbol").is_in(["X", "Y"])),
    # SQL's three-valued logic: NOT (x >= y) holds where x < y, not where either is null
    ("B AS NOT (B.price * 2 >= A.price + 1) AND A.tax IS NOT NULL",
     (col("price") * 2 < last("price", of="A") + 1) & ~last("tax", of="A").is_null()),
    ("B AS B.price > LAST(B.price, 1)", col("price") > last("price", of="B")),
    # SQL: the SUM of no values is NULL (colcep's sum is 0); the values: a sum of 1 per non-null one
    ("B AS B.price < SUM(A.price) / COUNT(A.price)",
     ((cc.sum(col("price") * 0.0 + 1.0, of="A") == 0)
      & (col("price") < cc.lit(None) / cc.count(of="A", field="price")))
     | ((cc.sum(col("price") * 0.0 + 1.0, of="A") > 0)
        & (col("price") < cc.sum("price", of="A") / cc.count(of="A", field="price")))),
])
def test_define_conditions(define, cond_b):
    got = compile_query(mr("A B+", define=define), COLS)
    assert got.stages[1].condition.key() == cond_b.key()


def test_define_applies_to_every_occurrence_of_a_variable_in_alternatives():
    got = compile_query(mr("(A B | B A)", define="A AS A.price > 10, B AS B.price < A.price"), COLS)
    ab, ba = got.stages[0].alternatives
    cond_b = col("price") < last("price", of="A")
    assert ab.stages[1].condition.key() == ba.stages[0].condition.key() == cond_b.key()
    assert ab.stages[0].condition.key() == ba.stages[1].condition.key() == (col("price") > 10).key()


def random_ticks(n=3000, seed=5):
    from colcep.tools.ticks import make_ticks
    t = make_ticks(n, symbols=4, seed=seed)
    return pa.table({"symbol": t.column("name"), "rowtime": t.column("ts"), "price": t.column("price"),
                     "volume": t.column("volume")})


def matches_of(out, rename=None):
    d = out.to_pydict()
    by = {}
    for m, s, r in zip(d["match_id"], d["stage"], d["row"]):
        by.setdefault(m, []).append(((rename or {}).get(s, s), r))
    return sorted(tuple(v) for v in by.values())


def test_running_aggregates_and_first_match_hand_written():
    """Running aggregates in DEFINE include the current row of the variable being defined; FIRST of
    it is the current row while the variable is empty. Compared with hand-written conditions."""
    data = random_ticks()
    q = """SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
             MEASURES FIRST(A.rowtime) AS t0, FINAL LAST(B.rowtime) AS t1, FINAL COUNT(A.price) AS n,
                      MAX(A.price) AS top, MIN(A.price) AS low, SUM(A.volume) AS vol
             ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW
             PATTERN (A{2,} B)
             DEFINE A AS AVG(A.price) >= FIRST(A.price) AND MAX(A.volume) < 1500 AND A.price >= 0.999 * MAX(A.price),
                    B AS B.price < 0.999 * MIN(A.price))"""
    out = sql_cep(q, T=data)
    c = col("price")
    n = cc.count(of="A", field="price")
    avg_incl = (cc.sum("price", of="A") + c) / (n + 1)
    first_incl_ok = ((cc.count(of="A") == 0) & (avg_incl >= c)) | ((cc.count(of="A") > 0) & (avg_incl >= cc.first("price", of="A")))
    max_vol_ok = (col("volume") < 1500) & (cc.max("volume", of="A").is_null() | (cc.max("volume", of="A") < 1500))
    top = cc.max("price", of="A")       # the current row is the max, or it is within 0.1 % of the max so far
    max_ok = top.is_null() | (c >= 0.999 * top)
    hand = (cc.Pattern.begin("A").where(first_incl_ok & max_vol_ok & max_ok).times_or_more(2).consecutive().greedy()
            .next("B").where(c < 0.999 * cc.min("price", of="A")).skip(cc.SkipPastLastEvent()))
    ref = cc.match(data, hand, key="symbol", time="rowtime", columns=["rowtime", "price", "volume"])
    assert ref.num_rows > 50
    # ALL ROWS PER MATCH: the matched rows, in order, with final measures
    assert out.num_rows == ref.num_rows
    assert out.column("rowtime").to_pylist() == ref.column("rowtime").to_pylist()
    assert out.column("symbol").to_pylist() == ref.column("symbol").to_pylist()
    mids = ref.column("match_id").to_numpy()
    a_rows = [s == "A" for s in ref.column("stage").to_pylist()]
    first_t = {}
    for m, t, is_a in zip(mids, ref.column("rowtime").to_pylist(), a_rows):
        if is_a:
            first_t.setdefault(m, t)
    assert out.column("t0").to_pylist() == [first_t[m] for m in mids]
    assert set(out.column("n").to_pylist()) <= set(range(2, 100)) and min(out.column("n").to_pylist()) == 2
    # FINAL: the match's B row on every row of it
    last_b = {m: t for m, t, s in zip(mids, ref.column("rowtime").to_pylist(), ref.column("stage").to_pylist())
              if s == "B"}
    assert out.column("t1").to_pylist() == [last_b[m] for m in mids]


def test_all_rows_per_match_running_measures():
    """ALL ROWS PER MATCH: measures are RUNNING unless FINAL (SQL standard), checked row by row
    against a plain-Python computation over each match's rows up to the current one."""
    data = random_ticks(2500, seed=12)
    out = sql_cep("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
                     MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS mn, A.price AS a_last, LAST(B.price, 1) AS b_prev,
                              FIRST(B.price) AS b_first, COUNT(B.price) AS nb, SUM(B.volume) AS vb, AVG(price) AS ap,
                              MIN(B.price) AS bmin, MAX(price) AS pmax, COUNT(*) AS n, FINAL COUNT(*) AS n_final,
                              RUNNING LAST(C.price) AS c
                     ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW
                     PATTERN (A B{2,5} C)
                     DEFINE A AS A.volume > 800, B AS B.price > PREV(B.price), C AS C.price < LAST(B.price))""",
                 T=data)
    assert out.num_rows > 30
    rows = out.to_pylist()
    i = 0
    matches = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j]["mn"] == rows[i]["mn"] and rows[j]["symbol"] == rows[i]["symbol"]:
            j += 1
        m = rows[i:j]
        matches += 1
        assert [r["cls"] for r in m][0] == "A" and m[-1]["cls"] == "C"
        for k, r in enumerate(m):
            upto = m[:k + 1]
            bs = [x for x in upto if x["cls"] == "B"]
            assert r["a_last"] == m[0]["price"]
            assert r["b_prev"] == (bs[-2]["price"] if len(bs) >= 2 else None)
            assert r["b_first"] == (bs[0]["price"] if bs else None)
            assert r["nb"] == len(bs)
            assert r["vb"] == (pytest.approx(sum(x["volume"] for x in bs)) if bs else None)
            assert r["ap"] == pytest.approx(sum(x["price"] for x in upto) / len(upto))
            assert r["bmin"] == (min(x["price"] for x in bs) if bs else None)
            assert r["pmax"] == max(x["price"] for x in upto)
            assert r["n"] == k + 1 and r["n_final"] == len(m)
            assert r["c"] == (r["price"] if r["cls"] == "C" else None)
        i = j
    assert matches > 10


def test_prev_and_next_are_physical_offsets_in_the_partition():
    data = random_ticks(2000)
    out = sql_cep("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
                     MEASURES A.rowtime AS t, PREV(A.price) AS before, NEXT(A.price, 2) AS after2,
                              MATCH_NUMBER() AS n, CLASSIFIER() AS cls
                     AFTER MATCH SKIP PAST LAST ROW
                     PATTERN (A) DEFINE A AS PREV(A.price) < A.price AND PREV(price, 2) < PREV(price)
                                             AND NEXT(price) < A.price)""", T=data)
    # by hand, per symbol
    d = data.to_pydict()
    want = []
    per = {}
    for i, s in enumerate(d["symbol"]):
        per.setdefault(s, []).append(i)
    for s, idx in per.items():
        pr = [d["price"][i] for i in idx]
        for j in range(2, len(idx) - 1):
            if pr[j - 1] < pr[j] and pr[j - 2] < pr[j - 1] and pr[j + 1] < pr[j]:
                want.append((s, d["rowtime"][idx[j]], pr[j - 1], pr[j + 2] if j + 2 < len(idx) else None))
    got = [(r["symbol"], r["t"], r["before"], r["after2"]) for r in out.to_pylist()]
    assert len(want) > 50 and sorted(got) == sorted(want)
    assert set(out.column("cls").to_pylist()) == {"A"}
    for s in per:     # MATCH_NUMBER counts 1, 2, ... per partition
        nums = [r["n"] for r in out.to_pylist() if r["symbol"] == s]
        assert nums == list(range(1, len(nums) + 1))


def test_one_row_measures_against_the_match_rows():
    data = random_ticks(2500, seed=11)
    q = """SELECT M.symbol, M.s, M.cls, M.cnt, M.spread AS spread FROM T MATCH_RECOGNIZE (
             PARTITION BY symbol ORDER BY rowtime
             MEASURES FIRST(UP.price) AS s, LAST(UP.price, 1) AS before_top, CLASSIFIER() AS cls,
                      COUNT(*) AS cnt, MAX(UP.price) - MIN(UP.price) AS spread
             AFTER MATCH SKIP PAST LAST ROW
             PATTERN (UP{3,}? DOWN)
             DEFINE UP AS LAST(UP.price, 1) IS NULL OR UP.price > LAST(UP.price, 1),
                    DOWN AS DOWN.price < LAST(UP.price, 2)) AS M"""
    out = sql_cep(q, T=data)
    assert out.column_names == ["symbol", "s", "cls", "cnt", "spread"]
    # DOWN's LAST(UP.price, 2) is the partition's row three before DOWN (a match is contiguous):
    # a lag column computed here by hand
    d = data.to_pydict()
    lag3, seen = [None] * data.num_rows, {}
    for i, s in enumerate(d["symbol"]):
        h = seen.setdefault(s, [])
        lag3[i] = d["price"][h[-3]] if len(h) >= 3 else None
        h.append(i)
    hand = (cc.Pattern.begin("UP").where(last("price", of="UP").is_null() | (col("price") > last("price", of="UP")))
            .times_or_more(3).consecutive()
            .next("DOWN").where(col("price") < col("lag3")).skip(cc.SkipPastLastEvent()))
    ref = cc.match(data.append_column("lag3", pa.array(lag3, pa.float64())), hand, key="symbol", time="rowtime",
                   columns=["price"])
    d = ref.to_pydict()
    groups = {}
    for m, s, st, p in zip(d["match_id"], d["symbol"], d["stage"], d["price"]):
        groups.setdefault(m, []).append((st, p, s))
    want = list(groups.values())
    assert out.num_rows == len(want) > 10
    assert out.column("cls").to_pylist() == ["DOWN"] * out.num_rows
    assert out.column("symbol").to_pylist() == [r[0][2] for r in want]
    assert out.column("cnt").to_pylist() == [len(r) for r in want]
    assert out.column("s").to_pylist() == [r[0][1] for r in want]
    ups = [[p for st, p, _ in r if st == "UP"] for r in want]
    assert out.column("spread").to_pylist() == pytest.approx([max(u) - min(u) for u in ups])


def test_aggregates_over_expressions_vwap():
    """SUM(A.price * A.volume) / SUM(A.volume): the expression becomes a column before matching."""
    data = random_ticks(3000, seed=8)
    out = sql_cep("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
                     MEASURES SUM(A.price * A.volume) / SUM(A.volume) AS vwap, LAST(B.price - 2 * B.volume) AS x,
                              COUNT(A.price) AS n
                     AFTER MATCH SKIP PAST LAST ROW
                     PATTERN (A{3,}? B)
                     DEFINE A AS SUM(A.price * A.volume) < 1000000,
                            B AS B.price > 1.0005 * SUM(A.price * A.volume) / SUM(A.volume))""", T=data)
    t = data.append_column("pv", pa.array([p * v for p, v in zip(data.column("price").to_pylist(),
                                                                 data.column("volume").to_pylist())]))
    hand = (cc.Pattern.begin("A").where(cc.sum("pv", of="A") + col("pv") < 1_000_000).times_or_more(3).consecutive()
            .next("B").where(col("price") > 1.0005 * cc.sum("pv", of="A") / cc.sum("volume", of="A"))
            .skip(cc.SkipPastLastEvent()))
    ref = cc.match(t, hand, key="symbol", time="rowtime", columns=["price", "volume"]).to_pydict()
    by = {}
    for m, st, p, v in zip(ref["match_id"], ref["stage"], ref["price"], ref["volume"]):
        by.setdefault(m, []).append((st, p, v))
    want = [(sum(p * v for s, p, v in r if s == "A") / sum(v for s, p, v in r if s == "A"),
             [p - 2 * v for s, p, v in r if s == "B"][0], sum(s == "A" for s, _, _ in r)) for r in by.values()]
    assert len(want) > 10
    got = list(zip(out.column("vwap").to_pylist(), out.column("x").to_pylist(), out.column("n").to_pylist()))
    assert [g[2] for g in got] == [w[2] for w in want]
    assert [g[0] for g in got] == pytest.approx([w[0] for w in want])
    assert [g[1] for g in got] == pytest.approx([w[1] for w in want])


def test_inputs_pandas_polars_and_int_time():
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    t = ticker([12, 17, 13, 16, 25, 2, 4, 10, 15, 25, 25, 30])
    q = """SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
            MEASURES AVG(A.price) AS avgPrice AFTER MATCH SKIP PAST LAST ROW PATTERN (A+ B)
            DEFINE A AS AVG(A.price) < 15)"""
    want = [14.5, 13.5]
    assert sql_cep(q, Ticker=t.to_pandas()).column("avgPrice").to_pylist() == want
    assert sql_cep(q, Ticker=pl.from_arrow(t)).column("avgPrice").to_pylist() == want
    ints = t.set_column(1, "rowtime", pa.array(np.arange(t.num_rows) * 1000, pa.int64()))
    assert sql_cep(q, Ticker=ints).column("avgPrice").to_pylist() == want
    # unsorted input and several partition columns
    two = pa.concat_tables([t, t.set_column(0, "symbol", pa.array(["B"] * t.num_rows))])
    two = two.append_column("venue", pa.array(["x"] * two.num_rows)).take(np.random.default_rng(1).permutation(two.num_rows))
    out = sql_cep(q.replace("PARTITION BY symbol", "PARTITION BY symbol, venue"), Ticker=two)
    assert sorted(out.to_pylist(), key=lambda r: (r["symbol"], r["avgPrice"])) == [
        {"symbol": "ACME", "venue": "x", "avgPrice": 13.5}, {"symbol": "ACME", "venue": "x", "avgPrice": 14.5},
        {"symbol": "B", "venue": "x", "avgPrice": 13.5}, {"symbol": "B", "venue": "x", "avgPrice": 14.5}]


def test_no_match_gives_an_empty_table_with_the_columns():
    out = sql_cep("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
                    MEASURES A.price AS p, COUNT(*) AS n PATTERN (A B) DEFINE A AS price > 1000)""",
                 T=ticker([1, 2, 3]))
    assert out.num_rows == 0 and out.column_names == ["symbol", "p", "n"]


# ----------------------------------------------------------------------------- errors name the clause and the token
@pytest.mark.parametrize("query, message", [
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A (B | C?) D))",
     "PATTERN: the alternative (C?) can match no row; make the whole alternation optional instead, e.g. (A | B)? "
     "(at '(B | C?)')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A (B | C)+ D))",
     "PATTERN: a greedy quantifier on an alternation is not supported (Flink CEP has no greedy group patterns); "
     "make it reluctant, e.g. (A | B)+? (at '(B | C)+')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A (B | A)))",
     "PATTERN: a variable can appear only once in the pattern, or once in each alternative of an alternation "
     "(at 'A')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (PERMUTE(A, B, C, D, E, F)))",
     "PATTERN: PERMUTE of more than 5 terms (6! orders) is not supported (at 'PERMUTE(A, B, C, D, E, F)')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A | B*))", "PATTERN: a pattern that can match no row"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B??))", "PATTERN: the reluctant optional"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A*))", "PATTERN: a pattern that can match no row"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A (B C)+ D))",
     "PATTERN: a greedy quantifier on a group is not supported (Flink CEP has no greedy group patterns); make it "
     "reluctant, e.g. (A B)+? (at '(B C)+')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B A))", "PATTERN: a variable can appear only once"),
    ("SELECT * FROM T MATCH_RECOGNIZE (PATTERN (A B))", "ORDER BY: MATCH_RECOGNIZE needs ORDER BY"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime DESC PATTERN (A B))", "ORDER BY: the time column must be in "
     "ascending order"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B) DEFINE C AS price > 1)",
     "DEFINE: 'C' is not a variable of the PATTERN (A, B) (at 'C')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B) DEFINE B AS B.prize > 1)",
     "DEFINE B: no column 'prize' in the input"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B) DEFINE B AS MEDIAN(B.price) > 1)",
     "DEFINE B: unsupported function MEDIAN() (at 'MEDIAN(B.price)')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B) DEFINE B AS AVG(A.price * B.tax) > 1)",
     "DEFINE B: an expression inside an aggregate, FIRST or LAST must read one pattern variable"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B) DEFINE B AS B.price > Z.price)",
     "DEFINE B: 'Z' is not a pattern variable"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A (B C)+? D) DEFINE D AS D.price > LAST(B.price, 1))",
     "DEFINE D: LAST(..., 1) of a variable inside a group or an alternation is not supported"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime MEASURES MEDIAN(A.price) AS m PATTERN (A B))",
     "MEASURES m: unsupported function MEDIAN() (at 'MEDIAN(A.price)')"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime MEASURES Q.price AS q PATTERN (A B))",
     "MEASURES q: 'Q' is not a pattern variable"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime AFTER MATCH SKIP TO LAST Q PATTERN (A B))",
     "AFTER MATCH SKIP: 'Q' is not a pattern variable"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B) WITHIN INTERVAL '1' FORTNIGHT)",
     "WITHIN: expected INTERVAL"),
    ("SELECT * FROM U MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B))", "FROM: unknown table 'U'"),
    ("SELECT * FROM T", "FROM: expected MATCH_RECOGNIZE"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B)) WHERE x > 1", "WHERE: only SELECT"),
    ("SELECT x + 1 FROM T MATCH_RECOGNIZE (ORDER BY rowtime MEASURES A.price AS x PATTERN (A B))",
     "SELECT: only columns of the MATCH_RECOGNIZE output"),
    ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime PATTERN (A B) DEFINE B AS (B.price > 1)",
     "syntax error at line 1"),
])
def test_errors(query, message):
    with pytest.raises(SqlError) as ei:
        sql_cep(query, T=ticker([1, 2, 3]))
    assert message in str(ei.value), str(ei.value)
    assert isinstance(ei.value, cc.PatternError)


# ----------------------------------------------------------------------------- on Spark
SPARK_QUERY = """SELECT * FROM ticks MATCH_RECOGNIZE (
    {partition} ORDER BY ts, id
    MEASURES FIRST(UP.ts) AS start_ts, LAST(UP.price) AS top, COUNT(UP.price) AS ups, DOWN.price AS dropped_to,
             MATCH_NUMBER() AS n, CLASSIFIER() AS cls, PREV(UP.price) AS before_top
    {rows} AFTER MATCH SKIP PAST LAST ROW
    PATTERN ({pattern}) WITHIN INTERVAL '1' SECOND
    DEFINE UP AS UP.price > PREV(UP.price), DOWN AS DOWN.price < 0.9995 * UP.price)"""


@pytest.mark.spark
@pytest.mark.parametrize("partition, rows, pattern", [
    ("PARTITION BY name", "", "UP{2,} DOWN"), ("PARTITION BY name", "ALL ROWS PER MATCH", "UP{2,} DOWN"),
    ("", "", "UP{2,} DOWN"), ("PARTITION BY name", "ALL ROWS PER MATCH", "PERMUTE(UP{2,}?, DOWN) | UP DOWN{2}")])
def test_spark_equals_in_process(partition, rows, pattern, spark):
    from colcep.spark.sql import sql as spark_sql
    from colcep.tools.ticks import make_ticks

    ticks = make_ticks(20_000 if partition else 3_000, symbols=10 if partition else 1, seed=4)
    q = SPARK_QUERY.format(partition=partition, rows=rows, pattern=pattern)
    want = sql_cep(q, ticks=ticks)
    df = spark.createDataFrame(ticks).repartition(3)
    got = spark_sql(q, ticks=df, semantics="cep")
    assert got.columns == want.column_names
    key = lambda r: tuple((v is None, v) for v in r.values())  # noqa: E731
    assert want.num_rows > 20
    assert sorted(got.toArrow().to_pylist(), key=key) == sorted(want.to_pylist(), key=key)
    # a temporary view works as well, and colcep.sql itself hands a Spark DataFrame to Spark
    df.createOrReplaceTempView("ticks")
    assert spark_sql(q, spark, semantics="cep").count() == want.num_rows
    assert sql_cep(q, ticks=df).count() == want.num_rows


# ----------------------------------------------------------------------------- alternation and PERMUTE, end to end
ALT_Q = """SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
    MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS n
    ALL ROWS PER MATCH {after}
    PATTERN ({pattern}) WITHIN INTERVAL '5' SECOND
    DEFINE UP AS UP.price > PREV(price), DOWN AS DOWN.price < PREV(price), BIG AS BIG.volume > 1000{small})"""


def _sql_matches(out):
    rows = out.column("rowtime").to_pylist()
    by = {}
    for s, n, c, t in zip(out.column("symbol").to_pylist(), out.column("n").to_pylist(), out.column("cls").to_pylist(),
                          rows):
        by.setdefault((s, n), []).append((c, t))
    return sorted(tuple(sorted(v, key=lambda e: (e[1], e[0]))) for v in by.values())


def _hand_matches(data, p):
    ref = cc.match(data, p, key="symbol", time="rowtime", columns=["rowtime"])
    by = {}
    for m, s, t in zip(ref.column("match_id").to_pylist(), ref.column("stage").to_pylist(),
                       ref.column("rowtime").to_pylist()):
        by.setdefault(m, []).append((s, t))
    return sorted(tuple(sorted(v, key=lambda e: (e[1], e[0]))) for v in by.values())


@pytest.mark.parametrize("after, skip", [("AFTER MATCH SKIP PAST LAST ROW", cc.SkipPastLastEvent()),
                                         ("AFTER MATCH SKIP TO NEXT ROW", cc.SkipToNext()),
                                         ("AFTER MATCH SKIP TO LAST UP", cc.SkipToLast("UP"))])
@pytest.mark.parametrize("pattern", ["BIG (UP DOWN | DOWN{2,3}?) SMALL", "PERMUTE(UP, DOWN, BIG)",
                                     "(UP | DOWN)+? BIG", "BIG PERMUTE(UP+?, DOWN) | DOWN{3}"])
def test_alternation_and_permute_equal_hand_written_patterns(pattern, after, skip):
    data = random_ticks(4000, seed=7)
    prev = cc.prev(col("price"), 1)
    up = lambda name="UP": B(name).where(col("price") > prev)                  # noqa: E731
    down = lambda name="DOWN": B(name).where(col("price") < prev)              # noqa: E731
    big = lambda name="BIG": B(name).where(col("volume") > 1000)               # noqa: E731
    hand = {
        "BIG (UP DOWN | DOWN{2,3}?) SMALL": big().next(ANY(up().next(down()), down().times(2, 3).consecutive()))
                                               .next(B("SMALL").where(col("volume") < 500)),
        "PERMUTE(UP, DOWN, BIG)": B(ANY(*(x().next(y()).next(z()) for x, y, z in
                                          [(up, down, big), (up, big, down), (down, up, big), (down, big, up),
                                           (big, up, down), (big, down, up)]))),
        "(UP | DOWN)+? BIG": B(ANY(up(), down())).one_or_more().consecutive().next(big()),
        "BIG PERMUTE(UP+?, DOWN) | DOWN{3}": B(ANY(
            big().next(ANY(up().one_or_more().consecutive().next(down()),
                           down().next(up().one_or_more().consecutive()))),
            down().times(3).consecutive().greedy())),
    }[pattern].within("5s").skip(skip)
    small = ", SMALL AS SMALL.volume < 500" if "SMALL" in pattern else ""
    got = _sql_matches(sql_cep(ALT_Q.format(pattern=pattern, after=after, small=small), T=data))
    want = _hand_matches(data, hand)
    assert len(want) > 20 and got == want


def test_sql_alternation_prefers_the_match_completing_first():
    """colcep's rule, not SQL's preferment: with SKIP PAST LAST ROW the match that completes first
    wins even when a left alternative would complete later; at the same row the left one wins."""
    t = ticker([5, 6, 7, 8, 9])
    q = """SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
             MEASURES CLASSIFIER() AS cls, COUNT(*) AS n ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
             PATTERN ({p}) DEFINE A AS price > 0)"""
    assert sql_cep(q.format(p="A B C | A B"), T=t).column("n").to_pylist() == [2, 2]
    assert sql_cep(q.format(p="A | B"), T=t).column("cls").to_pylist() == ["A"] * 5
    assert sql_cep(q.format(p="B | A"), T=t).column("cls").to_pylist() == ["B"] * 5
    # PERMUTE(B, A) is (B A | A B): on rows both fit, B A (listed first) is preferred, as in SQL
    assert sql_cep(q.format(p="PERMUTE(B, A)"), T=t).column("cls").to_pylist() == ["A", "A"]
    assert sql_cep(q.format(p="PERMUTE(A, B)"), T=t).column("cls").to_pylist() == ["B", "B"]


@pytest.mark.parametrize("depth", [65, 400, 5000])
def test_deep_nesting_is_a_sql_error_naming_the_clause(depth):
    """Parentheses nested past colcep's limit (64): a SqlError naming the clause and the
    variable, not a RecursionError from inside the parser (tests/test_sql_limits.py has more)."""
    cond = "(" * depth + "A.price > 1" + ")" * depth
    q = ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime MEASURES A.price AS p ONE ROW PER MATCH "
         f"PATTERN (A B) DEFINE A AS {cond}, B AS B.price > 0)")
    with pytest.raises(SqlError, match=rf"^DEFINE A: nests {depth} levels deep .*limit of 64"):
        sql_cep(q, T=ticker([1, 2, 3]))
    m = "(" * depth + "A.price" + ")" * depth
    q2 = ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime MEASURES " + m + " AS p ONE ROW PER MATCH "
          "PATTERN (A B) DEFINE B AS B.price > 0)")
    with pytest.raises(SqlError, match=rf"^MEASURES: nests {depth} levels deep"):
        sql_cep(q2, T=ticker([1, 2, 3]))


def test_moderate_nesting_still_runs():
    cond = "(" * 20 + "A.price > 1" + ")" * 20
    q = ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY rowtime MEASURES A.price AS p ONE ROW PER MATCH "
         f"PATTERN (A) DEFINE A AS {cond})")
    assert sql_cep(q, T=ticker([1, 2, 3])).column("p").to_pylist() == [2, 3]
