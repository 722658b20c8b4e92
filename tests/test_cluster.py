"""colcep on a real Spark standalone cluster, shipped to executors that do not have it.

The module starts a standalone master and one worker (2 cores) on 127.0.0.1 with the pip
package's ``spark-class``, and stops both by pid at the end whatever happens. The executors
run a Python that has numpy, numba, pyarrow, ... but no colcep (a venv that sees the project
venv's site-packages without processing its ``.pth`` files, so the editable install of colcep
is not there). Each application is a driver process of its own (``python job.py``) that:

- checks that the executors cannot import colcep,
- ships colcep the documented way (``colcep.spark.ship(spark, dist/colcep-<version>.zip)``)
  and checks that the executors now import it from that zip, under the worker's folder,
- runs ``colcep.spark.match`` for two patterns and compares with in-process ``colcep.match``.

The worker starts with an empty kernel cache (``COLCEP_CACHE_DIR``). Two applications run one
after the other: the first loads the kernels shipped compiled in the zip (colcep.engine.shipped,
unpacked once into that cache folder), the second finds them there although its zip lands at
another path (the application id is in it): no compile at all.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from spark_settings import JAVA_OPTIONS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = r'''
import json, os, sys, time
from collections import Counter

import pyarrow.parquet as pq

import colcep
from colcep.tools.examples import get_example
from colcep.spark import ScanMetrics, default_partitions, executor_report, match, ship

master, zip_path, data, out, java_options = sys.argv[1:6]
from pyspark.sql import SparkSession

t0 = time.perf_counter()
spark = (SparkSession.builder.master(master).appName("colcep-cluster-test")
         .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.memory", "1g").config("spark.executor.memory", "1g")
         .config("spark.driver.extraJavaOptions", java_options).config("spark.executor.extraJavaOptions", java_options)
         .config("spark.cores.max", "2").config("spark.task.maxFailures", "1")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "40000")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
res = {"app": spark.sparkContext.applicationId, "session_seconds": time.perf_counter() - t0}
res["before"] = executor_report(spark, 2)
res["zip"] = ship(spark, zip_path)
res["after"] = executor_report(spark, 2)


def canon(tbl):
    d = tbl.select(["match_id", "name", "stage", "row"]).to_pydict()
    m = {}
    for i in range(tbl.num_rows):
        m.setdefault(d["match_id"][i], [d["name"][i], []])[1].append((d["stage"][i], d["row"][i]))
    return Counter((k, tuple(v)) for k, v in m.values())


ticks = pq.read_table(data)
df = spark.read.parquet(data)
res["partitions"] = default_partitions(spark, ticks.num_rows)
res["runs"] = []
for name in ("paper_query3", "p1"):
    ex = get_example(name)
    metrics = ScanMetrics(spark)
    t1 = time.perf_counter()
    got = match(df, ex.pattern, key="name", time="ts", columns=["price", "volume"], seq="id",
                num_partitions=res["partitions"], metrics=metrics).toArrow()
    secs = time.perf_counter() - t1
    want = colcep.match(ticks, ex.pattern, key="name", time="ts", columns=["price", "volume"])
    res["runs"].append({"pattern": name, "seconds": secs, "rows": got.num_rows, "want_rows": want.num_rows,
                        "matches": len(canon(want)), "equal": canon(got) == canon(want),
                        "metrics": metrics.as_dict()})
spark.stop()
with open(out, "w") as fh:
    json.dump(res, fh)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    home = _find_spark_home()
    assert os.path.isfile(os.path.join(home, "bin", "spark-class")), home
    return home


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    pytest.fail(f"{log.name}: no {text!r} within {timeout:.0f} s (exit code {proc.poll()}):\n{tail}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process this module started, by its pid (then its own process group, which holds
    the executors the worker launched)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group started with start_new_session
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory) -> str:
    """A Python with the project's dependencies but without colcep."""
    env_dir = tmp_path_factory.mktemp("executor-env")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # a plain path line: the project venv's packages, but not its .pth files (the editable colcep)
    Path(site, "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([str(py), "-c", "import numpy, numba, pyarrow, lark, sqlglot, importlib.util as u; "
                                           "print(u.find_spec('colcep'))"],
                           capture_output=True, text=True, cwd=env_dir, env=env)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "None", "colcep must not be importable by the executors' Python"
    return str(py)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and worker on 127.0.0.1, the worker's kernel cache empty; yields (master
    URL, the worker's folder, its kernel cache folder)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Java 17 is needed for Spark (java on PATH or JAVA_HOME)")
    root = tmp_path_factory.mktemp("standalone")
    home = _spark_home()
    work = root / "work"
    work.mkdir()
    kernels = root / "executor-cache"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "COLCEP_SHIPPED_KERNELS")}
    env.update(COLCEP_CACHE_DIR=str(kernels), SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(root),
               SPARK_WORKER_DIR=str(work),
               SPARK_NO_DAEMONIZE="1", SPARK_DAEMON_JAVA_OPTS=JAVA_OPTIONS)
    spark_class = os.path.join(home, "bin", "spark-class")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = root / f"{name}.log"
        with open(log, "wb") as fh:
            p = subprocess.Popen([spark_class, *args], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=root,
                                 start_new_session=True)
        procs.append(p)
        return p, log

    try:
        master, mlog = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", str(port), "--webui-port", str(_free_port()))
        _wait_for(mlog, "I have been elected leader", master, 90)
        worker, wlog = start("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                             "--cores", "2", "--memory", "2g", "--work-dir", str(work),
                             "--webui-port", str(_free_port()), url)
        _wait_for(wlog, "Successfully registered with master", worker, 90)
        yield url, work, kernels
    finally:
        for p in reversed(procs):
            _stop(p)
    for p in procs:
        assert p.poll() is not None, f"pid {p.pid} still runs"


def _run_app(tmp: Path, url: str, py: str, zip_path: str, data: str, name: str) -> dict:
    script = tmp / "job.py"
    script.write_text(JOB)
    out = tmp / f"{name}.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYSPARK_PYTHON"] = py
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    p = subprocess.run([sys.executable, str(script), url, zip_path, data, str(out), JAVA_OPTIONS], cwd=tmp, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{name} failed:\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    return json.loads(out.read_text())


def test_match_on_standalone_cluster_with_shipped_zip(cluster, executor_python, tmp_path):
    from colcep.spark.ship import build_zip, zip_name
    from colcep.tools.ticks import write_ticks

    from colcep.engine import shipped

    url, work, kernels = cluster
    zip_path = build_zip(tmp_path / "dist")  # what make dist writes
    assert os.path.basename(zip_path) == zip_name()
    data = str(tmp_path / "ticks.parquet")
    write_ticks(data, 60_000, symbols=20, seed=5)

    apps = [_run_app(tmp_path, url, executor_python, zip_path, data, f"app{i}") for i in (1, 2)]
    print(json.dumps([{k: v for k, v in app.items() if k != "before"} for app in apps], indent=1))
    for app in apps:
        # before ship(): the executors cannot import colcep at all
        assert app["before"] and all("No module named 'colcep'" in r.get("error", "") for r in app["before"]), \
            app["before"]
        # after ship(): they import it from the shipped zip, fetched into this application's folder
        for r in app["after"]:
            assert "error" not in r, r
            assert r["executable"] == executor_python
            assert r["colcep"].startswith(str(work / app["app"])), r
            assert f"{zip_name()}/colcep/__init__.py" in r["colcep"], r
        assert app["partitions"] == 4  # twice the 2 cores for 60,000 rows
        for run in app["runs"]:
            assert run["equal"] and run["rows"] == run["want_rows"] and run["matches"] > 50, run
            m = run["metrics"]
            assert m["rows"] == 60_000 and m["tasks"] == 4, m
            assert m["late_compiles"] == 0, f"a kernel compiled inside a task, after the warm-up: {run}"
            if m["compiles"] > 0:  # a worker compiled: the warm-up time says so
                assert m["warm_seconds"] > 0 and m["warm_workers"] > 0, run
        # each application's fresh worker processes warm the pattern up (load) once per process
        assert apps[0]["runs"][0]["metrics"]["warm_workers"] >= 1
    # one cache folder for both applications, although the zip's path differs (application id)
    assert {r["cache_dir"] for app in apps for r in app["after"]} == {str(kernels)}
    assert apps[0]["after"][0]["colcep"] != apps[1]["after"][0]["colcep"]
    # the second application compiles nothing: every kernel comes from the machine's cache
    assert [run["metrics"]["compiles"] for run in apps[1]["runs"]] == [0, 0], apps[1]["runs"]
    if shipped.folder() is not None:  # the zip carries a build for this Numba and Python (make setup's)
        # the first application compiles nothing either: it loads the zip's build, unpacked into the cache
        assert [run["metrics"]["compiles"] for run in apps[0]["runs"]] == [0, 0], apps[0]["runs"]
        assert all(r["shipped"].startswith(str(kernels / "prebuilt" / shipped.TAG)) for r in apps[0]["after"])
