"""SQL ``MATCH_RECOGNIZE`` (Flink SQL's dialect) as a front-end to colcep's engine.

- :mod:`~colcep.lang.sql.query`: the query text parsed and lowered to a :class:`~colcep.Pattern`
  (the supported SQL is listed there);
- :mod:`~colcep.lang.sql.run`: the query run in process, MEASURES included;
- :mod:`colcep.spark.sql`: the same query run inside Spark, per partition.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from colcep.lang.sql.query import SqlError, compile_query
from colcep.lang.sql.run import run

__all__ = ["sql", "compile_query", "SqlError"]


def sql(query: str, time_unit: str = "ms", semantics: str = "cep", **tables: Any) -> "pa.Table":
    """Run a ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` query over the named tables (pyarrow
    Tables, pandas or polars DataFrames): ``colcep.sql(query, Ticker=ticks)``. Returns a
    pyarrow Table; see :mod:`colcep.lang.sql.query` for the supported SQL. With a Spark
    DataFrame as the table, the query runs on Spark (:func:`colcep.spark.sql.sql`) and returns
    a DataFrame.

    ``semantics="flink"`` runs the query as Flink 2.3 SQL does, and only the queries it runs:
    Flink's rows, Flink's integer arithmetic, PREV as a logical offset, and a ``SqlError``
    where Flink refuses the query or fails the job. ``"cep"`` (the default) has the same
    matching and accepts more (see :mod:`colcep.lang.sql.query`)."""
    if semantics == "standard":
        from colcep.lang.sql.standard.run import run as run_standard
        if not any(type(t).__module__.startswith("pyspark.") for t in tables.values()):
            return run_standard(query, tables)
    if any(type(t).__module__.startswith("pyspark.") for t in tables.values()):
        from colcep.spark.sql import sql as spark_sql
        return spark_sql(query, time_unit=time_unit, semantics=semantics, **tables)
    return run(query, time_unit=time_unit, semantics=semantics, **tables)
