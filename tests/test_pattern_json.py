"""Patterns as data: Pattern.to_json / Pattern.from_json (colcep.lang.json_format)."""
import datetime as dt
import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep.lang import json_format as pj
from colcep.expr import TRUE
from colcep.pattern import parse_duration
from randcase import cases


def pkey(p: cc.Pattern):
    """A structural key of a pattern (Expr overloads ==, so compare keys)."""
    def stages(pat):
        return tuple((s.name, s.connect, None if s.condition is None else s.condition.key(), s.quantifier,
                      None if s.until is None else s.until.key(), None if s.group is None else stages(s.group),
                      None if s.alternatives is None else tuple(stages(a) for a in s.alternatives))
                     for s in pat.stages)
    w = None if p.window is None else parse_duration(p.window)
    return (stages(p), w if isinstance(w, (int, type(None))) else round(w * 1e9), p.skip_strategy)  # ns


# ----------------------------------------------------------------------------- random patterns
@given(cases())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_conformance_patterns_round_trip(case):
    try:
        p = cc.Pattern.from_json(case["pattern"])
    except cc.PatternError as exc:      # the generator also draws patterns the builder refuses
        assert str(exc).startswith("stages["), str(exc)
        assume(False)
    text = p.to_json()
    q = cc.Pattern.from_json(text)
    assert pkey(q) == pkey(p)
    assert json.loads(q.to_json()) == json.loads(text)            # a fixed point
    back, key = cc.Pattern.read_json(p.to_json(key=case["pattern"]["key"]))
    assert key == case["pattern"]["key"] and pkey(back) == pkey(p)


COLS = ["price", "volume", "name"]


@st.composite
def values(draw, stages, depth=0):
    kind = draw(st.sampled_from(["col", "lit", "agg", "arith"] if depth < 2 else ["col", "lit"]))
    if kind == "col":
        return cc.col(draw(st.sampled_from(COLS)))
    if kind == "lit":
        return cc.lit(draw(st.one_of(st.integers(-5, 5), st.floats(-1e6, 1e6, allow_nan=False),
                                     st.sampled_from(["IBM", "", "a\"b"]), st.none(), st.booleans())))
    if kind == "agg" and stages:
        f = draw(st.sampled_from(["first", "last", "sum", "count", "avg", "min", "max"]))
        of = draw(st.lists(st.sampled_from(stages), min_size=1, max_size=3, unique=True))
        of = of[0] if len(of) == 1 and draw(st.booleans()) else of
        if f == "count":
            return cc.count(of=of, field=draw(st.sampled_from([None, "price"])))
        return getattr(cc, f)(draw(st.sampled_from(COLS)), of=of)
    a, b = draw(values(stages, depth + 1)), draw(values(stages, depth + 1))
    op = draw(st.sampled_from(["+", "-", "*", "/", "quot", "neg"]))
    return -a if op == "neg" else {"+": a + b, "-": a - b, "*": a * b, "/": a / b, "quot": a.quot(b)}[op]


@st.composite
def conditions(draw, stages, depth=0):
    kind = draw(st.sampled_from(["cmp", "cmp", "and", "or", "not", "isin", "isnull", "true"] if depth < 3
                                else ["cmp", "isnull", "true"]))
    if kind == "cmp":
        a, b = draw(values(stages)), draw(values(stages))
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                ">=": a >= b}[draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))]
    if kind in ("and", "or"):
        a, b = draw(conditions(stages, depth + 1)), draw(conditions(stages, depth + 1))
        return (a & b) if kind == "and" else (a | b)
    if kind == "not":
        return ~draw(conditions(stages, depth + 1))
    if kind == "isin":
        return draw(values(stages)).is_in(draw(st.lists(st.one_of(st.integers(0, 9), st.sampled_from(["x", "y"])),
                                                        min_size=1, max_size=3)))
    if kind == "isnull":
        return draw(values(stages)).is_null()
    return TRUE


@st.composite
def alternation(draw, p, i, names):
    """``p`` followed by an any_of of 2-3 short alternatives (names may repeat across them),
    maybe quantified; the alternatives' names are added to ``names``."""
    alts = []
    for j in range(draw(st.integers(2, 3))):
        q = None
        for m in range(draw(st.integers(1, 2))):
            nm = draw(st.sampled_from([f"a{i}_{j}_{m}", f"a{i}_shared{m}"]))
            q = cc.Pattern.begin(nm) if q is None else getattr(q, draw(st.sampled_from(CONNECTS)))(nm)
            q = q.where(draw(conditions(names + [nm])))
        alts.append(q)
    alt = cc.Pattern.any_of(*alts)
    if draw(st.booleans()):  # nested: an alternation as an alternative
        alt = cc.Pattern.any_of(alt, cc.Pattern.begin(f"a{i}_n").where(draw(conditions(names))))
    p = getattr(p, draw(st.sampled_from(CONNECTS)))(alt)
    q = draw(st.sampled_from([None, "one_or_more", "times", "optional"]))
    if q == "one_or_more":
        p = p.one_or_more()
        if draw(st.booleans()):
            p = p.until(draw(conditions(names)))
    elif q == "times":
        p = p.times(draw(st.integers(1, 2)), 3)
    elif q == "optional" and not (len(p.stages) > 1 and p.stages[-2].quantifier.greedy):
        p = p.optional()
    if q in ("one_or_more", "times") and draw(st.booleans()):
        p = p.consecutive()
    names.extend(n for n in p.stage_names() if n not in names)
    return p


CONNECTS = ["next", "followed_by", "followed_by_any"]


@st.composite
def api_patterns(draw):
    """Patterns built with the Python API, beyond the corpus grammar (is_in, is_null, string and
    null literals, multi-stage aggregates, duration windows)."""
    n = draw(st.integers(1, 4))
    p, names = None, []
    for i in range(n):
        name = f"s{i}"
        if p is not None and draw(st.integers(0, 3)) == 0:
            p = draw(alternation(p, i, names))
            continue
        if p is None:
            p = cc.Pattern.begin(name)
        else:
            connect = draw(st.sampled_from(["next", "followed_by", "followed_by_any", "not_next", "not_followed_by"]))
            if connect.startswith("not_") and (p.stages[-1].quantifier.optional or p.stages[-1].is_negation):
                connect = "followed_by"
            p = getattr(p, connect)(name)
        names.append(name)
        p = p.where(draw(conditions(names)))
        if draw(st.booleans()):
            p = p.or_where(draw(conditions(names)))
        if p.stages[-1].is_negation:
            continue
        q = draw(st.sampled_from([None, "one_or_more", "times", "times_or_more"]))
        if q == "one_or_more":
            p = p.one_or_more()
        elif q == "times":
            lo = draw(st.integers(0, 3))
            p = p.times(lo, lo + draw(st.integers(1, 2)))
        elif q == "times_or_more":
            p = p.times_or_more(draw(st.integers(1, 3)))
        if not p.stages[-1].quantifier.optional and draw(st.booleans()) and not (
                len(p.stages) > 1 and p.stages[-2].quantifier.greedy):
            p = p.optional()
        if q is not None:
            inner = draw(st.sampled_from([None, "consecutive", "allow_combinations"]))
            if inner:
                p = getattr(p, inner)()
            if inner != "allow_combinations" and draw(st.booleans()):
                p = p.greedy()
            if q != "times" and draw(st.booleans()):
                p = p.until(draw(conditions(names)))
    w = draw(st.sampled_from([None, 10, "500ms", "1.5s", "5min", dt.timedelta(seconds=3, microseconds=7)]))
    if w is not None:
        p = p.within(w)
    sk = draw(st.sampled_from([cc.NoSkip(), cc.SkipToNext(), cc.SkipPastLastEvent(),
                               cc.SkipToFirst(draw(st.sampled_from(names))), cc.SkipToLast(names[0])]))
    return p.skip(sk)


@given(api_patterns())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_api_patterns_round_trip(p):
    text = p.to_json()
    q = cc.Pattern.from_json(text)
    assert pkey(q) == pkey(p)
    assert q.to_json() == text
    assert pkey(cc.Pattern.from_json(json.loads(text))) == pkey(p)     # dict or text


def test_alternation_round_trip_and_version():
    x = cc.Pattern.begin("x").where(cc.col("price") > 1)
    y = cc.Pattern.begin("y").where(cc.col("price") < 0).followed_by("x").where(cc.col("volume") > 5)
    p = cc.Pattern.begin("a").followed_by(cc.Pattern.any_of(x, y)).times(1, 2).consecutive().next("b").within("1h")
    d = json.loads(p.to_json())
    assert d["version"] == 2
    alt = d["stages"][1]
    assert [[s["name"] for s in a["stages"]] for a in alt["anyOf"]] == [["x"], ["y", "x"]]
    assert alt["anyOf"][1]["stages"][1]["connect"] == "followedBy" and alt["group"] is None
    assert alt["quantifier"] == {"type": "times", "from": 1, "to": 2} and alt["inner"] == "consecutive"
    assert "anyOf" not in d["stages"][0]
    back = cc.Pattern.from_json(d)
    assert pkey(back) == pkey(p) and back.stage_names() == ["a", "x", "y", "b"]
    # a pattern without alternation is still written as version 1, readable by older colcep
    assert json.loads(x.to_json())["version"] == 1 and "anyOf" not in json.loads(x.to_json())["stages"][0]
    # a document can start with an alternation
    top = cc.Pattern.from_json({"version": 2, "stages": [{"name": "any", "anyOf": [{"stages": [{"name": "x"}]},
                                                                                   {"stages": [{"name": "y"}]}]}]})
    assert pkey(top) == pkey(cc.Pattern.any_of(cc.Pattern.begin("x"), cc.Pattern.begin("y")))


def test_group_pattern_round_trip():
    g = cc.Pattern.begin("x").where(cc.col("price") > 1).next("y").where(cc.col("price") < cc.last("price", of="x"))
    p = cc.Pattern.begin("a").followed_by(g).times(2).consecutive().followed_by("b").within("1h")
    d = json.loads(p.to_json())
    assert d["stages"][1]["group"]["stages"][1]["connect"] == "next"
    assert d["stages"][1]["quantifier"] == {"type": "times", "from": 2, "to": 2}
    assert d["within"] == "1h"
    assert pkey(cc.Pattern.from_json(d)) == pkey(p)


# ----------------------------------------------------------------------------- the documented format
def test_documented_example_and_defaults():
    doc = {"version": 1, "key": "name",
           "stages": [{"name": "a", "connect": "begin", "where": {"cmp": [{"field": "volume"}, ">", {"const": 1000}]}},
                      {"name": "rise", "connect": "followedBy", "quantifier": {"type": "oneOrMore"},
                       "where": {"cmp": [{"field": "price"}, ">",
                                         {"agg": "avg", "stage": ["a", "rise"], "field": "price"}]}},
                      {"name": "drop", "connect": "followedBy",
                       "where": {"cmp": [{"field": "volume"}, "<",
                                         {"arith": "*", "args": [{"const": 0.8},
                                                                 {"agg": "last", "stage": "rise", "field": "volume"}]}]}}],
           "within": "30s", "skip": {"type": "skipPastLastEvent"}}
    p, key = cc.Pattern.read_json(json.dumps(doc))
    want = (cc.Pattern.begin("a").where(cc.col("volume") > 1000)
            .followed_by("rise").where(cc.col("price") > cc.avg("price", of=["a", "rise"])).one_or_more()
            .followed_by("drop").where(cc.col("volume") < 0.8 * cc.last("volume", of="rise"))
            .within("30s").skip(cc.SkipPastLastEvent()))
    assert key == "name"
    assert pkey(p) == pkey(want)
    assert p.to_json(key="name") == want.to_json(key="name")


def test_within_ms_is_the_corpus_integer_window():
    p = cc.Pattern.from_json({"stages": [{"name": "a", "connect": "begin"}], "within_ms": 250})
    assert p.window == 250
    assert json.loads(p.to_json())["within"] == 250
    with pytest.raises(pj.PatternJSONError, match=r"^within_ms: give either"):
        cc.Pattern.from_json({"stages": [{"name": "a"}], "within_ms": 250, "within": "1s"})


def test_corpus_patterns_load_as_they_are(corpus_dir):
    from conformance import load_cases
    cases = load_cases([corpus_dir])
    assert len(cases) == 825
    for c in cases:
        p = cc.Pattern.from_json(c["pattern"])
        assert pkey(cc.Pattern.from_json(p.to_json())) == pkey(p)


def test_matches_agree_with_the_builder():
    from colcep.tools.ticks import make_ticks
    ticks = make_ticks(3000, symbols=5, seed=3)
    p = (cc.Pattern.begin("a").where(cc.col("volume") > 1000)
         .followed_by("b").where((cc.col("price") > cc.last("price", of="a")) & ~cc.col("volume").is_null())
         .one_or_more().consecutive().followed_by("c").where(cc.col("price") < cc.avg("price", of="b"))
         .within("5s").skip(cc.SkipToNext()))
    a = cc.match(ticks, p, key="name", time="ts", columns=[])
    b = cc.match(ticks, cc.Pattern.from_json(p.to_json()), key="name", time="ts", columns=[])
    assert a.num_rows > 0 and a.equals(b)


# ----------------------------------------------------------------------------- errors name the path
BASE = [{"name": "a", "connect": "begin"}, {"name": "b", "connect": "next"}]
ALT = {"name": "g", "connect": "next", "anyOf": [{"stages": [{"name": "x"}]}, {"stages": [{"name": "y"}]}]}


@pytest.mark.parametrize("doc, path, message", [
    ({"stages": BASE + [{"name": "c", "connect": "next", "where": {"cmp": [{"field": "x"}, "=<", {"const": 1}]}}]},
     "stages[2].where.cmp[1]", "unknown comparison"),
    ({"stages": BASE + [{"name": "c", "connect": "next",
                         "where": {"and": [{"true": True}, {"cmp": [{"fld": "x"}, "<", {"const": 1}]}]}}]},
     "stages[2].where.and[1].cmp[0]", "expected exactly one of"),
    ({"stages": [{"name": "a", "connect": "begin", "wher": None}]}, "stages[0].wher", "unknown field"),
    ({"stages": BASE, "skip": {"type": "skipToLast"}}, "skip.stage", "needs a stage name"),
    ({"stages": BASE, "skip": {"type": "skipPast"}}, "skip.type", "unknown skip strategy"),
    ({"stages": [{"name": "a", "connect": "next"}]}, "stages[0].connect", "first stage"),
    ({"stages": [BASE[0], {"name": "b", "connect": "followedBy", "quantifier": {"type": "times", "from": "2"}}]},
     "stages[1].quantifier.from", "expected an integer"),
    ({"stages": [BASE[0], {"name": "b", "connect": "followedBy", "quantifier": {"type": "times", "from": 0, "to": 0}}]},
     "stages[1].quantifier", "times(lo, hi)"),
    ({"stages": [BASE[0], {"name": "b", "connect": "followedBy", "greedy": True}]},
     "stages[1].greedy", "not applicable to a single-event stage"),
    ({"stages": [BASE[0], {"name": "b", "connect": "followedBy", "where": {"agg": "median", "stage": "a", "field": "p"}}]},
     "stages[1].where.agg", "unknown aggregate"),
    ({"stages": [BASE[0], {"name": "b", "connect": "followedBy", "where": {"agg": "sum", "stage": "a"}}]},
     "stages[1].where.field", "needs a field"),
    ({"stages": [BASE[0], {"name": "b", "connect": "followedBy",
                           "group": {"stages": [{"name": "x"}, {"name": "y", "connect": "nxt"}]}}]},
     "stages[1].group.stages[1].connect", "unknown connect"),
    ({"stages": BASE, "within": "10 parsecs"}, "within", "invalid window"),
    ({"stages": BASE, "version": 4}, "version", "newer"),
    ({"stages": BASE + [ALT]}, "stages[2].anyOf", 'an alternation needs "version": 2'),
    ({"version": 2, "stages": BASE + [dict(ALT, anyOf=[{"stages": [{"name": "x"}]}])]}, "stages[2].anyOf",
     "at least two alternatives"),
    ({"version": 2, "stages": BASE + [dict(ALT, group={"stages": [{"name": "z"}]})]}, "stages[2].anyOf",
     "a group or an alternation, not both"),
    ({"version": 2, "stages": BASE + [dict(ALT, anyOf=[{"stages": [{"name": "x"}]},
                                                       {"stages": [{"name": "y"}, {"name": "z", "connect": "nxt"}]}])]},
     "stages[2].anyOf[1].stages[1].connect", "unknown connect"),
    ({"version": 2, "stages": BASE + [dict(ALT, anyOf=[{"stages": [{"name": "x"}]}, {"stagez": []}])]},
     "stages[2].anyOf[1].stagez", "unknown field"),
    ({"version": 2, "stages": BASE + [dict(ALT, where={"true": True})]}, "stages[2].where",
     "not applicable to a group pattern (alternation stage"),
    ({"stages": []}, "stages", "non-empty list"),
    ({"stages": BASE, "extra": 1}, "extra", "unknown field"),
    ([1, 2], "<document>", "expected an object"),
])
def test_errors_name_the_path(doc, path, message):
    with pytest.raises(pj.PatternJSONError) as ei:
        cc.Pattern.from_json(doc)
    assert str(ei.value).startswith(f"{path}: "), str(ei.value)
    assert message in str(ei.value)
    assert isinstance(ei.value, cc.PatternError)


def test_bad_json_text():
    with pytest.raises(pj.PatternJSONError, match="not valid JSON"):
        cc.Pattern.from_json('{"stages": [')
