"""Property tests: random patterns over random streams (hypothesis).

- the Numba engine finds exactly what the plain-Python reference (Flink's algorithm with
  Dewey versions, Java's PriorityQueue layout and buffer extraction) finds;
- splitting the input into arbitrary batches never changes the output;
- a keyed stream gives the same matches as running each key's rows on its own;
- the specialised tier (its generated module interpreted, as in ``test_conformance``) finds
  what the reference finds and writes exactly the generic tier's table, in any batch split.
"""
from collections import Counter

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import specialise
from conformance import case_pattern, case_table, compiles, engine_colcep, engine_reference, feed, run_table
from randcase import cases, examples

SETTINGS = settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck), database=None)


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
    m = cc.Matcher(case_pattern(case), key=case["pattern"]["key"], time="ts", timeouts=True, tier=tier)
    return feed(m, case_table(case), sizes)


@SETTINGS
@given(cases(max_events=20), st.lists(st.integers(0, 7), min_size=1, max_size=20))
def test_batch_splits_do_not_change_output(case, sizes):
    assume(compiles(case))
    whole = _run_batches(case, [len(case["events"])])
    split = _run_batches(case, sizes)
    assert split.equals(whole)


@SETTINGS
@given(cases(max_events=20))
def test_keys_are_independent(case):
    assume(compiles(case))
    case = dict(case, pattern=dict(case["pattern"], key="grp"))
    keyed, _ = engine_colcep(case, False)
    alone = []
    for g in (0, 1):
        ids = [i for i, e in enumerate(case["events"]) if e["grp"] == g]
        if not ids:
            continue
        sub = dict(case, events=[case["events"][i] for i in ids], pattern=dict(case["pattern"], key=None))
        got, _ = engine_colcep(sub, False)
        alone += [{s: [ids[r] for r in rows] for s, rows in m.items()} for m in got]
    assert _canon(keyed) == _canon(alone)


@settings(SETTINGS, max_examples=examples(200))
@given(cases(max_events=16), st.booleans(), st.lists(st.integers(0, 5), min_size=1, max_size=16))
def test_specialised_tier_equals_reference_and_generic(case, timeouts, sizes):
    assume(compiles(case))
    specialise.JIT, jit = False, specialise.JIT  # (hypothesis: no function-scoped monkeypatch)
    try:
        got, got_to = engine_colcep(case, timeouts, "specialised")
        ref, ref_to = engine_reference(case, timeouts)
        assert _canon(got) == _canon(ref)
        assert _canon([m for m, _ in got_to]) == _canon([m for m, _ in ref_to])
        generic = run_table(case, timeouts, "generic", columns=None)
        assert run_table(case, timeouts, "specialised", columns=None).equals(generic)
        assert _run_batches(case, sizes, "specialised").equals(_run_batches(case, sizes))
    finally:
        specialise.JIT = jit
