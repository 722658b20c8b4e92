"""SQL MATCH_RECOGNIZE in standard mode (``colcep.sql(query, semantics="standard")``, the default):
SQL:2016 row pattern recognition as Trino, Oracle and Snowflake run it.

- :mod:`~colcep.lang.sql.standard.syntax`: the query's clauses and the row pattern, compiled to
  the program Trino compiles (consume, split, jump, anchors, match);
- :mod:`~colcep.lang.sql.standard.program`: DEFINE as stack code and the registers each thread
  keeps, the arrays ``kernels.rowpattern`` runs;
- :mod:`~colcep.lang.sql.standard.run`: the input ordered and coded, the kernel, the output rows;
- :mod:`~colcep.lang.sql.standard.measures`: MEASURES, column-at-a-time with Arrow.

Where it differs from Trino on purpose (DEFINE runs on float64 rows, NULL as NaN):

- a floating-point NaN in a column a condition reads is NULL there (MEASURES see the NaN), and
  a decimal column is read as a double there (MEASURES keep decimals exact);
- an integer column past 2**53 that a condition reads is a ``StdError``, not compared inexactly;
- time columns are compared exactly, in the finest unit that holds them all, but not added to or
  compared with numbers: time literals and intervals are not supported in DEFINE;
- a string function is computed over one row, as a column, before matching: over the rows of
  several variables (``A.s || B.s``) or of a navigation (``lower(PREV(s))``) it is a
  ``StdError``, and an integer division by zero inside it gives NULL rather than failing;
- a search holding more than ``run.MAX_THREADS`` threads is a ``CapacityError`` (only patterns
  whose conditions navigate to labels, like ``PREV(CLASSIFIER())``, are not pruned).
"""
