"""colcep's kernels shipped compiled: a portable build, loaded where this machine has none of its own.

Without it, a fresh machine's first scan compiled the kernels for a minute and a half (2 cores)
before it matched anything, and on Spark every fresh executor machine did the same. colcep
therefore ships its kernels compiled for the *generic* CPU of the platform
(``NUMBA_CPU_NAME=generic``: the instructions every CPU of the architecture has; SSE2 on x86-64),
in ``colcep/prebuilt/<tag>/`` (:data:`TAG`: Numba's version, the Python, the platform), made by
``make kernels`` (:mod:`colcep.tools.prebuild`). A kernel's compiled code is looked up

1. in this machine's cache (:func:`colcep.engine.kernel_cache.cache_dir`): a build tuned for this
   host, made by a compile or by ``colcep warmup --host-tuned``;
2. in the shipped build, when its folder is this process's tag, its source stamp is the kernel's
   sources' (a hash of their text) and its key is this platform's triple with the generic CPU;
3. else it is compiled for this host, and cached as in 1.

Anything that does not match (another Numba, Python, platform or architecture, kernels edited
since the build) is not loaded: Numba's own index checks the version and the stamp, the key the
triple. A shipped file that cannot be read is a miss with one warning, never a crash. With colcep
imported from a zip (Spark's ``--py-files``) the build is unpacked once per machine into the cache
folder. A wheel carries the build of the machine that made it (package data).
``COLCEP_SHIPPED_KERNELS=0`` (or :data:`use` = False) turns the shipped build off.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import warnings
import zipfile
from typing import Any

__all__ = ["TAG", "folder", "install", "kernel_cache", "loads", "root", "use", "why_not"]

#: Load shipped kernels (``colcep warmup --host-tuned`` and ``make kernels`` turn it off)
use: bool = os.environ.get("COLCEP_SHIPPED_KERNELS", "1") != "0"
GENERIC = ("generic", "")  # the CPU name and features of a portable build (NUMBA_CPU_NAME=generic)
_FOLDER: list = []
_LOADS = [0]
_WARNED: list = []


def _tag() -> str:
    import numba

    return f"numba{numba.__version__}-{sys.implementation.cache_tag}-{sysconfig.get_platform()}"


TAG = _tag()  # e.g. numba0.68.1-cpython-311-linux-x86_64


def root() -> str:
    """The folder that holds the shipped builds (``colcep/prebuilt``), one sub-folder per tag."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "prebuilt")


def folder() -> str | None:
    """This process's shipped build (``<root>/<TAG>``, unpacked into the cache folder when colcep
    is imported from a zip), or None when colcep ships none for this tag or :data:`use` is off."""
    if not use:
        return None
    if not _FOLDER:
        _FOLDER.append(_find())
    return _FOLDER[0]


def _find() -> str | None:
    here = os.path.join(root(), TAG)
    if os.path.isdir(here):
        return here
    loader = getattr(sys.modules.get("colcep"), "__loader__", None)
    archive = getattr(loader, "archive", None)  # a zipimporter's zip
    if archive is None or not os.path.isfile(archive):
        return None
    try:
        return _unpack(archive)
    except (OSError, zipfile.BadZipFile) as e:
        _warn(f"colcep: its shipped kernels could not be unpacked from {archive} ({e}); compiling instead")
        return None


def _unpack(archive: str) -> str | None:
    """The zip's build for :data:`TAG`, unpacked once per machine and zip content into the cache
    folder (under a lock, renamed into place whole)."""
    from colcep.engine import kernel_cache as cache

    prefix = f"colcep/prebuilt/{TAG}/"
    with zipfile.ZipFile(archive) as z:
        members = [i for i in z.infolist() if i.filename.startswith(prefix) and not i.is_dir()
                   and "/" not in i.filename[len(prefix):] and ".." not in i.filename[len(prefix):]]  # (flat files only)
        if not members:
            return None
        crc = 0
        for i in members:
            crc = (crc * 1000003 + i.CRC) & 0xFFFFFFFFFFFF
        dest = os.path.join(cache.cache_dir(), "prebuilt", f"{TAG}-{crc:012x}")
        if os.path.isdir(dest):
            return dest
        with cache.compile_lock("prebuilt"):
            if not os.path.isdir(dest):
                tmp = f"{dest}.tmp{os.getpid()}"
                os.makedirs(tmp, exist_ok=True)
                for i in members:
                    with z.open(i) as src, open(os.path.join(tmp, i.filename[len(prefix):]), "wb") as out:
                        out.write(src.read())
                os.rename(tmp, dest)
    return dest


def _warn(message: str) -> None:
    if not _WARNED:
        _WARNED.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def why_not() -> str | None:
    """Why this process compiles rather than load the shipped kernels, in words (None when
    colcep ships a build for it, or none at all)."""
    if not use:
        return "COLCEP_SHIPPED_KERNELS=0"
    if folder() is not None:
        return None
    try:
        tags = sorted(d for d in os.listdir(root()) if os.path.isdir(os.path.join(root(), d)))
    except OSError:
        return None
    if not tags:
        return None
    return f"colcep ships them compiled for {', '.join(tags)}, not for this {TAG}"


def loads() -> int:
    """How many kernel specialisations this process loaded from the shipped build."""
    return _LOADS[0]


def kernel_cache(py_func: Any, shipped: str | None = None) -> Any:
    """Numba's per-function cache for a colcep kernel, with the shipped build (``shipped``, default
    :func:`folder`) as its second place (:func:`install` makes every ``colcep.kernels`` function's
    ``cache=True`` use it)."""
    return _cache_class()(py_func, shipped)


def install() -> None:
    """Make a ``colcep.kernels`` function's ``cache=True`` this module's cache (this machine's,
    then the shipped build); every other function's stays Numba's. ``colcep/__init__.py`` calls
    it, after ``kernel_cache.install``, before any kernel module is imported."""
    from numba.core.dispatcher import Dispatcher

    from colcep.engine import kernel_cache as machine

    machine.why_compiled = why_not  # (the compile notice says why nothing shipped applies)
    KERNELS = machine.KERNELS

    numba_own = Dispatcher.enable_caching
    if getattr(numba_own, "colcep", False):
        return

    def enable_caching(self: Any) -> None:
        if str(getattr(self.py_func, "__module__", "")).startswith(KERNELS + "."):
            self._cache = kernel_cache(self.py_func)
        else:
            numba_own(self)

    enable_caching.colcep = True  # type: ignore[attr-defined]
    Dispatcher.enable_caching = enable_caching


_CLASS: list = []


def _cache_class() -> type:
    if _CLASS:
        return _CLASS[0]
    from numba.core.caching import FunctionCache, IndexDataCacheFile

    class KernelCache(FunctionCache):
        """This machine's cache first, then the shipped (generic CPU) build, read-only."""

        def __init__(self, py_func: Any, shipped: str | None = None):
            super().__init__(py_func)
            where = shipped if shipped is not None else folder()
            self._shipped = None if where is None else IndexDataCacheFile(
                cache_path=where, filename_base=self._impl.filename_base,
                source_stamp=self._impl.locator.get_source_stamp())

        def shipped_index(self) -> dict:
            """The shipped build's entries for this kernel ({} when none is current)."""
            if self._shipped is None or not use:
                return {}
            try:
                return self._shipped._load_index()
            except Exception:  # noqa: BLE001 - an unreadable index is an empty one
                return {}

        def _load_overload(self, sig: Any, target_context: Any) -> Any:
            data = super()._load_overload(sig, target_context)
            if data is not None or self._shipped is None or not use or not self._enabled:
                return data
            key = self._index_key(sig, target_context.codegen())
            key = (key[0], (key[1][0],) + GENERIC, key[2])  # this platform's triple, the generic CPU
            try:
                data = self._shipped.load(key)
                if data is None:
                    return None
                data = self._impl.rebuild(target_context, data)
            except Exception as e:  # noqa: BLE001 - a damaged file is a miss: compile instead
                _warn(f"colcep: a shipped kernel ({self._shipped._index_name}) could not be loaded ({e!r}); "
                      "compiling it for this machine instead")
                return None
            _LOADS[0] += 1
            return data

    _CLASS.append(KernelCache)
    return KernelCache
