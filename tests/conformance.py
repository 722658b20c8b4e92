"""Conformance cases (``conformance/SCHEMA.md``) replayed through colcep.

A case holds a pattern in Flink's vocabulary, events, and the matches the real Flink CEP
produced. ``case_pattern`` reads its pattern with ``Pattern.from_json``, ``run_case`` runs it through an
engine and compares as the case says (``order``, ``compare_by``, ``expected_lists``,
``expected_timeouts``). As a script it checks any files or folders of cases:

    python tests/conformance.py conformance                      # the colcep engine
    python tests/conformance.py --engine reference PATH...         # the plain-Python reference
    COLCEP_STEP_JIT=0 python tests/conformance.py --engine compiled   # the compiled tier, interpreted

printing one line per failing case and a last line ``N passed, M failed``.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa

import colcep as cc
from colcep.engine.matcher import DEFAULT_MAX_PARTIAL_MATCHES

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "conformance"  # the in-repo copy of the corpus (conformance/README.md)

# ----------------------------------------------------------------------------- translation
def case_pattern(case: dict) -> cc.Pattern:
    """The case's pattern as a colcep Pattern: the public reader (``Pattern.from_json``) takes
    the case format's ``pattern`` object as it is."""
    return cc.Pattern.from_json(case["pattern"])


def case_table(case: dict) -> pa.Table:
    events = case["events"]
    fields = []
    for e in events:
        for k in e:
            if k not in fields:
                fields.append(k)
    cols = {}
    for f in fields:
        vals = [e.get(f) for e in events]
        if f == "ts":
            cols[f] = pa.array(vals, pa.int64())
        elif any(isinstance(v, str) for v in vals):
            cols[f] = pa.array(vals, pa.string())
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in vals if v is not None) and f != "price" \
                and f != "volume":
            cols[f] = pa.array(vals, pa.int64())
        else:
            cols[f] = pa.array(vals, pa.float64())
    return pa.table(cols)


# ----------------------------------------------------------------------------- engines
def compiles(case: dict) -> bool:
    """Does the engine compile the case's pattern (random cases may combine what colcep refuses)?"""
    try:
        cc.compile(case_pattern(case))
        return True
    except cc.PatternError:
        return False




def feed(m: cc.Matcher, tbl: pa.Table, sizes) -> pa.Table:
    """``m``'s output for ``tbl`` fed in slices of ``sizes`` rows, then the rest, then ``close``."""
    parts, start = [], 0
    for size in sizes:
        parts.append(m.process(tbl.slice(start, size)))
        start += size
    parts.append(m.process(tbl.slice(start)))
    parts.append(m.close())
    return pa.concat_tables(parts)


def run_table(case: dict, want_timeouts: bool, tier: str = "generic", batch_rows: int | None = None,
              columns=(), max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES) -> pa.Table:
    """The case's output table from a Matcher on ``tier``, fed whole or ``batch_rows`` at a time."""
    table = case_table(case)
    m = cc.Matcher(case_pattern(case), key=case["pattern"].get("key"), time="ts", timeouts=want_timeouts,
                   columns=None if columns is None else list(columns), tier=tier,
                   max_partial_matches=max_partial_matches)
    step = batch_rows or max(1, table.num_rows)
    parts = [m.process(table.slice(i, step)) for i in range(0, table.num_rows, step)]
    parts.append(m.close())
    if tier != "generic" and m.kernel_tier != tier:
        raise AssertionError(f"asked for the {tier} tier, the last kernel call ran on {m.kernel_tier}")
    return pa.concat_tables(parts)


def snapshot_every_boundary(case: dict, timeouts: bool) -> tuple[pa.Table, pa.Table]:
    """(the output fed whole, the output fed a row at a time with a snapshot and a restore after
    every row): the two must be equal."""
    prog = cc.compile(case_pattern(case))
    tbl = case_table(case)
    key = case["pattern"].get("key")
    whole = cc.Matcher(prog, key=key, time="ts", timeouts=timeouts, columns=None)
    expected = pa.concat_tables([whole.process(tbl), whole.close()])
    m = cc.Matcher(prog, key=key, time="ts", timeouts=timeouts, columns=None)
    parts = []
    for i in range(tbl.num_rows):
        parts.append(m.process(tbl.slice(i, 1)))
        m = cc.Matcher.restore(prog, m.snapshot())
    parts.append(m.close())
    return expected, pa.concat_tables(parts)


def engine_colcep(case: dict, want_timeouts: bool, tier: str = "generic",
                  max_partial_matches: int = DEFAULT_MAX_PARTIAL_MATCHES):
    """Run the case through colcep's Matcher; returns (matches, timeouts) as lists of
    {stage: [row positions]} (timeouts: (dict, timestamp))."""
    return rows_to_matches(run_table(case, want_timeouts, tier, max_partial_matches=max_partial_matches),
                            want_timeouts)


def engine_compiled(case: dict, want_timeouts: bool):
    """``engine_colcep`` on the compiled tier (interpreted when ``colcep.engine.codegen.JIT`` is
    False, i.e. ``COLCEP_STEP_JIT=0``: a Numba compile per shape costs ~10-20 s)."""
    return engine_colcep(case, want_timeouts, "compiled")


def tiers_agree(case: dict, timeouts: bool, sizes=(None, 1, 7)) -> pa.Table:
    """The case through the generic and the compiled tier, whole and in batches of each size, and
    restored from a snapshot at every boundary into the compiled tier: the same tables (rows,
    order, match ids, every column) and the same live partial matches after every batch, the
    compiled step running every batch. Returns the whole run."""
    prog = cc.compile(case_pattern(case))
    table = case_table(case)
    key = case["pattern"].get("key")
    whole = None
    for size in sizes:
        step = size or max(1, table.num_rows)
        ms = {t: cc.Matcher(prog, key=key, time="ts", timeouts=timeouts, columns=None, tier=t)
              for t in ("generic", "compiled")}
        outs: dict = {t: [] for t in ms}
        for lo in range(0, table.num_rows, step):
            for t, m in ms.items():
                outs[t].append(m.process(table.slice(lo, step)))
            assert ms["compiled"].kernel_tier == "compiled"
            assert ms["compiled"].live_partial_matches == ms["generic"].live_partial_matches
        for t, m in ms.items():
            outs[t].append(m.close())
        got, want = pa.concat_tables(outs["compiled"]), pa.concat_tables(outs["generic"])
        assert got.equals(want), size
        whole = got if whole is None else whole
        assert got.equals(whole), size
    m = cc.Matcher(prog, key=key, time="ts", timeouts=timeouts, columns=None, tier="compiled")
    parts = []
    for i in range(table.num_rows):
        parts.append(m.process(table.slice(i, 1)))
        m = cc.Matcher.restore(prog, m.snapshot(), tier="compiled")
    parts.append(m.close())
    assert pa.concat_tables(parts).equals(whole)
    return whole


def rows_to_matches(tbl: pa.Table, want_timeouts: bool):
    """An output table as (matches, timeouts): lists of {stage: [rows]} (timeouts: (dict, timestamp))."""
    d = tbl.to_pydict()
    matches: dict = {}
    order: list = []
    tmo: dict = {}
    for i in range(tbl.num_rows):
        mid = d["match_id"][i]
        is_to = want_timeouts and d["timed_out"][i]
        target = tmo if is_to else matches
        if mid not in target:
            target[mid] = ({}, d["timeout_ts"][i] if is_to else None)
            if not is_to:
                order.append(mid)
        target[mid][0].setdefault(d["stage"][i], []).append(d["row"][i])
    return [matches[m][0] for m in order], [v for v in tmo.values()]


def engine_reference(case: dict, want_timeouts: bool):
    from reference import run_reference
    from colcep.engine.compiler import compile_pattern

    prog = compile_pattern(case_pattern(case))
    events = [dict(e, __ts=e["ts"]) for e in case["events"]]
    window = case["pattern"].get("within_ms") or 0
    return run_reference(prog, events, case["pattern"].get("key"), int(window), want_timeouts)


ENGINES = {"colcep": engine_colcep, "compiled": engine_compiled, "reference": engine_reference}


# ----------------------------------------------------------------------------- comparison
def _canon(match: dict, case: dict, stage_order: list[str], by_value: bool, as_list: bool):
    ev = case["events"]

    def ident(pos):
        e = ev[pos]
        return (e["name"], e["price"], e["volume"]) if by_value else e["id"]

    if as_list:
        return tuple(ident(p) for s in stage_order for p in match.get(s, []))
    return tuple(sorted((s, tuple(ident(p) for p in ps)) for s, ps in match.items()))


def _canon_expected(m: dict, case: dict, stage_order: list[str], by_value: bool, as_list: bool):
    ids = {e["id"]: i for i, e in enumerate(case["events"])}
    return _canon({s: [ids[i] for i in v] for s, v in m.items() if v}, case, stage_order, by_value, as_list)


def check_case(case: dict, engine: str = "colcep") -> str | None:
    """None if the engine reproduces Flink's output for the case, else a short diff."""
    want_timeouts = case.get("expected_timeouts") is not None
    try:
        got, got_to = ENGINES[engine](case, want_timeouts)
    except Exception as exc:  # a crash is a failure with its reason
        return f"error: {type(exc).__name__}: {exc}"
    return compare(case, got, got_to)


def compare(case: dict, got: list, got_to: list) -> str | None:
    """None if ``got`` (matches) and ``got_to`` (timeouts), as ``rows_to_matches`` gives them,
    are Flink's output for the case, else a short diff."""
    want_timeouts = case.get("expected_timeouts") is not None
    stage_order = case_pattern(case).stage_names()
    by_value = case.get("compare_by") == "value"
    as_list = case.get("expected") is None
    got_c = [_canon(m, case, stage_order, by_value, as_list) for m in got]
    if as_list:
        exp_c = [tuple((lambda e: (e["name"], e["price"], e["volume"]) if by_value else e["id"])(
            case["events"][[x["id"] for x in case["events"]].index(i)]) for i in lst)
            for lst in case["expected_lists"]]
    else:
        exp_c = [_canon_expected(m, case, stage_order, by_value, False) for m in case["expected"]]
    if case.get("order") == "exact":
        if got_c != exp_c:
            return f"order/content differs: got {got_c} expected {exp_c}"
    elif Counter(got_c) != Counter(exp_c):
        missing = list((Counter(exp_c) - Counter(got_c)).elements())
        extra = list((Counter(got_c) - Counter(exp_c)).elements())
        return f"missing {missing} extra {extra}"
    if want_timeouts:
        exp_to = _expected_timeouts(case)
        with_ts = any(ts is not None for _, ts in exp_to)
        g = Counter((_canon(m, case, stage_order, by_value, False), ts if with_ts else None) for m, ts in got_to)
        e = Counter((_canon_expected(m, case, stage_order, by_value, False), ts) for m, ts in exp_to)
        if g != e:
            return f"timeouts: missing {list((e - g).elements())} extra {list((g - e).elements())}"
    return None


def _expected_timeouts(case: dict):
    out = []
    for t in case["expected_timeouts"]:
        if isinstance(t, dict) and "match" in t:
            out.append((t["match"], t.get("ts")))
        elif isinstance(t, list) and len(t) == 2 and isinstance(t[0], dict):
            out.append((t[0], t[1]))
        else:
            out.append((t, None))
    return out


def load_cases(paths) -> list[dict]:
    cases = []
    for p in paths:
        p = Path(p)
        files = sorted(p.rglob("*.json")) if p.is_dir() else [p]
        for f in files:
            data = json.loads(f.read_text())
            if isinstance(data, dict):
                data = [data]
            cases.extend(c for c in data if isinstance(c, dict) and "pattern" in c and "events" in c)
    return cases


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Replay conformance cases through colcep.")
    ap.add_argument("paths", nargs="*", default=[str(CORPUS)])
    ap.add_argument("--engine", choices=sorted(ENGINES), default="colcep")
    args = ap.parse_args(argv)
    passed = failed = 0
    for case in load_cases(args.paths):
        diff = check_case(case, args.engine)
        if diff is None:
            passed += 1
        else:
            failed += 1
            print(f"{case['id']}: {diff[:300]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
