"""Patterns as data: a JSON codec for :class:`~colcep.pattern.Pattern`.

The document is the ``pattern`` object of the conformance case format
(``conformance/SCHEMA.md``, Flink's vocabulary), versioned and extended to everything a
colcep Pattern can hold, so every conformance case's pattern loads as it is::

    {
      "version": 2,                       // optional; absent = 1 (the conformance corpus);
                                          // 2 adds "anyOf" (alternation), 3 "gap" and a
                                          // quantifier's "within" (windows between events)
      "key": "name",                      // optional, not part of the Pattern: the partition key
                                          // a caller should match with (load() returns it)
      "stages": [STAGE, ...],             // at least one
      "within": "30s",                    // optional: a duration string ("500ms", "10s", "5min", "1h")
                                          // or an integer in the time column's unit
      "within_ms": 30000,                 // the corpus's spelling: an integer window, taken as is
                                          // (an integer window is in the time column's unit, which
                                          // is milliseconds in the corpus); use one of the two
      "skip": {"type": "noSkip"}          // noSkip | skipToNext | skipPastLastEvent
                                          // | skipToFirst | skipToLast (these two add "stage")
    }
    STAGE = {
      "name": "a",                        // ignored for a group or anyOf stage (colcep names them)
      "connect": "begin",                 // begin (first stage only) | next | followedBy
                                          // | followedByAny | notNext | notFollowedBy
      "where": COND | null,               // null: always true
      "quantifier": null | {"type": "oneOrMore"} | {"type": "times", "from": 2, "to": 4}
                  | {"type": "timesOrMore", "from": 2},
                                          // version 3: any of them with "within": a duration string
                                          // or an integer in the time column's unit (Flink's
                                          // times(n, window): Pattern.times(..., within=))
      "gap": "10s",                       // version 3, optional: Flink's within(w, PREVIOUS_AND_CURRENT)
                                          // on this stage (Pattern.within(w, between="previous_and_current"))
      "optional": false, "greedy": false,
      "inner": "relaxed",                 // relaxed | consecutive | allowCombinations
      "until": COND | null,
      "group": null | {"stages": [STAGE, ...]},
      "anyOf": [{"stages": [STAGE, ...]}, ...]   // version 2, optional: an alternation stage
                                          // (Pattern.any_of), two or more alternatives; a stage
                                          // has "group" or "anyOf", not both
    }
    COND / EXPR (any node may stand where a value or a condition is expected):
      {"true": true}
      {"cmp": [EXPR, "<", EXPR]}          // == != < <= > >=
      {"and": [COND, COND, ...]}  {"or": [COND, ...]}  {"not": COND}
      {"isin": [EXPR, [v, ...]]}          // v: number or string
      {"isnull": EXPR}
      {"field": "price"}                  // the current event's column
      {"const": 5.0}                      // number, string, bool or null
      {"agg": "avg", "stage": "a" | ["a", "b"], "field": "price"}
                                          // first | last | sum | count | avg | min | max over
                                          // the events already in the stage(s); count's field is optional
      {"agg": "sum", "stage": "b", "value": EXPR}
                                          // the same over an expression of the event's columns
                                          // (sum(col("price") * col("volume"), of="b")); "field" or "value"
      {"prev": "price" | EXPR, "k": 1}    // the key's k-th previous event's value (k optional, 1)
      {"rolling": "mean", "value": "price" | EXPR, "rows": 20, "within": "1min",
       "include_current": false}          // sum | mean | min | max | count over the key's preceding
                                          // events: "rows" and/or "within" (a duration string or an
                                          // integer in the time column's unit); include_current optional
      {"arith": "+", "args": [EXPR, EXPR]}  // + - * / quot (division truncated toward zero)

Stage fields other than ``name`` and ``connect`` may be left out (their defaults above).
Unknown fields are errors. Every error is a :class:`PatternJSONError` whose message
starts with the path of the bad field, e.g. ``stages[2].where.cmp[1]: ...``; the Pattern
builder's own rules (``PatternError``) are reported at the stage they concern.

``Pattern.to_json()`` writes version 1 with every stage field present, version 2 (with
``anyOf`` on its alternation stages only) when the pattern has an alternation, or version 3
(``gap`` and a quantifier's ``within`` where they are set) when it has a window between events,
so documents without them still read in colcep versions that know version 1 only; ``Pattern.from_json``
reads it back to an equal pattern (``within`` as a timedelta is written as microseconds).
"""
from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from colcep.errors import PatternError
from colcep.expr import AGG_FUNCS, ARITH_OPS, CMP_OPS, ROLL_FUNCS, TRUE, Expr, lit, prev, rolling
from colcep.expr import _agg as _make_agg
from colcep.stages import (ALLOW_COMBINATIONS, BEGIN, CONSECUTIVE, FOLLOWED_BY, FOLLOWED_BY_ANY, NEXT,
                           NOT_FOLLOWED_BY, NOT_NEXT, RELAXED, Stage)

Pattern = Any  # a colcep.Pattern (this module builds them with the class it is given, and imports none)
from colcep.skip import AfterMatchSkipStrategy, NoSkip, SkipPastLastEvent, SkipToFirst, SkipToLast, SkipToNext

VERSION = 3  # the newest version read: 2 written for a pattern with an alternation, 3 with a gap window

_CONNECT_IN = {"begin": BEGIN, "next": NEXT, "followedBy": FOLLOWED_BY, "followedByAny": FOLLOWED_BY_ANY,
               "notNext": NOT_NEXT, "notFollowedBy": NOT_FOLLOWED_BY}
_CONNECT_OUT = {v: k for k, v in _CONNECT_IN.items()}
_INNER_IN = {"relaxed": RELAXED, "consecutive": CONSECUTIVE, "allowCombinations": ALLOW_COMBINATIONS}
_INNER_OUT = {v: k for k, v in _INNER_IN.items()}
_SKIP_OUT = {NoSkip: "noSkip", SkipToNext: "skipToNext", SkipPastLastEvent: "skipPastLastEvent",
             SkipToFirst: "skipToFirst", SkipToLast: "skipToLast"}
_SKIP_IN = {v: k for k, v in _SKIP_OUT.items()}
_TOP_FIELDS = {"version", "key", "stages", "within", "within_ms", "skip"}
_STAGE_FIELDS = {"name", "connect", "where", "quantifier", "optional", "greedy", "inner", "until", "group", "anyOf",
                 "gap"}


class PatternJSONError(PatternError):
    """A pattern document that cannot be read; ``path`` names the bad field."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path or '<document>'}: {message}")


# ============================================================================ writing
def to_dict(pattern: Pattern, key: str | None = None) -> dict:
    """The pattern as a JSON-ready dict (schema version 1, or 2 with an alternation); ``key``
    is stored alongside."""
    if not isinstance(getattr(pattern, "stages", None), tuple) or not all(isinstance(s, Stage) for s in pattern.stages):
        raise TypeError(f"to_dict() takes a Pattern, got {type(pattern).__name__}")
    out: dict[str, Any] = {"version": 3 if _has_gap(pattern) else 2 if _has_alternation(pattern) else 1}
    if key is not None:
        out["key"] = key
    out["stages"] = _stages_out(pattern)
    if pattern.window is not None:
        out["within"] = _window_out(pattern.window)
    sk = pattern.skip_strategy
    skd: dict[str, Any] = {"type": _SKIP_OUT[type(sk)]}
    if sk.stage is not None:
        skd["stage"] = sk.stage
    out["skip"] = skd
    return out


def dumps(pattern: Pattern, key: str | None = None, indent: int | None = None) -> str:
    """The pattern as JSON text (see :func:`to_dict`)."""
    return json.dumps(to_dict(pattern, key), indent=indent)


def _has_alternation(p: Pattern) -> bool:
    return any(st.is_alternation or any(_has_alternation(c) for c in st.children) for st in p.stages)


def _has_gap(p: Pattern) -> bool:
    return any(st.gap is not None or st.quantifier.within is not None or any(_has_gap(c) for c in st.children)
               for st in p.stages)


def _window_out(w: Any) -> Any:
    return f"{w // _dt.timedelta(microseconds=1)}us" if isinstance(w, _dt.timedelta) else w


def _stages_out(pattern: Pattern) -> list[dict]:
    out = []
    for st in pattern.stages:
        q = st.quantifier
        if q.kind == "looping":
            qd = {"type": "oneOrMore"} if q.lo == 1 else {"type": "timesOrMore", "from": q.lo}
        elif q.kind == "times":
            qd = {"type": "times", "from": q.lo, "to": q.hi}
        else:
            qd = None
        if q.within is not None:
            qd["within"] = _window_out(q.within)
        optional = q.optional
        if q.kind == "times" and q.lo == 1 and optional:
            # times(0, n) is how Flink spells it, and the builder accepts it where optional()
            # is refused (after a greedy stage)
            qd["from"], optional = 0, False
        d = {
            "name": st.name, "connect": _CONNECT_OUT[st.connect],
            "where": None if st.condition is None else expr_to_json(st.condition),
            "quantifier": qd, "optional": optional, "greedy": q.greedy, "inner": _INNER_OUT[q.inner],
            "until": None if st.until is None else expr_to_json(st.until),
            "group": None if st.group is None else {"stages": _stages_out(st.group)},
        }
        if st.alternatives is not None:
            d["anyOf"] = [{"stages": _stages_out(a)} for a in st.alternatives]
        if st.gap is not None:
            d["gap"] = _window_out(st.gap)
        out.append(d)
    return out


def expr_to_json(e: Expr) -> dict:
    """One expression as a JSON node."""
    op, a = e.op, e.args
    if op == "true":
        return {"true": True}
    if op == "col":
        return {"field": a[0]}
    if op == "lit":
        return {"const": a[0]}
    if op == "agg":
        d: dict[str, Any] = {"agg": a[0], "stage": a[2][0] if len(a[2]) == 1 else list(a[2])}
        if isinstance(a[1], Expr):
            d["value"] = expr_to_json(a[1])
        elif a[1] is not None:
            d["field"] = a[1]
        return d
    if op == "prev":
        return {"prev": _source_out(a[0]), "k": a[1]}
    if op == "roll":
        func, src, rows, within, cur = a
        d = {"rolling": func, "value": _source_out(src)}
        if rows is not None:
            d["rows"] = rows
        if within is not None:
            d["within"] = _roll_within_out(within)
        d["include_current"] = cur
        return d
    if op == "arith":
        return {"arith": a[0], "args": [expr_to_json(a[1]), expr_to_json(a[2])]}
    if op == "cmp":
        return {"cmp": [expr_to_json(a[1]), a[0], expr_to_json(a[2])]}
    if op in ("and", "or"):
        # flatten the left spine only: [x, y, z] reads back as ((x & y) & z), the same tree
        items = [a[1]]
        left = a[0]
        while left.op == op:
            items.append(left.args[1])
            left = left.args[0]
        items.append(left)
        return {op: [expr_to_json(x) for x in reversed(items)]}
    if op == "not":
        return {"not": expr_to_json(a[0])}
    if op == "isin":
        return {"isin": [expr_to_json(a[0]), list(a[1])]}
    if op == "isnull":
        return {"isnull": expr_to_json(a[0])}
    raise TypeError(f"unknown expression node {op!r}")


def _source_out(e: Expr) -> Any:
    return e.args[0] if e.op == "col" else expr_to_json(e)


def _roll_within_out(w: Any) -> Any:
    if isinstance(w, _dt.timedelta):
        return f"{(w.days * 86400 + w.seconds) * 10**6 + w.microseconds}us"
    return w


# ============================================================================ reading
def load(doc: "str | bytes | dict", pattern_cls: type) -> "tuple[Pattern, str | None]":
    """Read a pattern document (JSON text or a parsed dict) into ``(pattern, key)``, building the
    pattern with ``pattern_cls`` (:class:`colcep.Pattern`: ``Pattern.read_json`` calls this)."""
    if isinstance(doc, (str, bytes, bytearray)):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise PatternJSONError("", f"not valid JSON: {exc}") from None
    d = _obj(doc, "")
    _no_unknown(d, _TOP_FIELDS, "")
    version = d.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PatternJSONError("version", f"expected a positive integer, got {version!r}")
    if version > VERSION:
        raise PatternJSONError("version", f"version {version} is newer than this colcep reads ({VERSION})")
    key = d.get("key")
    if key is not None and (not isinstance(key, str) or not key):
        raise PatternJSONError("key", f"expected a column name or null, got {key!r}")
    if "stages" not in d:
        raise PatternJSONError("stages", "missing")
    p = _chain(pattern_cls, d["stages"], "stages", version)
    if "within" in d and "within_ms" in d and d["within"] is not None and d["within_ms"] is not None:
        raise PatternJSONError("within_ms", "give either 'within' or 'within_ms', not both")
    for fld in ("within", "within_ms"):
        w = d.get(fld)
        if w is None:
            continue
        if fld == "within_ms" and (not isinstance(w, int) or isinstance(w, bool)):
            if isinstance(w, float) and w.is_integer():
                w = int(w)
            else:
                raise PatternJSONError(fld, f"expected an integer number of milliseconds, got {w!r}")
        p = _call(fld, p.within, _window_in(w, fld))
    sk = d.get("skip")
    if sk is not None:
        p = _call("skip", p.skip, _skip(sk, "skip"))
    return p, key


def _window_in(w: Any, path: str) -> "int | str":
    """A window as written: a duration string or an integer (an integral float taken as one)."""
    if isinstance(w, float) and w.is_integer():
        w = int(w)
    if not isinstance(w, (int, str)) or isinstance(w, bool):
        raise PatternJSONError(path, f"expected a duration string like '10s' or an integer, got {w!r}")
    return w


def _v3(version: int, path: str) -> None:
    if version < 3:
        raise PatternJSONError(path, 'a window between events needs "version": 3')


def _call(path: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except PatternJSONError:
        raise
    except (PatternError, TypeError, ValueError) as exc:
        raise PatternJSONError(path, str(exc)) from None


def _obj(node: Any, path: str) -> dict:
    if not isinstance(node, dict):
        raise PatternJSONError(path, f"expected an object, got {_show(node)}")
    return node


def _show(node: Any) -> str:
    s = json.dumps(node) if isinstance(node, (dict, list, str, int, float, bool, type(None))) else repr(node)
    return s if len(s) <= 80 else s[:77] + "..."


def _no_unknown(d: dict, allowed: set, path: str) -> None:
    for k in d:
        if k not in allowed:
            raise PatternJSONError(_join(path, k), f"unknown field (expected one of {', '.join(sorted(allowed))})")


def _join(path: str, name: "str | int") -> str:
    if isinstance(name, int):
        return f"{path}[{name}]"
    return f"{path}.{name}" if path else name


def _skip(sk: Any, path: str) -> AfterMatchSkipStrategy:
    sk = _obj(sk, path)
    _no_unknown(sk, {"type", "stage"}, path)
    t = sk.get("type")
    if t not in _SKIP_IN:
        raise PatternJSONError(_join(path, "type"), f"unknown skip strategy {_show(t)} (expected one of "
                               f"{', '.join(_SKIP_IN)})")
    cls = _SKIP_IN[t]
    if cls in (SkipToFirst, SkipToLast):
        stage = sk.get("stage")
        if not isinstance(stage, str) or not stage:
            raise PatternJSONError(_join(path, "stage"), f"{t} needs a stage name, got {_show(stage)}")
        return cls(stage)
    if sk.get("stage") is not None:
        raise PatternJSONError(_join(path, "stage"), f"{t} takes no stage")
    return cls()


def _chain(cls: type, stages: Any, path: str, version: int) -> Pattern:
    if not isinstance(stages, list) or not stages:
        raise PatternJSONError(path, f"expected a non-empty list of stages, got {_show(stages)}")
    p: Pattern | None = None
    for i, st in enumerate(stages):
        p = _stage(cls, p, st, _join(path, i), version)
    assert p is not None
    return p


def _bool(d: dict, name: str, path: str) -> bool:
    v = d.get(name, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise PatternJSONError(_join(path, name), f"expected true or false, got {_show(v)}")
    return v


def _stage(cls: type, p: Pattern | None, st: Any, path: str, version: int) -> Pattern:
    st = _obj(st, path)
    _no_unknown(st, _STAGE_FIELDS, path)
    connect = st.get("connect", "begin" if p is None else None)
    if connect not in _CONNECT_IN:
        raise PatternJSONError(_join(path, "connect"), f"unknown connect {_show(connect)} (expected one of "
                               f"{', '.join(_CONNECT_IN)})")
    if (p is None) != (connect == "begin"):
        raise PatternJSONError(_join(path, "connect"), "the first stage connects with 'begin', and only the first"
                               if p is None else "'begin' is only for the first stage")
    group, any_of = st.get("group"), st.get("anyOf")
    if any_of is not None:
        apath = _join(path, "anyOf")
        if version < 2:
            raise PatternJSONError(apath, 'an alternation needs "version": 2')
        if group is not None:
            raise PatternJSONError(apath, "a stage is a group or an alternation, not both")
        if not isinstance(any_of, list):
            raise PatternJSONError(apath, f"expected a list of alternatives, got {_show(any_of)}")
        alts = []
        for i, a in enumerate(any_of):
            a = _obj(a, _join(apath, i))
            _no_unknown(a, {"stages"}, _join(apath, i))
            alts.append(_chain(cls, a.get("stages"), _join(_join(apath, i), "stages"), version))
        target: "str | Pattern" = _call(apath, cls.any_of, *alts)
    elif group is not None:
        g = _obj(group, _join(path, "group"))
        _no_unknown(g, {"stages"}, _join(path, "group"))
        target = _chain(cls, g.get("stages"), _join(_join(path, "group"), "stages"), version)
    else:
        target = st.get("name")
        if not isinstance(target, str) or not target:
            raise PatternJSONError(_join(path, "name"), f"expected a non-empty stage name, got {_show(target)}")
    if p is None:
        p = _call(path, cls.begin, target)
    else:
        p = _call(path, getattr(p, _CONNECT_IN[connect]), target)
    assert p is not None
    where = st.get("where")
    if where is not None:
        p = _call(_join(path, "where"), p.where, to_expr(where, _join(path, "where")))
    q = st.get("quantifier")
    qpath = _join(path, "quantifier")
    if q is not None:
        q = _obj(q, qpath)
        qt = q.get("type")
        within = q.get("within")
        if within is not None:
            _v3(version, _join(qpath, "within"))
            within = _window_in(within, _join(qpath, "within"))
        if qt == "oneOrMore":
            _no_unknown(q, {"type", "within"}, qpath)
            p = _call(qpath, p.one_or_more, within=within)
        elif qt == "times":
            _no_unknown(q, {"type", "from", "to", "within"}, qpath)
            lo, hi = _int(q, "from", qpath), q.get("to")
            hi = lo if hi is None else _int(q, "to", qpath)
            p = _call(qpath, p.times, lo, hi, within=within)
        elif qt == "timesOrMore":
            _no_unknown(q, {"type", "from", "within"}, qpath)
            p = _call(qpath, p.times_or_more, _int(q, "from", qpath), within=within)
        else:
            raise PatternJSONError(_join(qpath, "type"), f"unknown quantifier {_show(qt)} (expected oneOrMore, "
                                   "times or timesOrMore)")
    if _bool(st, "optional", path):
        p = _call(_join(path, "optional"), p.optional)
    if _bool(st, "greedy", path):
        p = _call(_join(path, "greedy"), p.greedy)
    inner = st.get("inner", "relaxed")
    inner = "relaxed" if inner is None else inner
    if inner not in _INNER_IN:
        raise PatternJSONError(_join(path, "inner"), f"unknown inner contiguity {_show(inner)} (expected relaxed, "
                               "consecutive or allowCombinations)")
    if inner == "consecutive":
        p = _call(_join(path, "inner"), p.consecutive)
    elif inner == "allowCombinations":
        p = _call(_join(path, "inner"), p.allow_combinations)
    until = st.get("until")
    if until is not None:
        p = _call(_join(path, "until"), p.until, to_expr(until, _join(path, "until")))
    gap = st.get("gap")
    if gap is not None:
        _v3(version, _join(path, "gap"))
        p = _call(_join(path, "gap"), p.within, _window_in(gap, _join(path, "gap")), between="previous_and_current")
    return p


def _int(d: dict, name: str, path: str) -> int:
    v = d.get(name)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise PatternJSONError(_join(path, name), f"expected an integer, got {_show(v)}")
    return v


_NODE_KINDS = ("true", "cmp", "and", "or", "not", "isin", "isnull", "field", "const", "agg", "arith", "prev",
               "rolling")


def to_expr(node: Any, path: str = "") -> Expr:
    """One JSON node (a condition or a value) as a colcep expression."""
    node = _obj(node, path)
    kinds = ["agg"] if "agg" in node else ["rolling"] if "rolling" in node else [k for k in _NODE_KINDS if k in node]
    if len(kinds) != 1:
        raise PatternJSONError(path, f"expected exactly one of {', '.join(_NODE_KINDS)} in an expression, "
                               f"got {_show(node)}")
    k = kinds[0]
    kp = _join(path, k)
    allowed = {"agg": {"agg", "stage", "field", "value"}, "arith": {"arith", "args"}, "prev": {"prev", "k"},
               "rolling": {"rolling", "value", "rows", "within", "include_current"}}.get(k, {k})
    _no_unknown(node, allowed, path)
    v = node[k]
    if k == "true":
        if v is not True:
            raise PatternJSONError(kp, f"expected true, got {_show(v)}")
        return TRUE
    if k == "field":
        if not isinstance(v, str) or not v:
            raise PatternJSONError(kp, f"expected a column name, got {_show(v)}")
        return Expr("col", (v,))
    if k == "const":
        if v is not None and not isinstance(v, (int, float, str, bool)):
            raise PatternJSONError(kp, f"expected a number, string, bool or null, got {_show(v)}")
        return lit(v)
    if k == "cmp":
        if not isinstance(v, list) or len(v) != 3:
            raise PatternJSONError(kp, f"expected [EXPR, op, EXPR], got {_show(v)}")
        if v[1] not in CMP_OPS:
            raise PatternJSONError(_join(kp, 1), f"unknown comparison {_show(v[1])} (expected one of "
                                   f"{' '.join(CMP_OPS)})")
        return Expr("cmp", (v[1], to_expr(v[0], _join(kp, 0)), to_expr(v[2], _join(kp, 2))))
    if k in ("and", "or"):
        if not isinstance(v, list) or not v:
            raise PatternJSONError(kp, f"expected a non-empty list of conditions, got {_show(v)}")
        out = to_expr(v[0], _join(kp, 0))
        for i in range(1, len(v)):
            out = Expr(k, (out, to_expr(v[i], _join(kp, i))))
        return out
    if k == "not":
        return Expr("not", (to_expr(v, kp),))
    if k == "isnull":
        return Expr("isnull", (to_expr(v, kp),))
    if k == "isin":
        if not isinstance(v, list) or len(v) != 2 or not isinstance(v[1], list) or not v[1]:
            raise PatternJSONError(kp, f"expected [EXPR, [value, ...]], got {_show(v)}")
        for i, x in enumerate(v[1]):
            if not isinstance(x, (int, float, str)) or isinstance(x, bool):
                raise PatternJSONError(_join(_join(kp, 1), i), f"expected a number or string, got {_show(x)}")
        return to_expr(v[0], _join(kp, 0)).is_in(v[1])
    if k == "agg":
        if v not in AGG_FUNCS:
            raise PatternJSONError(kp, f"unknown aggregate {_show(v)} (expected one of {', '.join(AGG_FUNCS)})")
        stage = node.get("stage")
        sp = _join(path, "stage")
        stages = [stage] if isinstance(stage, str) else stage
        if not isinstance(stages, list) or not stages or not all(isinstance(s, str) and s for s in stages):
            raise PatternJSONError(sp, f"expected a stage name or a non-empty list of them, got {_show(stage)}")
        field = node.get("field")
        if "value" in node:
            if field is not None:
                raise PatternJSONError(_join(path, "value"), "give one of field and value")
            field = to_expr(node["value"], _join(path, "value"))
            return _call(_join(path, "value"), _make_agg, v, field, stages)
        if field is None and v != "count":
            raise PatternJSONError(_join(path, "field"), f"{v} needs a field")
        if field is not None and (not isinstance(field, str) or not field):
            raise PatternJSONError(_join(path, "field"), f"expected a column name, got {_show(field)}")
        return _make_agg(v, field, stages)
    if k == "prev":
        src = _source_in(v, kp)
        kk = node.get("k", 1)
        if isinstance(kk, bool) or not isinstance(kk, int) or kk < 1:
            raise PatternJSONError(_join(path, "k"), f"expected an integer >= 1, got {_show(kk)}")
        return _call(kp, prev, src, kk)
    if k == "rolling":
        if v not in ROLL_FUNCS and v != "avg":
            raise PatternJSONError(kp, f"unknown rolling aggregate {_show(v)} (expected one of {', '.join(ROLL_FUNCS)})")
        if "value" not in node:
            raise PatternJSONError(_join(path, "value"), "rolling needs a value (a column name or an expression)")
        src = _source_in(node["value"], _join(path, "value"))
        rows = node.get("rows")
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
            raise PatternJSONError(_join(path, "rows"), f"expected an integer >= 1, got {_show(rows)}")
        within = node.get("within")
        if within is not None and (isinstance(within, bool) or not isinstance(within, (int, str))):
            raise PatternJSONError(_join(path, "within"), f"expected a duration string or an integer, got {_show(within)}")
        if rows is None and within is None:
            raise PatternJSONError(path, "rolling needs rows, within or both")
        cur = node.get("include_current", False)
        if not isinstance(cur, bool):
            raise PatternJSONError(_join(path, "include_current"), f"expected true or false, got {_show(cur)}")
        return _call(_join(path, "within") if within is not None else kp, rolling, src, v, rows, within, cur)
    # arith
    if v not in ARITH_OPS:
        raise PatternJSONError(kp, f"unknown arithmetic operator {_show(v)} (expected one of {' '.join(ARITH_OPS)})")
    args = node.get("args")
    ap = _join(path, "args")
    if not isinstance(args, list) or len(args) != 2:
        raise PatternJSONError(ap, f"expected two operands, got {_show(args)}")
    return Expr("arith", (v, to_expr(args[0], _join(ap, 0)), to_expr(args[1], _join(ap, 1))))


def _source_in(v: Any, path: str) -> "str | Expr":
    if isinstance(v, str):
        if not v:
            raise PatternJSONError(path, "expected a column name, got an empty string")
        return v
    return to_expr(v, path)


__all__ = ["VERSION", "PatternJSONError", "to_dict", "dumps", "load", "expr_to_json", "to_expr"]
