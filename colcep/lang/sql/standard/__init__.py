"""SQL MATCH_RECOGNIZE in standard mode (``colcep.sql(query, semantics="standard")``, the default):
SQL:2016 row pattern recognition as Trino, Oracle and Snowflake run it.

- :mod:`~colcep.lang.sql.standard.syntax`: the query's clauses and the row pattern, compiled to
  the program Trino compiles (consume, split, jump, anchors, match);
- :mod:`~colcep.lang.sql.standard.program`: DEFINE as stack code and the registers each thread
  keeps, the arrays ``kernels.rowpattern`` runs;
- :mod:`~colcep.lang.sql.standard.run`: the input ordered and coded, the kernel, the output rows;
- :mod:`~colcep.lang.sql.standard.measures`: MEASURES, column-at-a-time with Arrow.
"""
