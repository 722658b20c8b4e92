"""Windows between consecutive events (Flink's ``within(t, WithinType.PREVIOUS_AND_CURRENT)`` and
``times(n, window)``): the Pattern API, the document form, where the compiler puts them (Flink's
``windowTimes``: NFACompilerTest), the plain-Python reference on Flink's own tests (the corpus's
``conformance/flink/WithinPreviousAndCurrent.json``, run by test_conformance.py and test_state.py),
what the engine adds: the next deadline, the bound against the pattern's window in time units; and
property tests: random patterns with random windows between events run as the reference runs them,
in any batch split and restored at every boundary, the same in the compiled step as in the generic
kernel, and a window that is never reached changes nothing."""
import warnings
from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col
from colcep.engine.compiler import compile_pattern
from colcep.lang.json_format import PatternJSONError
from colcep.engine import codegen
from conformance import (case_pattern, case_table, engine_colcep, engine_reference, feed, rows_to_matches,
                         snapshot_every_boundary, tiers_agree)
from randcase import examples, gap_cases, never_reached

PC = "previous_and_current"


def windows(p: cc.Pattern) -> dict:
    prog = compile_pattern(p)
    return {n: w for n, w in zip(prog.state_names, prog.state_window) if w is not None}


def test_window_times_are_set_on_the_stages_that_carry_them():
    """NFACompilerTest.testWindowTimesCorrectlySet: {middle: 10 s, then: 20 s}."""
    p = (cc.Pattern.begin("start").followed_by("middle").within("10s", between=PC)
         .followed_by("then").within("20s", between=PC).followed_by("end"))
    assert windows(p) == {"middle": "10s", "then": "20s"}
    assert compile_pattern(p).has_gap_windows
    assert not compile_pattern(cc.Pattern.begin("a").followed_by("b").within("10s")).has_gap_windows


def test_a_window_on_the_first_stage_is_kept_where_flink_keeps_it():
    # (the start state never times out: the window has no effect, as in Flink)
    assert windows(cc.Pattern.begin("a").within(5, between=PC).followed_by("b")) == {"a": 5}


def test_a_window_between_events_longer_than_the_patterns_is_refused():
    """NFACompilerTest.testCheckPatternWindowTimes."""
    p = (cc.Pattern.begin("start").followed_by("middle").within("3s", between=PC)
         .followed_by("then").within("1s", between=PC).followed_by("end").within("2ms"))
    with pytest.raises(cc.PatternError, match="stage 'then' .* longer than the pattern's window"):
        compile_pattern(p)
    ok = cc.Pattern.begin("a").followed_by("b").within(10, between=PC).within(10)  # equal is allowed
    assert windows(ok) == {"b": 10}


@pytest.mark.parametrize("quantify, want", [
    (lambda p: p.times(3, within=7), {"b:0": 7, "b:1": 7}),  # not the state of the last repetition ("b")
    (lambda p: p.times(2, 4, within=7), {"b:1": 7, "b:3": 7, "b:4": 7}),  # nor the ignore states b:0, b:2
    (lambda p: p.one_or_more(within=7), {"b:1": 7}),  # only the entry: not the loop, nor its ignore state
    (lambda p: p.times_or_more(2, within=7), {"b:1": 7, "b:2": 7}),
    (lambda p: p.times(0, 2, within=7), {"b:1": 7}),
])
def test_times_windows_go_on_the_internal_states_of_the_stage(quantify, want):
    assert windows(quantify(cc.Pattern.begin("a").followed_by("b"))) == want


def test_a_previous_and_current_window_on_a_quantified_stage_has_no_effect_and_says_so():
    """NFAITCase.testLoopClearingWithinPreviousAndCurrent relies on it: times(4) with
    within(3 ms, PREVIOUS_AND_CURRENT) keeps every event."""
    p = cc.Pattern.begin("start").where(col("name") == "a").times(4).within(3, between=PC)
    with pytest.warns(cc.ColcepWarning, match="quantified stage.*'start'.*no effect"):
        assert windows(p) == {}


def test_not_followed_by_at_the_end_takes_a_window_between_events():
    p = cc.Pattern.begin("a").not_followed_by("b").where(col("name") == "b").within(3, between=PC)
    prog = compile_pattern(p)
    assert [prog.state_names[s] for s, w in enumerate(prog.state_window) if w == 3] == ["b"]
    with pytest.raises(cc.PatternError, match="needs a within\\(\\) window"):
        compile_pattern(cc.Pattern.begin("a").not_followed_by("b"))


@pytest.mark.parametrize("bad, message", [
    (lambda p: p.within("10s", between="first_and_next"), r"between=\) takes .first_and_last. or"),
    (lambda p: p.within("ten", between=PC), "invalid window"),
    (lambda p: p.within(0, between=PC), "must be positive"),
    (lambda p: p.times(3, within=-1), "must be positive"),
    (lambda p: p.one_or_more(within="soon"), "invalid window"),
])
def test_bad_windows_are_errors(bad, message):
    with pytest.raises(cc.PatternError, match=message):
        bad(cc.Pattern.begin("a").followed_by("b"))


def test_document_form_round_trips_and_needs_version_3():
    p = (cc.Pattern.begin("a").followed_by("b").where(col("price") > 1).within("9ms", between=PC)
         .followed_by("c").times(2, 3, within=5).followed_by("d").one_or_more(within="1s")
         .followed_by("e").times_or_more(2, within=4).within("10s"))
    doc = p.to_json()
    assert '"version": 3' in doc and '"gap": "9ms"' in doc
    back = cc.Pattern.from_json(doc)
    assert repr(back) == repr(p) == repr(eval(repr(p), {"Pattern": cc.Pattern, "col": col}))  # noqa: S307
    assert windows(back) == windows(p)
    old = doc.replace('"version": 3', '"version": 1')
    with pytest.raises(PatternJSONError, match=r"stages\[1\]\.gap: .*needs \"version\": 3"):
        cc.Pattern.from_json(old)
    plain = cc.Pattern.begin("a").followed_by("b").times(2).within("10s").to_json()
    assert '"version": 1' in plain and "gap" not in plain and '"within": "10s"' in plain


def _events(*rows):
    import pyarrow as pa

    return pa.table({"name": [r[0] for r in rows], "ts": pa.array([r[1] for r in rows], pa.int64())})


def test_the_next_deadline_is_the_nearest_window_of_a_live_run():
    """A run waiting in a windowed state times out ``gap`` after its last taken event: a stream's
    next deadline (``Matcher.next_deadline``) says when, with or without the pattern's window."""
    p = (cc.Pattern.begin("a").where(col("name") == "a").followed_by("b").where(col("name") == "b")
         .within(5, between=PC))
    m = cc.Matcher(p, time="ts", timeouts=True)
    assert m.process(_events(("a", 1), ("x", 2))).num_rows == 0
    assert m.next_deadline == 6  # a@1 + 5
    m.process(_events(("a", 3)))
    assert m.next_deadline == 6  # still the first run's
    out = m.process(_events(("x", 6)))  # time 6: the first run times out at 1 + 5, the second lives
    assert out.column("timed_out").to_pylist() == [True] and out.column("timeout_ts").to_pylist() == [6]
    assert m.next_deadline == 8
    q = (cc.Pattern.begin("a").where(col("name") == "a").followed_by("b").where(col("name") == "b")
         .followed_by("c").where(col("name") == "c").within(5, between=PC).within(8))
    w = cc.Matcher(q, time="ts")
    w.process(_events(("a", 1), ("b", 6)))
    assert w.next_deadline == 9  # the pattern's window (1 + 8) is nearer than c's (6 + 5)


def test_a_window_between_events_longer_than_the_patterns_is_refused_in_time_units():
    p = cc.Pattern.begin("a").followed_by("b").within("2s", between=PC).within(1500)  # (1500 ms)
    with pytest.raises(cc.PatternError, match="longer than the pattern's window"):
        cc.Matcher(p, time="ts").process(_events(("a", 1)))
    huge = cc.Pattern.begin("a").followed_by("b").within(2**62, between=PC)  # (int64 extremes: ns)
    with pytest.raises(cc.PatternError, match="beyond the int64 range of the time column"):
        cc.Matcher(huge.within("300000d", between=PC), time="ts", time_unit="ns").process(_events(("a", 1)))
    assert cc.Matcher(huge, time="ts", time_unit="ns").process(_events(("a", 1))).num_rows == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cc.ColcepWarning)  # (an ignored window: a quantified stage's)
        assert cc.compile(cc.Pattern.begin("a").followed_by("b").times(2).within(9, between=PC))


# ----------------------------------------------------------------------------- properties
PROPERTY = settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck),
                    database=None)


def _compiles(case) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cc.ColcepWarning)  # (a window on a quantified stage is ignored)
        try:
            cc.compile(case_pattern(case))
            return True
        except cc.PatternError:
            return False


def _canon(matches):
    return Counter(tuple(sorted((k, tuple(v)) for k, v in m.items())) for m in matches)


def _quiet(run):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cc.ColcepWarning)
        return run()


def _has_gap(case) -> bool:
    return any("gap" in s or (s["quantifier"] or {}).get("within") for s in case["pattern"]["stages"])


@PROPERTY
@given(gap_cases(max_events=12), st.booleans())
def test_windows_between_events_run_as_the_reference_runs_them(case, timeouts):
    assume(_has_gap(case) and _compiles(case))
    ref, ref_to = _quiet(lambda: engine_reference(case, timeouts))
    got, got_to = _quiet(lambda: engine_colcep(case, timeouts))
    assert _canon(got) == _canon(ref)
    assert Counter((tuple(sorted((k, tuple(v)) for k, v in m.items())), ts) for m, ts in got_to) == \
        Counter((tuple(sorted((k, tuple(v)) for k, v in m.items())), ts) for m, ts in ref_to)


def _fed(case, sizes):
    m = cc.Matcher(case_pattern(case), key=case["pattern"]["key"], time="ts", timeouts=True, columns=None)
    return feed(m, case_table(case), sizes)


@PROPERTY
@given(gap_cases(max_events=14), st.lists(st.integers(0, 5), min_size=1, max_size=14))
def test_windows_between_events_in_any_batch_split_and_restored_at_every_boundary(case, sizes):
    assume(_has_gap(case) and _compiles(case))
    whole = _quiet(lambda: _fed(case, [len(case["events"])]))
    assert _quiet(lambda: _fed(case, sizes)).equals(whole)
    expected, restored = _quiet(lambda: snapshot_every_boundary(case, True))
    assert expected.equals(whole) and restored.equals(whole)


@PROPERTY
@given(gap_cases(max_events=14), st.booleans())
def test_windows_between_events_through_the_compiled_step(case, timeouts):
    """The generated step (run as Python: ``codegen.JIT`` False) keeps a run's last taken time as
    the generic kernel does: the same tables and live partial matches in every split, restored."""
    assume(_has_gap(case) and _compiles(case))
    codegen.JIT, jit = False, codegen.JIT  # (hypothesis: no function-scoped monkeypatch)
    try:
        _quiet(lambda: tiers_agree(case, timeouts, sizes=(None, 1, 3)))
    finally:
        codegen.JIT = jit


@PROPERTY
@given(gap_cases(max_events=14))
def test_a_window_between_events_that_is_never_reached_changes_nothing(case):
    """Metamorphic: a window between events as long as the pattern's (a gap starts at a later
    event than the match, so it passes after the pattern's window) finds the same matches and times
    out the same partial matches; one longer than the stream without a pattern's window finds the
    same matches and times out only at the end of the stream (``close``, Flink's final watermark)."""
    plain = {**case, "pattern": {**case["pattern"], "stages": [
        {k: v for k, v in s.items() if k != "gap"} | {"quantifier": s["quantifier"] and
                                                      {k: v for k, v in s["quantifier"].items() if k != "within"}}
        for s in case["pattern"]["stages"]]}}
    assume(_compiles(plain))
    bounded = never_reached(plain)
    assume(_compiles(bounded))
    want, got = (rows_to_matches(_quiet(lambda c=c: _fed(c, [len(c["events"])])), True) for c in (plain, bounded))
    assert got[0] == want[0]  # the same matches, in the same order
    if case["pattern"]["within_ms"] is None:  # nothing times out until the end of the stream (close)
        assert want[1] == [] and all(ts >= max(e["ts"] for e in case["events"]) + 1 for _, ts in got[1])
    else:  # the same runs time out at the same events; a gap's timed-out match carries its own deadline
        assert _canon([m for m, _ in got[1]]) == _canon([m for m, _ in want[1]])
