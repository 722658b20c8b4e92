"""Where colcep's compiled kernels are cached, and the lock around compiling them.

Numba's own cache locators key the cache folder by the folder that holds the source file
(``<cache>/kernels_<sha1 of that folder's path>``). On a cluster that path holds the
application id: colcep shipped in a zip (``--py-files``, ``SparkContext.addPyFile``) or in a
packed environment (``--archives``) lives under the executor's per-application folder, so every
application compiled the kernels again, for minutes, on every executor.

colcep's kernels are cached by the locator below instead, in one folder per machine and user
that does not depend on where colcep's code lives (installed, editable, zip or archive):

- ``$COLCEP_CACHE_DIR`` when set;
- else ``$NUMBA_CACHE_DIR/colcep-<version>-py<XY>`` when the user set ``NUMBA_CACHE_DIR``;
- else ``$XDG_CACHE_HOME`` (default ``~/.cache``) ``/colcep/numba-<version>-py<XY>``;
- else, when that cannot be written (no ``HOME``, a read-only home), a folder in the temp dir
  (``$TMPDIR/colcep-<uid>/numba-<version>-py<XY>``).

A cached kernel is valid while its source is: the stamp is a hash of the kernel's module and
of the kernel modules it imports (``from .buffer import ...``), not a file time or a path. Numba
itself only checks the function's own file, so a change in a helper module went unseen. The
engine's compiled step (:mod:`colcep.engine.stepgen`) is cached in the same folder (``step/``).

:func:`compile_lock` is the cross-process lock (``fcntl.flock`` on a file in that folder)
that Spark workers and drivers take around loading / compiling the kernels, so that one
process of a machine compiles and the others wait, then load.

Where this machine's cache has no build of a kernel, the build colcep ships compiled for any CPU
of the platform is loaded (:mod:`colcep.engine.shipped`, installed beside this module's locator).
Nothing here changes how Numba caches any code other than colcep's kernels. The kernels do not
import this module (they import nothing from colcep): ``colcep/__init__.py`` calls :func:`install`
before anything imports a kernel module.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
import threading
from typing import Any, Callable, Iterator

from colcep.version import __version__

__all__ = ["cache_dir", "candidates", "compile_lock", "install", "kernel_compiles", "kernels_cold", "notice_compile",
           "KERNELS"]

KERNELS = "colcep.kernels"
_DIR: str | None = None
_STAMPS: dict[str, bytes] = {}


def _tag() -> str:
    return f"{__version__}-py{sys.version_info[0]}{sys.version_info[1]}"


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def candidates(environ: "os._Environ[str] | dict[str, str] | None" = None) -> list[str]:
    """The folders :func:`cache_dir` tries, in order, for these environment variables."""
    env = os.environ if environ is None else environ
    out = []
    if env.get("COLCEP_CACHE_DIR"):
        out.append(env["COLCEP_CACHE_DIR"])
    elif env.get("NUMBA_CACHE_DIR"):
        out.append(os.path.join(env["NUMBA_CACHE_DIR"], f"colcep-{_tag()}"))
    else:
        base = env.get("XDG_CACHE_HOME") or (os.path.join(env["HOME"], ".cache") if env.get("HOME") else None)
        if base is None and environ is None:
            home = os.path.expanduser("~")
            base = os.path.join(home, ".cache") if not home.startswith("~") else None
        if base:
            out.append(os.path.join(base, "colcep", f"numba-{_tag()}"))
    uid = os.getuid() if hasattr(os, "getuid") else 0
    out.append(os.path.join(tempfile.gettempdir(), f"colcep-{uid}", f"numba-{_tag()}"))
    return [os.path.abspath(c) for c in out]


def cache_dir() -> str:
    """The folder colcep's compiled kernels are cached in on this machine (created if needed):
    the first of :func:`candidates` that can be written. Fixed for the process's life."""
    global _DIR
    if _DIR is None:
        tried = candidates()
        _DIR = next((c for c in tried if _writable(c)), tried[-1])
    return _DIR


# ---------------------------------------------------------------------------- the source stamp
_IMPORT = re.compile(r"^\s*from\s+\.(\w*)\s+import\s+(.+)$", re.MULTILINE)


def _read(module_file: str, loader) -> bytes:
    """A source file's bytes, through the loader when it is in a zip."""
    try:
        with open(module_file, "rb") as fh:
            return fh.read()
    except OSError:
        if loader is not None and hasattr(loader, "get_data"):
            return loader.get_data(module_file)
        raise


def _stamp(module_file: str, loader) -> bytes:
    """sha256 of a kernel module and of the kernel modules it imports, transitively."""
    if module_file in _STAMPS:
        return _STAMPS[module_file]
    folder = os.path.dirname(module_file)
    seen: dict[str, bytes] = {}
    todo = [os.path.basename(module_file)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            src = _read(os.path.join(folder, name), loader)
        except OSError:
            continue
        seen[name] = src
        for mod, names in _IMPORT.findall(src.decode("utf-8", "replace")):
            if mod:
                todo.append(mod + ".py")
            else:  # from . import a, b
                todo += [n.strip().split(" ")[0] + ".py" for n in names.strip("() \\").split(",") if n.strip()]
    h = hashlib.sha256()
    for name in sorted(seen):
        h.update(name.encode() + b"\0" + seen[name] + b"\0")
    _STAMPS[module_file] = h.digest()
    return _STAMPS[module_file]


# ---------------------------------------------------------------------------- the Numba locator
def _locator_class():
    from numba.core import caching

    class ColcepCacheLocator(caching._CacheLocator):
        """Caches colcep's kernels in :func:`cache_dir`, whatever the path of their source."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            mod = sys.modules.get(py_func.__module__)
            self._loader = getattr(mod, "__loader__", None)
            self._cache_path = os.path.join(cache_dir(), "kernels")

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            return _stamp(self._py_file, self._loader)

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            if not str(getattr(py_func, "__module__", "")).startswith(KERNELS + "."):
                return None
            self = cls(py_func, py_file)
            try:
                self.ensure_cache_path()
                self.get_source_stamp()
            except OSError:
                return None  # Numba's own locators then decide
            return self

    return ColcepCacheLocator


class _NoColorShell:
    """Numba's ``ColorShell``, doing nothing (see :func:`keep_streams`)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


def keep_streams() -> None:
    """Where colorama is installed, Numba formats the errors it raises and catches while it
    compiles in colorama's ``init()`` / ``deinit()``, which set ``sys.stdout`` and ``sys.stderr``
    back to the streams of colorama's import: a compile undid the caller's redirection (a
    notebook cell's, ``contextlib.redirect_stdout``), from any thread ("auto"'s background
    compile too). Numba's colour shell is made a no-op (its messages are uncoloured by default)."""
    from numba.core import errors

    if getattr(errors, "ColorShell", _NoColorShell) is not _NoColorShell:
        errors.ColorShell = _NoColorShell


def install() -> bool:
    """Put colcep's locator first in Numba's list (before ``colcep.kernels`` modules define
    their ``@njit(cache=True)`` functions: ``colcep/__init__.py`` calls this first), and keep
    Numba's compiles off the caller's streams (:func:`keep_streams`).
    Returns False when this Numba has no such list (then Numba's own locators apply)."""
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover
        return False
    keep_streams()
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if not isinstance(classes, list):  # pragma: no cover - a Numba we do not know
        return False
    if not any(getattr(c, "__name__", "") == "ColcepCacheLocator" for c in classes):
        classes.insert(0, _locator_class())
    return True


# ---------------------------------------------------------------------------- lock and counts
_HELD: dict[str, threading.RLock] = {}  # per lock: this process's hold of its file, one thread at a time
_depth: dict[str, int] = {}  # per lock: how deeply the holding thread has entered it
_NAMES = threading.Lock()


@contextlib.contextmanager
def compile_lock(name: str = "compile") -> Iterator[None]:
    """Hold a machine-wide lock for loading / compiling colcep's kernels (a file lock in
    :func:`cache_dir`, shared by every process of this user that uses that folder). A thread that
    holds it may take it again (a task's warm-up runs a matcher whose compiled step loads under
    it): a second ``flock`` of the file in one process would wait for itself. ``"compile"`` is
    the lock around all of them (Spark's executors); the step's driver and each step also
    compile under a lock of their own (``colcep.engine.steps``), so that two processes compile
    two of them at once, and never one twice."""
    with _NAMES:
        held = _HELD.setdefault(name, threading.RLock())
    with held:
        if _depth.get(name, 0) > 0:
            _depth[name] += 1
            try:
                yield
            finally:
                _depth[name] -= 1
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        path = os.path.join(cache_dir(), f"{name}.lock")
        try:
            fh = open(path, "a")
        except OSError:
            uid = os.getuid() if hasattr(os, "getuid") else 0
            fh = open(os.path.join(tempfile.gettempdir(), f"colcep-numba-{uid}-{name}.lock"), "a")
        with fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            _depth[name] = 1
            try:
                yield
            finally:
                _depth[name] = 0
                fcntl.flock(fh, fcntl.LOCK_UN)


def kernel_compiles() -> int:
    """How many kernel specialisations this process has compiled so far (Numba cache misses of
    colcep's kernels; loads from the disk cache are not counted)."""
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:  # pragma: no cover
        return 0
    n = 0
    for name, mod in list(sys.modules.items()):
        if not name.startswith(KERNELS + ".") or mod is None:
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, Dispatcher) and obj.__module__ == name:
                n += sum(obj.stats.cache_misses.values())
    return n


# ---------------------------------------------------------------------------- the first compile
COMPILE_SECONDS = 90  # wall seconds of the first compile on 2 cores, the step beside the driver (docs/benchmarks.md)
notice: bool = True  # say so on stderr before the first compile (the CLI reports it itself)
#: Why the kernels compile here, in words, for the notice (``colcep.engine.shipped.install`` sets it)
why_compiled: "Callable[[], str | None] | None" = None
_checked = False


def kernels_cold() -> bool | None:
    """Whether the step kernel will compile (no valid on-disk cache on this machine) rather than
    load; None when that cannot be told (a guess: for the notice, and whether the step compiles
    in a child process, ``colcep.engine.steps.compile_beside``)."""
    try:
        from colcep.kernels import nfa

        kernel = getattr(nfa._run_key, "_cache", None)
        load = getattr(getattr(kernel, "_cache_file", None), "_load_index", None)  # numba's on-disk index
        if load is None:
            return None
        shipped = getattr(kernel, "shipped_index", dict)  # colcep's shipped build (colcep.engine.shipped)
        return not (load() or shipped())
    except Exception:  # noqa: BLE001 - a guess, never a failure
        return None


def notice_compile() -> None:
    """Once per process, before the first kernel call: when the kernels are not cached on this
    machine yet, say on stderr that they compile now, once (a minute of silence otherwise looks
    like a hang). ``colcep.engine.kernel_cache.notice = False`` silences it."""
    global _checked
    if _checked:
        return
    _checked = True
    if notice and kernels_cold():
        why = why_compiled() if why_compiled is not None else None
        sys.stderr.write(f"colcep: compiling its kernels for this machine, once (~{COMPILE_SECONDS} s on 2 cores); "
                         f"later runs load them from {cache_dir()}{f' ({why})' if why else ''}\n")
        sys.stderr.flush()
