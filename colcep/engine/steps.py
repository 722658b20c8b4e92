"""A per-key step and the one compiled driver that runs it: :class:`Step`.

``kernels.nfa.run_batch`` (the driver) does everything of a kernel call but stepping a key's
events: it takes the per-key step as a first-class function (Numba's ``FunctionType``), so it
is compiled once per machine for every step of one signature, and apart from them. Both tiers
run through it: the generic tier with the interpreter ``kernels.nfa._run_key`` (:func:`generic`),
the compiled tier with a pattern's generated ``run_key`` (``colcep.engine.stepgen``).

Compiled apart, the step and the driver are two compiles of about the same size instead of
one large one (the driver linked with the interpreter, which LLVM then optimised again as a
part of it), and two processes can compile them at once (``colcep.tools.warmup``): each
compiles under a lock of its own (``kernel_cache.compile_lock``), so a process that needs one
another process is compiling waits for it and loads it from the disk cache. A call through the
function value costs ~0.2 us per key and call, measured equal to the direct call on P1-P5.
"""
from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from types import FunctionType as PythonFunction
from typing import Any, Callable

from colcep.engine import codegen
from colcep.engine import kernel_cache as cache
from colcep.kernels import nfa as knfa

__all__ = ["Step", "built", "compile_beside", "generic", "step_type"]

_SIGS: dict = {}  # step name -> {arg_key: signature}, shared by every Step of the name
_FNS: dict = {}  # step name -> {signature: callable}
_READY: dict = {}  # step name -> {arg_key: callable}
_GENERIC: list = []
_PY_DRIVER: list = []
_CHILDREN: list = []  # compile_beside's processes (kept: they run on after this process's call)
#: Build the step before the driver (``colcep.tools.warmup``'s process for the generic step,
#: beside the one that builds the driver first)
STEP_FIRST = False
#: Where the generic step is not cached yet, compile it in a second process while this one
#: compiles the driver (machines with two or more cores; ``colcep.tools.warmup`` sets it off)
BESIDE = True


def built(name: str) -> bool:
    """Whether this process has built the step ``name`` (for some argument types)."""
    return bool(_FNS.get(name))


def python_driver() -> Callable[..., Any]:
    """``run_batch``'s body as Python, calling ``_keys``'s as Python too (the step it is given
    then is Python: ``jit`` off), the other kernels compiled."""
    if not _PY_DRIVER:
        f = knfa.run_batch.py_func
        _PY_DRIVER.append(PythonFunction(f.__code__, dict(f.__globals__, _keys=knfa._keys.py_func), f.__name__))
    return _PY_DRIVER[0]


def step_type(args: tuple) -> Any:
    """The Numba type of a per-key step called by ``run_batch`` for a call with ``args`` (the
    groups ``kernels.nfa.work_groups`` makes, as ``_run_key`` takes them)."""
    from numba import typeof, types

    tables, opts, stop, batch, runs, held, start_dead, buf, park, out, nm, ne = args
    with cache.compile_lock("work-groups"):
        mode, cap, W, done, aux, Q, E, S, cur, PK, P = knfa.work_groups(tables, opts, batch, runs, buf, park)
    group = (tables, opts, mode, batch, stop, W, done, aux, Q, E, S, buf, out, cur, P, PK)
    return types.int64(*(typeof(x) for x in group))


class Step:
    """A per-key step (``run_key``, a Numba dispatcher; ``name`` names it among steps) as a
    ``run_batch`` for the tier to call. ``for_args(args)`` gives the callable for a call's
    arguments, compiling the step and the driver for their types when new; ``signature(args)``
    and ``build(sig)`` are its two halves, so that the compile can run in another thread
    (``tier="auto"``): the signature is read from the call's arguments in the caller's thread,
    the build needs only it. With ``jit`` off the driver's body runs as Python calling the
    step as Python (tests, debugging)."""

    def __init__(self, run_key: Any, name: str, jit: bool = True, beside: bool = False):
        self.run_key = run_key
        self.name = name
        self.jit = jit
        self.beside = beside  # a cold step compiles in a child process (compile_beside)
        # shared by the Steps of one name (every matcher of the shape): a new matcher types its
        # ~100 arrays once per process, not once per matcher (~20 ms)
        self._sigs: dict = _SIGS.setdefault(name, {})  # arg_key -> the signature
        self._fns: dict = _FNS.setdefault(name, {})  # signature -> the callable
        self._ready: dict = _READY.setdefault(name, {})  # arg_key -> the callable

    def for_args(self, args: tuple) -> Callable[..., Any]:
        fn = self.ready(args)
        return fn if fn is not None else self.build(self.signature(args))

    @property
    def built(self) -> bool:
        """Whether a callable was built for some signature."""
        return bool(self._fns)

    def ready(self, args: tuple) -> Callable[..., Any] | None:
        """The callable for ``args`` if built, else None (nothing compiled)."""
        key = codegen.arg_key(args)
        fn = self._ready.get(key)
        if fn is None:
            fn = self._fns.get(self.signature(args))  # (hashes ~100 Numba types: once per key)
            if fn is not None:
                self._ready[key] = fn
        return fn

    def signature(self, args: tuple) -> Any:
        """The step's and the driver's types for a call with ``args`` (None with ``jit`` off)."""
        key = codegen.arg_key(args)
        if key not in self._sigs:
            if not self.jit:
                self._sigs[key] = None
            else:
                from numba import types, typeof

                step = step_type(args)
                self._sigs[key] = (step, (types.FunctionType(step),) + tuple(typeof(a) for a in args))
        return self._sigs[key]

    def compile_step(self, sig: Any) -> None:
        """The step alone compiled (or loaded) for ``sig`` (``colcep.tools.warmup`` compiles it
        in one process while another compiles the driver)."""
        with cache.compile_lock(f"step-{self.name}"):
            if sig[0].args not in self.run_key.overloads:
                self.run_key.compile(sig[0].args)

    def build(self, sig: Any) -> Callable[..., Any]:
        """The callable for ``sig``: the driver and the step compiled for it (or loaded from the
        disk cache); with ``jit`` off the driver's body as Python calling the step."""
        fn = self._fns.get(sig)
        if fn is not None:
            return fn
        if sig is None:
            fn = partial(python_driver(), self.run_key)
        else:
            step, driver_sig = sig
            if self.beside and BESIDE and not STEP_FIRST and step.args not in self.run_key.overloads:
                compile_beside()
            parts = [partial(_compile_driver, driver_sig), partial(self.compile_step, sig)]
            for part in parts[::-1] if STEP_FIRST else parts:
                part()
            # the overload's own entry (the arguments' types are the ones it was compiled for), so
            # that no call resolves the types of ~100 arrays in Python again
            fn = partial(knfa.run_batch.overloads[driver_sig].entry_point, _address(self.run_key, step))
        self._fns[sig] = fn
        return fn


def _compile_driver(sig: Any) -> None:
    """The driver compiled (or loaded) for ``sig``, under its own lock."""
    driver = knfa.run_batch
    with cache.compile_lock("driver"):
        try:
            if sig not in driver.overloads:
                driver.disable_compile(False)
                driver.compile(sig)
        finally:
            # called with a step (a dispatcher), the driver must take it as a first-class
            # function through the overload above, not compile a copy for that one function
            driver.disable_compile(True)


def generic() -> Step:
    """The generic tier's step: the interpreter ``kernels.nfa._run_key`` (always compiled; when
    cold, beside the driver in a child process)."""
    if not _GENERIC:
        _GENERIC.append(Step(knfa._run_key, "generic", beside=True))
    return _GENERIC[0]


def compile_beside() -> subprocess.Popen | None:
    """When the generic step is not in the disk cache and the machine has a second core: a child
    process compiling it (``colcep warmup --groups cep-step``) while this one compiles the driver,
    then waits for the step's lock and loads it (a failed child leaves it to this process).
    The child is a fresh interpreter (not ``multiprocessing``, which would import the caller's
    script again); none in frozen applications."""
    if (os.cpu_count() or 1) < 2 or getattr(sys, "frozen", False) or cache.kernels_cold() is not True:
        return None  # (cold is a guess: None when it cannot be told, then no child)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (colcep's parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    try:
        child = subprocess.Popen([sys.executable, "-m", "colcep.cli", "warmup", "--groups", "cep-step",
                                  "--processes", "1"], env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    _CHILDREN.append(child)
    return child


def _address(fn: Any, sig: Any) -> Any:
    """``fn``'s compiled overload for ``sig`` as a first-class function value whose address is
    looked up once (a dispatcher passed as it is is looked up, and the call's types resolved,
    in Python at every call: ~1 ms with ``run_batch``'s arguments)."""
    from numba.core.types.function_type import WrapperAddressProtocol
    from numba.experimental.function_type import _get_wrapper_address

    class Address(WrapperAddressProtocol):
        def __init__(self) -> None:
            self.fn = fn  # (keeps the compiled code alive)
            self.addr = _get_wrapper_address(fn, sig)

        def __wrapper_address__(self) -> int:
            return self.addr

        def signature(self) -> Any:
            return sig

    return Address()
