"""SQL ``MATCH_RECOGNIZE`` as a front-end to colcep's engines.

- :mod:`~colcep.lang.sql.standard`: the standard mode (SQL:2016, as Trino runs it) on its own
  kernel;
- :mod:`~colcep.lang.sql.query`: Flink SQL's dialect (``cep`` and ``flink`` modes) parsed and
  lowered to a :class:`~colcep.Pattern` (the supported SQL is listed there);
- :mod:`~colcep.lang.sql.run`: a ``cep`` / ``flink`` query run in process, MEASURES included;
- :mod:`colcep.spark.sql`: the same query run inside Spark, per partition.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from colcep.lang.sql.query import SqlError, compile_query
from colcep.lang.sql.run import run

__all__ = ["sql", "compile_query", "SqlError", "SEMANTICS"]


SEMANTICS = ("standard", "cep", "flink")


def sql(query: str, time_unit: str = "ms", semantics: str = "standard", **tables: Any) -> "pa.Table":
    """Run a ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` query over the named tables (pyarrow
    Tables, pandas or polars DataFrames): ``colcep.sql(query, Ticker=ticks)``. Returns a pyarrow
    Table. With a Spark DataFrame as the table, the query runs on Spark
    (:func:`colcep.spark.sql.sql`) and returns a DataFrame.

    ``semantics``:

    - ``"standard"`` (the default): SQL:2016 row pattern recognition as Trino, Oracle and
      Snowflake run it (preferment, empty matches, anchors, exclusions, ``SUBSET``...; see
      :mod:`colcep.lang.sql.standard`);
    - ``"cep"``: Flink SQL's CEP-style matching (``WITHIN``, the match that completes first wins),
      accepting more than Flink (see :mod:`colcep.lang.sql.query`); ``time_unit`` is the unit
      of an integer time column;
    - ``"flink"``: exactly Flink 2.3 SQL, and only the queries it runs (a ``SqlError`` where
      Flink refuses the query or fails the job).

    In every mode a query past :mod:`colcep.lang.sql.limits` (its length, nesting, pattern size)
    is a ``SqlError`` naming the clause and the limit."""
    if semantics not in SEMANTICS:
        raise ValueError(f"semantics must be one of {', '.join(map(repr, SEMANTICS))}, got {semantics!r}")
    if any(type(t).__module__.startswith("pyspark.") for t in tables.values()):
        from colcep.spark.sql import sql as spark_sql
        return spark_sql(query, time_unit=time_unit, semantics=semantics, **tables)
    if semantics == "standard":
        from colcep.lang.sql.standard.run import run as run_standard
        return run_standard(query, tables)
    return run(query, time_unit=time_unit, semantics=semantics, **tables)
