"""Output written on a thread of its own, while the next batch is matched.

A file scan hands each batch's matches to :class:`BackgroundWriter`; a thread encodes and
writes them (Parquet encoding and compression release the GIL) while the scan reads and
matches the next batch, so writing takes the time the matching leaves on the cores rather than
adding its own. At most ``depth`` tables wait: memory stays a few batches' output, and a scan
that outruns its disk waits for it.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable

import pyarrow as pa

_END = object()


class BackgroundWriter:
    """``put(t)`` hands ``t`` to ``sink`` on the writer's thread, in order. An error of ``sink``
    is raised by the next ``put`` or by ``close``; after it nothing more is written.
    ``close()`` waits for what is queued; ``abort()`` drops it (an interrupted scan)."""

    def __init__(self, sink: Callable[[pa.Table], None], depth: int = 2):
        self._sink = sink
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._dropping = False
        self._thread = threading.Thread(target=self._run, name="colcep-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            t = self._queue.get()
            if t is _END:
                return
            if self._error is not None or self._dropping:
                continue
            try:
                self._sink(t)
            except BaseException as e:  # noqa: BLE001 - handed to the scan's thread
                self._error = e

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def put(self, t: pa.Table) -> None:
        self._raise()
        self._queue.put(t)

    def close(self) -> None:
        """Write what is queued, stop the thread; raise the sink's error, if any."""
        self._queue.put(_END)
        self._thread.join()
        self._raise()

    def abort(self) -> None:
        """Drop what is queued (the table being written is finished) and stop the thread."""
        self._dropping = True
        self._queue.put(_END)
        self._thread.join()
