"""The specialised kernel tier: a step kernel compiled for one pattern.

The generic kernel (``colcep.kernels.nfa``) interprets every condition: a mask row, or a
bytecode program run by ``kernels/vm.py``. For one :class:`~colcep.engine.program.CompiledPattern`
this module writes a Python module with the conditions inlined (``cond`` and ``next_event``
with the generic signatures, an if-chain over the condition ids, each program translated from
its bytecode into one straight-line expression over ``cols[x, row]``, ``masks[m, row]``,
``v[voff + ...]`` and constants) followed by a copy of ``kernels/nfa.py`` whose calls of
``cond`` / ``next_event`` resolve to the generated ones. Its ``run_batch`` has the generic
one's signature and state layout, so the tiers hand over between batches exactly.

The module is a real file, ``cache_dir()/spec/colcep_spec_<fingerprint>_<kernel hash>.py``
(the kernel hash covers every kernel source it copies or calls: a kernel change gives a new
file), so Numba caches its compiled code on disk next to it like any module: a pattern is
compiled once per machine (~35 s of CPU), later processes load it. Writing a module deletes
those of earlier kernel sources (``prune_stale``). With ``JIT`` off the module is not written
but run as plain Python from memory (tests, debugging).

``colcep.engine.tiers.Tier`` is what a Matcher asks, per batch, for the ``run_batch`` to call
(this module's for "specialised" and "auto").
"""
from __future__ import annotations

import hashlib
import importlib.util
import linecache
import os
import re
import sys
import threading
from types import ModuleType
from typing import Any, Callable

import numpy as np

from colcep import cache
from colcep.kernels import codes as kc
from colcep.kernels import conds as kconds
from colcep.kernels import nfa as knfa
from colcep.kernels import vm
from colcep.engine.program import CompiledPattern

MODULE_PREFIX = "colcep_spec_"
GENERATOR_VERSION = 1  # bump when the generated code changes meaning
# Numba-inline the generated cond / next_event into the step functions (their call sites): 8-33 %
# faster whole scans of P1-P4 for ~35 s of CPU per compile instead of ~21 s (docs/benchmarks.md);
# COLCEP_SPEC_INLINE=0 (or setting this to False before the first specialised Matcher) turns it off.
INLINE = os.environ.get("COLCEP_SPEC_INLINE", "1") != "0"
# False (COLCEP_SPEC_JIT=0): the generated module runs as plain Python from memory, nothing
# compiled or written. For tests and debugging: the corpus runs through exactly the generated
# code in seconds instead of a compile per pattern, and a debugger steps through its lines.
JIT = os.environ.get("COLCEP_SPEC_JIT", "1") != "0"

_SELF = hashlib.sha256(cache._read(__file__, globals().get("__loader__"))).digest()  # this generator's source
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


def _agg_expr(func: int, groups: list[int], pc: int) -> tuple[str, str]:
    """One aggregate over V groups (a float expression)."""
    if len(groups) != 1:
        # read from ``code`` as the VM does: the same values and argument types (no new signature)
        return "f", f"_agg(code[{pc + 1}], code, {pc + 3}, code[{pc + 2}], v, voff)"
    b = groups[0] * vm.VW

    def at(field: int) -> str:
        return f"v[voff + {b + field}]"

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


def translate_value(code: np.ndarray, consts: np.ndarray, start: int, end: int) -> str:
    """The program ``code[start:end]`` as one float expression (``eval_value``'s result) for no
    event (``row`` -1: a waiting run's threshold)."""
    return _as_float(_translate(code, consts, start, end, "-1"))


def _translate(code: np.ndarray, consts: np.ndarray, start: int, end: int, row: str,
               literal: bool = True) -> tuple[str, str]:
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
            stack.append(_agg_expr(int(code[pc + 1]), [int(g) for g in code[pc + 3:pc + 3 + ng]], pc))
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
            stack.append(("b", f"compare({int(code[pc + 1])}, {a}, {b})"))
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


def _strip_not(lw, c: int) -> tuple[int, bool]:
    """Condition ``c`` without its negations (``kernels.conds.strip_not``, run as Python)."""
    inner, neg = kconds.strip_not.py_func(c, lw.cond_kind, lw.cond_a)
    return int(inner), neg


# ----------------------------------------------------------------------------- the module source
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

_GENERIC_ARGS = "cond_kind, cond_a, cond_b, code, consts, row, masks, cols, v, voff, vm_stack, c_val, c_stamp, stamp"
_NEXT_ARGS = ("cond_kind, cond_a, cond_b, cond_thr, code, consts, masks, cols, v, voff, vm_stack, order, row_lo, j, "
              "n_rows, ts, last_t")


def _decorator() -> str:
    return ("@njit(cache=True, nogil=True, error_model=\"numpy\", _nrt=False"
            + (', inline="always")' if INLINE else ")"))


def _cond_source(prog: CompiledPattern) -> str:
    lw = prog.lowered
    out = [_decorator(),
           f"def cond(c, {_GENERIC_ARGS}):",
           "    \"\"\"Condition ``c`` of this pattern, inlined (``kernels.conds.cond``'s contract).\"\"\"",
           "    if c < 0:",
           "        return True"]
    for c in range(len(lw.cond_kind)):
        inner, neg = _strip_not(lw, c)
        out.append(f"    if c == {c}:")
        if lw.cond_kind[inner] == kc.COND_MASK:
            out.append(f"        return masks[{int(lw.cond_a[inner])}, row] {'==' if neg else '!='} 0")
            continue
        try:
            expr = translate(lw.code, lw.consts, int(lw.cond_a[inner]), int(lw.cond_b[inner]))
        except _Untranslatable:
            expr = (f"eval_program(code, {int(lw.cond_a[inner])}, {int(lw.cond_b[inner])}, consts, row, masks, cols, "
                    "v, voff, vm_stack)")
        out += [f"        if c_stamp[{inner}] == stamp:",
                f"            r = c_val[{inner}] != 0",
                "        else:",
                f"            r = {expr}",
                f"            c_val[{inner}] = 1 if r else 0",
                f"            c_stamp[{inner}] = stamp",
                f"        return {'not r' if neg else 'r'}"]
    out.append(f"    return _generic_cond(c, {_GENERIC_ARGS})")
    return "\n".join(out) + "\n"


def _scan(test: str) -> list[str]:
    return ["        while j < n_rows:",
            "            row = order[row_lo + j]",
            "            if ts[row] > last_t:",
            "                return BIG",
            f"            if {test}:",
            "                return j",
            "            j += 1",
            "        return n_rows"]


def _next_event_source(prog: CompiledPattern) -> str:
    lw = prog.lowered
    out = [_decorator(),
           f"def next_event(c, {_NEXT_ARGS}):",
           "    \"\"\"``kernels.conds.next_event`` for this pattern's waiting conditions, inlined.\"\"\""]
    waits = sorted({int(c) for c in prog.sleep_cond if c >= 0})
    out += ["    if n_rows > j + SCAN_AHEAD:",
            "        n_rows = j + SCAN_AHEAD"]
    for c in waits:
        inner, neg = _strip_not(lw, c)
        body = [f"    if c == {c}:"]
        if lw.cond_kind[inner] == kc.COND_MASK:
            out += body + _scan(f"masks[{int(lw.cond_a[inner])}, row] {'==' if neg else '!='} 0")
            continue
        x, op, t0, t1 = (int(a) for a in lw.cond_thr[inner])
        try:
            if x >= 0:  # column <op> threshold: the threshold once, then one float row
                body.append(f"        thr = {translate_value(lw.code, lw.consts, t0, t1)}")
                if not neg:
                    body += ["        if thr != thr:", "            return BIG"]
                test = f"compare({op}, cols[{x}, row], thr)"
            else:
                test = translate(lw.code, lw.consts, int(lw.cond_a[inner]), int(lw.cond_b[inner]))
        except _Untranslatable:
            continue  # the generic scan, below
        out += body + _scan(f"not {test}" if neg else test)
    out.append(f"    return _generic_next_event(c, {_NEXT_ARGS})")
    return "\n".join(out) + "\n"


def _kernel_source() -> str:
    """``kernels/nfa.py`` with absolute imports (its ``cond`` / ``next_event`` are replaced by
    the generated ones, defined after it: Numba resolves globals when it compiles)."""
    with open(knfa.__file__, encoding="utf-8") as fh:
        src = fh.read()
    if not re.search(r"\bcond\(", src) or not re.search(r"\bnext_event\(", src):
        raise RuntimeError("kernels/nfa.py no longer calls cond / next_event itself: the specialised tier "
                           "cannot inline conditions into it")
    return re.sub(r"^from \.(\w+) import", r"from colcep.kernels.\1 import", src, flags=re.MULTILINE)


def kernel_hash() -> str:
    """A hash of the kernel sources the generated module copies or calls (``nfa.py`` and every
    kernel module it imports, transitively) and of this generator's source."""
    stamp = cache._stamp(knfa.__file__, getattr(knfa, "__loader__", None))
    return hashlib.sha256(stamp + _SELF + f"gen-v{GENERATOR_VERSION}".encode()).hexdigest()[:16]


def module_name(prog: CompiledPattern) -> str:
    """``colcep_spec_<fingerprint>_<kernel hash>``, then the options: ``_plain`` (``INLINE``
    off), ``_py`` (``JIT`` off)."""
    return (f"{MODULE_PREFIX}{prog.fingerprint[:24]}_{kernel_hash()}{'' if INLINE else '_plain'}"
            f"{'' if JIT else '_py'}")


def _no_jit(*args: Any, **options: Any) -> Any:
    """``njit``'s stand-in in an interpreted module (``JIT`` False): the function itself."""
    return args[0] if args and callable(args[0]) else (lambda f: f)


def generate(prog: CompiledPattern) -> str:
    """The specialised module's source for ``prog``."""
    head = (f'"""colcep specialised kernel for program {prog.fingerprint} (generated by colcep.engine.specialise;\n'
            f'stages {prog.stage_names}). Do not edit: delete the file to regenerate it."""\n')
    kernel = _kernel_source()
    conds = ("\n\n# ---------------------------------------------------------------- this pattern's conditions\n"
             "from colcep.kernels.codes import BIG as BIG\n"
             "from colcep.kernels.conds import SCAN_AHEAD, cond as _generic_cond, next_event as _generic_next_event\n"
             "from colcep.kernels.vm import _agg, compare, eval_program\n" + HELPERS + "\n\n"
             + _cond_source(prog) + "\n\n" + _next_event_source(prog))
    src = head + kernel + conds
    if not JIT:
        src, n = re.subn(r"^from numba import njit$", "from colcep.engine.specialise import _no_jit as njit", src,
                         flags=re.MULTILINE)
        if n != 1:
            raise RuntimeError("kernels/nfa.py no longer imports njit in one line: cannot interpret its copy")
    return src


def module_path(prog: CompiledPattern) -> str:
    return os.path.join(cache.cache_dir(), "spec", module_name(prog) + ".py")


def load_module(prog: CompiledPattern) -> ModuleType:
    """The specialised module for ``prog``: written once (atomically) under ``cache_dir()/spec``
    and imported; its functions compile on first call or load from Numba's disk cache."""
    return load_generated(module_name(prog), module_path(prog), lambda: generate(prog), JIT,
                          lambda folder: prune_stale(folder, MODULE_PREFIX, kernel_hash()))


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


def prune_stale(folder: str, prefix: str = MODULE_PREFIX, current: str | None = None) -> int:
    """Delete the generated modules ``<prefix><24 hex>_<16 hex>...`` in ``folder`` (and their Numba
    cache files) whose kernel hash is not ``current`` (default: this tier's ``kernel_hash()``):
    earlier kernel sources generated them and nothing loads them again (the options' variants of
    the current one stay); returns how many files went. Called when a module is written, under
    the compile lock."""
    current = kernel_hash() if current is None else current
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


def arg_types(args: tuple) -> tuple:
    """Numba's argument types of a ``run_batch`` call (its dispatch key; ~1 ms: see ``arg_key``)."""
    from numba import typeof

    return tuple(typeof(a) for a in args)


def arg_key(x: Any) -> Any:
    """A cheap key of what Numba's argument types depend on (dtype, dimensions, layout,
    writability, alignment of every array), ~50 times faster than ``arg_types``."""
    if isinstance(x, np.ndarray):
        f = x.flags
        return x.dtype.str, x.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned
    if isinstance(x, tuple):
        return tuple(arg_key(a) for a in x)
    return type(x)


def compile_for(mod: ModuleType, sig: tuple) -> None:
    """Compile (or load from the disk cache) ``mod.run_batch`` for the argument types ``sig``
    (nothing to do for an interpreted module)."""
    if not hasattr(mod.run_batch, "compile") or sig in mod.run_batch.overloads:
        return
    with cache.compile_lock():
        mod.run_batch.compile(sig)
