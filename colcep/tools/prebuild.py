"""``make kernels``: colcep's kernels compiled for the generic CPU into ``colcep/prebuilt/<tag>/``,
the build :mod:`colcep.engine.shipped` loads on machines that have none of their own.

    python -m colcep.tools.prebuild            # build (about as long as `colcep warmup`)
    python -m colcep.tools.prebuild --check    # exit 1 when the build is missing or older than the kernels

The build is ``colcep warmup`` run in fresh processes with ``NUMBA_CPU_NAME=generic`` into an empty
cache folder, then checked (every entry Numba's version, the kernels' current stamp and the generic
CPU) and moved into place as the only tag. Run it after editing a kernel (``tests/test_shipped.py``
fails until then) and before building a wheel or ``make dist``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

from colcep.engine import shipped

__all__ = ["build", "entries", "source_stamps", "stale", "STAMPS"]

STAMPS = "stamps.json"  # beside a build: each kernel module's source stamp when it was made (readable by any Numba)


def source_stamps() -> dict[str, str]:
    """Each kernel module's source stamp now (``kernel_cache``'s hash of it and of the kernel
    modules it imports), in hex."""
    from colcep.engine import kernel_cache as cache
    from colcep.kernels import nfa

    folder = os.path.dirname(nfa.__file__)
    return {name[:-3]: cache._stamp(os.path.join(folder, name), None).hex()
            for name in sorted(os.listdir(folder)) if name.endswith(".py") and name != "__init__.py"}


def entries(where: str) -> dict[str, tuple[str, bytes, list]]:
    """Each index file of a build folder: name -> (Numba version, source stamp, index keys)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(where, "*.nbi"))):
        with open(path, "rb") as f:
            version = pickle.load(f)
            stamp, overloads = pickle.loads(f.read())
        out[os.path.basename(path)] = (version, stamp, list(overloads))
    return out


def stale(where: str | None = None) -> list[str]:
    """What is wrong with the shipped build for this process's tag (``where``, default its folder):
    one line per problem, [] when it is current for every kernel it holds and holds the NFA's."""
    import numba

    from colcep.engine import kernel_cache as cache
    from colcep.kernels import nfa  # noqa: F401 - the kernel modules, for their stamps

    where = where or os.path.join(shipped.root(), shipped.TAG)
    if not os.path.isdir(where):
        return [f"no shipped build for {shipped.TAG} in {shipped.root()}"]
    found = entries(where)
    problems = []
    for name, (version, stamp, keys) in found.items():
        module = name.split(".")[0]
        source = os.path.join(os.path.dirname(nfa.__file__), f"{module}.py")
        if version != numba.__version__:
            problems.append(f"{name}: built by Numba {version}, not {numba.__version__}")
        elif not os.path.isfile(source) or stamp != cache._stamp(source, None):
            problems.append(f"{name}: built from other sources of colcep.kernels.{module}")
        problems += [f"{name}: an entry for the CPU {k[1][1:]!r}, not the generic one" for k in keys
                     if tuple(k[1][1:]) != shipped.GENERIC]
    if not any(n.startswith("nfa.run_batch-") for n in found):
        problems.append("the NFA's driver (nfa.run_batch) is not in the build")
    return problems


def build(report=print) -> str:
    """Compile the kernels for the generic CPU and put them in place as the only shipped build;
    returns its folder."""
    with tempfile.TemporaryDirectory(prefix="colcep-prebuild-") as tmp:
        env = dict(os.environ, NUMBA_CPU_NAME="generic", NUMBA_CPU_FEATURES="", COLCEP_CACHE_DIR=tmp,
                   COLCEP_SHIPPED_KERNELS="0")
        subprocess.run([sys.executable, "-m", "colcep.cli", "warmup"], env=env, check=True)
        built = os.path.join(tmp, "kernels")
        problems = stale(built)
        if problems:
            raise RuntimeError("the generic build is not sound: " + "; ".join(problems[:5]))
        dest = os.path.join(shipped.root(), shipped.TAG)
        for old in glob.glob(os.path.join(shipped.root(), "*", "")):
            shutil.rmtree(old)
        os.makedirs(dest)
        for path in sorted(glob.glob(os.path.join(built, "*.nb[ic]"))):
            shutil.copy2(path, dest)
        with open(os.path.join(dest, STAMPS), "w") as f:
            json.dump(source_stamps(), f, indent=1, sort_keys=True)
    report(f"colcep prebuild: {len(os.listdir(dest))} files in {dest}")
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m colcep.tools.prebuild", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only check that the shipped build is current")
    a = p.parse_args(argv)
    if a.check:
        problems = stale()
        for line in problems:
            print(f"colcep prebuild: {line}")
        return 1 if problems else 0
    build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
