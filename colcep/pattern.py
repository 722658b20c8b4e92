"""The Pattern API: Flink CEP's operators in snake_case, as an immutable builder.

    p = (Pattern.begin("a").where(col("volume") > 1000)
           .followed_by("rise").where(col("price") > last("price", of="a")).one_or_more()
           .followed_by("drop").where(col("price") < last("price", of="rise"))
           .within("60s").skip(SkipPastLastEvent()))

Every call returns a new Pattern; quantifier and condition calls apply to the last stage.
A Pattern can also stand as a stage of another one (Flink's group pattern), and
``Pattern.any_of(p1, p2, ...)`` is a stage matching any one of several patterns (alternation,
beyond Flink CEP: every alternative is tried, each giving its own matches). Invalid
combinations raise :class:`PatternError` naming the rule, as Flink's
``MalformedPatternException`` does.
"""
from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, replace
from typing import Any

from colcep.errors import InputError, PatternError
from colcep.lang import json_format
from colcep.expr import Expr, wrap
from colcep.skip import AfterMatchSkipStrategy, NoSkip
from colcep.stages import (ALLOW_COMBINATIONS, BEGIN, CONSECUTIVE, FOLLOWED_BY, FOLLOWED_BY_ANY,  # noqa: F401
                           NEXT, NOT_FOLLOWED_BY, NOT_NEXT, RELAXED, Quantifier, Stage)

FIRST_AND_LAST, PREVIOUS_AND_CURRENT = "first_and_last", "previous_and_current"  # within(..., between=)

class Pattern:
    """An immutable pattern: stages in order, a ``within`` window and a skip strategy."""

    __slots__ = ("stages", "window", "skip_strategy")

    def __init__(self, stages: tuple[Stage, ...], window: Any = None,
                 skip_strategy: AfterMatchSkipStrategy | None = None):
        self.stages = stages
        self.window = window
        self.skip_strategy = skip_strategy or NoSkip()

    # ------------------------------------------------------------------ construction
    @classmethod
    def begin(cls, name: "str | Pattern", skip: AfterMatchSkipStrategy | None = None) -> "Pattern":
        """Start a pattern with a stage called ``name`` (or with a group pattern)."""
        return cls((), None, skip)._append(name, BEGIN)

    @classmethod
    def any_of(cls, *alternatives: "Pattern") -> "Pattern":
        """A stage that matches any one of ``alternatives`` (alternation, SQL's ``|``), usable
        wherever a group pattern is: ``p.followed_by(Pattern.any_of(a, b)).one_or_more()``.

        Every alternative is tried (like every other non-deterministic choice of the NFA), each
        giving its own matches; a match's events keep their stage names, so it shows which
        alternative matched. A stage name may repeat in different alternatives (it is then one
        stage: one variable for conditions, aggregates and the skip strategy), not elsewhere.
        Each alternative must take at least one event (make the whole ``any_of`` optional
        instead), may not begin or end with a NOT stage and has no window or skip of its own."""
        if len(alternatives) < 2:
            raise PatternError(f"any_of() needs at least two alternatives, got {len(alternatives)}")
        for i, alt in enumerate(alternatives):
            what = f"any_of() alternative {i + 1}"
            if not isinstance(alt, Pattern) or not alt.stages:
                raise PatternError(f"{what}: expected a non-empty Pattern (e.g. Pattern.begin('a').where(...)), "
                                   f"got {alt!r}")
            if alt.stages[0].is_negation:
                raise PatternError(f"{what} cannot start with a NOT stage ({alt.stages[0].describe()})")
            if alt.stages[-1].is_negation:
                raise PatternError(f"{what} cannot end with a NOT stage ({alt.stages[-1].describe()})")
            if alt.window is not None or not isinstance(alt.skip_strategy, NoSkip):
                raise PatternError(f"{what} has its own within() or skip(); set them on the whole pattern")
            if can_be_empty(alt):
                raise PatternError(f"{what} can match no event (all its stages are optional); make the whole "
                                   "any_of(...) optional instead")
            stage_name_set(alt)  # each alternative's names are unique
        return cls((Stage("AnyOf", BEGIN, alternatives=tuple(alternatives)),))

    def next(self, name: "str | Pattern") -> "Pattern":
        """Strict contiguity: the stage's event must directly follow the previous one."""
        return self._append(name, NEXT)

    def followed_by(self, name: "str | Pattern") -> "Pattern":
        """Relaxed contiguity (skip till next match)."""
        return self._append(name, FOLLOWED_BY)

    def followed_by_any(self, name: "str | Pattern") -> "Pattern":
        """Non-deterministic relaxed contiguity (skip till any match)."""
        return self._append(name, FOLLOWED_BY_ANY)

    def not_next(self, name: str) -> "Pattern":
        """The event right after the previous stage must not satisfy this stage's condition."""
        return self._append(name, NOT_NEXT)

    def not_followed_by(self, name: str) -> "Pattern":
        """No event satisfying this stage's condition may come between the previous stage
        and the next one (at the end: within the window)."""
        return self._append(name, NOT_FOLLOWED_BY)

    def _append(self, name: "str | Pattern", connect: str) -> "Pattern":
        if self.stages and self.stages[-1].quantifier.optional and connect in (NOT_NEXT, NOT_FOLLOWED_BY):
            raise PatternError(
                f"an optional path to a NOT stage is not supported: {self.stages[-1].describe()} is optional "
                f"and is followed by {connect}({name!r}); write two patterns, one with and one without "
                "the optional stage")
        if isinstance(name, Pattern):
            if connect in (NOT_NEXT, NOT_FOLLOWED_BY):
                raise PatternError(f"{connect}() takes a stage name, not a group pattern")
            if name.stages and name.stages[0].is_negation:
                raise PatternError("a group pattern cannot start with a NOT stage")
            if _bare_alternation(name):  # Pattern.any_of(...) stands as the stage itself
                stage = replace(name.stages[0], name=_group_name(self, "AnyOf"), connect=connect)
            else:
                stage = Stage(_group_name(self, "GroupPattern"), connect, group=name)
        else:
            if not isinstance(name, str) or not name:
                raise PatternError(f"a stage name must be a non-empty string, got {name!r}")
            stage = Stage(name, connect)
        return Pattern(self.stages + (stage,), self.window, self.skip_strategy)

    def _with_last(self, **changes: Any) -> "Pattern":
        return Pattern(self.stages[:-1] + (replace(self.stages[-1], **changes),), self.window, self.skip_strategy)

    def _with_quantifier(self, **changes: Any) -> "Pattern":
        return self._with_last(quantifier=replace(self.stages[-1].quantifier, **changes))

    @property
    def _last(self) -> Stage:
        return self.stages[-1]

    # ------------------------------------------------------------------ conditions
    def where(self, condition: Expr) -> "Pattern":
        """Add a condition to the last stage; repeated calls are AND-ed."""
        st = self._check_condition_target("where", condition)
        cond = wrap(condition)
        return self._with_last(condition=cond if st.condition is None else st.condition & cond)

    def or_where(self, condition: Expr) -> "Pattern":
        """OR a condition onto the last stage's condition (Flink's ``or``)."""
        st = self._check_condition_target("or_where", condition)
        cond = wrap(condition)
        return self._with_last(condition=cond if st.condition is None else st.condition | cond)

    def until(self, condition: Expr) -> "Pattern":
        """Stop condition of a looping stage: an event satisfying it ends the loop."""
        st = self._last
        if not isinstance(condition, Expr):
            raise PatternError(f"until() takes a colcep expression, got {type(condition).__name__}")
        if st.until is not None:
            raise PatternError(f"only one until condition can be applied ({st.describe()})")
        if st.quantifier.kind != "looping":
            raise PatternError(
                f"until() is only applicable to looping stages (one_or_more / times_or_more): {st.describe()}")
        return self._with_last(until=wrap(condition))

    def _check_condition_target(self, what: str, condition: Any) -> Stage:
        st = self._last
        if st.is_group:
            raise PatternError(f"{what}() is not applicable to a group pattern ({st.describe()})")
        if not isinstance(condition, Expr):
            raise PatternError(f"{what}() takes a colcep expression, got {type(condition).__name__}")
        return st

    # ------------------------------------------------------------------ quantifiers
    def _check_quantifiable(self, what: str) -> Stage:
        st = self._last
        if st.is_negation:
            raise PatternError(f"{what}() is not applicable to a NOT stage ({st.describe()})")
        if st.quantifier.kind != "single":
            raise PatternError(f"{what}(): a quantifier is already applied to {st.describe()}")
        return st

    def one_or_more(self, within: "str | _dt.timedelta | int | None" = None) -> "Pattern":
        """The stage matches one or more events (Kleene plus). ``within``: Flink's
        ``oneOrMore(window)``, see :meth:`times`."""
        self._check_quantifiable("one_or_more")
        return self._with_quantifier(kind="looping", lo=1, hi=None, within=_gap(within))

    def times(self, lo: int, hi: int | None = None, within: "str | _dt.timedelta | int | None" = None) -> "Pattern":
        """Exactly ``lo`` events, or between ``lo`` and ``hi`` (``times(0, n)`` is optional).
        ``within``: Flink's ``times(n, window)``, the most time from the event before a
        repetition to the repetition's event, as Flink applies it: to the stage's first
        repetition and those up to the last required one, not to the last one nor to the
        repetitions of a loop (a partial match waiting longer times out, checked as time passes)."""
        self._check_quantifiable("times")
        gap = _gap(within)
        if hi is None:
            if not isinstance(lo, int) or lo < 1:
                raise PatternError(f"times(n) needs a positive number of times, got {lo!r}")
            return self._with_quantifier(kind="times", lo=lo, hi=lo, within=gap)
        if not isinstance(lo, int) or not isinstance(hi, int) or lo < 0 or hi < max(lo, 1):
            raise PatternError(f"times(lo, hi) needs 0 <= lo <= hi and hi >= 1, got ({lo!r}, {hi!r})")
        if lo == 0:
            return self._with_quantifier(kind="times", lo=1, hi=hi, optional=True, within=gap)
        return self._with_quantifier(kind="times", lo=lo, hi=hi, within=gap)

    def times_or_more(self, n: int, within: "str | _dt.timedelta | int | None" = None) -> "Pattern":
        """At least ``n`` events. ``within``: Flink's ``timesOrMore(n, window)``, see :meth:`times`."""
        self._check_quantifiable("times_or_more")
        if not isinstance(n, int) or n < 1:
            raise PatternError(f"times_or_more(n) needs a positive number of times, got {n!r}")
        return self._with_quantifier(kind="looping", lo=n, hi=None, within=_gap(within))

    def optional(self) -> "Pattern":
        """The stage may match no event."""
        st = self._last
        if st.is_negation:
            raise PatternError(f"a NOT stage cannot be optional ({st.describe()})")
        if st.quantifier.optional:
            raise PatternError(f"optional() is already applied to {st.describe()}")
        if len(self.stages) > 1 and self.stages[-2].quantifier.greedy:
            raise PatternError(
                f"an optional stage cannot be preceded by a greedy one: {st.describe()} follows greedy "
                f"{self.stages[-2].describe()}")
        return self._with_quantifier(optional=True)

    def greedy(self) -> "Pattern":
        """The looping stage takes as many events as it can before the next stage."""
        st = self._last
        if st.is_negation:
            raise PatternError(f"greedy() is not applicable to a NOT stage ({st.describe()})")
        if st.is_group:
            raise PatternError(f"greedy() is not applicable to a group pattern ({st.describe()})")
        if st.quantifier.inner == ALLOW_COMBINATIONS:
            raise PatternError(f"greedy() is not applicable to an allow_combinations (followed-by-any) loop "
                               f"({st.describe()})")
        if st.quantifier.kind == "single":
            raise PatternError(f"greedy() is not applicable to a single-event stage ({st.describe()}); "
                               "use it with one_or_more / times / times_or_more")
        return self._with_quantifier(greedy=True)

    def consecutive(self) -> "Pattern":
        """Strict contiguity between the events of a looping / times stage."""
        st = self._last
        if st.quantifier.kind == "single":
            raise PatternError(f"consecutive() applies only to looping or times stages ({st.describe()})")
        if st.quantifier.inner != RELAXED:
            raise PatternError(f"consecutive(): {st.quantifier.inner} is already applied to {st.describe()}; "
                               "apply either allow_combinations or consecutive, not both")
        return self._with_quantifier(inner=CONSECUTIVE)

    def allow_combinations(self) -> "Pattern":
        """Non-deterministic relaxed contiguity between the events of a looping / times stage."""
        st = self._last
        if st.quantifier.kind == "single":
            raise PatternError(f"allow_combinations() applies only to looping or times stages ({st.describe()})")
        if st.quantifier.inner != RELAXED:
            raise PatternError(f"allow_combinations(): {st.quantifier.inner} is already applied to "
                               f"{st.describe()}; apply either allow_combinations or consecutive, not both")
        if st.quantifier.greedy:
            raise PatternError(f"allow_combinations() is not applicable to a greedy stage ({st.describe()})")
        return self._with_quantifier(inner=ALLOW_COMBINATIONS)

    # ------------------------------------------------------------------ whole pattern
    def within(self, window: "str | _dt.timedelta | int", between: str = FIRST_AND_LAST) -> "Pattern":
        """A match must complete within ``window`` of its first event (``last.ts - first.ts <
        window``): ``"10s"``, ``"5min"``, ``timedelta`` or an integer in the time column's unit.

        ``between="previous_and_current"`` (Flink's ``WithinType.PREVIOUS_AND_CURRENT``) bounds
        instead the time from the event before the last stage's event to that event: a partial
        match waiting for that stage times out ``window`` after its last event (checked as time
        passes, as Flink does; a window no longer than the first-and-last one)."""
        if between == PREVIOUS_AND_CURRENT:
            return self._with_last(gap=_gap(window))
        if between != FIRST_AND_LAST:
            raise PatternError(f"within(..., between=) takes {FIRST_AND_LAST!r} or {PREVIOUS_AND_CURRENT!r}, "
                               f"got {between!r}")
        parse_duration(window)  # validate early
        return Pattern(self.stages, window, self.skip_strategy)

    def skip(self, strategy: AfterMatchSkipStrategy) -> "Pattern":
        """Set the after-match skip strategy."""
        if not isinstance(strategy, AfterMatchSkipStrategy):
            raise PatternError(f"skip() takes an after-match skip strategy, got {strategy!r}")
        return Pattern(self.stages, self.window, strategy)

    # ------------------------------------------------------------------ as data
    def to_json(self, key: str | None = None, indent: int | None = None) -> str:
        """The pattern as a JSON document (schema in :mod:`colcep.lang.json_format`, version 1);
        ``key``, the partition column to match with, is stored alongside if given."""
        return json_format.dumps(self, key=key, indent=indent)

    @classmethod
    def from_json(cls, doc: "str | bytes | dict") -> "Pattern":
        """Read a pattern document (JSON text or a parsed dict), e.g. a conformance case's
        ``pattern``; a bad document raises ``PatternJSONError`` naming the field's path.
        :meth:`read_json` also returns the document's ``key``."""
        return json_format.load(doc, cls)[0]

    @classmethod
    def read_json(cls, doc: "str | bytes | dict") -> "tuple[Pattern, str | None]":
        """Read a pattern document: ``(pattern, key)``, the key ``None`` when it names none."""
        return json_format.load(doc, cls)

    # ------------------------------------------------------------------ introspection
    def stage_names(self) -> list[str]:
        """Names of the event-taking stages, groups and alternatives flattened, in pattern order
        (a name repeated in several alternatives once, where it first appears)."""
        out: list[str] = []
        for st in self.stages:
            for n in ([n for c in st.children for n in c.stage_names()] if st.is_group else [st.name]):
                if n not in out:
                    out.append(n)
        return out

    def __repr__(self) -> str:
        parts = []
        for st in self.stages:
            q = st.quantifier
            if st.alternatives is not None:
                s = f"{st.connect}(Pattern.any_of({', '.join(repr(a) for a in st.alternatives)}))"
            else:
                s = f"{st.connect}({st.group!r})" if st.group is not None else f"{st.connect}({st.name!r})"
            if st.condition is not None:
                s += f".where({st.condition!r})"
            w = "" if q.within is None else f"within={q.within!r}"
            if q.kind == "looping":
                s += f".one_or_more({w})" if q.lo == 1 else f".times_or_more({q.lo}{', ' + w if w else ''})"
            elif q.kind == "times":
                args = f"{q.lo}" if q.lo == q.hi else f"{q.lo}, {q.hi}"
                s += f".times({args}{', ' + w if w else ''})"
            if q.optional:
                s += ".optional()"
            if q.greedy:
                s += ".greedy()"
            if q.inner != RELAXED:
                s += f".{q.inner}()"
            if st.until is not None:
                s += f".until({st.until!r})"
            if st.gap is not None:
                s += f".within({st.gap!r}, between={PREVIOUS_AND_CURRENT!r})"
            parts.append(s)
        out = "Pattern." + ".".join(parts)
        if self.window is not None:
            out += f".within({self.window!r})"
        if not isinstance(self.skip_strategy, NoSkip):
            out += f".skip({self.skip_strategy!r})"
        return out


def _gap(window: Any) -> Any:
    """A per-gap window as given (None: none), validated."""
    if window is not None:
        parse_duration(window)
    return window


def _bare_alternation(p: Pattern) -> bool:
    """``p`` is ``Pattern.any_of(...)`` as built (no quantifier, window or skip on it)."""
    return (len(p.stages) == 1 and p.stages[0].is_alternation and p.stages[0].quantifier == Quantifier()
            and p.stages[0].until is None and p.window is None and isinstance(p.skip_strategy, NoSkip))


def can_be_empty(p: Pattern) -> bool:
    """Can ``p`` match without taking an event?"""
    return all(st.is_negation or st.quantifier.optional
               or (st.is_group and any(can_be_empty(c) for c in st.children)) for st in p.stages)


def stage_name_set(p: Pattern) -> set[str]:
    """The stage names of ``p``; a name may repeat only in different alternatives of one
    ``any_of`` (then it is one stage), else :class:`PatternError`."""
    seen: set[str] = set()
    for st in p.stages:
        if st.is_alternation:
            names = set().union(*(stage_name_set(a) for a in st.children))
        elif st.group is not None:
            names = stage_name_set(st.group)
        else:
            names = {st.name}
        dup = seen & names
        if dup:
            raise PatternError(f"duplicate stage name {sorted(dup)[0]!r}: stage names must be unique (a name may "
                               "repeat only in different alternatives of one any_of)")
        seen |= names
    return seen


def _group_name(outer: Pattern, base: str) -> str:
    taken = {s.name for s in outer.stages}
    name, i = base, 2
    while name in taken:
        name, i = f"{base}{i}", i + 1
    return name


_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0,
          "h": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0}


def parse_duration(window: Any) -> "float | int":
    """Seconds (float) for a string or timedelta; the integer itself for an int (column units)."""
    if isinstance(window, bool):
        raise PatternError(f"invalid window {window!r}")
    if isinstance(window, int):
        if window <= 0:
            raise PatternError(f"the window must be positive, got {window}")
        return window
    if isinstance(window, _dt.timedelta):
        secs = window.total_seconds()
    elif isinstance(window, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", window.lower())
        if not m or m.group(2) not in _UNITS:
            raise PatternError(f"invalid window {window!r}: use e.g. '500ms', '10s', '5min', '1h', '1d'")
        secs = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise PatternError(f"invalid window {window!r}: use a string like '10s', a timedelta or an int")
    if secs <= 0:
        raise PatternError(f"the window must be positive, got {window!r}")
    return float(secs)


@dataclass(frozen=True)
class KeyedPattern:
    """A pattern and the key it is matched per: what a front-end's query compiles to (the SASE+
    language's :class:`~colcep.SaseQuery` is one). Accepted wherever a Pattern is, its key
    standing for ``key=``."""

    pattern: Pattern
    key: "str | list[str] | None"  # a list: a composite key


def with_key(pattern: Any, key: Any) -> tuple[Any, Any]:
    """``(pattern, key)`` for what a caller passed as the pattern: a KeyedPattern gives its own
    pattern and key (a ``key`` given too must name the same columns), anything else (a Pattern,
    a compiled one) comes back with ``key`` as it was given."""
    if not isinstance(pattern, KeyedPattern):
        return pattern, key
    if key is not None and _names(key) != _names(pattern.key):
        raise InputError(f"key={key!r} differs from the query's key {pattern.key!r}; leave key= out to match per "
                         "the query's key")
    return pattern.pattern, pattern.key


def _names(key: Any) -> list:
    return [] if key is None else [key] if isinstance(key, str) else list(key)
