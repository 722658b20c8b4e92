"""Ctrl-C in the middle of a runaway scan, in a child process (``tests/test_state.py``,
``tests/test_threads.py``, ``tests/test_specialise.py``): the scan must stop within 4 s of the
signal and leave the Matcher's state exactly as it was before the call."""
import subprocess
import sys
import textwrap

_SCRIPT = """
import os, signal, threading, time, sys
import numpy as np, pyarrow as pa
import colcep as cc
from colcep import col, sum as csum
from colcep.engine import shards
from colcep.engine import specialise
# allow_combinations with an aggregate: 2^k partial matches, minutes of work
p = (cc.Pattern.begin("a").where(col("price") > 0)
     .followed_by_any("b").where(col("price") > csum("price", of="b") - 10**9).one_or_more()
     .allow_combinations().followed_by("c").where(col("price") < 0))
{setup}
m.process(first)
before = m.snapshot()
threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)).start()  # Ctrl-C
t0 = time.monotonic()
try:
    m.process(rest)
except KeyboardInterrupt:
    took = time.monotonic() - t0
    assert m.snapshot() == before, "state changed"
    print(f"interrupted after {{took:.2f}}s")
    sys.exit(0 if took < 4.0 else 3)
sys.exit(2)
"""


def assert_ctrl_c_stops_cleanly(setup: str) -> None:
    """``setup`` (code run before the scan; the runaway pattern is ``p``) makes the Matcher
    ``m``, the ``first`` table it processes before the signal and the ``rest``."""
    script = _SCRIPT.format(setup=textwrap.dedent(setup))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "interrupted after" in res.stdout
