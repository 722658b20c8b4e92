"""The progress meter of a lazy Spark scan (``colcep.spark.match_parquet`` / ``match`` with
``progress=``): :class:`SparkScanMeter` is armed when the DataFrame is made and follows the job
that runs it, drawing a :class:`~colcep.engine.progress.ScanProgress` line from Spark's status
tracker and the scan's accumulators; :func:`spark_scan_meter` makes one from a ``progress=``
argument. The redraw interval and where a meter draws are the library meter's
(:mod:`colcep.engine.progress`).

pyspark is never imported here: the SparkContext and the ``ScanMetrics`` are handed in.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from colcep.engine import progress as engine_progress


def active_stages(tracker) -> list:
    """The active stages' ``SparkStageInfo`` (a stage that ended meanwhile is left out)."""
    stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    return [s for s in stages if s is not None]


#: A Spark meter whose stage ended with none of its tasks finished says so after this long.
IDLE_SECONDS = 2.0


class SparkScanMeter:
    """The meter of a lazy Spark scan (``colcep.spark.match_parquet`` / ``match`` with
    ``progress``): armed when the DataFrame is made, it follows the job that runs it, whatever
    the action (a write, ``toPandas``, ``count``). That job is known by its ``tasks`` tasks (the
    scan's partitions): an active stage with that many tasks, or a task of this scan that
    finished (``metrics``: the scan's ``ScanMetrics``, whose accumulators count a task's rows
    and matches once it has finished). The rows and matches drawn are the finished tasks'.

    A background thread polls Spark's status tracker every ``REDRAW_SECONDS`` while armed; the
    last line is drawn when the last task's values arrive (``ScanMetrics.on_task``: before the
    action returns), after which the meter is done. A job that ends before all the tasks ran (a
    ``show`` or ``limit``, a failure, Ctrl-C: PySpark cancels the jobs) gets a line saying so and
    the meter waits for the next; when none of its tasks had finished, the stage may have been
    another with as many tasks (the shuffle's map side before ``match``'s matching stage), so the
    line stays for the next stage and says so only after ``IDLE_SECONDS``. ``close`` disarms it (the DataFrame was dropped; a later scan
    with progress takes over a meter whose job has not started)."""

    _armed: "list[SparkScanMeter]" = []  # meters waiting for their job (one per process)
    _armed_lock = threading.Lock()

    def __init__(self, sc, metrics, tasks: int, what: str, total: int | None, display: Callable | None = None,
                 stream=None, delay: float = 0.0):
        self.sc, self.metrics, self.tasks, self.what, self.total = sc, metrics, int(tasks), what, total
        self._display, self._stream, self._delay = display, stream, delay
        self.meter: engine_progress.ScanProgress | None = None
        self._seen_stage = False  # the meter drawing has seen its job's stage active
        self._gone: float | None = None  # when that stage was last seen to end without a finished task
        self.lines = 0  # meters finished (jobs followed)
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._base = self._values()
        with SparkScanMeter._armed_lock:
            idle = [m for m in SparkScanMeter._armed if m.meter is None]  # not drawing: this one takes over
        for older in idle:
            older.close()
        with SparkScanMeter._armed_lock:
            SparkScanMeter._armed.append(self)
        metrics.on_task(self._task_done)
        self.th = threading.Thread(target=self._run, daemon=True, name="colcep-spark-progress")
        self.th.start()

    def _values(self) -> tuple[int, int, int]:
        m = self.metrics
        return int(m.tasks), int(m.rows), int(m.matches)

    def _counts(self) -> tuple[int, int, int]:
        return tuple(v - b for v, b in zip(self._values(), self._base))

    def _start(self) -> None:
        self.meter = engine_progress.ScanProgress(self.what, self.total, display=self._display, stream=self._stream,
                                                  delay=self._delay)

    def _task_done(self) -> None:
        """A task of this scan finished (PySpark's accumulator thread)."""
        with self._lock:
            if self.stop.is_set():
                return
            tasks, rows, matches = self._counts()
            if self.meter is None:
                self._start()
            if tasks >= self.tasks:
                self.meter.finish(rows, matches)
                self.lines += 1
                self.close()
            else:
                self.meter.update(rows, matches, detail=f"{tasks}/{self.tasks} tasks done")

    def _run(self) -> None:
        errors = 0
        while not self.stop.wait(engine_progress.REDRAW_SECONDS):
            try:
                stages = [s for s in active_stages(self.sc.statusTracker()) if s.numTasks == self.tasks]
            except Exception:  # noqa: BLE001 - a stopped context: nothing more to follow
                errors += 1
                if errors >= 10:
                    self.close()
                continue
            errors = 0
            with self._lock:
                if self.stop.is_set():
                    return
                tasks, rows, matches = self._counts()
                if self.meter is None and not stages:
                    continue
                if self.meter is None:
                    self._start()
                if stages:
                    self._seen_stage, self._gone = True, None
                elif not self._seen_stage:  # known by its finished tasks only (its stage has fewer tasks)
                    continue
                elif tasks == 0 and (self._gone is None or time.perf_counter() - self._gone < IDLE_SECONDS):
                    # none of its tasks finished: the stage may have been another with as many tasks
                    # (the shuffle before a match, another job); the line stays, for the next stage
                    self._gone = self._gone or time.perf_counter()
                    continue
                else:  # the job ended before all the tasks ran: say so, wait for the next
                    self.meter.finish(rows, matches, stopped=f"Spark job ended with {tasks}/{self.tasks} tasks done")
                    self.lines += 1
                    self.meter, self._base, self._seen_stage, self._gone = None, self._values(), False, None
                    continue
                running = sum(s.numActiveTasks for s in stages)
                self.meter.update(rows, matches, detail=f"{tasks}/{self.tasks} tasks done, {running} running")

    def close(self) -> None:
        """Disarm: no more lines (a meter drawing stays as it is drawn)."""
        self.stop.set()
        try:
            self.metrics.on_task(None)
        except Exception:  # noqa: BLE001 - a stopped context
            pass
        with SparkScanMeter._armed_lock:
            if self in SparkScanMeter._armed:
                SparkScanMeter._armed.remove(self)


def spark_scan_meter(progress: Any, df, sc, metrics, tasks: int, what: str,
                     total: int | None = None) -> SparkScanMeter | None:
    """A :class:`SparkScanMeter` for the DataFrame ``df`` when ``progress`` asks for one
    (:func:`~colcep.engine.progress.progress_wanted`), disarmed when ``df`` is dropped."""
    import weakref

    if not engine_progress.progress_wanted(progress):
        return None
    watch = SparkScanMeter(sc, metrics, tasks, what, total, display=engine_progress.notebook_display(),
                           delay=engine_progress.QUIET_SECONDS if progress is None else 0.0)
    weakref.finalize(df, watch.close)
    return watch
