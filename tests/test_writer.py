"""The background writer of a file scan (``colcep.tools.writer``): order, errors, abort."""
import threading

import pyarrow as pa
import pytest

from colcep.tools.writer import BackgroundWriter


def _t(i: int) -> pa.Table:
    return pa.table({"i": [i]})


def test_tables_reach_the_sink_in_order_on_another_thread():
    got, threads = [], set()

    def sink(t):
        got.append(t.column("i")[0].as_py())
        threads.add(threading.current_thread().name)

    w = BackgroundWriter(sink, depth=2)
    for i in range(50):
        w.put(_t(i))
    w.close()
    assert got == list(range(50)) and threads == {"colcep-writer"}


def test_a_sink_error_is_raised_by_the_next_call_and_nothing_is_written_after_it():
    got = []
    failed = threading.Event()

    def sink(t):
        i = t.column("i")[0].as_py()
        if i == 3:
            failed.set()
            raise OSError("disk full")
        got.append(i)

    w = BackgroundWriter(sink, depth=1)
    with pytest.raises(OSError, match="disk full"):
        for i in range(100):
            if failed.is_set():
                failed.wait()
            w.put(_t(i))
        w.close()
    assert got == [0, 1, 2]
    with pytest.raises(OSError, match="disk full"):
        w.close()


def test_abort_drops_what_waits():
    """The table being written is finished; the three waiting are dropped."""
    release = threading.Event()
    started = threading.Event()
    got = []

    def sink(t):
        started.set()
        release.wait(5)
        got.append(t.column("i")[0].as_py())

    w = BackgroundWriter(sink, depth=3)
    for i in range(4):  # one being written, three waiting
        w.put(_t(i))
        started.wait(5)
    aborting = threading.Thread(target=w.abort)
    aborting.start()
    while not w._dropping:
        pass
    release.set()
    aborting.join(5)
    assert not aborting.is_alive() and got == [0]
