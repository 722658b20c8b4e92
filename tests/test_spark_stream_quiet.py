"""``match_stream`` prints nothing on a healthy run: PySpark's worker (4.x, with pandas 2.x)
concatenates each micro-batch's output with all-NA padding rows, and pandas warned about it
(a FutureWarning) once per micro-batch on the console.

The query runs in a child process (``python tests/test_spark_stream_quiet.py job <folder>``):
the Python workers' stderr reaches the JVM's, which is the stderr of the process that started
the JVM, and only a JVM started for the test writes where the test reads.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

BATCHES = 12
ROWS = 40  # per micro-batch


def write_batches(folder: Path) -> None:
    """``BATCHES`` Parquet files, one per micro-batch, of ticks of three keys."""
    folder.mkdir(parents=True)
    for b in range(BATCHES):
        i = list(range(b * ROWS, (b + 1) * ROWS))
        t = pa.table({"name": [f"k{j % 3}" for j in i],
                      "ts": pa.array([j * 1_000_000 for j in i], pa.timestamp("us", tz="UTC")),
                      "price": [float(10 + j // 3 % 5) for j in i]})      # per key 10, 11, ..., 14, 10...
        p = folder / f"part-{b:03d}.parquet"
        pq.write_table(t, p)
        os.utime(p, (1_700_000_000 + b, 1_700_000_000 + b))


@pytest.mark.spark
def test_a_12_micro_batch_match_stream_prints_no_warning(tmp_path):
    write_batches(tmp_path / "in")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    env.pop("PYTHONWARNINGS", None)
    r = subprocess.run([sys.executable, __file__, "job", str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    batches, matches = map(int, r.stdout.split())
    assert batches >= BATCHES and matches > 0          # the micro-batches ran and matched
    assert not re.search(r"\w*Warning\b", r.stderr), r.stderr[-4000:]   # a Python warning: FutureWarning: ...


def _job(folder: str) -> None:
    """The stream over ``folder/in``, a file per micro-batch, into a memory sink; prints the
    number of micro-batches and of output rows."""
    from colcep import Pattern, col
    from colcep.spark import local_session, match_stream
    from spark_settings import JAVA_OPTIONS

    spark = local_session(1, shuffle_partitions=1, java_options=JAVA_OPTIONS)
    ticks = (spark.readStream.schema("name string, ts timestamp, price double").option("maxFilesPerTrigger", 1)
             .parquet(f"{folder}/in").withWatermark("ts", "1 second"))
    pattern = Pattern.begin("low").where(col("price") < 12).next("high").where(col("price") >= 12)
    out = match_stream(ticks, pattern, key="name", time="ts", columns=["price"], timeouts=True, buckets=2)
    q = out.writeStream.format("memory").queryName("quiet").outputMode("append").start()
    q.processAllAvailable()
    batches = q.lastProgress["batchId"] + 1
    matches = spark.table("quiet").count()
    q.stop()
    print(batches, matches)


if __name__ == "__main__" and sys.argv[1:2] == ["job"]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    _job(sys.argv[2])
