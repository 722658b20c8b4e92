"""The standard mode's matching algorithm, prototyped in Python before its kernel (issue 28): a
priority-ordered thread machine (a Pike VM) that finds the same preferred match as the
backtracking reference (``sqlstd_reference.Matcher.find``) in time linear in the rows for a
pattern whose conditions do not look back at how earlier rows were labelled.

The pattern compiles to a program (consume a row as variable v, split preferring the first
branch, jump, assert the partition's start or end, match). Threads are kept in preferment order;
the epsilon closure of a thread adds its successors depth first, preferred branch first, so a
step's list stays in the order backtracking would try them (leftmost-first semantics, as in RE2).
A thread that reaches ``match`` records the match and cuts every thread after it; threads before
it run on and may replace it with a preferred one.

Two threads are *equivalent* when they are at the same instruction and every condition still to
be evaluated sees the same values in both: then the later one can only ever match where the
earlier one does, and loses to it there, so it is dropped. What conditions see of the past is read
from the DEFINE clause (``features``): for each variable a condition reads, its last row (``A.x``,
``PREV(A.x)``, ``LAST(A.x)``), its first or last n + 1 rows (``FIRST`` / ``LAST(A.x, n)``: the last
n + 1, since a later row of A shifts what LAST(A.x, n) reads), or all its rows (an aggregate); references to the universal variable see rows by their
position in the match, which every thread of one start shares. A condition the analysis cannot
read makes the whole labelling the key (no pruning, still exact). An iteration of a quantified
pattern that consumes no row past its minimum is cut by the closure's visited set, as the
reference's rule cuts it.
"""
from __future__ import annotations

from sqlglot import exp

from sqlstd_reference import (ASSERT_START, CONSUME, JMP, MATCH, SPLIT, Eval, Label, Matcher, Query, _call,
                              _ident, _is_call, _table_var, _truth, compile_pattern)

# ---------------------------------------------------------------------- what conditions see
def features(q: Query):
    """The parts of a thread's labelling that DEFINE conditions can read, as a function of the
    labels; None when the analysis cannot bound it (then threads are never merged)."""
    feats: set = set()
    ok = True

    def members(v):
        return q.subsets.get(v, {v})

    def walk(node, nav: bool) -> None:
        nonlocal ok
        if isinstance(node, exp.Column):
            if node.table and not nav:
                feats.add(("last", _table_var(node), 0))
            return
        if _is_call(node):
            name, args, _ = _call(node)
            if name in ("PREV", "NEXT"):
                inner = args[0]
                if _is_call(inner) and _call(inner)[0] in ("FIRST", "LAST"):
                    walk(inner, False)
                else:
                    var = _var_of(inner)
                    if var is False:
                        ok = False
                    elif var is not None:
                        feats.add(("last", var, 0))
                    elif _reads_classifier(inner):
                        ok = False
                for a in args[1:]:
                    walk(a, False)
                return
            if name in ("FIRST", "LAST"):
                var = _var_of(args[0])
                n = args[1] if len(args) > 1 else None
                if var is False or (n is not None and not isinstance(n, exp.Literal)):
                    ok = False
                elif var is not None:
                    feats.add((name.lower(), var, int(n.this) if n is not None else 0))
                elif _reads_classifier(args[0]):
                    ok = False
                return
            if name == "CLASSIFIER":
                if args:
                    feats.add(("last", _ident(args[0].sql()), 0))
                    feats.add(("label", _ident(args[0].sql())))
                return  # the current row's own label: the instruction's variable
            if name in ("COUNT", "SUM", "AVG", "MIN", "MAX", "MAX_BY", "MIN_BY", "ARRAY_AGG"):
                var = _var_of(exp.Tuple(expressions=[a.copy() for a in args])) if args else None
                if args and _is_call(args[0]) and _call(args[0])[0] == "__ALLROWS":
                    var = _ident(args[0].expressions[0].sql())
                if var is False:
                    ok = False
                elif var is not None:
                    feats.add(("rows", var))
                elif any(_reads_classifier(a) for a in args):
                    ok = False
                return
            if name == "MATCH_NUMBER":
                return
        for child in node.iter_expressions():
            walk(child, nav)

    for cond in q.define.values():
        walk(cond, False)
    if not ok:
        return None
    order = sorted(feats, key=repr)

    def key(labels: tuple) -> tuple:
        out = []
        for f in order:
            if f[0] == "label":
                ms = members(f[1])
                pos = [lb.var for lb in labels if lb.var in ms]
                out.append(pos[-1] if pos else None)
                continue
            ms = members(f[1])
            pos = [lb.pos for lb in labels if lb.var in ms]
            if f[0] == "rows":
                out.append(tuple(pos))
            elif f[0] == "first":  # later rows never change the first n + 1
                out.append(tuple(pos[:f[2] + 1]))
            else:  # LAST(v, n) now and after more rows of v: the last n + 1 so far
                out.append(tuple(pos[len(pos) - f[2] - 1:]))
        return tuple(out)

    return key


def _var_of(node):
    """The one variable the column references and CLASSIFIER calls of ``node`` name (None: the
    universal variable; False: several)."""
    found = {_table_var(c) for c in node.find_all(exp.Column) if c.table}
    found |= {_ident(f.expressions[0].sql()) for f in node.find_all(exp.Anonymous)
              if f.name.upper() in ("CLASSIFIER", "__ALLROWS") and f.expressions}
    if len(found) > 1:
        return False
    return next(iter(found), None)


def _reads_classifier(node) -> bool:
    return any(f.name.upper() == "CLASSIFIER" for f in node.find_all(exp.Anonymous))


# ---------------------------------------------------------------------- the machine
class ThreadMatcher:
    """``find(start)`` as ``Matcher.find``: (end, labels) of the preferred match, or None;
    ``peak`` is the most threads one step held."""

    def __init__(self, q: Query, rows: list[dict], number: int):
        self.q, self.rows, self.n = q, rows, len(rows)
        self.prog = compile_pattern(q.pattern)
        self.key = features(q)
        self.ref = Matcher(q, rows, number)  # its conditions' evaluation
        self.number = number
        self.peak = 0

    def _thread_key(self, pc: int, labels: tuple):
        return (pc, labels) if self.key is None else (pc, self.key(labels))

    def closure(self, pc: int, i: int, labels: tuple, out: list, seen: set, visiting: set) -> bool:
        """Add thread (pc, labels) and its epsilon successors at row ``i`` to ``out`` in preferment
        order; returns True when a match was reached (the caller cuts every thread after it)."""
        if (pc, i) in visiting:  # an empty loop: this path came back without consuming a row
            return False
        ins = self.prog[pc]
        if ins.op == MATCH:
            out.append((pc, labels))
            return True
        if ins.op == CONSUME:
            k = self._thread_key(pc, labels)
            if k not in seen:
                seen.add(k)
                out.append((pc, labels))
            return False
        visiting = visiting | {(pc, i)}
        if ins.op == JMP:
            return self.closure(ins.x, i, labels, out, seen, visiting)
        if ins.op == SPLIT:
            return self.closure(ins.x, i, labels, out, seen, visiting) or \
                self.closure(ins.y, i, labels, out, seen, visiting)
        ok = (i == 0) if ins.op == ASSERT_START else (i == self.n)
        return self.closure(pc + 1, i, labels, out, seen, visiting) if ok else False

    def find(self, start: int):
        best = None
        threads: list = []
        if self.closure(0, start, (), threads, set(), frozenset()):
            best = (start, threads[-1][1])
            threads = threads[:-1]
        i = start
        while threads and i < self.n:
            self.peak = max(self.peak, len(threads))
            nxt: list = []
            seen: set = set()
            for pc, labels in threads:
                ins = self.prog[pc]
                cand = labels + (Label(i, ins.var, ins.excl),)
                cond = self.q.define.get(ins.var)
                if cond is not None and not _truth(Eval(self.ref, cand, len(cand) - 1, final=False).ev(cond)):
                    continue
                if self.closure(pc + 1, i + 1, cand, nxt, seen, frozenset()):
                    best = (i + 1, nxt[-1][1])
                    nxt = nxt[:-1]
                    break  # lower-priority threads are cut
            threads = nxt
            i += 1
        return best
