"""Progress of library scans (``colcep.match(..., progress=...)``: ``colcep.engine.progress``;
a lazy Spark scan's: ``colcep.spark.progress``): where it is drawn (a log, a terminal, a
notebook's display), how often, its last line, Ctrl-C, and that it changes nothing in the output.
The command line's own voice is tested in test_cli.py."""
import io
import re
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import colcep as cc
from colcep import col, last
from colcep.engine import progress as prog
from colcep.engine import interrupt
from colcep.engine import matcher as cm
from colcep.engine import shards as shd
from colcep.spark import progress as spark_prog
from colcep.tools.ticks import make_ticks
from interrupts import RUNAWAY

P = (cc.Pattern.begin("a").where(col("volume") > 1000)
     .followed_by("b").where(col("price") > last("price", of="a"))
     .within("30s").skip(cc.SkipPastLastEvent()))


@pytest.fixture(scope="module")
def ticks() -> pa.Table:
    return make_ticks(60_000, symbols=20, seed=3)


class Tty(io.StringIO):
    def isatty(self):
        return True


def run(ticks, **kw) -> pa.Table:
    return cc.match(ticks, P, key="name", time="ts", time_unit="ms", columns=["ts", "price"], **kw)


def n_matches(out: pa.Table) -> int:
    return len(out["match_id"].unique())


def final_line(err: str) -> str:
    return err.replace("\r", "\n").strip().splitlines()[-1]


# ----------------------------------------------------------------------------- where it goes
def test_forced_on_writes_a_last_line_with_rows_and_matches(ticks, capsys):
    out = run(ticks, progress=True)
    err = capsys.readouterr().err
    assert capsys.readouterr().out == ""
    last_line = final_line(err)
    assert re.fullmatch(r"\[ *\d+\.\d s\] colcep\.match: matched 60,000 rows in \d+\.\d s \([\d,]+ rows/s\): "
                        rf"{n_matches(out):,} matches", last_line), err
    assert err.endswith("\n") and "\r" not in err  # a log: whole lines only


def test_off_when_asked_and_by_default_when_stderr_is_no_terminal(ticks, capsys):
    run(ticks, progress=False)
    run(ticks)  # the default: stderr is captured here, no terminal, no notebook
    assert capsys.readouterr().err == ""


def test_default_on_a_terminal_redraws_one_line(ticks, monkeypatch):
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    run(ticks)  # the default: a quick scan draws nothing on a terminal
    assert tty.getvalue() == ""
    monkeypatch.setattr(prog, "QUIET_SECONDS", 0.0)
    out = run(ticks, threads=1)
    err = tty.getvalue()
    assert err.startswith("\r[") and err.count("\n") == 1 and err.endswith(f"{n_matches(out):,} matches\n"), err
    assert final_line(err).split("] ", 1)[1].startswith("colcep.match: matched 60,000 rows in ")
    tty.truncate(0), tty.seek(0)
    run(ticks, progress=False)
    assert tty.getvalue() == ""


def test_a_log_gets_a_line_every_interval(ticks, capsys, monkeypatch):
    monkeypatch.setattr(cm, "CHUNK_ROWS", 256)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)
    monkeypatch.setattr(prog, "LOG_SECONDS", 0.0)  # every update is due
    run(ticks, progress=True, threads=1)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 10 and all(" colcep.match: " in ln for ln in lines)
    assert re.search(r"colcep\.match:  *\d+\.\d% [\d,]+/60,000 rows, [\d,]+ rows/s, [\d,]+ matches so far$", lines[1])


def test_bad_progress_value():
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        cc.match(make_ticks(10, symbols=1), P, key="name", progress="yes")


# ----------------------------------------------------------------------------- how often
class Spy:
    """Counts ScanProgress updates and draws, keeping every (done, matches) reported."""

    def __init__(self, monkeypatch):
        self.meters = []
        real = prog.ScanProgress
        spy = self

        class Counting(real):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self.calls = []
                spy.meters.append(self)

            def update(self, done, matches, force=False):
                self.calls.append((done, matches))
                super().update(done, matches, force)

        monkeypatch.setattr(prog, "ScanProgress", Counting)


def test_redraws_are_rate_limited_however_many_kernel_calls(ticks, monkeypatch):
    monkeypatch.setattr(cm, "CHUNK_ROWS", 64)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)
    monkeypatch.setattr(prog, "REDRAW_SECONDS", 0.05)
    spy = Spy(monkeypatch)
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    out = run(ticks, progress=True, threads=1)
    (meter,) = spy.meters
    calls = meter.calls
    # one report per kernel call of 64 rows: the rows done so far, exactly, and the matches so far
    assert [d for d, _ in calls] == list(range(64, 60_000, 64)) + [60_000, 60_000]  # the last: close()
    assert [m for _, m in calls] == sorted(m for _, m in calls) and calls[-1][1] == n_matches(out)
    drawn = tty.getvalue().count("rows/s")
    assert drawn == meter.draws
    assert 2 <= meter.draws <= meter.seconds / 0.05 + 3, (meter.draws, meter.seconds, len(calls))
    assert meter.draws < len(calls) / 5


def test_threads_report_from_their_counters(ticks, monkeypatch):
    """Shards run at once on threads; the waiting thread reports their counters."""
    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(cm, "CHUNK_ROWS", 16)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)
    spy = Spy(monkeypatch)
    out = run(ticks, progress=True, threads=2)
    (meter,) = spy.meters
    done = [d for d, _ in meter.calls]
    assert done == sorted(done) and done[-1] == 60_000 and meter.done == 60_000
    assert meter.matches == n_matches(out)


def test_batches_report_after_each(ticks, capsys):
    batches = ticks.to_batches(max_chunksize=7_000)
    out = cc.match(batches, P, key="name", time="ts", time_unit="ms", columns=["ts", "price"], progress=True)
    assert "matched 60,000 rows" in capsys.readouterr().err
    assert prog.ScanProgress("x", None).total is None
    assert cm._total_rows(batches) == 60_000 and cm._total_rows(iter(batches)) is None
    assert out.equals(run(ticks))


# ----------------------------------------------------------------------------- a notebook
class FakeHandle:
    def __init__(self, shown):
        self.shown = shown

    def update(self, obj, raw=False):
        assert raw and set(obj) == {"text/plain", "text/html"}
        self.shown.append(obj)


def test_a_notebook_gets_one_output_updated_in_place(ticks, capsys, monkeypatch):
    shown, opened = [], []

    def display(obj, raw=False, display_id=False):
        assert raw and display_id is True
        opened.append(obj)
        shown.append(obj)
        return FakeHandle(shown)

    monkeypatch.setattr(prog, "notebook_display", lambda: display)
    monkeypatch.setattr(prog, "QUIET_SECONDS", 0.0)
    monkeypatch.setattr(cm, "CHUNK_ROWS", 256)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)
    monkeypatch.setattr(prog, "REDRAW_SECONDS", 0.0)
    out = run(ticks, threads=1)  # the default is on in a notebook
    assert capsys.readouterr().err == ""  # nothing on stderr: all on the display
    assert len(opened) == 1 and len(shown) > 2
    assert "<progress value=" in shown[0]["text/html"] and 'max="60000"' in shown[0]["text/html"]
    assert shown[-1]["text/plain"].startswith("colcep.match: matched 60,000 rows in ")
    assert shown[-1]["text/plain"].endswith(f": {n_matches(out):,} matches")
    assert 'value="60000"' in shown[-1]["text/html"]
    opened.clear()
    run(ticks, progress=False)
    assert opened == []


def test_a_notebook_without_display_handles_redraws_a_line(ticks, capsys, monkeypatch):
    monkeypatch.setattr(prog, "notebook_display", lambda: lambda obj, raw=False, display_id=False: None)
    out = run(ticks, progress=True)
    err = capsys.readouterr().err  # no terminal, yet redrawn in place as a notebook shows "\r"
    assert err.startswith("\r") and err.endswith(f"{n_matches(out):,} matches\n")


def test_notebook_detection_without_ipython(monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert prog.notebook_display() is None

    class Shell:
        kernel = object()

    class FakeIPython:
        @staticmethod
        def get_ipython():
            return Shell()

    monkeypatch.setitem(sys.modules, "IPython", FakeIPython)
    # a kernel-backed shell, but an IPython without IPython.display: no notebook display
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    assert prog.notebook_display() is None


# ----------------------------------------------------------------------------- nothing changes
@pytest.mark.parametrize("threads", [1, 2])
def test_output_is_identical_with_and_without_progress(ticks, threads, monkeypatch, capsys):
    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(cm, "CHUNK_ROWS", 512)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)
    shuffled = ticks.take(pa.array(np.random.default_rng(0).permutation(ticks.num_rows)))
    for data in (ticks, shuffled):  # in order, and sorted by colcep.match first
        a = run(data, threads=threads, progress=False)
        b = run(data, threads=threads, progress=True)
        assert a.num_rows > 0 and a.equals(b)
    t = cc.match(ticks, P, key="name", time="ts", time_unit="ms", timeouts=True, progress=True, threads=threads)
    assert t.equals(cc.match(ticks, P, key="name", time="ts", time_unit="ms", timeouts=True, threads=threads))
    assert "matched 60,000 rows" in capsys.readouterr().err


# ----------------------------------------------------------------------------- stopping
def test_an_error_finishes_the_line(monkeypatch):
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(cm, "CHUNK_ROWS", 1000)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)
    t = pa.table({"name": ["x"] * 5000, "ts": pa.array(np.r_[np.arange(4000), np.zeros(1000)], pa.int64()),
                  "price": np.ones(5000), "volume": np.full(5000, 2000.0)})
    with pytest.raises(cc.InputError, match="not in order"):
        # colcep.match sorts; a batch iterable is taken as it comes, so the out-of-order row fails
        cc.match(t.to_batches(max_chunksize=2500), P, key="name", time="ts", progress=True)
    err = tty.getvalue()
    assert err.endswith("\n") and final_line(err).split("] ", 1)[1].startswith(
        "colcep.match: stopped by InputError after 2,500 of 5,000 rows ("), err


def test_ctrl_c_stops_the_scan_and_finishes_the_meter_line():
    """A runaway scan on two threads with the meter on, Ctrl-C after 2 s (a child process): it
    stops within GRACE_SECONDS of the signal and the meter's line is finished, saying where it
    stopped."""
    script = RUNAWAY + textwrap.dedent("""
        import io
        shards.PARALLEL_MIN_ROWS = 0  # threads: the waiting thread draws the meter while they run
        class Tty(io.StringIO):
            def isatty(self):
                return True
        tbl = ticks(2)
        cc.match(tbl.slice(0, 2), p, key="k", time="ts", progress=False)  # kernels loaded
        sys.stderr = err = Tty()
        since_signal = ctrl_c_in(2.0)
        try:
            cc.match(tbl, p, key="k", time="ts", threads=2, progress=True)
        except KeyboardInterrupt:
            sys.stdout.write(f"took {since_signal():.2f}\\n" + err.getvalue())
            sys.exit(0)
        sys.exit(2)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)  # bytes: "\r" kept
    stdout = res.stdout.decode()
    assert res.returncode == 0, stdout + res.stderr.decode()
    took, err = stdout.split("\n", 1)
    assert float(took.split()[1]) < interrupt.GRACE_SECONDS, stdout
    assert err.startswith("\r[") and err.endswith("\n") and err.count("\n") == 1, err  # drawn, then finished
    assert re.search(r"colcep\.match: interrupted after [\d,]+ of 40,000 rows \(\d+\.\d s\), 0 matches so far\n$",
                     err), err


# ----------------------------------------------------------------------------- a lazy Spark scan's meter
class FakeStage:
    def __init__(self, stage_id, tasks, done=0, running=0):
        self.stageId, self.numTasks, self.numCompletedTasks, self.numActiveTasks = stage_id, tasks, done, running


class FakeSpark:
    """A SparkContext's status tracker and a ScanMetrics, driven by the test."""

    def __init__(self):
        self.stages = []
        self.tasks = self.rows = self.matches = 0
        self.listener = None

    # SparkContext
    def statusTracker(self):
        return self

    def getActiveStageIds(self):
        return [s.stageId for s in self.stages]

    def getStageInfo(self, sid):
        return next((s for s in self.stages if s.stageId == sid), None)

    # ScanMetrics
    def on_task(self, callback):
        self.listener = callback

    def finish_task(self, rows, matches):
        self.tasks, self.rows, self.matches = self.tasks + 1, self.rows + rows, self.matches + matches
        self.listener()


def wait_for(cond, seconds=5.0):
    import time
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < seconds, "timed out"
        time.sleep(0.01)


def test_a_lazy_spark_scans_meter_follows_its_job(monkeypatch):
    monkeypatch.setattr(prog, "REDRAW_SECONDS", 0.01)
    monkeypatch.setattr(spark_prog, "IDLE_SECONDS", 0.3)
    sp, tty = FakeSpark(), Tty()
    sp.tasks = 5  # the user's metrics, already used by an earlier job: counted from here
    w = spark_prog.SparkScanMeter(sp, sp, 3, "colcep.spark.match_parquet", 300, stream=tty)
    try:
        assert w.meter is None and sp.listener is not None
        # another job's stage with as many tasks and none of ours finished: drawn, but no line ends
        sp.stages = [FakeStage(1, 3, running=2)]
        wait_for(lambda: "0/3 tasks done, 2 running" in tty.getvalue())
        sp.stages = []
        wait_for(lambda: w.meter is not None and w._gone is not None)
        sp.stages = [FakeStage(2, 3, running=3)]  # the scan's own stage: the same line goes on
        wait_for(lambda: w._gone is None)
        assert "\n" not in tty.getvalue()
        sp.finish_task(100, 7)
        wait_for(lambda: "33.3% 100/300 rows" in tty.getvalue() and "7 matches so far (1/3 tasks done" in tty.getvalue())
        # the job ends early (a show(), Ctrl-C): a line says so, and the meter waits for the next job
        sp.stages = []
        wait_for(lambda: "\n" in tty.getvalue())
        assert final_line(tty.getvalue()).endswith(
            "colcep.spark.match_parquet: Spark job ended with 1/3 tasks done after 100 of 300 rows ("
            + final_line(tty.getvalue()).split(" rows (")[1])
        assert "), 7 matches so far" in final_line(tty.getvalue()) and w.meter is None and not w.stop.is_set()
        # the next job runs all three tasks: counted from its start; the last line as the last task ends
        sp.stages = [FakeStage(3, 3, running=2)]
        wait_for(lambda: w.meter is not None)
        for _ in range(3):
            sp.finish_task(100, 2)
        assert w.stop.is_set() and sp.listener is None  # done: disarmed at once, before the action returns
        assert re.search(r"colcep\.spark\.match_parquet: matched 300 rows in \d+\.\d s \([\d,]+ rows/s\): 6 matches\n$",
                         tty.getvalue()), tty.getvalue()
        assert tty.getvalue().count("\n") == 2 and w.lines == 2
    finally:
        w.close()
    w.th.join(2)
    assert not w.th.is_alive()


def test_a_later_spark_scan_takes_over_an_idle_meter_and_a_dropped_frame_disarms(monkeypatch):
    import gc

    monkeypatch.setattr(prog, "REDRAW_SECONDS", 0.01)
    monkeypatch.setattr(prog, "notebook_display", lambda: None)
    monkeypatch.setattr(prog, "stderr_is_terminal", lambda: True)
    a, b = FakeSpark(), FakeSpark()

    class Frame:  # a DataFrame stand-in
        pass

    fa, fb = Frame(), Frame()
    wa = spark_prog.spark_scan_meter(None, fa, a, a, 2, "colcep.spark.match")
    assert spark_prog.spark_scan_meter(False, fb, b, b, 2, "colcep.spark.match") is None
    wb = spark_prog.spark_scan_meter(True, fb, b, b, 2, "colcep.spark.match")
    assert wa.stop.is_set() and a.listener is None and not wb.stop.is_set()  # a's job had not started
    del fb
    gc.collect()
    assert wb.stop.is_set() and b.listener is None
    for w in (wa, wb):
        w.th.join(2)
        assert not w.th.is_alive()
