"""Which step kernel a Matcher calls, batch by batch: :class:`Tier`.

"generic" (always ``kernels.nfa._run_key``, the interpreter), "compiled" (the per-key step
``colcep.engine.stepgen`` generates for the pattern's shape, built or loaded before the first
batch) or "auto" (that step compiled in a background thread started at the first batch, the
generic kernel running meanwhile; the Matcher switches at the first batch boundary after it is
ready). A pattern the generator does not write (``stepgen.unsupported``: a too wide state) runs on the
generic kernel in both. The tiers share the state layout, so a state moves between them at any
batch boundary. A failed generation or compile falls back to the generic kernel with a warning.
Both steps run through the one driver, ``kernels.nfa.run_batch`` (``colcep.engine.steps``).
"specialised", the name of an earlier tier the compiled step replaced, is taken as "compiled".
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

from colcep.engine import stepgen, steps
from colcep.engine.program import CompiledPattern
from colcep.errors import ColcepWarning, InputError

TIERS = ("auto", "generic", "compiled")
DEFAULT_TIER = "generic"
_ALIASES = {"specialised": "compiled"}


def check_tier(tier: str) -> str:
    """The tier ``tier`` names, else an InputError saying which ones there are."""
    tier = _ALIASES.get(tier, tier)
    if tier not in TIERS:
        raise InputError(f"tier must be one of {list(TIERS)}, got {tier!r}")
    return tier


class Tier:
    """Which ``run_batch`` a Matcher calls, batch by batch (see the module docstring)."""

    def __init__(self, prog: CompiledPattern, tier: str = DEFAULT_TIER):
        self.prog = prog
        self.requested = check_tier(tier)
        why = None if self.requested == "generic" else stepgen.unsupported(prog)
        if why is not None:
            warnings.warn(f"colcep: the compiled step does not generate {why} yet; the generic kernel runs this "
                          "pattern", ColcepWarning, stacklevel=3)
        self._failed = self.requested == "generic" or why is not None
        self._step: Any = None  # the pattern's compiled step (a steps.Step)
        self._thread: threading.Thread | None = None  # "auto": the compile in the background
        self._last: str | None = None
        self._lock = threading.Lock()  # a sharded Matcher's kernel calls ask from several threads

    @property
    def active(self) -> str | None:
        """The tier the last kernel call ran on (None before the first)."""
        return self._last

    def _fail(self, exc: BaseException) -> None:
        self._failed = True
        warnings.warn(f"colcep: the compiled step for this pattern could not be built "
                      f"({type(exc).__name__}: {exc}); the generic kernel runs it", ColcepWarning, stacklevel=4)

    def run_batch(self, args: tuple) -> Callable[..., Any]:
        """The ``run_batch`` to call with ``args`` (builds, loads or starts a compile as the
        tier says)."""
        fn = None
        if not self._failed:
            with self._lock:
                try:
                    if self._step is None:
                        self._step = stepgen.step(self.prog)
                    if self.requested == "compiled":
                        fn = self._step.for_args(args)
                    else:
                        fn = self._step.ready(args)
                        if fn is None:
                            self._start(self._step.signature(args))
                except Exception as exc:  # noqa: BLE001 - the generic tier is always correct
                    self._fail(exc)
                    fn = None
        self._last = "generic" if fn is None else "compiled"
        return steps.generic().for_args(args) if fn is None else fn

    def _start(self, sig: Any) -> None:
        """"auto": compile for ``sig`` in a background thread, unless one is compiling."""
        if self._thread is not None and self._thread.is_alive():
            return

        def build() -> None:
            try:
                self._step.build(sig)
            except Exception as exc:  # noqa: BLE001 - the generic tier is always correct
                self._fail(exc)

        self._thread = threading.Thread(target=build, name="colcep-compile", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background compile; True when the compiled step is ready (or the pattern
        was never going to compile: False)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self._step is not None and self._step.built and not self._failed
