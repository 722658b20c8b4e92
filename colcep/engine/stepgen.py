"""The compiled step (tier ``"compiled"``): each pattern's per-key step written as straight-line
code, run by the one compiled driver.

The generic tier steps every key of a call through ``kernels.nfa._run_key``, which interprets the
automaton: a DFS over each state's edges read from tables, conditions through the bytecode VM,
every child a new V slot and a copy. Here a pattern's per-key step is *generated*: a Python
module whose ``run_key`` has ``_run_key``'s signature and protocol (the cursor, the statuses
NEED_ROOM / NEED_OUT / OVER_CAPACITY / INTERRUPTED, the same room and bound checks, matches
written through ``matches.flush_pending``), with one branch per state, its conditions inlined as
expressions. ``kernels.nfa.run_batch`` is the driver of both tiers, the step a first-class
function, compiled once for every pattern (``colcep.engine.steps``), so a pattern costs only
its step's compile.

The carried state between calls (runs, held matches, buffer, park) is the generic tier's, in the
same layout, so a state moves between the tiers at any batch boundary, snapshots are the same,
and a call that fails is undone the same way.

Constants are read from the program's ``consts`` array, not written into the code: patterns of
one shape (other thresholds, windows, multipliers) generate the same source, hence one module
and one compile. The module is a real file, ``cache_dir()/step/colcep_step_<source hash>_<kernel
hash>.py``, compiled once per machine (Numba's disk cache beside it); with ``JIT`` off
(``COLCEP_STEP_JIT=0``) it runs as plain Python with the driver (tests, debugging).

Every automaton is generated, negation included (but a state whose PROCEED closure collects over
``MAX_EDGES`` edges: :func:`unsupported`): for each state its PROCEED closure is unrolled at
generation time (the TAKE and IGNORE edges the generic step's DFS would collect, in its order,
each under the conditions on its way), every condition of a branch read once, as a local, before
any child is written. A run whose one edge is a TAKE (``next``) gives its V slot to its child; a
waiting state (TAKE under ``c``, IGNORE back under ``not c`` or true) is looked at only from the
event its scan found; the generic kernel's own functions hold matches back and release them
(``settle_matches``), park, wake and time out waiting runs, merge runs, and drop a waiting run
beside another of its start that always completes first (``matches.dominated``). The work arrays
keep the generic step's layout (the new list written in the other half; only the start run acts,
in place, when every listed run waits), so runs are looked at, dropped and merged at the same
events and the live partial matches are the generic tier's after every call. Negation as the
generic step does it: an edge into a STOP state (``not_next``, ``not_followed_by``) discards what
the run made at the event, a PENDING run (a trailing ``not_followed_by``) completes when its
window passes.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from types import ModuleType
from typing import Any, Callable


from colcep.engine import kernel_cache as cache
from colcep.engine import codegen, steps
from colcep.engine.program import CompiledPattern
from colcep.kernels import codes as kc
from colcep.kernels import nfa as knfa
from colcep.kernels import park as kpark
from colcep.kernels import vm as kvm

GENERATOR_VERSION = 2  # bump when the generated code changes meaning
MODULE_PREFIX = "colcep_step_"
_SELF = hashlib.sha256(cache._read(__file__, globals().get("__loader__"))).digest()


# ----------------------------------------------------------------------------- what is generated
MAX_EDGES = 64  # a state whose PROCEED closure collects more edges runs on the generic kernel


class _Unwritable(Exception):
    pass


def _edges(prog: CompiledPattern, s: int) -> list[tuple[int, int, int]]:
    p = prog.nfa
    return [(int(p.trans_action[t]), int(p.trans_target[t]), int(p.trans_cond[t]))
            for t in range(p.trans_ptr[s], p.trans_ptr[s + 1])]


def _kind(prog: CompiledPattern, s: int) -> int:
    return int(prog.nfa.state_kind[s])


def _closure(prog: CompiledPattern, s: int) -> list[tuple[tuple[int, ...], int, int, int, int]]:
    """The TAKE and IGNORE edges the generic step's DFS over PROCEED edges collects from state
    ``s``, in its order: (the PROCEED conditions on the way, action, source, target, condition)."""
    out: list = []
    stack: list = [(s, ())]
    pushed = 0
    while stack:
        st, guards = stack.pop()
        for act, tgt, c in _edges(prog, st):
            if act == kc.PROCEED:
                stack.append((tgt, guards + (c,)))
                pushed += 1
            else:
                out.append((guards, act, st, tgt, c))
            if pushed + len(out) > MAX_EDGES:
                raise _Unwritable(f"a state whose PROCEED closure has over {MAX_EDGES} edges")
    return out


def _to_final(prog: CompiledPattern, tgt: int) -> list[tuple[int, ...]]:
    """The PROCEED paths (their conditions) from ``tgt`` to the final state: a run that takes an
    event into ``tgt`` also completes where one holds (the generic step's second variant)."""
    out: list = []
    stack: list = [(tgt, ())]
    while stack:
        st, guards = stack.pop()
        for act, t2, c in _edges(prog, st):
            if act == kc.PROCEED:
                if _kind(prog, t2) == kc.FINAL:
                    out.append(guards + (c,))
                else:
                    stack.append((t2, guards + (c,)))
            if len(out) + len(stack) > MAX_EDGES:
                raise _Unwritable(f"a state whose PROCEED closure has over {MAX_EDGES} edges")
    return out


def _waits(prog: CompiledPattern, s: int) -> bool:
    return int(prog.sleep_cond[s]) >= 0


def _simple_next(prog: CompiledPattern, s: int) -> bool:
    """A state whose one edge is a TAKE (``next``: this event or never)."""
    e = _edges(prog, s)
    return len(e) == 1 and e[0][0] == kc.TAKE


def _first_threshold(prog: CompiledPattern, s: int) -> bool:
    """Whether ``s`` may be one of ``matches.first_threshold_states`` (decided at run time, by
    the options): a waiting state on a plain threshold whose TAKE completes the match."""
    return (_threshold(prog, s) is not None
            and any(a == kc.TAKE and _kind(prog, t) == kc.FINAL for a, t, _ in _edges(prog, s)))


def _threshold(prog: CompiledPattern, s: int) -> tuple[int, int, int, int] | None:
    """The plain threshold a waiting run in ``s`` parks on (``park.park_table``'s, where runs do
    not merge): (event column, operator, its program's bounds in ``code``), or None (a
    conjunction, or no threshold)."""
    lw = prog.lowered
    pk_idx, pk_col, pk_op, pk_t0, pk_t1, pk_full = kpark.park_table.py_func(
        prog.nfa.state_kind, prog.sleep_cond, lw.cond_kind, lw.cond_a, lw.cond_b, lw.cond_thr, lw.code,
        prog.st_merge, False)
    i = int(pk_idx[s])
    if i < 0 or pk_full[i] != 0:
        return None
    return int(pk_col[i]), int(pk_op[i]), int(pk_t0[i]), int(pk_t1[i])


def _heap_key(prog: CompiledPattern, s: int, voff: str) -> str:
    """``park.threshold_key`` of a run in ``s`` whose V is at ``v[voff]``, as an expression."""
    _, op, t0, t1 = _threshold(prog, s)
    thr = codegen.translate_value(prog.lowered.code, prog.lowered.consts, t0, t1, literal=False, voff=voff)
    return thr if op in (kvm.C_GT, kvm.C_GE) else f"-({thr})"


_MEMO: OrderedDict = OrderedDict()  # (what, program fingerprint, JIT) -> unsupported's answer, the source, the name
_MEMO_LOCK = threading.Lock()  # ("auto" loads steps on threads of its own)
MEMO_SIZE = 256  # programs remembered: a stream's tasks restore a Matcher per key and batch


def _memo(what: str, prog: CompiledPattern, make: Callable[[CompiledPattern], Any]) -> Any:
    """``make(prog)``, remembered for programs of the same fingerprint (the same tables and
    conditions, hence the same answer and source), the least recently used forgotten first."""
    key = (what, prog.fingerprint, codegen.JIT)
    with _MEMO_LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    got = make(prog)  # (outside the lock: two threads may both make it, alike)
    with _MEMO_LOCK:
        _MEMO[key] = got
        if len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return got


def unsupported(prog: CompiledPattern) -> str | None:
    """Why this generator cannot write ``prog``'s step yet (None: it can, for any options)."""
    return _memo("unsupported", prog, _unsupported)


def _unsupported(prog: CompiledPattern) -> str | None:
    p = prog.nfa
    for s in range(p.n_states):
        kind = _kind(prog, s)
        if kind in (kc.FINAL, kc.STOP):  # (no run is listed in a STOP state: reaching it discards)
            continue
        try:
            edges = _closure(prog, s)
            for _, act, _, tgt, _ in edges:
                if _kind(prog, tgt) == kc.STOP and act != kc.TAKE:
                    return "a negation reached by an edge other than a take"
                if act == kc.TAKE:
                    _to_final(prog, tgt)
        except _Unwritable as e:
            return str(e)
        if _waits(prog, s) or _simple_next(prog, s):  # (written by _waiting_step / _take)
            e = _edges(prog, s)
            acts = sorted(a for a, _, _ in e)
            pending = kind == kc.PENDING and acts == sorted([kc.PROCEED, kc.IGNORE]) and all(
                c >= 0 for a, _, c in e if a == kc.IGNORE)
            if not pending and (kind != kc.NORMAL or acts not in ([kc.TAKE], sorted([kc.TAKE, kc.IGNORE])) or any(
                    _kind(prog, t) == kc.STOP for _, t, _ in e)):
                return "a waiting state of another form"
    return None


class _Conds:
    """A branch's conditions, each evaluated once (a local ``cv<c>``; ``not c`` reuses ``c``)."""

    def __init__(self, prog: CompiledPattern):
        self.prog = prog
        self.names: dict[int, str] = {}
        self.lines: list[str] = []

    def ref(self, c: int) -> str:
        if c < 0:
            return "True"
        inner, neg = codegen._strip_not(self.prog.lowered, c)
        name = self.names.get(inner)
        if name is None:
            name = self.names[inner] = f"cv{inner}"
            self.lines.append(f"{name} = {_cond_expr(self.prog, inner)}")
        return f"(not {name})" if neg else name

    def all_of(self, cs: tuple[int, ...]) -> str:
        refs = [r for r in (self.ref(c) for c in cs) if r != "True"]
        return " and ".join(refs) if refs else "True"

    def any_of(self, paths: list[tuple[int, ...]]) -> str:
        alts = [self.all_of(x) for x in paths]
        if "True" in alts:
            return "True"
        return " or ".join(f"({a})" for a in alts) if alts else "False"


def _cond_expr(prog: CompiledPattern, c: int) -> str:
    """Condition ``c`` (-1: true) for the event ``row`` and the V at ``v[voff]``, as an expression
    (constants read from ``consts``: one source per shape)."""
    if c < 0:
        return "True"
    lw = prog.lowered
    inner, neg = codegen._strip_not(lw, c)
    if lw.cond_kind[inner] == kc.COND_MASK:
        return f"(masks[{int(lw.cond_a[inner])}, row] {'==' if neg else '!='} 0)"
    try:
        e = codegen.translate(lw.code, lw.consts, int(lw.cond_a[inner]), int(lw.cond_b[inner]), literal=False)
    except codegen._Untranslatable:
        e = (f"eval_program(code, {int(lw.cond_a[inner])}, {int(lw.cond_b[inner])}, consts, row, masks, cols, v, "
             "voff, vm_stack)")
    return f"(not {e})" if neg else e


def _indent(lines: list[str], n: int = 4) -> list[str]:
    return [" " * n + x for x in lines]


def _guarded(cond: str, lines: list[str]) -> list[str]:
    if cond == "True":
        return lines
    if cond == "False":
        return []
    return [f"if {cond}:"] + _indent(lines)


def _child_wake(prog: CompiledPattern, tgt: int, voff: str, sts: str) -> list[str]:
    """The next event a run that just entered state ``tgt`` must see (the generic step's rule):
    the next one; none while it is parked (it parks after this step); for a state whose waiting
    run may be dropped beside another of its start (``first_thr``), the next one; for a waiting
    state, the first at which its condition holds (``conds.next_event``'s scan)."""
    out = ["wake = jc + 1"]
    if _waits(prog, tgt):
        out += [f"if parking and pk_idx[{tgt}] >= 0:",
                "    wake = BIG"]
        if _first_threshold(prog, tgt):
            out += [f"elif first_thr[{tgt}] != 0:",
                    "    pass  # scanned at the next event, unless a later run of its start drops it first"]
        out += ["else:",
                f"    wake = {_scan_call(prog, int(prog.sleep_cond[tgt]), voff, 'jc + 1', sts)}"]
    return out + ["W_wake[w] = wake",
                  "if wake < min_wake:",
                  "    min_wake = wake"]


def _scan_call(prog: CompiledPattern, c: int, voff: str, j: str, sts: str) -> str:
    """``conds.next_event`` for waiting condition ``c`` from event ``j``: the module's scan of it
    where the condition is written out (:func:`_scan`), else the generic one."""
    if _scan(prog, c) is not None:
        return f"scan_{c}(code, consts, masks, cols, W_v, {voff}, order, row_lo, {j}, n_rows, ts, last_time({sts}, window))"
    return (f"next_event({c}, cond_kind, cond_a, cond_b, cond_thr, code, consts, masks, cols, W_v, {voff}, vm_stack, "
            f"order, row_lo, {j}, n_rows, ts, last_time({sts}, window))")


def _scan(prog: CompiledPattern, c: int) -> list[str] | None:
    """``conds.next_event`` for condition ``c`` as a function of the module, its test written out
    (no bytecode VM per event, no condition tables passed): the same three cases (a mask, a
    column against a threshold computed once, a program), the same horizon; None where the
    condition's program is not translated."""
    lw = prog.lowered
    inner, neg = codegen._strip_not(lw, c)
    pre: list[str] = []
    if lw.cond_kind[inner] == kc.COND_MASK:
        test = f"masks[{int(lw.cond_a[inner])}, row] != 0"
    else:
        x, op, t0, t1 = (int(q) for q in lw.cond_thr[inner, :4])
        try:
            if x >= 0:  # column <op> threshold
                thr = codegen.translate_value(lw.code, lw.consts, t0, t1, literal=False)
                pre = [f"thr = {thr}"] + ([] if neg else ["if thr != thr:", "    return BIG"])
                test = codegen.compare_expr(op, f"cols[{x}, row]", "thr")
            else:
                test = codegen.translate(lw.code, lw.consts, int(lw.cond_a[inner]), int(lw.cond_b[inner]),
                                         literal=False)
        except codegen._Untranslatable:
            return None
    return ["", "", '@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)',
            f"def scan_{c}(code, consts, masks, cols, v, voff, order, row_lo, j, n_rows, ts, last_t):",
            "    if n_rows > j + SCAN_AHEAD:",
            "        n_rows = j + SCAN_AHEAD"] + _indent(pre) + [
            "    while j < n_rows:",
            "        row = order[row_lo + j]",
            "        if ts[row] > last_t:",
            "            return BIG",
            f"        if {'not ' if neg else ''}({test}):",
            "            return j",
            "        j += 1",
            "    return n_rows"]


def _match(node: str, sts: str, spos: str) -> list[str]:
    return [f"p_node[npot] = {node}", f"p_sts[npot] = {sts}", f"p_spos[npot] = {spos}", "npot += 1"]


def _lean(prog: CompiledPattern) -> dict[int, tuple[int, ...]] | None:
    """The V fields the pattern's programs read, per group, where only those need be kept: a
    child's V copies them alone and an event taken updates them alone (the other fields of a
    run's V are then stale, never read). None where the whole V is kept: runs may merge
    (``merge.merge_runs`` compares whole groups; never under a skip strategy)."""
    if prog.merging(timeouts=False):
        return None
    fields = codegen.v_fields_read(prog.lowered.code)
    if fields is not None and prog.nfa.has_gap_windows:  # (the time of a run's last taken event)
        fields = {**fields, _time_group(prog): (0, 1)}
    return fields


def _time_group(prog: CompiledPattern) -> int:
    """The V group that keeps a run's last taken time where the pattern has windows between
    consecutive events (the last one: ``program.compile``)."""
    return len(prog.lowered.vg_stage) - 1


def _v_copy(prog: CompiledPattern, dst: str, src: str) -> list[str]:
    """The V at ``W_v[src]`` copied to ``W_v[dst]``: the fields read (:func:`_lean`), or all."""
    fields = _lean(prog)
    if fields is None:
        return ["for jj in range(vw):", f"    W_v[{dst} + jj] = W_v[{src} + jj]"]
    return [f"W_v[{dst} + {g * kvm.VW + f}] = W_v[{src} + {g * kvm.VW + f}]" for g, fs in fields.items() for f in fs]


def _v_take(prog: CompiledPattern, at: str, stage: int) -> list[str]:
    """This event taken at ``stage`` in the V at ``W_v[at]`` (``vm.v_take``): the fields read
    (:func:`_lean`) of the stage's groups written out, or the call."""
    fields = _lean(prog)
    if fields is None:
        out = [f"v_take(W_v, {at}, vg_stage, vg_col, {stage}, cols, row, g)"]
    else:
        lw = prog.lowered
        out = []
        for grp in range(len(lw.vg_stage)):
            if int(lw.vg_stage[grp]) == stage and grp in fields:
                c = int(lw.vg_col[grp])
                out += [f"vx = cols[{c}, row]" if c >= 0 else "vx = 0.0"]
                out += codegen.v_update_lines("W_v", at, grp, fields[grp], "vx", "g")
    if prog.nfa.has_gap_windows:  # (kernels.nfa._advance_gaps times the run out from it)
        out.append(f"set_last_taken(W_v, {at} + {_time_group(prog) * kvm.VW}, t)")
    return out


def _child(prog: CompiledPattern, tgt: int, node: str, stage: int, sts: str, spos: str) -> list[str]:
    """A new run in ``tgt`` at ``w``, with a V of its own (the parent's at ``voff``, with this
    event taken at ``stage``; -1: ignored)."""
    out = [f"W_state[w] = {tgt}", f"W_node[w] = {node}", f"W_sts[w] = {sts}", f"W_spos[w] = {spos}",
           "xo = v_at[0] * vw",
           "W_vs[w] = v_at[0]",
           "v_at[0] += 1"] + _v_copy(prog, "xo", "voff")
    if stage >= 0:
        out += _v_take(prog, "xo", stage)
    return out + ["run_flag[w - base] = 1"] + _child_wake(prog, tgt, "xo", sts) + ["w += 1"]


def _reach(prog: CompiledPattern, tgt: int, node: str, stage: int, sts: str, spos: str) -> list[str]:
    """The run that reaches ``tgt`` with ``node``: a completed match, or a new run."""
    out = [f"n_ref[{node}] += 1"]
    if _kind(prog, tgt) == kc.FINAL:
        return out + _match(node, sts, spos)
    return out + _child(prog, tgt, node, stage, sts, spos)


def _closure_step(prog: CompiledPattern, s: int, start: bool) -> list[str]:
    """A run in ``s`` (the start run: ``start``) at this event, as the generic step does it: the
    edges its PROCEED closure collects, in its order, each a completed match or a run with a V
    of its own (every condition read first, on the run's V at ``voff``)."""
    conds = _Conds(prog)
    sts, spos, parent = ("t", "g", "-1") if start else ("W_sts[i]", "W_spos[i]", "node0")
    edges = _closure(prog, s)
    stops = any(_kind(prog, tgt) == kc.STOP for _, _, _, tgt, _ in edges)
    # a negation (``not_next``, ``not_followed_by``): an edge into a STOP state discards every run
    # this run makes at this event (its completed matches stay, as in Flink)
    body: list[str] = ["first_child = w", "discard = False"] if stops else []
    for guards, act, src, tgt, c in edges:
        if act == kc.IGNORE:
            if start:
                continue  # (the start run stays as it is)
            lines = _reach(prog, tgt, "node0", -1, sts, spos)
        elif _kind(prog, tgt) == kc.STOP:
            stage = int(prog.nfa.state_stage[src])
            lines = [f"node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, {stage}, {parent})",
                     "n_ref[node1] += 1",
                     "discard = True",
                     "release(n_row, n_stage, n_parent, n_ref, meta, node1)"]
        else:
            stage = int(prog.nfa.state_stage[src])
            done = conds.any_of(_to_final(prog, tgt))
            lines = ([f"node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, {stage}, {parent})"]
                     + _reach(prog, tgt, "node1", stage, sts, spos)
                     + _guarded(done, ["n_ref[node1] += 1"] + _match("node1", sts, spos)))
        body += _guarded(conds.all_of(guards + (c,)), lines)
    if stops:
        body += ["if discard:",
                 "    for q in range(first_child, w):",
                 "        if W_node[q] >= 0:",
                 "            release(n_row, n_stage, n_parent, n_ref, meta, W_node[q])",
                 "    w = first_child"] + (["    dead = True  # (Flink discards the start state with the path)"]
                                           if start else [])
    if not start:
        body.append("release(n_row, n_stage, n_parent, n_ref, meta, node0)")
    return conds.lines + body


def _take(prog: CompiledPattern, s: int, stays: bool) -> list[str]:
    """A listed run in state ``s`` (one TAKE edge) takes this event: its child, in its place
    (over its V), or (the run ``stays`` too: ``followed_by_any``) a new run with a V of its own,
    written before it. Where PROCEED edges lead on from the target to the final state, the child
    also completes (read on the run's V before the event is taken)."""
    p = prog.nfa
    (_, tgt, _), = [e for e in _edges(prog, s) if e[0] == kc.TAKE]
    stage = int(p.state_stage[s])
    out = ["node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, %d, node0)" % stage]
    if _kind(prog, tgt) == kc.FINAL:
        out += ["n_ref[node1] += 1"] + _match("node1", "W_sts[i]", "W_spos[i]")
    elif stays:
        conds = _Conds(prog)
        done = conds.any_of(_to_final(prog, tgt))
        out += conds.lines + _reach(prog, tgt, "node1", stage, "W_sts[i]", "W_spos[i]")
        out += _guarded(done, ["n_ref[node1] += 1"] + _match("node1", "W_sts[i]", "W_spos[i]"))
    else:
        conds = _Conds(prog)
        done = conds.any_of(_to_final(prog, tgt))
        out = conds.lines + out + [
            "n_ref[node1] += 1"] + _v_take(prog, "voff", stage) + [
            "W_vs[w] = W_vs[i]",
            f"W_state[w] = {tgt}",
            "W_node[w] = node1",
            "W_sts[w] = W_sts[i]",
            "W_spos[w] = W_spos[i]",
            "run_flag[w - base] = 1"] + _child_wake(prog, tgt, "voff", "W_sts[i]") + ["w += 1"]
        out += _guarded(done, ["n_ref[node1] += 1"] + _match("node1", "W_sts[i]", "W_spos[i]"))
    if not stays:
        out.append("release(n_row, n_stage, n_parent, n_ref, meta, node0)")
    return out


def _waiting_step(prog: CompiledPattern, s: int) -> list[str]:
    """A listed run in a waiting state ``s`` (TAKE under ``c``, IGNORE back under ``not c`` or
    true; or a trailing ``not_followed_by``'s PENDING state, ended by its negated event): looked
    at only from the event its scan found (``W_wake``), as in the generic step, after the rule
    that drops a run beside the one listed before it (``first_thr``)."""
    takes = [c for a, _, c in _edges(prog, s) if a == kc.TAKE]
    (_, _, ic), = [e for e in _edges(prog, s) if e[0] == kc.IGNORE]
    sc = int(prog.sleep_cond[s])
    stays = ic < 0 and bool(takes)  # followed_by_any: the run stays beside the run its TAKE makes
    out: list[str] = []
    if _first_threshold(prog, s):
        # ``nfa._dominated_by_last``, its threshold keys written out: dropped where it can never
        # be emitted and does not complete at this event (the other's threshold not crossed)
        col, op, _, _ = _threshold(prog, s)
        crossed = codegen.compare_expr(op, f"cols[{col}, row]", f"{'' if op in (kvm.C_GT, kvm.C_GE) else '-'}key_a")
        out += [f"if (first_thr[{s}] != 0 and W_wake[i] >= -1 and w > base and W_state[w - 1] == {s}",
                "        and W_spos[w - 1] == W_spos[i]):",
                "    if key_at != w - 1:",
                "        xa = W_vs[w - 1] * vw",
                f"        key_a = {_heap_key(prog, s, 'xa')}",
                "        key_at = w - 1",
                f"    key_x = {_heap_key(prog, s, 'voff')}",
                f"    if (dominated(key_a, key_x, W_node[w - 1], node0, n_row, n_stage, n_parent)",
                f"            and (W_wake[i] > jc or not {crossed})):",
                "        release(n_row, n_stage, n_parent, n_ref, meta, node0)",
                "        continue"]
    if takes:
        test, take = _cond_expr(prog, takes[0]), _take(prog, s, stays)
    else:  # a trailing not_followed_by's run (PENDING) at its negated event: it ends (no edge is
        # taken by a woken run but its TAKE and an unconditional IGNORE, as in the generic step)
        test, take = _cond_expr(prog, sc), ["release(n_row, n_stage, n_parent, n_ref, meta, node0)"]
    if stays:  # the run itself, after its TAKE's child, looked at again from the next event
        take += ["move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, i, w)",
                 "run_flag[w - base] = 1"] + _child_wake(prog, s, "voff", "W_sts[i]") + ["w += 1"]
    return out + [
        f"parks = parking and pk_idx[{s}] >= 0  # (parked after this step: not a wake)",
        "wake = W_wake[i]",
        "if wake > jc:  # waiting: the event leaves the run as it is",
        "    move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, i, w)",
        "    run_flag[w - base] = 0",
        "    w += 1",
        "    if wake < min_wake and not parks:",
        "        min_wake = wake",
        f"elif {test}:"] + _indent(take) + [
        "else:",
        "    wake = BIG",
        "    if not parks:",
        f"        wake = {_scan_call(prog, sc, 'voff', 'jc', 'W_sts[i]')}",
        "        if wake < min_wake:",
        "            min_wake = wake",
        "    move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, i, w)",
        "    W_wake[w] = wake",
        "    run_flag[w - base] = 0",
        "    w += 1"]


def _state_branch(prog: CompiledPattern, s: int, first: bool) -> list[str]:
    """The step of a listed run in state ``s`` at this event."""
    if _waits(prog, s):
        body = _waiting_step(prog, s)
    elif _simple_next(prog, s):  # ``next``: this event or never
        (_, _, c), = _edges(prog, s)
        body = [f"if {_cond_expr(prog, c)}:"] + _indent(_take(prog, s, False)) + [
            "else:",
            "    release(n_row, n_stage, n_parent, n_ref, meta, node0)"]
    else:  # Kleene, optional and alternative stages: the PROCEED closure, unrolled
        body = _closure_step(prog, s, False)
    return [f"            {'if' if first else 'elif'} s0 == {s}:"] + _indent(body, 16)


def _start_branch(prog: CompiledPattern) -> list[str]:
    """The start run at this event (its V the empty one). Where its one TAKE leads to a state
    whose runs park (``start_tr``), the run it makes is parked at once, as in the generic step."""
    p = prog.nfa
    s = int(p.start_state)
    out = ["if not dead and start_mask[row] != 0:",
           "    voff = zero_off"]
    if not _simple_next(prog, s):
        return _indent(out + _indent(_closure_step(prog, s, True)), 12)
    (_, tgt, c), = _edges(prog, s)
    stage = int(p.state_stage[s])
    alloc = [f"node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, {stage}, -1)"]
    if _kind(prog, tgt) == kc.FINAL:
        take = alloc + ["n_ref[node1] += 1"] + _match("node1", "t", "g")
    else:
        conds = _Conds(prog)
        done = conds.any_of(_to_final(prog, tgt))
        take = (conds.lines + alloc + _reach(prog, tgt, "node1", stage, "t", "g")
                + _guarded(done, ["n_ref[node1] += 1"] + _match("node1", "t", "g")))
        if _waits(prog, tgt):
            take = (["if parking and start_tr >= 0:  # parked at once"]
                    + _indent(alloc + ["n_ref[node1] += 1",
                                       f"park_start(P, k, pk_op, pk_t0, pk_t1, pk_idx[{tgt}], {tgt}, node1, t, g, W_v, "
                                       f"zero_off, vw, vg_stage, vg_col, {stage}, row, code, consts, masks, cols, "
                                       "vm_stack)"])
                    + ["else:"] + _indent(take))
    return _indent(out + _indent(_guarded(_cond_expr(prog, c), take)), 12)


_HEAD = '''"""colcep compiled step (generated by colcep.engine.stepgen; one shape of pattern). Do not edit:
delete the file to regenerate it."""
import numpy as np
from numba import njit

from colcep.kernels.buffer import alloc, release
from colcep.kernels.codes import BIG
from colcep.kernels.matches import flush_pending
from colcep.kernels.nfa import (AO, DEAD, DONE, HALF, INTERRUPTED, J, KEY, N_EVENTS, N_ROWS, NA, NE, NEED_OUT, NEED_ROOM,
                                NH, NM, NPEND, OVER_CAPACITY, PARKS, ROOM, ROW_LO, STAMP, advance_time, settle_matches)
from colcep.kernels.matches import dominated
from colcep.kernels.park import (A_KEY, A_SEQ, A_SLOT, P_SEG, P_SEQ, P_STS, PM_NK, emit_woken, first_look,
                                 n_thresholds, park_fits, park_pass, park_room, park_start, sort_by_path, take_woken,
                                 then_look, timeouts)
from colcep.kernels.conds import SCAN_AHEAD, next_event
from colcep.kernels.merge import merge_runs
from colcep.kernels.runs import expired, last_time, set_last_taken, short_of_room, turn_v_arena
from colcep.kernels.runs import move_run_call as move_run
from colcep.kernels.vm import _agg, eval_program
from colcep.kernels.vm import compare_call as compare
from colcep.kernels.vm import v_take_call as v_take
'''

_RUN_KEY = '''

@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
def run_key(prog, opts, mode, batch, stop, W, done, aux, Q, E, S, buf, out, cur, P, PK):
    """``kernels.nfa._run_key`` for this shape: step key ``cur[KEY]`` from event ``cur[J]`` on."""
    window, want_timeouts, tick_ts = opts[0], opts[3], opts[6]
    per_run, vw = mode[0], mode[3]
    order, row0, ts, masks, cols, start_mask, rows = batch[1], batch[2], batch[3], batch[4], batch[5], batch[6], batch[7]
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at = W
    v = W_v  # (the name the generated conditions read V by)
    cond_kind, cond_a, cond_b, code, consts, vg_stage, vg_col = prog[7], prog[8], prog[9], prog[10], prog[11], prog[12], prog[13]
    cond_thr = prog[14]
    vm_stack = S[4]
    pk_idx, pk_col, pk_op, pk_t0, pk_t1 = PK[0], PK[1], PK[2], PK[3], PK[4]
    start_tr, first_thr = PK[6][0], PK[8]
    SEG, KL, pm = P[P_SEG], P[15], P[18]
    AK, P_sts, P_seq, AS, AQ = P[A_KEY], P[P_STS], P[P_SEQ], P[A_SLOT], P[A_SEQ]
    n_pk = n_thresholds(SEG)
    park_min = cur[PARKS]  # the live runs from which the key parks (0: the pattern parks nothing)
    p_node, p_sts, p_spos = done
    run_flag = aux[0]  # per run of the new list: made at this event (merging's candidates)
    merging = mode[2]
    st_rel, st_merge = prog[16], prog[17]
    pend_node, pend_g, pend_flag, pend_tts = E
    n_row, n_stage, n_parent, n_ref, meta = buf
    m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage = out
    walk = S[7]
    k, row_lo, n_rows, n_events = cur[KEY], cur[ROW_LO], cur[N_ROWS], cur[N_EVENTS]
    cap = W_state.shape[0] // 2
    zero_off = 4 * cap * vw  # the empty V, after the two halves of the V arena
    max_runs = opts[4]
    j, ao, a_half, na, nh, npend, nm, ne = cur[J], cur[AO], cur[HALF], cur[NA], cur[NH], cur[NPEND], cur[NM], cur[NE]
    dead = cur[DEAD] != 0
    stamp = cur[STAMP]  # unique per merging round in the call (the merge's hash table generations)
    min_wake = -1  # the first event a listed run must see (unknown: the carried runs are looked at first)
    code_ = DONE
    while True:
        if npend > 0:
            r1, r2 = flush_pending(npend, pend_node, pend_g, pend_flag, pend_tts, k, n_row, n_stage, n_parent, n_ref,
                                   meta, walk, m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne)
            if r1 < 0:
                cur[ROOM] = r2
                code_ = NEED_OUT
                break
            nm = r1
            ne = r2
            npend = 0
        if j >= n_events:
            break
        if stop[0] != 0:
            code_ = INTERRUPTED
            break
        final_tick = j == n_rows  # time advances to ``tick_ts`` with no event
        if final_tick:
            row = -1
            t = tick_ts
            g = BIG
            parked_expire = True
        else:
            row = order[row_lo + j]
            if na == 0 and nh == 0 and KL[k] == 0 and (dead or start_mask[row] == 0):
                # nothing alive for this key: jump to its next row that can start a match
                if dead:
                    j = n_rows
                    continue
                j += 1
                while j < n_rows and start_mask[order[row_lo + j]] == 0:
                    j += 1
                continue
            t = ts[row]
            parked_expire = False
            if KL[k] > 0:  # the parked runs this event wakes join the step
                lk = first_look(AK, SEG, P_sts, P_seq, AS, AQ, k, n_pk, pk_col, pk_op, row, cols, t, window)
                parked_expire = lk != 0 and then_look(P, lk, k, pk_col, pk_op, row, cols, t, window)
            if (min_wake > j and pm[PM_NK] == 0 and (dead or start_mask[row] == 0)
                    and (na == 0 or not expired(t, W_sts[ao], window)) and not parked_expire):
                # every run waits past this event, none times out and nothing starts: the event
                # changes nothing (the generic step's rule, and its events)
                j += 1
                continue
            g = row0 + rows[row]
        # room for this event (the generic step's check: the same bound, at every event stepped)
        nk = pm[PM_NK]
        need = (na + nk + 1) * per_run
        n_all = na + KL[k]
        parking = park_min > 0 and n_all >= park_min  # a key with few runs steps them all
        if (short_of_room(need, n_all, nh, cap, buf, done, Q, E, opts[5], per_run)
                or parking and not park_fits(P, k, need) and not park_room(P, k, need)):
            code_ = NEED_ROOM
            break
        turn_v_arena(W_v, W_vs, v_at, ao, na, need + nk, cap, vw)
        j += 1
        # 1. advanceTime (the generic kernel's): the runs whose window has passed (a prefix: runs
        # are in start order) time out, as timed-out partial matches when they are wanted (in path
        # order); a trailing not_followed_by's run completes instead
        npend0 = npend
        timed_out, ao, na, npot, npend = advance_time(prog, opts, W, done, E, buf, ao, na, npend, t, g, final_tick)
        if KL[k] > 0 and parked_expire:  # and the parked runs whose window has passed
            parked_out, npend = timeouts(P, k, t, window, final_tick, want_timeouts, g, pend_node, pend_g, pend_flag,
                                         pend_tts, npend, n_row, n_stage, n_parent, n_ref, meta)
            timed_out = timed_out or parked_out
        if timed_out:
            if npend - npend0 > 1:
                sort_by_path(pend_node, pend_g, pend_flag, pend_tts, npend0, npend, n_row, n_stage, n_parent)
            if npot > 0 or nh > 0:
                ao, na, nh, npend = settle_matches(opts, mode, W, done, aux, Q, E, buf, P, k, ao, na, npot, nh, npend,
                                                   g)
        if final_tick:
            continue
        # 2. computeNextStates, every run in start order, then the start run, the new list written
        # in the other half (the generic step's layout, so that runs are looked at, and dropped
        # beside another of their start, at its events); the runs this event woke from the park
        # first join the list, in start order, or complete at once
        if nk > 0 and PK[7][0] and na == 0 and nh == 0:
            npend = emit_woken(P, g, prog[1], pend_node, pend_g, pend_flag, pend_tts, npend, n_row, n_stage, n_parent,
                               n_ref, meta)
        elif nk > 0:
            dst = (1 - a_half) * cap
            na = take_woken(P, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, vw, ao, na, dst, j - 1)
            ao = dst
            a_half = 1 - a_half
            min_wake = -1  # a full step
        npot = 0
        jc = j - 1
        na0 = na
        # when every listed run waits past this event only the start run acts (its child is
        # appended in place); otherwise every run is looked at, and the next event one must see
        # found again
        fast = min_wake > jc and ao - a_half * cap + na + per_run <= cap
        if fast:
            base = ao
            w = ao + na
        else:
            min_wake = BIG
            base = (1 - a_half) * cap
            w = base
        key_at, key_a = -1, 0.0  # the last listed run whose threshold key is known, and that key
        for i in range(ao if not fast else ao + na, ao + na):
            if (i & 1023) == 1023 and stop[0] != 0:
                break
            s0 = W_state[i]
            node0 = W_node[i]
            voff = W_vs[i] * vw
{branches}
        else:
{start}
            ao = base
            na = w - base
            if merging and not fast:  # SASE+ merging: a run made here that equals another joins it
                stamp += 1
                na = merge_runs(ao, na, run_flag, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, vw, st_rel,
                                st_merge, n_row, n_stage, n_parent, n_ref, meta, window <= 0, aux[1], aux[2], aux[3],
                                stamp)
            if parking and na > (na0 if fast else 0):  # the waiting runs park
                na = park_pass(P, k, pk_idx, pk_col, pk_op, pk_t0, pk_t1, W_state, W_node, W_sts, W_spos, W_wake,
                               W_vs, W_v, vw, ao, na, na0 if fast else 0, code, consts, masks, cols, vm_stack)
            if na + KL[k] > max_runs:
                cur[ROOM] = na + KL[k]
                code_ = OVER_CAPACITY
                break
            # 3. processMatchesAccordingToSkipStrategy (the generic kernel's): the completed matches,
            # in start order, held back and released by the skip strategy's rules
            # (nothing to do without either: the call is skipped)
            if npot > 0 or nh > 0:
                ao, na, nh, npend = settle_matches(opts, mode, W, done, aux, Q, E, buf, P, k, ao, na, npot, nh,
                                                   npend, g)
            if not fast:  # the new list is the current one
                a_half = 1 - a_half
            continue
        code_ = INTERRUPTED  # stopped inside the event (the caller undoes the call)
        break
    cur[J], cur[AO], cur[HALF], cur[NA], cur[NH], cur[NPEND], cur[NM], cur[NE] = j, ao, a_half, na, nh, npend, nm, ne
    cur[DEAD] = 1 if dead else 0
    cur[STAMP] = stamp
    return code_
'''


def generate(prog: CompiledPattern) -> str:
    """The compiled step's module source for ``prog`` (raises ValueError for a shape it does not
    write: :func:`unsupported`)."""
    why = unsupported(prog)
    if why is not None:
        raise ValueError(f"the compiled step does not generate {why} yet")
    p = prog.nfa
    branches: list[str] = []
    for s in range(p.n_states):
        if int(p.state_kind[s]) not in (kc.FINAL, kc.STOP) and s != int(p.start_state):
            branches += _state_branch(prog, s, not branches)
    if not branches:
        branches = ["            pass"]
    scans: list[str] = []
    for c in sorted({int(prog.sleep_cond[s]) for s in range(p.n_states) if _waits(prog, s)}):
        scans += _scan(prog, c) or []
    src = _RUN_KEY.replace("{branches}", "\n".join(branches)).replace("{start}", "\n".join(_start_branch(prog)))
    return _HEAD + codegen.HELPERS + "\n".join(scans) + "\n" + src


# ----------------------------------------------------------------------------- the module, compiled
def kernel_hash() -> str:
    """A hash of the kernel sources the generated step calls (``nfa.py`` and the kernel modules
    it imports, transitively) and of this generator's source."""
    stamp = cache._stamp(knfa.__file__, getattr(knfa, "__loader__", None))
    return hashlib.sha256(stamp + _SELF + f"step-v{GENERATOR_VERSION}".encode()).hexdigest()[:16]


def module_name(src: str) -> str:
    """``colcep_step_<source hash>_<kernel hash>`` (``_py``: ``JIT`` off): one per shape."""
    return (f"{MODULE_PREFIX}{hashlib.sha256(src.encode()).hexdigest()[:24]}_{kernel_hash()}"
            f"{'' if codegen.JIT else '_py'}")


def step(prog: CompiledPattern) -> steps.Step:
    """``prog``'s compiled step, run by the one driver (its module loaded; compiled at the first
    call of its arguments' types)."""
    mod = load(prog)
    return steps.Step(mod.run_key, mod.__name__, jit=codegen.JIT)


def name(prog: CompiledPattern) -> str:
    """The name of ``prog``'s step among steps (its module's: one per shape), nothing loaded."""
    return _memo("name", prog, lambda p: module_name(_source(p)))


def cached(prog: CompiledPattern) -> bool:
    """Whether this machine has compiled ``prog``'s step before (Numba's index of its
    ``run_key`` is in the disk cache): taking it costs a load (~0.1 s a shape), not a compile."""
    if not codegen.JIT:
        return False
    step = name(prog)
    if step in _ON_DISK:
        return True
    if time.monotonic() < _NOT_ON_DISK.get(step, 0.0):
        return False
    prefix = step + ".run_key-"
    try:
        found = any(f.startswith(prefix) and f.endswith(".nbi")
                    for f in os.listdir(os.path.join(cache.cache_dir(), "step", "__pycache__")))
    except OSError:
        found = False
    if found:  # (once compiled it stays: a name holds the kernels' hash)
        _ON_DISK.add(step)
    else:  # (another process may compile it: looked for again after a while)
        _NOT_ON_DISK[step] = time.monotonic() + LOOK_AGAIN_SECONDS
    return found


_ON_DISK: set = set()  # steps found in the disk cache
_NOT_ON_DISK: dict = {}  # step -> when to look for it again
LOOK_AGAIN_SECONDS = 5.0  # (a stream's tasks make a Matcher per key and batch: one listing each would cost)


def _source(prog: CompiledPattern) -> str:
    return _memo("source", prog, _make_source)


def _make_source(prog: CompiledPattern) -> str:
    src = generate(prog)
    if not codegen.JIT:
        src = src.replace("from numba import njit\n", "from colcep.engine.codegen import _no_jit as njit\n")
    return src


def load(prog: CompiledPattern) -> ModuleType:
    """The compiled step's module for ``prog``'s shape (generated, written and imported once)."""
    src = _source(prog)
    name = module_name(src)
    path = os.path.join(cache.cache_dir(), "step", name + ".py")
    return codegen.load_generated(name, path, lambda: src, codegen.JIT,
                             lambda folder: codegen.prune_stale(folder, MODULE_PREFIX, kernel_hash()))
