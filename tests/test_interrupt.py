"""``colcep.engine.interrupt.call`` runs a kernel inline in the main thread and still stops it on
Ctrl-C: the signal's wakeup byte reaches a watcher thread that sets the stop flag, and
``KeyboardInterrupt`` is raised once the kernel has returned. Where the caller's own handlers
must run while the kernel does, it runs on a worker thread. Each case runs in a child process
(signals and wakeup descriptors are process-wide)."""
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import os, signal, sys, threading, time
import numpy as np
from numba import njit
from colcep.engine import interrupt

@njit(nogil=True, cache=False)
def spin(stop, seconds):
    # polls only the flag, as the kernels do: no Python runs in here, so only the watcher can stop it
    # (the opaque call keeps the flag's load in the loop)
    t0 = 0.0
    while stop[0] == 0 and t0 < seconds * 1e8:
        t0 += np.random.random() + 0.5
    return stop[0]

spin(np.ones(1, np.uint8), 0.0)
stop = interrupt.new_stop_flag()
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.monotonic()
"""


def run(body: str) -> str:
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_ctrl_c_stops_an_inline_kernel_and_raises_after_it_returned():
    out = run("""
        assert threading.current_thread() is threading.main_thread()
        try:
            interrupt.call(spin, stop, 60.0, stop=stop)
        except KeyboardInterrupt:
            took = time.monotonic() - t0
            assert stop[0] == 1 and took < 5, took
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            assert signal.set_wakeup_fd(-1) == -1  # put back: there was none
            print("interrupted")
        """)
    assert out.strip() == "interrupted"


def test_the_next_call_is_not_stopped_by_an_earlier_signal():
    out = run("""
        try:
            interrupt.call(spin, stop, 60.0, stop=stop)
        except KeyboardInterrupt:
            pass
        again = interrupt.new_stop_flag()
        t1 = time.monotonic()
        r = interrupt.call(spin, again, 0.5, stop=again)
        assert r == 0 and time.monotonic() - t1 > 0.2, (r, time.monotonic() - t1)
        print("ran")
        """)
    assert out.strip() == "ran"


def test_a_users_handler_decides_what_ctrl_c_does():
    """A SIGINT handler of the caller's runs while the kernel does (on a worker thread); one that
    does not raise lets the kernel finish."""
    out = run("""
        got = []
        def mine(signum, frame):
            got.append((signum, time.monotonic() - t0))
        signal.signal(signal.SIGINT, mine)
        r = interrupt.call(spin, stop, 1.0, stop=stop)
        assert r == 0 and len(got) == 1 and got[0][1] < 0.6, got  # handled at once, not stopped
        assert signal.getsignal(signal.SIGINT) is mine
        print("handled")
        """)
    assert out.strip() == "handled"


def test_another_signals_handler_runs_beside_the_kernel():
    """A time limit's SIGALRM handler raises its own exception while the kernel runs (inline, it
    would run inside Numba's boxing of the result and come out as a SystemError)."""
    out = run("""
        def limit(signum, frame):
            raise TimeoutError("time limit")
        signal.signal(signal.SIGALRM, limit)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the prelude's timer sends one)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            interrupt.call(spin, stop, 60.0, stop=stop)
        except TimeoutError:
            assert time.monotonic() - t0 < 5 and stop[0] == 1 and interrupt.settled()  # the kernel stopped too
            print("limited")
        """)
    assert out.strip() == "limited"


def test_an_event_loops_wakeup_descriptor_is_kept_and_gets_the_byte():
    out = run("""
        r_fd, w_fd = os.pipe()
        os.set_blocking(w_fd, False)
        signal.set_wakeup_fd(w_fd)
        try:
            interrupt.call(spin, stop, 60.0, stop=stop)
        except KeyboardInterrupt:
            pass
        assert signal.set_wakeup_fd(w_fd) == w_fd  # the loop's descriptor is back
        os.set_blocking(r_fd, False)
        time.sleep(0.2)
        assert signal.SIGINT in os.read(r_fd, 64)  # and it saw the signal
        print("forwarded")
        """)
    assert out.strip() == "forwarded"


def test_an_ignored_sigint_stops_nothing():
    out = run("""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        r = interrupt.call(spin, stop, 1.0, stop=stop)
        assert r == 0 and stop[0] == 0
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        print("ignored")
        """)
    assert out.strip() == "ignored"


@pytest.mark.parametrize("where", ["worker", "thread"])
def test_off_the_inline_path_the_call_still_stops(where):
    """Where another handler must run meanwhile (here a SIGUSR1 handler; also off POSIX) the kernel
    runs on a worker thread and Ctrl-C still stops it; from another thread it runs inline."""
    body = {"worker": """
        signal.signal(signal.SIGUSR1, lambda signum, frame: None)
        try:
            interrupt.call(spin, stop, 60.0, stop=stop)
        except KeyboardInterrupt:
            assert stop[0] == 1 and time.monotonic() - t0 < 5
            print("stopped")
        """, "thread": """
        out, done = [], threading.Event()
        threading.Thread(target=lambda: (out.append(interrupt.call(spin, stop, 1.0, stop=stop)), done.set())).start()
        try:
            done.wait()
        except KeyboardInterrupt:
            done.wait()
        assert out == [0]  # a thread's kernel is not stopped by the main thread's signal
        print("stopped")
        """}[where]
    assert run(body).strip() == "stopped"
