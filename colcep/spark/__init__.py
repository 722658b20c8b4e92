"""colcep on PySpark: one Matcher per task through ``DataFrame.mapInArrow``.

    from colcep.spark import local_session, match
    spark = local_session()                                   # or your cluster's session
    df = spark.read.parquet("ticks.parquet")
    out = match(df, pattern, key="name", time="ts", columns=["price", "volume"], seq="id")
    out.write.parquet("matches")

The modules, one concern each (pyspark is imported lazily: ``import colcep`` never needs it):

- :mod:`~colcep.spark.session`: a local session set up for colcep, partition counts;
- :mod:`~colcep.spark.batch`: :func:`match`, a Matcher per task over the shuffled, sorted rows, and
  :func:`match_many`, several patterns over one shuffle;
- :mod:`~colcep.spark.parquet`: :func:`match_parquet`, Parquet laid out by key read by the executors,
  and :func:`write_by_key`, which writes that layout (files of whole keys, sorted);
- :mod:`~colcep.spark.stream`: :func:`match_stream`, Structured Streaming with exactly-once output;
- :mod:`~colcep.spark.windows`: ``colcep.windows``' assign, aggregate and ohlc of a DataFrame;
- :mod:`~colcep.spark.window_stream`: :func:`aggregate_stream`, windows that fire by trigger on a stream;
- :mod:`~colcep.spark.sql`: :func:`sql`, MATCH_RECOGNIZE on Spark DataFrames;
- :mod:`~colcep.spark.ship`: :func:`ship`, colcep as a zip for executors that lack it;
- :mod:`~colcep.spark.progress`: the progress meter of a lazy scan (``progress=``), following the
  job that runs it.
"""
from colcep.spark.batch import (ID_BITS, ROW_COL, KeyedStream, ScanMetrics, arrow_spec, match, match_many,
                                output_schema)
from colcep.spark.parquet import match_parquet, write_by_key
from colcep.spark.session import (DEFAULT_BATCH_ROWS, ROWS_PER_TASK, cluster_cores, default_partitions,
                                  local_session)
from colcep.spark.ship import executor_report, ship
from colcep.spark.sql import sql
from colcep.spark.stream import match_stream, state_report
from colcep.spark.window_stream import aggregate_stream

__all__ = ["match", "match_many", "match_parquet", "write_by_key", "match_stream", "aggregate_stream", "sql", "local_session", "output_schema",
           "ScanMetrics", "KeyedStream", "arrow_spec", "ship", "executor_report", "default_partitions",
           "cluster_cores", "state_report", "DEFAULT_BATCH_ROWS", "ROWS_PER_TASK", "ID_BITS", "ROW_COL"]
