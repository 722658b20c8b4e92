"""Pattern -> NFA^b program: states and transitions as numpy tables.

The construction follows Flink CEP's ``NFACompiler`` step for step (it builds the graph from
the back: final state, middle states, start state), because the shape of the graph decides
the Dewey versions and therefore the matches. States form a table; each state has an
ordered list of transitions (action TAKE / IGNORE / PROCEED, target state, condition id).
Conditions are expression trees (``colcep.expr``) deduplicated into a table; the condition
compiler (``colcep.engine.conditions``) lowers them to column masks or kernel bytecode.

An alternation stage (``Pattern.any_of``, beyond Flink) compiles like a group whose body is
a *branch*: a state with one PROCEED edge into each alternative's first state, every
alternative built towards the same following state (where they join). The kernel follows
every enabled edge, so each alternative gives its own runs; quantifiers, optional and the NOT
edges a group's first state would get apply to the branch (the NOT edges to each
alternative's first state, where runs wait).

Kinds of states: NORMAL, FINAL, STOP (a NOT stage was violated: discard the path) and
PENDING (a trailing ``not_followed_by``: the match completes when the window closes).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from colcep.errors import ColcepWarning, PatternError
from colcep.expr import TRUE, Expr
from colcep.kernels.codes import FINAL, IGNORE, NORMAL, PENDING, PROCEED, STOP, TAKE  # noqa: F401
from colcep.pattern import (ALLOW_COMBINATIONS, BEGIN, CONSECUTIVE, FOLLOWED_BY, FOLLOWED_BY_ANY, NEXT, NOT_FOLLOWED_BY,
                      NOT_NEXT, Pattern, Stage, can_be_empty, parse_duration, stage_name_set)

ACTION_NAMES = ("TAKE", "IGNORE", "PROCEED")
MAX_STATES = 50_000  # a bound on what a pattern may compile to (the 813 corpus cases need at most a few dozen)
KIND_NAMES = ("Normal", "Final", "Stop", "Pending")

# Flink's consuming strategies
STRICT, SKIP_TILL_NEXT, SKIP_TILL_ANY, NOT_NEXT_S, NOT_FOLLOW = "STRICT", "SKIP_TILL_NEXT", "SKIP_TILL_ANY", \
    "NOT_NEXT", "NOT_FOLLOW"
_CONNECT = {BEGIN: STRICT, NEXT: STRICT, FOLLOWED_BY: SKIP_TILL_NEXT, FOLLOWED_BY_ANY: SKIP_TILL_ANY,
            NOT_NEXT: NOT_NEXT_S, NOT_FOLLOWED_BY: NOT_FOLLOW}
_INNER = {"relaxed": SKIP_TILL_NEXT, CONSECUTIVE: STRICT, ALLOW_COMBINATIONS: SKIP_TILL_ANY}
ENDING_STATE_NAME = "$endState$"


# ---------------------------------------------------------------------------- condition algebra
def c_and(a: Expr, b: Expr) -> Expr:
    if a.op == "true":
        return b
    if b.op == "true":
        return a
    return Expr("and", (a, b))


def c_not(a: Expr) -> Expr:
    if a.op == "not":
        return a.args[0]
    return Expr("not", (a,))


# ---------------------------------------------------------------------------- Flink-shaped model
@dataclass(eq=False)
class _P:
    """A node of Flink's pattern chain (``previous`` points backwards)."""

    name: str
    previous: "_P | None"
    condition: Expr | None
    strategy: str
    props: set
    inner: str = SKIP_TILL_NEXT
    times: tuple[int, int] | None = None
    until: Expr | None = None
    raw: "_P | None" = None  # group pattern: the last pattern of the inner chain
    alts: "list[_P] | None" = None  # alternation: the last pattern of each alternative's chain
    gap: Any = None  # within(w, PREVIOUS_AND_CURRENT) on this stage
    times_within: Any = None  # the window of times(n, window) / one_or_more(window)

    def take_condition(self) -> Expr:
        return self.condition if self.condition is not None else TRUE

    @property
    def is_group(self) -> bool:
        return self.raw is not None or self.alts is not None


def _to_chain(pattern: Pattern) -> _P:
    prev = None
    for st in pattern.stages:
        prev = _stage_to_p(st, prev)
    return prev


def _stage_to_p(st: Stage, prev: "_P | None") -> _P:
    q = st.quantifier
    props = {"SINGLE"} if q.kind == "single" else {"LOOPING"} if q.kind == "looping" else {"TIMES"}
    if q.optional:
        props.add("OPTIONAL")
    if q.greedy:
        props.add("GREEDY")
    times = None if q.kind == "single" else (q.lo, q.lo if q.kind == "looping" else q.hi)
    raw = _to_chain(st.group) if st.group is not None else None
    alts = [_to_chain(a) for a in st.alternatives] if st.alternatives is not None else None
    return _P(st.name, prev, st.condition, _CONNECT[st.connect], props, _INNER[q.inner], times, st.until, raw, alts,
              st.gap, q.within)


@dataclass(eq=False)
class State:
    name: str
    kind: int
    stage: str  # original (user) name
    transitions: list = field(default_factory=list)  # [action, target State, condition Expr]
    start: bool = False
    heads: "list[State] | None" = None  # a branch: its alternatives' first states
    window: Any = None  # Flink's windowTimes[name]: the most time from the previous taken event to this state's

    def add(self, action: int, target: "State", cond: Expr) -> None:
        self.transitions.append([action, target, cond])


class _Compiler:
    """Port of Flink's ``NFACompiler.NFAFactoryCompiler`` over the ``_P`` chain."""

    def __init__(self, last: _P, window: bool):
        self.current = last
        self.following: _P | None = None
        self.group: _P | None = None
        self.first_of_loop: dict = {}
        self.states: list[State] = []
        self.used_names: set[str] = set()
        self.stop_states: dict[str, State] = {}
        self.original_state_map: dict[str, State] = {}
        self.has_window = window

    # -- naming / creation
    def _unique(self, base: str) -> str:
        cand, i = base, 0
        while cand in self.used_names:
            cand = f"{base}:{i}"
            i += 1
        self.used_names.add(cand)
        return cand

    def create_state(self, name: str, kind: int, take: bool = False) -> State:
        """A new state named after ``name`` (made unique as Flink does: ``b``, ``b:0``, ``b:1`` ...).
        A ``take`` state (one a run waits in for the current stage's event) gets Flink's per-state
        window: the stage's previous-and-current window for a single-event stage, the window of
        its ``times`` for the internal states of a quantified one (the names with a ``:``: not
        the last repetition, not the loop itself)."""
        if len(self.states) >= MAX_STATES:
            raise PatternError(
                f"the pattern compiles to more than {MAX_STATES:,} NFA states (at stage {self.current.name!r}); "
                "each optional stage behind a not_followed_by copies the states after it, so a long run of "
                "them grows quadratically. Make some of those stages required or split the pattern")
        st = State(self._unique(name), kind, name.split(":")[0])
        self.states.append(st)
        if take:
            cur = self.current
            st.window = cur.gap if cur.times is None else cur.times_within if ":" in st.name else None
        return st

    def compile(self) -> State:
        last = self.current
        sink = self.create_state(ENDING_STATE_NAME, FINAL)
        sink = self.create_middle_states(sink)
        start = self.convert_pattern(sink)
        start.start = True
        if last.strategy == NOT_FOLLOW and not self.has_window and last.gap is None:
            raise PatternError(
                f"not_followed_by({last.name!r}) as the last stage needs a within() window (of the whole pattern, "
                "or between the previous event and it): without one the match could never be released")
        return start

    # -- NOT handling
    def current_not_conditions(self) -> list[tuple[Expr, str]]:
        out = []
        prev = self.current
        while prev.previous is not None and ("OPTIONAL" in prev.previous.props
                                             or prev.previous.strategy == NOT_FOLLOW):
            prev = prev.previous
            if prev.strategy == NOT_FOLLOW:
                out.append((self.take_condition(prev), prev.name))
        return out

    def create_stop_state(self, cond: Expr, name: str) -> State:
        st = self.stop_states.get(name)
        if st is None:
            st = self.create_state(name, STOP)
            st.add(TAKE, st, cond)
            self.stop_states[name] = st
        return st

    def copy_without_transitive_nots(self, sink: State) -> State:
        nots = self.current_not_conditions()
        if not nots or "OPTIONAL" not in self.current.props:
            return sink
        copy = self.create_state(sink.name, sink.kind)
        for action, target, cond in sink.transitions:
            if action == PROCEED:
                remove = False
                if target.kind == STOP:
                    for _, nm in nots:
                        if target.name == nm:
                            remove = True
                else:
                    target = self.copy_without_transitive_nots(target)
                if not remove:
                    copy.add(action, target, cond)
            else:
                copy.add(action, copy if target is sink else target, cond)
        return copy

    def copy(self, state: State) -> State:
        c = self.create_state(state.stage, state.kind)
        for action, target, cond in state.transitions:
            c.add(action, c if target is state else target, cond)
        return c

    @classmethod
    def waiting_states(cls, state: State) -> list[State]:
        """Where a NOT edge meant for ``state`` goes: the state itself, or for a branch (runs
        never wait there) each alternative's first state."""
        if state.heads is None:
            return [state]
        return [s for h in state.heads for s in cls.waiting_states(h)]

    def add_stop_states(self, state: State) -> None:
        for cond, name in self.current_not_conditions():
            stop = self.create_stop_state(cond, name)
            for s in self.waiting_states(state):
                s.add(PROCEED, stop, cond)

    def add_stop_state_to_looping(self, state: State) -> None:
        f = self.following
        if f is not None and f.strategy == NOT_FOLLOW:
            cond = self.take_condition(f)
            stop = self.create_stop_state(cond, f.name)
            for s in self.waiting_states(state):
                s.add(PROCEED, stop, cond)

    # -- middle / start
    def create_middle_states(self, sink: State) -> State:
        last_sink = sink
        while self.current.previous is not None:
            cur = self.current
            if cur.strategy == NOT_FOLLOW:
                if (self.has_window or cur.gap is not None) and last_sink.kind == FINAL:
                    pending = self.create_state(cur.name, PENDING, take=True)
                    cond = self.take_condition(cur)
                    stop = self.create_stop_state(cond, cur.name)
                    pending.add(PROCEED, stop, cond)
                    pending.add(IGNORE, pending, c_not(cond))
                    last_sink = pending
            elif cur.strategy == NOT_NEXT_S:
                nn = self.create_state(cur.name, NORMAL, take=True)
                cond = self.take_condition(cur)
                stop = self.create_stop_state(cond, cur.name)
                if last_sink.kind == FINAL:
                    nn.add(IGNORE, last_sink, c_not(cond))
                else:
                    nn.add(PROCEED, last_sink, c_not(cond))
                nn.add(PROCEED, stop, cond)
                last_sink = nn
            else:
                last_sink = self.convert_pattern(last_sink)
            self.following = cur
            self.current = cur.previous
        return last_sink

    def convert_pattern(self, sink: State) -> State:
        cur = self.current
        if "LOOPING" in cur.props:
            self.set_first_of_loop(False)
            s = self.copy_without_transitive_nots(sink)
            looping = self.create_looping(s)
            self.set_first_of_loop(True)
            last = self.create_times_state(looping, sink, cur.times)
        elif "TIMES" in cur.props:
            last = self.create_times_state(sink, sink, cur.times)
        else:
            last = self.create_singleton_state(sink, sink, self.take_condition(cur), self.ignore_condition(cur),
                                               "OPTIONAL" in cur.props)
        self.add_stop_states(last)
        return last

    # -- quantifiers
    def create_times_state(self, sink: State, proceed: State, times: tuple[int, int]) -> State:
        cur = self.current
        last = sink
        self.set_first_of_loop(False)
        until = cur.until
        inner_ignore = self.extend_with_until(self.inner_ignore_condition(cur), until, False)
        take = self.extend_with_until(self.take_condition(cur), until, True)
        lo, hi = times
        if "GREEDY" in cur.props and lo != hi:
            if until is not None:
                self.original_state_map[sink.name] = self.copy(sink)
            self.update_with_greedy_condition(sink, take)
        for _ in range(lo, hi):
            last = self.create_singleton_state(last, proceed, take, inner_ignore, True)
            self.add_stop_state_to_looping(last)
        for _ in range(lo - 1):
            last = self.create_singleton_state(last, None, take, inner_ignore, False)
            self.add_stop_state_to_looping(last)
        self.set_first_of_loop(True)
        return self.create_singleton_state(last, proceed, take, self.ignore_condition(cur), "OPTIONAL" in cur.props)

    def set_first_of_loop(self, value: bool) -> None:
        if self.current.is_group:
            self.first_of_loop[id(self.current)] = value

    def is_group_first_of_loop(self) -> bool:
        return self.first_of_loop.get(id(self.group), True)

    def head_of_group(self, p: _P) -> bool:
        return self.group is not None and p.previous is None

    def is_head_of_optional_group(self, p: _P) -> bool:
        return self.head_of_group(p) and self.is_group_first_of_loop() and "OPTIONAL" in self.group.props

    def create_singleton_state(self, sink: State, proceed: "State | None", take: Expr,
                               ignore: "Expr | None", optional: bool) -> State:
        cur = self.current
        if cur.is_group:
            return self.create_group_state(cur, sink, proceed, optional)
        st = self.create_state(cur.name, NORMAL, take=True)
        s = self.copy_without_transitive_nots(sink)
        st.add(TAKE, s, take)
        proceed_cond = self.true_condition()
        if optional:
            if "GREEDY" in cur.props:
                until = cur.until
                if until is not None:
                    st.add(PROCEED, self.original_sink(proceed), c_and(proceed_cond, until))
                st.add(PROCEED, proceed, c_and(proceed_cond, c_not(until)) if until is not None else proceed_cond)
            else:
                st.add(PROCEED, proceed, proceed_cond)
        if ignore is not None:
            if optional or self.is_head_of_optional_group(cur):
                ig = self.create_state(cur.name, NORMAL)
                ig.add(TAKE, s, take)
                ig.add(IGNORE, ig, ignore)
                self.add_stop_states(ig)
            else:
                ig = st
            st.add(IGNORE, ig, ignore)
        return st

    def original_sink(self, proceed: State) -> State:
        """The copy of ``proceed`` taken before the greedy condition was folded into it (the
        target of an optional greedy loop's PROCEED-on-until edge).

        ``create_looping`` files that copy under the name of the loop's sink; for an optional loop
        behind a ``not_followed_by`` that sink is ``copy_without_transitive_nots(proceed)``, a state
        with a new name, so nothing is filed under ``proceed``. Flink's ``originalStateMap.get``
        then returns null and the NFA gets a PROCEED edge without a target, which throws (an NPE
        in ``NFA.findFinalStateAfterProceed`` / ``createDecisionGraph``) as soon as the until
        condition holds where the loop starts: Flink cannot run the pattern, so it is refused."""
        original = self.original_state_map.get(proceed.name)
        if original is None:
            nots = ", ".join(repr(name) for _, name in self.current_not_conditions()) or "?"
            raise PatternError(
                f"stage {self.current.name!r}: an optional greedy loop with an until condition cannot follow a "
                f"not_followed_by stage ({nots}), directly or across optional stages; Flink CEP compiles it to a "
                "PROCEED edge without a target state and fails at run time once the until condition holds. "
                "Drop greedy() or optional(), or move the not_followed_by")
        return original

    def create_group_state(self, group: _P, sink: State, proceed: "State | None", optional: bool) -> State:
        proceed_cond = self.true_condition()
        saved = (self.current, self.following, self.group)
        last = self.group_body(group, sink)
        if optional:
            last.add(PROCEED, proceed, proceed_cond)
        self.current, self.following, self.group = saved
        return last

    def create_looping_group_state(self, group: _P, sink: State) -> State:
        proceed_cond = self.true_condition()
        saved = (self.current, self.following, self.group)
        dummy = self.create_state(group.name, NORMAL, take=True)
        last = self.group_body(group, dummy)
        last.add(PROCEED, sink, proceed_cond)
        dummy.add(PROCEED, last, proceed_cond)
        self.current, self.following, self.group = saved
        return last

    def group_body(self, group: _P, sink: State) -> State:
        """The states of one pass through ``group`` towards ``sink``; its first state. For an
        alternation, a branch state with a PROCEED edge into each alternative."""
        if group.alts is None:
            self.group = group
            self.current = group.raw
            last = self.create_middle_states(sink)
            return self.convert_pattern(last)
        strategy = group.strategy
        if self.head_of_group(group):
            # at the head of an enclosing group the alternatives start as that group does
            group.strategy = self.group.strategy if self.is_group_first_of_loop() else self.group.inner
        following = self.following
        self.group = group
        heads = []
        for raw in group.alts:
            self.current, self.following = raw, following
            last = self.create_middle_states(sink)
            heads.append(self.convert_pattern(last))
        group.strategy = strategy
        self.current = group
        branch = self.create_state(group.name, NORMAL)
        cond = self.true_condition()
        for h in heads:
            branch.add(PROCEED, h, cond)
        branch.heads = heads
        return branch

    def create_looping(self, sink: State) -> State:
        cur = self.current
        if cur.is_group:
            return self.create_looping_group_state(cur, sink)
        until = cur.until
        ignore = self.extend_with_until(self.inner_ignore_condition(cur), until, False)
        take = self.extend_with_until(self.take_condition(cur), until, True)
        proceed_cond = self.true_condition()
        looping = self.create_state(cur.name, NORMAL, take=True)
        if "GREEDY" in cur.props:
            if until is not None:
                sink_copy = self.copy(sink)
                looping.add(PROCEED, sink_copy, c_and(proceed_cond, until))
                self.original_state_map[sink.name] = sink_copy
            looping.add(PROCEED, sink, c_and(proceed_cond, c_not(until)) if until is not None else proceed_cond)
            self.update_with_greedy_condition(sink, self.take_condition(cur))
        else:
            looping.add(PROCEED, sink, proceed_cond)
        looping.add(TAKE, looping, take)
        self.add_stop_state_to_looping(looping)
        if ignore is not None:
            ig = self.create_state(cur.name, NORMAL)
            ig.add(TAKE, looping, take)
            ig.add(IGNORE, ig, ignore)
            looping.add(IGNORE, ig, ignore)
            self.add_stop_state_to_looping(ig)
        return looping

    # -- conditions
    @staticmethod
    def extend_with_until(cond: "Expr | None", until: "Expr | None", is_take: bool) -> "Expr | None":
        if until is not None and cond is not None:
            return c_and(c_not(until), cond)
        if until is not None and is_take:
            return c_not(until)
        return cond

    def _group_until(self) -> "Expr | None":
        return self.group.until if self.group is not None else None

    def _strategy_condition(self, p: _P, strategy: str) -> "Expr | None":
        if strategy == STRICT:
            cond = None
        elif strategy == SKIP_TILL_NEXT:
            cond = c_not(p.take_condition())
        elif strategy == SKIP_TILL_ANY:
            cond = TRUE
        else:
            cond = None
        gu = self._group_until()
        if gu is not None:
            cond = self.extend_with_until(cond, gu, False)
        return cond

    def inner_ignore_condition(self, p: _P) -> "Expr | None":
        strategy = p.inner
        if self.head_of_group(p):
            strategy = self.group.inner
        return self._strategy_condition(p, strategy)

    def ignore_condition(self, p: _P) -> "Expr | None":
        strategy = p.strategy
        if self.head_of_group(p):
            strategy = self.group.strategy if self.is_group_first_of_loop() else self.group.inner
        return self._strategy_condition(p, strategy)

    def take_condition(self, p: _P) -> Expr:
        cond = p.take_condition()
        gu = self._group_until()
        if gu is not None:
            cond = self.extend_with_until(cond, gu, True)
        return cond

    def true_condition(self) -> Expr:
        gu = self._group_until()
        return self.extend_with_until(TRUE, gu, True) if gu is not None else TRUE

    @staticmethod
    def update_with_greedy_condition(state: State, take: Expr) -> None:
        for tr in state.transitions:
            tr[2] = c_and(tr[2], c_not(take))


# ---------------------------------------------------------------------------- the program
@dataclass
class NFAProgram:
    """A compiled pattern: immutable tables, shared by every key and batch."""

    state_names: list[str]
    state_kind: np.ndarray      # int8: NORMAL / FINAL / STOP / PENDING
    state_stage: np.ndarray     # int32: index into stage_names (-1 for the final state)
    start_state: int
    trans_ptr: np.ndarray       # int32 [n_states + 1]: CSR offsets into the transition arrays
    trans_action: np.ndarray    # int8
    trans_target: np.ndarray    # int32
    trans_cond: np.ndarray      # int32: condition id, -1 = always true
    conditions: list[Expr]      # condition id -> expression
    stage_names: list[str]      # node "page" names: the user's stage names (groups flattened)
    pattern: Pattern
    state_window: tuple = ()    # per state: Flink's windowTimes (the most time from a run's previous taken
                                # event, as the pattern gives it: a duration or column units), or None

    @property
    def has_gap_windows(self) -> bool:
        """Whether some state bounds the time since a run's previous event (Flink's
        PREVIOUS_AND_CURRENT windows and ``times(n, window)``)."""
        return any(w is not None for w in self.state_window)

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    def describe(self) -> str:
        """A readable dump of the automaton (for debugging and docs)."""
        lines = []
        for s, name in enumerate(self.state_names):
            tag = KIND_NAMES[self.state_kind[s]] + (" start" if s == self.start_state else "")
            lines.append(f"{s}: {name} [{tag}]")
            for t in range(self.trans_ptr[s], self.trans_ptr[s + 1]):
                c = self.trans_cond[t]
                cond = "TRUE" if c < 0 else repr(self.conditions[c])
                lines.append(f"    {ACTION_NAMES[self.trans_action[t]]} -> {self.trans_target[t]} if {cond}")
        return "\n".join(lines)


def compile_pattern(pattern: Pattern) -> NFAProgram:
    """Check ``pattern`` against Flink's rules and build its NFA^b tables."""
    if not isinstance(pattern, Pattern) or not pattern.stages:
        raise PatternError("compile_pattern() needs a non-empty colcep Pattern")
    try:
        _check_rules(pattern)
        comp = _Compiler(_to_chain(pattern), pattern.window is not None)
        start = comp.compile()
    except RecursionError:
        raise PatternError("the pattern is nested too deeply to compile (groups within groups, or a long run of "
                           "optional stages behind a not_followed_by)") from None
    states = comp.states
    index = {id(s): i for i, s in enumerate(states)}
    stage_names = pattern.stage_names()
    stage_index = {n: i for i, n in enumerate(stage_names)}
    cond_ids: dict = {}
    conditions: list[Expr] = []
    ptr, act, tgt, cnd = [0], [], [], []
    for s in states:
        for action, target, cond in s.transitions:
            act.append(action)
            tgt.append(index[id(target)])
            if cond.op == "true":
                cnd.append(-1)
            else:
                k = cond.key()
                if k not in cond_ids:
                    cond_ids[k] = len(conditions)
                    conditions.append(cond)
                cnd.append(cond_ids[k])
        ptr.append(len(act))
    _check_gap_windows(pattern, states)
    return NFAProgram(
        state_names=[s.name for s in states],
        state_kind=np.array([s.kind for s in states], np.int8),
        state_stage=np.array([stage_index.get(s.stage, -1) for s in states], np.int32),
        start_state=index[id(start)],
        trans_ptr=np.array(ptr, np.int32),
        trans_action=np.array(act, np.int8),
        trans_target=np.array(tgt, np.int32),
        trans_cond=np.array(cnd, np.int32),
        conditions=conditions,
        stage_names=stage_names,
        pattern=pattern,
        state_window=tuple(s.window for s in states),
    )


def _check_gap_windows(pattern: Pattern, states: list[State]) -> None:
    """Flink's ``checkPatternWindowTimes``: no window between events longer than the whole
    pattern's (compared where both are durations or both integers; else when bound to a time
    unit); and a warning where a previous-and-current window has no effect, as in Flink: on a
    quantified stage (``times(..., within=)`` bounds those)."""
    w = pattern.window
    if w is not None:
        for s in states:
            if s.window is not None and isinstance(s.window, int) == isinstance(w, int) and \
                    parse_duration(s.window) > parse_duration(w):
                raise PatternError(
                    f"the window between the previous and the current event of stage {s.stage!r} ({s.window!r}) "
                    f"is longer than the pattern's window between its first and last event ({w!r})")
    ignored = sorted({st.name for st in _all_stages(pattern) if st.gap is not None and st.quantifier.kind != "single"})
    if ignored:
        warnings.warn(f"within(..., between='previous_and_current') on quantified stage(s) {ignored} has no effect (as "
                      "in Flink CEP); times(..., within=) / one_or_more(within=) bound the gaps of a quantified stage",
                      ColcepWarning, stacklevel=4)


def _all_stages(p: Pattern) -> Iterator[Stage]:
    for st in p.stages:
        yield st
        for child in st.children:
            yield from _all_stages(child)


def _check_rules(pattern: Pattern, inner: bool = False, names: "set[str] | None" = None) -> None:
    """The rules Flink checks when a pattern is built or compiled, on the whole chain (a
    group's or alternative's conditions may read every stage of the pattern, ``names``)."""
    stages = pattern.stages
    if not inner:
        if stages[0].is_negation:
            raise PatternError("a pattern cannot begin with a NOT stage")
        if ENDING_STATE_NAME in stage_name_set(pattern):
            raise PatternError(f"{ENDING_STATE_NAME!r} is reserved and cannot be a stage name")
    if names is None:
        names = set(pattern.stage_names())
    for i, st in enumerate(stages):
        if st.is_negation and st.is_group:
            raise PatternError(f"{st.describe()}: a NOT stage cannot be a group")
        for child in st.children:
            _check_rules(child, inner=True, names=names)
        if st.is_group and st.quantifier.kind == "looping" and any(can_be_empty(c) for c in st.children):
            # its loop would be a cycle of PROCEED edges: Flink never returns from it (the compiler's
            # copy of states past a NOT recurses forever, the NFA loops without consuming events)
            raise PatternError(
                f"{st.describe()} can repeat without taking any event (a looping group whose stages are all "
                "optional); make at least one stage of the group non-optional")
        for e, what in ((st.condition, "condition"), (st.until, "until condition")):
            if e is None:
                continue
            for ref in e.stages():
                if ref not in names:
                    raise PatternError(f"the {what} of {st.describe()} aggregates over unknown stage {ref!r}; "
                                       f"stages are {sorted(names)}")
    if inner and stages[-1].is_negation:
        raise PatternError(f"a group pattern cannot end with a NOT stage ({stages[-1].describe()})")
    if not inner:
        sk = pattern.skip_strategy
        if sk.stage is not None and sk.stage not in names:
            raise PatternError(f"the skip strategy names stage {sk.stage!r}, which is not in the pattern; "
                               f"stages are {sorted(names)}")
