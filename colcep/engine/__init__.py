"""The engine: a Pattern compiled to a program, the state carried between calls, and the driver
that steps Arrow batches through the kernels.

- program: :mod:`~colcep.engine.compiler` (NFA^b tables), :mod:`~colcep.engine.conditions`
  (conditions lowered to masks and bytecode), :mod:`~colcep.engine.program` (the immutable,
  fingerprinted ``CompiledPattern``);
- input: :mod:`~colcep.engine.inputs` (any table as Arrow, the bound schema),
  :mod:`~colcep.engine.keys` (key codes), :mod:`~colcep.engine.watermark` (event time),
  :mod:`~colcep.engine.history` (``prev`` / ``rolling`` columns);
- state: :mod:`~colcep.engine.state` (``MatcherState``), :mod:`~colcep.engine.codec` (its bytes);
- driver: :mod:`~colcep.engine.matcher` (``Matcher``, ``match``), :mod:`~colcep.engine.shards`
  (keys over threads), :mod:`~colcep.engine.interrupt` (Ctrl-C in kernel calls),
  :mod:`~colcep.engine.tiers` (which kernel a call runs), :mod:`~colcep.engine.stepgen` (the
  compiled step), :mod:`~colcep.engine.codegen` (what generated kernels share),
  :mod:`~colcep.engine.progress` (a scan's progress meter, ``progress=``);
- compiled code: :mod:`~colcep.engine.kernel_cache` (where the kernels and the compiled step are
  cached on a machine, and the lock around compiling them).
"""
