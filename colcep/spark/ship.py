"""Ship colcep to Spark executors that do not have it installed.

colcep is pure Python, its Numba kernels shipped compiled for any CPU of the platform
(:mod:`colcep.engine.shipped`; compiled on the machine that runs them where they do not match
its Numba and Python), so a zip of the package is all an executor needs beside its dependencies (numpy, numba, pyarrow, lark,
sqlglot; pandas is only needed on the driver). PySpark puts ``.zip``, ``.egg`` and ``.jar``
files given to ``--py-files`` / ``spark.submit.pyFiles`` / ``SparkContext.addPyFile`` on the
executors' ``sys.path``; a wheel (``.whl``) is not put there, although it is a zip.

    python -m colcep.spark.ship dist/              # writes dist/colcep-<version>.zip (make dist)
    spark-submit --py-files dist/colcep-0.1.0.zip job.py

or, from a driver where colcep is installed:

    from colcep.spark import ship
    ship(spark)                              # builds the zip and adds it to the SparkContext

The zip is built from the colcep that is imported here, its entries in a fixed order with
fixed times, so the same code gives the same bytes. The kernels' Numba cache does not depend
on where the zip lands (:mod:`colcep.engine.kernel_cache`): every application and pattern on an executor
machine reuses what the first one compiled.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any

from colcep import kernels
from colcep.engine import shipped
from colcep.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["build_zip", "ship", "executor_report", "zip_name"]

_EPOCH = (1980, 1, 1, 0, 0, 0)
_SHIPPED: dict[str, str] = {}  # Spark application id -> the zip added to it


def _version() -> str:
    return __version__


def zip_name() -> str:
    """The zip's file name: ``colcep-<version>.zip``."""
    return f"colcep-{_version()}.zip"


def _package_files() -> list[tuple[str, str]]:
    """(path on disk, name in the zip) of every source file of colcep, its subpackages and
    colcep.kernels (which a source tree keeps in its own top-level folder), and the kernels
    compiled for any CPU (``colcep.engine.shipped``) for this Numba, Python and platform."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # colcep/, this file is colcep/spark/ship.py
    out = []
    for folder, arc in ((top, "colcep"), (list(kernels.__path__)[0], "colcep/kernels")):
        if not os.path.isdir(folder):
            raise RuntimeError(f"colcep is imported from {folder!r}, not from a folder; build the zip where colcep "
                               "is installed (pip install colcep, or the source tree)")
        for sub, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and os.path.isfile(os.path.join(sub, d, "__init__.py"))
                             and not (sub == top and d == "kernels"))  # an installed colcep/kernels: walked on its own
            rel = os.path.relpath(sub, folder)
            for name in sorted(files):
                if name.endswith(".py") or name == "py.typed":
                    out.append((os.path.join(sub, name), "/".join(p for p in (arc, rel, name) if p != ".")))
    build = os.path.join(shipped.root(), shipped.TAG)  # the kernels compiled for any CPU, for this Numba and Python
    if os.path.isdir(build):
        out += [(os.path.join(build, name), f"colcep/prebuilt/{shipped.TAG}/{name}") for name in sorted(os.listdir(build))]
    return out


def build_zip(dest: str | os.PathLike | None = None) -> str:
    """Write ``colcep-<version>.zip`` (the colcep package, kernels included) into the folder
    ``dest`` (default: a new temporary folder), or to ``dest`` itself when it ends in ``.zip``;
    returns its path. The same sources always give the same bytes."""
    if dest is None:
        dest = tempfile.mkdtemp(prefix="colcep-ship-")
    dest = os.fspath(dest)
    path = dest if dest.endswith(".zip") else os.path.join(dest, zip_name())
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for src, arc in _package_files():
            info = zipfile.ZipInfo(arc, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with open(src, "rb") as fh:
                zf.writestr(info, fh.read())
    os.replace(tmp, path)
    return path


def ship(spark: "SparkSession", path: str | os.PathLike | None = None) -> str:
    """Make colcep importable on the executors of ``spark``: build the zip (or use ``path``, a
    zip built by :func:`build_zip` / ``make dist``) and add it with ``SparkContext.addPyFile``.
    Call it before the first job that needs colcep (``colcep.spark.match`` ...). Returns the
    zip's path; calling it again for the same application does nothing."""
    sc = spark.sparkContext
    app = sc.applicationId
    if app in _SHIPPED:
        return _SHIPPED[app]
    zp = os.fspath(path) if path is not None else build_zip()
    if not zp.endswith(".zip") or not os.path.isfile(zp):
        raise ValueError(f"ship() needs a .zip built by colcep.spark.ship.build_zip (or make dist), got {zp!r}")
    sc.addPyFile(zp)
    _SHIPPED[app] = zp
    return zp


def executor_report(spark: "SparkSession", tasks: int | None = None) -> list[dict[str, Any]]:
    """Where the executors' Python workers import colcep from, and their colcep, numba and
    Python versions and kernel cache folder: one small job of ``tasks`` tasks (default: the
    session's default parallelism). It also runs before :func:`ship`: an executor that cannot
    import colcep reports ``error``."""

    def report(_: Any) -> Any:  # nested, so that it is pickled by value: executors need no colcep to run it
        import platform
        import socket
        import os as _os
        import sys as _sys

        info: dict[str, Any] = {"host": socket.gethostname(), "python": platform.python_version(),
                                "executable": _sys.executable}
        try:
            import colcep
            import colcep.engine.kernel_cache
            import numba

            import colcep.engine.shipped

            info.update(colcep=_os.path.abspath(colcep.__file__), version=colcep.__version__, numba=numba.__version__,
                        cache_dir=colcep.engine.kernel_cache.cache_dir(), shipped=colcep.engine.shipped.folder())
        except ImportError as exc:
            info["error"] = repr(exc)
        return [info]

    sc = spark.sparkContext
    n = int(tasks or sc.defaultParallelism)
    return sc.parallelize(range(n), n).mapPartitions(report).collect()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m colcep.spark.ship",
                                 description="Build colcep-<version>.zip for spark-submit --py-files.")
    ap.add_argument("dest", nargs="?", default="dist", help="a folder (default dist/) or a path ending in .zip")
    a = ap.parse_args(argv)
    path = build_zip(a.dest)
    print(path)
    print(f"ship it with: spark-submit --py-files {path} ...  (or colcep.spark.ship(spark, {path!r}))",
          file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
