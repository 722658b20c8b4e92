"""What the generated kernels share (``colcep.engine.stepgen``, the compiled step): conditions
translated from their bytecode into Python expressions Numba compiles, and generated modules
written, loaded and pruned.

A condition's program (``kernels/vm.py``'s bytecode) becomes one straight-line expression over
``cols[x, row]``, ``masks[m, row]``, ``v[voff + ...]`` and constants (literals, or read from
``consts`` so that programs of one shape give one source), with exactly the VM's result.

A generated module is a real file under ``cache_dir()``, named by a hash of its source and of the
kernel sources it calls, so Numba caches its compiled code on disk next to it like any module:
compiled once per machine, loaded by later processes. Writing one deletes those of earlier kernel
sources (``prune_stale``). With ``JIT`` off it is not written but run as plain Python from memory
(tests, debugging).
"""
from __future__ import annotations

import importlib.util
import linecache
import os
import re
import sys
import threading
from types import ModuleType
from typing import Any, Callable

import numpy as np

from colcep.engine import kernel_cache as cache
from colcep.kernels import conds as kconds
from colcep.kernels import vm

# False (COLCEP_STEP_JIT=0): generated modules run as plain Python from memory, nothing compiled
# or written. For tests and debugging: the corpus runs through exactly the generated code in
# seconds instead of a compile per shape, and a debugger steps through its lines.
JIT = os.environ.get("COLCEP_STEP_JIT", "1") != "0"

_LOCK = threading.Lock()  # one generation / import at a time in this process
_MODULES: dict[str, ModuleType] = {}


# ----------------------------------------------------------------------------- bytecode -> expression
class _Untranslatable(Exception):
    """An opcode this translator does not inline (the condition then calls ``eval_program``)."""


def _const(x: float) -> str:
    if x != x:
        return "np.nan"
    if x in (np.inf, -np.inf):
        return "np.inf" if x > 0 else "-np.inf"
    return repr(float(x))


def _agg_expr(func: int, groups: list[int], pc: int, voff: str) -> tuple[str, str]:
    """One aggregate over V groups (a float expression) of the V at ``v[voff]``."""
    if len(groups) != 1:
        # read from ``code`` as the VM does: the same values and argument types (no new signature)
        return "f", f"_agg(code[{pc + 1}], code, {pc + 3}, code[{pc + 2}], v, {voff})"
    b = groups[0] * vm.VW

    def at(field: int) -> str:
        return f"v[{voff} + {b + field}]"

    if func == vm.AGG_COUNT:
        return "f", at(vm.V_N)
    if func == vm.AGG_SUM:
        return "f", at(vm.V_SUM)
    valid = at(vm.V_VALID)
    val = {vm.AGG_LAST: at(vm.V_LAST), vm.AGG_FIRST: at(vm.V_FIRST), vm.AGG_MIN: at(vm.V_MIN),
           vm.AGG_MAX: at(vm.V_MAX), vm.AGG_AVG: f"{at(vm.V_SUM)} / {valid}"}.get(func)
    if val is None:
        raise _Untranslatable(f"aggregate function {func}")
    return "f", f"(np.nan if {valid} == 0.0 else {val})"


_CMP = {vm.C_EQ: "==", vm.C_LT: "<", vm.C_LE: "<=", vm.C_GT: ">", vm.C_GE: ">="}


def compare_expr(k: int, a: str, b: str) -> str:
    """``vm.compare(k, a, b)`` as an expression: Python's operator where IEEE comparisons with
    NaN give ``compare``'s false (all but ``!=``), else the call."""
    sym = _CMP.get(k)
    return f"({a} {sym} {b})" if sym else f"compare({k}, {a}, {b})"


def _as_float(node: tuple[str, str]) -> str:
    kind, s = node
    return s if kind == "f" else f"(1.0 if {s} else 0.0)"


def _as_bool(node: tuple[str, str]) -> str:
    kind, s = node
    return s if kind == "b" else f"({s} != 0.0)"


def translate(code: np.ndarray, consts: np.ndarray, start: int, end: int, row: str = "row",
              literal: bool = True) -> str:
    """The program ``code[start:end]`` as one boolean expression, with exactly ``eval_program``'s
    result (``value != 0``); ``row`` names the event. Constants are written as literals, or
    (``literal`` False) read from ``consts``, so that programs of one shape give one source."""
    return _as_bool(_translate(code, consts, start, end, row, literal))


def translate_value(code: np.ndarray, consts: np.ndarray, start: int, end: int, literal: bool = True,
                    voff: str = "voff") -> str:
    """The program ``code[start:end]`` as one float expression (``eval_value``'s result) for no
    event (``row`` -1: a waiting run's threshold), of the V at ``v[voff]``."""
    return _as_float(_translate(code, consts, start, end, "-1", literal, voff))


def _translate(code: np.ndarray, consts: np.ndarray, start: int, end: int, row: str,
               literal: bool = True, voff: str = "voff") -> tuple[str, str]:
    stack: list[tuple[str, str]] = []  # (kind: "f" float | "b" bool, source)
    pc = start
    while pc < end:
        op = int(code[pc])
        if op == vm.OP_COL:
            stack.append(("f", f"cols[{int(code[pc + 1])}, {row}]"))
            pc += 2
        elif op == vm.OP_CONST:
            k = int(code[pc + 1])
            stack.append(("f", _const(float(consts[k])) if literal else f"consts[{k}]"))
            pc += 2
        elif op == vm.OP_MASK:
            stack.append(("b", f"(masks[{int(code[pc + 1])}, {row}] != 0)"))
            pc += 2
        elif op == vm.OP_AGG:
            ng = int(code[pc + 2])
            stack.append(_agg_expr(int(code[pc + 1]), [int(g) for g in code[pc + 3:pc + 3 + ng]], pc, voff))
            pc += 3 + ng
        elif op == vm.OP_ARITH:
            b, a = _as_float(stack.pop()), _as_float(stack.pop())
            k = int(code[pc + 1])
            if k == vm.A_QUOT:
                stack.append(("f", f"np.trunc({a} / {b})"))
            else:
                sym = {vm.A_ADD: "+", vm.A_SUB: "-", vm.A_MUL: "*", vm.A_DIV: "/"}[k]
                stack.append(("f", f"({a} {sym} {b})"))
            pc += 2
        elif op == vm.OP_CMP:
            b, a = _as_float(stack.pop()), _as_float(stack.pop())
            stack.append(("b", compare_expr(int(code[pc + 1]), a, b)))
            pc += 2
        elif op in (vm.OP_AND, vm.OP_OR):
            b, a = _as_bool(stack.pop()), _as_bool(stack.pop())
            stack.append(("b", f"({a} {'and' if op == vm.OP_AND else 'or'} {b})"))
            pc += 1
        elif op == vm.OP_NOT:
            stack.append(("b", f"(not {_as_bool(stack.pop())})"))
            pc += 1
        elif op == vm.OP_ISNULL:
            stack.append(("b", f"_isnull({_as_float(stack.pop())})"))
            pc += 1
        elif op == vm.OP_ISIN:
            n = int(code[pc + 1])
            stack.append(("b", f"_isin({_as_float(stack.pop())}, code, consts, {pc + 2}, {n})"))
            pc += 2 + n
        elif op == vm.OP_TRUE:
            stack.append(("b", "True"))
            pc += 1
        else:
            raise _Untranslatable(f"opcode {op}")
    if len(stack) != 1:
        raise _Untranslatable(f"a program leaving {len(stack)} values")
    return stack[0]


# ----------------------------------------------------------------------------- the V fields read
#: The fields of its one V group an aggregate reads (``vm._agg_one``).
_AGG_FIELDS = {vm.AGG_COUNT: (vm.V_N,), vm.AGG_SUM: (vm.V_SUM,), vm.AGG_LAST: (vm.V_VALID, vm.V_LAST),
               vm.AGG_FIRST: (vm.V_VALID, vm.V_FIRST), vm.AGG_AVG: (vm.V_VALID, vm.V_SUM),
               vm.AGG_MIN: (vm.V_VALID, vm.V_MIN), vm.AGG_MAX: (vm.V_VALID, vm.V_MAX)}
_ONE_WORD = (vm.OP_AND, vm.OP_OR, vm.OP_NOT, vm.OP_ISNULL, vm.OP_TRUE)
_TWO_WORDS = (vm.OP_COL, vm.OP_CONST, vm.OP_MASK, vm.OP_ARITH, vm.OP_CMP)


def v_fields_read(code: np.ndarray) -> dict[int, tuple[int, ...]] | None:
    """The V fields the programs of ``code`` (a program's whole bytecode, programs back to back)
    read, per group: what an aggregate of one group reads (``vm._agg_one``), every field of each
    group an aggregate spans several of (``vm._agg``), and the valid count wherever ``v_update``
    tests it (a minimum, maximum or first). None for an opcode it does not know."""
    read: dict[int, set[int]] = {}
    pc = 0
    while pc < len(code):
        op = int(code[pc])
        if op == vm.OP_AGG:
            func, ng = int(code[pc + 1]), int(code[pc + 2])
            groups = [int(g) for g in code[pc + 3:pc + 3 + ng]]
            fields = _AGG_FIELDS[func] if ng == 1 else range(vm.VW)
            for g in groups:
                read.setdefault(g, set()).update(fields)
            pc += 3 + ng
        elif op in _TWO_WORDS:
            pc += 2
        elif op in _ONE_WORD:
            pc += 1
        elif op == vm.OP_ISIN:
            pc += 2 + int(code[pc + 1])
        else:
            return None
    for fields in read.values():
        if fields & {vm.V_MIN, vm.V_MAX, vm.V_FIRST, vm.V_FIRST_POS}:
            fields.add(vm.V_VALID)
    return {g: tuple(sorted(f)) for g, f in sorted(read.items())}


def v_update_lines(v: str, base: str, group: int, fields: tuple[int, ...], x: str, pos: str) -> list[str]:
    """``vm.v_update`` of V group ``group`` of the V at ``v[base]`` written out for ``fields``
    only (the others are read by no program, so left as they are): the same values in those."""
    at = {f: f"{v}[{base} + {group * vm.VW + f}]" for f in range(vm.VW)}
    out = [f"{at[vm.V_N]} += 1.0"] if vm.V_N in fields else []
    first = [f"{at[f]} = {pos if f == vm.V_FIRST_POS else x}"
             for f in (vm.V_MIN, vm.V_MAX, vm.V_FIRST, vm.V_FIRST_POS) if f in fields]
    later = ([f"if {x} < {at[vm.V_MIN]}:", f"    {at[vm.V_MIN]} = {x}"] if vm.V_MIN in fields else []) + (
        [f"if {x} > {at[vm.V_MAX]}:", f"    {at[vm.V_MAX]} = {x}"] if vm.V_MAX in fields else [])
    body = ([f"if {at[vm.V_VALID]} == 0.0:"] + ["    " + s for s in first]
            + (["else:"] + ["    " + s for s in later] if later else []) if first else [])
    body += [f"{at[vm.V_VALID]} += 1.0"] if vm.V_VALID in fields else []
    body += [f"{at[vm.V_SUM]} += {x}"] if vm.V_SUM in fields else []
    body += [f"{at[vm.V_LAST]} = {x}"] if vm.V_LAST in fields else []
    body += [f"{at[vm.V_LAST_POS]} = {pos}"] if vm.V_LAST_POS in fields else []
    return out + ([f"if {x} == {x}:"] + ["    " + s for s in body] if body else [])


def _strip_not(lw, c: int) -> tuple[int, bool]:
    """Condition ``c`` without its negations (``kernels.conds.strip_not``, run as Python)."""
    inner, neg = kconds.strip_not.py_func(c, lw.cond_kind, lw.cond_a)
    return int(inner), neg


HELPERS = '''
@njit(cache=True, nogil=True, inline="always")
def _isnull(x):
    return x != x


@njit(cache=True, nogil=True, inline="always")
def _isin(x, code, consts, at, n):
    r = False
    for j in range(n):
        if x == consts[code[at + j]]:
            r = True
    return r
'''

def _no_jit(*args: Any, **options: Any) -> Any:
    """``njit``'s stand-in in an interpreted module (``JIT`` False): the function itself."""
    return args[0] if args and callable(args[0]) else (lambda f: f)


def load_generated(name: str, path: str, source: Callable[[], str], jit: bool,
                   prune: Callable[[str], int]) -> ModuleType:
    """The generated module ``name``: imported from ``path`` (written from ``source()`` first by
    one process of the machine, atomically; ``prune(folder)`` then deletes stale ones), or with
    ``jit`` False run as plain Python from memory. Loaded once per process."""
    with _LOCK:
        if name in _MODULES:
            return _MODULES[name]
        if not jit:  # nothing to cache: run from memory, its lines registered for tracebacks
            return _MODULES.setdefault(name, _interpreted(name, source()))
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            src = source()
            with cache.compile_lock():  # one process of the machine writes it
                if not os.path.exists(path):
                    tmp = f"{path}.{os.getpid()}.tmp"
                    with open(tmp, "w", encoding="utf-8") as fh:
                        fh.write(src)
                    os.replace(tmp, path)  # never rewritten: Numba's cache index keys it by its mtime
                    prune(os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
        _MODULES[name] = mod
        return mod


def _interpreted(name: str, src: str) -> ModuleType:
    filename = f"<{name}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    mod = ModuleType(name)
    mod.__file__ = filename
    exec(compile(src, filename, "exec"), mod.__dict__)
    return mod


def prune_stale(folder: str, prefix: str, current: str) -> int:
    """Delete the generated modules ``<prefix><24 hex>_<16 hex>...`` in ``folder`` (and their Numba
    cache files) whose kernel hash is not ``current``: earlier kernel sources generated them and
    nothing loads them again (the variants of the current one stay); returns how many files
    went. Called when a module is written, under the compile lock."""
    stale = re.compile(rf"^{prefix}[0-9a-f]{{24}}_([0-9a-f]{{16}})[._]")
    gone = 0
    for d in (folder, os.path.join(folder, "__pycache__")):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            m = stale.match(name)
            if m and m.group(1) != current:
                try:
                    os.remove(os.path.join(d, name))
                    gone += 1
                except OSError:
                    pass
    return gone


_TYPED_FLAGS = 0x1 | 0x2 | 0x100 | 0x400  # numpy's C_CONTIGUOUS, F_CONTIGUOUS, ALIGNED, WRITEABLE


def arg_key(x: Any) -> Any:
    """A cheap key of what Numba's argument types depend on (dtype, dimensions, layout,
    writability, alignment of every array), ~100 times faster than ``arg_types`` (a kernel
    call's ~85 arrays: 12 us)."""
    if isinstance(x, tuple):
        return tuple(map(arg_key, x))
    if isinstance(x, np.ndarray):
        return x.dtype, x.ndim, x.flags.num & _TYPED_FLAGS
    return type(x)
