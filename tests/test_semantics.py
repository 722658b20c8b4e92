"""One test per Flink behaviour of ``shared/conformance/SEMANTICS.md`` (the corpus covers them
too; these spell each rule out on a small stream)."""
import pyarrow as pa

import colcep as cc
from colcep import Pattern, col, sum as agg_sum


def run(pattern, names, ts=None, timeouts=False):
    """Match over events named by ``names`` (ids 0..n-1); returns (matches, timeouts) as
    lists of {stage: [ids]} in emission order."""
    ts = ts if ts is not None else list(range(len(names)))
    tbl = pa.table({"ts": ts, "name": list(names), "price": [float(i) for i in range(len(names))]})
    out = cc.match(tbl, pattern, time="ts", columns=[], timeouts=timeouts)
    d = out.to_pydict()
    res: dict = {}
    for i, mid in enumerate(d["match_id"]):
        bucket = res.setdefault((d["timed_out"][i] if timeouts else False, mid), {})
        bucket.setdefault(d["stage"][i], []).append(d["row"][i])
    got = [v for (to, _), v in res.items() if not to]
    tmo = [v for (to, _), v in res.items() if to]
    return got, tmo


def is_(n):
    return col("name") == n


def test_1_window_edge_is_exclusive_and_timeouts_carry_first_plus_within():
    p = Pattern.begin("a").where(is_("a")).followed_by("b").where(is_("b")).within(5)
    assert run(p, "ab", ts=[0, 5])[0] == []
    assert run(p, "ab", ts=[0, 4])[0] == [{"a": [0], "b": [1]}]
    tbl = pa.table({"ts": [0, 9], "name": ["a", "x"]})
    out = cc.match(tbl, p, time="ts", timeouts=True, columns=[])
    assert out.column("timeout_ts").to_pylist() == [5]


def test_2_not_followed_by_at_the_end_emits_when_the_window_passes():
    p = Pattern.begin("a").where(is_("a")).not_followed_by("b").where(is_("b")).within(5)
    assert run(p, "axxxxxx")[0] == [{"a": [0]}]            # released by a later event
    assert run(p, "ax")[0] == [{"a": [0]}]                 # released by the end of input
    assert run(p, "axb")[0] == []                          # the forbidden event came in time


def test_3_not_next_at_the_end_waits_for_the_next_event():
    p = Pattern.begin("a").where(is_("a")).not_next("b").where(is_("b"))
    assert run(p, "ax")[0] == [{"a": [0]}]
    assert run(p, "ab")[0] == []
    assert run(p, "a")[0] == []                            # no next event: held forever


def test_4_not_followed_by_guards_only_up_to_the_next_stage():
    p = (Pattern.begin("a").where(is_("a")).not_followed_by("n").where(is_("n"))
         .followed_by("b").where(is_("b")).one_or_more().followed_by("c").where(is_("c")))
    got = run(p, "abnbc")[0]
    assert sorted(map(str, got)) == sorted(map(str, [{"a": [0], "b": [1, 3], "c": [4]}, {"a": [0], "b": [1], "c": [4]}]))
    assert run(p, "anbc")[0] == []


def test_5_relaxed_loop_cannot_skip_its_own_matching_event():
    p = Pattern.begin("a").where(is_("a")).one_or_more().followed_by("b").where(is_("b"))
    got = run(p, "aaab")[0]
    assert {"a": [0, 2], "b": [3]} not in got
    assert {"a": [0], "b": [3]} in got and {"a": [0, 1], "b": [3]} in got


def test_6_until_is_checked_on_every_candidate_including_the_first():
    p = (Pattern.begin("s").where(is_("s")).followed_by("a").where(is_("a") | is_("u")).one_or_more()
         .until(is_("u")).followed_by("e").where(is_("e")))
    assert run(p, "suae")[0] == []
    assert run(p, "saue")[0] == [{"s": [0], "a": [1], "e": [3]}]


def test_7_iterative_conditions_see_only_accepted_events():
    p = (Pattern.begin("a").where(is_("a")).followed_by("b")
         .where(col("price") > agg_sum("price", of="b") + 0.5).one_or_more())
    got = run(p, "abb")[0]
    assert {"a": [0], "b": [1, 2]} in got                   # 2.0 > 1.0 + 0.5 (the candidate is not summed)


def test_8_greedy_at_the_end_emits_every_prefix():
    p = Pattern.begin("a").where(is_("a")).next("b").where(is_("b")).times(2, 5).greedy()
    assert len(run(p, "abbbbb")[0]) == 4                    # [a b b], [a b b b], ..., [a b b b b b]


def test_9_skip_past_last_event_discards_overlapping_runs():
    p = (Pattern.begin("a").where(is_("a")).followed_by("b").where(is_("b"))
         .skip(cc.SkipPastLastEvent()))
    assert run(p, "aab")[0] == [{"a": [0], "b": [2]}]
    p2 = p.skip(cc.NoSkip())
    assert len(run(p2, "aab")[0]) == 2


def test_9b_skip_to_first_without_the_stage_behaves_like_no_skip():
    p = (Pattern.begin("a").where(is_("a")).followed_by("o").where(is_("o")).optional()
         .followed_by("b").where(is_("b")).within(100))
    expected = [{"a": [0], "b": [2]}, {"a": [1], "b": [2]}]
    assert run(p.skip(cc.SkipToFirst("o")), "aab")[0] == expected == run(p, "aab")[0]


def test_9c_a_waiting_earlier_run_holds_completed_matches_back():
    """Under a skip strategy a completed match waits while a run that started earlier is alive;
    without a window that run (waiting for 'o') lives for ever, so the second match never comes."""
    p = (Pattern.begin("a").where(is_("a")).followed_by("o").where(is_("o")).optional()
         .followed_by("b").where(is_("b")).skip(cc.SkipToFirst("o")))
    assert run(p, "aab")[0] == [{"a": [0], "b": [2]}]


def test_10_matches_on_the_same_event_come_out_oldest_start_first():
    p = Pattern.begin("a").where(is_("a")).followed_by("b").where(is_("b"))
    assert run(p, "aab")[0] == [{"a": [0], "b": [2]}, {"a": [1], "b": [2]}]


def test_11_equal_timestamps_keep_arrival_order():
    p = Pattern.begin("a").where(is_("a")).next("b").where(is_("b"))
    assert run(p, "ab", ts=[7, 7])[0] == [{"a": [0], "b": [1]}]
    assert run(p, "ba", ts=[7, 7])[0] == []


def test_12_skipped_optional_group_then_next_is_relative_to_the_event_before_the_group():
    grp = Pattern.begin("b").where(is_("b")).next("c").where(is_("c"))
    p = Pattern.begin("a").where(is_("a")).followed_by(grp).optional().next("d").where(is_("d"))
    assert run(p, "ad")[0] == [{"a": [0], "d": [1]}]
    assert run(p, "axd")[0] == []


def test_13_runs_that_matched_can_still_time_out():
    p = Pattern.begin("a").where(is_("a")).followed_by_any("b").where(is_("b")).followed_by_any(
        "c").where(is_("c")).within(10)
    got, tmo = run(p, "abcx", ts=[0, 1, 2, 20], timeouts=True)
    assert got == [{"a": [0], "b": [1], "c": [2]}]
    assert {"a": [0], "b": [1]} in tmo and {"a": [0]} in tmo
