"""Composite match keys (``key=["a", "b", ...]``): the same matches as one key column built by
concatenating the values, batch by batch as on whole tables, across snapshots; the errors."""
import functools
import json
import struct
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import colcep as cc
from colcep import InputError, col, first, last, prev
from colcep.engine.codec import MAGIC
from colcep.engine.keys import KeyCodes
from colcep.spark import KeyedStream, arrow_spec

sql_cep = functools.partial(cc.sql, semantics="cep")  # colcep.sql's CEP-style mode (the default is "standard")

KEY = ["sym", "venue", "lit"]

PATTERNS = {
    "rise": cc.Pattern.begin("a").followed_by("b").where(col("price") > last("price", of="a")).within(40),
    "strict_run": (cc.Pattern.begin("a").next("b").where(col("price") > last("price", of=["a", "b"]))
                   .one_or_more().consecutive()),
    "prev_any": (cc.Pattern.begin("a").where(col("price") > prev("price"))
                 .followed_by_any("b").where(col("price") < first("price", of="a")).within(25)),
    "negation": (cc.Pattern.begin("a").where(col("price") > 50)
                 .not_followed_by("n").where(col("price") > 80)
                 .followed_by("c").where(col("price") < 30).within(30)),
}


def stream(n: int, seed: int, distinct: int = 3) -> pa.Table:
    """Random rows over a composite key (string, integer, boolean), times in order with ties."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "sym": pa.array(rng.choice([f"s{i}" for i in range(distinct)], n).tolist()),
        "venue": pa.array(rng.integers(0, distinct, n), pa.int32()),
        "lit": pa.array(rng.integers(0, 2, n).astype(bool)),
        "ts": np.cumsum(rng.integers(0, 3, n)).astype(np.int64),
        "price": rng.uniform(0, 100, n).round(1),
        "id": np.arange(n, dtype=np.int64),
    })


def joined(t: pa.Table, names=KEY) -> pa.Array:
    """One string key column: the key values as strings, joined by '|'."""
    return pc.binary_join_element_wise(*(pc.cast(t.column(c), pa.string()) for c in names), "|")


def with_joined(t: pa.Table) -> pa.Table:
    return t.append_column("k", joined(t))


def drop_keys(out: pa.Table, names) -> pa.Table:
    return out.drop_columns(list(names))


@pytest.mark.parametrize("name", sorted(PATTERNS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_composite_key_equals_concatenated_key(name, seed):
    t = stream(600, seed)
    p = PATTERNS[name]
    got = cc.match(t, p, key=KEY, time="ts", timeouts=True)
    want = cc.match(with_joined(t), p, key="k", time="ts", timeouts=True, columns=[c for c in t.column_names
                                                                                 if c not in KEY])
    assert want.num_rows > 20
    # the key columns first, under their own names and types
    assert got.schema.names[:4] == ["match_id", *KEY]
    assert [got.schema.field(c).type for c in KEY] == [t.schema.field(c).type for c in KEY]
    # the same partitions in the same first-seen order: the same output, ids included
    assert drop_keys(got, KEY).equals(drop_keys(want, ["k"]))
    assert joined(got).to_pylist() == want.column("k").to_pylist()


def test_one_row_batches_equal_whole_table():
    t = stream(400, 7)
    for p in PATTERNS.values():
        whole = cc.match(t, p, key=KEY, time="ts", timeouts=True)
        m = cc.Matcher(p, key=KEY, time="ts", timeouts=True)
        parts = [m.process(t.slice(i, 1)) for i in range(t.num_rows)] + [m.close()]
        assert whole.num_rows > 10 and pa.concat_tables(parts).to_pylist() == whole.to_pylist()
        assert m.keys == list(dict.fromkeys(zip(*(t.column(c).to_pylist() for c in KEY))))


def test_key_values_stable_across_batches_and_chunks():
    t = stream(300, 4)
    m = cc.Matcher(PATTERNS["rise"], key=KEY, time="ts")
    m.process(pa.concat_tables([t.slice(0, 50), t.slice(50, 50)]))   # two chunks per column
    m.process(t.slice(100).to_batches()[0])
    seen = list(dict.fromkeys(zip(*(t.column(c).to_pylist() for c in KEY))))
    assert m.keys == seen and all(isinstance(k, tuple) and len(k) == 3 for k in m.keys)


def test_key_codes_match_concatenated_codes_at_high_cardinality():
    """Several columns of many distinct values: the combined codes stay dense (no overflow)
    and number the keys in first-seen order, as one concatenated column does."""
    rng = np.random.default_rng(5)
    n = 50_000
    t = pa.table({"a": rng.integers(0, 40_000, n), "b": pa.array(rng.integers(0, 40_000, n).astype(str)),
                  "c": rng.integers(-2**62, 2**62, n)})
    kc, ks = KeyCodes(["a", "b", "c"]), KeyCodes("k")
    for lo in range(0, n, 20_000):
        part = t.slice(lo, 20_000)
        codes = kc.encode(part, lo)
        assert np.array_equal(codes, ks.encode(pa.table({"k": joined(part, ["a", "b", "c"])}), lo))
    assert kc.n == ks.n and ["|".join(map(str, v)) for v in kc.values] == ks.values
    back = kc.arrays(np.arange(kc.n))
    assert [a.type for a in back] == [pa.int64(), pa.string(), pa.int64()]


def test_one_name_in_a_list_is_that_name():
    t = stream(300, 2)
    p = PATTERNS["rise"]
    a = cc.match(t, p, key=["sym"], time="ts")
    assert a.equals(cc.match(t, p, key="sym", time="ts")) and a.schema.names[1] == "sym"
    assert cc.Matcher(p, key=("sym",), time="ts").key == "sym"
    assert cc.Matcher(p, key=("sym", "venue"), time="ts").key == ["sym", "venue"]


# ----------------------------------------------------------------------------- snapshots
def header(snap: bytes) -> dict:
    (n,) = struct.unpack_from("<I", snap, len(MAGIC))
    return json.loads(snap[len(MAGIC) + 4:len(MAGIC) + 4 + n])


def canon(out: pa.Table, names=KEY) -> Counter:
    """Matches as (key, timed_out, ((stage, id), ...)), independent of ids and row positions."""
    d = out.to_pydict()
    by: dict = {}
    for i, mid in enumerate(d["match_id"]):
        k = tuple(d[c][i] for c in names)
        by.setdefault(mid, [k, d.get("timed_out", [False] * len(d["match_id"]))[i], []])[2].append(
            (d["stage"][i], d["id"][i]))
    return Counter((k, to, tuple(ev)) for k, to, ev in by.values())


@pytest.mark.parametrize("event_time", [False, True])
@pytest.mark.parametrize("cut", [1, 137, 299])
def test_snapshot_restore_equals_uninterrupted(cut, event_time):
    t = stream(400, 11)
    if event_time:  # rows up to 4 time units out of order (none late): some wait for the watermark at the cut
        rng = np.random.default_rng(3)
        t = t.set_column(t.schema.get_field_index("ts"), "ts", pa.array(t.column("ts").to_numpy() +
                                                                          rng.integers(0, 5, t.num_rows)))
    kw = dict(key=KEY, time="ts", timeouts=True, out_of_orderness=5 if event_time else None)
    p = PATTERNS["rise"]
    m = cc.Matcher(p, **kw)
    whole = pa.concat_tables([m.process(t.slice(0, cut)), m.process(t.slice(cut)), m.close()])
    m = cc.Matcher(p, **kw)
    head = [m.process(t.slice(0, cut))]
    snap = m.snapshot()
    assert header(snap)["format"] == 2 and header(snap)["settings"]["key"] == KEY
    r = cc.Matcher.restore(p, snap)
    assert r.key == KEY and r.keys == m.keys
    tail = [r.process(t.slice(cut)), r.close()]
    assert pa.concat_tables(head + tail).equals(whole)
    # keys=: only some keys' state (tuples); their matches go on as in the uninterrupted run
    chosen = list(dict.fromkeys(zip(*(t.column(c).to_pylist() for c in KEY))))[::2]
    part = cc.Matcher.restore(p, m.snapshot(keys=[list(k) for k in chosen]))
    assert part.keys == [k for k in chosen if k in set(m.keys)]  # in the order asked for
    rest = t.slice(cut)
    mask = [k in set(chosen) for k in zip(*(rest.column(c).to_pylist() for c in KEY))]
    out = pa.concat_tables([part.process(rest.filter(pa.array(mask))), part.close()])
    want = Counter({m_: c for m_, c in canon(whole).items() if m_[0] in set(chosen)})
    before = Counter({m_: c for m_, c in canon(head[0]).items() if m_[0] in set(chosen)})
    assert sum(want.values()) > 5 and before + canon(out) == want


def test_single_key_snapshot_stays_format_1():
    t = stream(100, 1)
    m = cc.Matcher(PATTERNS["rise"], key="sym", time="ts")
    m.process(t)
    snap = m.snapshot()
    assert header(snap)["format"] == 1 and header(snap)["settings"]["key"] == "sym"
    assert cc.Matcher.restore(PATTERNS["rise"], snap).keys == m.keys


def test_snapshot_keys_must_be_tuples_for_a_composite_key():
    m = cc.Matcher(PATTERNS["rise"], key=KEY, time="ts")
    m.process(stream(50, 1))
    with pytest.raises(InputError, match=r"composite \(sym, venue, lit\).*tuple of 3 values, got 's0'"):
        m.snapshot(keys=["s0"])
    assert cc.Matcher.restore(PATTERNS["rise"], m.snapshot(keys=[("nope", 1, True)])).keys == []


# ----------------------------------------------------------------------------- errors
def test_errors():
    p = PATTERNS["rise"]
    t = stream(50, 1)
    with pytest.raises(InputError, match="key column 'sym' appears twice"):
        cc.Matcher(p, key=["sym", "venue", "sym"], time="ts")
    with pytest.raises(InputError, match="key column 'ts' is also the time column"):
        cc.Matcher(p, key=["sym", "ts"], time="ts")
    with pytest.raises(InputError, match="key column 'ts' is also the time column"):
        cc.match(t, p, key="ts", time="ts")
    with pytest.raises(InputError, match="empty sequence"):
        cc.Matcher(p, key=[], time="ts")
    with pytest.raises(InputError, match="column names"):
        cc.Matcher(p, key=["sym", 3], time="ts")
    with pytest.raises(InputError, match="key column 'nope' is missing"):
        cc.match(t, p, key=["sym", "nope"], time="ts")
    with pytest.raises(InputError, match="key column 'price' must be a string, integer or boolean"):
        cc.match(t, p, key=["sym", "price"], time="ts")
    # a null in any key column names the column and the row (counted over batches)
    bad = t.set_column(1, "venue", pa.array([None if i == 7 else 1 for i in range(50)], pa.int32()))
    m = cc.Matcher(p, key=KEY, time="ts")
    m.process(t)
    with pytest.raises(InputError, match="key column 'venue' has a null at row 57"):
        m.process(bad)
    m = cc.Matcher(p, key=KEY, time="ts", out_of_orderness=3)   # event time: checked on arrival
    m.process(t)
    with pytest.raises(InputError, match="key column 'venue' has a null at row 57"):
        m.process(bad)


# ----------------------------------------------------------------------------- other entry points
@pytest.mark.parametrize("batch", [1, 7, 10_000])
def test_keyed_stream_composite_key(batch):
    """What one Spark task runs: rows grouped by the composite key, any batch size."""
    t = stream(700, 9)
    p = PATTERNS["rise"]
    srt = t.take(pc.sort_indices(t, sort_keys=[(c, "ascending") for c in KEY + ["ts", "id"]]))
    spec = arrow_spec(srt.schema, p, KEY, "ts", ["price"], seq="id")
    assert spec.out_schema.names[:4] == ["match_id", *KEY]
    ks = KeyedStream(spec)
    outs = []
    for off in range(0, srt.num_rows, batch):
        outs += ks.feed(srt.slice(off, batch))
    outs += ks.finish()
    got = pa.concat_tables(outs).rename_columns(["match_id", *KEY, "stage", "id", "price"])
    want = cc.match(t, p, key=KEY, time="ts", columns=["price", "id"])
    assert want.num_rows > 20 and canon(got) == canon(want)


def test_keyed_stream_rejects_a_composite_key_seen_again():
    t = stream(200, 9)
    srt = t.take(pc.sort_indices(t, sort_keys=[(c, "ascending") for c in KEY + ["ts"]]))
    ks = KeyedStream(arrow_spec(srt.schema, PATTERNS["rise"], KEY, "ts", [], seq="id"))
    ks.feed(srt.slice(0, 100))
    with pytest.raises(InputError, match=r"not grouped by the key column \['sym', 'venue', 'lit'\]: key \("):
        ks.feed(pa.concat_tables([srt.slice(0, 1), srt.slice(99, 1)]))  # the open key after another


def test_keyed_stream_names_a_null_by_its_seq():
    """A Spark task (check_nulls=False) that meets a null key, time or seq names the row by its
    seq and values, not by its place in the task's sorted rows."""
    t = stream(200, 9)
    srt = t.take(pc.sort_indices(t, sort_keys=[(c, "ascending") for c in KEY + ["ts", "id"]]))
    ids = srt.column("id").to_pylist()
    for col, role in [("venue", "key"), ("ts", "time"), ("id", "seq")]:
        i = srt.schema.get_field_index(col)
        vals = srt.column(col).to_pylist()
        vals[150] = None
        bad = srt.set_column(i, col, pa.array(vals, srt.schema.field(col).type))
        ks = KeyedStream(arrow_spec(srt.schema, PATTERNS["rise"], KEY, "ts", [], seq="id"))
        ks.feed(bad.slice(0, 100))
        shown = "None" if col == "id" else str(ids[150])
        with pytest.raises(InputError, match=rf"{role} column '{col}' has a null in the row id={shown} \{{"):
            ks.feed(bad.slice(100))


def test_sql_partition_by_several_columns():
    t = stream(500, 12)
    q = """SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY {p} ORDER BY ts
            MEASURES FIRST(A.id) AS a_id, LAST(B.id) AS b_id, MATCH_NUMBER() AS n
            ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))"""
    got = sql_cep(q.format(p="sym, venue, lit"), T=t)
    want = sql_cep(q.format(p="k"), T=with_joined(t))
    assert want.num_rows > 20
    assert got.drop_columns(KEY).equals(want.drop_columns(["k"]))
    assert joined(got).to_pylist() == want.column("k").to_pylist()


def test_keys_snapshot_keeps_rows_of_keys_not_fed_yet():
    """Event time: a key whose rows all still wait for the watermark is exported by keys= too
    (one key column as well as a composite one)."""
    t = stream(60, 8)
    for key, pick in (("sym", lambda r: r["sym"]), (KEY, lambda r: tuple(r[c] for c in KEY))):
        m = cc.Matcher(PATTERNS["rise"], key=key, time="ts", out_of_orderness=1000)
        m.process(t)
        assert m.keys == []  # nothing released yet
        k = pick(t.slice(0, 1).to_pylist()[0])
        part = cc.Matcher.restore(PATTERNS["rise"], m.snapshot(keys=[k]))
        rest = part.close()
        assert rest.num_rows > 0 and set(map(pick, rest.to_pylist())) == {k}
        whole = m.close()
        assert canon(whole.filter(pa.array([pick(r) == k for r in whole.to_pylist()])), key if key == KEY else
                     ["sym"]) == canon(rest, key if key == KEY else ["sym"])


def test_dictionary_key_numbered_as_its_string_values():
    """A dictionary-encoded key (as Parquet gives it) whose dictionary lists its values in
    another order, some of them absent from the batch: the keys are numbered in first-seen
    order and only those present are seen, so the output is the same table as with strings
    (rows, order, match ids), in processing and in event time."""
    import numpy as np

    from colcep.tools.examples import BENCHMARK_PATTERNS
    from colcep.tools.ticks import make_ticks

    t = make_ticks(4000, 6, 3)
    words = ["ZZZ", "S0005", "unused", "S0003", "S0001", "S0000", "S0004", "S0002", "also unused"]
    for ooo in (None, 15):
        outs = []
        for as_dict in (False, True):
            m = cc.Matcher(BENCHMARK_PATTERNS["P2"], key="name", time="ts", columns=["price"], out_of_orderness=ooo)
            parts = []
            for lo in range(0, 4000, 700):
                b = t.slice(lo, 700)
                if as_dict:
                    idx = pa.array(np.array([words.index(v) for v in b.column("name").to_pylist()], np.int32))
                    b = b.set_column(1, "name", pa.DictionaryArray.from_arrays(idx, pa.array(words)))
                parts.append(m.process(b))
            outs.append((pa.concat_tables(parts + [m.close()]), m.keys))
        (plain, keys), (coded, keys_d) = outs
        assert keys_d == keys and "unused" not in keys_d
        coded = coded.set_column(1, "name", coded.column("name").cast(pa.string()))
        assert coded.equals(plain) and plain.num_rows > 100


def test_batches_sharing_a_dictionary_keep_first_seen_codes():
    """A dictionary key column whose batches share one dictionary (a Parquet file's) is coded
    through the dictionary once its keys are known: the codes stay those of first sight, a key
    new in a later batch still gets the next code, and a rollback forgets the keys it drops."""
    dictionary = pa.array(["d", "c", "b", "a"])

    def batch(idx):
        return pa.table({"k": pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), dictionary)})

    keys = KeyCodes("k")
    assert keys.encode(batch([2, 1, 2])).tolist() == [0, 1, 0]  # b, c
    assert keys.encode(batch([1, 1, 2])).tolist() == [1, 1, 0]  # known: through the dictionary
    mark = keys.mark()
    assert keys.encode(batch([3, 2, 0])).tolist() == [2, 0, 3]  # a and d new: next codes, first seen first
    keys.rollback(mark)
    assert keys.values == ["b", "c"]
    assert keys.encode(batch([0, 1])).tolist() == [2, 1]  # d now the third key
    other = pa.table({"k": pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["a", "b"]))})
    assert keys.encode(other).tolist() == [3, 0]  # another dictionary: by value
    assert keys.values == ["b", "c", "d", "a"]
    # a third dictionary (each Parquet row group has its own) whose keys are all known: its
    # entries looked up, the rows gathered, nothing numbered
    third = pa.array(["c", "x", "a", "d"])
    t3 = pa.table({"k": pa.DictionaryArray.from_arrays(pa.array([2, 0, 3, 0], pa.int32()), third)})
    assert keys.encode(t3).tolist() == [3, 1, 2, 1] and keys._by_dictionary[0].equals(third)
    assert keys.values == ["b", "c", "d", "a"]
