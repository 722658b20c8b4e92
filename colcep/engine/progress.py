"""The progress meter of a long scan, drawn the way terminals, logs and notebooks draw it.

- :class:`ScanProgress`: the meter of one library call (``colcep.match(..., progress=...)``,
  ``colcep.match_many``, ``colcep.sase_match``): on a terminal one line redrawn in place on
  stderr, in a log a line every ``LOG_SECONDS``, in a notebook an updating display (IPython's
  display handle); :func:`scan_progress` makes one from a ``progress=`` argument,
  :func:`progress_wanted` says whether that argument asks for one, :func:`scanning` finishes its
  line however the scan ends;
- :class:`Reporter`: lines on stderr: step lines (``[ 12.3 s] starting local Spark ...``) and a
  meter redrawn in place on a terminal (at most every ``REDRAW_SECONDS``) or written as a line
  every ``LOG_SECONDS`` in a log; a :class:`ScanProgress` draws through one, and it is
  ``colcep scan``'s voice;
- the scan's accounting, in words: :func:`scan_meter_text` (``12.3% 1,234/10,000 rows, 5,000
  rows/s, 37 matches so far``), :func:`scan_done_text` (``matched 10,000 rows in 2.0 s (5,000
  rows/s): 37 matches``), :func:`scan_stopped_text`.

The meters of Spark jobs build on these: :mod:`colcep.spark.progress` (a library call's lazy
DataFrame) and :mod:`colcep.tools.spark_watch` (the command line's). Nothing here imports the
rest of colcep, nor IPython or pyspark unless they are already in use.
"""
from __future__ import annotations

import contextlib
import html
import sys
import threading
import time
from typing import Any, Callable, Iterator

#: A meter on a terminal or in a notebook is redrawn at most this often (seconds).
REDRAW_SECONDS = 0.5
#: In a log (stderr not a terminal) a meter writes a line this often (seconds).
LOG_SECONDS = 10.0


# ============================================================================ numbers in words
def num(n: float) -> str:
    """``1234567.8`` -> ``1,234,568``."""
    return f"{n:,.0f}"


def rate(rows: float, seconds: float) -> float:
    """Rows per second (a zero span counts as a nanosecond)."""
    return rows / max(seconds, 1e-9)


def scan_meter_text(done: int, total: int | None, seconds: float, matches: int) -> str:
    """A scan under way: ``12.3% 1,234/10,000 rows, 5,000 rows/s, 37 matches so far`` (without
    ``total``: ``1,234 rows, ...``)."""
    head = f"{100.0 * done / max(total, 1):5.1f}% {num(done)}/{num(total)}" if total is not None else num(done)
    return f"{head} rows, {num(rate(done, seconds))} rows/s, {num(matches)} matches so far"


def scan_done_text(rows: int, seconds: float, matches: int) -> str:
    """A finished scan: ``matched 10,000 rows in 2.0 s (5,000 rows/s): 37 matches``."""
    return f"matched {num(rows)} rows in {seconds:.1f} s ({num(rate(rows, seconds))} rows/s): {num(matches)} matches"


def scan_stopped_text(done: int, total: int | None, seconds: float, matches: int, why: str) -> str:
    """A scan that did not finish: ``interrupted after 1,234 of 10,000 rows (2.0 s), 37 matches so far``."""
    of = f" of {num(total)}" if total is not None else ""
    return f"{why} after {num(done)}{of} rows ({seconds:.1f} s), {num(matches)} matches so far"


# ============================================================================ lines on stderr
class Reporter:
    """What a long command is doing, on stderr: ``step`` lines (``[ 12.3 s] starting local
    Spark ...``) and a progress ``meter``, redrawn in place on a terminal (at most twice a
    second) and written as a line every ``log_interval`` seconds otherwise (logs, CI).
    ``quiet`` silences both; ``meter=False`` keeps the steps only. ``tty`` overrides what the
    stream says of itself (a notebook's stderr redraws a line though it is no terminal);
    ``indent``: between a meter line's time stamp and its text, after the stamp's space."""

    def __init__(self, quiet: bool = False, meter: bool = True, stream=None, log_interval: float = LOG_SECONDS,
                 tty: bool | None = None, indent: str = "  "):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = _isatty(self.stream) if tty is None else bool(tty)
        self.quiet, self.meter_on = quiet, meter and not quiet
        self.interval = REDRAW_SECONDS if self.tty else log_interval
        self.indent = indent
        self.t0 = time.perf_counter()
        self._last = -1e9
        self._width = 0
        self._lock = threading.Lock()

    def _stamp(self) -> str:
        return f"[{time.perf_counter() - self.t0:6.1f} s]"

    def _clear(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0

    def step(self, msg: str) -> None:
        if self.quiet:
            return
        with self._lock:
            self._clear()
            self.stream.write(f"{self._stamp()} {msg}\n")
            self.stream.flush()
            self._last = time.perf_counter()

    def due(self) -> bool:
        """Whether a ``meter`` call now would draw (cheap: a clock read)."""
        return self.meter_on and time.perf_counter() - self._last >= self.interval

    def meter(self, msg: str, force: bool = False) -> bool:
        """Draw ``msg`` unless one was drawn less than an interval ago (``force``: draw anyway);
        returns whether it drew."""
        if not self.meter_on:
            return False
        with self._lock:
            now = time.perf_counter()
            if not force and now - self._last < self.interval:
                return False
            self._last = now
            if self.tty:
                line = f"{self._stamp()} {self.indent}{msg}"
                self.stream.write("\r" + line.ljust(self._width))
                self._width = len(line)
            else:
                self.stream.write(f"{self._stamp()} {self.indent}{msg}\n")
            self.stream.flush()
            return True

    def done(self) -> None:
        with self._lock:
            self._clear()
            self.stream.flush()

    @contextlib.contextmanager
    def ticking(self, what: str, expected: float | None = None) -> Iterator[None]:
        """Meter ``what: 12 s (of ~2 min)`` while the block runs (a background thread)."""
        stop = threading.Event()
        t0 = time.perf_counter()

        def tick():
            while not stop.wait(0.5):
                el = time.perf_counter() - t0
                of = (f" of ~{expected / 60:.0f} min" if expected >= 60 else f" of ~{expected:.0f} s") if expected else ""
                self.meter(f"{what}: {el:.0f} s{of} ...")

        th = threading.Thread(target=tick, daemon=True)
        if self.meter_on:
            th.start()
        try:
            yield
        finally:
            stop.set()
            if th.is_alive():
                th.join()
            self.done()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:  # noqa: BLE001 - a closed or odd stream is no terminal
        return False


# ============================================================================ where we are drawing
def notebook_display() -> Callable[..., Any] | None:
    """IPython's ``display`` when this process is a notebook's kernel (Jupyter, VS Code, Colab:
    an IPython shell with a kernel), else None. IPython is never imported here: a notebook has
    imported it already."""
    ip = sys.modules.get("IPython")
    if ip is None:
        return None
    try:
        shell = ip.get_ipython()
        if shell is None or getattr(shell, "kernel", None) is None:
            return None
        from IPython.display import display
    except Exception:  # noqa: BLE001 - an IPython without the display machinery
        return None
    return display


def stderr_is_terminal() -> bool:
    return _isatty(sys.stderr)


# ============================================================================ a library call's meter
class ScanProgress:
    """The meter of one library scan (``what``: the call, e.g. ``colcep.match``) over ``total``
    rows (None: unknown). ``update(done, matches)`` is cheap when nothing is due (a clock read),
    so it may be called between every kernel call; it draws at most every ``REDRAW_SECONDS``
    (a log: every ``LOG_SECONDS``). ``finish`` draws the final line (or, with ``error``, where
    the scan stopped) and ends the meter: on a terminal the redrawn line is replaced by it.
    ``delay``: nothing is drawn before the scan has run this long, and a scan that ends sooner
    draws nothing at all (interactive defaults stay quiet for quick calls).

    Drawn on ``display`` (a notebook's IPython ``display``: one output, updated in place through
    its display handle) when given and it hands back a handle, else through a :class:`Reporter`
    on ``stream`` (default stderr; ``tty`` overrides whether the line is redrawn in place; a
    notebook without display handles redraws it)."""

    def __init__(self, what: str, total: int | None = None, *, stream=None, tty: bool | None = None,
                 display: Callable[..., Any] | None = None, log_interval: float | None = None,
                 delay: float = 0.0):
        self.what, self.total = what, None if total is None else int(total)
        self.t0 = time.perf_counter()
        self.done, self.matches = 0, 0
        self.draws = 0  # how many times the meter was drawn (updates and the final line)
        self.finished = False
        self.delay = float(delay)
        self._log_interval = LOG_SECONDS if log_interval is None else float(log_interval)
        self._stream, self._tty, self._display = stream, tty, display
        self._handle = None
        self._rep: Reporter | None = None
        redrawn = display is not None or (_isatty(self._out()) if tty is None else tty)
        self._interval = REDRAW_SECONDS if redrawn else self._log_interval
        # the clock before which an update does not draw: a redrawn line starts at once (after the
        # delay), a log's first line comes after an interval
        self._next = self.t0 + max(self.delay, 0.0 if redrawn else self._interval)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def update(self, done: int, matches: int, force: bool = False, detail: str = "") -> None:
        """Rows done and matches found so far; drawn when due (``force``: now). ``detail``
        follows in parentheses (e.g. a Spark job's tasks)."""
        self.done, self.matches = done, matches
        if self.finished:
            return
        now = time.perf_counter()
        if not force and now < self._next:
            return
        self._next = now + self._interval
        text = f"{self.what}: {scan_meter_text(self.done, self.total, self.seconds, self.matches)}"
        self._draw(text + (f" ({detail})" if detail else ""), final=False)

    def finish(self, done: int | None = None, matches: int | None = None, error: BaseException | None = None,
               stopped: str | None = None) -> None:
        """The scan ended (``error``: it raised that; ``stopped``: it ended, in these words,
        before all its rows): the final line, once (none when the scan ended within ``delay``
        without drawing)."""
        if self.finished:
            return
        if done is not None:
            self.done = done
        if matches is not None:
            self.matches = matches
        if self.draws == 0 and self.seconds < self.delay:
            self.finished = True
            return
        if error is None and stopped is None:
            text = f"{self.what}: {scan_done_text(self.done, self.seconds, self.matches)}"
        else:
            why = stopped if error is None else "interrupted" if isinstance(error, KeyboardInterrupt) \
                else f"stopped by {type(error).__name__}"
            text = f"{self.what}: {scan_stopped_text(self.done, self.total, self.seconds, self.matches, why)}"
        self._draw(text, final=True)
        self.finished = True

    def _out(self):
        return self._stream if self._stream is not None else sys.stderr

    def _bundle(self, text: str) -> dict[str, str]:
        bar = ""
        if self.total:
            bar = f'<progress value="{min(self.done, self.total)}" max="{self.total}" ' \
                  'style="width:16em;vertical-align:middle"></progress> '
        return {"text/plain": text, "text/html": f'<div style="font-family:monospace">{bar}{html.escape(text)}</div>'}

    def _draw(self, text: str, final: bool) -> None:
        try:
            if self._handle is None and self._rep is None:  # the first draw makes the output
                if self._display is not None:
                    try:
                        self._handle = self._display(self._bundle(text), raw=True, display_id=True)
                    except Exception:  # noqa: BLE001 - no display handles: redraw a line instead
                        self._handle = None
                    if self._handle is not None:
                        self.draws += 1
                        return
                self._rep = Reporter(stream=self._stream, tty=True if self._display is not None else self._tty,
                                     log_interval=self._log_interval, indent="")
                self._rep.t0 = self.t0  # its time stamps count from the scan's start
            if self._handle is not None:
                self._handle.update(self._bundle(text), raw=True)
            elif final:
                self._rep.step(text)
            else:
                self._rep.meter(text, force=True)
            self.draws += 1
        except Exception:  # noqa: BLE001 - a meter that cannot draw (stream closed) never fails the scan
            self.finished = True


#: Under ``progress=None`` (interactive sessions) a scan shows its meter once it has run this long.
QUIET_SECONDS = 1.0


def scan_progress(progress: Any, what: str, total: int | None = None) -> ScanProgress | None:
    """The meter a ``progress=`` argument asks for: False, none; True, one (with its final line
    however short the scan); None (the default), one when stderr is a terminal or this is a
    notebook's kernel, shown once the scan has run ``QUIET_SECONDS``. A notebook draws on its
    display (an output updated in place), anything else on stderr."""
    if not progress_wanted(progress):
        return None
    return ScanProgress(what, total, display=notebook_display(), delay=QUIET_SECONDS if progress is None else 0.0)


def progress_wanted(progress: Any) -> bool:
    """Whether a ``progress=`` argument turns a meter on: True, False, or None: on when stderr
    is a terminal or this is a notebook's kernel."""
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None (on when interactive), got {progress!r}")
    if progress is None:
        return notebook_display() is not None or stderr_is_terminal()
    return progress


@contextlib.contextmanager
def scanning(meter: ScanProgress | None, final: Callable[[], tuple[int, int]]) -> Iterator[None]:
    """Run a scan under ``meter`` (None: none): whatever ends the block (its end, an error,
    Ctrl-C), the meter's line is finished; ``final()`` gives the rows and matches at the end."""
    if meter is None:
        yield
        return
    try:
        yield
    except BaseException as exc:
        meter.finish(error=exc)
        raise
    meter.finish(*final())
