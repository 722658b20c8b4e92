"""Snapshot bytes are untrusted input (issue 25): valid snapshots of several patterns, mutated
(values, extremes, off by one, swaps, truncation, header counters) with the digest recomputed,
restored and run in a child process: the only outcomes allowed are ``SnapshotError`` at restore,
or a run that finishes or stops with a colcep error; never a crash, a hang or another exception.
A few hundred mutations here; ``slow`` runs thousands."""
import subprocess
import sys
from pathlib import Path

import pytest

import snapshot_fuzz as fz

HERE = Path(__file__).resolve().parent


def _fuzz(case: str, seed: int, n: int) -> dict:
    res = subprocess.run([sys.executable, str(HERE / "snapshot_fuzz.py"), case, str(seed), str(n)],
                         capture_output=True, text=True, timeout=600)
    lines = res.stdout.splitlines()
    last = next((ln for ln in reversed(lines) if ln.startswith("mutation")), "before any mutation")
    assert res.returncode == 0, f"{case}: the child died ({res.returncode}) at {last}:\n{res.stderr[-3000:]}"
    outcomes = [ln.split(" ", 1)[1] for ln in lines if ln.startswith("outcome")]
    assert len(outcomes) == n, (case, last, res.stderr[-3000:])
    counts = {}
    for o in outcomes:
        counts[o] = counts.get(o, 0) + 1
    return counts


@pytest.mark.parametrize("case", list(fz.cases()))
def test_mutated_snapshots_fail_cleanly(case):
    counts = _fuzz(case, 7, 60)
    assert counts.get("SnapshotError", 0) > 0, counts  # most mutations are caught at restore


@pytest.mark.slow
@pytest.mark.parametrize("case", list(fz.cases()))
def test_mutated_snapshots_fail_cleanly_many(case):
    _fuzz(case, 1234, 1000)


@pytest.mark.parametrize("case", list(fz.cases()))
def test_an_unmutated_snapshot_restores_and_runs_on(case):
    """The fuzzer's starting points are valid: restored, they go on as an uninterrupted run."""
    import pyarrow as pa

    import colcep as cc
    p, kw, composite = fz.cases()[case]
    data, rest = fz.snapshot(case)
    m = cc.Matcher.restore(cc.compile(p), data)
    whole = cc.Matcher(p, time="ts", **{"key": "name", **kw})
    whole.process(fz._table(composite).slice(0, fz.SPLIT))
    want = pa.concat_tables([whole.process(rest), whole.close()])
    assert want.num_rows > 0
    assert pa.concat_tables([m.process(rest), m.close()]).equals(want)


def _edit(data: bytes, name: str, index: int, value) -> bytes:
    """``data`` with element ``index`` of array section ``name`` set to ``value``, the digest recomputed."""
    import numpy as np
    header, blobs = fz._split(data)
    e = header["blobs"][name]
    a = np.frombuffer(blobs[e["offset"]:e["offset"] + e["length"]], np.dtype(e["dtype"]).newbyteorder("<")).copy()
    a.reshape(-1)[index] = value
    b = bytearray(blobs)
    b[e["offset"]:e["offset"] + e["length"]] = a.tobytes()
    return fz._join(header, bytes(b))


@pytest.mark.parametrize("name,value,says", [
    ("buffer.parent", 10**9, "a parent outside the buffer"),   # was a segmentation fault
    ("buffer.parent", -5, "a parent outside the buffer"),      # was a silently different output
    ("buffer.row", 10**9, "an event row outside the rows fed"),
    ("buffer.stage", 10**9, "a stage this pattern does not have"),  # was an ArrowIndexError
    ("buffer.ref", 7, "a reference count"),
    ("runs.start_pos", 10**9, r"runs section has a start \(row, time\) the key never had, at index 0"),
    ("runs.node", 10**9, "point outside its match buffer"),
    ("runs.ptr", -1, "do not fit its"),
])
def test_crafted_snapshots_raise_snapshot_error(name, value, says):
    """The edits of issue 25, each with a recomputed digest: a clear ``SnapshotError`` naming the
    section (and the index), never a crash nor a restore that goes on with a state the kernels
    would index out of bounds."""
    import colcep as cc
    data, _ = fz.snapshot("parked")
    with pytest.raises(cc.SnapshotError, match=says):
        cc.Matcher.restore(cc.compile(fz.cases()["parked"][0]), _edit(data, name, 0, value))


def test_a_cycle_of_parents_is_refused():
    """A node made its own ancestor (a run's node moved by one made the next call loop for ever)."""
    import numpy as np

    import colcep as cc
    data, _ = fz.snapshot("timeouts")
    header, blobs = fz._split(data)
    e = header["blobs"]["buffer.parent"]
    parent = np.frombuffer(blobs[e["offset"]:e["offset"] + e["length"]], "<i8")
    child = int(np.flatnonzero(parent >= 0)[0])
    bad = _edit(data, "buffer.parent", int(parent[child]), child)  # the parent's parent is its child
    with pytest.raises(cc.SnapshotError):
        cc.Matcher.restore(cc.compile(fz.cases()["timeouts"][0]), bad)


def test_the_history_count_is_checked():
    import colcep as cc
    data, _ = fz.snapshot("history")
    with pytest.raises(cc.SnapshotError, match="history"):
        cc.Matcher.restore(cc.compile(fz.cases()["history"][0]), _edit(data, "history.count", 0, 2**62))
