"""The C library's heap kept between colcep's calls: glibc's ``malloc`` tuned once per process.

By default glibc gives the top of its heap back to the system as soon as 128 KiB of it are free
(``M_TRIM_THRESHOLD``), and grows it again, a zeroed page at a time, at the next allocation; it
also serves arrays above a threshold that adapts up to 32 MiB straight from ``mmap``. A colcep
call allocates and frees its work arrays, masks, gathers and output every time, so repeated
calls and a stream's batches paid page faults for the same memory again and again: a quarter of
P5's CPU time in the kernel zeroing pages (``colcep.match`` of 10^6 ticks, 100 symbols, called
40 times, ``docs/benchmarks.md``).

:func:`keep`, called before colcep's first kernel call, keeps up to 256 MiB of free heap, grows
the heap 16 MiB at a time and serves arrays up to 32 MiB from the heap. It changes nothing where
it cannot apply (another C library, another system), where the user set any of glibc's
``MALLOC_*`` tunables (theirs win), or with ``COLCEP_KEEP_HEAP=0``. The cost: after a large
call the process keeps up to 256 MiB it freed, for its next calls, instead of returning it.
"""
from __future__ import annotations

import os
import sys
import threading

__all__ = ["keep", "TRIM_THRESHOLD", "TOP_PAD", "MMAP_THRESHOLD"]

TRIM_THRESHOLD = 256 << 20
TOP_PAD = 16 << 20
MMAP_THRESHOLD = 32 << 20
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters
_USER = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")
_DONE: list = []
_LOCK = threading.Lock()


def keep() -> bool:
    """Tune glibc's heap as the module says, once per process; whether it is tuned."""
    if _DONE:
        return _DONE[0]
    with _LOCK:
        if not _DONE:
            _DONE.append(_tune())
    return _DONE[0]


def _tune() -> bool:
    if os.environ.get("COLCEP_KEEP_HEAP", "1") == "0" or any(k in os.environ for k in _USER):
        return False
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):  # not glibc (musl has no such tunables)
            return False
        mallopt = libc.mallopt
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    except (OSError, AttributeError):
        return False
    return all(mallopt(p, v) == 1 for p, v in ((_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_TOP_PAD, TOP_PAD),
                                               (_M_MMAP_THRESHOLD, MMAP_THRESHOLD)))
