"""Runs of one start that can never be emitted are dropped (``kernels.matches.dominated``).

Under skip past last event / skip to next (one match per start) and without timed-out output, a
run waiting on a plain threshold whose TAKE completes the match is dropped while another run of
the same start and state completes whenever it would, first or ahead of it on a tie. Checked
here: the completed-path order against plain Python, the engine against the plain-Python
reference on streams built to make such runs (ties included), and that the state really
shrinks (and does not where the rule does not apply).
"""
import random

import numpy as np
import pytest

import colcep as cc
from colcep import col, last
from colcep.kernels.buffer import compare_completed, compare_paths
from colcep.lang.json_format import to_dict
from colcep.skip import NoSkip, SkipPastLastEvent, SkipToNext
from conformance import case_table, engine_colcep, engine_reference, run_table


# ----------------------------------------------------------------------------- the path order
def _paths(rng, n_nodes):
    """A random forest of buffer nodes (row, stage, parent) with parents before children."""
    n_row = np.empty(n_nodes, np.int64)
    n_stage = np.empty(n_nodes, np.int64)
    n_parent = np.empty(n_nodes, np.int64)
    for i in range(n_nodes):
        p = rng.randrange(-1, i) if i else -1
        n_parent[i] = p
        n_row[i] = (n_row[p] + rng.randrange(1, 3)) if p >= 0 else rng.randrange(0, 3)
        n_stage[i] = rng.randrange(0, 2)
    return n_row, n_stage, n_parent


def _events(n_row, n_stage, n_parent, x):
    out = []
    while x >= 0:
        out.append((int(n_row[x]), int(n_stage[x])))
        x = n_parent[x]
    return out[::-1]


def _py_compare(a, b):
    """Lexicographic by rows, then (equal rows) by length, then by stages: ``compare_paths``."""
    ra, rb = [r for r, _ in a], [r for r, _ in b]
    if ra != rb:
        return -1 if ra < rb else 1
    sa, sb = [s for _, s in a], [s for _, s in b]
    return (sa > sb) - (sa < sb)


@pytest.mark.parametrize("seed", range(20))
def test_compare_completed_is_compare_paths_of_both_paths_with_one_later_event(seed):
    rng = random.Random(seed)
    n_row, n_stage, n_parent = _paths(rng, 40)
    z = (10**6, 7)  # the common later event
    prefixes = 0
    for _ in range(300):
        a, b = rng.randrange(40), rng.randrange(40)
        pa_, pb_ = _events(n_row, n_stage, n_parent, a), _events(n_row, n_stage, n_parent, b)
        assert compare_paths(n_row, n_stage, n_parent, a, b) == _py_compare(pa_, pb_)
        assert compare_completed(n_row, n_stage, n_parent, a, b) == _py_compare(pa_ + [z], pb_ + [z])
        short, long_ = sorted((pa_, pb_), key=len)
        prefixes += a != b and long_[:len(short)] == short  # (compare_completed's shortcut)
    assert prefixes > 0


# ----------------------------------------------------------------------------- the engine
def _pattern(skip, op, drop, within):
    """P2's shape: a big tick, one or more ticks above it, then a tick past the last of them."""
    b_last = last("price", of="b")
    c = {"<": col("price") < drop * b_last, "<=": col("price") <= drop * b_last,
         ">": col("price") > (2 - drop) * b_last, ">=": col("price") >= (2 - drop) * b_last}[op]
    return (cc.Pattern.begin("a").where(col("volume") > 5.0)
            .followed_by("b").where(col("price") > last("price", of="a")).one_or_more()
            .followed_by("c").where(c).within(within).skip(skip))


def _case(pattern, rng, n, keys):
    """A case: prices on a coarse grid (ties between thresholds are common)."""
    events, price = [], {k: 100.0 for k in keys}
    for i in range(n):
        k = rng.choice(keys)
        price[k] = max(1.0, price[k] + rng.choice((-2.0, -1.0, 0.0, 1.0, 1.0, 2.0)))
        events.append({"ts": 10 * i, "name": k, "price": price[k], "volume": float(rng.randrange(10))})
    return {"pattern": _case_pattern(pattern), "events": events}


def _case_pattern(pattern):
    """``pattern`` in the conformance cases' format (its window as ``within_ms``)."""
    d = to_dict(pattern, key="name")
    d["within_ms"] = d.pop("within")
    return d


@pytest.mark.parametrize("skip", [SkipPastLastEvent(), SkipToNext()], ids=["past_last", "to_next"])
@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
@pytest.mark.parametrize("seed", range(6))
def test_engine_equals_reference_with_dominated_runs(skip, op, seed):
    rng = random.Random(seed)
    drop = rng.choice((1.0, 0.99, 0.98))
    case = _case(_pattern(skip, op, drop, rng.choice((200, 600, 5000))), rng, 160, ["x", "y"])
    got, _ = engine_colcep(case, False)
    ref, _ = engine_reference(case, False)
    assert got == ref  # the same matches, emitted in the same order
    for rows in (1, 7):  # and in any batch split
        assert run_table(case, False, batch_rows=rows).equals(run_table(case, False))


def _chain(n):
    """One key: a start, then ``n`` ticks rising above it with a dip (neither b nor c) after
    each, so that every b leaves a run waiting for c with a higher threshold than the last."""
    events = [{"ts": 0, "name": "x", "price": 100.0, "volume": 9.0}]
    for i in range(n):
        events.append({"ts": 20 * i + 10, "name": "x", "price": 110.0 + i, "volume": 0.0})
        events.append({"ts": 20 * i + 20, "name": "x", "price": 100.0, "volume": 0.0})  # not b (not above a)
    return events


@pytest.mark.parametrize("skip,timeouts,dropped", [(SkipPastLastEvent(), False, True),
                                                     (SkipToNext(), False, True),
                                                     (SkipPastLastEvent(), True, False),
                                                     (NoSkip(), False, False)])
def test_dominated_runs_leave_the_state(skip, timeouts, dropped):
    """With a dip below ``a`` after every rising b, each b leaves a run waiting for c
    (price < 0.5 x its b) whose threshold is above all earlier ones: the earlier ones can never
    be emitted. They go where one match per start holds and no timed-out partial match is
    wanted; with timeouts (each could time out on its own) or no skip they all stay."""
    n = 40
    pattern = _pattern(skip, "<", 0.5, 10**6)
    case = {"pattern": _case_pattern(pattern), "events": _chain(n)}
    out = run_table(case, timeouts)
    completed = out.num_rows - (sum(out.column("timed_out").to_pylist()) if timeouts else 0)
    assert completed == 0  # nothing completes: no tick drops to half a b
    m = cc.Matcher(pattern, key="name", time="ts", timeouts=timeouts)
    m.process(case_table(case))
    live = m.live_partial_matches
    if dropped:
        assert live <= 3, live  # the last b's waiting runs (for b again and for c), the newest c-waiter
    else:
        assert live >= n, live
