"""``colcep scan`` / ``plot`` / ``generate`` / ``patterns`` (in-process; the Spark runs are in test_spark.py).

The pictures themselves are tested in test_plot.py."""
import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import colcep
from colcep.cli import main
from colcep.tools.summary import summarize
from colcep.tools.examples import get_example
from colcep.tools.ticks import make_ticks, write_ticks


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
    rc = main(["scan", "--events", "20000", "--symbols", "20", "--pattern", "three_rising", "--in-process",
               "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "colcep scan: pattern three_rising" in printed and "by stage" in printed and "rows/s" in printed
    assert (tmp_path / "out" / "ticks_20000x20_seed7.parquet").is_file()
    got = read_out(out)
    ex = get_example("three_rising")
    want = colcep.match(make_ticks(20000, 20, 7), ex.pattern, key="name", time="ts", columns=["ts", "price"])
    assert canon(got) == canon(want) and len(canon(want)) > 0
    # the time column is always in the output: the summary's time span and the picture use it
    assert got.column_names == ["match_id", "name", "stage", "row", "ts", "price"]
    # the key and the stage as dictionaries over their values (in Parquet too): no string per row
    names = pa.dictionary(pa.int32(), pa.string())
    assert got.schema.field("name").type == got.schema.field("stage").type == names
    summary = json.loads((out / "_summary.json").read_text())
    assert summary["rows"] == 20000 and summary["seq"] == "id"
    # ticks in arrival order are matched as they are read: no sort, and the scan's time by stage
    assert summary["engine"].startswith("in-process (streamed, batches of 1,048,576 rows")
    assert all(summary["seconds"][st] >= 0 for st in ("reading", "ordering", "matching", "writing"))
    assert "scan " in printed and " (reading " in printed and ", matching " in printed
    assert summary["result"] == json.loads(json.dumps(summarize(want, "name", time="ts")))
    assert summary["result"]["matches"] == len(set(want.column("match_id").to_pylist()))
    # the summary in words: what was found, per stage and key, when, and where it went
    ts = want.column("ts").to_pylist()
    n = summary["result"]["matches"]
    assert f"found     {n:,} matches ({want.num_rows:,} matched events) in 20 keys (name)" in printed
    assert f"when      ts {min(ts):,} to {max(ts):,} ms" in printed
    top_key, top_n = next(iter(summary["result"]["top_keys"].items()))
    assert f"top keys  {top_key} {top_n:,} |" in printed
    assert f"output    {out}/ (Parquet" in printed
    png = tmp_path / "out" / "matches.png"
    assert f"picture   {png}" in printed and png.stat().st_size > 10_000 and summary["picture"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["matches", "matches.png",
                                                                    "ticks_20000x20_seed7.parquet"]


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


def test_scan_unsorted_input_and_timeouts(tmp_path, capsys):
    t = make_ticks(4000, 4, 5)
    shuffled = t.take(pa.array(list(range(3999, -1, -1))))  # reversed: the scan orders it by key, time, id
    import pyarrow.parquet as pq

    pq.write_table(shuffled, tmp_path / "rev.parquet")
    rc = main(["scan", str(tmp_path / "rev.parquet"), "--pattern", "paper_query3", "--in-process", "--timeouts",
               "--batch-rows", "333", "--out", str(tmp_path / "m")])
    assert rc == 0
    err = capsys.readouterr().err
    assert re.search(r"the input is not in time order per key \(stream row 1 \{'name': 'S000\d', 'ts': \d+, 'id': 3998\} "
                     r"comes before an earlier row of its key\): reading it whole to order it \.\.\.", err), err
    assert json.loads((tmp_path / "m" / "_summary.json").read_text())["engine"].startswith(
        "in-process (read whole and ordered, batches of 333 rows")
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
    assert main(["scan", str(data), "--events", "10", "--pattern", "p1", "--in-process", "--out",
                 str(tmp_path / "m")]) == 2
    assert "either input paths or --events N" in capsys.readouterr().err
    assert main(["scan", str(tmp_path / "missing.parquet"), "--pattern", "p1", "--in-process",
                 "--out", str(tmp_path / "m")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_scan_progress_and_rerun(tmp_path, capsys):
    args = ["scan", "--events", "3000", "--symbols", "3", "--pattern", "p1", "--in-process",
            "--batch-rows", "500", "--out", str(tmp_path / "m")]
    assert main(args) == 0
    first = read_out(tmp_path / "m")
    err = capsys.readouterr().err
    # every step says what it does, in order, with the time since the start (stderr is a log here)
    cold = "compiling kernels" in err  # (cold when another checkout's kernels replaced this one's cache)
    steps = ["generating 3,000 ticks", "compiling kernels (first run" if cold else "loading kernels ...",
             "kernels compiled in" if cold else "kernels loaded in", "matching 3,000 rows of ",
             "matched 3,000 rows in", "rows/s", "wrote ", "drawing the matches -> "]
    pos = [err.find(s) for s in steps]
    assert -1 not in pos and pos == sorted(pos), err
    assert all(line.startswith("[") and " s] " in line for line in err.splitlines()), err
    assert main(args) == 0  # the generated data is reused, the earlier output replaced
    err = capsys.readouterr().err
    assert "generating" not in err and "reusing the ticks in" in err
    assert read_out(tmp_path / "m").equals(first)
    assert main(args + ["--quiet"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and "colcep scan: pattern p1" in cap.out


def test_old_option_spelling_still_works(tmp_path, capsys):
    """``scan --generate N`` is the hidden old spelling of ``--events N``; ``--progress`` is accepted."""
    assert main(["scan", "--generate", "2000", "--symbols", "2", "--pattern", "p1", "--in-process", "--progress",
                 "--no-plot", "--out", str(tmp_path / "m")]) == 0
    assert "2,000 rows" in capsys.readouterr().out and (tmp_path / "ticks_2000x2_seed7.parquet").is_file()
    assert not (tmp_path / "m.png").exists()


def test_every_option_has_help():
    from colcep.cli import _parser

    ap = _parser()
    subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subs.choices) == {"scan", "plot", "generate", "patterns", "warmup"}
    for name, sp in subs.choices.items():
        assert sp.description, name
        for act in sp._actions:
            if act.help == argparse.SUPPRESS:
                continue
            assert act.help and len(act.help) > 10, (name, act.option_strings or act.dest)
    # the tick options are spelled the same in scan and generate
    tick = {"--events", "--symbols", "--seed", "--by-key"}
    for name in ("scan", "generate"):
        opts = {o for a in subs.choices[name]._actions for o in a.option_strings}
        assert tick <= opts, name
    helps = {a.option_strings[0]: a.help for a in subs.choices["generate"]._actions if a.option_strings}
    assert "number of ticks" in helps["--events"]
    scan_help = subs.choices["scan"].format_help()
    assert "--generate" not in scan_help and "--events N" in scan_help


def test_warmup_compiles_into_an_empty_cache_once_then_loads(tmp_path):
    """``colcep warmup --host-tuned`` compiles a group's kernels for this CPU into this machine's
    cache (here an empty folder of its own), in a child process; run again it only loads them.
    Without ``--host-tuned`` it loads the kernels colcep ships compiled (colcep.engine.shipped)."""
    from colcep.engine import shipped

    env = dict(os.environ, COLCEP_CACHE_DIR=str(tmp_path / "cache"))
    warm = [sys.executable, "-m", "colcep.cli", "warmup", "--groups", "sql", "--processes", "1"]
    if shipped.folder() is not None:
        plain = subprocess.run(warm, capture_output=True, text=True, env=env, timeout=600)
        assert plain.returncode == 0 and "colcep warmup: sql: 0 kernels compiled" in plain.stdout, plain.stderr
    runs = [subprocess.run(warm + ["--host-tuned"], capture_output=True, text=True, env=env, timeout=600)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    first = re.search(r"^colcep warmup: sql: (\d+) kernels compiled, [\d.]+ s$", runs[0].stdout, re.M)
    assert first and int(first.group(1)) > 0, runs[0].stdout
    assert "colcep warmup: sql: 0 kernels compiled" in runs[1].stdout
    assert f"kernels ready in {tmp_path / 'cache'}" in runs[1].stdout
    assert os.listdir(tmp_path / "cache" / "kernels")


def test_warmup_errors(capsys):
    from colcep.tools.warmup import GROUPS, warmup

    assert list(GROUPS) == ["cep", "cep-step", "sql", "windows"]
    assert main(["warmup", "--groups", "cep,nfa"]) == 2
    assert "unknown kernel group 'nfa'; the groups are ['cep', 'cep-step', 'sql', 'windows']" in capsys.readouterr().err
    assert main(["warmup", "--processes", "0"]) == 2
    assert "--processes must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(colcep.InputError, match="unknown kernel group 'x'"):
        warmup(["x"])


def _interrupt_after(monkeypatch, n_batches: int, exc: BaseException):
    from colcep import spark as cs

    real = cs.KeyedStream.feed
    calls = {"n": 0}

    def feed(self, batch):
        calls["n"] += 1
        if calls["n"] > n_batches:
            raise exc
        return real(self, batch)

    monkeypatch.setattr(cs.KeyedStream, "feed", feed)


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if ".partial-" in p.name)


def test_interrupted_scan_leaves_nothing_and_keeps_the_earlier_output(tmp_path, capsys, monkeypatch):
    data = write_ticks(tmp_path / "t.parquet", 6000, 3)
    args = ["scan", str(data), "--pattern", "p1", "--in-process", "--batch-rows", "500", "--no-plot",
            "--out", str(tmp_path / "m")]
    # Ctrl-C in the middle of the first scan: no output folder, no hidden leftovers, exit status 130
    with monkeypatch.context() as mp:
        _interrupt_after(mp, 3, KeyboardInterrupt())
        assert main(args) == 130
    assert "interrupted; nothing was written to --out" in capsys.readouterr().err
    assert not (tmp_path / "m").exists() and _leftovers(tmp_path) == []
    assert main(args) == 0  # the next run is not blocked
    first = read_out(tmp_path / "m")
    assert first.num_rows > 0
    # a failure during a rerun keeps the earlier, complete output as it was
    with monkeypatch.context() as mp:
        _interrupt_after(mp, 2, RuntimeError("disk full"))
        with pytest.raises(RuntimeError, match="disk full"):
            main(args)
    assert read_out(tmp_path / "m").equals(first) and _leftovers(tmp_path) == []
    assert json.loads((tmp_path / "m" / "_summary.json").read_text())["rows"] == 6000


def test_leftovers_of_a_killed_scan_do_not_block(tmp_path, capsys):
    """A scan killed outright (no clean-up) leaves a hidden partial folder, e.g. with Spark's
    _temporary inside: the next scan removes it and runs."""
    data = write_ticks(tmp_path / "t.parquet", 2000, 2)
    stale = tmp_path / ".m.partial-99999"
    (stale / "_temporary" / "0").mkdir(parents=True)
    (stale / "_temporary" / "0" / "part-00000.parquet").write_bytes(b"half")
    assert main(["scan", str(data), "--pattern", "p1", "--in-process", "--no-plot", "--out",
                 str(tmp_path / "m")]) == 0
    assert not stale.exists() and read_out(tmp_path / "m").num_rows > 0


def test_overwrite(tmp_path, capsys):
    data = write_ticks(tmp_path / "t.parquet", 2000, 2)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    args = ["scan", str(data), "--pattern", "p1", "--in-process", "--no-plot", "--out", str(keep)]
    assert main(args) == 2
    assert "add --overwrite to replace it" in capsys.readouterr().err and (keep / "notes.txt").exists()
    assert main(args + ["--overwrite"]) == 0
    assert not (keep / "notes.txt").exists() and read_out(keep).num_rows > 0


def test_kernel_step_is_announced_before_it_runs():
    """On a cold cache the compile is announced (with its expected duration) before it starts."""
    import io

    from colcep.cli import scan as cli

    buf = io.StringIO()
    rep = cli.Reporter(stream=buf)
    seen = []
    orig = cli.kernels_cold
    try:
        cli.kernels_cold = lambda: True
        res, secs = cli._with_kernels(rep, lambda: seen.append(buf.getvalue()) or 42)
    finally:
        cli.kernels_cold = orig
    assert res == 42 and secs >= 0
    assert "compiling kernels (first run on this machine, ~2 min; cached for the next runs) ..." in seen[0]
    assert "kernels compiled in" in buf.getvalue()
    assert cli.kernels_cold() in (True, False)  # this numba's cache index is readable


def test_reporter_on_a_terminal_and_in_a_log():
    import io

    from colcep.engine.progress import Reporter

    class Tty(io.StringIO):
        def isatty(self):
            return True

    log = io.StringIO()
    rep = Reporter(stream=log, log_interval=3600)
    rep.step("starting")
    rep.meter("matching: 10%", force=True)
    rep.meter("matching: 20%")  # within the log interval: not written
    rep.step("done")
    lines = log.getvalue().splitlines()
    assert [ln.split("] ", 1)[1] for ln in lines] == ["starting", "  matching: 10%", "done"]
    tty = Tty()
    rep = Reporter(stream=tty)
    rep.meter("matching: 10%", force=True)
    rep.meter("matching: 20%", force=True)
    rep.step("done")
    out = tty.getvalue()
    assert out.count("\r") >= 3 and "\n" not in out.rsplit("done", 1)[0] and out.endswith("done\n")
    quiet = io.StringIO()
    rep = Reporter(stream=quiet, quiet=True)
    rep.step("x")
    rep.meter("y", force=True)
    assert quiet.getvalue() == ""


def test_in_process_hint():
    from colcep.cli.scan import IN_PROCESS_HINT_ROWS, in_process_hint

    h = in_process_hint("local[2]", True, 200_000, 6.4)
    assert "200,000 rows fit on one machine: --in-process skips Spark (it took 6 s to start here" in h
    assert "this input fits on one machine" in in_process_hint("local[*]", True, None, 6.4)
    assert in_process_hint("local[2]", True, IN_PROCESS_HINT_ROWS + 1, 6.4) is None
    assert in_process_hint("local[2]", False, 1000, 6.4) is None  # a session the user gave us
    assert in_process_hint("spark://host:7077", True, 1000, 6.4) is None


def test_generate_and_patterns(tmp_path, capsys):
    assert main(["generate", "--events", "1000", "--symbols", "4", "--out", str(tmp_path / "t.parquet")]) == 0
    assert pa.parquet.read_table(tmp_path / "t.parquet").equals(make_ticks(1000, 4, 7))
    assert main(["generate", "--events", "1000", "--symbols", "4", "--by-key", "--out", str(tmp_path / "k")]) == 0
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == ["part-00000.parquet"]  # 1,000 rows: one file
    capsys.readouterr()
    assert main(["patterns"]) == 0
    listed = capsys.readouterr().out
    for name in ("paper_query3", "three_rising", "any_triple", "spike_no_recovery", "p1", "p4"):
        assert name in listed


def test_by_key_above_1024_symbols(tmp_path, capsys):
    """Issue 21: --by-key wrote a Hive folder per symbol and pyarrow refused more than 1,024
    ("Fragment would be written into 3000 partitions"); now files of whole symbols, sorted."""
    ticks = make_ticks(12_000, 3000, 7)
    out = tmp_path / "k"
    assert main(["generate", "--events", "12000", "--symbols", "3000", "--by-key", "--buckets", "6",
                 "--out", str(out)]) == 0
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"part-{i:05d}.parquet" for i in range(6)]
    seen: set = set()
    for f in files:
        t = pa.parquet.read_table(f)
        names = t.column("name").to_pylist()
        assert not set(names) & seen and names == sorted(names)  # whole symbols, in key order
        seen |= set(names)
        srt = t.sort_by([("name", "ascending"), ("ts", "ascending"), ("id", "ascending")])
        assert t.equals(srt)
    back = pa.concat_tables(pa.parquet.read_table(f) for f in files).sort_by("id")
    assert back.equals(ticks)
    # a scan generates them and reads them back (in process here; on Spark in test_spark.py)
    assert main(["scan", "--events", "12000", "--symbols", "3000", "--by-key", "--pattern", "three_rising",
                 "--in-process", "--out", str(tmp_path / "m")]) == 0
    assert (tmp_path / "ticks_12000x3000_seed7_by_key" / "part-00000.parquet").is_file()
    ex = get_example("three_rising")
    want = colcep.match(ticks, ex.pattern, key="name", time="ts", columns=["price"])
    assert canon(read_out(tmp_path / "m")) == canon(want) and len(canon(want)) > 100
    capsys.readouterr()
    assert main(["generate", "--events", "100", "--buckets", "3", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "--buckets sets the number of files of --by-key" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["P1", "P2", "P3", "P4", "P5"])
def test_benchmark_patterns_match_patterns_json(name):
    import json as _json
    from pathlib import Path

    from conformance import case_pattern

    from colcep.tools.examples import benchmark_pattern

    path = Path(__file__).resolve().parent / "data" / "bench_patterns.json"  # copy of shared/bench/patterns.json
    case = next(c for c in _json.loads(path.read_text()) if c["id"].startswith(name + "_"))
    assert repr(benchmark_pattern(name)) == repr(case_pattern(case))
    assert benchmark_pattern(case["id"]) is benchmark_pattern(name)


def test_jvm_start_up_noise_is_filtered_and_errors_pass(capfd):
    """A child process started inside the filter (as Spark's JVM is) keeps its stderr going
    through it: the known start-up lines are dropped, everything else reaches our stderr."""
    import subprocess
    import sys
    import time

    from colcep.cli.scan import _jvm_start_up_noise_filtered

    child = ("import sys; sys.stderr.write('WARNING: Using incubator modules: jdk.incubator.vector\\n"
             "Setting default log level to \"WARN\".\\nERROR SparkContext: something real\\n'); sys.stderr.flush()")
    with _jvm_start_up_noise_filtered():
        subprocess.run([sys.executable, "-c", child], check=True)
    err = ""
    for _ in range(50):  # the forwarding thread writes asynchronously
        err += capfd.readouterr().err
        if "something real" in err:
            break
        time.sleep(0.1)
    assert "ERROR SparkContext: something real" in err
    assert "incubator" not in err and "default log level" not in err
    print("after", file=sys.stderr)  # our own stderr is back where it was
    assert "after" in capfd.readouterr().err


def _of(tbl: pa.Table, name: str) -> pa.Table:
    return tbl.filter(pa.compute.equal(tbl.column("pattern"), name)).drop_columns(["pattern"])


def test_scan_several_patterns_in_one_pass(tmp_path, capsys):
    """``--pattern a,b`` (and ``desk``, and a JSON file): one read of the input, each pattern's
    matches exactly its own scan's, in one output with a ``pattern`` column."""
    data = write_ticks(tmp_path / "t.parquet", 12000, 60, seed=4)  # (P4's triples explode on dense keys)
    t = make_ticks(12000, 60, 4)
    assert main(["scan", str(data), "--pattern", "p1,paper_query3,p5", "--in-process", "--no-plot",
                 "--out", str(tmp_path / "m")]) == 0
    printed = capsys.readouterr().out
    got = read_out(tmp_path / "m")
    assert got.column_names == ["pattern", "match_id", "name", "stage", "row", "ts", "price", "volume"]
    summary = json.loads((tmp_path / "m" / "_summary.json").read_text())
    total = 0
    for name in ("p1", "paper_query3", "p5"):
        want = colcep.match(t, get_example(name).pattern, key="name", time="ts", columns=["ts", "price", "volume"])
        assert canon(_of(got, name)) == canon(want), name
        n = len(set(want.column("match_id").to_pylist()))
        assert summary["result"]["patterns"][name]["matches"] == n
        total += n
    assert summary["result"]["matches"] == total > 100
    assert "patterns  p1 " in printed and f"found     {total:,} matches" in printed
    # the twenty desk signals
    assert main(["scan", str(data), "--pattern", "desk", "--in-process", "--no-plot", "--out",
                 str(tmp_path / "desk")]) == 0
    desk = read_out(tmp_path / "desk")
    from colcep.tools.examples import desk_patterns

    pats = desk_patterns()
    assert set(desk.column("pattern").to_pylist()) <= set(pats) and len(set(desk.column("pattern").to_pylist())) > 10
    for name in ("P2_v950_d0.998_w2m", "P4_v600_w2000ms", "P5_v1500_l1.01_w60m"):
        want = colcep.match(t, pats[name], key="name", time="ts", columns=["ts", "price", "volume"])
        assert canon(_of(desk, name)) == canon(want), name
    # a JSON file of pattern documents
    doc = {"up": json.loads(pats["P1_v700_w5s"].to_json()), "level": json.loads(pats["P5_v1500_l1.01_w60m"].to_json())}
    (tmp_path / "p.json").write_text(json.dumps(doc))
    assert main(["scan", str(data), "--pattern", str(tmp_path / "p.json"), "--in-process", "--no-plot",
                 "--columns", "price", "--out", str(tmp_path / "js")]) == 0
    js = read_out(tmp_path / "js")
    assert set(js.column("pattern").to_pylist()) == {"up", "level"}
    want = colcep.match(t, pats["P1_v700_w5s"], key="name", time="ts", columns=["ts", "price"])
    assert canon(_of(js, "up")) == canon(want)


def test_scan_several_patterns_errors(tmp_path, capsys):
    data = write_ticks(tmp_path / "t.parquet", 500, 2)
    assert main(["scan", str(data), "--pattern", "p1,p1", "--in-process", "--out", str(tmp_path / "m")]) == 2
    assert "names a pattern twice" in capsys.readouterr().err
    assert main(["scan", str(data), "--pattern", "p1,nope", "--in-process", "--out", str(tmp_path / "m")]) == 2
    assert "unknown example pattern 'nope'" in capsys.readouterr().err
    from colcep.tools.examples import desk_patterns

    one = json.loads(desk_patterns()["P1_v700_w5s"].to_json())
    (tmp_path / "dup.json").write_text(json.dumps([dict(one, name="x"), dict(one, name="x")]))
    assert main(["scan", str(data), "--pattern", str(tmp_path / "dup.json"), "--in-process", "--out",
                 str(tmp_path / "m")]) == 2
    assert "names the pattern 'x' twice" in capsys.readouterr().err
    (tmp_path / "single.json").write_text(json.dumps(one))  # one document: named after its file
    assert main(["scan", str(data), "--pattern", str(tmp_path / "single.json"), "--in-process", "--no-plot",
                 "--out", str(tmp_path / "one")]) == 0
    assert json.loads((tmp_path / "one" / "_summary.json").read_text())["pattern"].endswith("single.json")
    assert "pattern" not in read_out(tmp_path / "one").column_names
    both = tmp_path / "both.json"
    both.write_text(json.dumps([one, dict(one, name="other")]))
    clash = write_ticks(tmp_path / "clash.parquet", 500, 2)
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(clash).append_column("pattern", pa.array(["u"] * 500)), clash)
    assert main(["scan", str(clash), "--pattern", str(both), "--in-process", "--out", str(tmp_path / "c")]) == 2
    assert "the output column 'pattern' names each row's pattern" in capsys.readouterr().err
    (tmp_path / "empty.json").write_text("{}")
    assert main(["scan", str(data), "--pattern", str(tmp_path / "empty.json"), "--in-process", "--out",
                 str(tmp_path / "m")]) == 2
    assert "holds no pattern" in capsys.readouterr().err


def test_scan_tier(tmp_path, capsys, monkeypatch):
    """``--tier compiled``: every pattern runs on its compiled step (here run as Python,
    ``codegen.JIT`` off: no compile) and writes the generic scan's matches; the summary says so."""
    from colcep.engine import codegen, tiers

    monkeypatch.setattr(codegen, "JIT", False)
    ran = []
    real = tiers.Tier.run_batch

    def spy(self, args):
        fn = real(self, args)
        ran.append(self.active)
        return fn

    monkeypatch.setattr(tiers.Tier, "run_batch", spy)
    data = write_ticks(tmp_path / "t.parquet", 6000, 30, seed=5)
    for tier in ("generic", "compiled"):
        ran.clear()
        assert main(["scan", str(data), "--pattern", "p1,paper_query3", "--in-process", "--no-plot", "--tier", tier,
                     "--out", str(tmp_path / tier)]) == 0
        assert ran and set(ran) == {tier}
        summary = json.loads((tmp_path / tier / "_summary.json").read_text())
        assert f"{tier} step" in summary["engine"]
    got = read_out(tmp_path / "compiled")
    assert got.num_rows > 0 and canon(got) == canon(read_out(tmp_path / "generic"))
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["scan", str(data), "--pattern", "p1", "--in-process", "--tier", "fast", "--out", str(tmp_path / "x")])


def test_an_in_process_scan_allocates_from_the_system_pool_and_puts_arrow_s_back(tmp_path, capsys, monkeypatch):
    """The scan's Arrow buffers come from the C library's allocator (``scan._system_allocator``);
    the process's own pool is the default again after it, also after a failure."""
    import pyarrow as pa

    from colcep.cli import scan as cli_scan

    data = write_ticks(tmp_path / "t.parquet", 3000, 3)
    before = pa.default_memory_pool().backend_name
    seen = []
    real = cli_scan._scan_in_process

    def spy(*a, **k):
        seen.append(pa.default_memory_pool().backend_name)
        return real(*a, **k)

    monkeypatch.setattr(cli_scan, "_scan_in_process", spy)
    args = ["scan", str(data), "--pattern", "p1", "--in-process", "--no-plot", "--out", str(tmp_path / "m")]
    assert main(args) == 0
    with monkeypatch.context() as mp:
        _interrupt_after(mp, 1, RuntimeError("disk full"))
        with pytest.raises(RuntimeError, match="disk full"):
            main(args + ["--overwrite"])
    assert seen == ["system", "system"] and pa.default_memory_pool().backend_name == before
