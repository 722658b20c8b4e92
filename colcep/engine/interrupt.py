"""Kernel calls that Ctrl-C can stop.

A long Numba call in the main thread cannot see a signal until it returns: Python runs its
signal handlers between bytecodes. The kernels poll a stop flag once per event, so Ctrl-C
only has to set it. From the main thread, :func:`call` runs the kernel inline while a watcher
thread sets the flag: during the call, Python's C-level signal handler writes the signal's
number to a pipe (``signal.set_wakeup_fd``) that the watcher reads, and SIGINT's Python
handler is swapped for one that only records it. When the kernel has returned, the handler
and the wakeup descriptor are put back, the recorded signal is handed to the original
handler (``KeyboardInterrupt``, by default) and the caller rolls its state back (the kernel's
partial work is discarded). Running inline costs a few microseconds a call; a worker thread
(the fallback where the wakeup descriptor cannot be used: off POSIX, or with a SIGINT handler
Python did not install) costs a handoff each call and made P5's scan 15-25 % slower in CPU
time, the kernel reading on one core what Python wrote on the other. From any other thread
the kernel runs inline, uninterruptible (Python delivers signals to the main thread only).
"""
from __future__ import annotations

import os
import signal
import threading

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
        try:
            return fut.result(timeout=POLL_SECONDS)
        except TimeoutError:
            if tick is not None:
                tick()


def new_stop_flag() -> np.ndarray:
    return np.zeros(1, np.uint8)


class _Watcher:
    """A daemon thread reading the wakeup pipe: a SIGINT byte sets the current call's stop
    flag; every byte is passed on to the wakeup descriptor the call displaced (an event loop's)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)  # as set_wakeup_fd requires
        self.stop: np.ndarray | None = None
        self.displaced = -1
        threading.Thread(target=self._run, name="colcep-ctrl-c", daemon=True).start()

    def _run(self) -> None:
        while True:
            data = os.read(self.read_fd, 64)
            if not data:
                return
            stop, displaced = self.stop, self.displaced
            if stop is not None and signal.SIGINT in data:
                stop[0] = 1
            if displaced >= 0:
                try:
                    os.write(displaced, data)
                except OSError:
                    pass


_WATCHER: _Watcher | None = None


def _watcher() -> _Watcher | None:
    """The process's watcher (a new one after a fork), or None where signals cannot be watched."""
    global _WATCHER
    if os.name != "posix":
        return None
    with _LOCK:
        if _WATCHER is None or _WATCHER.pid != os.getpid():
            _WATCHER = _Watcher()
        return _WATCHER


def call(fn: Callable[..., Any], *args: Any, stop: np.ndarray) -> Any:
    """``fn(*args)``, interruptible by Ctrl-C when called from the main thread: the signal sets
    ``stop[0]``, the kernel returns at its next look at it, and the call then raises
    ``KeyboardInterrupt`` (or whatever SIGINT's handler does)."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    handler = _signal.getsignal(signal.SIGINT)
    if handler == signal.SIG_IGN:
        return fn(*args)
    w = _watcher() if handler is not None else None
    if w is None:
        return _call_on_worker(fn, args, stop)
    caught: list = []

    def record(signum: int, frame: Any) -> None:  # (a SIGINT tripped before the pipe was set)
        stop[0] = 1
        caught.append(frame)

    _signal.signal(signal.SIGINT, record)
    try:
        w.stop = stop
        w.displaced = signal.set_wakeup_fd(w.write_fd, warn_on_full_buffer=False)
        try:
            return fn(*args)
        finally:
            signal.set_wakeup_fd(w.displaced, warn_on_full_buffer=False)
    finally:
        w.stop, w.displaced = None, -1
        _signal.signal(signal.SIGINT, handler)
        if caught:
            _deliver(handler, caught[0])


def _deliver(handler: Any, frame: Any) -> None:
    """Hand a SIGINT recorded during a call to the handler it displaced."""
    if callable(handler):
        handler(signal.SIGINT, frame)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


def _call_on_worker(fn: Callable[..., Any], args: tuple, stop: np.ndarray) -> Any:
    """``fn(*args)`` on a worker thread while the main thread waits where Python delivers
    ``KeyboardInterrupt``; on it, sets ``stop[0]``, waits up to ``GRACE_SECONDS`` for the kernel
    to notice, and raises."""
    fut = _pool().submit(fn, *args)
    try:
        return _result(fut)
    except KeyboardInterrupt:
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


def call_all(fns: list[Callable[[], Any]], stop: np.ndarray, parallel: bool = True,
             tick: Callable[[], None] | None = None) -> list:
    """``[fn() for fn in fns]``, at once on a pool of threads when ``parallel`` (else one after
    another through :func:`call`). On Ctrl-C, or when one raises, ``stop[0]`` is set so the
    others end at their next event; waits up to ``GRACE_SECONDS`` for them and re-raises.
    ``tick()`` runs in the waiting thread every ``POLL_SECONDS`` while they run at once (and
    after each when one after another): a progress meter reads their counters there."""
    if not parallel or len(fns) < 2:
        out = []
        for fn in fns:
            out.append(call(fn, stop=stop))
            if tick is not None:
                tick()
        return out
    pool = _shard_pool(len(fns))
    futs = [pool.submit(fn) for fn in fns]
    try:
        return [_result(fut, tick) for fut in futs]
    except BaseException:
        stop[0] = 1
        wait(futs, timeout=GRACE_SECONDS)
        _UNSETTLED.extend(f for f in futs if not f.done())
        raise
