"""A plain-Python reference of the matching algorithm: Flink CEP's NFA, written with objects.

It runs the same compiled program (``colcep.engine.compiler``) as the Numba engine but keeps every
structure as Flink does: ``DeweyNumber`` tuples, a shared buffer of nodes keyed by (event,
stage) whose edges carry versions and reference counts, computation states in a
``java.util.PriorityQueue`` emulation (iteration follows the heap's array layout), and
conditions that read the partial match by extracting it from the buffer
(``getEventsForPattern``). It is slow and simple on purpose: the engine's tests compare
against it, and it answers "what would Flink do" for cases outside the corpus.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from colcep.durations import to_units
from colcep.engine.compiler import FINAL, IGNORE, PENDING, PROCEED, STOP, NFAProgram
from colcep.skip import NO_SKIP, SKIP_PAST_LAST_EVENT, SKIP_TO_FIRST, SKIP_TO_LAST, SKIP_TO_NEXT

MAX_TS = 2**63 - 1


# ----------------------------------------------------------------------------- Dewey numbers
def dewey_increase(v: tuple, n: int = 1) -> tuple:
    return v[:-1] + (v[-1] + n,)


def dewey_add_stage(v: tuple) -> tuple:
    return v + (0,)


def dewey_compatible(v: tuple, other: tuple) -> bool:
    """Flink's ``DeweyNumber.isCompatibleWith``: ``other`` is a prefix of ``v``, or both have
    the same length and prefix and ``v``'s last digit is >= ``other``'s."""
    if len(v) > len(other):
        return v[:len(other)] == other
    if len(v) == len(other):
        return v[:-1] == other[:-1] and v[-1] >= other[-1]
    return False


# ----------------------------------------------------------------------------- PriorityQueue
class JavaPriorityQueue:
    """``java.util.PriorityQueue`` (JDK 17) with its array layout, so that iteration order,
    ``poll`` ties and ``removeAll`` behave as in Flink."""

    def __init__(self, key):
        self.key = key
        self.es: list = []

    def _cmp(self, a, b) -> int:
        ka, kb = self.key(a), self.key(b)
        return (ka > kb) - (ka < kb)

    def add(self, x) -> None:
        es = self.es
        k = len(es)
        es.append(x)
        while k > 0:
            parent = (k - 1) >> 1
            e = es[parent]
            if self._cmp(x, e) >= 0:
                break
            es[k] = e
            k = parent
        es[k] = x

    def add_all(self, xs) -> None:
        for x in xs:
            self.add(x)

    def _sift_down(self, k, x, n) -> None:
        es = self.es
        half = n >> 1
        while k < half:
            child = (k << 1) + 1
            c = es[child]
            right = child + 1
            if right < n and self._cmp(c, es[right]) > 0:
                child = right
                c = es[child]
            if self._cmp(x, c) <= 0:
                break
            es[k] = c
            k = child
        es[k] = x

    def peek(self):
        return self.es[0] if self.es else None

    def poll(self):
        es = self.es
        if not es:
            return None
        result = es[0]
        x = es.pop()
        if es:
            self._sift_down(0, x, len(es))
        return result

    def remove_all(self, victims: list) -> None:
        if not victims:
            return
        es = self.es
        dead = [any(v == e for v in victims) for e in es]
        if not any(dead):
            return
        self.es = [e for e, d in zip(es, dead) if not d]
        n = len(self.es)
        for i in range((n >> 1) - 1, -1, -1):
            self._sift_down(i, self.es[i], n)

    def __iter__(self):
        return iter(list(self.es))

    def __len__(self) -> int:
        return len(self.es)


class HeldMatches:
    """The queue of completed matches waiting for earlier partial matches (Flink's
    ``NFAState.completedMatches``). Flink orders it by start event only and breaks ties by
    its heap layout; colcep (SEMANTICS.md, point 15) breaks them by the event that
    completed the match, then by the matches' event positions and stages."""

    def __init__(self, nfa: "ReferenceNFA"):
        self.nfa = nfa
        self.items: list = []  # (sort key, run)

    def _key(self, run: Run, end: int):
        path = self.nfa.buf.extract(run.prev, run.version)[0]
        return (run_key(run), end, [ev for ev, _ in path], len(path), [st for _, st in path])

    def add_all(self, runs, end: int) -> None:
        for r in runs:
            k = self._key(r, end)
            i = len(self.items)
            while i > 0 and self.items[i - 1][0] > k:
                i -= 1
            self.items.insert(i, (k, r))

    def peek(self):
        return self.items[0][1] if self.items else None

    def poll(self):
        return self.items.pop(0)[1]

    def __iter__(self):
        return iter([r for _, r in self.items])

    def remove_all(self, victims: list) -> None:
        self.items = [(k, r) for k, r in self.items if not any(v == r for v in victims)]


class FlinkHeldMatches(JavaPriorityQueue):
    """Flink's own ``completedMatches``: a ``java.util.PriorityQueue`` by start event, ties in
    its heap's order (colcep's one deliberate divergence, SEMANTICS.md point 15)."""

    def __init__(self, nfa: "ReferenceNFA"):
        super().__init__(run_key)

    def add_all(self, runs, end: int) -> None:       # noqa: ARG002 - Flink ignores where a match ends
        super().add_all(runs)


# ----------------------------------------------------------------------------- runs and buffer
@dataclass(frozen=True)
class Run:
    """Flink's ComputationState."""

    state: int
    prev: Any          # node id (event position, stage index) or None
    version: tuple
    start_ts: int
    start_event: Any   # event position or None (the start state)
    prev_ts: int = -1  # Flink's previousTimestamp: the time of the run's last taken event


def run_key(r: Run):
    # NFAState.COMPUTATION_STATE_COMPARATOR: by start event (timestamp, id); start states last
    if r.start_event is None:
        return (MAX_TS, MAX_TS)
    return (r.start_ts, r.start_event)


class Node:
    __slots__ = ("edges", "ref")

    def __init__(self):
        self.edges: list = []  # [target node id or None, version, refcount]
        self.ref = 0


class SharedBuffer:
    """Flink's SharedBuffer + SharedBufferAccessor: nodes keyed by (event, stage)."""

    def __init__(self):
        self.nodes: dict = {}

    def put(self, stage: int, event: int, prev, version: tuple):
        if prev is not None:
            self.lock(prev, version)
        nid = (event, stage)
        node = self.nodes.get(nid)
        if node is None:
            node = self.nodes[nid] = Node()
        node.edges.append([prev, version, 0])
        return nid

    def lock(self, nid, version: tuple) -> None:
        node = self.nodes.get(nid)
        if node is not None:
            node.ref += 1
            for e in node.edges:
                if dewey_compatible(version, e[1]):
                    e[2] += 1

    def release(self, nid, version: tuple) -> None:
        stack = [(nid, version)]
        while stack:
            cur, ver = stack.pop()
            node = self.nodes.get(cur)
            if node is None:
                break
            keep = []
            for e in node.edges:
                if dewey_compatible(ver, e[1]):
                    e[2] -= 1
                    if e[2] <= 0:
                        if e[0] is not None:
                            stack.append((e[0], e[1]))
                        continue
                keep.append(e)
            node.edges = keep
            node.ref -= 1
            if node.ref <= 0:
                del self.nodes[cur]

    def extract(self, nid, version: tuple) -> list[list]:
        """Every path back from ``nid`` along version-compatible edges (Flink's
        ``extractPatterns``), each as a list of node ids from the first event on."""
        if nid not in self.nodes:
            return []
        result = []
        stack = [(nid, version, [])]
        while stack:
            cur, ver, path = stack.pop()
            if cur is None:
                result.append(list(reversed(path)))
                continue
            path.append(cur)
            first = True
            for target, ev, _ in self.nodes[cur].edges:
                if dewey_compatible(ver, ev):
                    new_path = path if first else list(path)
                    first = False
                    stack.append((target, ev, new_path))
        return result


# ----------------------------------------------------------------------------- conditions
def _num(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def eval_expr(e, event: dict, match: "dict | None") -> Any:
    """Evaluate an expression for ``event`` given the partial match (stage -> events)."""
    op, a = e.op, e.args
    if op == "true":
        return True
    if op == "col":
        return _num(event.get(a[0]))
    if op == "lit":
        return a[0]
    if op == "agg":
        func, fld, stages = a
        evs = []
        for s in stages:
            evs.extend((match or {}).get(s, []))
        evs.sort(key=lambda x: x["__pos"])
        vals = ([_num(x.get(fld)) if isinstance(fld, str) else _num(eval_expr(fld, x, None)) for x in evs]
                if fld is not None else [1.0] * len(evs))
        vals = [v for v in vals if v is not None]
        if func == "count":
            return float(len(evs))
        if func == "sum":
            return float(sum(vals))
        if not vals:
            return None
        return {"avg": lambda: sum(vals) / len(vals), "min": lambda: min(vals), "max": lambda: max(vals),
                "first": lambda: vals[0], "last": lambda: vals[-1]}[func]()
    if op == "prev":       # the key's k-th earlier event, from the events before this one ("__history")
        hist = event.get("__history") or []
        return _num(eval_expr(a[0], hist[-a[1]], None)) if len(hist) >= a[1] else None
    if op == "arith":
        x, y = eval_expr(a[1], event, match), eval_expr(a[2], event, match)
        if x is None or y is None:
            return None
        if a[0] == "+":
            return x + y
        if a[0] == "-":
            return x - y
        if a[0] == "*":
            return x * y
        if y == 0:
            q = math.inf if x > 0 else -math.inf if x < 0 else None
        else:
            q = x / y
        if a[0] == "quot" and q is not None and math.isfinite(q):
            return float(math.trunc(q))          # SQL's integer division: toward zero
        return q
    if op == "cmp":
        x, y = eval_expr(a[1], event, match), eval_expr(a[2], event, match)
        if x is None or y is None:
            return False
        return {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[a[0]]
    if op == "and":
        return bool(eval_expr(a[0], event, match)) and bool(eval_expr(a[1], event, match))
    if op == "or":
        return bool(eval_expr(a[0], event, match)) or bool(eval_expr(a[1], event, match))
    if op == "not":
        return not bool(eval_expr(a[0], event, match))
    if op == "isin":
        x = eval_expr(a[0], event, match)
        return x is not None and x in a[1]
    if op == "isnull":
        return eval_expr(a[0], event, match) is None
    raise ValueError(op)


# ----------------------------------------------------------------------------- the NFA
class ReferenceNFA:
    """One key's NFA: Flink's ``NFA`` + ``NFAState`` + the operator's per-event driving."""

    def __init__(self, prog: NFAProgram, window: int, events: list[dict], timeouts: bool = False,
                 held: str = "colcep", unit: str = "ms"):
        self.p = prog
        self.window = window
        # Flink's windowTimes: per state, the most time from a run's previous taken event (0: none)
        self.gaps = [0 if w is None else to_units(w, unit, "window") for w in prog.state_window]
        self.events = events  # global event list (position -> event dict with "__pos", "__ts")
        self.handle_timeout = timeouts
        self.buf = SharedBuffer()
        self.partial = JavaPriorityQueue(run_key)
        self.partial.add(Run(prog.start_state, None, (1,), -1, None))
        self.completed = (HeldMatches if held == "colcep" else FlinkHeldMatches)(self)
        self.skip_code = prog.pattern.skip_strategy.code
        sk = prog.pattern.skip_strategy.stage
        self.skip_stage = prog.stage_names.index(sk) if sk is not None else -1

    # -- helpers
    def kind(self, s: int) -> int:
        return int(self.p.state_kind[s])

    def transitions(self, s: int):
        p = self.p
        for t in range(p.trans_ptr[s], p.trans_ptr[s + 1]):
            yield int(p.trans_action[t]), int(p.trans_target[t]), int(p.trans_cond[t])

    def current_match(self, r: Run) -> dict:
        if r.prev is None:
            return {}
        paths = self.buf.extract(r.prev, r.version)
        if not paths:
            return {}
        if len(paths) != 1:
            raise AssertionError("a partial match extracts to more than one path")
        return self.materialize(paths[0])

    def materialize(self, path: list) -> dict:
        out: dict = {}
        for ev, st in path:
            out.setdefault(self.p.stage_names[st], []).append(self.events[ev])
        return out

    def match_ids(self, path: list) -> dict:
        out: dict = {}
        for ev, st in path:
            out.setdefault(self.p.stage_names[st], []).append(ev)
        return out

    # -- per event
    def advance_time(self, ts: int, pos: int) -> tuple[list, list]:
        matches, timed_out = [], []
        new_partial = JavaPriorityQueue(run_key)
        potential = JavaPriorityQueue(run_key)
        for r in self.partial:
            gap = self.gaps[r.state]
            by_gap = r.state != self.p.start_state and gap > 0 and ts - r.prev_ts >= gap
            by_window = r.state != self.p.start_state and self.window > 0 and ts - r.start_ts >= self.window
            if by_gap or by_window:
                if self.kind(r.state) == PENDING:
                    potential.add(r)
                    continue
                if self.handle_timeout:
                    paths = self.buf.extract(r.prev, r.version) if r.prev is not None else []
                    when = r.prev_ts + gap if by_gap else r.start_ts + self.window
                    timed_out.append((self.match_ids(paths[0]) if paths else {}, when))
                self.buf.release(r.prev, r.version)
            else:
                new_partial.add(r)
        self.process_completed(potential, new_partial, matches, pos)
        self.partial = new_partial
        return matches, timed_out

    def process(self, pos: int) -> list:
        event = self.events[pos]
        new_partial = JavaPriorityQueue(run_key)
        potential = JavaPriorityQueue(run_key)
        for r in self.partial:
            new_states = self.compute_next(r, pos, event)
            retain = []
            discard = False
            for ns in new_states:
                k = self.kind(ns.state)
                if k == FINAL:
                    potential.add(ns)
                elif k == STOP:
                    discard = True
                    self.buf.release(ns.prev, ns.version)
                else:
                    retain.append(ns)
            if discard:
                for ns in retain:
                    self.buf.release(ns.prev, ns.version)
            else:
                new_partial.add_all(retain)
        matches: list = []
        self.process_completed(potential, new_partial, matches, pos)
        self.partial = new_partial
        return matches

    def process_completed(self, potential, partial, out: list, end: int) -> None:
        self.completed.add_all(potential, end)
        while (m := self.completed.peek()) is not None:
            if self.skip_code != NO_SKIP:
                e = partial.peek()
                if e is not None and run_key(m) > run_key(e):
                    break
            self.completed.poll()
            paths = self.buf.extract(m.prev, m.version)
            self.prune(partial, paths)
            self.prune(self.completed, paths)
            out.append(self.match_ids(paths[0]))
            self.buf.release(m.prev, m.version)

    def prune(self, queue: JavaPriorityQueue, paths: list) -> None:
        pid = self.pruning_id(paths)
        if pid is None:
            return
        strict = self.skip_code in (SKIP_TO_FIRST, SKIP_TO_LAST)
        victims = []
        for r in queue:
            if r.start_event is not None and (r.start_event < pid if strict else r.start_event <= pid):
                self.buf.release(r.prev, r.version)
                victims.append(r)
        queue.remove_all(victims)

    def pruning_id(self, paths: list):
        code = self.skip_code
        if code == NO_SKIP:
            return None
        pid = None
        for path in paths:
            evs = [ev for ev, _ in path]
            if code == SKIP_TO_NEXT:
                cand = evs[0] if evs else None
                pid = cand if pid is None else min(pid, cand)
            elif code == SKIP_PAST_LAST_EVENT:
                cand = evs[-1] if evs else None
                pid = cand if pid is None else max(pid, cand)
            else:
                sel = [ev for ev, st in path if st == self.skip_stage]
                if sel:
                    cand = sel[0] if code == SKIP_TO_FIRST else sel[-1]
                    pid = cand if pid is None else max(pid, cand)
        return pid

    def check(self, cond: int, event: dict, ctx: dict, r: Run) -> bool:
        if cond < 0:
            return True
        e = self.p.conditions[cond]
        if "match" not in ctx and e.reads_match():
            ctx["match"] = self.current_match(r)
        return bool(eval_expr(e, event, ctx.get("match")))

    def compute_next(self, r: Run, pos: int, event: dict) -> list[Run]:
        ctx: dict = {}
        # createDecisionGraph: a DFS over PROCEED edges collecting TAKE / IGNORE edges
        edges = []
        n_take = n_ignore = 0
        stack = [r.state]
        while stack:
            s = stack.pop()
            for action, target, cond in self.transitions(s):
                if self.check(cond, event, ctx, r):
                    if action == PROCEED:
                        stack.append(target)
                    else:
                        edges.append((action, s, target))
                        if not (action == IGNORE and target == r.state):
                            if action == IGNORE:
                                n_ignore += 1
                            else:
                                n_take += 1
        take_to_visit = max(0, n_take - 1)
        ignore_to_visit = n_ignore
        take_to_skip = max(0, n_take - 1)
        out: list[Run] = []
        is_start = r.state == self.p.start_state
        for action, src, target in edges:
            if action == IGNORE:
                if not is_start:
                    if target == r.state:
                        version = dewey_increase(r.version, _self_increase(n_ignore, n_take))
                    else:
                        version = dewey_add_stage(dewey_increase(r.version, take_to_skip + ignore_to_visit))
                        ignore_to_visit -= 1
                    self.add_run(out, Run(target, r.prev, version, r.start_ts, r.start_event, r.prev_ts))
            else:
                cur_version = dewey_increase(r.version, take_to_visit)
                next_version = dewey_add_stage(cur_version)
                take_to_visit -= 1
                node = self.buf.put(int(self.p.state_stage[src]), pos, r.prev, cur_version)
                start_ts, start_ev = (event["__ts"], pos) if is_start else (r.start_ts, r.start_event)
                self.add_run(out, Run(target, node, next_version, start_ts, start_ev, event["__ts"]))
                final = self.final_after_proceed(target, event, ctx, r)
                if final is not None:
                    self.add_run(out, Run(final, node, next_version, start_ts, start_ev, event["__ts"]))
        if is_start:
            out.append(Run(r.state, None, dewey_increase(r.version, _self_increase(n_ignore, n_take)), -1, None))
        if r.prev is not None:
            self.buf.release(r.prev, r.version)
        return out

    def add_run(self, out: list, run: Run) -> None:
        out.append(run)
        self.buf.lock(run.prev, run.version)

    def final_after_proceed(self, state: int, event: dict, ctx: dict, r: Run):
        stack = [state]
        while stack:
            s = stack.pop()
            for action, target, cond in self.transitions(s):
                if action == PROCEED and self.check(cond, event, ctx, r):
                    if self.kind(target) == FINAL:
                        return target
                    stack.append(target)
        return None


def _self_increase(ignore: int, take: int) -> int:
    return 0 if take == 0 and ignore == 0 else ignore + max(1, take)


def run_reference(prog: NFAProgram, events: list[dict], key: "str | None", window: int,
                  timeouts: bool = False, held: str = "colcep", unit: str = "ms") -> tuple[list, list]:
    """Match ``events`` (dicts with the time in ``"__ts"``, in arrival order) one key at a time.

    Returns (matches, timed_out): each match maps stage -> event positions; each timed-out
    partial match is (stage -> positions, timeout timestamp). Keys are processed as Flink's
    keyed operator does: every event advances its own key's time, then the final watermark
    closes every key (in order of first appearance). ``held="flink"`` breaks ties among held
    matches as Flink's heap does (colcep's divergence, SEMANTICS.md point 15). The windows
    between events the program's states carry are taken in ``unit`` (the events' time unit).
    """
    nfas: dict = {}
    matches: list = []
    timed: list = []
    for pos, ev in enumerate(events):
        ev["__pos"] = pos
        k = ev.get(key) if key else None
        nfa = nfas.get(k)
        if nfa is None:
            nfa = nfas[k] = ReferenceNFA(prog, window, events, timeouts, held, unit)
        m, t = nfa.advance_time(ev["__ts"], pos)
        matches.extend(m)
        timed.extend(t)
        matches.extend(nfa.process(pos))
    for nfa in nfas.values():
        m, t = nfa.advance_time(MAX_TS, MAX_TS)
        matches.extend(m)
        timed.extend(t)
    return matches, timed
