"""Compiling before the test processes start: with several (pytest-xdist), the controller
compiles the kernels once (``colcep.warmup``, its groups in parallel processes) and, beside
them, the one specialised module the tests compile for real (``SPEC_CASE``, test_specialise's
``COMPILED``), and makes the Spark JVMs' class-data-sharing archive; the workers then load them
from the machine's cache instead of each compiling what it meets first."""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

#: The conformance case whose specialised module test_specialise compiles with Numba.
SPEC_CASE = "random.7000305"


def compile_spec_module() -> None:
    """Compile (or load) ``SPEC_CASE``'s specialised module, as test_specialise runs it."""
    import conformance as conf
    from colcep import cache

    cache.notice = False  # (the warm-up reports what it compiled)
    conf.run_table(next(c for c in conf.load_cases([conf.CORPUS]) if c["id"] == SPEC_CASE), True, "specialised")


def before_workers(report) -> None:
    """The kernels and the specialised module compiled (or loaded), and the Spark JVMs' class
    archive made (``spark_settings.make_cds_archive``), in parallel processes."""
    from colcep.warmup import warmup
    from spark_settings import make_cds_archive

    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        spec = pool.submit(compile_spec_module)
        cds = pool.submit(make_cds_archive)
        warmup(processes=os.cpu_count(), report=report)
        spec.result()
        cds.result()
    report("the specialised module of test_specialise compiled, the Spark JVMs' class archive made")
