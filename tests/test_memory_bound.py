"""``max_state_bytes`` bounds memory (issue 22 part 3): runaway patterns, each in a child process
whose address space is limited (RLIMIT_AS) to its size before the scan plus a headroom of 1.5x
the bound, end in CapacityError, never MemoryError nor a kill (``asv_bench/memory_bound.py``).
The 1 GiB runs of the issue are slow; a 64 MiB bound runs every case in seconds."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asv_bench"))
import memory_bound  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")


@pytest.mark.parametrize("case", memory_bound.CASES)
def test_a_runaway_ends_in_capacity_error_under_a_small_bound(case):
    bound = 64 << 20
    r = memory_bound.run_case(case, bound=bound, headroom=bound * 3 // 2, rows=memory_bound.SMALL_ROWS[case],
                              timeout=600)
    assert r["outcome"] == "CapacityError", r
    assert r["max_state_mib"] <= 64 and r["state_after_mib"] <= 64


@pytest.mark.slow
@pytest.mark.parametrize("case", memory_bound.CASES)
def test_a_runaway_ends_in_capacity_error_under_1_gib(case):
    r = memory_bound.run_case(case, bound=1 << 30, headroom=3 << 29)
    assert r["outcome"] == "CapacityError", r
    assert r["peak_as_mib"] < 1536
