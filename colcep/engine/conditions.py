"""Lowering conditions for the kernel: column masks and bytecode.

A condition that reads only the current event becomes a boolean mask, evaluated with numpy
over the whole batch. A condition that reads the partial match becomes a bytecode program
(``colcep.kernels.vm``) in which every event-only sub-expression is again precomputed: a
boolean one as a mask row, a numeric one as a float row. Aggregates read the run's vector V:
one group of running statistics per (stage, value) pair the pattern aggregates over, the value
a column or an event-only expression (``sum(col("price") * col("volume"), of="b")``), read from
its float row. History nodes (``prev``, ``rolling``) are event-only too: ``evaluate`` reads
their columns from ``env``, where the Matcher puts what ``colcep.engine.history`` computed for the
batch (``Lowered.hist_exprs`` lists them).

Types are checked against the input schema here, so a condition over an unknown column or a
string compared with ``<`` fails before any data is read, naming the stage.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from colcep.errors import PatternError
from colcep.expr import HIST_OPS, Expr
from colcep.kernels import vm
from colcep.kernels.codes import COND_MASK, COND_NOT, COND_PROGRAM, FINAL, STOP, TAKE

_AGG = {"first": vm.AGG_FIRST, "last": vm.AGG_LAST, "sum": vm.AGG_SUM, "count": vm.AGG_COUNT,
        "avg": vm.AGG_AVG, "min": vm.AGG_MIN, "max": vm.AGG_MAX}
_ARITH = {"+": vm.A_ADD, "-": vm.A_SUB, "*": vm.A_MUL, "/": vm.A_DIV, "quot": vm.A_QUOT}
_CMP = {"==": vm.C_EQ, "!=": vm.C_NE, "<": vm.C_LT, "<=": vm.C_LE, ">": vm.C_GT, ">=": vm.C_GE}
_BOOL_OPS = ("cmp", "and", "or", "not", "isin", "isnull", "true")

NUM, STR, BOOL, NULL = "number", "string", "boolean", "null"


def infer_type(e: Expr, schema: dict[str, str], where: str) -> str:
    """The type of ``e`` (number | string | boolean | null) given column types; raises
    PatternError naming ``where`` (the stage) on a type error or an unknown column."""
    op, a = e.op, e.args
    if op == "col":
        if a[0] not in schema:
            raise PatternError(f"{where}: unknown column {a[0]!r}; the input has {sorted(schema)}")
        return schema[a[0]]
    if op == "lit":
        return NULL if a[0] is None else STR if isinstance(a[0], str) else NUM
    if op == "true":
        return BOOL
    if op == "agg":
        func, fld, _ = a
        if isinstance(fld, Expr):       # an aggregate over an event-only expression
            t = infer_type(fld, schema, where)
            if func == "count" or func in ("first", "last"):
                return NUM if func == "count" else t
            if t not in (NUM, NULL):
                raise PatternError(f"{where}: {func}() needs a numeric value, {fld!r} is {t}")
            return NUM
        if func == "count":
            return NUM
        if fld not in schema:
            raise PatternError(f"{where}: {func}() over unknown column {fld!r}; the input has {sorted(schema)}")
        t = schema[fld]
        if func in ("first", "last"):
            return t
        if t != NUM:
            raise PatternError(f"{where}: {func}({fld!r}) needs a numeric column, {fld!r} is {t}")
        return NUM
    if op == "prev":   # a boolean's previous value is a number, 1 or 0 (null when there is none)
        t = infer_type(a[0], schema, where)
        return NUM if t == BOOL else t
    if op == "roll":
        t = infer_type(a[1], schema, where)
        if a[0] != "count" and t not in (NUM, NULL):
            raise PatternError(f"{where}: rolling {a[0]} needs a numeric value, {a[1]!r} is {t}")
        return NUM
    if op == "arith":
        for x in a[1:]:
            t = infer_type(x, schema, where)
            if t not in (NUM, NULL):
                raise PatternError(f"{where}: arithmetic '{a[0]}' on a {t} value in {e!r}")
        return NUM
    if op == "cmp":
        ta, tb = infer_type(a[1], schema, where), infer_type(a[2], schema, where)
        if NULL not in (ta, tb) and ta != tb:
            raise PatternError(f"{where}: cannot compare a {ta} with a {tb} in {e!r}")
        if a[0] not in ("==", "!=") and STR in (ta, tb):
            raise PatternError(f"{where}: strings compare only with == and != (got '{a[0]}' in {e!r})")
        if BOOL in (ta, tb) and a[0] not in ("==", "!="):
            raise PatternError(f"{where}: booleans compare only with == and != (got '{a[0]}' in {e!r})")
        return BOOL
    if op in ("and", "or", "not"):
        for x in a:
            t = infer_type(x, schema, where)
            if t != BOOL:
                raise PatternError(f"{where}: '{op}' needs conditions, got a {t} in {e!r}")
        return BOOL
    if op == "isin":
        t = infer_type(a[0], schema, where)
        for v in a[1]:
            tv = STR if isinstance(v, str) else NUM
            if v is not None and t not in (tv, NULL) and not (t == BOOL and tv == NUM):
                raise PatternError(f"{where}: is_in() value {v!r} does not match the {t} expression {a[0]!r}")
        return BOOL
    if op == "isnull":
        infer_type(a[0], schema, where)
        return BOOL
    raise PatternError(f"{where}: unknown expression {e!r}")


@dataclass
class Lowered:
    """Conditions of a program, ready for one Matcher."""

    mask_exprs: list[Expr] = field(default_factory=list)   # boolean, event-only: one mask row each
    col_exprs: list[Expr] = field(default_factory=list)    # numeric, event-only: one float row each
    cond_kind: np.ndarray = None                           # 0 mask, 1 bytecode (per condition id)
    cond_a: np.ndarray = None                              # mask row, or program start
    cond_b: np.ndarray = None                              # program end
    code: np.ndarray = None
    consts: np.ndarray = None
    vg_stage: np.ndarray = None                            # V group -> stage index
    vg_col: np.ndarray = None                              # V group -> float row (-1: count only)
    cond_thr: np.ndarray = None                            # (n_cond, 4): float row, op, threshold program
    cond_groups: np.ndarray = None                         # (n_cond, n_groups): V groups a condition reads
    hist_exprs: list[Expr] = field(default_factory=list)   # prev / rolling nodes: columns colcep.engine.history computes

    @property
    def v_width(self) -> int:
        return len(self.vg_stage) * vm.VW


class _Lowerer:
    def __init__(self, stage_index: dict[str, int], strings: dict):
        self.stage_index = stage_index
        self.strings = strings
        self.out = Lowered()
        self._masks: dict = {}
        self._cols: dict = {}
        self._vgroups: dict = {}
        self._vfields: dict = {}
        self.code: list[int] = []
        self.consts: list[float] = []

    def mask(self, e: Expr) -> int:
        k = e.key()
        if k not in self._masks:
            self._masks[k] = len(self.out.mask_exprs)
            self.out.mask_exprs.append(e)
        return self._masks[k]

    def column(self, e: Expr) -> int:
        k = e.key()
        if k not in self._cols:
            self._cols[k] = len(self.out.col_exprs)
            self.out.col_exprs.append(e)
        return self._cols[k]

    def const(self, v) -> int:
        self.consts.append(literal_value(v, self.strings))
        return len(self.consts) - 1

    def vgroup(self, stage: str, fld: "str | Expr | None") -> int:
        key = (stage, _field_key(fld))
        if key not in self._vgroups:
            self._vgroups[key] = len(self._vgroups)
            self._vfields[key] = fld
        return self._vgroups[key]

    def emit(self, e: Expr) -> int:
        """Append code for ``e``; returns the stack depth it needs."""
        op, a = e.op, e.args
        if not e.reads_match():
            if op in _BOOL_OPS:
                self.code += [vm.OP_MASK, self.mask(e)]
            elif op == "lit":
                self.code += [vm.OP_CONST, self.const(a[0])]
            else:
                self.code += [vm.OP_COL, self.column(e)]
            return 1
        if op == "agg":
            func, fld, stages = a
            groups = [self.vgroup(s, None if func == "count" else fld) for s in stages]
            self.code += [vm.OP_AGG, _AGG[func], len(groups)] + groups
            return 1
        if op in ("arith", "cmp"):
            d1 = self.emit(a[1])
            d2 = self.emit(a[2])
            self.code += [vm.OP_ARITH if op == "arith" else vm.OP_CMP, (_ARITH if op == "arith" else _CMP)[a[0]]]
            return max(d1, d2 + 1)
        if op in ("and", "or"):
            d1 = self.emit(a[0])
            d2 = self.emit(a[1])
            self.code.append(vm.OP_AND if op == "and" else vm.OP_OR)
            return max(d1, d2 + 1)
        if op == "not":
            d = self.emit(a[0])
            self.code.append(vm.OP_NOT)
            return d
        if op == "isnull":
            d = self.emit(a[0])
            self.code.append(vm.OP_ISNULL)
            return d
        if op == "isin":
            d = self.emit(a[0])
            ks = [self.const(v) for v in a[1]]
            self.code += [vm.OP_ISIN, len(ks)] + ks
            return d
        raise PatternError(f"cannot lower {e!r}")


def _reads_event(e: Expr) -> bool:
    """True when ``e`` reads a column of the current event (outside aggregates)."""
    if e.op in ("col", "prev", "roll"):
        return True
    if e.op in ("agg", "lit", "true"):
        return False
    return any(_reads_event(a) for a in e.args if isinstance(a, Expr))


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _threshold(lw: "_Lowerer", e: Expr) -> list[int]:
    """``[row, op, start, end]`` when ``e`` compares a numeric event-only expression with one
    that reads only the partial match (``price > last("price", of="a")``): while a run waits,
    the run side is a constant, its threshold, computed once by ``code[start:end]``, and the
    kernel finds the run's next event by comparing one float row with it. ``[-1, 0, 0, 0]``
    otherwise."""
    if e.op != "cmp":
        return [-1, 0, 0, 0]
    op, left, right = e.args
    if _reads_event(right) and not _reads_event(left):
        op, left, right = _FLIP[op], right, left
    if left.reads_match() or not _reads_event(left) or left.op in _BOOL_OPS or _reads_event(right):
        return [-1, 0, 0, 0]
    start = len(lw.code)
    lw.emit(right)
    return [lw.column(left), _CMP[op], start, len(lw.code)]


def _aggregates(e: Expr):
    """The ``(func, field, stages)`` of every aggregate in ``e``."""
    if e.op == "agg":
        yield e.args
    elif e.op not in ("col", "lit", "true"):
        for a in e.args:
            if isinstance(a, Expr):
                yield from _aggregates(a)


def merge_tables(program, lw: Lowered) -> tuple[np.ndarray, np.ndarray]:
    """What the kernel needs to merge equivalent runs (SASE+ 4.2.2): per state, the V groups
    any condition from there on reads (``relevant``: two runs of one start in that state with
    equal relevant groups continue identically), and whether merging is worth trying there
    (``merge``: no relevant group belongs to a stage whose events enter the state, else the
    runs of a start that entered it by different events practically never agree)."""
    n_s, ptr = program.n_states, program.trans_ptr
    rel = np.zeros((n_s, lw.cond_groups.shape[1]), np.uint8)
    for st in range(n_s):
        for t in range(ptr[st], ptr[st + 1]):
            if program.trans_cond[t] >= 0:
                rel[st] |= lw.cond_groups[program.trans_cond[t]]
    changed = True
    while changed:  # everything read in any state reachable from here
        changed = False
        for st in range(n_s):
            for t in range(ptr[st], ptr[st + 1]):
                new = rel[st] | rel[program.trans_target[t]]
                if (new != rel[st]).any():
                    rel[st], changed = new, True
    entered_by = [set() for _ in range(n_s)]
    for st in range(n_s):
        for t in range(ptr[st], ptr[st + 1]):
            if program.trans_action[t] == TAKE:
                entered_by[program.trans_target[t]].add(int(program.state_stage[st]))
    merge = np.zeros(n_s, np.uint8)
    for st in range(n_s):
        if program.state_kind[st] not in (FINAL, STOP) and st != program.start_state:  # no run waits in the start
            merge[st] = not any(rel[st, g] and lw.vg_stage[g] in entered_by[st] for g in range(len(lw.vg_stage)))
    return rel, merge


def literal_value(v, strings: dict) -> float:
    """A literal as the kernel sees it: numbers as float, strings as dictionary codes
    (registered now, so data seen later gets the same code), None as NaN."""
    if v is None:
        return np.nan
    if isinstance(v, str):
        return float(strings.setdefault(v, len(strings)))
    return float(v)


def lower(conditions: list[Expr], stage_names: list[str], strings: dict) -> Lowered:
    """Lower a program's conditions; ``strings`` is the Matcher's string dictionary.

    Condition kinds: 0 a mask row, 1 a bytecode program, 2 the negation of another condition
    (``cond_a``). Flink's IGNORE edges carry ``not(take condition)``; as kind 2 the kernel
    reuses the take condition's result for the same run and event instead of running it again.
    Inner conditions a negation needs are appended after the program's own."""
    lw = _Lowerer({n: i for i, n in enumerate(stage_names)}, strings)
    table = list(conditions)
    index = {e.key(): i for i, e in enumerate(table)}
    kind, ca, cb, thr = [], [], [], []
    i = 0
    while i < len(table):
        e = table[i]
        thr.append([-1, 0, 0, 0])
        if e.op != "not" and not e.reads_match():
            kind.append(COND_MASK)
            ca.append(lw.mask(e))
            cb.append(0)
        elif e.op == "not":
            inner = e.args[0]
            if inner.key() not in index:
                index[inner.key()] = len(table)
                table.append(inner)
            kind.append(COND_NOT)
            ca.append(index[inner.key()])
            cb.append(0)
        else:
            start = len(lw.code)
            depth = lw.emit(e)
            if depth > vm.STACK:
                raise PatternError(f"condition too deeply nested for the kernel (depth {depth} > {vm.STACK}): {e!r}")
            kind.append(COND_PROGRAM)
            ca.append(start)
            cb.append(len(lw.code))
            thr[-1] = _threshold(lw, e)
        i += 1
    out = lw.out
    out.cond_kind = np.array(kind, np.int8)
    out.cond_a = np.array(ca, np.int32)
    out.cond_b = np.array(cb, np.int32)
    out.cond_thr = np.array(thr, np.int32).reshape(-1, 4)
    out.code = np.array(lw.code or [0], np.int32)
    out.consts = np.array(lw.consts or [0.0], np.float64)
    n_groups = len(lw._vgroups)
    out.cond_groups = np.zeros((len(table), max(1, n_groups)), np.uint8)
    for i, e in enumerate(table):
        for func, fld, stages in _aggregates(e):
            for st in stages:
                out.cond_groups[i, lw.vgroup(st, None if func == "count" else fld)] = 1
    groups = sorted(lw._vgroups.items(), key=lambda kv: kv[1])
    out.vg_stage = np.array([lw.stage_index[s] for (s, _), _ in groups], np.int32)
    out.vg_col = np.array([lw.column(_field_expr(lw._vfields[k])) if k[1] is not None else -1 for k, _ in groups],
                          np.int32)
    seen: dict = {}
    for e in out.mask_exprs + out.col_exprs:
        for h in history_nodes(e):
            seen.setdefault(h.key(), h)
    out.hist_exprs = list(seen.values())
    return out


def _field_key(fld: "str | Expr | None"):
    return fld.key() if isinstance(fld, Expr) else fld


def _field_expr(fld: "str | Expr") -> Expr:
    """The float row an aggregate reads: a column, or an event-only expression (``price * volume``)."""
    return fld if isinstance(fld, Expr) else Expr("col", (fld,))


def history_nodes(e: Expr):
    """The ``prev`` / ``rolling`` nodes of an event-only expression (outermost first; their
    sources hold none, ``colcep.expr`` refuses that)."""
    if e.op in HIST_OPS:
        yield e
        return
    if e.op == "agg":
        if isinstance(e.args[1], Expr):
            yield from history_nodes(e.args[1])
        return
    for a in e.args:
        if isinstance(a, Expr):
            yield from history_nodes(a)


def hist_name(e: Expr) -> tuple:
    """The ``env`` entry holding a history node's column for the batch."""
    return ("history",) + e.key()


def shared_key(e: Expr, env: dict) -> tuple | None:
    """A key under which an event-only expression's value over the columns ``env`` is the same
    for every pattern (its structure and the arrays it reads, by identity), or None when it
    holds a string literal (its value then rests on the pattern's string codes)."""
    reads: list = []
    stack = [e]
    while stack:
        x = stack.pop()
        if x.op == "col":
            reads.append(x.args[0])
        elif x.op in HIST_OPS:
            reads.append(hist_name(x))
        elif x.op == "lit" and isinstance(x.args[0], str):
            return None
        elif x.op == "isin" and any(isinstance(v, str) for v in x.args[1]):
            return None
        else:
            stack.extend(a for a in x.args if isinstance(a, Expr))
    return (e.key(),) + tuple(id(env[r]) for r in sorted(reads, key=repr))


# ----------------------------------------------------------------------------- batch evaluation
def evaluate(e: Expr, env: dict[str, np.ndarray], n: int, strings: dict):
    """Evaluate an event-only expression over a batch: a float64 array (NaN = null) or a
    boolean array, of ``n`` values. ``env`` maps column names to float64 arrays (strings as
    codes)."""
    r = _evaluate(e, env, n, strings)
    return np.broadcast_to(r, n) if np.ndim(r) == 0 else r


def _evaluate(e: Expr, env: dict[str, np.ndarray], n: int, strings: dict):
    """``evaluate``, where a part without columns is one value (a NumPy scalar, broadcast by
    the operations that read it) rather than an array of ``n``."""
    op, a = e.op, e.args
    if op == "col":
        return env[a[0]]
    if op in HIST_OPS:
        return env[hist_name(e)]
    if op == "lit":
        return np.float64(literal_value(a[0], strings))
    if op == "true":
        return np.bool_(True)
    if op == "arith":
        x, y = _evaluate(a[1], env, n, strings), _evaluate(a[2], env, n, strings)
        with np.errstate(all="ignore"):
            if a[0] == "quot":
                return np.trunc(np.divide(x, y))
            return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[a[0]](x, y)
    if op == "cmp":
        x, y = _evaluate(a[1], env, n, strings), _evaluate(a[2], env, n, strings)
        x = x.astype(np.float64) if x.dtype == bool else x
        y = y.astype(np.float64) if y.dtype == bool else y
        with np.errstate(invalid="ignore"):
            r = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
                 ">=": np.greater_equal}[a[0]](x, y)
        # a null (NaN) side makes a comparison false: IEEE's already, but for "!="
        return r & ~np.isnan(x) & ~np.isnan(y) if a[0] == "!=" else r
    if op == "and":
        return _evaluate(a[0], env, n, strings) & _evaluate(a[1], env, n, strings)
    if op == "or":
        return _evaluate(a[0], env, n, strings) | _evaluate(a[1], env, n, strings)
    if op == "not":
        return ~_evaluate(a[0], env, n, strings)
    if op == "isin":
        x = _evaluate(a[0], env, n, strings)
        return np.isin(x, [literal_value(v, strings) for v in a[1] if v is not None])
    if op == "isnull":
        x = _evaluate(a[0], env, n, strings)
        return np.isnan(x) if x.dtype != bool else np.bool_(False)
    raise PatternError(f"{e!r} reads the partial match and cannot be evaluated per column")
