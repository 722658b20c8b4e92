"""The SASE+ language (colcep.sase): the paper's Queries 1-3 verbatim against hand-written
Patterns on generated data, each construct, and the errors."""
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import colcep as cc
from colcep import avg, col, count, first, last
from colcep.lang.sase import SaseError, sase, sase_match

# The queries as printed in the paper (Query 1 with the negation the translation lost).
Q1 = """PATTERN SEQ(Shelf a, ~(Register b), Exit c)
WHERE    skip_till_next_match(a, b, c) {
               a.tag_id = b.tag_id
       and     a.tag_id = c.tag_id
               /* equivalently, [tag_id] */     }
WITHIN    12 hours"""

Q2 = """PATTERN SEQ(Alert a, Shipment+ b[ ])
WHERE    skip_till_any_match(a, b[ ]) {
                 a.type = 'contaminated'
       and       b[1].from = a.site
       and       b[i].from = b[i-1].to }
WITHIN    3 hours"""

Q3 = """PATTERN SEQ(Stock+ a[ ], Stock b)
WHERE    skip_till_next_match(a[ ], b) {
                 [symbol]
       and       a[1].volume > 1000
       and       a[i].price > avg(a[..i-1].price)
       and       b.volume < 80%*a[a.LEN].volume }
WITHIN    1 hour"""

HOUR = 3_600_000


def matches(out: pa.Table, rename: dict | None = None) -> Counter:
    """The matches of an output table as a multiset of ((stage, row), ...) tuples."""
    rename = rename or {}
    d = out.to_pydict()
    by: dict = {}
    for mid, st, row in zip(d["match_id"], d["stage"], d["row"]):
        by.setdefault(mid, []).append((rename.get(st, st), row))
    return Counter(tuple(sorted(v)) for v in by.values())


# ----------------------------------------------------------------------------- generated data
def rfid(n=400, seed=1) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(0, 2 * HOUR, n))
    return pa.table({"kind": rng.choice(["Shelf", "Register", "Exit", "Shelf", "Exit"], n).tolist(),
                     "tag_id": rng.integers(0, 6, n), "ts": ts})


def supply_chain(n=70, seed=2) -> pa.Table:
    rng = np.random.default_rng(seed)
    kind = rng.choice(["Alert", "Shipment", "Shipment", "Shipment"], n)
    sites = ["S1", "S2", "S3", "S4"]
    return pa.table({"kind": kind.tolist(),
                     "type": [rng.choice(["contaminated", "late"]) if k == "Alert" else None for k in kind],
                     "site": [rng.choice(sites) if k == "Alert" else None for k in kind],
                     "from": [rng.choice(sites) if k == "Shipment" else None for k in kind],
                     "to": [rng.choice(sites) if k == "Shipment" else None for k in kind],
                     "ts": np.cumsum(rng.integers(0, HOUR // 3, n))})


def stock(n=1500, seed=3) -> pa.Table:
    from colcep.tools.ticks import make_ticks
    t = make_ticks(n, symbols=4, seed=seed)
    return t.rename_columns(["symbol" if c == "name" else c for c in t.column_names])


# ----------------------------------------------------------------------------- the paper's queries
def test_query1_shelf_no_register_exit():
    data = rfid()
    q = sase(Q1, type_column="kind")
    assert q.key is None and q.strategy == "skip_till_next_match"
    hand = (cc.Pattern.begin("a").where(col("kind") == "Shelf")
            .not_followed_by("b").where(col("kind") == "Register")
            .followed_by("c").where(col("kind") == "Exit").within("12h"))
    want = matches(cc.match(data, hand, key="tag_id", time="ts", columns=[]))
    got = matches(q.match(data, time="ts", columns=[]))          # equality tests, one stream
    assert len(want) > 10 and got == want
    # the comment's "equivalently, [tag_id]": the same matches, keyed by tag_id
    q_eq = sase(Q1.replace("a.tag_id = b.tag_id\n       and     a.tag_id = c.tag_id", "[tag_id]"), type_column="kind")
    assert q_eq.key == "tag_id"
    assert matches(q_eq.match(data, time="ts", columns=[])) == want
    # the Chinese translation's text, without the ~, parses too: then Register b is a plain component
    q_t = sase(Q1.replace("~(Register b)", "(Register b)"), type_column="kind")
    assert [s.connect for s in q_t.pattern.stages] == ["begin", "followed_by", "followed_by"]


def test_query2_supply_chain_skip_till_any():
    data = supply_chain()
    q = sase(Q2, type_column="kind")
    hand = (cc.Pattern.begin("a").where((col("kind") == "Alert") & (col("type") == "contaminated"))
            .followed_by_any("b1").where((col("kind") == "Shipment") & (col("from") == last("site", of="a")))
            .followed_by_any("bi").where((col("kind") == "Shipment") & (col("from") == last("to", of=["b1", "bi"])))
            .one_or_more().allow_combinations().optional()
            .within("3h"))
    want = matches(cc.match(data, hand, time="ts", columns=[]), {"b1": "b", "bi": "b"})
    got = matches(cc.sase_match(data, Q2, time="ts", type_column="kind", columns=[]))
    assert len(want) > 10 and max(len(m) for m in want) >= 4
    assert got == want


def test_query3_stock_trend():
    data = stock()
    q = cc.sase(Q3)
    assert q.key == "symbol" and isinstance(q, cc.SaseQuery)
    hand = (cc.Pattern.begin("a1").where(col("volume") > 1000)
            .followed_by("ai").where(col("price") > avg("price", of=["a1", "ai"])).one_or_more().optional()
            .followed_by("b").where(col("volume") < 0.8 * last("volume", of=["a1", "ai"]))
            .within("1h"))
    want = matches(cc.match(data, hand, key="symbol", time="ts", columns=[]), {"a1": "a", "ai": "a"})
    got = matches(q.match(data, time="ts", columns=[]))
    assert len(want) > 20 and max(len(m) for m in want) >= 4
    assert got == want
    # with a skip strategy, as the README's paper_query3 scan runs it
    q2 = sase(Q3, skip=cc.SkipPastLastEvent())
    want2 = matches(cc.match(data, hand.skip(cc.SkipPastLastEvent()), key="symbol", time="ts", columns=[]),
                    {"a1": "a", "ai": "a"})
    assert matches(q2.match(data, time="ts", columns=[])) == want2 and len(want2) < len(want)


# ----------------------------------------------------------------------------- strategies
def test_strategies_map_to_contiguity():
    text = "PATTERN SEQ(Stock a, Stock+ b[], ~(Stock c), Stock d) WHERE {s}(a, b[], c, d) {{ a.price > 1 }} WITHIN 10 s"
    kinds = {}
    for s in ("strict_contiguity", "skip_till_next_match", "skip_till_any_match"):
        p = sase(text.format(s=s)).pattern
        kinds[s] = ([st.connect for st in p.stages], p.stages[1].quantifier.inner)
    assert kinds["strict_contiguity"] == (["begin", "next", "not_next", "next"], "consecutive")
    assert kinds["skip_till_next_match"] == (["begin", "followed_by", "not_followed_by", "followed_by"], "relaxed")
    assert kinds["skip_till_any_match"] == (["begin", "followed_by_any", "not_followed_by", "followed_by_any"],
                                            "allow_combinations")
    assert sase("PATTERN SEQ(Stock a, Stock b)").strategy == "skip_till_next_match"


def test_partition_contiguity_on_the_key_is_strict_per_key():
    data = stock(800)
    q = sase("""PATTERN SEQ(Stock a, Stock+ b[], Stock c)
                WHERE partition_contiguity(a, b[], c) { [symbol] and b[i].price > b[i-1].price
                      and b[1].price > a.price and c.price < b[b.LEN].price }""")
    assert q.key == "symbol"
    hand = (cc.Pattern.begin("a").next("b").where(col("price") > last("price", of=["a", "b"])).one_or_more()
            .consecutive().next("c").where(col("price") < last("price", of="b")))
    want = matches(cc.match(data, hand, key="symbol", time="ts", columns=[]))
    assert len(want) > 20 and matches(q.match(data, time="ts", columns=[])) == want
    # a key given by the caller that is the partition: the same
    q2 = sase("PATTERN SEQ(Stock a, Stock b) WHERE partition_contiguity(a, b) { a.price < b.price }", key="symbol")
    assert q2.key == "symbol" and q2.pattern.stages[1].connect == "next"


def venues(data: pa.Table, seed=4, n=3) -> pa.Table:
    """The stock ticks with a ``venue`` attribute: each symbol's ticks split over ``n`` venues."""
    rng = np.random.default_rng(seed)
    return data.append_column("venue", pa.array(rng.choice([f"V{i}" for i in range(n)], data.num_rows).tolist()))


def partitions(data: pa.Table, attrs) -> list[list[int]]:
    """Row positions of each partition (the rows with equal ``attrs``), in time order (stable)."""
    d = data.to_pydict()
    by: dict = {}
    for i in sorted(range(data.num_rows), key=lambda i: d["ts"][i]):
        by.setdefault(tuple(d[a][i] for a in attrs), []).append(i)
    return list(by.values())


def brute_rising_run(data: pa.Table, attrs) -> Counter:
    """SEQ(Stock a, Stock+ b[], Stock c) under partition contiguity by definition: a, b[1..k], c
    adjacent in their partition, b rising from a, c below b's last."""
    price = data.column("price").to_pylist()
    out = Counter()
    for rows in partitions(data, attrs):
        for i in range(len(rows)):
            j = i + 1
            while j < len(rows) and price[rows[j]] > price[rows[j - 1]]:   # b[1..]: rising from a
                if j + 1 < len(rows) and price[rows[j + 1]] < price[rows[j]]:
                    out[tuple(sorted([("a", rows[i])] + [("b", r) for r in rows[i + 1:j + 1]] +
                                     [("c", rows[j + 1])]))] += 1
                j += 1
    return out


RISING_RUN = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
                WHERE partition_contiguity(a, b[], c) {{ {equiv} b[i].price > b[i-1].price
                      and b[1].price > a.price and c.price < b[b.LEN].price }}"""


def test_partition_contiguity_over_another_attribute():
    """[venue] with key=symbol: strict contiguity in each (symbol, venue) sub-stream (SASE+ §2),
    other venues' ticks in between ignored."""
    data = venues(stock(1500))
    q = sase(RISING_RUN.format(equiv="[venue] and"), key="symbol")
    assert q.key == ["symbol", "venue"] and q.strategy == "partition_contiguity"
    want = brute_rising_run(data, ["symbol", "venue"])
    got = matches(q.match(data, time="ts", columns=[]))
    assert len(want) > 20 and max(len(m) for m in want) >= 5 and got == want
    # not the same as contiguity per symbol alone, nor per venue alone
    assert want != brute_rising_run(data, ["symbol"]) and want != brute_rising_run(data, ["venue"])
    # two equivalence tests and no key=: the partition is both attributes
    q2 = sase(RISING_RUN.format(equiv="[symbol] and [venue] and"))
    assert q2.key == ["symbol", "venue"] and matches(q2.match(data, time="ts", columns=[])) == want
    # a composite key= and the attribute: partitions per (symbol, venue) once more
    q3 = sase(RISING_RUN.format(equiv="[venue] and"), key=["symbol", "venue"])
    assert q3.key == ["symbol", "venue"] and matches(q3.match(data, time="ts", columns=[])) == want


def test_partition_contiguity_with_negation_over_another_attribute():
    """~(Stock n) under partition contiguity: the event right after a in its partition is not an
    n, and is the c."""
    data = venues(stock(1200), seed=5)
    q = sase("""PATTERN SEQ(Stock a, ~(Stock n), Stock c)
                WHERE partition_contiguity(a, n, c) { [venue] and n.volume > 900 and c.price > a.price }
                WITHIN 1 hour""", key="symbol")
    price, volume = data.column("price").to_pylist(), data.column("volume").to_pylist()
    want = Counter()
    for rows in partitions(data, ["symbol", "venue"]):
        for x, y in zip(rows, rows[1:]):
            if volume[y] <= 900 and price[y] > price[x]:
                want[(("a", x), ("c", y))] += 1
    got = matches(q.match(data, time="ts", columns=[]))
    assert len(want) > 20 and got == want


def test_partition_contiguity_rfid():
    """The RFID shape: per tag, a Shelf reading right followed (among the tag's readings at the
    same reader) by an Exit reading."""
    data = rfid(600)
    data = data.append_column("reader", pa.array(np.random.default_rng(9).integers(0, 2, data.num_rows)))
    q = sase("PATTERN SEQ(Shelf a, Exit c) WHERE partition_contiguity(a, c) { [reader] }", type_column="kind",
             key="tag_id")
    assert q.key == ["tag_id", "reader"]
    kind = data.column("kind").to_pylist()
    want = Counter()
    for rows in partitions(data, ["tag_id", "reader"]):
        for x, y in zip(rows, rows[1:]):
            if kind[x] == "Shelf" and kind[y] == "Exit":
                want[(("a", x), ("c", y))] += 1
    assert len(want) > 10 and matches(q.match(data, time="ts", columns=[])) == want


def test_partition_contiguity_needs_a_partition():
    with pytest.raises(SaseError, match=r"partition_contiguity needs a partition: an equivalence test \[attr\]"):
        sase("PATTERN SEQ(Stock a, Stock b) WHERE partition_contiguity(a, b) { a.price < b.price }")
    with pytest.raises(cc.InputError, match="key column 'symbol' appears twice"):
        sase("PATTERN SEQ(Stock a, Stock b) WHERE partition_contiguity(a, b) { [venue] }", key=["symbol", "symbol"])


def test_strict_contiguity_equivalence_is_not_a_key():
    """Strict contiguity is over the whole stream: [symbol] is then an equality test, not a key."""
    data = stock(800)
    q = sase("PATTERN SEQ(Stock a, Stock b) WHERE strict_contiguity(a, b) { [symbol] and b.price > a.price }")
    assert q.key is None
    hand = (cc.Pattern.begin("a").next("b")
            .where((col("price") > last("price", of="a")) & (col("symbol") == first("symbol", of="a"))))
    want = matches(cc.match(data, hand, time="ts", columns=[]))
    assert len(want) > 5 and matches(q.match(data, time="ts", columns=[])) == want


# ----------------------------------------------------------------------------- references and values
def pattern_key(p):
    return tuple((s.name, s.connect, None if s.condition is None else s.condition.key(), s.quantifier)
                 for s in p.stages)


@pytest.mark.parametrize("where, cond_b", [
    ("b.x > a.x", col("x") > last("x", of="a")),
    ("b.x >= 80% * a.x + 2", col("x") >= 0.8 * last("x", of="a") + 2),
    ("b.x <> 'up' or not (b.y = 1.5e1)", (col("x") != "up") | ~(col("y") == 15.0)),
    ("b.x < -a.x / 2 - 1", col("x") < -last("x", of="a") / 2 - 1),
    ("b.x = a.x and b.y != 3", (col("x") == last("x", of="a")) & (col("y") != 3)),
])
def test_single_variable_references(where, cond_b):
    got = sase(f"PATTERN SEQ(T a, T b) WHERE {where}").pattern
    want = cc.Pattern.begin("a").followed_by("b").where(cond_b)
    assert pattern_key(got) == pattern_key(want)


def test_kleene_references():
    p = sase("""PATTERN SEQ(T a, T+ b[], T c) WHERE skip_till_next_match(a, b[], c) {
                    b[1].x > a.x and b[i].x > b[i-1].x and b[i].y < avg(b[..i-1].y) + max(b[..i-1].y)
                and b[i].z > b[1].z and b[i].w > 0 and count(b[..i-1]) < 5
                and c.x < b[b.LEN].x and c.y > sum(b[].y) and c.z = b[1].z and c.w > min(b[..b.LEN].w) }""").pattern
    n = count(of="b")
    want = (cc.Pattern.begin("a")
            .followed_by("b").where(((n > 0) | (col("x") > last("x", of="a"))) & ((n == 0) | (col("x") > last("x", of="b")))
                                   & ((n == 0) | (col("y") < avg("y", of="b") + cc.max("y", of="b")))
                                   & ((n == 0) | (col("z") > first("z", of="b"))) & (col("w") > 0)
                                   & ((n == 0) | (count(of="b") < 5))).one_or_more()
            .followed_by("c").where((col("x") < last("x", of="b")) & (col("y") > cc.sum("y", of="b"))
                                    & (col("z") == first("z", of="b")) & (col("w") > cc.min("w", of="b"))))
    assert pattern_key(p) == pattern_key(want)


def test_within_units_and_types():
    for w, want in [("12 hours", "12h"), ("3 hour", "3h"), ("30 seconds", "30s"), ("500 ms", "500ms"),
                    ("5 minutes", "5min"), ("2 days", "2d"), ("1.5 s", "1.5s"), ("250", 250)]:
        assert sase(f"pattern seq(T a, T b) within {w}").pattern.window == want
    p = sase("PATTERN SEQ(Shelf a, Exit b)", type_column="kind").pattern
    assert p.stages[0].condition.key() == (col("kind") == "Shelf").key()
    assert sase("PATTERN SEQ(Stock a, Stock b)").pattern.stages[0].condition is None


def test_sase_query_runs_streaming():
    data = stock(1200)
    q = sase(Q3)
    m = q.matcher(time="ts", columns=[])
    parts = [m.process(b) for b in data.to_batches(max_chunksize=300)] + [m.close()]
    assert matches(pa.concat_tables(parts)) == matches(q.match(data, time="ts", columns=[]))


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("text, kw, message", [
    ("PATTERN SEQ(A a, B b) WHERE a.x > b.", {"type_column": "k"}, "line 1, column 36"),
    ("PATTERN SEQ(A a B b)", {"type_column": "k"}, "unexpected 'B' at line 1, column 17; expected one of: ')', ','"),
    ("PATTERN SEQ(A a) WITHIN 3 parsecs", {}, "expected one of: a time unit"),
    ("PATTERN SEQ(A a, B b)", {}, "pass type_column="),
    ("PATTERN SEQ(T a, T a)", {}, "declared twice"),
    ("PATTERN SEQ(~(T a), T b)", {}, "cannot start with a negated component"),
    ("PATTERN SEQ(T a, ~(T b))", {}, "needs WITHIN"),
    ("PATTERN SEQ(T a, T b) WHERE skip_till_next_match(a, c) { a.x > 1 }", {}, "'c' is not a variable"),
    ("PATTERN SEQ(T+ a[], T b) WHERE a.x > 1", {}, "a is a Kleene variable"),
    ("PATTERN SEQ(T a, T b) WHERE b.x > a[1].x", {}, "a is not a Kleene variable"),
    ("PATTERN SEQ(T+ a[], T b) WHERE a[2].x > 1", {}, "not a[2]"),
    ("PATTERN SEQ(T+ a[], T b) WHERE b.x > a[i].x", {}, "i is the index of the current variable"),
    ("PATTERN SEQ(T+ a[], T b) WHERE a[i].x > a[a.LEN].x", {}, "known only after it"),
    ("PATTERN SEQ(T+ a[], T b) WHERE b.x > median(a[].x)", {}, "unknown function 'median'"),
    ("PATTERN SEQ(T a, ~(T b), T c) WHERE c.x > b.x WITHIN 5 s", {}, "the negated variable b"),
    ("PATTERN SEQ(T a, T b) WHERE 1 > 2", {}, "mentions no variable"),
    ("PATTERN SEQ(T a, T b) WHERE [x] or a.y > 1", {}, "must stand on its own"),
    ("PATTERN SEQ(T a, T b) WHERE z.y > 1", {}, "'z' is not a variable"),
])
def test_errors(text, kw, message):
    with pytest.raises(SaseError) as ei:
        sase(text, **kw)
    assert message in str(ei.value)
    assert isinstance(ei.value, cc.PatternError)


@pytest.mark.spark
def test_query3_on_spark_equals_in_process(spark):
    data = stock(3000)                                 # make_ticks has an arrival id
    q = cc.sase(Q3, skip=cc.SkipPastLastEvent())
    want = q.match(data, time="ts", columns=["ts", "price"])
    got = q.match(spark.createDataFrame(data), time="ts", columns=["ts", "price"], seq="id").toArrow()

    def canon(t):
        d = t.to_pydict()
        by = {}
        for m, k, st, ts, p in zip(d["match_id"], d["symbol"], d["stage"], d["ts"], d["price"]):
            by.setdefault(m, []).append((k, st, ts, p))
        return Counter(tuple(v) for v in by.values())
    assert want.num_rows > 50 and canon(got) == canon(want)


# ----------------------------------------------------------------------------- a query stands for a Pattern
def test_a_sase_query_stands_wherever_a_pattern_does():
    """colcep.match, Matcher, Matcher.restore and colcep.compile take a SaseQuery (with its key)."""
    data = stock(1200)
    q = sase(Q3)
    want = q.match(data, time="ts", columns=[])
    assert want.num_rows > 20
    assert cc.match(data, q, time="ts", columns=[]).equals(want)                # its key: symbol
    assert cc.match(data, q, key="symbol", time="ts", columns=[]).equals(want)  # the same key, said again
    m = cc.Matcher(q, time="ts", columns=[])
    assert m.key == "symbol"
    first = m.process(data.slice(0, 600))
    m2 = cc.Matcher.restore(q, m.snapshot())
    rest = pa.concat_tables([m2.process(data.slice(600)), m2.close()])
    assert matches(pa.concat_tables([first, rest])) == matches(want)
    assert cc.compile(q).fingerprint == cc.compile(q.pattern).fingerprint
    with pytest.raises(cc.InputError, match=r"key='tag_id' differs from the query's key 'symbol'"):
        cc.match(data, q, key="tag_id", time="ts")


def test_a_query_with_a_composite_key_keeps_it():
    data = stock(600).append_column("venue", pa.array(["X", "Y"] * 300))
    q = sase("PATTERN SEQ(Stock a, Stock b) WHERE partition_contiguity(a, b) { [venue] and b.price > a.price }",
             key="symbol")
    assert q.key == ["symbol", "venue"]
    assert cc.match(data, q, time="ts", columns=[]).equals(q.match(data, time="ts", columns=[]))
