"""Compiling before the test processes start: with several (pytest-xdist), the controller
compiles the kernels once (``colcep.tools.warmup``, its groups in parallel processes) and, beside
them, makes the Spark JVMs' class-data-sharing archive; the workers then load them from the
machine's cache instead of each compiling what it meets first."""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor


def before_workers(report) -> None:
    """The kernels compiled (or loaded), and the Spark JVMs' class archive made
    (``spark_settings.make_cds_archive``), in parallel processes."""
    from colcep.tools.warmup import warmup
    from spark_settings import make_cds_archive

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        cds = pool.submit(make_cds_archive)
        warmup(processes=os.cpu_count(), report=report)
        cds.result()
    report("the Spark JVMs' class archive made")
