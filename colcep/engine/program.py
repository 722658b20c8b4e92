"""The compiled program: everything derived from a Pattern, built once.

    prog = colcep.compile(pattern)       # immutable, picklable, fingerprinted
    m = colcep.Matcher(prog, key="symbol", time="ts")

A :class:`CompiledPattern` holds the NFA^b tables (``colcep.engine.compiler``), the lowered
conditions (``colcep.engine.conditions``: column masks and bytecode), the tables the kernel derives
from them (merging, waiting runs, DFS bounds, the start-mask rule), the string literals'
dictionary codes and a stable fingerprint. Matchers, Spark tasks and snapshots start from it;
nothing in it depends on the data (the window is resolved against the time column when a
Matcher binds its first batch).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from colcep.engine import conditions as cond
from colcep.engine.compiler import NFAProgram, compile_pattern
from colcep.errors import PatternError
from colcep.kernels import codes as kc
from colcep.kernels import graph as kgraph
from colcep.pattern import Pattern, with_key

# A key parks its waiting runs (kernels/park.py) from this many live runs on; below it, stepping
# them costs less than parking and waking them (kernels.nfa.run_batch's opts[9]).
PARK_MIN = 64

PROGRAM_VERSION = 1  # bump when the tables' meaning changes: snapshots record it in the fingerprint
_NO_GAP = np.zeros(0, np.int64)  # a program without windows between events


@dataclass(frozen=True, eq=False)
class CompiledPattern:
    """A pattern compiled for the kernels: read-only tables shared by every key, batch and task."""

    pattern: Pattern
    nfa: NFAProgram
    lowered: cond.Lowered
    literals: dict = field(repr=False)       # string literal -> its dictionary code (0..n-1)
    st_rel: np.ndarray = field(repr=False)   # (n_states, n_groups) uint8: V groups read from a state on
    st_merge: np.ndarray = field(repr=False)  # (n_states,) uint8: merging tried in that state
    sleep_cond: np.ndarray = field(repr=False)  # (n_states,) int64: the condition a waiting run waits for
    dfs_bounds: tuple = field(repr=False)     # (max DFS stack, max collected edges) per event
    start_rule: tuple | None = field(repr=False)  # ((mask row, negated), ...) or None: any row may start
    skip_code: int = 0
    skip_stage: int = -1
    fingerprint: str = ""

    @property
    def stage_names(self) -> list[str]:
        return self.nfa.stage_names

    @property
    def v_width(self) -> int:
        """Floats of a run's aggregate vector V (at least one)."""
        return max(1, self.lowered.v_width)

    def tables(self, gap: np.ndarray | None = None) -> tuple:
        """The program tables, ``kernels.nfa.run_batch``'s ``prog`` group; the last, ``gap``, the
        windows between consecutive events per state in time units (``Binding.gap``; empty: none)."""
        return self._tables + (_NO_GAP if gap is None or not self.nfa.has_gap_windows else gap,)

    @cached_property
    def _tables(self) -> tuple:
        p, lw = self.nfa, self.lowered
        return (p.state_kind, p.state_stage, p.start_state, p.trans_ptr, p.trans_action, p.trans_target,
                p.trans_cond, lw.cond_kind, lw.cond_a, lw.cond_b, lw.code, lw.consts, lw.vg_stage, lw.vg_col,
                lw.cond_thr, self.sleep_cond, self.st_rel, self.st_merge, self.dfs_bounds[0], self.dfs_bounds[1])

    def options(self, window: int, timeouts: bool, max_runs: int, max_nodes: int, tick_ts: int,
                max_out: int = 0, max_all_runs: int = 0) -> tuple:
        """``kernels.nfa.run_batch``'s ``opts`` group for this program, as int64s (one compiled
        signature): window, skip code and stage, timed-out output, the runs and nodes bounds, tick,
        the bounds on the call's output events and on the runs of all keys (0: none), and the
        live runs from which a key parks its waiting runs (``PARK_MIN``)."""
        return tuple(np.int64(x) for x in (window, self.skip_code, self.skip_stage, timeouts, max_runs, max_nodes,
                                           tick_ts, max_out, max_all_runs, PARK_MIN))

    def per_run(self, timeouts: bool) -> int:
        """Nodes (and work-array slots) the step kernel reserves per live run and event
        (``run_batch``'s ``per_run``: two per edge and one, twice that when merging)."""
        return (2 * int(self.dfs_bounds[1]) + 1) * (2 if self.merging(timeouts) else 1)

    def merging(self, timeouts: bool) -> bool:
        return self.skip_code == 0 and not timeouts and self._merges

    @cached_property
    def _merges(self) -> bool:
        return bool(self.st_merge.any())

    def start_mask(self, masks: np.ndarray, n: int) -> np.ndarray:
        """Rows at which the start run could take an event (a key with no live run skips the rest)."""
        if self.start_rule is None:
            return np.ones(n, np.uint8)
        out = np.zeros(n, np.uint8)
        for row, neg in self.start_rule:
            out |= masks[row] ^ np.uint8(neg)
        return out

    def describe(self) -> str:
        """The automaton, readable (for debugging and docs)."""
        return self.nfa.describe()

    def __repr__(self) -> str:
        return f"CompiledPattern({len(self.nfa.state_names)} states, stages {self.stage_names}, {self.fingerprint[:12]})"


def compile(pattern: "Pattern | CompiledPattern") -> CompiledPattern:  # noqa: A001 - colcep.compile
    """Compile ``pattern`` once (a CompiledPattern is returned as it is; a front-end's query, such
    as ``colcep.sase``'s, compiles its pattern)."""
    pattern, _ = with_key(pattern, None)
    if isinstance(pattern, CompiledPattern):
        return pattern
    if not isinstance(pattern, Pattern):
        raise PatternError(f"expected a colcep Pattern, got {type(pattern).__name__}")
    nfa = compile_pattern(pattern)
    literals: dict = {}
    lw = cond.lower(nfa.conditions, nfa.stage_names, literals)
    if nfa.has_gap_windows:  # a last V group holds a run's last taken time (kernels.nfa.advance_time)
        lw = replace(lw, vg_stage=np.append(lw.vg_stage, np.int32(-2)).astype(lw.vg_stage.dtype),
                     vg_col=np.append(lw.vg_col, -1).astype(lw.vg_col.dtype),
                     cond_groups=np.hstack([lw.cond_groups, np.zeros((lw.cond_groups.shape[0], 1),
                                                                    lw.cond_groups.dtype)]))
    st_rel, st_merge = cond.merge_tables(nfa, lw)
    sleep = kgraph.sleep_conditions(nfa.state_kind, nfa.trans_ptr, nfa.trans_action, nfa.trans_target,
                                  nfa.trans_cond, lw.cond_kind, lw.cond_a)
    if nfa.has_gap_windows:  # every run is stepped at every event: none waits, parks or merges
        sleep = np.full_like(sleep, -1)
        st_merge = np.zeros_like(st_merge)
    bounds = tuple(int(x) for x in kgraph.dfs_bounds(nfa.trans_ptr, nfa.trans_action, nfa.trans_target,
                                                    nfa.n_states))
    skip = pattern.skip_strategy
    skip_stage = nfa.stage_names.index(skip.stage) if skip.stage is not None else -1
    prog = CompiledPattern(pattern=pattern, nfa=nfa, lowered=lw, literals=dict(literals), st_rel=st_rel,
                           st_merge=st_merge, sleep_cond=sleep, dfs_bounds=bounds,
                           start_rule=_start_rule(nfa, lw), skip_code=int(skip.code), skip_stage=skip_stage)
    object.__setattr__(prog, "fingerprint", _fingerprint(prog))
    return prog


def _start_rule(p: NFAProgram, lw: cond.Lowered) -> tuple | None:
    """The masks whose union is where the start run can take an event (through PROCEED edges
    from the start state), or None when some such condition reads the match."""
    seen, stack, conds = set(), [p.start_state], []
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        for t in range(p.trans_ptr[s], p.trans_ptr[s + 1]):
            if p.trans_action[t] == kc.PROCEED:
                stack.append(int(p.trans_target[t]))
            elif p.trans_action[t] == kc.TAKE:
                conds.append(int(p.trans_cond[t]))
    rule = []
    for c in conds:
        neg = False
        while c >= 0 and lw.cond_kind[c] == kc.COND_NOT:
            c, neg = int(lw.cond_a[c]), not neg
        if c < 0 or lw.cond_kind[c] != kc.COND_MASK:
            return None
        rule.append((int(lw.cond_a[c]), bool(neg)))
    return tuple(rule)


def _fingerprint(prog: CompiledPattern) -> str:
    """A stable hash of everything that decides the matches: the tables, the conditions'
    structure, the literals' codes, the window and the skip strategy."""
    h = hashlib.sha256(f"colcep-program-v{PROGRAM_VERSION}".encode())

    def add(x: Any) -> None:
        if isinstance(x, np.ndarray):
            h.update(f"{x.dtype.str}{x.shape}".encode())
            h.update(np.ascontiguousarray(x).tobytes())
        else:
            h.update(repr(x).encode())
        h.update(b"\0")

    for t in prog.tables():
        add(t)
    lw = prog.lowered
    for e in lw.mask_exprs + lw.col_exprs:
        add(e.key())
    add(sorted(prog.literals.items()))
    add(prog.stage_names)
    add(prog.nfa.state_names)
    add(_window_key(prog.pattern.window))
    add((prog.skip_code, prog.skip_stage))
    return h.hexdigest()


def _window_key(w: Any) -> Any:
    if w is None or isinstance(w, (int, str)):
        return w
    if hasattr(w, "total_seconds"):
        return ("timedelta", w.days, w.seconds, w.microseconds)
    return repr(w)
