"""Alternation: ``Pattern.any_of`` (a branch state in the NFA), against independent definitions.

- the matches of ``any_of(X, Y)`` at a position of a pattern are the union (as a multiset) of
  the matches of the pattern with ``X`` and with ``Y`` there (as group patterns), under NO_SKIP;
- a looping alternation of single-stage alternatives with strict or any-match contiguity
  matches what one stage with the OR of their conditions matches, each event labelled by the
  alternative whose condition it meets;
- the Numba engine equals the plain-Python reference (Flink's algorithm) on the same program;
- skip strategies and the tie rule on hand-checked streams; batches and snapshots.
"""
import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import Pattern, col, last
from colcep.engine.compiler import compile_pattern

CONNECTS = ["next", "followed_by", "followed_by_any"]


def stream(seed: int, n: int = 36, keys: int = 2) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"ts": np.sort(rng.integers(0, n // 2, n)).astype(np.int64),
                     "k": rng.integers(0, keys, n).astype(np.int64),
                     "name": rng.choice(list("sxyze"), n).tolist(),
                     "price": rng.integers(0, 10, n).astype(np.float64)})


def matches(tbl: pa.Table, p: Pattern, **kw) -> Counter:
    """Each match as a sorted tuple of (stage, row), counted."""
    out = cc.match(tbl, p, key="k", time="ts", columns=[], **kw).to_pydict()
    by: dict = {}
    for mid, stage, row in zip(out["match_id"], out["stage"], out["row"]):
        by.setdefault(mid, []).append((stage, row))
    return Counter(tuple(sorted(v)) for v in by.values())


def is_(n):
    return col("name") == n


X = Pattern.begin("x").where(is_("x"))
Y = Pattern.begin("y").where(is_("y")).followed_by("z").where(is_("z") & (col("price") >= last("price", of="y")))
Y2 = Pattern.begin("y").where(is_("y")).next("z").where(is_("z"))


def around(middle, c1, c2, quant=None, window=None, nots=False) -> Pattern:
    p = Pattern.begin("s").where(is_("s"))
    if nots:
        p = p.not_followed_by("n").where(col("price") > 8)
    p = getattr(p, c1)(middle)
    if quant:
        p = quant(p)
    p = getattr(p, c2)("e").where(is_("e") & (col("price") > last("price", of="s")))
    return p.within(window) if window else p


@pytest.mark.parametrize("c1", CONNECTS)
@pytest.mark.parametrize("c2", CONNECTS)
@pytest.mark.parametrize("window", [None, 12])
@pytest.mark.parametrize("alts", [(X, Y), (X, Y2), (Y, X)])
def test_any_of_is_the_union_of_the_substituted_patterns(c1, c2, window, alts):
    total = 0
    for seed in range(4):
        tbl = stream(seed, n=60)
        got = matches(tbl, around(Pattern.any_of(*alts), c1, c2, window=window))
        want = sum((matches(tbl, around(a, c1, c2, window=window)) for a in alts), Counter())
        assert got == want
        total += sum(got.values())
    assert total > 0 or "next" in (c1, c2)  # the streams do produce matches (strict ones rarely)


@pytest.mark.parametrize("c1", CONNECTS)
@pytest.mark.parametrize("c2", ["next", "followed_by"])
def test_optional_any_of_is_the_union_plus_the_path_without_it(c1, c2):
    def opt(p):
        return p.optional()
    total = 0
    for seed in range(4):
        tbl = stream(seed, n=60)
        got = matches(tbl, around(Pattern.any_of(X, Y), c1, c2, quant=opt))
        skipped = matches(tbl, around(X, c1, c2, quant=opt)) - matches(tbl, around(X, c1, c2))
        assert skipped == matches(tbl, around(Y, c1, c2, quant=opt)) - matches(tbl, around(Y, c1, c2))
        want = matches(tbl, around(X, c1, c2)) + matches(tbl, around(Y, c1, c2)) + skipped
        assert got == want
        total += sum(skipped.values()) * sum(got.values())
    assert total > 0 or "next" in (c1, c2)


@pytest.mark.parametrize("c1", CONNECTS)
def test_not_followed_by_before_an_alternation_guards_every_alternative(c1):
    """The NOT edge a group's first state would get goes to each alternative's first state
    (where runs wait), not to the branch state only."""
    for seed in range(4):
        tbl = stream(seed)
        got = matches(tbl, around(Pattern.any_of(X, Y), c1, "followed_by", nots=True, window=8))
        want = sum((matches(tbl, around(a, c1, "followed_by", nots=True, window=8)) for a in (X, Y)), Counter())
        assert got == want


def test_alternation_inside_an_alternative_and_at_the_head_of_a_group():
    for seed in range(3):
        tbl = stream(seed)
        nested = Pattern.any_of(Pattern.any_of(X, Y2), Pattern.begin("w").where(is_("e")))
        got = matches(tbl, around(nested, "followed_by", "followed_by"))
        want = sum((matches(tbl, around(a, "followed_by", "followed_by")) for a in (X, Y2, nested.stages[0]
                                                                                    .alternatives[1])), Counter())
        assert got == want
        # an alternation heading a group starts as the group does (here: skip till next)
        group = Pattern.begin(Pattern.any_of(X, Y2)).followed_by("t").where(col("price") > 5)
        got = matches(tbl, around(group, "followed_by", "followed_by"))
        want = sum((matches(tbl, around(a.followed_by("t").where(col("price") > 5), "followed_by",
                                        "followed_by")) for a in (X, Y2)), Counter())
        assert got == want


@pytest.mark.parametrize("c2", CONNECTS)
def test_an_alternation_can_begin_a_pattern(c2):
    """At the start, the start run proceeds into every alternative: the start mask (rows where a
    match can begin) is the union of the alternatives' first conditions."""
    e = is_("e") & (col("price") > 2)
    total = 0
    for seed in range(3):
        tbl = stream(seed, n=60)
        got = matches(tbl, getattr(Pattern.any_of(X, Y2), c2)("e").where(e).within(12))
        want = sum((matches(tbl, getattr(a, c2)("e").where(e).within(12)) for a in (X, Y2)), Counter())
        assert got == want
        total += sum(got.values())
    assert total > 0
    prog = cc.compile(Pattern.any_of(X, Y2).followed_by("e").where(e))
    assert prog.start_rule is not None and len(prog.start_rule) == 2     # x's and y's masks


def _relabel(counter: Counter, tbl: pa.Table, stage: str) -> Counter:
    names = tbl.column("name").to_pylist()
    out: Counter = Counter()
    for m, n in counter.items():
        out[tuple(sorted((names[r] if s == stage else s, r) for s, r in m))] += n
    return out


@pytest.mark.parametrize("c1", ["next", "followed_by_any"])
@pytest.mark.parametrize("inner", ["consecutive", "allow_combinations"])
@pytest.mark.parametrize("quant", [lambda p: p.one_or_more(), lambda p: p.times(2), lambda p: p.times(1, 3),
                                   lambda p: p.times_or_more(2)])
def test_looping_alternation_equals_one_stage_with_the_or_condition(c1, inner, quant):
    """Where nothing is skipped by choice (strict or any-match contiguity), choosing x or y at
    each iteration is taking an event that is x or y."""
    single = Pattern.any_of(Pattern.begin("x").where(is_("x")), Pattern.begin("y").where(is_("y")))
    total = 0
    for seed in range(3):
        tbl = stream(seed)
        got = matches(tbl, around(single, c1, "followed_by", quant=lambda p: getattr(quant(p), inner)(), window=6))
        ors = getattr(Pattern.begin("s").where(is_("s")), c1)("xy").where(is_("x") | is_("y"))
        ors = getattr(quant(ors), inner)().followed_by("e").where(is_("e") & (col("price") > last("price", of="s")))
        assert got == _relabel(matches(tbl, ors.within(6)), tbl, "xy")
        total += sum(got.values())
    assert total > 0


def test_relaxed_loop_of_alternatives_skips_till_the_chosen_alternative():
    """(x|y)+ with skip-till-next between iterations: each iteration chooses an alternative and
    skips to its next event, so an x-iteration passes over y events."""
    p = (Pattern.begin("s").where(is_("s"))
         .followed_by(Pattern.any_of(Pattern.begin("x").where(is_("x")), Pattern.begin("y").where(is_("y"))))
         .one_or_more().followed_by("e").where(is_("e")))
    tbl = pa.table({"ts": list(range(5)), "k": [0] * 5, "name": list("sxyxe"), "price": [0.0] * 5})
    got = matches(tbl, p)
    # the first x is x1 (skip till next x), so no match starts its loop at x3
    loops = [[("x", 1)], [("y", 2)], [("x", 1), ("y", 2)], [("x", 1), ("x", 3)], [("y", 2), ("x", 3)],
             [("x", 1), ("y", 2), ("x", 3)]]
    assert got == Counter(tuple(sorted([("s", 0), ("e", 4)] + m)) for m in loops)


# ----------------------------------------------------------------------------- the reference engine
def _case(p: Pattern, tbl: pa.Table) -> dict:
    d = tbl.to_pydict()
    return _case_doc(p, [{"id": i, "ts": d["ts"][i], "k": d["k"][i], "name": d["name"][i], "price": d["price"][i]}
                         for i in range(tbl.num_rows)])


def _case_doc(p: Pattern, events: list) -> dict:
    doc = json.loads(p.to_json(key="k"))
    if doc.get("within") is not None:
        doc["within_ms"] = doc.pop("within")     # the corpus spelling, which the reference reads
    return {"pattern": doc, "events": events}


@pytest.mark.parametrize("p", [
    around(Pattern.any_of(X, Y), "followed_by", "next", window=6),
    around(Pattern.any_of(X, Y2), "followed_by_any", "followed_by", quant=lambda p: p.one_or_more(), window=6),
    around(Pattern.any_of(X, Y), "next", "followed_by", quant=lambda p: p.times(1, 2).consecutive(), window=6),
    around(Pattern.any_of(X, Y), "followed_by", "followed_by", quant=lambda p: p.optional(), nots=True, window=6),
])
def test_engine_equals_the_reference_on_branching_programs(p):
    from conformance import engine_colcep, engine_reference
    for seed in range(3):
        case = _case(p, stream(seed))
        for timeouts in (False, True):
            ref, ref_to = engine_reference(case, timeouts)
            got, got_to = engine_colcep(case, timeouts)
            canon = lambda ms: Counter(tuple(sorted((k, tuple(v)) for k, v in m.items())) for m in ms)  # noqa: E731
            assert canon(got) == canon(ref)
            assert canon(m for m, _ in got_to) == canon(m for m, _ in ref_to)


# ----------------------------------------------------------------------------- skip strategies, ties
def run(p: Pattern, names: str) -> list[dict]:
    """Matches in emission order as {stage: [rows]}."""
    tbl = pa.table({"ts": list(range(len(names))), "name": list(names)})
    d = cc.match(tbl, p, time="ts", columns=[]).to_pydict()
    res: dict = {}
    for mid, s, r in zip(d["match_id"], d["stage"], d["row"]):
        res.setdefault(mid, {}).setdefault(s, []).append(r)
    return list(res.values())


AB = Pattern.begin("a").where(is_("a"))
ABC = Pattern.begin("a").where(is_("a")).next("b").where(is_("b")).next("c").where(is_("c"))
AB2 = Pattern.begin("a").where(is_("a")).next("b").where(is_("b"))


def test_skip_strategies_on_an_alternation():
    p = Pattern.any_of(ABC, AB2)
    assert run(p, "abcab") == [{"a": [0], "b": [1]}, {"a": [0], "b": [1], "c": [2]}, {"a": [3], "b": [4]}]
    # the match completing first wins under SKIP_PAST_LAST_EVENT / SKIP_TO_NEXT (not SQL's
    # left preference): ab ends at row 1 and prunes the abc run of the same start
    assert run(p.skip(cc.SkipPastLastEvent()), "abcab") == [{"a": [0], "b": [1]}, {"a": [3], "b": [4]}]
    assert run(p.skip(cc.SkipToNext()), "abcab") == [{"a": [0], "b": [1]}, {"a": [3], "b": [4]}]
    q = Pattern.any_of(Pattern.begin("x").where(is_("a")).followed_by("y").where(is_("b")),
                       Pattern.begin("u").where(is_("b")).followed_by("v").where(is_("b")))
    assert run(q, "abb") == [{"x": [0], "y": [1]}, {"u": [1], "v": [2]}]
    assert run(q.skip(cc.SkipPastLastEvent()), "abb") == [{"x": [0], "y": [1]}]
    assert run(q.skip(cc.SkipToLast("y")), "abb") == [{"x": [0], "y": [1]}, {"u": [1], "v": [2]}]
    # a SKIP TO stage that the match did not take prunes nothing
    assert run(q.skip(cc.SkipToFirst("u")), "abb") == [{"x": [0], "y": [1]}, {"u": [1], "v": [2]}]


def test_ties_between_alternatives_prefer_the_earlier_stage_order():
    both = Pattern.any_of(Pattern.begin("p").where(is_("a")), Pattern.begin("q").where(is_("a")))
    assert run(both, "a") == [{"p": [0]}, {"q": [0]}]
    assert run(both.skip(cc.SkipPastLastEvent()), "a") == [{"p": [0]}]
    swapped = Pattern.any_of(Pattern.begin("q").where(is_("a")), Pattern.begin("p").where(is_("a")))
    assert run(swapped.skip(cc.SkipToNext()), "aa") == [{"q": [0]}, {"q": [1]}]


def test_a_name_repeated_in_alternatives_is_one_stage():
    ab = Pattern.begin("a").where(is_("a")).next("b").where(is_("b"))
    ba = Pattern.begin("b").where(is_("b")).next("a").where(is_("a"))
    p = Pattern.any_of(ab, ba).followed_by("c").where(is_("c")).skip(cc.SkipToLast("a"))
    assert p.stage_names() == ["a", "b", "c"]
    assert run(p, "abcbac") == [{"a": [0], "b": [1], "c": [2]}, {"b": [3], "a": [4], "c": [5]}]
    # aggregates over a repeated name read whichever alternative matched
    q = Pattern.any_of(ab, ba).next("c").where(col("ts") == last("ts", of="a") + 1)
    assert run(q, "bac") == [{"b": [0], "a": [1], "c": [2]}]


# ----------------------------------------------------------------------------- streaming
def test_one_row_batches_and_snapshots_equal_the_whole_table():
    p = around(Pattern.any_of(X, Y), "followed_by", "followed_by", quant=lambda p: p.times(1, 2), window=6)
    tbl = stream(5, n=60)
    whole = cc.match(tbl, p, key="k", time="ts", columns=[], timeouts=True)
    m = cc.Matcher(p, key="k", time="ts", columns=[], timeouts=True)
    parts = [m.process(tbl.slice(i, 1)) for i in range(tbl.num_rows)] + [m.close()]
    ones = pa.concat_tables(parts)
    assert ones.drop(["match_id"]).equals(whole.drop(["match_id"]))
    m = cc.Matcher(p, key="k", time="ts", columns=[], timeouts=True)
    first = m.process(tbl.slice(0, 25))
    m2 = cc.Matcher.restore(p, m.snapshot())
    rest = pa.concat_tables([m2.process(tbl.slice(25)), m2.close()])
    both = pa.concat_tables([first, rest])
    assert both.drop(["match_id"]).equals(whole.drop(["match_id"])) and whole.num_rows > 0


# ----------------------------------------------------------------------------- the builder's rules
@pytest.mark.parametrize("build, message", [
    (lambda: Pattern.any_of(X), "at least two alternatives"),
    (lambda: Pattern.any_of(X, "y"), "alternative 2: expected a non-empty Pattern"),
    (lambda: Pattern.any_of(X, Pattern.begin("y").optional()), "alternative 2 can match no event"),
    (lambda: Pattern.any_of(X, Y.within("1s")), "own within"),
    (lambda: Pattern.any_of(X, Pattern.begin("y").not_followed_by("n")), "cannot end with a NOT stage"),
    (lambda: Pattern.any_of(X, Pattern.begin("y").next("y")), "duplicate stage name 'y'"),
    (lambda: Pattern.begin("s").next(Pattern.any_of(X, Y)).where(is_("a")), "alternation stage"),
    (lambda: Pattern.begin("s").next(Pattern.any_of(X, Y)).one_or_more().greedy(), "not applicable to a group"),
    (lambda: Pattern.begin("s").not_next(Pattern.any_of(X, Y)), "takes a stage name"),
])
def test_invalid_alternations_raise(build, message):
    with pytest.raises(cc.PatternError, match=message):
        build()


def test_names_repeat_only_across_alternatives():
    with pytest.raises(cc.PatternError, match="duplicate stage name 'x'"):
        cc.compile(Pattern.begin("x").followed_by(Pattern.any_of(X, Y)))
    cc.compile(Pattern.begin("s").followed_by(Pattern.any_of(X, Pattern.begin("x").next("y"))))


def test_branch_state_shape():
    prog = compile_pattern(around(Pattern.any_of(X, Y2), "followed_by", "next"))
    branch = prog.state_names.index("AnyOf")
    edges = range(prog.trans_ptr[branch], prog.trans_ptr[branch + 1])
    assert [prog.trans_action[t] for t in edges] == [cc.engine.compiler.PROCEED] * 2
    heads = [prog.state_names[prog.trans_target[t]] for t in edges]
    assert heads == ["x", "y"] and prog.state_stage[branch] == -1
    e = prog.state_names.index("e")
    into_e = {prog.state_names[s] for s in range(prog.n_states)
              for t in range(prog.trans_ptr[s], prog.trans_ptr[s + 1])
              if prog.trans_target[t] == e and prog.trans_action[t] == cc.engine.compiler.TAKE}
    assert into_e == {"x", "z"}          # the alternatives join at the following state


# ----------------------------------------------------------------------------- random alternations
CONDS = [is_("x"), is_("y"), is_("I"), ~is_("x"), col("price") > 4, col("price") <= 4, col("volume") >= 900,
         col("price") > last("price", of="s"), col("price") >= cc.avg("price", of="s")]


@st.composite
def alt_patterns(draw):
    """Patterns with at least one alternation (2-3 alternatives of 1-2 stages, names repeated
    across alternatives), simple and NOT stages, quantifiers (greedy, until), windows, skips."""
    p = Pattern.begin("s").where(draw(st.sampled_from(CONDS[:7])))
    n = draw(st.integers(1, 3))
    at = draw(st.integers(0, n - 1))
    for i in range(n):
        connect = draw(st.sampled_from(CONNECTS))
        if i == at or draw(st.booleans()):
            alts = []
            for j in range(draw(st.integers(2, 3))):
                q = None
                for m in range(draw(st.integers(1, 2))):
                    nm = draw(st.sampled_from([f"a{i}_{j}_{m}", f"a{i}_{m}"]))
                    q = Pattern.begin(nm) if q is None else getattr(q, draw(st.sampled_from(CONNECTS)))(nm)
                    q = q.where(draw(st.sampled_from(CONDS)))
                alts.append(q)
            p = getattr(p, connect)(Pattern.any_of(*alts))
            quant = draw(st.sampled_from([None, "one_or_more", "times", "optional"]))
        else:
            if draw(st.integers(0, 4)) == 0 and not p.stages[-1].quantifier.optional and i < n - 1:
                connect = draw(st.sampled_from(["not_next", "not_followed_by"]))
            p = getattr(p, connect)(f"b{i}").where(draw(st.sampled_from(CONDS)))
            quant = None if p.stages[-1].is_negation else draw(st.sampled_from([None, "one_or_more", "optional"]))
        if quant == "one_or_more":
            p = p.one_or_more()
            if draw(st.integers(0, 2)) == 0:
                p = p.until(draw(st.sampled_from(CONDS[:7])))
            elif not p.stages[-1].is_group and draw(st.booleans()):
                p = p.greedy()
        elif quant == "times":
            p = p.times(1, 2)
        elif quant == "optional" and not (len(p.stages) > 1 and p.stages[-2].quantifier.greedy):
            p = p.optional()
        if quant in ("one_or_more", "times") and draw(st.booleans()):
            p = getattr(p, draw(st.sampled_from(["consecutive"] + ([] if p.stages[-1].quantifier.greedy
                                                                  else ["allow_combinations"]))))()
    if p.stages[-1].is_negation or draw(st.booleans()):
        p = p.within(draw(st.integers(2, 8)))
    names = p.stage_names()
    return p.skip(draw(st.sampled_from([cc.NoSkip(), cc.SkipToNext(), cc.SkipPastLastEvent(),
                                        cc.SkipToFirst(draw(st.sampled_from(names))),
                                        cc.SkipToLast(draw(st.sampled_from(names)))])))


@given(alt_patterns(), st.lists(st.tuples(st.integers(0, 2), st.sampled_from("sxyI"), st.integers(0, 9),
                                          st.integers(0, 1)), min_size=1, max_size=10))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_random_alternations_engine_equals_reference(p, rows):
    """The Numba engine finds what the plain-Python reference (Flink's algorithm) finds on the
    same branching program, matches and timeouts, over random streams."""
    from conformance import engine_colcep, engine_reference
    try:
        compile_pattern(p)
    except cc.PatternError:
        assume(False)
    ts = np.cumsum([r[0] for r in rows]).tolist()
    events = [{"id": i, "ts": t, "name": nm, "price": float(pr), "volume": float(pr * 150), "k": k}
              for i, (t, (_, nm, pr, k)) in enumerate(zip(ts, rows))]
    case = _case_doc(p, events)
    for timeouts in (False, True):
        got, got_to = engine_colcep(case, timeouts)
        ref, ref_to = engine_reference(case, timeouts)
        canon = lambda ms: Counter(tuple(sorted((k, tuple(v)) for k, v in m.items())) for m in ms)  # noqa: E731
        assert canon(got) == canon(ref)
        assert canon(m for m, _ in got_to) == canon(m for m, _ in ref_to)
