"""The Pattern API and the expression language: every rule Flink's Pattern API or compiler
enforces raises PatternError naming the rule; expressions refuse Python's and/or/in."""
import datetime as dt

import pyarrow as pa
import pytest

import colcep as cc
from colcep import Pattern, col, last
from colcep.engine import compiler
from colcep.engine.compiler import compile_pattern

A = col("name") == "a"


def P(name="a"):
    return Pattern.begin(name).where(A)


@pytest.mark.parametrize("build, rule", [
    (lambda: P().optional().not_next("n"), "optional path to a NOT stage"),
    (lambda: P().optional().not_followed_by("n"), "optional path to a NOT stage"),
    (lambda: P().one_or_more().greedy().followed_by("b").optional(), "cannot be preceded by a greedy"),
    (lambda: P().one_or_more().allow_combinations().greedy(), "allow_combinations"),
    (lambda: P().greedy(), "single-event stage"),
    (lambda: P().not_next("n").one_or_more(), "NOT stage"),
    (lambda: P().not_next("n").optional(), "NOT stage cannot be optional"),
    (lambda: P().not_followed_by("n").times(2), "NOT stage"),
    (lambda: P().one_or_more().times(2), "already applied"),
    (lambda: P().until(A), "only applicable to looping"),
    (lambda: P().times(2).until(A), "only applicable to looping"),
    (lambda: P().one_or_more().until(A).until(A), "only one until"),
    (lambda: P().consecutive(), "only to looping or times"),
    (lambda: P().allow_combinations(), "only to looping or times"),
    (lambda: P().one_or_more().consecutive().allow_combinations(), "either allow_combinations or consecutive"),
    (lambda: P().times(0), "positive number"),
    (lambda: P().times(3, 2), "0 <= lo <= hi"),
    (lambda: P().times_or_more(0), "positive number"),
    (lambda: P().optional().optional(), "already applied"),
    (lambda: P().followed_by(P("x")).greedy(), "group pattern"),
    (lambda: P().followed_by(P("x")).where(A), "group pattern"),
    (lambda: P().within("soon"), "invalid window"),
    (lambda: P().within(0), "positive"),
    (lambda: P().skip("past"), "skip strategy"),
])
def test_builder_rules(build, rule):
    with pytest.raises(cc.PatternError, match=rule):
        build()


@pytest.mark.parametrize("pattern, rule", [
    (P("a").followed_by("a").where(A), "duplicate stage name 'a'"),
    (P("a").followed_by(P("a")), "duplicate stage name 'a'"),
    (P("a").followed_by("b").where(A).not_followed_by("c").where(A), "needs a within"),
    (P("a").skip(cc.SkipToFirst("zz")), "skip strategy names stage 'zz'"),
    (P("a").followed_by("b").where(col("price") > last("price", of="nope")), "unknown stage 'nope'"),
    (Pattern.begin(Pattern.begin("x").where(A).optional().next("y").where(A).optional()).one_or_more()
     .next("z").where(A), "can repeat without taking any event"),
    # the same loop after an optional stage behind a NOT (found by test_property: the compiler's
    # copy of the states past the NOT recursed forever on the loop's PROCEED cycle)
    (P("a").not_followed_by("n").where(A).followed_by("c").where(A).optional()
     .followed_by(Pattern.begin("x").where(A).optional().followed_by("y").where(A).optional()).times_or_more(2)
     .followed_by("e").where(A).within(10), "can repeat without taking any event"),
])
def test_compile_rules(pattern, rule):
    with pytest.raises(cc.PatternError, match=rule):
        compile_pattern(pattern)


def _optional_run_behind_a_not(n: int) -> Pattern:
    p = P("s0").not_followed_by("n").where(A)
    for i in range(1, n):
        p = p.followed_by(f"s{i}").where(col("price") > i % 7).optional()
    return p.followed_by("end").where(A)


def test_runaway_state_count_is_refused(monkeypatch):
    assert len(compile_pattern(_optional_run_behind_a_not(20)).state_names) < 1000
    monkeypatch.setattr(compiler, "MAX_STATES", 1000)  # 60 optional stages behind a NOT need 1,327
    with pytest.raises(cc.PatternError, match=r"more than 1,000 NFA states \(at stage 's\d+'\).*not_followed_by"):
        compile_pattern(_optional_run_behind_a_not(60))


def test_groups_nested_beyond_the_stack_are_refused():
    p = P("x0")
    for i in range(1, 3000):
        p = Pattern.begin(p).followed_by(f"x{i}").where(A)
    with pytest.raises(cc.PatternError, match="nested too deeply"):
        compile_pattern(p)


def test_not_followed_by_at_the_end_with_window_compiles():
    compile_pattern(P().not_followed_by("n").where(A).within(10))


def _a_not_a():
    return Pattern.begin("s1").where(A).not_followed_by("s2").where(A)


B = col("name") == "b"


@pytest.mark.parametrize("pattern", [
    # found by test_property (it used to raise KeyError '$endState$' inside the compiler)
    _a_not_a().next("s3").where(A).times_or_more(1).optional().greedy().until(A),
    # the not_followed_by reaches the loop across an optional stage
    _a_not_a().followed_by("x").where(B).optional().followed_by("s3").where(A).one_or_more().optional().greedy()
    .until(B),
    # inside a group
    P("s0").followed_by(Pattern.begin("g").where(B).not_followed_by("s2").where(A).followed_by("s3").where(A)
                        .one_or_more().optional().greedy().until(B)),
])
def test_optional_greedy_until_loop_behind_not_followed_by_is_refused(pattern):
    """Flink's NFACompiler files the greedy loop's pre-greedy sink copy under the name of the
    NOT-free copy of the sink, then looks it up under the sink's own name: the PROCEED-on-until
    edge gets a null target and Flink fails at run time. colcep refuses the pattern instead."""
    rule = r"stage 's3': an optional greedy loop with an until condition cannot follow a not_followed_by stage \('s2'\)"
    with pytest.raises(cc.PatternError, match=rule):
        compile_pattern(pattern)
    tbl = pa.table({"ts": [0, 1, 2], "name": ["a", "a", "b"]})
    with pytest.raises(cc.PatternError, match=rule):
        cc.match(tbl, pattern, time="ts")


def test_optional_until_loop_behind_not_followed_by_without_greedy_still_runs():
    """The rule above is narrow: without greedy() (or without optional()) the pattern compiles.
    The loop can take nothing (until == its own condition), so each 'a' is a match on its own."""
    from reference import run_reference  # tests/ is on sys.path (conftest)

    compile_pattern(_a_not_a().next("s3").where(A).times_or_more(1).greedy().until(A))
    prog = compile_pattern(_a_not_a().next("s3").where(A).times_or_more(1).optional().until(A))
    events = [{"name": n, "ts": i, "__ts": i} for i, n in enumerate("acaab")]
    matches, _ = run_reference(prog, events, None, 0)
    assert matches == [{"s1": [0]}, {"s1": [2]}, {"s1": [3]}]


def test_builder_is_immutable():
    base = P()
    longer = base.followed_by("b").where(A)
    assert len(base.stages) == 1 and len(longer.stages) == 2
    assert base.where(col("price") > 1).stages[0].condition is not base.stages[0].condition


def test_where_ands_and_or_where_ors():
    p = Pattern.begin("a").where(col("x") > 1).where(col("y") > 2).or_where(col("z") > 3)
    assert p.stages[0].condition.key() == ((col("x") > 1) & (col("y") > 2) | (col("z") > 3)).key()


def test_windows_parse():
    assert P().within("10s").window == "10s"
    assert P().within(dt.timedelta(minutes=1)).window == dt.timedelta(minutes=1)


@pytest.mark.parametrize("misuse", [
    lambda: (col("a") > 1) and (col("b") > 2),
    lambda: bool(col("a") == 1),
    lambda: 1 in col("a"),
])
def test_expressions_have_no_truth_value(misuse):
    with pytest.raises(TypeError, match="& | ~"):
        misuse()


def test_expression_repr_and_columns():
    e = (col("price") > 1.05 * last("price", of="a")) & col("name").is_in(["IBM"])
    assert e.columns() == {"price", "name"}
    assert e.stages() == {"a"}
    assert "last('price', of='a')" in repr(e)


@pytest.mark.parametrize("cond, message", [
    (col("nope") > 1, "stage 'a': unknown column 'nope'"),
    (col("name") > "x", "strings compare only with == and !="),
    (col("price") == "x", "cannot compare a number with a string"),
    (col("name") + 1 > 2, "arithmetic"),
    (col("price") + 1, "must be boolean"),
    (cc.avg("name", of="a") > 1, "needs a numeric column"),
])
def test_type_errors_name_the_stage(cond, message):
    tbl = pa.table({"ts": [1, 2], "name": ["a", "b"], "price": [1.0, 2.0]})
    with pytest.raises(cc.PatternError, match=message):
        cc.match(tbl, Pattern.begin("a").where(cond), time="ts")
