"""Ctrl-C in the middle of a runaway scan, in a child process (``tests/test_state.py``,
``tests/test_threads.py``, ``tests/test_tiers.py``, ``tests/test_progress.py``): the scan
must stop within ``GRACE_SECONDS`` of the signal (the kernels saw their stop flag: none was left
running) and leave the Matcher's state exactly as it was before the call.

The runaway is one a user meets under the default bounds: ``allow_combinations`` with an
aggregate makes 2^k partial matches of each start, and the window keeps ~2^15 of them alive
per key, all stepped on every event (minutes of work, ~150 MiB). (A runaway without a window
that is let grow to tens of GB stops as promptly between events, but an array being doubled
at that size is a copy of gigabytes that no flag interrupts: the call then raises after
2 x GRACE_SECONDS and leaves that kernel to finish on its own.)"""
import subprocess
import sys
import textwrap

RUNAWAY = """
import os, signal, threading, time, sys
import numpy as np, pyarrow as pa
import colcep as cc
from colcep import col, sum as csum
from colcep.engine import codegen, interrupt, shards
p = (cc.Pattern.begin("a").where(col("price") > 0)
     .followed_by_any("b").where(col("price") > csum("price", of="b") - 10**9).one_or_more()
     .allow_combinations().followed_by("c").where(col("price") < 0).within(15))

def ticks(n_keys, n=20_000):
    keys = [f"k{i}" for i in range(n_keys)]
    return pa.table({"k": keys * n, "ts": pa.array(np.repeat(np.arange(n), n_keys), pa.int64()),
                     "price": np.repeat(np.arange(1.0, n + 1.0), n_keys)})

def ctrl_c_in(seconds):
    \"\"\"Ctrl-C after ``seconds``; returns a function giving the seconds since the signal.\"\"\"
    sent = []
    def send():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(seconds, send).start()
    return lambda: time.monotonic() - sent[0]
"""

_SCRIPT = RUNAWAY + """
{setup}
m.process(first)
before = m.snapshot()
since_signal = ctrl_c_in(2.0)
try:
    m.process(rest)
except KeyboardInterrupt:
    took = since_signal()
    assert m.snapshot() == before, "state changed"
    print(f"interrupted {took:.2f} s after the signal")
    sys.exit(0 if took < interrupt.GRACE_SECONDS else 3)
sys.exit(2)
"""


def assert_ctrl_c_stops_cleanly(setup: str) -> None:
    """``setup`` (code run before the scan; the runaway pattern is ``p``, ``ticks(n_keys)`` its
    input) makes the Matcher ``m``, the ``first`` table it processes before the signal and the
    ``rest``."""
    script = _SCRIPT.replace("{setup}", textwrap.dedent(setup))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "s after the signal" in res.stdout
