"""Random pattern cases in the conformance format, for property tests (hypothesis)."""
import os

from hypothesis import strategies as st

EXPLORE = os.environ.get("COLCEP_HYPOTHESIS") == "explore"


def examples(n: int) -> int:
    """``n`` examples per property test, ten times as many when exploring (see conftest)."""
    return n * 10 if EXPLORE else n

NAMES = ["a", "b", "c", "d"]
CONNECTS = ["next", "followedBy", "followedByAny", "notNext", "notFollowedBy"]


@st.composite
def conditions(draw, prev_stages):
    kind = draw(st.sampled_from(["name", "name", "price", "volume", "agg", "and", "true"]))
    if kind == "true":
        return {"true": True}
    if kind == "name":
        return {"cmp": [{"field": "name"}, draw(st.sampled_from(["==", "!="])), {"const": draw(st.sampled_from(NAMES))}]}
    if kind in ("price", "volume"):
        return {"cmp": [{"field": kind}, draw(st.sampled_from(["<", "<=", ">", ">="])),
                        {"const": float(draw(st.integers(1, 9)))}]}
    if kind == "agg" and prev_stages:
        agg = draw(st.sampled_from(["sum", "avg", "count", "min", "max", "first", "last"]))
        rhs = {"agg": agg, "stage": draw(st.sampled_from(prev_stages)), "field": "price"}
        if agg in ("sum", "count"):
            rhs = {"arith": "/", "args": [rhs, {"const": 2.0}]}
        return {"cmp": [{"field": "price"}, draw(st.sampled_from([">", "<", ">="])), rhs]}
    return {"and": [draw(conditions(prev_stages)), draw(conditions(prev_stages))]}


@st.composite
def stage(draw, name, connect, prev_stages, allow_group=True):
    negated = connect in ("notNext", "notFollowedBy")
    s = {"name": name, "connect": connect, "where": draw(conditions(prev_stages + [name])),
         "quantifier": None, "optional": False, "greedy": False, "inner": "relaxed", "until": None, "group": None}
    if allow_group and not negated and draw(st.integers(0, 9)) == 0:
        inner = [draw(stage(name + "x", "begin", prev_stages, False)),
                 draw(stage(name + "y", draw(st.sampled_from(["next", "followedBy", "followedByAny"])),
                            prev_stages + [name + "x"], False))]
        s["where"] = None
        s["group"] = {"stages": inner}
    if negated:
        return s
    q = draw(st.sampled_from([None, None, "oneOrMore", "times", "timesOrMore"]))
    if q == "oneOrMore":
        s["quantifier"] = {"type": "oneOrMore"}
    elif q == "times":
        lo = draw(st.integers(1, 3))
        s["quantifier"] = {"type": "times", "from": lo, "to": lo + draw(st.integers(0, 2))}
    elif q == "timesOrMore":
        s["quantifier"] = {"type": "timesOrMore", "from": draw(st.integers(1, 3))}
    s["optional"] = draw(st.booleans()) and draw(st.booleans())
    if q is not None:
        s["inner"] = draw(st.sampled_from(["relaxed", "relaxed", "consecutive", "allowCombinations"]))
        if s["inner"] != "allowCombinations" and s["group"] is None:
            s["greedy"] = draw(st.integers(0, 3)) == 0
        if q in ("oneOrMore", "timesOrMore") and s["group"] is None and draw(st.integers(0, 3)) == 0:
            s["until"] = draw(conditions(prev_stages + [name]))
    return s


@st.composite
def cases(draw, max_events=22, negations=True):
    """Cases of 2-4 stages of every kind (``negations`` False: no ``notNext`` / ``notFollowedBy``)."""
    n_stages = draw(st.integers(2, 4))
    stages = []
    names = []
    for i in range(n_stages):
        name = f"s{i + 1}"
        connect = "begin" if i == 0 else draw(st.sampled_from(CONNECTS if negations else CONNECTS[:3]))
        if i > 0 and connect in ("notNext", "notFollowedBy") and (
                stages[-1]["optional"] or stages[-1]["connect"] in ("notNext", "notFollowedBy")):
            connect = "followedBy"
        stages.append(draw(stage(name, connect, list(names))))
        names += [x["name"] for x in (stages[-1]["group"]["stages"] if stages[-1]["group"] else [stages[-1]])]
    within = draw(st.sampled_from([None, None, 4, 8, 15]))
    if stages[-1]["connect"] == "notFollowedBy" and within is None:
        within = 10
    skip = draw(st.sampled_from(["noSkip", "noSkip", "skipToNext", "skipPastLastEvent", "skipToFirst", "skipToLast"]))
    skipd = {"type": skip}
    if skip in ("skipToFirst", "skipToLast"):
        skipd["stage"] = draw(st.sampled_from(names))
    return _case(draw, stages, within, skipd, max_events)


def _case(draw, stages, within, skipd, max_events):
    """A case of these stages over random events (one or two keys)."""
    n = draw(st.integers(1, max_events))
    ts, events = 0, []
    for i in range(n):
        ts += draw(st.integers(0, 3))
        events.append({"id": i + 1, "name": draw(st.sampled_from(NAMES)), "price": float(draw(st.integers(1, 9))),
                       "volume": float(draw(st.integers(1, 5))), "ts": ts, "grp": draw(st.integers(0, 1))})
    key = draw(st.sampled_from([None, None, "grp"]))
    return {"id": "random", "events": events, "expected": [], "expected_timeouts": [],
            "pattern": {"key": key, "stages": stages, "within_ms": within, "skip": skipd}}


def _with_gaps(case: dict, gap_of) -> dict:
    """``case`` with ``gap_of(stage)`` (None: none) as each stage's window between events (a
    stage's ``gap``; a quantified stage's ``within``, Flink's ``times(n, window)``): version 3."""
    out = {**case, "pattern": {**case["pattern"], "version": 3, "stages": []}}
    for s in case["pattern"]["stages"]:
        s = dict(s)
        w = gap_of(s)
        if w is not None and s["group"] is None:
            if s["quantifier"] is not None:
                s["quantifier"] = {**s["quantifier"], "within": w}
            else:
                s["gap"] = w
        out["pattern"]["stages"].append(s)
    return out


@st.composite
def gap_cases(draw, max_events=14):
    """Random cases with windows between consecutive events on some of their stages: Flink's
    ``within(w, PREVIOUS_AND_CURRENT)`` on single-event stages (the first one's never applies),
    ``times(n, w)`` on quantified ones; each at most the pattern's window (longer is refused)."""
    case = draw(cases(max_events=max_events))
    window = case["pattern"]["within_ms"]
    top = 8 if window is None else window

    def gap_of(s):
        return draw(st.sampled_from([None, None, draw(st.integers(1, top))]))
    return _with_gaps(case, gap_of)


def never_reached(case: dict) -> dict:
    """``case`` with a window between events on every stage that never cuts a run short: the
    pattern's own window (a gap is measured from a later event than the match's first, so it
    passes only after the pattern's window has), or one longer than the stream without one."""
    window = case["pattern"]["within_ms"]
    span = max((e["ts"] for e in case["events"]), default=0) + 1
    return _with_gaps(case, lambda s: span if window is None else window)
