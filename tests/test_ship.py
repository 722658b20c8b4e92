"""Shipping colcep as a zip, the path-independent kernel cache, and the cluster defaults.

The zip must hold the whole package (kernels included) and be importable where colcep is not
installed; its kernels must be cached in one folder whatever the zip's path, so a second
process running colcep from a zip at another path (another Spark application) loads what the
first compiled.
"""
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import colcep
import colcep.kernels
from colcep.engine import kernel_cache as cache
from colcep.engine import shipped
from colcep.spark.ship import build_zip, zip_name

REPO = Path(__file__).resolve().parent.parent


def test_zip_holds_the_whole_package_and_is_reproducible(tmp_path):
    a = build_zip(tmp_path / "a")
    b = build_zip(tmp_path / "b" / "other.zip")
    assert os.path.basename(a) == zip_name() == f"colcep-{colcep.__version__}.zip"
    assert os.path.basename(b) == "other.zip"
    assert Path(a).read_bytes() == Path(b).read_bytes()  # fixed order and times: same sources, same bytes
    names = set(zipfile.ZipFile(a).namelist())
    top = Path(colcep.__path__[0])
    want = {f"colcep/{p.relative_to(top).as_posix()}" for p in top.rglob("*.py") if "kernels" not in p.parts} | \
           {f"colcep/kernels/{p.name}" for p in Path(colcep.kernels.__path__[0]).glob("*.py")}
    build = Path(shipped.root()) / shipped.TAG  # the kernels compiled for any CPU, for this Numba and Python only
    want |= {f"colcep/prebuilt/{shipped.TAG}/{p.name}" for p in build.glob("*")}
    assert names == want
    assert {"colcep/__init__.py", "colcep/engine/kernel_cache.py", "colcep/spark/ship.py", "colcep/engine/matcher.py",
            "colcep/lang/sql/query.py", "colcep/kernels/__init__.py", "colcep/kernels/nfa.py"} <= names


def test_version_is_the_projects():
    toml = (REPO / "pyproject.toml").read_text()
    assert 'version = { attr = "colcep.version.__version__" }' in toml  # one place: colcep/version.py
    assert cache._tag().startswith(f"{colcep.__version__}-py")


def test_pyproject_spark_extra_has_what_the_driver_needs():
    toml = (REPO / "pyproject.toml").read_text()
    extra = re.search(r"^spark = \[(.*)\]", toml, re.M).group(1)
    assert "pyspark" in extra and "pandas>=2.2" in extra and "pyarrow" in extra


def test_command_line_writes_the_zip(tmp_path):
    p = subprocess.run([sys.executable, "-m", "colcep.spark.ship", str(tmp_path / "dist")], capture_output=True,
                       text=True, check=True)
    path = p.stdout.strip()
    assert path == str(tmp_path / "dist" / zip_name()) and os.path.isfile(path)
    assert "--py-files" in p.stderr


# a process that cannot import the installed (editable) colcep: only the zip given first on sys.path
PROBE = r'''
import json, sys
zip_path = sys.argv[1]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path[:] = [p for p in sys.path if p and not __import__("os").path.isdir(__import__("os").path.join(p, "colcep"))]
sys.path.insert(0, zip_path)
import numpy as np
import colcep
from colcep.kernels import arrays
from colcep.engine import kernel_cache as cache
from colcep.engine import shipped
order, ptr = arrays.group_by_key(np.array([1, 0, 1, 2], np.int64), 3)
st = arrays.group_by_key.stats
print(json.dumps({"colcep": colcep.__file__, "order": order.tolist(), "cache_path": st.cache_path,
                  "hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values()),
                  "compiles": cache.kernel_compiles(), "cache_dir": cache.cache_dir()}))
'''


def _probe(zip_path: str, cwd: Path, env: dict) -> dict:
    p = subprocess.run([sys.executable, "-c", PROBE, zip_path], capture_output=True, text=True, cwd=cwd, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_zip_imports_without_colcep_installed_and_caches_kernels_by_machine_not_path(tmp_path):
    first = build_zip(tmp_path / "app-1" / "files")
    second = build_zip(tmp_path / "app-2" / "deeper" / "files")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR")}
    env["COLCEP_CACHE_DIR"] = str(tmp_path / "cache")
    env["COLCEP_SHIPPED_KERNELS"] = "0"  # (the kernels compiled here; the zip's own build: the next test)
    a = _probe(first, tmp_path, env)
    b = _probe(second, tmp_path, env)
    assert a["colcep"] == f"{first}/colcep/__init__.py" and b["colcep"] == f"{second}/colcep/__init__.py"
    assert a["order"] == [1, 0, 2, 3]
    # one cache folder for both zips; the first process compiled, the second only loaded
    assert a["cache_dir"] == b["cache_dir"] == str(tmp_path / "cache")
    assert a["cache_path"] == b["cache_path"] == str(tmp_path / "cache" / "kernels")
    assert a["misses"] == 1 and a["compiles"] == 1
    assert b["misses"] == 0 and b["hits"] == 1 and b["compiles"] == 0
    # Numba's own zip locator would have put them under a hash of each zip's path
    assert not (tmp_path / "app-1").joinpath("__pycache__").exists()


@pytest.mark.skipif(not os.path.isdir(os.path.join(shipped.root(), shipped.TAG)),
                    reason="colcep ships no build for this Numba and Python (make setup installs the one it does)")
def test_zip_carries_the_kernels_compiled_for_any_cpu(tmp_path):
    """An executor with an empty cache loads the kernels from the zip's build (unpacked once into
    its cache folder), compiling none."""
    zp = build_zip(tmp_path / "files")
    with zipfile.ZipFile(zp) as z:
        names = [n for n in z.namelist() if n.startswith(f"colcep/prebuilt/{shipped.TAG}/")]
    assert sorted(n.rsplit("/", 1)[1] for n in names) == sorted(os.listdir(os.path.join(shipped.root(), shipped.TAG)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR", "COLCEP_SHIPPED_KERNELS")}
    env["COLCEP_CACHE_DIR"] = str(tmp_path / "cache")
    for _ in range(2):  # the second process finds the build unpacked
        a = _probe(zp, tmp_path, env)
        assert a["order"] == [1, 0, 2, 3]
        assert a["misses"] == 0 and a["hits"] == 1 and a["compiles"] == 0
    unpacked = os.listdir(tmp_path / "cache" / "prebuilt")
    assert len(unpacked) == 1 and unpacked[0].startswith(shipped.TAG)
    assert not os.listdir(tmp_path / "cache" / "kernels")  # nothing compiled into the machine's cache


def test_cache_folder_follows_the_environment(tmp_path):
    tag = f"{colcep.__version__}-py{sys.version_info[0]}{sys.version_info[1]}"
    tmp = f"colcep-{os.getuid()}"
    c = cache.candidates({"COLCEP_CACHE_DIR": str(tmp_path / "mine"), "NUMBA_CACHE_DIR": "/x", "HOME": "/h"})
    assert c[0] == str(tmp_path / "mine") and tmp in c[-1]
    c = cache.candidates({"NUMBA_CACHE_DIR": "/nb", "HOME": "/h"})  # a user's NUMBA_CACHE_DIR is honoured
    assert c[0] == f"/nb/colcep-{tag}"
    c = cache.candidates({"HOME": "/h"})
    assert c[0] == f"/h/.cache/colcep/numba-{tag}"
    c = cache.candidates({"HOME": "/h", "XDG_CACHE_HOME": "/xdg"})
    assert c[0] == f"/xdg/colcep/numba-{tag}"
    c = cache.candidates({})  # no HOME (a bare executor): the temp dir
    assert len(c) == 1 and c[0].endswith(f"{tmp}/numba-{tag}")
    # this process: the kernels are cached where cache_dir() says, by colcep's locator
    from colcep.kernels import nfa

    assert nfa.run_batch.stats.cache_path == os.path.join(cache.cache_dir(), "kernels")


def test_every_kernel_is_cached_by_colceps_locator():
    """``colcep/__init__.py`` installs the locator before anything imports a kernel module (the
    kernels import nothing from colcep, so nothing else would): every kernel of every module."""
    import importlib
    import pkgutil

    from numba.core.dispatcher import Dispatcher

    paths = {}
    for info in pkgutil.iter_modules(colcep.kernels.__path__):
        mod = importlib.import_module(f"colcep.kernels.{info.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, Dispatcher) and obj.__module__ == mod.__name__:
                paths[f"{info.name}.{name}"] = obj.stats.cache_path
    assert len(paths) > 100 and set(paths.values()) == {os.path.join(cache.cache_dir(), "kernels")}


def test_source_stamp_follows_the_modules_a_kernel_imports(tmp_path):
    (tmp_path / "a.py").write_text("from .b import f\nfrom . import c\n")
    (tmp_path / "b.py").write_text("X = 1\n")
    (tmp_path / "c.py").write_text("Y = 1\n")
    (tmp_path / "d.py").write_text("Z = 1\n")

    def stamp(name):
        cache._STAMPS.clear()
        return cache._stamp(str(tmp_path / name), None)

    s0 = stamp("a.py")
    (tmp_path / "d.py").write_text("Z = 2\n")  # not imported by a: no change
    assert stamp("a.py") == s0
    (tmp_path / "b.py").write_text("X = 2\n")  # a helper it imports changed: the kernel is stale
    s1 = stamp("a.py")
    assert s1 != s0
    (tmp_path / "c.py").write_text("Y = 2\n")
    assert stamp("a.py") != s1
    cache._STAMPS.clear()


def test_compile_lock_excludes_other_processes(tmp_path):
    import fcntl

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["COLCEP_CACHE_DIR"] = str(tmp_path / "cache")
    hold = ("import sys; from colcep.engine.kernel_cache import compile_lock\n"
            "with compile_lock():\n    print('held', flush=True); sys.stdin.readline()\nprint('released', flush=True)\n")
    p = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    try:
        assert p.stdout.readline().strip() == "held"
        with open(tmp_path / "cache" / "compile.lock", "a") as fh:
            with pytest.raises(BlockingIOError):  # another process holds the machine's lock
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            p.stdin.write("\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "released"
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
            fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        p.stdin.close()
        p.wait(10)


# ============================================================================ cluster defaults
def _fake_spark(parallelism: int, **conf: str):
    sc = SimpleNamespace(defaultParallelism=parallelism,
                         getConf=lambda: SimpleNamespace(get=lambda k, d=None: conf.get(k, d)))
    return SimpleNamespace(sparkContext=sc)


def test_default_partitions_from_data_and_cluster():
    from colcep.spark import ROWS_PER_TASK, cluster_cores, default_partitions

    assert default_partitions(_fake_spark(2), 1_000_000) == 4  # not 200 for 10^6 rows
    assert default_partitions(_fake_spark(2)) == 4  # unknown size (CSV)
    assert default_partitions(_fake_spark(16), 10**6) == 32
    big = 100 * ROWS_PER_TASK  # large inputs: about ROWS_PER_TASK rows a task, whole waves of cores
    assert default_partitions(_fake_spark(16), big) == 112
    assert default_partitions(_fake_spark(2), big) == 100
    # executors still registering: the cores the application asked for
    assert cluster_cores(_fake_spark(2, **{"spark.cores.max": "8"})) == 8
    assert cluster_cores(_fake_spark(2, **{"spark.executor.instances": "3", "spark.executor.cores": "4"})) == 12
