"""The command line's meter of a Spark action (``colcep scan`` on Spark): :class:`SparkWatch`
polls Spark's status tracker and the scan's accumulators while the action runs and draws
:func:`spark_meter_text` on the command's :class:`~colcep.engine.progress.Reporter`.

A library call's lazy DataFrame has its own meter, :class:`colcep.spark.progress.SparkScanMeter`.
pyspark is never imported here: the session and the ``ScanMetrics`` are handed in.
"""
from __future__ import annotations

import threading
import time

from colcep.engine import progress as engine_progress
from colcep.engine.progress import Reporter, num, rate
from colcep.spark.progress import active_stages


def spark_meter_text(stages: list, seconds: float, rows: int, total: int | None, matches: int) -> str:
    """A Spark job under way: its active ``stages`` (Spark's ``SparkStageInfo``), then what the
    finished tasks matched (the scan's accumulators: they count a task once it has finished)."""
    tasks = ", ".join(f"stage {s.stageId}: {s.numCompletedTasks}/{s.numTasks} tasks done, "
                      f"{s.numActiveTasks} running" for s in stages) or "between stages"
    of = f"/{num(total)}" if total else ""
    pct = f"{100.0 * rows / total:.0f}% = " if total else ""
    per = f", {num(rate(rows, seconds))} rows/s" if rows else ""
    return f"Spark {tasks} ({seconds:.0f} s); finished tasks matched {pct}{num(rows)}{of} rows{per}, " \
           f"{num(matches)} matches so far"


class SparkWatch:
    """Polls Spark's status tracker and a scan's accumulators (a ``ScanMetrics``) every
    ``REDRAW_SECONDS`` (:mod:`colcep.engine.progress`'s) on a background thread while the block
    runs, drawing :func:`spark_meter_text` on ``rep``'s meter (``total``: the input's rows, when
    known)."""

    def __init__(self, spark, metrics, total: int | None, rep: Reporter):
        self.sc, self.metrics, self.total, self.rep = spark.sparkContext, metrics, total, rep
        self.stop = threading.Event()
        self.t0 = time.perf_counter()
        self.th = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.rep.meter_on:
            self.th.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.th.is_alive():
            self.th.join()
        self.rep.done()

    def _run(self):
        tracker = self.sc.statusTracker()
        while not self.stop.wait(engine_progress.REDRAW_SECONDS):
            try:
                stages = active_stages(tracker)
                rows, matches = int(self.metrics.rows), int(self.metrics.matches)
            except Exception:  # noqa: BLE001 - the meter is best effort
                continue
            self.rep.meter(spark_meter_text(stages, time.perf_counter() - self.t0, rows, self.total, matches))
