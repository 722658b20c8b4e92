"""The specialised kernel tier (``colcep.engine.specialise``): generated conditions against the generic
ones, whole runs against the generic tier and Flink's expected output, the switch between tiers,
the disk cache, the fallback.

Each pattern run end to end through the specialised tier costs one compile (~60 s of CPU on a
cold cache): the suite compiles one case's module for real (plus the conditions alone of the
test patterns) and runs the other cases' generated modules as Python (``JIT`` False), as
``test_conformance.py`` does for the whole corpus."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pyarrow as pa
import pytest

import colcep as cc
from colcep import cache
from colcep.engine import specialise as sp
from colcep.errors import ColcepWarning, InputError
from colcep.examples import BENCHMARK_PATTERNS, P1, P2
from colcep import expr as E
from colcep.expr import avg, col, count, first, last
from colcep.kernels import conds as kconds
from colcep.kernels.vm import STACK
from colcep.pattern import Pattern
from colcep.skip import SkipPastLastEvent

import conformance as conf
import precompile
from interrupts import assert_ctrl_c_stops_cleanly

CASES = {c["id"]: c for c in conf.load_cases([conf.CORPUS])}
CHECKED = ["random.7000305",  # until, not_followed_by, skip to next, allow_combinations, window, aggregates
           "random.7000534",  # no skip (runs merge without timeouts), consecutive Kleene, followed_by_any
           "random.7000412",  # skip to first, a trailing not_followed_by (PENDING) under a window
           "random.7000087",  # skip to last, Kleene at the start, a window
           "random.7000010",  # skip past last event, five aggregates, no window
           "random.7000448"]  # no skip, until with allow_combinations, times
COMPILED = precompile.SPEC_CASE  # the one whose module Numba compiles, before the test processes start (conftest)
assert COMPILED in CHECKED


# ----------------------------------------------------------------------------- generated conditions
def _patterns():
    """Patterns whose programs use every opcode the lowering emits, NOT conditions, waiting
    conditions of each kind (mask, column-vs-threshold, program, negated)."""
    every_op = (Pattern.begin("a").where(col("price") > 1.0)
                .followed_by("b").where(((col("price") > avg("price", of=["a", "b"]))
                                         | last("name", of="a").is_in(["x", "y"]))
                                        & ~(col("volume") / last("volume", of="a") >= 2.0)
                                        & (first("price", of="a") - E.min("price", of="b") <= E.max("volume", of="b"))
                                        & ~last("volume", of="b").is_null()
                                        & (count(of="b") * 1.0 != E.sum("price", of=["a", "b"]))
                                        & (last("price", of="a") < col("volume") + 1.0)
                                        & (last("volume", of="a").quot(2.0) <= col("price").quot(-0.5) + 9.0)
                                        & (col("name") == "x")).one_or_more()
                .followed_by("c").where((col("price") > last("price", of="a")) | (col("volume") < 2.0))
                .followed_by("d").where(~(col("price") < last("volume", of="c") * 2.0))
                .within(10))
    not_and_until = (Pattern.begin("a").where(col("volume") > 1.0)
                     .followed_by("b").where(col("price") >= 1.0015 * last("price", of="a")).one_or_more()
                     .until(col("volume") > E.max("volume", of="b"))
                     .not_followed_by("n").where(col("price") <= last("price", of="a"))
                     .followed_by("e").where(col("name") == "y")
                     .within(20).skip(SkipPastLastEvent()))
    return {"every_op": every_op, "not_until": not_and_until, **BENCHMARK_PATTERNS}


VALUES = np.array([0.0, 1.0, 2.0, 3.0, 0.5, -1.0, np.nan])


def _random_inputs(rng, prog, n_rows=16):
    lw = prog.lowered
    masks = rng.integers(0, 2, (max(1, len(lw.mask_exprs)), n_rows)).astype(np.uint8)
    cols = rng.choice(VALUES, (max(1, len(lw.col_exprs)), n_rows))
    v = rng.choice(VALUES, prog.v_width + 3)  # anything at all: both read the same floats
    for g in range(len(lw.vg_stage)):  # counts and valid counts often zero
        v[g * 9:g * 9 + 2] = rng.choice([0.0, 0.0, 1.0, 2.0], 2)
    return masks, cols, v


@pytest.mark.parametrize("name,inline", [(n, True) for n in sorted(_patterns())] + [("every_op", False)])
def test_generated_conditions_equal_the_generic_ones(name, inline, monkeypatch):
    monkeypatch.setattr(sp, "INLINE", inline)
    prog = cc.compile(_patterns()[name])
    mod = sp.load_module(prog)  # compiles only what is called: cond and next_event
    lw, tb = prog.lowered, prog.tables()
    cond_kind, cond_a, cond_b, code, consts, cond_thr = tb[7], tb[8], tb[9], tb[10], tb[11], tb[14]
    rng = np.random.default_rng(7)
    n_cond = len(lw.cond_kind)
    assert n_cond > 0
    stack = np.zeros(STACK)
    seen = set()
    stamp = 0
    for trial in range(300):
        masks, cols, v = _random_inputs(rng, prog)
        voff = int(rng.integers(0, 3))
        row = int(rng.integers(0, masks.shape[1]))
        for c in range(-1, n_cond):
            got = []
            for f in (kconds.cond, mod.cond):
                c_val = np.zeros(n_cond + 1, np.uint8)
                c_stamp = np.full(n_cond + 1, -1, np.int64)
                stamp += 1
                got.append(f(c, cond_kind, cond_a, cond_b, code, consts, row, masks, cols, v, voff, stack,
                             c_val, c_stamp, stamp))
            assert got[0] == got[1], (name, c, row, v.tolist(), cols[:, row].tolist(), masks[:, row].tolist())
            seen.add((c, bool(got[0])))
        # the scan ahead for waiting runs
        n = masks.shape[1]
        order = rng.permutation(n).astype(np.int64)
        ts = np.sort(rng.integers(0, 20, n)).astype(np.int64)
        for c in {int(x) for x in prog.sleep_cond if x >= 0}:
            j = int(rng.integers(0, n))
            last_t = int(rng.integers(0, 25))
            args = (c, cond_kind, cond_a, cond_b, cond_thr, code, consts, masks, cols, v, voff, stack, order,
                    np.int64(0), np.int64(j), np.int64(n), ts, np.int64(last_t))
            assert kconds.next_event(*args) == mod.next_event(*args), (name, c, j, last_t)
    # every condition was seen true and false (the comparison is not vacuous)
    for c in range(n_cond):
        assert (c, True) in seen and (c, False) in seen, (name, c)


def test_translation_covers_every_program_condition():
    """No condition of the test patterns falls back to the bytecode VM."""
    for name, p in _patterns().items():
        src = sp.generate(cc.compile(p))
        tail = src[src.index("this pattern's conditions"):]
        assert "= eval_program(" not in tail, name
        prog = cc.compile(p)
        if any(k == 1 for k in prog.lowered.cond_kind):  # a program condition: inlined as an expression
            assert "v[voff + " in tail or "cols[" in tail, name


def test_module_file_is_named_by_fingerprint_and_kernel_hash():
    prog = cc.compile(P1)
    path = sp.module_path(prog)
    assert os.path.basename(path).startswith(sp.MODULE_PREFIX + prog.fingerprint[:24])
    assert sp.kernel_hash() in os.path.basename(path)
    assert os.path.dirname(path) == os.path.join(cache.cache_dir(), "spec")
    other = cc.compile(P2)
    assert sp.module_path(other) != path


def test_writing_a_module_deletes_those_of_earlier_kernel_sources(monkeypatch, tmp_path):
    """Modules (and their Numba cache files) of another kernel hash are stale: deleted when a
    module is written; this kernel's modules and unrelated files stay."""
    monkeypatch.setattr(cache, "_DIR", str(tmp_path))
    spec = tmp_path / "spec"
    (spec / "__pycache__").mkdir(parents=True)
    old, other_fp = "0" * 16, "ab" * 12
    stale = [spec / f"{sp.MODULE_PREFIX}{other_fp}_{old}.py",
             spec / "__pycache__" / f"{sp.MODULE_PREFIX}{other_fp}_{old}.run_batch-501.py311.nbi",
             spec / "__pycache__" / f"{sp.MODULE_PREFIX}{other_fp}_{old}._run_key-388.py311.1.nbc"]
    keep = [spec / f"{sp.MODULE_PREFIX}{other_fp}_{sp.kernel_hash()}.py", spec / "notes.txt",
            spec / f"{sp.MODULE_PREFIX}{other_fp}_{sp.kernel_hash()}_plain.py",  # INLINE off: an option, not stale
            spec / "__pycache__" / f"{sp.MODULE_PREFIX}{other_fp}_{sp.kernel_hash()}_plain.run_batch-501.py311.nbi"]
    for f in stale + keep:
        f.write_text("x")
    prog = cc.compile(P1)
    monkeypatch.setattr(sp, "_MODULES", {})
    sp.load_module(prog)  # writes this pattern's module (compiles nothing until run_batch is called)
    assert os.path.exists(sp.module_path(prog))
    assert not any(f.exists() for f in stale)
    assert all(f.exists() for f in keep)


def test_inline_option_gives_another_module(monkeypatch):
    prog = cc.compile(P1)
    monkeypatch.setattr(sp, "INLINE", False)
    plain, path = sp.generate(prog), sp.module_path(prog)
    monkeypatch.setattr(sp, "INLINE", True)
    inlined = sp.generate(prog)
    assert sp.module_path(prog) != path
    for name in ("cond", "next_event"):
        assert f'inline="always")\ndef {name}(' in inlined
        assert f'inline="always")\ndef {name}(' not in plain


def test_interpreted_module_runs_the_generated_source_without_numba(monkeypatch, tmp_path):
    """``JIT`` False: the same source with ``njit`` a no-op, run from memory (nothing written to
    the cache folder), its lines in tracebacks."""
    prog = cc.compile(P2)
    monkeypatch.setattr(sp, "JIT", False)
    monkeypatch.setattr(cache, "_DIR", str(tmp_path))
    mod = sp.load_module(prog)
    assert not hasattr(mod.run_batch, "compile") and not hasattr(mod.cond, "py_func")
    assert not os.path.exists(tmp_path / "spec")
    src = sp.generate(prog)
    monkeypatch.setattr(sp, "JIT", True)
    assert src.replace("from colcep.engine.specialise import _no_jit as njit", "from numba import njit") == sp.generate(prog)
    import linecache
    assert linecache.getline(mod.__file__, 1) == src.splitlines(True)[0]
    case = CASES[COMPILED]
    monkeypatch.setattr(sp, "JIT", False)
    want, _ = _run(case, "generic", True)
    got, tiers = _run(case, "specialised", True, batch=2)
    assert set(tiers) == {"specialised"} and got.equals(want)


# ----------------------------------------------------------------------------- whole runs
def _run(case, tier, timeouts, batch=None, switch_after=None):
    """The case through a Matcher of ``tier`` in batches of ``batch`` rows; returns the output
    table and the tier each kernel call ran on."""
    table = conf.case_table(case)
    m = cc.Matcher(conf.case_pattern(case), key=case["pattern"].get("key"), time="ts", timeouts=timeouts,
                   columns=[], tier=tier)
    parts, tiers = [], []
    step = batch or table.num_rows
    for i, lo in enumerate(range(0, table.num_rows, step)):
        parts.append(m.process(table.slice(lo, step)))
        tiers.append(m.kernel_tier)
        if switch_after is not None and i + 1 == switch_after:
            m._tier.wait(600)  # the background compile (auto)
    parts.append(m.close())
    tiers.append(m.kernel_tier)
    return pa.concat_tables(parts), tiers


def _engine(tier, batch=None):
    def run(case, want_timeouts):
        out, tiers = _run(case, tier, want_timeouts, batch)
        assert set(tiers) == {tier}
        return conf.rows_to_matches(out, want_timeouts)
    return run


def _check_case(case_id, monkeypatch):
    case = CASES[case_id]
    for tier, batch in (("specialised", None), ("specialised", 2)):
        monkeypatch.setitem(conf.ENGINES, "spec", _engine(tier, batch))
        diff = conf.check_case(case, "spec")
        assert diff is None, (case_id, batch, diff)
    for timeouts in (False, True):  # without timeouts, no-skip patterns merge runs
        want, _ = _run(case, "generic", timeouts)
        for batch in (None, 1, 3):
            got, tiers = _run(case, "specialised", timeouts, batch)
            assert set(tiers) == {"specialised"}
            assert got.equals(want), (case_id, timeouts, batch)
    # auto: generic first, switching at a batch boundary once the specialised kernel is ready
    want, _ = _run(case, "generic", True)
    got, tiers = _run(case, "auto", True, batch=2, switch_after=2)
    assert tiers[0] == "generic" and tiers[-1] == "specialised", tiers
    assert got.equals(want)


@pytest.mark.parametrize("case_id", CHECKED)
def test_specialised_equals_generic_and_flink(case_id, monkeypatch):
    """Each case's generated module run as Python (``JIT`` False: the source Numba compiles,
    without a compile of ~60 s per case); the next test compiles one for real."""
    monkeypatch.setattr(sp, "JIT", False)
    _check_case(case_id, monkeypatch)


def test_compiled_specialised_kernel_equals_generic_and_flink(monkeypatch):
    """One generated module compiled by Numba, through the same checks: the compiled tier, not only its source, gives Flink's and the generic tier's rows."""
    _check_case(COMPILED, monkeypatch)


def test_a_new_process_loads_the_kernel_from_the_disk_cache():
    case = CASES[COMPILED]
    _run(case, "specialised", True)  # compiled (or loaded) here
    script = f"""
import json, sys
sys.path.insert(0, {str(conf.HERE)!r})
import conformance as conf
import colcep as cc
case = json.loads({json.dumps(json.dumps(case))})
m = cc.Matcher(conf.case_pattern(case), key=case["pattern"].get("key"), time="ts", timeouts=True, columns=[],
               tier="specialised")
m.process(conf.case_table(case))
rb = m._tier._mod.run_batch
print(m.kernel_tier, sum(rb.stats.cache_hits.values()), sum(rb.stats.cache_misses.values()))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(cc.__file__)),
                                                                   os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["specialised", "1", "0"], (out.stdout, out.stderr)


def test_sharded_matcher_runs_the_specialised_kernel_in_every_shard():
    case = CASES[COMPILED]
    table = conf.case_table(case)
    m = cc.Matcher(conf.case_pattern(case), time="ts", timeouts=True, columns=[], key="name", threads=3,
                   tier="specialised")
    got = pa.concat_tables([m.process(table), m.close()])
    assert m.kernel_tier == "specialised"
    g = cc.Matcher(conf.case_pattern(case), time="ts", timeouts=True, columns=[], key="name")
    assert got.equals(pa.concat_tables([g.process(table), g.close()])) and got.num_rows > 0
    assert len(m._tier._mod.run_batch.signatures) == 1  # the shards' calls have the single path's types


def test_restore_takes_a_tier_and_the_tiers_hand_over_through_snapshots(monkeypatch):
    """A snapshot restores onto any tier (one state layout): generic -> specialised -> generic
    at every batch boundary gives the uninterrupted generic table."""
    monkeypatch.setattr(sp, "JIT", False)
    case = CASES[CHECKED[1]]
    table, prog = conf.case_table(case), cc.compile(conf.case_pattern(case))
    whole = cc.Matcher(prog, key=case["pattern"].get("key"), time="ts", timeouts=True, columns=None)
    want = pa.concat_tables([whole.process(table), whole.close()])
    m = cc.Matcher(prog, key=case["pattern"].get("key"), time="ts", timeouts=True, columns=None)
    parts, tiers = [], []
    for i in range(table.num_rows):
        m = cc.Matcher.restore(prog, m.snapshot(), tier=("specialised", "generic")[i % 2])
        parts.append(m.process(table.slice(i, 1)))
        tiers.append(m.kernel_tier)
    snap = m.snapshot()
    parts.append(m.close())
    assert set(tiers) == {"specialised", "generic"}
    assert pa.concat_tables(parts).equals(want) and want.num_rows > 0
    with pytest.raises(InputError, match="tier must be one of"):
        cc.Matcher.restore(prog, snap, tier="fast")


def test_spark_task_specs_carry_the_tier(monkeypatch):
    """``colcep.spark.match(tier=)`` / ``match_stream(tier=)`` reach every task's Matcher through
    the spec (checked without Spark, on the code a task runs); a bad tier fails on the driver."""
    from colcep.spark import KeyedStream, arrow_spec
    from colcep.spark.stream import stream_spec
    from colcep.ticks import make_ticks

    monkeypatch.setattr(sp, "JIT", False)
    t = make_ticks(3000, 4, 3)  # has an "id" column
    srt = t.sort_by([("name", "ascending"), ("ts", "ascending"), ("id", "ascending")])
    out = {}
    for tier in ("generic", "specialised"):
        spec = arrow_spec(srt.schema, P2, "name", "ts", ["price"], seq="id", tier=tier)
        assert spec.matcher()._tier.requested == tier
        ks = KeyedStream(spec)
        out[tier] = pa.concat_tables([*ks.feed(srt), *ks.finish()])
        sspec = stream_spec(t.schema, P2, "name", "ts", ["price"], seq="id", tier=tier)
        assert sspec.matcher()._tier.requested == tier
    assert out["specialised"].equals(out["generic"]) and out["generic"].num_rows > 0
    for make in (lambda: arrow_spec(srt.schema, P2, "name", "ts", [], seq="id", tier="fastest"),
                 lambda: stream_spec(t.schema, P2, "name", "ts", [], seq="id", tier="fastest")):
        with pytest.raises(InputError, match="tier must be one of"):
            make()


def test_ctrl_c_stops_the_specialised_kernel():
    """The generated module's copy of the step checks the stop flag as the generic one does
    (interpreted in the child: no compile there)."""
    assert_ctrl_c_stops_cleanly("""
        specialise.JIT = False
        tbl = ticks(1).drop(["k"])
        m = cc.Matcher(p, time="ts", columns=[], tier="specialised")
        m.process(tbl.slice(0, 1))
        assert m.kernel_tier == "specialised", m.kernel_tier
        first, rest = tbl.slice(0, 0), tbl.slice(1)
    """)


def test_colcep_match_takes_tier():
    case = CASES[COMPILED]
    table = conf.case_table(case)
    want = cc.match(table, conf.case_pattern(case), time="ts", columns=[])
    got = cc.match(table, conf.case_pattern(case), time="ts", columns=[], tier="specialised")
    assert got.equals(want) and got.num_rows > 0


def test_a_failed_build_falls_back_to_generic_with_a_warning(monkeypatch):
    case = CASES[COMPILED]
    want, _ = _run(case, "generic", True)

    def broken(prog):
        raise OSError("disk full")

    monkeypatch.setattr(sp, "load_module", broken)
    for tier in ("specialised", "auto"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got, tiers = _run(case, tier, True, batch=4, switch_after=1 if tier == "auto" else None)
        assert got.equals(want)
        assert set(tiers) == {"generic"}
        assert any(issubclass(w.category, ColcepWarning) and "disk full" in str(w.message) for w in caught), tier


def test_generic_tier_never_builds(monkeypatch):
    monkeypatch.setattr(sp, "load_module", lambda prog: pytest.fail("generic must not build"))
    _, tiers = _run(CASES[COMPILED], "generic", True, batch=3)
    assert set(tiers) == {"generic"}


def test_unknown_tier_is_an_input_error():
    with pytest.raises(InputError, match="tier must be one of"):
        cc.Matcher(P1, key="name", tier="fast")
