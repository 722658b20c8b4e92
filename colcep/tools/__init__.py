"""What comes with colcep besides the library, and what the command line (``colcep.cli``) is made of.

- :mod:`~colcep.tools.ticks`: synthetic tick data, deterministic for a seed (``colcep generate``);
- :mod:`~colcep.tools.examples`: built-in named patterns, the benchmark's P1-P5 and the desk's
  twenty signals (``colcep patterns``, ``colcep scan --pattern NAME``);
- :mod:`~colcep.tools.file_scan`: a scan of files in this process, streamed batch by batch
  (``colcep scan --in-process``);
- :mod:`~colcep.tools.summary`: what a scan found, counted as its output goes by;
- :mod:`~colcep.tools.plot`: pictures of what a scan found (matplotlib);
- :mod:`~colcep.tools.warmup`: the kernels compiled ahead of the first scan (``colcep warmup``);
- :mod:`~colcep.tools.spark_watch`: the meter of a Spark action (``colcep scan`` on Spark).

They sit above Spark and below the command line: they may import any layer of colcep but the
command line, and no layer imports them.
"""
