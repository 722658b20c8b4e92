"""Runtime settings of the shared test Spark session (``conftest.spark``), changed for a while."""
from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import subprocess
from typing import Any, Iterator, Mapping

BATCH_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: C1 only and one GC thread: a JVM starts sooner and spends ~40 % less CPU on short jobs.
BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def cds_archive() -> str:
    """The class-data-sharing archive of a local Spark JVM's classes, for this Java, PySpark and
    these options, in colcep's cache folder (``make_cds_archive`` writes it)."""
    import pyspark

    from colcep.engine import kernel_cache as cache

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    tag = hashlib.sha256(f"{java}|{pyspark.__version__}|{BASE_OPTIONS}".encode()).hexdigest()[:16]
    return os.path.join(cache.cache_dir(), f"spark-cds-{tag}.jsa")


def make_cds_archive() -> None:
    """Write ``cds_archive()`` (if missing): a local session runs a few small jobs, and its JVM
    dumps the classes it loaded when it exits (~4 s more than the job; later JVMs that name the
    archive load Spark's classes from it: ~3.5 s less CPU each). Older archives are deleted."""
    import sys

    path = cds_archive()
    if os.path.exists(path):
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    # (Spark's own paths only: Arrow in and out, a Python UDF, a shuffle and a sort; no colcep kernel,
    # which the pre-compile is compiling beside this job)
    job = ("import sys, pyarrow as pa; from colcep.spark import local_session; "
           "s = local_session(2, shuffle_partitions=2, memory='1g', java_options=sys.argv[1]); "
           "t = pa.table({'name': ['a', 'b'] * 20, 'ts': list(range(40)), 'price': [1.0 + i % 5 for i in range(40)]}); "
           "df = s.createDataFrame(t.to_pandas()); "
           "df.mapInArrow(lambda it: it, df.schema).repartition(2, 'name').sortWithinPartitions('ts').toArrow(); "
           "df.groupBy('name').applyInArrow(lambda b: b, df.schema).toArrow(); s.stop()")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    subprocess.run([sys.executable, "-c", job, f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={tmp}"], env=env,
                   capture_output=True, check=True, timeout=600)
    if os.path.exists(tmp):
        for old in glob.glob(os.path.join(os.path.dirname(path), "spark-cds-*.jsa")):
            os.remove(old)
        os.replace(tmp, path)


def _java_options() -> str:
    archive = cds_archive()
    if not os.path.exists(archive):
        return BASE_OPTIONS
    # (an archive the JVM cannot use, another classpath's, is ignored: the log options keep it quiet)
    return f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


#: The JVM options of every JVM the tests start (local_session's java_options, the streaming
#: jobs', the standalone cluster's): ``BASE_OPTIONS``, and the class-data-sharing archive where
#: ``tests/precompile.py`` made it before the test processes started.
JAVA_OPTIONS = _java_options()
#: The runtime settings Spark tests change; each such test gets them back as they were.
RUNTIME = (BATCH_ROWS, SHUFFLE_PARTITIONS)


@contextlib.contextmanager
def spark_settings(spark: Any, settings: Mapping[str, Any]) -> Iterator[Any]:
    """``spark`` with ``settings`` (runtime SQL settings) set, and put back as they were after."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, str(v))
    try:
        yield spark
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
