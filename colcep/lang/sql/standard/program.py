"""A standard-mode query lowered to the arrays ``kernels.rowpattern`` runs: the pattern's program,
DEFINE as stack code, and the registers each thread keeps for what DEFINE reads.

What a condition reads of a thread's history decides its registers (and so which threads are
equivalent): ``S.x`` and ``LAST(S.x, n)`` the last n + 1 rows of the variable set S (a variable
or a SUBSET union), ``FIRST(S.x, n)`` its first n + 1, ``CLASSIFIER(S)`` the label of its last
row, ``COUNT(S.*)`` its row count, ``SUM / AVG / MIN / MAX / COUNT(S.x)`` one aggregate group per
set and column. The universal variable's rows are the match's rows, the same for every thread
of a search, so they cost no register. Navigating to a row's label (``PREV(CLASSIFIER())``)
reads the thread's whole labelling: such a query keeps every thread (exact, not pruned).

An expression over one row that the stack code does not compute (``lower(x)``, ``a || b``,
``CAST``...) is evaluated with Arrow over the whole input first, as a derived column.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sqlglot import exp

from colcep.kernels import rowpattern as K
from colcep.kernels import vm
from colcep.lang.sql.standard.syntax import (AGGREGATES, CONSUME, JMP, MATCH, NAVIGATION, SPLIT, Query, StdError,
                                             _call, _ident, _is_call, _table_var, compile_pattern,
                                             int_literal)

_ARITH = {exp.Add: K.A_ADD, exp.Sub: K.A_SUB, exp.Mul: K.A_MUL, exp.Div: K.A_DIV, exp.Mod: K.A_MOD}
_CMP = {exp.EQ: vm.C_EQ, exp.NEQ: vm.C_NE, exp.LT: vm.C_LT, exp.LTE: vm.C_LE, exp.GT: vm.C_GT, exp.GTE: vm.C_GE}
_FLOAT_TYPES = (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)
_INT_TYPES = (exp.DataType.Type.BIGINT, exp.DataType.Type.INT, exp.DataType.Type.SMALLINT, exp.DataType.Type.TINYINT)
_TYPE = {"str": "string", "int": "number", "float": "number", "bool": "boolean", "time": "time", "null": "NULL",
         "other": "value"}
_AGGS = {"COUNT": K.AGG_COUNT, "SUM": K.AGG_SUM, "AVG": K.AGG_AVG, "MIN": K.AGG_MIN, "MAX": K.AGG_MAX}
_WALK_FUNCS = {**_AGGS, "ANY_VALUE": K.AGG_ANY, "ARBITRARY": K.AGG_ANY, "MAX_BY": K.AGG_MAX_BY,
               "MIN_BY": K.AGG_MIN_BY}
_WALKED = {"ANY_VALUE", "ARBITRARY", "MAX_BY", "MIN_BY"}
# one-row functions the stack code leaves to Arrow (a derived column)
_ROWWISE = (exp.Lower, exp.Upper, exp.DPipe, exp.ConcatWs, exp.Cast, exp.Concat, exp.Round, exp.Floor, exp.Ceil,
            exp.Length, exp.Substring, exp.Trim)


def ref_var(node) -> str | None:
    """The one pattern variable an expression's column references (and CLASSIFIER / ``v.*``)
    name; None for the universal one. Several are an error, as in the standard."""
    found = {_table_var(c) for c in node.find_all(exp.Column) if c.table}
    found |= {_ident(f.expressions[0].sql()) for f in node.find_all(exp.Anonymous)
              if f.name.upper() in ("CLASSIFIER", "__ALLROWS") and f.expressions}
    if len(found) > 1:
        raise StdError(f"inconsistent pattern variable references in {node.sql()!r}: {', '.join(sorted(found))}")
    return next(iter(found), None)


def is_rowwise(node) -> bool:
    """Does ``node`` read only one row (no navigation, aggregate, CLASSIFIER or MATCH_NUMBER)?"""
    return not any(_is_call(f) and _call(f)[0] in _NAV_AGG for f in node.find_all(exp.Func)) and \
        not any(isinstance(f, exp.Anonymous) and f.name.upper().startswith("__") for f in node.find_all(exp.Anonymous))


_NAV_AGG = NAVIGATION | AGGREGATES | {"CLASSIFIER", "MATCH_NUMBER"}


@dataclass
class Columns:
    """The input columns a program reads, and their kinds ('int', 'float', 'str', 'bool', 'time');
    ``kind_of`` gives a one-row expression's kind (its Arrow type over no rows)."""
    kinds: dict[str, str]
    kind_of: Callable[[Any], str]
    used: list[str] = field(default_factory=list)           # cols[k] is used[k]
    derived: dict[str, Any] = field(default_factory=dict)   # derived column name -> row-wise expression

    def index(self, name: str) -> int:
        if name not in self.kinds:
            raise StdError(f"DEFINE: no column {name!r} in the input (columns: {', '.join(sorted(self.kinds))})")
        if name not in self.used:
            self.used.append(name)
        return self.used.index(name)

    def derive(self, node) -> str:
        """The derived column of the one-row expression ``node`` (column references unqualified)."""
        for name, d in self.derived.items():
            if d == node:
                return name
        name = f"__colcep_d{len(self.derived)}"
        self.derived[name] = node
        self.kinds[name] = self.kind_of(node)
        return name


@dataclass
class Program:
    """Everything ``kernels.rowpattern.match_partitions`` takes about the query."""
    op: np.ndarray
    arg: np.ndarray
    x: np.ndarray
    y: np.ndarray
    excluded: np.ndarray          # per instruction: a CONSUME inside {- -}
    variables: list[str]          # variable index -> name
    c_lo: np.ndarray
    c_hi: np.ndarray
    code: np.ndarray
    walks: np.ndarray             # walked aggregates (function, set, a_lo, a_hi, b_hi)
    w_lo: np.ndarray
    w_hi: np.ndarray
    consts: list                  # numbers, and strings until the run codes them
    sets: list[frozenset]         # set index -> its variables
    in_set: np.ndarray
    last_n: np.ndarray
    last_off: np.ndarray
    first_n: np.ndarray
    first_off: np.ndarray
    cnt_off: np.ndarray
    lab_off: np.ndarray
    agg_set: np.ndarray
    agg_col: np.ndarray
    agg_off: np.ndarray
    width: int
    dedup: bool
    columns: Columns
    skip_kind: int
    skip_set: int
    free: np.ndarray              # per variable: its condition is the same for every thread
    first: np.ndarray             # per variable: a match's first row may take it
    empty: bool                   # the pattern matches the empty sequence


class _Compiler:
    def __init__(self, q: Query, columns: Columns):
        self.q, self.columns = q, columns
        self.variables = list(q.variables)
        self.sets: list[frozenset] = []
        self.need: dict[int, dict[str, int]] = {}   # set -> {"last": n, "first": n, "cnt": 1, "lab": 1}
        self.groups: list[tuple[int, int]] = []     # (set, column index)
        self.consts: list = []
        self.code: list = []                        # every condition's code (jumps are absolute)
        self.walks: list[tuple] = []                # walked aggregates: (function, set, a_lo, a_hi, b_hi)
        self.dedup = True
        self.dependent = 0                          # thread-dependent reads emitted so far
        self.current = ""                           # the variable whose condition is compiled

    # -- registers ---------------------------------------------------------------------
    def set_of(self, var: str | None) -> int:
        if var is None:
            members = frozenset(self.variables)
        elif var in self.q.subsets:
            members = frozenset(self.q.subsets[var])
        elif var in self.variables:
            members = frozenset([var])
        else:
            raise StdError(f"DEFINE: {var!r} is not a pattern variable or SUBSET ({', '.join(self.variables)})")
        key = (var is None, members)
        for k, s in enumerate(self.sets):
            if (s[0], s[1]) == key:
                return k
        self.sets.append(key)
        self.need[len(self.sets) - 1] = {}
        return len(self.sets) - 1

    def needs(self, s: int, what: str, n: int = 1) -> None:
        self.need[s][what] = max(self.need[s].get(what, 0), n)
        self.need[s]["cnt"] = 1

    def const(self, v) -> int:
        self.consts.append(v)
        return len(self.consts) - 1

    # -- code ----------------------------------------------------------------------------
    def members(self, var: str) -> set[str]:
        return set(self.q.subsets.get(var, {var}))

    def condition(self, var: str, node) -> tuple[int, int, int, int, bool]:
        """Compile ``var``'s condition: its slices of ``code`` and of ``walks``, and whether it
        reads only rows at fixed offsets from the current one (then it is the same for every
        thread, and evaluated for all rows at once)."""
        lo, w_lo, dep = len(self.code), len(self.walks), self.dependent
        self.current = var
        self.val(node, self.code, None)
        return lo, len(self.code), w_lo, len(self.walks), self.dependent == dep

    def val(self, node, out: list, rowgen) -> str:  # noqa: C901 - one dispatch over node types
        """Emit code leaving ``node``'s value on the stack; returns its kind. ``rowgen`` emits the
        row a column reference reads (inside a navigation), None: the column's own variable."""
        if isinstance(node, (exp.Paren, exp.Alias)):
            return self.val(node.this, out, rowgen)
        if isinstance(node, exp.Literal):
            if node.is_string:
                out += [K.OP_CONST, self.const(node.this)]
                return "str"
            out += [K.OP_CONST, self.const(float(node.this))]
            return "int" if re.fullmatch(r"-?\d+", node.this) else "float"
        if isinstance(node, exp.Boolean):
            out += [K.OP_CONST, self.const(1.0 if node.this else 0.0)]
            return "bool"
        if isinstance(node, exp.Null):
            out += [K.OP_CONST, self.const(np.nan)]
            return "null"
        if isinstance(node, exp.Column):
            if rowgen is not None:
                rowgen(out)
            else:
                self.row_of(_table_var(node) if node.table else None, "LAST", 0, out)
            out += [K.OP_COLAT, self.columns.index(node.name.lower())]
            return self.columns.kinds[node.name.lower()]
        if isinstance(node, exp.Cast) and node.to.this in _FLOAT_TYPES + _INT_TYPES and \
                self.kind(node.this) in ("int", "float"):
            k = self.val(node.this, out, rowgen)      # a number to a double: what the stack holds
            if node.to.this in _FLOAT_TYPES:
                return "float"
            if k == "float":                          # a double to an integer rounds, as in Trino
                out += [K.OP_ROUND, self.const(1.0)]
            return "int"
        if isinstance(node, (exp.Floor, exp.Ceil, exp.Round)) and not is_rowwise(node):
            k = self.val(node.this, out, rowgen)
            if isinstance(node, exp.Round):
                digits = int_literal(node.args.get("decimals"), 0, "DEFINE: ROUND")
                out += [K.OP_ROUND, self.const(10.0 ** digits)]
            else:
                out.append(K.OP_FLOOR if isinstance(node, exp.Floor) else K.OP_CEIL)
            return k
        if isinstance(node, _ROWWISE) and is_rowwise(node):
            return self.derived(node, out, rowgen)
        if isinstance(node, (exp.Lower, exp.Upper)) and any(
                _is_call(f) and _call(f)[0] == "CLASSIFIER" for f in node.this.find_all(exp.Func)):
            # of a label: the variables' names mapped, as a CASE
            fn = str.lower if isinstance(node, exp.Lower) else str.upper
            return self.val(exp.Case(this=node.this.copy(), ifs=[
                exp.If(this=exp.Literal.string(v), true=exp.Literal.string(fn(v))) for v in self.variables]),
                out, rowgen)
        if isinstance(node, exp.Neg):
            k = self.val(node.this, out, rowgen)
            out.append(K.OP_NEG)
            return k
        if isinstance(node, exp.Abs):
            k = self.val(node.this, out, rowgen)
            out.append(K.OP_ABS)
            return k
        if isinstance(node, exp.Not):
            self.val(node.this, out, rowgen)
            out.append(K.OP_NOT)
            return "bool"
        if isinstance(node, (exp.And, exp.Or)):
            self.val(node.left, out, rowgen)
            self.val(node.right, out, rowgen)
            out.append(K.OP_AND if isinstance(node, exp.And) else K.OP_OR)
            return "bool"
        if type(node) in (exp.EQ, exp.NEQ) and any(isinstance(a, exp.Array) for a in (node.left, node.right)):
            return self.array_equal(node, out, rowgen)
        if type(node) in _CMP:
            ka = self.val(node.left, out, rowgen)
            kb = self.val(node.right, out, rowgen)
            for k in ("str", "time"):
                if k in (ka, kb) and not ({ka, kb} <= {k, "null"}):
                    raise StdError(f"DEFINE: cannot compare a {_TYPE[ka]} with a {_TYPE[kb]} ({node.sql()!r})")
            out += [K.OP_CMP, _CMP[type(node)]]
            return "bool"
        if type(node) in _ARITH:
            ka = self.val(node.left, out, rowgen)
            kb = self.val(node.right, out, rowgen)
            op = _ARITH[type(node)]
            if "str" in (ka, kb) or "time" in (ka, kb):
                raise StdError(f"DEFINE: arithmetic on a {'string' if 'str' in (ka, kb) else 'time'} is not "
                               f"supported in a condition ({node.sql()!r}); compare times directly")
            if op == K.A_DIV and ka == kb == "int":
                op = K.A_IDIV
            elif op == K.A_MOD and ka == kb == "int":
                op = K.A_IMOD
            out += [K.OP_ARITH, op]
            return "int" if ka == kb == "int" else "float"
        if isinstance(node, exp.Is):
            self.val(node.this, out, rowgen)
            out.append(K.OP_ISNULL)
            return "bool"
        if isinstance(node, exp.Between):
            self.val(node.this, out, rowgen)
            self.val(node.args["low"], out, rowgen)
            out += [K.OP_CMP, vm.C_GE]
            self.val(node.this, out, rowgen)
            self.val(node.args["high"], out, rowgen)
            out += [K.OP_CMP, vm.C_LE, K.OP_AND]
            return "bool"
        if isinstance(node, exp.In):
            self.val(node.this, out, rowgen)
            items = []
            for e in node.expressions:
                if isinstance(e, exp.Paren):
                    e = e.this
                neg = isinstance(e, exp.Neg)
                lit = e.this if neg else e
                if not isinstance(lit, exp.Literal):
                    raise StdError(f"DEFINE: IN takes literals here, not {e.sql()!r}")
                items.append(self.const(lit.this if lit.is_string else (-1 if neg else 1) * float(lit.this)))
            out += [K.OP_IN, len(items), *items]
            return "bool"
        if isinstance(node, exp.Case):
            return self.case(node, out, rowgen)
        if isinstance(node, exp.Coalesce):
            args = [node.this, *node.expressions]
            jumps = []
            kind = "null"
            for k, a in enumerate(args):
                ka = self.val(a, out, rowgen)
                kind = ka if kind == "null" else kind
                if k < len(args) - 1:
                    out += [K.OP_JNN, -1]
                    jumps.append(len(out) - 1)
                    out.append(K.OP_POP)
            for j in jumps:
                out[j] = len(out)
            return kind
        if _is_call(node):
            return self.call(node, out, rowgen)
        raise StdError(f"DEFINE: {node.sql()!r} is not supported in a condition")

    def kind(self, node) -> str:
        """The kind of value ``node`` gives (its code compiled and thrown away)."""
        saved = (len(self.code), len(self.consts), len(self.walks), self.dependent, self.dedup)
        try:
            return self.val(node, [], None)
        finally:
            del self.code[saved[0]:]
            del self.consts[saved[1]:]
            del self.walks[saved[2]:]
            self.dependent, self.dedup = saved[3], saved[4]

    def derived(self, node, out: list, rowgen) -> str:
        found = {_table_var(c) for c in node.find_all(exp.Column) if c.table}
        if len(found) > 1:
            raise StdError(f"DEFINE: {node.sql()!r} applies a function to the rows of several variables "
                           f"({', '.join(sorted(found))}); colcep computes such functions over one row: apply it "
                           "to each variable's column")
        var = next(iter(found), None)
        name = self.columns.derive(_bare(node))
        kind = self.columns.kinds[name]
        if rowgen is not None:
            rowgen(out)
        else:
            self.row_of(var, "LAST", 0, out)
        out += [K.OP_COLAT, self.columns.index(name)]
        return kind

    def case(self, node, out: list, rowgen) -> str:
        ends = []
        kind = "null"
        for w in node.args.get("ifs") or []:
            cond = w.this if node.this is None else exp.EQ(this=node.this.copy(), expression=w.this.copy())
            self.val(cond, out, rowgen)
            out += [K.OP_JNT, -1]
            jnt = len(out) - 1
            k = self.val(w.args["true"], out, rowgen)
            kind = k if kind == "null" else kind
            out += [K.OP_JMP, -1]
            ends.append(len(out) - 1)
            out[jnt] = len(out)
        d = node.args.get("default")
        k = self.val(d if d is not None else exp.Null(), out, rowgen)
        kind = k if kind == "null" else kind
        for j in ends:
            out[j] = len(out)
        return kind

    def row_of(self, var: str | None, fn: str, n: int, out: list) -> None:
        """Emit the row of ``FIRST / LAST(var, n)`` (-1 when there is none)."""
        if fn == "LAST" and n == 0 and (var is None or self.current in self.members(var)):
            out.append(K.OP_ROW_CUR)          # the last row of a set holding the current row's variable
            return
        self.dependent += 1
        if var is None:
            out += [K.OP_ROW_UFIRST if fn == "FIRST" else K.OP_ROW_ULAST, n]
            return
        s = self.set_of(var)
        if fn == "LAST":
            self.needs(s, "last", n + 1)
            out += [K.OP_ROW_LAST, s, n]
        else:
            self.needs(s, "first", n + 1)
            out += [K.OP_ROW_FIRST, s, n]

    def offset(self, args, k: int, what: str) -> int:
        return int_literal(args[k] if len(args) > k else None, 1 if what in ("PREV", "NEXT") else 0,
                           f"DEFINE: the offset of {what}", non_negative=True)

    def call(self, node, out: list, rowgen) -> str:  # noqa: C901
        name, args, final = _call(node)
        if final:
            raise StdError("DEFINE: FINAL semantics is not supported in DEFINE (conditions see the match so far)")
        if name == "MATCH_NUMBER":
            self.dependent += 1
            out.append(K.OP_MATCHNO)
            return "int"
        if name == "CLASSIFIER":
            var = _ident(args[0].sql()) if args else None
            if rowgen is not None:
                rowgen(out)
                out.append(K.OP_LABELAT)
                self.dedup = False
                self.dependent += 1
            elif var is None:
                out.append(K.OP_LABCUR)
            else:
                s = self.set_of(var)
                self.needs(s, "lab")
                out += [K.OP_LABREG, s]
                self.dependent += 1
            return "str"
        if name in ("PREV", "NEXT"):
            if rowgen is not None:
                raise StdError(f"DEFINE: {name} cannot be nested in another navigation's argument")
            inner = args[0]
            n = self.offset(args, 1, name)
            shift = -n if name == "PREV" else n
            if _is_call(inner) and _call(inner)[0] in ("FIRST", "LAST"):
                iname, iargs, _ = _call(inner)
                var, m, expr_ = ref_var(iargs[0]), self.offset(iargs, 1, iname), iargs[0]
                fn = iname
            else:
                var, m, expr_, fn = ref_var(inner), 0, inner, "LAST"

            def gen(o: list) -> None:
                self.row_of(var, fn, m, o)
                o += [K.OP_SHIFT, shift]
            return self.val(expr_, out, gen)
        if name in ("FIRST", "LAST"):
            if rowgen is not None:
                raise StdError(f"DEFINE: {name} cannot be nested in another navigation's argument")
            var, n = ref_var(args[0]), self.offset(args, 1, name)
            return self.val(args[0], out, lambda o: self.row_of(var, name, n, o))
        if name in _AGGS:
            return self.aggregate(name, args, out, rowgen)
        if name in _WALKED:
            return self.aggregate(name, args, out, rowgen)
        raise StdError(f"DEFINE: the function {name} is not supported in a condition")

    def walked(self, name: str, args, out: list) -> str:
        """An aggregate whose argument the registers cannot keep (it reads CLASSIFIER() or
        MATCH_NUMBER(), or picks a row as MAX_BY does): evaluated over the thread's rows, walked
        from its labels. The registers no longer tell its threads apart: they are all kept."""
        want = 2 if name in ("MAX_BY", "MIN_BY") else 1
        if len(args) != want:
            raise StdError(f"DEFINE: {name} takes {want} argument{'s' if want > 1 else ''}")
        var = ref_var(exp.Tuple(expressions=[a.copy() for a in args]))
        s = self.set_of(var)
        self.dedup = False
        self.dependent += 1
        head = len(out)
        out += [K.OP_AGGW, len(self.walks), -1]     # the value, then the argument code it skips
        a_lo = len(out)
        kind = self.val(args[0], out, lambda o: o.append(K.OP_ROW_WALK))
        a_hi = len(out)
        if want == 2:
            self.val(args[1], out, lambda o: o.append(K.OP_ROW_WALK))
        out[head + 2] = len(out)
        self.walks.append((_WALK_FUNCS[name], s, a_lo, a_hi, len(out)))
        return "int" if name == "COUNT" else kind

    def array_equal(self, node, out: list, rowgen) -> str:
        """``array_agg(e) = ARRAY[a, b, ...]`` as the count and each element compared."""
        agg, arr = (node.left, node.right) if isinstance(node.right, exp.Array) else (node.right, node.left)
        if not (_is_call(agg) and _call(agg)[0] == "ARRAY_AGG") or rowgen is not None:
            raise StdError(f"DEFINE: an ARRAY compares only with array_agg(...) here, not {node.sql()!r}")
        e = _call(agg)[1][0]
        var = ref_var(e)
        items = arr.expressions
        self.aggregate("COUNT", [exp.Star()] if var is None else [exp.Anonymous(this="__ALLROWS", expressions=[
            exp.to_identifier(var)])], out, None)
        out += [K.OP_CONST, self.const(float(len(items))), K.OP_CMP, vm.C_EQ]
        for k, item in enumerate(items):
            self.val(e, out, lambda o, k=k: self.row_of(var, "FIRST", k, o))
            self.val(item, out, None)
            out += [K.OP_CMP, vm.C_EQ, K.OP_AND]
        if isinstance(node, exp.NEQ):
            out.append(K.OP_NOT)
        return "bool"

    def aggregate(self, name: str, args, out: list, rowgen) -> str:
        if rowgen is not None:
            raise StdError(f"DEFINE: an aggregate cannot be an argument of a navigation ({name})")
        if name in _WALKED or (name in _AGGS and args and not isinstance(args[0], exp.Star) and not (
                _is_call(args[0]) and _call(args[0])[0] == "__ALLROWS") and not is_rowwise(args[0])):
            return self.walked(name, args, out)
        if name == "COUNT" and (not args or isinstance(args[0], exp.Star) or (
                _is_call(args[0]) and _call(args[0])[0] == "__ALLROWS")):
            var = _ident(args[0].expressions[0].sql()) if args and _is_call(args[0]) else None
            s = self.set_of(var)
            self.needs(s, "cnt")
            out += [K.OP_CNT, s]
            self.dependent += 1
            return "int"
        if len(args) != 1:
            raise StdError(f"DEFINE: {name} takes one argument")
        a = args[0]
        var = ref_var(a)
        if isinstance(a, exp.Column):
            col = self.columns.index(a.name.lower())
            kind = self.columns.kinds[a.name.lower()]
        elif is_rowwise(a):
            cname = self.columns.derive(_bare(a))
            col, kind = self.columns.index(cname), self.columns.kinds[cname]
        else:
            raise StdError(f"DEFINE: the argument of {name} must read one row, not {a.sql()!r}")
        s = self.set_of(var)
        self.needs(s, "cnt")
        g = (s, col)
        if g not in self.groups:
            self.groups.append(g)
        out += [K.OP_AGG, _AGGS[name], self.groups.index(g)]
        self.dependent += 1
        return "int" if name == "COUNT" or (name in ("SUM", "MIN", "MAX") and kind == "int") else "float"


def _bare(node):
    """``node`` with its column references unqualified (a derived column reads one row)."""
    bare = node.copy()
    for c in bare.find_all(exp.Column):
        c.set("table", None)
    return bare


def compile_program(q: Query, kinds: dict[str, str], kind_of: Callable[[Any], str] = lambda node: "float") -> Program:
    """The query's pattern and DEFINE as kernel arrays (strings stay in ``consts`` until the run
    codes them); ``kinds``: the input columns' kinds, ``kind_of``: a derived expression's."""
    cols = Columns(dict(kinds), kind_of)
    c = _Compiler(q, cols)
    var_index = {v: k for k, v in enumerate(c.variables)}
    ins = compile_pattern(q.pattern)
    op = np.array([i.op for i in ins], np.int64)
    arg = np.array([var_index[i.var] if i.op == CONSUME else -1 for i in ins], np.int64)
    x = np.array([i.x for i in ins], np.int64)
    y = np.array([i.y for i in ins], np.int64)
    excluded = np.array([i.excl for i in ins], bool)
    c_lo = np.zeros(len(c.variables), np.int64)
    c_hi = np.zeros(len(c.variables), np.int64)
    w_lo = np.zeros(len(c.variables), np.int64)
    w_hi = np.zeros(len(c.variables), np.int64)
    free = np.ones(len(c.variables), bool)           # thread-free conditions (no condition: true)
    for var, node in q.define.items():
        if var not in var_index:
            raise StdError(f"DEFINE: {var!r} is not a pattern variable ({', '.join(c.variables)})")
        v = var_index[var]
        c_lo[v], c_hi[v], w_lo[v], w_hi[v], free[v] = c.condition(var, node)
    skip_kind, skip_set = K.SKIP_PAST, 0
    if q.skip[0] == "next":
        skip_kind = K.SKIP_NEXT
    elif q.skip[0] in ("first", "last"):
        skip_kind = K.SKIP_FIRST if q.skip[0] == "first" else K.SKIP_LAST
        if q.skip[1] not in var_index and q.skip[1] not in q.subsets:
            raise StdError(f"AFTER MATCH SKIP: {q.skip[1]!r} is not a pattern variable or SUBSET")
        skip_set = c.set_of(q.skip[1])
    # registers
    ns = len(c.sets)
    off = 0
    arrays = {k: np.zeros(ns, np.int64) for k in ("last_n", "last_off", "first_n", "first_off")}
    cnt_off = np.full(ns, -1, np.int64)
    lab_off = np.full(ns, -1, np.int64)
    for s in range(ns):
        need = c.need[s]
        arrays["last_n"][s], arrays["last_off"][s] = need.get("last", 0), off
        off += need.get("last", 0)
        arrays["first_n"][s], arrays["first_off"][s] = need.get("first", 0), off
        off += need.get("first", 0)
        if need.get("cnt"):
            cnt_off[s] = off
            off += 1
        if need.get("lab"):
            lab_off[s] = off
            off += 1
    agg_off = np.arange(len(c.groups), dtype=np.int64) * K.GW + off
    off += len(c.groups) * K.GW
    in_set = np.zeros((len(c.variables), max(ns, 1)), np.bool_)
    for s, (_, members) in enumerate(c.sets):
        for v in members:
            in_set[var_index[v], s] = True
    return Program(op, arg, x, y, excluded, c.variables, c_lo, c_hi, np.array(c.code, np.int64),
                   np.array(c.walks, np.int64).reshape(-1, 5), w_lo, w_hi, c.consts,
                   [m for _, m in c.sets], in_set, arrays["last_n"], arrays["last_off"], arrays["first_n"],
                   arrays["first_off"], cnt_off, lab_off, np.array([g[0] for g in c.groups], np.int64),
                   np.array([g[1] for g in c.groups], np.int64), agg_off, off, c.dedup, cols, skip_kind, skip_set,
                   free, *_first_consumes(ins, var_index))


def _first_consumes(ins, var_index) -> tuple[np.ndarray, bool]:
    """The variables a match's first row can take, and whether the pattern matches the empty
    sequence (anchors taken as passing: a superset)."""
    first = np.zeros(len(var_index), bool)
    seen, todo, empty = set(), [0], False
    while todo:
        pc = todo.pop()
        if pc in seen:
            continue
        seen.add(pc)
        i = ins[pc]
        if i.op == CONSUME:
            first[var_index[i.var]] = True
        elif i.op == MATCH:
            empty = True
        elif i.op == SPLIT:
            todo += [i.x, i.y]
        elif i.op == JMP:
            todo.append(i.x)
        else:
            todo.append(pc + 1)
    return first, empty
