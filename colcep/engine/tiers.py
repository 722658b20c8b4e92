"""Which step kernel a Matcher calls, batch by batch: :class:`Tier`.

"generic" (always ``kernels.nfa.run_batch``, the interpreter), "specialised" (the module of
``colcep.engine.specialise``, built or loaded before the first batch), "auto" (that module
compiled in a background thread started at the first batch; the Matcher switches at the first
batch boundary after it is ready) or "compiled" (the per-key step of ``colcep.engine.stepgen``
where it generates the pattern's shape). The tiers share the state layout, so a state moves
between them at any batch boundary. A failed generation or compile falls back to the generic
kernel with a warning.
"""
from __future__ import annotations

import threading
import warnings
from types import ModuleType
from typing import Any, Callable

from colcep.engine import specialise as sp
from colcep.engine import stepgen
from colcep.engine.program import CompiledPattern
from colcep.errors import ColcepWarning, InputError
from colcep.kernels import nfa as knfa

TIERS = ("auto", "generic", "specialised", "compiled")
DEFAULT_TIER = "generic"
_SIGS: dict = {}  # arg_key -> arg_types, for every Tier of the process (many short-lived Matchers)


def check_tier(tier: str) -> str:
    """``tier`` if it names a tier, else an InputError saying which ones do."""
    if tier not in TIERS:
        raise InputError(f"tier must be one of {list(TIERS)}, got {tier!r}")
    return tier


class Tier:
    """Which ``run_batch`` a Matcher calls, batch by batch (see the module docstring)."""

    def __init__(self, prog: CompiledPattern, tier: str = DEFAULT_TIER):
        self.prog = prog
        self.requested = check_tier(tier)
        self._mod: ModuleType | None = None
        self._failed = tier == "generic"
        self._thread: threading.Thread | None = None
        self._ready: set = set()  # argument types the specialised run_batch is compiled for
        self._last: str | None = None
        self._lock = threading.Lock()  # a sharded Matcher's kernel calls ask from several threads
        self._step: Any = None  # "compiled": the pattern's stepgen.Step
        self._why: str | None | bool = False  # "compiled": stepgen.unsupported's answer (False: not asked yet)

    @property
    def active(self) -> str | None:
        """The tier the last kernel call ran on (None before the first)."""
        return self._last

    def _fail(self, exc: BaseException) -> None:
        self._failed = True
        warnings.warn(f"colcep: the {self.requested} kernel for this pattern could not be built "
                      f"({type(exc).__name__}: {exc}); the generic kernel runs it", ColcepWarning, stacklevel=4)

    def _build(self, sig: tuple) -> None:
        try:
            mod = self._mod or sp.load_module(self.prog)
            sp.compile_for(mod, sig)
            self._mod = mod
            self._ready.add(sig)
        except Exception as exc:  # noqa: BLE001 - the generic tier is always correct
            self._fail(exc)

    def run_batch(self, args: tuple) -> Callable[..., Any]:
        """The ``run_batch`` to call with ``args`` (compiles, loads or starts a compile as the
        tier says)."""
        if self._failed:
            self._last = "generic"
            return knfa.run_batch
        with self._lock:
            if self.requested == "compiled":
                return self._compiled(args)
            return self._pick(args)

    def _compiled(self, args: tuple) -> Callable[..., Any]:
        """The compiled step's ``run_batch`` where the generator writes this pattern's step, else
        the generic kernel's."""
        if self._why is False:  # worked out once, not at every kernel call
            self._why = stepgen.unsupported(self.prog)
        if self._why is None:
            try:
                if self._step is None:
                    self._step = stepgen.Step(self.prog)
                fn = self._step.for_args(args)
                self._last = "compiled"
                return fn
            except Exception as exc:  # noqa: BLE001 - the generic tier is always correct
                self._fail(exc)
        self._last = "generic"
        return knfa.run_batch

    def _pick(self, args: tuple) -> Callable[..., Any]:
        key = sp.arg_key(args)
        sig = _SIGS.get(key)
        if sig is None:
            sig = _SIGS[key] = sp.arg_types(args)
        if sig not in self._ready:
            if self.requested == "specialised":
                self._build(sig)
            else:  # "auto": this batch runs generic while the specialised kernel compiles
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._build, args=(sig,), daemon=True,
                                                    name="colcep-specialise")
                    self._thread.start()
                self._last = "generic"
                return knfa.run_batch
        if sig in self._ready and not self._failed:
            self._last = "specialised"
            return self._mod.run_batch
        self._last = "generic"
        return knfa.run_batch

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background compile; True when the specialised kernel is ready."""
        if self._thread is not None:
            self._thread.join(timeout)
        return bool(self._ready) and not self._failed
