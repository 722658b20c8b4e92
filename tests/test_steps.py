"""The step and its driver compiled apart (colcep.engine.steps): the generic step in a second
process where it is not cached, the compile locks of their own."""
import os
import subprocess
import sys
import threading

import numpy as np

import colcep as cc
from colcep.engine import kernel_cache as cache
from colcep.engine import steps


class _Popen:
    calls: list = []

    def __init__(self, cmd, **kw):
        self.calls.append((cmd, kw))


def _beside(monkeypatch, cores: int, cold: bool):
    _Popen.calls = []
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(cache, "kernels_cold", lambda: cold)
    monkeypatch.setattr(subprocess, "Popen", _Popen)
    monkeypatch.setattr(steps, "_CHILDREN", [])
    return steps.compile_beside()


def test_a_cold_step_compiles_in_a_second_process_where_there_is_a_second_core(monkeypatch):
    child = _beside(monkeypatch, 2, True)
    assert isinstance(child, _Popen) and steps._CHILDREN == [child]
    (cmd, kw), = _Popen.calls
    assert cmd == [sys.executable, "-m", "colcep.cli", "warmup", "--groups", "cep-step", "--processes", "1"]
    here = os.path.dirname(os.path.dirname(os.path.abspath(cc.__file__)))
    assert kw["env"]["PYTHONPATH"].split(os.pathsep)[0] == here
    assert kw["stdout"] == kw["stderr"] == kw["stdin"] == subprocess.DEVNULL
    # one core, the step already cached on this machine, or coldness that cannot be told: no child
    assert _beside(monkeypatch, 1, True) is None and _beside(monkeypatch, 4, False) is None
    assert _beside(monkeypatch, 4, None) is None
    assert _Popen.calls == []


def test_only_the_generic_step_compiles_beside():
    from colcep.engine import stepgen
    from colcep.tools.examples import BENCHMARK_PATTERNS

    assert steps.generic().beside
    assert not stepgen.step(cc.compile(BENCHMARK_PATTERNS["P1"])).beside


def test_the_child_command_runs_the_step_group():
    """What compile_beside starts: here, with the kernels cached, it loads them and compiles none."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(cc.__file__))))
    out = subprocess.run([sys.executable, "-m", "colcep.cli", "warmup", "--groups", "cep-step", "--processes", "1"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "colcep warmup: cep-step: 0 kernels compiled" in out.stdout, out.stdout


def test_compile_locks_are_one_per_name_and_reentrant(tmp_path, monkeypatch):
    """A thread may re-enter a lock it holds, under another; a second thread waits only for the
    lock of the same name."""
    monkeypatch.setenv("COLCEP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "_DIR", None)
    got = []
    with cache.compile_lock("driver"):
        with cache.compile_lock("step-generic"), cache.compile_lock("driver"):
            other = threading.Thread(target=lambda: got.append(_take("work-groups")))
            other.start()
            other.join(30)
            assert got == ["work-groups"]
            blocked = threading.Thread(target=lambda: got.append(_take("driver")))
            blocked.start()
            blocked.join(0.5)
            assert blocked.is_alive() and got == ["work-groups"]  # waits for this thread's "driver"
    blocked.join(30)
    assert got == ["work-groups", "driver"]
    assert {"driver.lock", "step-generic.lock", "work-groups.lock"} <= set(os.listdir(tmp_path))


def _take(name: str) -> str:
    with cache.compile_lock(name):
        return name


def test_arg_key_tells_apart_what_numba_types_tell_apart():
    """``codegen.arg_key`` (the cache key of a call's signature): arrays differing in dtype, byte
    order, dimensions, layout or writability get different keys, equal ones the same, through
    nested tuples (named ones too) and other values by their type."""
    from collections import namedtuple

    from numba import typeof

    from colcep.engine.codegen import arg_key

    a = np.zeros((4, 3))
    ro = np.zeros(3)
    ro.flags.writeable = False
    arrays = [np.zeros(3), np.zeros(3, np.int64), np.zeros(3, np.float32), a, a[:, 1], a.T, ro, np.zeros(3)[::2]]
    for x in arrays:
        for y in arrays:
            assert (arg_key(x) == arg_key(y)) == (typeof(x) == typeof(y)), (x, y)
    assert arg_key(np.zeros(3, ">f8")) != arg_key(np.zeros(3))  # (Numba types no big-endian array)
    Pair = namedtuple("Pair", "p q")
    assert arg_key((np.zeros(2), (np.zeros(2), 3))) == arg_key((np.ones(5), (np.ones(1), 7)))
    assert arg_key(Pair(np.zeros(2), 1)) != arg_key(Pair(np.zeros(2, np.int32), 1))
    assert arg_key((1, 2.0)) != arg_key((1, 2))
