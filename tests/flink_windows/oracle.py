"""Run Flink 2.3's DataStream windows (triggers, evictors) on a cases file and fill ``expected``.

    python tests/flink_windows/oracle.py IN.json -o OUT.json

Compiles ``WindowOracle.java`` (next to this file) into a build directory outside the repository
(``$TMPDIR/colcep-window-oracle-<hash of the source>``, or ``--build-dir``), then runs it with the
Flink jars on the class path: ``$FLINK_LIB`` if set, else the ``lib`` directory of a pyflink
install (``~/.venvs/flink/lib/python3*/site-packages/pyflink/lib``). One JVM runs every case, one
job after another, on a single MiniCluster. The output is written one case per line. Standard
library only; see README.md for the case format.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "WindowOracle.java")
PYFLINK_LIB_GLOB = "~/.venvs/flink/lib/python3*/site-packages/pyflink/lib"

LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %p %c{1} - %m%n
# a job Flink fails (a refused case) is reported in the output, not as task-failure warnings
logger.flink.name = org.apache.flink
logger.flink.level = ERROR
logger.shaded.name = org.apache.flink.shaded
logger.shaded.level = OFF
"""

JAVA_OPTS = [
    "-Xmx768m", "-XX:+UseSerialGC", "-XX:ActiveProcessorCount=2",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
]


def flink_lib() -> str:
    lib = os.environ.get("FLINK_LIB")
    if lib:
        return lib
    found = sorted(glob.glob(os.path.expanduser(PYFLINK_LIB_GLOB)))
    if not found:
        sys.exit(f"oracle: no Flink jars: set FLINK_LIB or install pyflink ({PYFLINK_LIB_GLOB})")
    return found[-1]


def classpath(lib: str) -> str:
    jars = sorted(glob.glob(os.path.join(lib, "*.jar")))
    if not any(os.path.basename(j).startswith("flink-dist") for j in jars):
        sys.exit(f"oracle: no flink-dist jar in {lib}")
    return os.pathsep.join(jars)


def build(build_dir: str | None, cp: str) -> str:
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + cp.encode()).hexdigest()[:12]
    out = build_dir or os.path.join(tempfile.gettempdir(), f"colcep-window-oracle-{digest}")
    os.makedirs(out, exist_ok=True)
    stamp = os.path.join(out, ".built")
    if not (os.path.exists(stamp) and open(stamp).read() == digest):
        if subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", cp, "-d", out, SOURCE]).returncode:
            sys.exit("oracle: javac failed")
        with open(os.path.join(out, "log4j2.properties"), "w") as f:
            f.write(LOG4J)
        with open(stamp, "w") as f:
            f.write(digest)
    return out


def write_cases(path: str, doc: dict) -> None:
    """``{"cases": [...]}`` with one case a line, as the repository's other corpora."""
    with open(path, "w") as f:
        f.write('{"cases": [\n')
        cases = doc["cases"]
        for i, c in enumerate(cases):
            f.write(json.dumps(c, separators=(", ", ": ")))
            f.write(",\n" if i + 1 < len(cases) else "\n")
        f.write("]}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", help="cases JSON ({'cases': [...]}, 'expected' ignored)")
    ap.add_argument("-o", "--out", required=True, help="where to write the cases with 'expected'")
    ap.add_argument("--build-dir", help="where to compile WindowOracle.java (default: a temp dir)")
    ap.add_argument("--timeout", type=int, default=60, help="seconds a job may run (default 60)")
    args = ap.parse_args(argv)

    cp = classpath(flink_lib())
    out_dir = build(args.build_dir, cp)
    with open(args.cases) as f:
        doc = json.load(f)
    for c in doc["cases"]:
        c.pop("expected", None)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.json")
        dst = os.path.join(tmp, "out.json")
        with open(src, "w") as f:
            json.dump(doc, f)
        cmd = ["java", *JAVA_OPTS, f"-Doracle.timeout={args.timeout}",
               f"-Dlog4j2.configurationFile={os.path.join(out_dir, 'log4j2.properties')}",
               "-cp", out_dir + os.pathsep + cp, "WindowOracle", src, dst]
        t0 = time.time()
        if subprocess.run(cmd).returncode:
            sys.exit("oracle: WindowOracle failed")
        with open(dst) as f:
            result = json.load(f)
    write_cases(args.out, result)
    cases = result["cases"]
    refused = sum("error" in c["expected"] for c in cases)
    timeouts = [c["name"] for c in cases
                if c["expected"].get("error", "").startswith(("Timeout:", "IllegalStateException: oracle:"))]
    print(f"oracle: {len(cases)} cases, {len(cases) - refused} ran, {refused} refused, "
          f"{time.time() - t0:.0f} s -> {args.out}", file=sys.stderr)
    if timeouts:
        print(f"oracle: WARNING: jobs that did not finish (not Flink refusals): {timeouts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
