"""The kernels colcep ships compiled for any CPU (colcep.engine.shipped, built by make kernels): a
fresh machine loads them instead of compiling, and nothing that does not match them (another
Numba, kernels edited since, another architecture, a CPU-tuned entry, a damaged file) is loaded:
it compiles instead, with the right result."""
import glob
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import colcep  # noqa: F401 (installs the kernels' cache)
from colcep.engine import shipped
from colcep.kernels import arrays
from colcep.tools import prebuild

TOY = textwrap.dedent('''
    from numba import njit

    @njit
    def weigh(x, k):
        s = 0.0
        for i in range(x.size):
            s += x[i] * k + i
        return s
''')

# compiles toy.weigh for the generic CPU (as make kernels does) into the folder argv[2]
BUILD = r'''
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import toy
from colcep.engine import shipped
toy.weigh._cache = shipped.kernel_cache(toy.weigh.py_func)
toy.weigh(np.arange(5.0), 2.0)
assert sum(toy.weigh.stats.cache_misses.values()) == 1
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A kernel-like module whose generic build is in ``tmp_path/shipped`` and whose own cache is
    empty; returns (module, shipped folder, a loader that attaches a fresh cache and calls it)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "toy.py").write_text(TOY)
    cache = tmp_path / "numba-cache"
    env = dict(os.environ, NUMBA_CPU_NAME="generic", NUMBA_CPU_FEATURES="", NUMBA_CACHE_DIR=str(cache),
               COLCEP_SHIPPED_KERNELS="0")
    p = subprocess.run([sys.executable, "-c", BUILD, str(src)], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    built = tmp_path / "shipped"
    built.mkdir()
    for f in glob.glob(str(cache / "**" / "toy.weigh*"), recursive=True):
        shutil.copy2(f, built)
    assert sorted(os.listdir(built)) == sorted(["toy.weigh-4.py%d%d.nbi" % sys.version_info[:2],
                                                "toy.weigh-4.py%d%d.1.nbc" % sys.version_info[:2]])
    monkeypatch.syspath_prepend(str(src))
    sys.modules.pop("toy", None)
    import toy as mod

    def run():  # (this process's own cache of toy: src/__pycache__, empty)
        from numba import njit

        fresh = njit(mod.weigh.py_func)
        fresh._cache = shipped.kernel_cache(fresh.py_func, str(built))
        value = fresh(np.arange(5.0), 2.0)
        assert value == 30.0  # 2 * (0+1+2+3+4) + (0+1+2+3+4)
        return sum(fresh.stats.cache_hits.values()), sum(fresh.stats.cache_misses.values())

    yield mod, built, run
    sys.modules.pop("toy", None)


def _index(built):
    path = glob.glob(str(built / "*.nbi"))[0]
    with open(path, "rb") as f:
        version = pickle.load(f)
        stamp, overloads = pickle.loads(f.read())
    return path, version, stamp, overloads


def _write_index(path, version, stamp, overloads):
    with open(path, "wb") as f:
        pickle.dump(version, f, protocol=-1)
        f.write(pickle.dumps((stamp, overloads), protocol=-1))


def test_a_machine_without_its_own_build_loads_the_shipped_one(toy):
    _, built, run = toy
    before = shipped.loads()
    assert run() == (1, 0)  # loaded, not compiled
    assert shipped.loads() == before + 1


def test_another_numba_version_compiles_instead(toy):
    _, built, run = toy
    path, _, stamp, overloads = _index(built)
    _write_index(path, "0.0.1", stamp, overloads)
    assert run() == (0, 1)


def test_edited_sources_compile_instead(toy):
    mod, built, run = toy
    with open(mod.__file__, "a") as f:  # (the stamp: Numba's own here, colcep's for its kernels)
        f.write("# edited\n")
    assert run() == (0, 1)


@pytest.mark.parametrize("what", ["triple", "cpu"])
def test_an_entry_for_another_architecture_or_a_tuned_cpu_is_never_loaded(toy, what):
    _, built, run = toy
    path, version, stamp, overloads = _index(built)
    (key, name), = overloads.items()
    triple, cpu, features = key[1]
    magic = ("aarch64-unknown-linux-gnu", cpu, features) if what == "triple" else (triple, "skylake-avx512", "+avx512f")
    _write_index(path, version, stamp, {(key[0], magic, key[2]): name})
    assert run() == (0, 1)


def test_a_damaged_file_warns_and_compiles(toy, monkeypatch):
    _, built, run = toy
    monkeypatch.setattr(shipped, "_WARNED", [])
    for f in glob.glob(str(built / "*.nbc")):
        with open(f, "wb") as fh:
            fh.write(b"not a pickle")
    with pytest.warns(RuntimeWarning, match="could not be loaded.*compiling it for this machine"):
        assert run() == (0, 1)


def test_turned_off_it_compiles(toy, monkeypatch):
    _, _, run = toy
    monkeypatch.setattr(shipped, "use", False)
    assert run() == (0, 1)


def test_another_python_or_platform_finds_no_build_and_the_notice_says_so(monkeypatch, capsys):
    from colcep.engine import kernel_cache as cache

    monkeypatch.setattr(shipped, "TAG", "numba0.68.1-cpython-399-linux-riscv64")
    monkeypatch.setattr(shipped, "_FOLDER", [])
    assert shipped.folder() is None  # (then every kernel compiles, as the toy's misses above)
    built = sorted(os.listdir(shipped.root()))
    assert shipped.why_not() == f"colcep ships them compiled for {', '.join(built)}, not for this " \
                                "numba0.68.1-cpython-399-linux-riscv64"
    monkeypatch.setattr(cache, "_checked", False)
    monkeypatch.setattr(cache, "notice", True)
    monkeypatch.setattr(cache, "kernels_cold", lambda: True)
    cache.notice_compile()
    err = capsys.readouterr().err
    assert "compiling its kernels for this machine" in err and "(colcep ships them compiled for" in err
    monkeypatch.setattr(shipped, "use", False)
    assert shipped.why_not() == "COLCEP_SHIPPED_KERNELS=0"


def test_only_colcep_kernels_get_the_shipped_cache(tmp_path, monkeypatch):
    from numba import njit
    from numba.core.caching import FunctionCache

    assert type(arrays.group_by_key._cache).__name__ == "KernelCache"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))

    @njit(cache=True)
    def other(x):
        return x + 1

    assert type(other._cache) is FunctionCache


def test_the_shipped_builds_are_from_these_kernels():
    """Every shipped build (whatever its Numba and Python) was made from the kernels' current
    sources: after editing a kernel, run ``make kernels``."""
    builds = [d for d in glob.glob(os.path.join(shipped.root(), "*")) if os.path.isdir(d)]
    assert builds, f"no shipped build in {shipped.root()}: run make kernels"
    now = prebuild.source_stamps()
    for build in builds:
        with open(os.path.join(build, prebuild.STAMPS)) as f:
            then = json.load(f)
        modules = {os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(build, "*.nbi"))}
        assert modules <= set(then), f"{build}: kernels without a stamp: {sorted(modules - set(then))}"
        edited = sorted(m for m in modules if then[m] != now.get(m))
        assert not edited, f"{build} was built from other sources of {edited}: run make kernels"


def test_the_shipped_build_for_this_environment_is_sound_or_absent():
    if os.path.isdir(os.path.join(shipped.root(), shipped.TAG)):
        assert prebuild.stale() == []
        assert shipped.folder() == os.path.join(shipped.root(), shipped.TAG)
    else:  # another Numba or Python than make setup installs: nothing shipped is loaded
        assert shipped.folder() is None


FIRST = r'''
import json, time
t0 = time.perf_counter()
import colcep as cc
from colcep.engine import kernel_cache as cache, shipped
from colcep.tools.examples import benchmark_pattern
from colcep.tools.ticks import make_ticks
out = cc.match(make_ticks(3000, 4, 1), benchmark_pattern("P2"), key="name", time="ts")
print(json.dumps({"rows": out.num_rows, "ids": out.column("match_id").to_pylist()[-5:],
                  "compiled": cache.kernel_compiles(), "loads": shipped.loads(), "cold": cache.kernels_cold(),
                  "seconds": time.perf_counter() - t0}))
'''


@pytest.mark.skipif(not os.path.isdir(os.path.join(shipped.root(), shipped.TAG)),
                    reason="colcep ships no build for this Numba and Python (make setup installs the one it does)")
def test_a_fresh_machine_matches_without_compiling(tmp_path):
    import colcep as cc
    from colcep.tools.examples import benchmark_pattern
    from colcep.tools.ticks import make_ticks

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["COLCEP_CACHE_DIR"] = str(tmp_path / "empty")
    p = subprocess.run([sys.executable, "-c", FIRST], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "compiling its kernels" not in p.stderr  # no notice: nothing compiles
    got = json.loads(p.stdout.strip().splitlines()[-1])
    want = cc.match(make_ticks(3000, 4, 1), benchmark_pattern("P2"), key="name", time="ts")
    assert got["rows"] == want.num_rows > 0 and got["ids"] == want.column("match_id").to_pylist()[-5:]
    assert got["compiled"] == 0 and got["loads"] > 0 and got["cold"] is False
    assert not os.listdir(tmp_path / "empty" / "kernels")  # nothing written to this machine's cache
