"""The contract-exact limit loops (asv_bench/limit_exact.py) give exactly colcep's matches: the
same matches in the same order (match_id), every event of each with its row and stage, in
stage order. Ticks from colcep.tools.ticks (the benchmark generator), symbols interleaved at random."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

ASV_BENCH = Path(__file__).resolve().parents[1] / "asv_bench"
sys.path.insert(0, str(ASV_BENCH))

import colcep  # noqa: E402
from colcep.tools.examples import benchmark_pattern  # noqa: E402
from colcep.tools.ticks import make_ticks  # noqa: E402

import limit_exact  # noqa: E402


def _colcep(table: pa.Table, name: str, within: int | None = None) -> tuple:
    """colcep.match's output as (m_off, e_row, e_stage), matches in match_id order."""
    pattern = benchmark_pattern(name)
    if within is not None:
        pattern = pattern.within(within)
    out = colcep.match(table, pattern, key="name", time="ts", columns=[])
    ids = out.column("match_id").to_numpy()
    rows = out.column("row").to_numpy().astype(np.int64)
    stage = pc.index_in(out.column("stage"), value_set=pa.array(limit_exact.STAGES[name])).to_numpy(
        zero_copy_only=False)
    assert not np.any(np.isnan(stage.astype(float))), "a stage outside the pattern's"
    if ids.size == 0:
        return np.zeros(1, np.int64), rows, stage.astype(np.int8)
    starts = np.r_[0, np.flatnonzero(np.diff(ids)) + 1]
    # one match's events are contiguous and ids count up from 0 in output order
    np.testing.assert_array_equal(ids[starts], np.arange(starts.size))
    m_off = np.r_[starts, ids.size].astype(np.int64)
    return m_off, rows, stage.astype(np.int8)


def _check(table: pa.Table, name: str, within: int | None = None) -> int:
    want = _colcep(table, name, within)
    got = limit_exact.run(name, table, within)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int64
    n = got[0].shape[0] - 1
    assert n > 0, f"{name}: no matches, the case tests nothing"
    assert n == want[0].shape[0] - 1, f"{name}: {n} matches, colcep {want[0].shape[0] - 1}"
    np.testing.assert_array_equal(got[0], want[0], err_msg=f"{name}: match lengths")
    bad = np.flatnonzero((got[1] != want[1]) | (got[2] != want[2]))
    if bad.size:
        q = int(np.searchsorted(want[0], bad[0], side="right") - 1)
        lo, hi = want[0][q], want[0][q + 1]
        pytest.fail(f"{name}: match {q} differs: loop rows {got[1][lo:hi].tolist()} stages {got[2][lo:hi].tolist()}, "
                    f"colcep rows {want[1][lo:hi].tolist()} stages {want[2][lo:hi].tolist()}")
    return n


# (pattern, events, symbols, seed, within override or None)
CASES = [
    ("P1", 20_000, 3, 1, None), ("P1", 20_000, 20, 2, None), ("P1", 20_000, 3, 4, 12),
    ("P2", 20_000, 3, 1, None), ("P2", 20_000, 20, 2, None), ("P2", 20_000, 5, 3, 5_000),
    ("P3", 20_000, 3, 1, None), ("P3", 20_000, 20, 2, None), ("P3", 20_000, 5, 3, 5_000),
    # P4: the rising triples of a 2 s window grow with the cube of a key's ticks in it: few rows
    ("P4", 1_500, 8, 5, None), ("P4", 3_000, 20, 2, None), ("P4", 4_000, 10, 1, 500),
    # P5: a 5 % rise takes thousands of a key's ticks: many rows, few symbols
    ("P5", 20_000, 3, 1, None), ("P5", 20_000, 10, 5, None), ("P5", 20_000, 3, 2, 10_000),
]


@pytest.mark.parametrize("name, events, symbols, seed, within", CASES,
                         ids=[f"{c[0]}-{c[1]}x{c[2]}-s{c[3]}" + (f"-w{c[4]}" if c[4] else "") for c in CASES])
def test_exact_loop_equals_colcep(name, events, symbols, seed, within):
    _check(make_ticks(events, symbols, seed), name, within)


@pytest.mark.parametrize("name", ["P1", "P2", "P3", "P4", "P5"])
def test_interleaved_symbols(name):
    """Twelve symbols, interleaved at random: the matches of different keys alternate in the
    output (the order across keys is by emitting row, not key by key), and the loop agrees."""
    events = {"P4": 1_000, "P5": 40_000}.get(name, 20_000)  # P5: a 5 % rise takes a key many ticks
    table = make_ticks(events, 12, 11)
    _check(table, name)
    m_off, e_row, _ = limit_exact.run(name, table)
    key_of = pc.dictionary_encode(table.column("name")).combine_chunks().indices.to_numpy()
    keys = key_of[e_row[m_off[:-1]]]
    # more runs of one key than keys: some key's matches are split by another key's
    assert np.unique(keys).size > 1 and 1 + np.count_nonzero(np.diff(keys)) > np.unique(keys).size


def test_fixed_order_rules():
    """The order rules on a hand-made stream of one key: P4's matches of one c come out by a,
    then b (the vendored loop gives them by b, then a); P5's matches of one b by a."""
    # rows:    0      1      2      3      4
    price = [1.0, 0.5, 2.0, 1.5, 3.0]
    volume = [700.0, 700.0, 10.0, 10.0, 10.0]
    table = pa.table({"name": ["x"] * 5, "ts": np.arange(5, dtype=np.int64), "price": price, "volume": volume})
    m_off, e_row, e_stage = limit_exact.run("P4", table)
    # only c = row 4 closes triples: a in {0, 1}, b in {2, 3}
    assert e_row.reshape(-1, 3).tolist() == [[0, 2, 4], [0, 3, 4], [1, 2, 4], [1, 3, 4]]
    assert e_row.tolist() == _colcep(table, "P4")[1].tolist()
    # P5: three open a's (thresholds 1.05, 0.945, 0.9555) all crossed by row 3 (the heap pops 1, 2, 0)
    p5 = pa.table({"name": ["x"] * 4, "ts": np.arange(4, dtype=np.int64), "price": [1.0, 0.9, 0.91, 2.0],
                   "volume": [900.0, 900.0, 900.0, 10.0]})
    m_off, e_row, e_stage = limit_exact.run("P5", p5)
    assert e_row.tolist() == [0, 3, 1, 3, 2, 3] == _colcep(p5, "P5")[1].tolist()
    assert e_stage.tolist() == [0, 1] * 3


@pytest.mark.parametrize("prices, want", [
    # c (1.5) is below 0.999 x both b's: the branches [a b1 c] and [a b1 b2 c] complete at once;
    # colcep emits the longer (its b2 precedes c), skipPastLastEvent drops the other
    ([1.0, 2.0, 2.5, 1.5], [0, 1, 2, 3]),
    # c (1.9975) is below 0.999 x b1 only: [a b1 c], b2 (between them) is not in the match
    ([1.0, 2.0, 1.999, 1.9975], [0, 1, 3]),
])
def test_p2_longest_completing_branch(prices, want):
    table = pa.table({"name": ["x"] * 4, "ts": np.arange(4, dtype=np.int64), "price": prices,
                      "volume": [1000.0, 10.0, 10.0, 10.0]})
    m_off, e_row, e_stage = limit_exact.run("P2", table)
    assert e_row.tolist() == want == _colcep(table, "P2")[1].tolist()
    assert e_stage.tolist() == [0] + [1] * (len(want) - 2) + [2]
