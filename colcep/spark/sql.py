"""SQL ``MATCH_RECOGNIZE`` on Spark DataFrames: the same query as :func:`colcep.sql`, run per
partition inside Spark (open-source Spark has no MATCH_RECOGNIZE)::

    from colcep.spark import local_session
    from colcep.spark.sql import sql
    spark = local_session()
    ticks_df.createOrReplaceTempView("ticks")
    out = sql('''SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY name ORDER BY ts ...)''', spark)
    # or sql(query, ticks=ticks_df)

``PARTITION BY`` columns become ``groupBy(...).applyInArrow``: each partition's rows reach one
Python task as an Arrow table, which ``colcep.sql`` matches (measures, MATCH_NUMBER and PREV /
NEXT are per partition, so the result equals the in-process one). Without ``PARTITION BY`` the
whole table goes to one task. A partition must fit in a task's memory; for very large keyed
scans use :func:`colcep.spark.match` with a Pattern (``colcep.lang.sql.compile_query``).
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from colcep.lang.sql.query import _analyse
from colcep.lang.sql.run import run as _run_cep


def _sql(query: str, time_unit: str, semantics: str, stream_times: Any = None, **tables: Any) -> pa.Table:
    if semantics == "standard":
        from colcep.lang.sql.standard.run import run as run_standard
        return run_standard(query, tables)
    return _run_cep(query, time_unit=time_unit, semantics=semantics, _stream_times=stream_times, **tables)


def _table_and_partition(query: str, semantics: str) -> tuple[str, list[str], Any]:
    if semantics == "standard":
        from colcep.lang.sql.standard.syntax import parse
        q = parse(query)
        return q.table, q.partition, None
    q = _analyse(query, None, semantics)
    return q.table, q.partition, q


def _stream_times(q: Any, df: Any, in_schema: pa.Schema) -> Any:
    """The distinct times of the whole input, where a partition's run needs them: Flink's
    MATCH_ROWTIME of a match released when a partial match times out is the watermark, which
    the rows of every partition move (:mod:`colcep.lang.sql.rowtime`)."""
    from colcep.lang.sql import rowtime
    if q is None or q.window is None or not q.partition or not rowtime.wanted(q):
        return None
    import numpy as np
    col = df.select(q.time).distinct().toArrow().column(0).cast(in_schema.field(q.time).type)
    return np.unique(col.cast(pa.int64()).to_numpy(zero_copy_only=False))


def sql(query: str, spark: Any = None, time_unit: str = "ms", semantics: str = "standard", **tables: Any):
    """Run a MATCH_RECOGNIZE query on Spark; returns a Spark DataFrame. ``tables`` maps the
    query's table name to a DataFrame; a name not given is read with ``spark.table(name)``
    (a temporary view or catalog table)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.pandas.types import from_arrow_schema

    from colcep.spark.batch import _to_arrow

    table, partition, q = _table_and_partition(query, semantics)
    if table in tables:
        df = tables[table]
        spark = spark or df.sparkSession
    else:
        spark = spark or SparkSession.getActiveSession()
        if spark is None:
            raise ValueError(f"no DataFrame for table {table!r} and no Spark session to read it from")
        df = spark.table(table)
    in_schema = _to_arrow(spark, df.schema)
    # the output schema: the query over no rows (also checks the query before Spark runs it)
    out_schema = _sql(query, time_unit=time_unit, semantics=semantics, **{table: in_schema.empty_table()}).schema
    out_schema = pa.schema([f.with_type(pa.float64()) if pa.types.is_null(f.type) else f for f in out_schema])
    spark_schema = from_arrow_schema(out_schema)
    run = _Run(query, table, time_unit, semantics, out_schema, _stream_times(q, df, in_schema))
    if partition:
        def run_group(tbl: pa.Table) -> pa.Table:   # type hints: how pyspark picks the Arrow table API
            return run(tbl)
        return df.groupBy(*partition).applyInArrow(run_group, spark_schema)
    return df.repartition(1).mapInArrow(run.batches, spark_schema)


class _Run:
    """The function Spark calls: one partition's rows in, its MATCH_RECOGNIZE output out."""

    def __init__(self, query: str, table: str, time_unit: str, semantics: str, schema: pa.Schema,
                 stream_times: Any = None):
        self.query, self.table, self.time_unit, self.semantics, self.schema = query, table, time_unit, semantics, schema
        self.stream_times = stream_times

    def __call__(self, tbl: pa.Table) -> pa.Table:
        out = _sql(self.query, time_unit=self.time_unit, semantics=self.semantics, stream_times=self.stream_times,
                   **{self.table: tbl})
        return pa.table([out.column(f.name).cast(f.type) for f in self.schema], schema=self.schema)

    def batches(self, it):
        batches = list(it)
        if not batches:
            return
        yield from self(pa.Table.from_batches(batches)).to_batches()


__all__ = ["sql"]
