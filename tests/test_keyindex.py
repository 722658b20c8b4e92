"""The key hash table (``kernels.keyhash`` through ``colcep.engine.keyindex``) against a plain
Python reference: codes in first-seen order across batches, chunks and slices; strings of every
length (empty, up to a word, longer, non-ASCII), binary, integers to the int64 extremes; growth,
lookups on threads, truncation; and ``KeyCodes`` through it (undo, mixed kinds, restore)."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pytest

from colcep.engine.keyindex import KeyIndex, kind_of
from colcep.engine.keys import KeyCodes


def reference(batches: list[list], known: dict | None = None) -> tuple[list[np.ndarray], dict]:
    """Per batch the codes a dict numbering values in first-seen order gives."""
    codes = dict(known or {})
    out = []
    for b in batches:
        out.append(np.array([codes.setdefault(v, len(codes)) for v in b], np.int64))
    return out, codes


def strings(rng, n: int, distinct: int) -> list[str]:
    pool = ["", "a", "é", "AAPL", "12345678", "123456789", "BRK.B", "x" * 40, "ключ-ключ", "🙂🙂🙂"]
    pool += [f"S{i:0{rng.integers(1, 14)}d}" for i in range(distinct)]
    return [pool[i] for i in rng.integers(0, len(pool), n)]


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string()])
@pytest.mark.parametrize("seed", range(4))
def test_strings_coded_as_the_reference_batch_by_batch(arrow_type, seed):
    rng = np.random.default_rng(seed)
    batches = [strings(rng, int(rng.integers(0, 3000)), 2000) for _ in range(6)]
    expected, codes = reference(batches)
    index = KeyIndex("str")
    for b, want in zip(batches, expected):
        n0 = index.n
        got, first = index.encode(pa.array(b, arrow_type))
        assert np.array_equal(got, want)
        new = [v for v, c in codes.items() if n0 <= c < index.n]
        assert [b[i] for i in first] == new  # each new value's first row, in code order
    assert index.n == len(codes)


def test_binary_and_slices_with_offsets():
    rng = np.random.default_rng(7)
    values = [bytes(rng.integers(0, 256, int(rng.integers(0, 20)), dtype=np.uint8)) for _ in range(600)]
    col = pa.array(values * 3, pa.binary())
    index = KeyIndex("bytes")
    parts = [col.slice(0, 500), col.slice(500, 1), col.slice(501, 1299)]
    expected, _ = reference([p.to_pylist() for p in parts])
    for p, want in zip(parts, expected):
        assert np.array_equal(index.encode(p)[0], want)


@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.int32(), pa.int64(), pa.uint32()])
def test_integers_to_the_extremes(arrow_type):
    info = np.iinfo(arrow_type.to_pandas_dtype())
    rng = np.random.default_rng(3)
    pool = np.unique(np.concatenate([[info.min, info.max, 0, -1 if info.min < 0 else 1],
                                     rng.integers(info.min, int(info.max) + 1, 3000, dtype=np.int64)]))
    batches = [rng.choice(pool, int(rng.integers(1, 2000))).tolist() for _ in range(5)]
    expected, _ = reference(batches)
    index = KeyIndex("int")
    for b, want in zip(batches, expected):
        assert np.array_equal(index.encode(pa.array(b, arrow_type))[0], want)


def test_chunks_threads_and_lookups():
    rng = np.random.default_rng(11)
    col = pa.chunked_array([pa.array(strings(rng, n, 5000), pa.string()) for n in (700, 0, 1300, 2500)])
    expected, codes = reference([col.to_pylist()])
    serial = KeyIndex("str")
    got, first = serial.encode_chunks(col.chunks)
    assert np.array_equal(got, expected[0])
    assert col.take(first).to_pylist() == list(codes)
    with ThreadPoolExecutor(3) as pool:
        def run_all(fns):
            return [f.result() for f in [pool.submit(fn) for fn in fns]]
        threaded = KeyIndex("str")
        got, first = threaded.encode_chunks(col.chunks, 3, run_all)  # all new: looked up, then coded in order
        assert np.array_equal(got, expected[0]) and col.take(first).to_pylist() == list(codes)
        got, first = threaded.encode_chunks(col.chunks, 3, run_all)  # all known: only looked up
        assert np.array_equal(got, expected[0]) and first is None
    missing = serial.look_up(pa.array(["never seen", col[5].as_py()]))
    assert missing[0] == -1 and missing[1] == expected[0][5]


def test_truncate_then_code_again():
    index = KeyIndex("str")
    long = [f"a-long-key-number-{i}" for i in range(1500)]
    index.encode(pa.array(long))
    index.truncate(700)
    assert index.n == 700
    got, first = index.encode(pa.array(long[690:710] + ["new"]))
    assert got.tolist() == list(range(690, 711)) and first.tolist() == list(range(10, 21))
    assert index.look_up(pa.array(long[:3])).tolist() == [0, 1, 2]


def test_kinds():
    assert kind_of(pa.string()) == "str" and kind_of(pa.large_binary()) == "bytes"
    assert kind_of(pa.int16()) == "int" and kind_of(pa.uint64()) is None and kind_of(pa.float64()) is None
    assert kind_of(pa.dictionary(pa.int32(), pa.string())) is None


def test_key_codes_through_the_index_undo_and_copy():
    k = KeyCodes("k")
    t1 = pa.table({"k": ["b", "a", "b", "c"]})
    assert k.encode(t1).tolist() == [0, 1, 0, 2]
    mark = k.mark()
    assert k.encode(pa.table({"k": ["d", "a", "e"]})).tolist() == [3, 1, 4]
    k.rollback(mark)
    assert k.values == ["b", "a", "c"] and k.codes == {"b": 0, "a": 1, "c": 2}
    assert k.encode(pa.table({"k": ["e", "d"]})).tolist() == [3, 4]  # renumbered after the undo
    c = k.copy()
    assert c.encode(pa.table({"k": ["d", "z", "b"]})).tolist() == [4, 5, 0]
    assert k.n == 5


def test_key_codes_mixing_paths_and_kinds():
    k = KeyCodes("k")
    d = pa.DictionaryArray.from_arrays(pa.array([1, 0, 1], pa.int32()), pa.array(["x", "y"]))
    assert k.encode(pa.table({"k": d})).tolist() == [0, 1, 0]  # a dictionary column (Arrow's path): y, x
    assert k.encode(pa.table({"k": ["y", "w", "x"]})).tolist() == [0, 2, 1]  # the index learns y, x first
    other = KeyCodes("k")
    other.codes, other.values = {"p": 0, 7: 1}, ["p", 7]  # a restored state with values of two kinds
    assert other.encode(pa.table({"k": ["q", "p"]})).tolist() == [2, 0]  # Arrow's path, no index
    assert other.encode(pa.table({"k": pa.array([7, 8], pa.int64())})).tolist() == [1, 3]


def test_huge_keys_and_shared_prefixes():
    """Keys far longer than the table's first arena, and keys equal in their first 8 bytes."""
    huge = ["k" * 100_000, "k" * 100_000 + "!", "k" * 99_999]
    prefixed = [f"PREFIXED{i}" for i in range(300)] + ["PREFIXED"]
    batches = [huge + prefixed, prefixed[::-1] + huge[::-1] + ["k" * 8]]
    expected, codes = reference(batches)
    index = KeyIndex("str")
    for b, want in zip(batches, expected):
        assert np.array_equal(index.encode(pa.array(b, pa.large_string()))[0], want)
    index.truncate(2)
    assert index.look_up(pa.array(huge)).tolist() == [0, 1, -1]


def test_dictionary_columns_looked_up_through_the_index():
    """A dictionary key column (a Parquet row group's) has its entries looked up in the index, a
    null entry never taken for the empty string, and codes as the values say."""
    k = KeyCodes("k")
    assert k.encode(pa.table({"k": ["", "b", "a"]})).tolist() == [0, 1, 2]
    d = pa.DictionaryArray.from_arrays(pa.array([2, 0, 1, 2], pa.int32()), pa.array(["a", "c", ""]))
    assert k.encode(pa.table({"k": d})).tolist() == [0, 2, 3, 0]
    assert isinstance(k._index, KeyIndex) and k._index.n == 4  # (the index learnt "c")
    with_null = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["b", None]))
    assert k._entry_codes(with_null.dictionary).tolist() == [1, -1]
