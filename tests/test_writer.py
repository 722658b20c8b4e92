"""The background writer of a file scan (``colcep.tools.writer``): order, errors, abort."""
import threading

import pyarrow as pa
import pytest

from colcep.tools.writer import BackgroundWriter


def _t(i: int) -> pa.Table:
    return pa.table({"i": [i]})


def test_tables_reach_the_sink_in_order_on_another_thread():
    got, threads = [], set()

    def sink(t):
        got.append(t.column("i")[0].as_py())
        threads.add(threading.current_thread().name)

    w = BackgroundWriter(sink, depth=2)
    for i in range(50):
        w.put(_t(i))
    w.close()
    assert got == list(range(50)) and threads == {"colcep-writer"}


def test_a_sink_error_is_raised_by_the_next_call_and_nothing_is_written_after_it():
    got = []
    failed = threading.Event()

    def sink(t):
        i = t.column("i")[0].as_py()
        if i == 3:
            failed.set()
            raise OSError("disk full")
        got.append(i)

    w = BackgroundWriter(sink, depth=1)
    with pytest.raises(OSError, match="disk full"):
        for i in range(100):
            if failed.is_set():
                failed.wait()
            w.put(_t(i))
        w.close()
    assert got == [0, 1, 2]
    with pytest.raises(OSError, match="disk full"):
        w.close()


def test_abort_drops_what_waits():
    """The table being written is finished; the three waiting are dropped."""
    release = threading.Event()
    started = threading.Event()
    got = []

    def sink(t):
        started.set()
        release.wait(5)
        got.append(t.column("i")[0].as_py())

    w = BackgroundWriter(sink, depth=3)
    for i in range(4):  # one being written, three waiting
        w.put(_t(i))
        started.wait(5)
    aborting = threading.Thread(target=w.abort)
    aborting.start()
    while not w._dropping:
        pass
    release.set()
    aborting.join(5)
    assert not aborting.is_alive() and got == [0]


def test_match_files_keep_every_value_with_string_dictionaries_and_number_statistics(tmp_path):
    """``match_writer``: the rows read back as written; the string columns in dictionary pages
    without statistics, the integers delta-coded with min / max, the numbers uncompressed."""
    import pyarrow.parquet as pq

    from colcep.tools.writer import match_writer

    t = pa.table({"pattern": ["p", "q", "p", None], "match_id": [0, 1, 1, 2],
                  "name": pa.array(["a", "b", "a", "b"]).dictionary_encode(), "ts": [5, -(2 ** 63), 2 ** 63 - 1, 7],
                  "price": [1.5, float("-inf"), None, -0.0]})
    path = tmp_path / "m.parquet"
    w = match_writer(path, t.schema)
    w.write_table(t)
    w.write_table(t.slice(1, 2))
    w.close()
    back = pq.read_table(path)
    assert back.to_pylist() == pa.concat_tables([t, t.slice(1, 2)]).to_pylist()
    cols = {c.path_in_schema: c for c in (pq.ParquetFile(path).metadata.row_group(0).column(i) for i in range(5))}
    for name in ("pattern", "name"):
        assert cols[name].statistics is None or not cols[name].statistics.has_min_max
        assert "RLE_DICTIONARY" in cols[name].encodings
    assert cols["ts"].statistics.min == -(2 ** 63) and cols["ts"].statistics.max == 2 ** 63 - 1
    assert "RLE_DICTIONARY" not in cols["match_id"].encodings and cols["match_id"].statistics.max == 2
    assert "DELTA_BINARY_PACKED" in cols["ts"].encodings and cols["ts"].compression == "UNCOMPRESSED"
    assert cols["price"].compression == "UNCOMPRESSED" and cols["price"].statistics.has_min_max


def test_dictionaries_longer_than_their_rows_are_cut_to_the_values_used(tmp_path):
    """A key column's dictionary holds every key seen; written as it is, 10^6 keys would go with
    every row group of a few matches. ``compact_dictionaries`` keeps the values and their order,
    cuts such a dictionary to the used values, and leaves short ones and ones with nulls alone."""
    import pyarrow.parquet as pq

    from colcep.tools.writer import compact_dictionaries, match_writer

    keys = pa.array([f"S{i:05d}" for i in range(50_000)])
    idx = pa.array([49_999, 3, 3, 17, 49_999], pa.int32())
    long = pa.DictionaryArray.from_arrays(idx, keys)
    short = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, 0, 0], pa.int32()), pa.array(["a", "b"]))
    nulls = pa.DictionaryArray.from_arrays(pa.array([0, None, 2, 0, 1], pa.int32()), pa.array(list("xyzuvw")))
    t = pa.table({"name": pa.chunked_array([long.slice(0, 2), long.slice(2)]), "stage": short, "tag": nulls,
                  "row": [1, 2, 3, 4, 5]})
    got = compact_dictionaries(t)
    assert got.schema == t.schema and got.to_pylist() == t.to_pylist()
    assert [len(c.dictionary) for c in got.column("name").chunks] == [2, 3]
    assert got.column("stage").chunk(0) is t.column("stage").chunk(0) or \
        got.column("stage").chunk(0).equals(t.column("stage").chunk(0))
    assert len(got.column("tag").chunk(0).dictionary) == 6  # (nulls: left as it is)
    path = tmp_path / "m.parquet"
    w = match_writer(path, t.schema)
    w.write_table(got)
    w.close()
    assert pq.read_table(path).to_pylist() == t.to_pylist() and path.stat().st_size < 20_000
