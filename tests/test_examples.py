"""The tick-scan examples: each runs in one command, and its matches obey its pattern.

Every example is run small in this process (its ``main`` returns the matches) and the
matches are checked against the pattern's meaning on the generated ticks, rule by rule;
each also runs once as ``python examples/NAME.py``.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import colcep.tools.examples as builtin
from colcep.tools.ticks import make_ticks

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SMALL = ["--events", "20000", "--symbols", "20", "--show", "1"]


def load(name: str):
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(EXAMPLES))


def matches_by_id(out):
    """{match_id: {stage: [rows]}} with rows in emission order."""
    d = out.select(["match_id", "stage", "row"]).to_pydict()
    res: dict = {}
    for m, s, r in zip(d["match_id"], d["stage"], d["row"]):
        res.setdefault(m, {}).setdefault(s, []).append(r)
    return res


class Ticks:
    """The generated ticks with, per row, its position within its symbol's sequence."""

    def __init__(self, events: int, symbols: int, seed: int = 7):
        t = make_ticks(events, symbols, seed)
        self.name = np.array(t.column("name").to_pylist())
        self.ts = t.column("ts").to_numpy()
        self.price = t.column("price").to_numpy()
        self.volume = t.column("volume").to_numpy()
        self.pos = np.zeros(events, np.int64)
        self.rows_of = {}
        for s in np.unique(self.name):
            rows = np.flatnonzero(self.name == s)
            self.pos[rows] = np.arange(len(rows))
            self.rows_of[s] = rows


@pytest.fixture(scope="module")
def ticks():
    return Ticks(20000, 20)


@pytest.mark.parametrize("name", ["three_rising", "paper_query3", "any_triple", "spike_no_recovery"])
def test_example_pattern_is_the_builtin(name):
    assert repr(load(name).PATTERN) == repr(builtin.get_example(name).pattern)


@pytest.mark.parametrize("name", ["three_rising", "paper_query3", "any_triple", "spike_no_recovery"])
def test_example_runs_as_a_command(name):
    r = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--events", "5000", "--symbols", "5"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ticks over 5 symbols, in-process:" in r.stdout
    assert " matches (" in r.stdout


def test_three_rising(ticks, capsys):
    out = load("three_rising").main(SMALL)
    assert "Three rising ticks" in capsys.readouterr().out
    ms = matches_by_id(out)
    assert len(ms) > 50
    last_end = {}
    for m in ms.values():
        rows = m["start"] + m["up"]
        assert len(m["start"]) == 1 and len(m["up"]) == 3
        sym = ticks.name[rows[0]]
        assert all(ticks.name[r] == sym for r in rows)
        assert np.all(np.diff(ticks.pos[rows]) == 1), "strict contiguity within the symbol"
        assert np.all(np.diff(ticks.price[rows]) > 0), "each tick above the one before"
        assert ticks.pos[rows[0]] > last_end.get(sym, -1), "skip past last event: no overlap"
        last_end[sym] = ticks.pos[rows[-1]]
    # and every rising run of four is found (greedy left to right, as skip-past-last-event does)
    expected = 0
    for s, rows in ticks.rows_of.items():
        up = np.diff(ticks.price[rows]) > 0
        i = 0
        while i + 3 <= len(up):
            if up[i] and up[i + 1] and up[i + 2]:
                expected += 1
                i += 4
            else:
                i += 1
    assert len(ms) == expected


def test_paper_query3(ticks):
    out = load("paper_query3").main(SMALL)
    ms = matches_by_id(out)
    assert len(ms) > 20
    for m in ms.values():
        a1, ai, b = m["a1"], m["ai"], m["b"]
        assert len(a1) == 1 and len(ai) >= 1 and len(b) == 1
        rows = a1 + ai + b
        assert len({ticks.name[r] for r in rows}) == 1
        assert np.all(np.diff(ticks.pos[rows]) > 0)
        assert ticks.volume[a1[0]] > 1000
        prices = ticks.price[a1 + ai]
        for i in range(1, len(prices)):
            assert prices[i] > prices[:i].mean() - 1e-9
        assert ticks.volume[b[0]] < 0.8 * ticks.volume[ai[-1]]
        assert ticks.ts[b[0]] - ticks.ts[a1[0]] < 30_000


def test_any_triple(ticks):
    out = load("any_triple").main(SMALL)
    ms = matches_by_id(out)
    assert len(ms) > 100
    seen = set()
    for m in ms.values():
        a, b, c = m["a"][0], m["b"][0], m["c"][0]
        assert ticks.name[a] == ticks.name[b] == ticks.name[c]
        assert ticks.pos[a] < ticks.pos[b] < ticks.pos[c]
        assert ticks.volume[a] > 1000
        assert ticks.price[a] < ticks.price[b] < ticks.price[c]
        assert ticks.ts[c] - ticks.ts[a] < 1000
        seen.add((a, b, c))
    assert len(seen) == len(ms), "each combination once"
    # skip till any: for one large trade, every qualifying (b, c) pair is a match
    a0 = next(iter(ms.values()))["a"][0]
    rows = ticks.rows_of[ticks.name[a0]]
    later = rows[(ticks.pos[rows] > ticks.pos[a0]) & (ticks.ts[rows] - ticks.ts[a0] < 1000)]
    want = {(a0, b, c) for i, b in enumerate(later) for c in later[i + 1:]
            if ticks.price[a0] < ticks.price[b] < ticks.price[c]}
    assert want == {t for t in seen if t[0] == a0}


def test_spike_no_recovery(capsys):
    t = Ticks(60000, 2)  # ~2 minutes of ticks, 2 symbols: some spikes are never recovered
    out = load("spike_no_recovery").main(["--events", "60000", "--symbols", "2", "--show", "0"])
    ms = matches_by_id(out)
    spikes = 0
    for s, rows in t.rows_of.items():
        p = t.price[rows]
        for i in np.flatnonzero(p[1:] >= 1.0015 * p[:-1]):
            base, spike = rows[i], rows[i + 1]
            after = rows[i + 2:]
            window = after[t.ts[after] - t.ts[base] < 300_000]
            recovered = np.any(t.price[window] <= t.price[base])
            spikes += 1
            found = any(m["base"] == [base] and m["spike"] == [spike] for m in ms.values())
            assert found == (not recovered), (s, base, spike)
    assert spikes > len(ms) > 0


def test_live_vwap_streams_early_on_time_and_late_updates():
    r = subprocess.run([sys.executable, str(EXAMPLES / "live_vwap.py"), "--events", "60000", "--symbols", "3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[0]
    assert "60,000 ticks in batches of 500" in head and " on time, " in head
    early, on_time, late = (int(head.split(f" {k}")[0].rsplit(" ", 1)[-1].replace(",", ""))
                            for k in ("early,", "on time,", "late;"))
    assert early > 100 and on_time >= 3 and late > 0


def test_sql_v_shape_matches_obey_the_query(ticks, capsys):
    """Each V: its symbol's ticks from start to end, two or more falls, then rises; the end is
    above the start, and no rise follows it (the greedy rise took every rising tick)."""
    out = load("sql_v_shape").main(SMALL)
    assert "V shapes in SQL" in capsys.readouterr().out
    assert out.num_rows > 50
    d = out.to_pydict()
    for i in range(out.num_rows):
        s, e, bottom = d["start_id"][i], d["end_id"][i], d["bottom_id"][i]
        rows = ticks.rows_of[d["name"][i]]
        a, b, m = ticks.pos[s], ticks.pos[e], ticks.pos[bottom]
        p = ticks.price[rows[a:b + 1]]
        falls = m - a
        assert falls == d["falls"][i] >= 2 and b - m == d["rises"][i]
        assert (np.diff(p[:falls + 1]) < 0).all() and (np.diff(p[falls:]) > 0).all()
        assert p[-1] > p[0] and d["top"][i] == p[-1] and d["bottom"][i] == p[falls]
        if b + 1 < len(rows):
            assert ticks.price[rows[b + 1]] <= p[-1]


def test_sql_v_shape_runs_as_a_command():
    r = subprocess.run([sys.executable, str(EXAMPLES / "sql_v_shape.py"), "--events", "5000", "--symbols", "5"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "V shapes in SQL" in r.stdout and "in-process" in r.stdout
