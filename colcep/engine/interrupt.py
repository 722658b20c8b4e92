"""Kernel calls that Ctrl-C can stop.

A long Numba call in the main thread cannot see a signal until it returns. From the main
thread, :func:`call` runs the kernel on one worker thread (the kernels release the GIL) while
the main thread waits where Python delivers ``KeyboardInterrupt``; the kernel polls a stop
flag once per event, so on Ctrl-C it is told to stop and the interrupt is raised at once. The
caller rolls its state back (the kernel's partial work is discarded). From any other thread
the kernel runs inline.
"""
from __future__ import annotations

import threading
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


def call(fn: Callable[..., Any], *args: Any, stop: np.ndarray) -> Any:
    """``fn(*args)``, interruptible by Ctrl-C when called from the main thread: sets
    ``stop[0]``, waits up to ``GRACE_SECONDS`` for the kernel to notice, and raises
    ``KeyboardInterrupt``."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
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
