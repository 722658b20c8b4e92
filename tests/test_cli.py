"""``colcep scan`` / ``generate`` / ``patterns`` (in-process; the Spark runs are in test_spark.py)."""
import json
from collections import Counter

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import colcep
from colcep.cli import main, summarize
from colcep.examples import get_example
from colcep.ticks import make_ticks, write_ticks


def canon(tbl: pa.Table, key: str = "name") -> Counter:
    """Matches as a multiset of (key, ((stage, row), ...)), independent of match ids."""
    d = tbl.select(["match_id", key, "stage", "row"]).to_pydict()
    m: dict = {}
    for i, k, s, r in zip(d["match_id"], d[key], d["stage"], d["row"]):
        m.setdefault(i, [k, []])[1].append((s, r))
    return Counter((k, tuple(v)) for k, v in m.values())


def read_out(path) -> pa.Table:
    return ds.dataset(str(path), format="parquet").to_table()


def test_scan_generated_in_process(tmp_path, capsys):
    out = tmp_path / "out" / "matches"
    rc = main(["scan", "--generate", "20000", "--symbols", "20", "--pattern", "three_rising", "--in-process",
               "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "colcep scan: pattern three_rising" in printed and "by stage" in printed and "rows/s" in printed
    assert (tmp_path / "out" / "ticks_20000x20_seed7.parquet").is_file()
    got = read_out(out)
    ex = get_example("three_rising")
    want = colcep.match(make_ticks(20000, 20, 7), ex.pattern, key="name", time="ts", columns=["price"])
    assert canon(got) == canon(want) and len(canon(want)) > 0
    assert got.column_names == ["match_id", "name", "stage", "row", "price"]
    summary = json.loads((out / "_summary.json").read_text())
    assert summary["rows"] == 20000 and summary["seq"] == "id"
    assert summary["result"] == json.loads(json.dumps(summarize(want, "name")))
    assert summary["result"]["matches"] == len(set(want.column("match_id").to_pylist()))


def test_scan_csv_with_pattern_file(tmp_path, capsys):
    data = write_ticks(tmp_path / "ticks.csv", 5000, 5, seed=3)
    pfile = tmp_path / "big_then_up.py"
    pfile.write_text('"""A large trade, then a higher tick."""\n'
                     "from colcep import Pattern, col, last\n"
                     "KEY = 'name'\nCOLUMNS = ['price']\n"
                     "pattern = (Pattern.begin('a').where(col('volume') > 900)\n"
                     "           .next('b').where(col('price') > last('price', of='a')))\n")
    rc = main(["scan", str(data), "--pattern", str(pfile), "--in-process", "--seq", "", "--out",
               str(tmp_path / "m"), "--show", "2"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "A large trade, then a higher tick." in printed and "match 0:" in printed
    ns: dict = {}
    exec(pfile.read_text(), ns)
    want = colcep.match(make_ticks(5000, 5, 3), ns["pattern"], key="name", time="ts", columns=["price"])
    got = read_out(tmp_path / "m")
    assert canon(got) == canon(want) and len(canon(want)) > 10


def test_scan_unsorted_input_and_timeouts(tmp_path):
    t = make_ticks(4000, 4, 5)
    shuffled = t.take(pa.array(list(range(3999, -1, -1))))  # reversed: the scan sorts by key, time, id
    import pyarrow.parquet as pq

    pq.write_table(shuffled, tmp_path / "rev.parquet")
    rc = main(["scan", str(tmp_path / "rev.parquet"), "--pattern", "paper_query3", "--in-process", "--timeouts",
               "--batch-rows", "333", "--out", str(tmp_path / "m")])
    assert rc == 0
    got = read_out(tmp_path / "m")
    want = colcep.match(t, get_example("paper_query3").pattern, key="name", time="ts", columns=["price", "volume"],
                        timeouts=True)
    key = lambda tbl: Counter(zip(tbl.column("timed_out").to_pylist(), tbl.column("row").to_pylist(),  # noqa: E731
                                  tbl.column("stage").to_pylist()))
    assert key(got) == key(want) and any(got.column("timed_out").to_pylist())
    assert canon(got.filter(~pa.compute.field("timed_out"))) == canon(want.filter(~pa.compute.field("timed_out")))


def test_scan_errors(tmp_path, capsys):
    data = write_ticks(tmp_path / "t.parquet", 100, 2)
    assert main(["scan", str(data), "--pattern", "p1", "--key", "symbol", "--in-process",
                 "--out", str(tmp_path / "m")]) == 2
    assert "key column 'symbol' is missing" in capsys.readouterr().err
    assert main(["scan", str(data), "--pattern", "nope", "--in-process", "--out", str(tmp_path / "m")]) == 2
    assert "unknown example pattern 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    assert main(["scan", str(data), "--pattern", str(bad), "--in-process", "--out", str(tmp_path / "m")]) == 2
    assert "must define `pattern" in capsys.readouterr().err
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    assert main(["scan", str(data), "--pattern", "p1", "--in-process", "--out", str(keep)]) == 2
    assert "holds other files" in capsys.readouterr().err and (keep / "notes.txt").exists()
    assert main(["scan", str(tmp_path / "missing.parquet"), "--pattern", "p1", "--in-process",
                 "--out", str(tmp_path / "m")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_scan_progress_and_rerun(tmp_path, capsys):
    args = ["scan", "--generate", "3000", "--symbols", "3", "--pattern", "p1", "--in-process", "--progress",
            "--batch-rows", "500", "--out", str(tmp_path / "m")]
    assert main(args) == 0
    first = read_out(tmp_path / "m")
    err = capsys.readouterr().err
    assert "generating 3,000 ticks" in err
    assert main(args) == 0  # the generated data is reused, the earlier output replaced
    assert "generating" not in capsys.readouterr().err
    assert read_out(tmp_path / "m").equals(first)


def test_generate_and_patterns(tmp_path, capsys):
    assert main(["generate", "--events", "1000", "--symbols", "4", "--out", str(tmp_path / "t.parquet")]) == 0
    assert pa.parquet.read_table(tmp_path / "t.parquet").equals(make_ticks(1000, 4, 7))
    assert main(["generate", "--events", "1000", "--symbols", "4", "--by-key", "--out", str(tmp_path / "k")]) == 0
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == [f"name=S000{i}" for i in range(4)]
    capsys.readouterr()
    assert main(["patterns"]) == 0
    listed = capsys.readouterr().out
    for name in ("paper_query3", "three_rising", "any_triple", "spike_no_recovery", "p1", "p4"):
        assert name in listed


@pytest.mark.parametrize("name", ["P1", "P2", "P3", "P4"])
def test_benchmark_patterns_match_patterns_json(name):
    import json as _json
    from pathlib import Path

    from conformance import case_pattern

    from colcep.examples import benchmark_pattern

    path = Path(__file__).resolve().parent / "data" / "bench_patterns.json"  # copy of shared/bench/patterns.json
    case = next(c for c in _json.loads(path.read_text()) if c["id"].startswith(name + "_"))
    assert repr(benchmark_pattern(name)) == repr(case_pattern(case))
    assert benchmark_pattern(case["id"]) is benchmark_pattern(name)
