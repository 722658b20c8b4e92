"""A local SparkSession set up for colcep, and the partition count a scan should use."""
from __future__ import annotations

import os
import sys
import tempfile
import warnings
from typing import TYPE_CHECKING, Any

from colcep.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

#: Arrow batch size the local session asks Spark for (spark.sql.execution.arrow.maxRecordsPerBatch).
DEFAULT_BATCH_ROWS = 500_000

#: Rows per task ``default_partitions`` aims at when the input is large (a task streams its
#: rows batch by batch, so this bounds the count of tasks, not memory).
ROWS_PER_TASK = 4_000_000


def cluster_cores(spark: "SparkSession") -> int:
    """The cores the session's executors offer: Spark's default parallelism, or the cores the
    application asked for (``spark.cores.max``, ``spark.executor.instances`` x
    ``spark.executor.cores``) when executors are still registering."""
    sc = spark.sparkContext
    cores = int(sc.defaultParallelism or 1)
    conf = sc.getConf()
    asked = [int(conf.get("spark.cores.max", "0") or 0)]
    inst, per = conf.get("spark.executor.instances", None), conf.get("spark.executor.cores", None)
    if inst and per:
        asked.append(int(inst) * int(per))
    return max([cores] + asked)


def default_partitions(spark: "SparkSession", rows: int | None = None) -> int:
    """A partition count for :func:`match` from the data and the cluster: twice the cores (so a
    slow key's task does not leave cores idle), more for large inputs (about ``ROWS_PER_TASK``
    rows a task), rounded up to a multiple of the cores. Not Spark's 200 shuffle partitions,
    which for 10^6 rows makes 200 tasks of Spark overhead each."""
    cores = cluster_cores(spark)
    n = 2 * cores
    if rows:
        n = max(n, -(-int(rows) // ROWS_PER_TASK))
    return -(-n // cores) * cores


# ============================================================================ local session
def local_session(cores: int | None = None, *, memory: str = "2g", shuffle_partitions: int | None = None,
                  batch_rows: int = DEFAULT_BATCH_ROWS, progress: bool = False, app_name: str = "colcep",
                  conf: dict[str, Any] | None = None, java_options: str = "") -> "SparkSession":
    """A local SparkSession set up for colcep (the embedded default; on a cluster pass your own).

    Workers run this interpreter (``PYSPARK_PYTHON``), the UI is off, Python workers are
    reused (the kernels load once per worker process), Arrow batches are large
    (``batch_rows``), shuffle partitions default to twice the cores, the time zone is UTC
    and the log level ERROR. ``progress`` shows Spark's console progress bar on stderr.
    ``java_options`` go to the JVM (in local mode the one that runs everything): for short
    jobs ``"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"`` starts sooner and spends ~40 % less
    CPU (a session and three small jobs: 16 s of CPU instead of 26), long ones run slower.
    An existing session is returned as it is (its settings cannot change).
    """
    if java_options and "spark.driver.extraJavaOptions" in (conf or {}):
        raise InputError("give the JVM's options either as java_options or in conf's spark.driver.extraJavaOptions, "
                         "not both")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    n = int(cores or os.cpu_count() or 1)
    settings: dict[str, Any] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": str(bool(progress)).lower(),
        "spark.sql.shuffle.partitions": str(shuffle_partitions or 2 * n),
        "spark.default.parallelism": str(n),
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(int(batch_rows)),
        "spark.python.worker.reuse": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.memory": memory,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
    }
    if "spark.driver.extraJavaOptions" not in (conf or {}):
        settings["spark.driver.extraJavaOptions"] = \
            f"{java_options} -Dlog4j2.configurationFile=file:{_quiet_log4j()}".strip()
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    builder = SparkSession.builder.master(f"local[{n}]").appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log4j() -> str:
    """A log4j2 configuration that logs errors only (no start-up warnings on the console)."""
    path = os.path.join(tempfile.gettempdir(), "colcep-log4j2.properties")
    if not os.path.exists(path) or open(path).read() != _LOG4J:
        with open(path, "w") as fh:
            fh.write(_LOG4J)
    return path
