"""Running the cases of ``tests/data/sql_flink.json`` (queries with the rows Flink 2.3 SQL gave,
see ``tests/sqlgen.py``) through colcep and comparing the rows, in-process or on Spark."""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

CORPUS = Path(__file__).parent / "data" / "sql_flink.json"
FINAL_WATERMARK = "+292278994-08-17 07:12:55.807"   # Flink's final watermark, Long.MAX_VALUE ms (flinksql_oracle.py)
_TYPES = {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string(), "DOUBLE": pa.float64(),
          "TIMESTAMP(3)": pa.timestamp("ms")}


def load() -> list[dict]:
    return json.loads(CORPUS.read_text())


def table(case: dict) -> pa.Table:
    """The case's rows as an Arrow table typed as the oracle's DDL types them."""
    cols = {}
    for i, (name, ty) in enumerate(case["schema"].items()):
        vals = [r[i] if isinstance(r, list) else r.get(name) for r in case["rows"]]
        if ty.startswith("TIMESTAMP"):
            vals = [dt.datetime.fromisoformat(v) if v is not None else None for v in vals]
        cols[name] = pa.array(vals, _TYPES[ty])
    return pa.table(cols)


def _norm(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return round(v, 9) if v != int(v) else int(v)
    return v


def normalised(rows: list[dict]) -> list[tuple]:
    """Rows as sorted tuples of comparable values (timestamps as Flink prints them, floats to 9
    places, integral floats as ints: Flink's column types are not compared, the values are)."""
    return sorted((tuple(_norm(v) for v in r.values()) for r in rows), key=repr)


def flink_error(case: dict) -> str | None:
    """The message of the exception Flink raised for the case, without the Java stack."""
    err = case.get("error")
    if err is None:
        return None
    msgs = re.findall(r"(?:Exception|Error): (.+)", err)    # an oracle output: the Java stack
    return (msgs[-1] if msgs else err.splitlines()[0]).strip()


# Flink's reason for refusing a query or failing its job -> the reason colcep's SqlError must give
REASONS = [
    (r"Optional pattern cannot be preceded by greedy pattern", r"an optional (stage|variable) cannot be preceded by a "
                                                               r"greedy"),
    (r"Greedy quantifiers are not allowed as the last element", r"greedy quantifiers are not allowed as the last"),
    (r"The from should be a positive number greater than 0", r"a quantifier without a lower bound"),
    (r"Reluctant optional variables are not supported", r"the reluctant optional quantifier \?\? is not supported"),
    (r"Could not skip to first element of a match", r"the target is the first row of a match"),
    (r"Could not skip to (\w+)\. No such element", r"a match has no row of {0}"),
    (r"Flink does not support physical offsets within partition", r"physical offsets within the partition"),
    (r"All rows per match mode is not supported", r"Flink SQL runs only ONE ROW PER MATCH"),
    (r"No match found for function signature MATCH_NUMBER", r"MATCH_NUMBER\(\) is unsupported"),
    (r"Unsupported call: CLASSIFIER", r"CLASSIFIER\(\) is unsupported"),
    (r"Cannot use PREV/NEXT in MEASURE", r"PREV / NEXT cannot be used in MEASURES"),
    (r"Unsupported call: RUNNING", r"RUNNING is unsupported"),
    (r"Unknown field '\*'", r"unknown field '\*'"),
    (r"CEP doesn't support (branching|PERMUTE) patterns", r"alternation and PERMUTE"),
    (r"Group patterns are not supported", r"group patterns are not supported"),
    (r'Encountered "MILLISECOND"', r"WITHIN takes SECOND, MINUTE, HOUR or DAY"),
    (r'Encountered "(\w+)"', r"'{0}' is a reserved word in Flink SQL"),
    (r"The cast from TIMESTAMP type to NUMERIC type is not allowed", r"unsupported function CAST\(\)"),
]


def reason_mismatch(flink: str, colcep: str) -> str | None:
    """None when colcep's SqlError gives the reason Flink gave (REASONS), else what differs."""
    for theirs, ours in REASONS:
        m = re.search(theirs, flink)
        if m:
            want = ours.format(*m.groups())
            return None if re.search(want, colcep) else f"Flink: {flink!r}; colcep: {colcep!r} (want /{want}/)"
    return f"no reason of colcep's is mapped to Flink's {flink!r} (tests/flinksql.py REASONS)"


def rows_of(t: pa.Table) -> list[dict]:
    """``t.to_pylist()``, but the final watermark (the largest timestamp: a match Flink emits at
    the end of input has it as MATCH_ROWTIME, colcep/lang/sql/rowtime.py) as the oracle gives it,
    ``FINAL_WATERMARK`` (Python's datetime cannot hold it)."""
    cols = {}
    for name in t.column_names:
        c = t.column(name)
        if pa.types.is_timestamp(c.type):
            ints = c.cast(pa.int64()).to_pylist()
            cols[name] = [FINAL_WATERMARK if v == 2 ** 63 - 1 else None if v is None else pa.scalar(v, c.type).as_py()
                          for v in ints]
        else:
            cols[name] = c.to_pylist()
    return [dict(zip(cols, vals)) for vals in zip(*cols.values())] if cols else []


def colcep_rows(case: dict, spark: Any = None) -> list[dict]:
    import colcep
    t = table(case)
    if spark is None:
        return rows_of(colcep.sql(case["sql"], semantics="flink", t=t))
    df = spark.createDataFrame(t)      # from Arrow: local_session's two partitions
    return rows_of(colcep.sql(case["sql"], semantics="flink", t=df).toArrow())


def outcome(case: dict, spark: Any = None) -> tuple:
    """("rows", the normalised rows) or ("SqlError", its message) of colcep on the case, in
    process or on Spark (where a failure found while matching is the job's error; which match
    it names depends on the order partitions run in, so the message is kept without it)."""
    from colcep.lang.sql import SqlError
    try:
        return "rows", normalised(colcep_rows(case, spark))
    except SqlError as exc:
        return "SqlError", re.sub(r" \(the match [^)]*\)", "", str(exc))
    except Exception as exc:  # noqa: BLE001 - Spark's error for a task's SqlError
        m = re.search(r"SqlError: (.+)", str(exc)) if spark is not None else None
        if m is None:
            raise
        return "SqlError", re.sub(r" \(the match [^)]*\)", "", m.group(1).strip())


def check(case: dict, spark: Any = None) -> str | None:
    """None when colcep gives the case's Flink result (rows, or a SqlError where Flink failed),
    else what differs."""
    try:
        kind, got = outcome(case, spark)
    except Exception as exc:  # noqa: BLE001 - reported as a mismatch
        return f"colcep raised {type(exc).__name__}: {exc}, Flink gave {len(case.get('expected') or [])} rows"
    if kind == "SqlError":
        if flink_error(case) is not None:
            return reason_mismatch(flink_error(case), got)
        return f"colcep raised SqlError({got}), Flink gave {len(case['expected'])} rows"
    return _compare(case, got)


def compare(case: dict, got: list[dict]) -> str | None:
    """None when the rows colcep gave are the rows Flink gave (as multisets), else what differs."""
    return _compare(case, normalised(got))


def _compare(case: dict, g: list[tuple]) -> str | None:
    want_err = flink_error(case)
    if want_err is not None:
        return f"colcep gave {len(g)} rows, Flink failed: {want_err}"
    w = normalised(case["expected"])
    if g != w:
        return f"rows differ:\n  colcep {g}\n  flink  {w}"
    return None


def _reference(case: dict, held: str) -> tuple:
    """The prepared query and the reference NFA's matches (``tests/reference.py``) on its Pattern,
    held matches released as colcep does (``held="colcep"``) or in the order of Flink's heap
    (``"flink"``): each match maps a stage to its rows."""
    from colcep.engine.compiler import compile_pattern
    from colcep.lang.sql.run import prepare
    from colcep.pattern import parse_duration
    from reference import run_reference
    prep = prepare(case["sql"], "flink", {"t": table(case)})
    events = prep.work.to_pylist()
    seen: dict = {}
    for e in events:
        k = e.get(prep.key) if prep.key else None
        e["__history"] = list(seen.get(k, []))
        seen.setdefault(k, []).append(e)
        e["__ts"] = int(e[prep.q.time].timestamp() * 1000)
    window = 0 if prep.pattern.window is None else round(parse_duration(prep.pattern.window) * 1000)
    return prep, run_reference(compile_pattern(prep.pattern), events, prep.key, window, held=held)[0]


def reference_matches(case: dict, held: str) -> list:
    """The case's matches by the plain-Python reference NFA (:func:`_reference`), each as sorted
    (stage, row) pairs."""
    matches = _reference(case, held)[1]
    return sorted(sorted((s, r) for s, rows in m.items() for r in rows) for m in matches)


def reference_rows(case: dict, held: str) -> list[dict]:
    """The case's output rows: colcep's MEASURES over the reference NFA's matches
    (:func:`_reference`), without the ``MATCH_ROWTIME()`` measures (the reference does not know
    when Flink's operator emits a match)."""
    prep, matches = _reference(case, held)
    cols: dict = {"match_id": [], "stage": [], "row": []}
    for i, m in enumerate(matches):
        for stage, rows in m.items():
            for r in rows:
                cols["match_id"].append(i)
                cols["stage"].append(stage)
                cols["row"].append(r)
    out = pa.table({"match_id": pa.array(cols["match_id"], pa.int64()), "stage": pa.array(cols["stage"], pa.string()),
                    "row": pa.array(cols["row"], pa.int64())})
    return without_rowtime(case, prep.measures.evaluate(out, prep.work, prep.key_codes, prep.order_idx).to_pylist())


def without_rowtime(case: dict, rows: list[dict]) -> list[dict]:
    """``rows`` without the query's ``MATCH_ROWTIME()`` measures."""
    names = set(re.findall(r"MATCH_ROWTIME\(\) AS (\w+)", case["sql"].split("DEFINE")[0]))
    return [{k: v for k, v in r.items() if k not in names} for r in rows]


def engine_matches(case: dict) -> list:
    """The case's matches by colcep's engine, as :func:`reference_matches` gives them."""
    from colcep.engine.matcher import match
    from colcep.lang.sql.run import prepare
    prep = prepare(case["sql"], "flink", {"t": table(case)})
    out = match(prep.work, prep.pattern, key=prep.key, time=prep.q.time, columns=[]).to_pydict()
    by: dict = {}
    for m, s, r in zip(out["match_id"], out["stage"], out["row"]):
        by.setdefault(m, []).append((s, r))
    return sorted(sorted(v) for v in by.values())


def tie_sensitive(case: dict) -> bool:
    """Whether Flink's result hangs on the order its heap gives held matches that share a start
    event (SEMANTICS.md point 15, colcep's one deliberate divergence): the reference releasing
    them as Flink's heap does and as colcep does disagree."""
    return reference_matches(case, "flink") != reference_matches(case, "colcep")


if __name__ == "__main__":
    import sys
    from collections import Counter
    cases = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else load()
    bad = Counter()
    for c in cases:
        r = check(c)
        if r is not None:
            bad[r.split(":")[0][:60]] += 1
            print(f"== {c['id']}\n{c['sql']}\n{r}\n")
    print(f"{len(cases) - sum(bad.values())}/{len(cases)} agree;", dict(bad))
