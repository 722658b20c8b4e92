"""Which step kernel a Matcher calls, batch by batch: :class:`Tier`.

"generic" (always ``kernels.nfa._run_key``, the interpreter), "compiled" (the per-key step
``colcep.engine.stepgen`` generates for the pattern's shape, built or loaded before the first
batch) or "auto", the default (that step compiled in a background thread, the generic kernel
running meanwhile; the Matcher switches at the first batch boundary after it is ready). "auto"
starts the compile once the Matcher has stepped ``AUTO_MIN_ROWS`` rows (a compile costs seconds
of a core, cached on disk per machine: a small job is not worth one), or at once where the step
is already built in this process or this machine compiled it before (``stepgen.cached``: then
it loads, ~0.1 s a shape, in the background all the same). A pattern the generator does not write
(``stepgen.unsupported``: a too wide state), or whose step fails to generate or compile, runs on
the generic kernel: "compiled" says so in a warning, "auto" in a log line (logger ``colcep``) and
``Tier.why_generic``. The tiers share the state layout, so a state moves between them at any
batch boundary.
Both steps run through the one driver, ``kernels.nfa.run_batch`` (``colcep.engine.steps``).
"specialised", the name of an earlier tier the compiled step replaced, is taken as "compiled".
"""
from __future__ import annotations

import logging
import threading
import warnings
from typing import Any, Callable

from colcep.engine import stepgen, steps
from colcep.engine.program import CompiledPattern
from colcep.errors import ColcepWarning, InputError

_log = logging.getLogger("colcep")
TIERS = ("auto", "generic", "compiled")
DEFAULT_TIER = "auto"
AUTO_MIN_ROWS = 1_000_000  # "auto": rows a Matcher steps on the generic kernel before its step compiles
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
        self.why_generic: str | None = None  # why the compiled step does not run this pattern (None: it may)
        self._failed = self.requested == "generic"
        why = None if self._failed else stepgen.unsupported(prog)
        if why is not None:
            self._say(f"the compiled step does not generate {why} yet; the generic kernel runs this pattern", 3)
        self._step: Any = None  # the pattern's compiled step (a steps.Step)
        self._thread: threading.Thread | None = None  # "auto": the compile in the background
        self._last: str | None = None
        self._rows = 0  # rows stepped so far ("auto": compiled from AUTO_MIN_ROWS on)
        self._name: str | None = None  # the step's name ("auto": is it built in this process?)
        self._on_disk = False  # ("auto": this machine compiled the step before: load it at once)
        self._lock = threading.Lock()  # a sharded Matcher's kernel calls ask from several threads

    @property
    def active(self) -> str | None:
        """The tier the last kernel call ran on (None before the first)."""
        return self._last

    def _say(self, why: str, stacklevel: int) -> None:
        """The generic kernel runs this pattern from now on: a warning where "compiled" was asked
        for; "auto" (the default: an optimisation, never a promise) logs it (logger ``colcep``)."""
        self._failed = True
        self.why_generic = why
        if self.requested == "compiled":
            warnings.warn(f"colcep: {why}", ColcepWarning, stacklevel=stacklevel + 1)
        else:
            _log.info("colcep: %s", why)

    def _fail(self, exc: BaseException) -> None:
        self._say(f"the compiled step for this pattern could not be built ({type(exc).__name__}: {exc}); "
                  "the generic kernel runs it", 4)

    def run_batch(self, args: tuple) -> Callable[..., Any]:
        """The ``run_batch`` to call with ``args`` (builds, loads or starts a compile as the
        tier says)."""
        fn = None
        if not self._failed:
            with self._lock:
                try:
                    self._rows += args[3][1].shape[0]  # (the call's batch: its rows in key order)
                    if self._step is None and self._wanted():
                        self._step = stepgen.step(self.prog)
                    if self._step is None:
                        pass  # ("auto" under AUTO_MIN_ROWS rows, and not built in this process)
                    elif self.requested == "compiled":
                        fn = self._step.for_args(args)
                    else:
                        fn = self._step.ready(args)
                        if fn is None and (self._rows >= AUTO_MIN_ROWS or self._on_disk):
                            self._start(self._step.signature(args))
                except Exception as exc:  # noqa: BLE001 - the generic tier is always correct
                    self._fail(exc)
                    fn = None
        self._last = "generic" if fn is None else "compiled"
        return steps.generic().for_args(args) if fn is None else fn

    def _wanted(self) -> bool:
        """Whether to load the step now: "compiled"; "auto" from ``AUTO_MIN_ROWS`` rows on, or at
        once where this process has built the shape's step, or this machine compiled it before
        (it loads in the background: no module written nor compiled for a small job)."""
        if self.requested == "compiled" or self._rows >= AUTO_MIN_ROWS:
            return True
        if self._name is None:
            self._name = stepgen.name(self.prog)
            self._on_disk = stepgen.cached(self.prog)
        return self._on_disk or steps.built(self._name)

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
