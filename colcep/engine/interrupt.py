"""Kernel calls that Ctrl-C can stop.

A long Numba call in the main thread cannot see a signal until it returns: Python runs its
signal handlers between bytecodes. The kernels poll a stop flag once per event, so Ctrl-C
only has to set it. From the main thread, :func:`call` runs the kernel inline while a watcher
thread sets the flag: during the call, Python's C-level signal handler writes the signal's
number to a pipe (``signal.set_wakeup_fd``) that the watcher reads, and SIGINT's Python
handler is swapped for one that only records it. When the kernel has returned, the handler
and the wakeup descriptor are put back and a recorded signal raises ``KeyboardInterrupt``; the
caller rolls its state back (the kernel's partial work is discarded). Running inline costs a
few microseconds a call; a worker thread costs a handoff each call and made P5's scan 15-25 %
slower in CPU time, the kernel reading on one core what Python wrote on the other.

The worker thread stays where a handler of the caller's must run while the kernel does, as it
would beside Python code: a SIGINT handler other than Python's default (an event loop's, a
shell's: it decides what Ctrl-C does), or any other signal's Python handler (a time limit's
SIGALRM, a SIGTERM: inline, it would run inside Numba's boxing of the kernel's result, where
what it raises becomes a ``SystemError``); and off POSIX. From any other thread the kernel
runs inline, uninterruptible (Python delivers signals to the main thread only).
"""
from __future__ import annotations

import os
import signal
import threading
import time

import _signal  # signal's C module: its getsignal / signal skip the enum wrapping (~7 us a call)
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Callable

import numpy as np

_POOL: ThreadPoolExecutor | None = None
_SHARD_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()
GRACE_SECONDS = 1.0  # how long an interrupted call may take to notice its stop flag
POLL_SECONDS = 0.05  # how often the waiting main thread looks for a pending Ctrl-C


_UNSETTLED: list[Future] = []  # kernels of failed calls that had not stopped when the call raised
_PARALLEL = [0.0]  # wall seconds call_all has spent running functions at once, all calls so far


def parallel_seconds() -> float:
    """Wall seconds spent so far in :func:`call_all` running functions at once on threads: what
    a scan ran on more than one thread (the rest of its time ran on one)."""
    return _PARALLEL[0]


def settled(timeout: float = GRACE_SECONDS) -> bool:
    """Have all kernels of failed calls stopped (waiting up to ``timeout`` for them)? A caller
    undoing a failed call's changes in place needs them stopped."""
    if _UNSETTLED:
        wait(list(_UNSETTLED), timeout=timeout)
        _UNSETTLED[:] = [f for f in _UNSETTLED if not f.done()]
    return not _UNSETTLED


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="colcep-kernel")
        return _POOL


def _result(fut: Future, tick: Callable[[], None] | None = None) -> Any:
    """``fut.result()``, waited for in short timed waits: each returns to Python, which then
    runs any pending signal handler (Ctrl-C), and ``tick()`` when given (a progress meter)."""
    while True:
        if wait([fut], timeout=POLL_SECONDS).done:  # (not fut.result's TimeoutError: a handler may raise one)
            return fut.result()
        if tick is not None:
            tick()


def new_stop_flag() -> np.ndarray:
    return np.zeros(1, np.uint8)


class _Watcher:
    """A daemon thread reading the wakeup pipe: a SIGINT byte sets the current call's stop
    flag; every signal byte is passed on to the wakeup descriptor the call displaced (an event
    loop's); a zero byte (``sync``) tells the call that every byte before it was handled."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)  # as set_wakeup_fd requires
        self.stop: np.ndarray | None = None
        self.displaced = -1
        self.synced = threading.Event()
        threading.Thread(target=self._run, name="colcep-ctrl-c", daemon=True).start()

    def _run(self) -> None:
        while True:
            data = os.read(self.read_fd, 64)
            if not data:
                return
            stop, displaced = self.stop, self.displaced
            if stop is not None and signal.SIGINT in data:
                stop[0] = 1
            signals = data.replace(b"\0", b"")
            if displaced >= 0 and signals:
                try:
                    os.write(displaced, signals)
                except OSError:
                    pass
            if len(signals) < len(data):
                self.synced.set()

    def sync(self) -> None:
        """Wait until the watcher has handled every byte written so far (so that none of this
        call's stops a later call or reaches a later call's displaced descriptor)."""
        try:
            os.write(self.write_fd, b"\0")
        except OSError:
            return
        self.synced.wait(GRACE_SECONDS)
        self.synced.clear()


_WATCHER: _Watcher | None = None
# signals whose Python handler (if any) rules out running a kernel inline: the handler would run
# inside Numba's boxing of the kernel's result, where an exception it raises becomes a SystemError
_OTHER_SIGNALS = [s for s in signal.valid_signals()
                  if s not in (signal.SIGINT, getattr(signal, "SIGKILL", None), getattr(signal, "SIGSTOP", None))]


def _watcher() -> _Watcher:
    """The process's watcher (a new one after a fork)."""
    global _WATCHER
    with _LOCK:
        if _WATCHER is None or _WATCHER.pid != os.getpid():
            _WATCHER = _Watcher()
        return _WATCHER


def _other_handlers() -> bool:
    """Does a signal other than SIGINT have a handler written in Python?"""
    for s in _OTHER_SIGNALS:
        try:
            if callable(_signal.getsignal(s)):
                return True
        except (OSError, ValueError):
            continue
    return False


def call(fn: Callable[..., Any], *args: Any, stop: np.ndarray) -> Any:
    """``fn(*args)``, interruptible by Ctrl-C when called from the main thread: the signal sets
    ``stop[0]``, the kernel returns at its next look at it, and the call raises
    ``KeyboardInterrupt``.

    Inline (see the module docstring) when SIGINT's handler is Python's default and no other
    signal has a Python handler; on a worker thread when a handler of the caller's (an event
    loop's, a shell's, a time limit's) is to run while the kernel does, as it would in Python
    code; inline and unwatched when SIGINT is ignored or left to end the process. (Putting an
    event loop's wakeup descriptor back sets ``warn_on_full_buffer=False`` on it: Python does not
    say what it was.)"""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    handler = _signal.getsignal(signal.SIGINT)
    unwatched = handler == signal.SIG_IGN or handler == signal.SIG_DFL
    if os.name != "posix" or not (unwatched or handler is signal.default_int_handler) or _other_handlers():
        return _call_on_worker(fn, args, stop)
    if unwatched:
        return fn(*args)
    w = _watcher()
    caught: list = []

    def record(signum: int, frame: Any) -> None:  # (also a SIGINT tripped before the pipe was set)
        stop[0] = 1
        caught.append(frame)

    _signal.signal(signal.SIGINT, record)
    try:
        w.stop = stop
        w.displaced = signal.set_wakeup_fd(w.write_fd, warn_on_full_buffer=False)
        try:
            return fn(*args)
        finally:
            signal.set_wakeup_fd(w.displaced, warn_on_full_buffer=False)  # (pending handlers run here)
            if caught:
                w.sync()
    finally:
        w.stop, w.displaced = None, -1
        _signal.signal(signal.SIGINT, handler)
        if caught:
            handler(signal.SIGINT, caught[0])


def _call_on_worker(fn: Callable[..., Any], args: tuple, stop: np.ndarray) -> Any:
    """``fn(*args)`` on a worker thread while the main thread waits where Python runs signal
    handlers; on ``KeyboardInterrupt`` (or whatever else a handler raises) sets ``stop[0]``,
    waits up to ``GRACE_SECONDS`` for the kernel to notice, and raises."""
    fut = _pool().submit(fn, *args)
    try:
        return _result(fut)
    except BaseException:
        stop[0] = 1
        try:
            fut.result(timeout=GRACE_SECONDS)
        except BaseException:  # noqa: BLE001 - the interrupt is what the caller gets
            pass
        if not fut.done():
            _UNSETTLED.append(fut)
        raise


def _shard_pool(n: int) -> ThreadPoolExecutor:
    global _SHARD_POOL
    with _LOCK:
        if _SHARD_POOL is None or _SHARD_POOL._max_workers < n:
            old, _SHARD_POOL = _SHARD_POOL, ThreadPoolExecutor(max_workers=n, thread_name_prefix="colcep-shard")
            if old is not None:
                old.shutdown(wait=False)
        return _SHARD_POOL


_IN_POOL = threading.local()  # set while a thread runs one of call_all's functions


def _in_pool(fn: Callable[[], Any]) -> Any:
    """``fn()`` marked as run by :func:`call_all`: a ``call_all`` inside it runs its functions one
    after another in this thread (the pool's threads are busy with its siblings: no deadlock)."""
    _IN_POOL.on = True
    try:
        return fn()
    finally:
        _IN_POOL.on = False


def call_all(fns: list[Callable[[], Any]], stop: np.ndarray, parallel: bool = True,
             tick: Callable[[], None] | None = None) -> list:
    """``[fn() for fn in fns]``, at once on a pool of threads when ``parallel`` (else one after
    another through :func:`call`). On Ctrl-C, or when one raises, ``stop[0]`` is set so the
    others end at their next event; waits up to ``GRACE_SECONDS`` for them and re-raises.
    ``tick()`` runs in the waiting thread every ``POLL_SECONDS`` while they run at once (and
    after each when one after another): a progress meter reads their counters there. Called from
    one of its own functions, it runs them one after another."""
    if not parallel or len(fns) < 2 or getattr(_IN_POOL, "on", False):  # (nested: one after another)
        out = []
        for fn in fns:
            out.append(call(fn, stop=stop))
            if tick is not None:
                tick()
        return out
    pool = _shard_pool(len(fns))
    t0 = time.perf_counter()
    futs = [pool.submit(_in_pool, fn) for fn in fns]
    try:
        return [_result(fut, tick) for fut in futs]
    except BaseException:
        stop[0] = 1
        wait(futs, timeout=GRACE_SECONDS)
        _UNSETTLED.extend(f for f in futs if not f.done())
        raise
    finally:
        _PARALLEL[0] += time.perf_counter() - t0
