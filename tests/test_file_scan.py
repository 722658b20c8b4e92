"""Input ordered for matching: the streaming check, the linear-time order, and the file scan
that streams input in order and orders the rest (``colcep.tools.file_scan``, ``colcep.engine.ordering``)."""
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import colcep as cc
from colcep import col, last
from colcep.engine.ordering import StreamOrder, key_time_order
from colcep.errors import InputError
from colcep.tools.file_scan import parquet_batches, scan_batches
from colcep.kernels import arrays as karr
from colcep.spark import arrow_spec

I64 = np.iinfo(np.int64)


# ------------------------------------------------------------------ kernels against plain Python
def _first_out_of_order_ref(codes, ts, seq, last):
    cur = dict(last)
    for i, (k, t, s) in enumerate(zip(codes, ts, seq)):
        if k in cur and (t, s) < cur[k]:
            return i, last
        cur[k] = (t, s)
    return -1, cur


def _key_time_order_ref(codes, ts, seq):
    return sorted(range(len(codes)), key=lambda i: (codes[i], ts[i], seq[i], i))


@pytest.mark.parametrize("seed", range(12))
def test_kernels_against_plain_python(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    n_keys = int(rng.integers(1, 6))
    codes = rng.integers(0, n_keys, n)
    # mostly in order, with ties, some rows out of order, and extreme values
    ts = np.cumsum(rng.integers(0, 3, n)).astype(np.int64) + (I64.max - 1000 if seed % 3 == 0 else I64.min + 5)
    seq = np.arange(n, dtype=np.int64)
    if seed % 2:
        swaps = rng.integers(0, max(n, 1), size=(3, 2)) if n else np.zeros((0, 2), int)
        for a, b in swaps:
            ts[a], ts[b] = ts[b], ts[a]
            seq[a], seq[b] = seq[b], seq[a]
    # first_out_of_order_by, starting from a state where key 0 has already been seen
    last_ts = np.full(n_keys, I64.min, np.int64)
    last_seq = np.full(n_keys, I64.min, np.int64)
    last_ts[0], last_seq[0] = ts[0] if n else 0, 1
    before = {k: (int(last_ts[k]), int(last_seq[k])) for k in range(n_keys)}
    want, after = _first_out_of_order_ref(codes.tolist(), ts.tolist(), seq.tolist(), before)
    got = karr.first_out_of_order_by(codes, ts, seq, last_ts, last_seq)
    assert got == want
    assert {k: (int(last_ts[k]), int(last_seq[k])) for k in range(n_keys)} == after
    # key_time_order: grouped by key code, (time, seq) within, stable
    order, moved = karr.key_time_order(codes, ts, seq, n_keys)
    ref = _key_time_order_ref(codes.tolist(), ts.tolist(), seq.tolist())
    assert order.tolist() == ref
    assert moved == (ref != list(range(n)))


def test_stream_order_is_checked_across_batches_and_keeps_its_state_on_a_bad_batch():
    t = pa.table({"k": ["a", "b", "a", "b", "c"], "ts": [1, 5, 2, 5, 0], "id": [0, 1, 2, 3, 4]})
    so = StreamOrder("k", "ts", "id")
    assert so.check(t.slice(0, 2)) == -1 and so.check(t.slice(2)) == -1
    late = pa.table({"k": ["c", "a"], "ts": [9, 1], "id": [5, 6]})  # a's time goes back
    assert so.check(late) == 1
    assert "stream row 6" in so.describe(late, 1) and "'k': 'a'" in so.describe(late, 1)
    assert so.check(pa.table({"k": ["c"], "ts": [0], "id": [9]})) == -1  # c was not advanced to 9
    tie = pa.table({"k": ["b"], "ts": [5], "id": [2]})  # same time as b's last row, smaller seq
    assert so.check(tie) == 0
    with pytest.raises(InputError, match="time column 'ts' has a null"):
        so.check(pa.table({"k": ["a"], "ts": pa.array([None], pa.int64()), "id": [7]}))


def test_key_time_order_of_a_table():
    t = pa.table({"k": ["x", "y", "x", "y", "x"], "ts": [3, 1, 1, 1, 1], "id": [0, 3, 4, 1, 2]})
    assert key_time_order(t, "k", "ts", "id").tolist() == [4, 2, 0, 3, 1]
    assert key_time_order(t, "k", "ts").tolist() == [2, 4, 0, 1, 3]  # ties in input order
    ordered = t.take(pa.array([2, 4, 0, 1, 3]))
    assert key_time_order(ordered, "k", "ts") is None
    # keys interleaved but each in time order: nothing to do for matching, but grouped by key here
    assert key_time_order(pa.table({"k": ["x", "y", "x"], "ts": [1, 1, 2]}), "k", "ts").tolist() == [0, 2, 1]
    assert key_time_order(pa.table({"k": ["x"], "ts": [1]}).slice(0, 0), "k", "ts") is None


# ------------------------------------------------------------------ the file scan
def _pattern():
    # strict contiguity: which of two rows with the same time comes first decides the match
    return (cc.Pattern.begin("a").where(col("p") > 0.6)
            .next("b").where(col("p") < last("p", of="a")).within(40))


def _ticks(n=6000, keys=7, seed=3):
    rng = np.random.default_rng(seed)
    return pa.table({"k": pa.array([f"K{i}" for i in rng.integers(0, keys, n)]),
                     "ts": np.arange(n, dtype=np.int64) // 3,  # three rows a time: ties everywhere
                     "id": np.arange(n, dtype=np.int64),
                     "p": rng.random(n)})


def _canon(tbl: pa.Table) -> Counter:
    d = tbl.select(["match_id", "k", "stage", "id"]).to_pydict()
    m: dict = {}
    for i, k, s, r in zip(d["match_id"], d["k"], d["stage"], d["id"]):
        m.setdefault(i, [k, []])[1].append((s, r))
    return Counter((k, tuple(v)) for k, v in m.values())


def _want(t: pa.Table) -> Counter:
    """What a Spark scan gives: each key's rows sorted by (time, id)."""
    s = t.sort_by([("k", "ascending"), ("ts", "ascending"), ("id", "ascending")])
    return _canon(cc.match(s, _pattern(), key="k", time="ts", columns=["id"], timeouts=True))


def _scan(t: pa.Table, batch_rows: int, seq: str | None = "id", threads: int = 2):
    spec = arrow_spec(t.schema, _pattern(), key="k", time="ts", columns=["id"], seq=seq, timeouts=True)
    out: list[pa.Table] = []
    calls = {"restart": 0, "read_all": 0}

    def read_all():
        calls["read_all"] += 1
        return t

    def restart(disorder):
        assert "comes before an earlier row of its key" in disorder
        calls["restart"] += 1
        out.clear()

    res = scan_batches(spec, lambda: t.to_batches(batch_rows), read_all, out.append, restart, threads, batch_rows)
    got = pa.concat_tables(out) if out else spec.out_schema.empty_table()
    return res, got, calls


@pytest.mark.parametrize("batch_rows", [1, 97, 100_000])
def test_input_in_time_order_streams(batch_rows):
    t = _ticks(1500 if batch_rows == 1 else 6000)
    res, got, calls = _scan(t, batch_rows)
    assert res.streamed and calls == {"restart": 0, "read_all": 0}
    assert res.rows == t.num_rows and res.matches == len(set(got.column("match_id").to_pylist()))
    assert _canon(got) == _want(t) and res.matches > 10
    assert got.column("timed_out").to_pylist().count(True) > 0


def test_input_grouped_by_key_and_sorted_streams():
    t = _ticks().sort_by([("k", "descending"), ("ts", "ascending"), ("id", "ascending")])
    res, got, calls = _scan(t, 500)
    assert res.streamed and calls["read_all"] == 0
    assert _canon(got) == _want(t)


@pytest.mark.parametrize("where", ["first batch", "late"])
def test_input_out_of_order_is_read_whole_and_ordered(where):
    t = _ticks()
    if where == "first batch":
        t = t.take(pa.array(np.arange(t.num_rows)[::-1]))
    else:  # in order for 4,000 rows, then a row from the past: the output so far is discarded
        idx = np.arange(t.num_rows)
        idx[4500], idx[10] = idx[10], idx[4500]
        t = t.take(pa.array(idx))
    res, got, calls = _scan(t, 500)
    assert not res.streamed and calls == {"restart": 1, "read_all": 1}
    assert "comes before an earlier row of its key" in res.disorder
    assert res.rows == t.num_rows
    assert _canon(got) == _want(t)


def test_ties_out_of_seq_order_are_put_in_seq_order():
    """Rows of a key with the same time, in the file in descending seq: a Spark scan sorts them
    by seq, so the in-process scan orders them too (and gives other matches than file order)."""
    t = _ticks()
    idx = np.arange(t.num_rows).reshape(-1, 3)[:, ::-1].ravel()  # each time's three rows reversed
    shuffled = t.take(pa.array(idx))
    res, got, _ = _scan(shuffled, 1000)
    assert not res.streamed
    assert _canon(got) == _want(t)
    as_given = cc.match(shuffled, _pattern(), key="k", time="ts", columns=["id"], timeouts=True)
    assert _canon(as_given) != _want(t)  # the order of ties matters to this pattern
    # without a seq column, ties keep the order of the input: it streams
    res, got, _ = _scan(shuffled, 1000, seq=None)
    assert res.streamed and res.rows == t.num_rows


def test_bad_rows_fail_with_the_row_named_and_nothing_written():
    t = _ticks(3000)
    ts = t.column("ts").to_pylist()
    ts[2100] = None
    bad = t.set_column(1, "ts", pa.array(ts, pa.int64()))
    with pytest.raises(InputError, match=r"time column 'ts' has a null in the row .*'id': 2100"):
        _scan(bad, 500)


def test_parquet_batches_read_keys_as_dictionaries_in_file_order(tmp_path):
    t = _ticks(5000)
    for i in range(3):
        pq.write_table(t.slice(i * 2000, 2000), tmp_path / f"part-{i:05d}.parquet", row_group_size=700)
    batches = list(parquet_batches(str(tmp_path), ["k"], ["k", "ts", "id", "p"], 600))
    assert max(b.num_rows for b in batches) <= 600 and sum(b.num_rows for b in batches) == 5000
    assert pa.types.is_dictionary(batches[0].schema.field("k").type)
    back = pa.Table.from_batches(batches)
    assert back.column("id").to_pylist() == list(range(5000))
    assert pc.cast(back.column("k"), pa.string()).to_pylist() == t.column("k").to_pylist()


def test_key_time_order_interleaved_leaves_a_table_in_order_per_key():
    t = pa.table({"k": ["x", "y", "x", "y"], "ts": [1, 1, 2, 3]})
    assert key_time_order(t, "k", "ts").tolist() == [0, 2, 1, 3]  # grouped by key
    assert key_time_order(t, "k", "ts", interleaved=True) is None  # what a Matcher needs already
    late = pa.table({"k": ["x", "y", "x", "y"], "ts": [2, 1, 1, 3]})
    assert key_time_order(late, "k", "ts", interleaved=True).tolist() == [2, 0, 1, 3]


def test_the_scan_counts_its_time_on_several_threads(monkeypatch):
    """``FileScan.parallel``: the wall time the kernels ran on several threads at once (the
    rest of the scan ran on one); none with one thread."""
    from colcep.engine import shards as shd

    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    t = _ticks(6000)
    res, _, _ = _scan(t, 1000, threads=2)
    assert 0 < res.parallel <= sum(res.seconds.values())
    res1, _, _ = _scan(t, 1000, threads=1)
    assert res1.parallel == 0


def test_short_batches_are_matched_together_in_calls_of_at_least_the_batch_size(tmp_path, monkeypatch):
    """Row groups that are no multiple of the batch size leave short batches (each read apart,
    with its own key dictionary): they are matched with the next ones, in calls of at least
    ``batch_rows`` rows (the last may hold fewer), and the matches are the same."""
    from colcep.tools import file_scan as fs

    t = _ticks(5000)
    for i in range(3):
        pq.write_table(t.slice(i * 2000, 2000), tmp_path / f"part-{i:05d}.parquet", row_group_size=700)
    read = list(parquet_batches(str(tmp_path), ["k"], ["k", "ts", "id", "p"], 600))
    assert sorted({b.num_rows for b in read}) == [100, 300, 600]  # (700-row groups read 600 at a time)
    fed: list[int] = []
    feed = fs._feed
    monkeypatch.setattr(fs, "_feed", lambda streams, tbl, write, res: (fed.append(tbl.num_rows),
                                                                       feed(streams, tbl, write, res))[1])
    spec = arrow_spec(read[0].schema, _pattern(), key="k", time="ts", columns=["id"], seq="id", timeouts=True)
    out: list[pa.Table] = []
    res = scan_batches(spec, lambda: iter(read), lambda: t, out.append, lambda why: pytest.fail(why), 2, 1000)
    assert sum(fed) == 5000 and all(n >= 1000 for n in fed[:-1]) and len(fed) < len(read)
    assert res.streamed and res.rows == 5000
    assert _canon(pa.concat_tables(out)) == _want(t)


def test_read_ahead_keeps_order_bounds_what_waits_and_hands_on_errors():
    """``read_ahead``: the items in order, at most ``ahead`` produced before they are taken; an
    error of the source raised where its item would have come; closing stops the producer."""
    import threading
    import time

    from colcep.tools.file_scan import read_ahead

    made: list[int] = []

    def source(n: int, fail_at: int = -1):
        for i in range(n):
            if i == fail_at:
                raise OSError(f"bad page at {i}")
            made.append(i)
            yield i

    assert list(read_ahead(source(50), 2)) == list(range(50))
    made.clear()
    it = read_ahead(source(50), 2)
    assert next(it) == 0
    time.sleep(0.3)
    assert len(made) <= 1 + 2 + 1  # the one taken, two waiting, one in the producer's hands
    it.close()
    time.sleep(0.3)
    n = len(made)
    time.sleep(0.3)
    assert len(made) == n < 50 and not any(t.name == "colcep-reader" and t.is_alive() for t in threading.enumerate())
    got = []
    with pytest.raises(OSError, match="bad page at 7"):
        for x in read_ahead(source(50, fail_at=7), 3):
            got.append(x)
    assert got == list(range(7))


def test_parquet_batches_hold_a_few_batches_of_a_file_not_the_file(tmp_path):
    """A file read far slower than it is decoded: Arrow's allocations stay a few batches'
    (the dataset scanner over the whole file held more and more of it)."""
    import time

    t = pa.table({"k": pa.array([f"s{i % 50}" for i in range(400_000)]), "ts": np.arange(400_000, dtype=np.int64),
                  "p": np.random.default_rng(1).normal(size=400_000)})
    pq.write_table(t, tmp_path / "t.parquet", row_group_size=20_000)
    del t
    base = pa.total_allocated_bytes()
    held = []
    n = 0
    for b in parquet_batches(str(tmp_path / "t.parquet"), ["k"], ["k", "ts", "p"], 20_000):
        time.sleep(0.01)
        held.append(pa.total_allocated_bytes() - base)
        n += b.num_rows
    per_batch = 20_000 * (4 + 8 + 8)  # the file: 20 such batches
    assert n == 400_000 and max(held) < 6 * per_batch, (max(held), per_batch)


def test_parquet_batches_keep_hive_partition_columns(tmp_path):
    """A folder laid out ``day=.../``: each row group's batch carries its partition's value."""
    for day in ("2024-01-01", "2024-01-02"):
        (tmp_path / f"day={day}").mkdir()
        pq.write_table(pa.table({"k": ["a", "b", "a"], "ts": [1, 2, 3]}), tmp_path / f"day={day}" / "p.parquet",
                       row_group_size=2)
    back = pa.Table.from_batches(list(parquet_batches(str(tmp_path), ["k"], ["k", "ts", "day"], 10)))
    assert back.column("day").to_pylist() == ["2024-01-01"] * 3 + ["2024-01-02"] * 3
    assert back.column("ts").to_pylist() == [1, 2, 3] * 2
