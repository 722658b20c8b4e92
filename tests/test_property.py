"""Property tests: random patterns over random streams (hypothesis).

- the Numba engine finds exactly what the plain-Python reference (Flink's algorithm with
  Dewey versions, Java's PriorityQueue layout and buffer extraction) finds;
- splitting the input into arbitrary batches never changes the output;
- a keyed stream gives the same matches as running each key's rows on its own;
- the compiled tier (its generated step interpreted, as in ``test_conformance``) finds what the
  reference finds and writes exactly the generic tier's table, in any batch split;
- a runaway case (a Kleene loop under skip till any match combines 2^n runs over n events) fails
  alike: the same CapacityError whole and in any split, keyed and alone, in both tiers.
"""
from collections import Counter

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep.engine import codegen
from colcep.errors import CapacityError
from conformance import (case_pattern, case_table, compiles, engine_colcep, engine_reference, feed, rows_to_matches,
                         run_table)
from randcase import cases, examples

SETTINGS = settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck), database=None)


# a bound on live partial matches low enough that a runaway case fails in milliseconds (the
# random cases have up to 20 events: up to 2^20 runs under skip till any match in a loop)
RUNAWAY = 1 << 12


def _outcome(run):
    """``run()``'s result, or the message of the CapacityError it raised."""
    try:
        return run()
    except CapacityError as e:
        return str(e)


def _same(a, b) -> bool:
    return a == b if isinstance(a, str) or isinstance(b, str) else a.equals(b)


def _canon(matches):
    return Counter(tuple(sorted((k, tuple(v)) for k, v in m.items())) for m in matches)


@SETTINGS
@given(cases(max_events=12), st.booleans())
def test_engine_equals_reference(case, timeouts):
    assume(compiles(case))
    ref, ref_to = engine_reference(case, timeouts)
    got, got_to = engine_colcep(case, timeouts)
    assert _canon(got) == _canon(ref)
    assert _canon([m for m, _ in got_to]) == _canon([m for m, _ in ref_to])
    assert Counter(ts for _, ts in got_to) == Counter(ts for _, ts in ref_to)


def _run_batches(case, sizes, tier="generic"):
    """The output table fed in ``sizes`` slices, or the CapacityError's message."""
    m = cc.Matcher(case_pattern(case), key=case["pattern"]["key"], time="ts", timeouts=True, tier=tier,
                   max_partial_matches=RUNAWAY)
    return _outcome(lambda: feed(m, case_table(case), sizes))


@SETTINGS
@given(cases(max_events=20), st.lists(st.integers(0, 7), min_size=1, max_size=20))
def test_batch_splits_do_not_change_output(case, sizes):
    assume(compiles(case))
    whole = _run_batches(case, [len(case["events"])])
    split = _run_batches(case, sizes)
    assert _same(split, whole)


def _runaway_case(n_events: int) -> dict:
    """Found by the explore profile: ``s1`` one or more with allowCombinations (skip till any
    match inside the loop), no window, then ``s2``: every event doubles the live runs."""
    events = [{"id": i + 1, "name": "a", "price": 1.0, "volume": 1.0, "ts": 0, "grp": i % 2} for i in range(n_events)]
    stages = [{"name": "s1", "connect": "begin", "where": {"true": True}, "quantifier": {"type": "oneOrMore"},
               "optional": False, "greedy": False, "inner": "allowCombinations", "until": None, "group": None},
              {"name": "s2", "connect": "next", "where": {"cmp": [{"field": "name"}, "==", {"const": "a"}]},
               "quantifier": None, "optional": False, "greedy": False, "inner": "relaxed", "until": None,
               "group": None}]
    return {"id": "runaway", "events": events, "expected": [], "expected_timeouts": [],
            "pattern": {"key": None, "stages": stages, "within_ms": None, "skip": {"type": "noSkip"}}}


def test_a_runaway_case_fails_alike_in_every_split(monkeypatch):
    case = _runaway_case(20)
    whole = _run_batches(case, [20])
    assert isinstance(whole, str) and f"max_partial_matches={RUNAWAY}" in whole, whole
    for sizes in ([0], [1] * 20, [3, 5], [12], [19]):
        assert _run_batches(case, sizes) == whole, sizes
    monkeypatch.setattr(codegen, "JIT", False)
    for sizes in ([20], [2, 2]):
        assert _run_batches(case, sizes, "compiled") == whole, sizes
    # under the bound the same shape completes, equal in any split
    small = _runaway_case(8)
    whole = _run_batches(small, [8])
    assert not isinstance(whole, str) and whole.num_rows > 0
    assert _run_batches(small, [1] * 8).equals(whole)


@SETTINGS
@given(cases(max_events=20))
def test_keys_are_independent(case):
    assume(compiles(case))
    case = dict(case, pattern=dict(case["pattern"], key="grp"))
    keyed = _outcome(lambda: engine_colcep(case, False, max_partial_matches=RUNAWAY)[0])
    alone, runaway = [], False
    for g in (0, 1):
        ids = [i for i, e in enumerate(case["events"]) if e["grp"] == g]
        if not ids:
            continue
        sub = dict(case, events=[case["events"][i] for i in ids], pattern=dict(case["pattern"], key=None))
        got = _outcome(lambda: engine_colcep(sub, False, max_partial_matches=RUNAWAY)[0])
        if isinstance(got, str):
            runaway = True
            continue
        alone += [{s: [ids[r] for r in rows] for s, rows in m.items()} for m in got]
    if runaway or isinstance(keyed, str):  # a key over the bound fails keyed as alone
        assert runaway and isinstance(keyed, str), keyed
    else:
        assert _canon(keyed) == _canon(alone)


@settings(SETTINGS, max_examples=examples(200))
@given(cases(max_events=16), st.booleans(), st.lists(st.integers(0, 5), min_size=1, max_size=16))
def test_compiled_tier_equals_reference_and_generic(case, timeouts, sizes):
    """The compiled tier against the generic one and the reference, negation included."""
    assume(compiles(case))
    codegen.JIT, jit = False, codegen.JIT  # (hypothesis: no function-scoped monkeypatch)
    try:
        generic = _outcome(lambda: run_table(case, timeouts, "generic", columns=None, max_partial_matches=RUNAWAY))
        spec = _outcome(lambda: run_table(case, timeouts, "compiled", columns=None, max_partial_matches=RUNAWAY))
        assert _same(spec, generic)
        assert _same(_run_batches(case, sizes, "compiled"), _run_batches(case, sizes))
        if not isinstance(spec, str):  # under the bound: what the reference finds
            got, got_to = rows_to_matches(spec, timeouts)
            ref, ref_to = engine_reference(case, timeouts)
            assert _canon(got) == _canon(ref)
            assert _canon([m for m, _ in got_to]) == _canon([m for m, _ in ref_to])
    finally:
        codegen.JIT = jit
