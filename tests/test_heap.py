"""glibc's heap kept between colcep's calls (colcep.engine.heap): tuned once per process before the
first kernel call, unless the user set glibc's own tunables or COLCEP_KEEP_HEAP=0."""
import os
import platform
import subprocess
import sys

import pytest

PROBE = r'''
import colcep as cc
from colcep.engine import heap
from colcep.tools.ticks import make_ticks
assert heap._DONE == []  # nothing tuned at import
cc.match(make_ticks(500, 2, 1), cc.Pattern.begin("a").where(cc.col("price") > 0), key="name", time="ts")
print(heap._DONE)
'''


def _probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"
             and k != "COLCEP_KEEP_HEAP"}
    p = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only (elsewhere keep() is a no-op)")
def test_the_first_kernel_call_tunes_glibc_once():
    assert _probe() == "[True]"


def test_the_users_settings_and_the_switch_win():
    assert _probe(COLCEP_KEEP_HEAP="0") == "[False]"
    assert _probe(MALLOC_TOP_PAD_="65536") == "[False]"
    assert _probe(GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072") == "[False]"
