"""The compiled step (``colcep.engine.stepgen``, tier ``"compiled"``): the shapes it generates
(every one of the conformance corpus, negation included; the corpus runs through it in
``test_conformance.py``),
random patterns of those shapes against the generic kernel (whole, 1-row and 3-row batches, a
snapshot and restore at every boundary, the live partial matches after every batch), parked
runs, runs that stay and merge, the hand-over between tiers, one module per shape, the bound and
the interrupt. The generated modules run as Python (``JIT`` False, the source Numba compiles) but
in the one test that compiles the step and the driver (``test_tiers.py`` has the tiers' rules)."""
import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col, last
from colcep.engine import codegen, interrupt, stepgen
from colcep.kernels import codes as kc
from colcep.kernels.buffer import JOIN
from colcep.errors import CapacityError
from colcep.tools.examples import benchmark_pattern, desk_patterns
from colcep.tools.ticks import make_ticks
from conformance import CORPUS, case_pattern, compiles, load_cases, tiers_agree
from randcase import cases, examples

CASES = load_cases([CORPUS])
GENERATED = [c for c in CASES if stepgen.unsupported(cc.compile(case_pattern(c))) is None]


@pytest.fixture
def interpreted(monkeypatch):
    """The generated modules run as Python (no Numba compile per shape)."""
    monkeypatch.setattr(codegen, "JIT", False)


def test_the_corpus_has_cases_of_the_generated_shapes():
    """Every corpus case is of a generated shape: negation (``not_next``, ``not_followed_by``,
    STOP and PENDING states) and windows between consecutive events included."""
    assert len(CASES) == 825 and len(GENERATED) == 825
    assert any(c.get("expected_timeouts") is not None for c in GENERATED)
    assert any(c["pattern"].get("within_ms") for c in GENERATED)
    skips = {c["pattern"]["skip"]["type"] for c in GENERATED}
    assert {"noSkip", "skipPastLastEvent", "skipToNext", "skipToFirst", "skipToLast"} <= skips, skips
    kinds = {int(k) for c in GENERATED for k in cc.compile(case_pattern(c)).nfa.state_kind}
    assert {kc.STOP, kc.PENDING} <= kinds
    assert sum(cc.compile(case_pattern(c)).nfa.has_gap_windows for c in GENERATED) == 12


@settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(cases(max_events=18))
def test_random_patterns_through_the_compiled_step(case):
    """Random patterns of every shape the generator writes (Kleene, optional, times, until,
    groups, negation, every contiguity and skip strategy), with and without timed-out output."""
    assume(compiles(case))
    codegen.JIT, jit = False, codegen.JIT  # (hypothesis: no function-scoped monkeypatch)
    try:
        for timeouts in (False, True):
            prog = cc.compile(case_pattern(case))
            assume(stepgen.unsupported(prog) is None)
            tiers_agree(case, timeouts, sizes=(None, 1, 3))
    finally:
        codegen.JIT = jit


def test_a_shape_not_generated_runs_on_the_generic_kernel_with_a_warning(interpreted):
    """A pattern the generator does not write runs, and says so under "compiled": a warning naming
    what is not generated, the generic kernel (``kernel_tier``), the generic output. (Past ``MAX_EDGES``
    edges in one state's PROCEED closure: 25 optional stages in a row.)"""
    ticks = make_ticks(3000, symbols=4)
    wide = cc.Pattern.begin("a").where(col("volume") > 900)
    for i in range(25):
        wide = wide.followed_by(f"o{i}").where(col("price") < 0.0).optional()
    wide = wide.followed_by("b").where(col("price") > last("price", of="a")).within(1000).skip(
        cc.SkipPastLastEvent())
    prog = cc.compile(wide)
    assert "closure" in stepgen.unsupported(prog)
    with pytest.raises(ValueError, match="does not generate"):
        stepgen.generate(prog)
    for tier in ("compiled", "auto"):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            m = cc.Matcher(prog, key="name", time="ts", tier=tier)
        # (asked for: said; "auto", the default, runs it generic quietly)
        assert [str(w.message) for w in said if "does not generate a state whose PROCEED closure" in str(
            w.message)] != [] if tier == "compiled" else said == []
        assert "PROCEED closure" in m._tier.why_generic
        got = m.process(ticks)
        assert m.kernel_tier == "generic"
        assert got.equals(cc.Matcher(prog, key="name", time="ts", tier="generic").process(ticks)) and got.num_rows


def _batch_by_batch(prog, ticks: pa.Table, rows: int, restore_every: int, probe) -> pa.Table:
    """``ticks`` through both tiers ``rows`` at a time, the compiled Matcher restored from its
    snapshot after every ``restore_every`` batches: the compiled step ran, the live partial matches
    are the generic tier's after every batch, and so is the whole output (returned). ``probe(m)``
    is called on the compiled Matcher after every batch."""
    ms = {t: cc.Matcher(prog, key="name", time="ts", tier=t) for t in ("generic", "compiled")}
    outs = {t: [] for t in ms}
    for i, lo in enumerate(range(0, ticks.num_rows, rows)):
        for t in ms:
            outs[t].append(ms[t].process(ticks.slice(lo, rows)))
        assert ms["compiled"].kernel_tier == "compiled"
        assert ms["compiled"].live_partial_matches == ms["generic"].live_partial_matches
        probe(ms["compiled"])
        if i % restore_every == restore_every - 1:
            ms["compiled"] = cc.Matcher.restore(prog, ms["compiled"].snapshot(), tier="compiled")
    for t in ms:
        outs[t].append(ms[t].close())
    got, want = pa.concat_tables(outs["compiled"]), pa.concat_tables(outs["generic"])
    assert got.equals(want)
    return got


#: P2's shape (a Kleene stage, one match per start) with more starts: ~10^3 runs park in 4,000 ticks
KLEENE_PARKS = (cc.Pattern.begin("a").where(col("volume") > 400)
                .followed_by("b").where(col("price") > last("price", of="a")).one_or_more()
                .followed_by("c").where(col("price") < last("price", of="b") * 0.999)
                .within("1h").skip(cc.SkipPastLastEvent()))


@pytest.mark.parametrize("name", ["P5", "P5_skip_past_last", "kleene"])
def test_parked_runs_through_the_compiled_step(name, interpreted):
    """Runs waiting for a threshold park from PARK_MIN runs a key on, wake, time out and restore
    as in the generic tier (batches of 397 rows, restored every third batch): P5's shape; P5 and
    a Kleene pattern with one match per start, where a waiting run is dropped beside another of
    its start (``matches.dominated``) at the generic step's events."""
    pattern = {"P5": benchmark_pattern("P5"), "P5_skip_past_last": benchmark_pattern("P5").skip(cc.SkipPastLastEvent()),
               "kleene": KLEENE_PARKS}[name]
    prog = cc.compile(pattern)
    assert stepgen.unsupported(prog) is None
    parked = []
    got = _batch_by_batch(prog, make_ticks(6000 if name != "kleene" else 4000, symbols=2), 397, 3,
                          lambda m: parked.append(m._state.park.live))
    assert max(parked) >= 64 and got.num_rows > 0  # (PARK_MIN: the park was used)


#: followed_by_any twice; c reads only a's price, so c's runs of one start (an a, any b) merge
STAY_AND_MERGE = (cc.Pattern.begin("a").where(col("volume") > 600)
                  .followed_by_any("b").where(col("volume") > 300)
                  .followed_by_any("c").where(col("price") > last("price", of="a"))
                  .within("2s"))


@pytest.mark.parametrize("name", ["P4", "stay_and_merge"])
def test_runs_that_stay_and_merge_through_the_compiled_step(name, interpreted):
    """followed_by_any (a run stays beside the run its TAKE makes) and, without a skip strategy,
    runs of one start with equal relevant aggregates merged under the window: the generic tier's
    tables and live partial matches, batch by batch and through restores."""
    # (P4 finds ~10^4 matches in 150 ticks of 3 symbols, the other ~8x10^5 in 1,000)
    ticks = make_ticks(150, symbols=3) if name == "P4" else make_ticks(1000, symbols=3)
    prog = cc.compile(benchmark_pattern("P4") if name == "P4" else STAY_AND_MERGE)
    assert stepgen.unsupported(prog) is None
    assert prog.merging(False) == (name == "stay_and_merge")
    joins = []
    got = _batch_by_batch(prog, ticks, 11 if name == "P4" else 71, 4,
                          lambda m: joins.append(int((m._state.buffer.stage == JOIN).sum())))
    merged = max(joins)
    assert got.num_rows > 1000
    assert (merged > 0) == (name == "stay_and_merge")  # (JOIN nodes: runs were merged)
    if name == "stay_and_merge":  # and without a window, where runs of any start merge
        unwindowed = cc.compile(cc.Pattern(STAY_AND_MERGE.stages, None, STAY_AND_MERGE.skip_strategy))
        joins.clear()
        got = _batch_by_batch(unwindowed, make_ticks(250, symbols=3), 53, 4,
                              lambda m: joins.append(int((m._state.buffer.stage == JOIN).sum())))
        assert got.num_rows > 1000 and max(joins) > 0


def test_one_source_per_shape():
    """Constants are read from the program, not written into the code: the desk's four P1
    variants (other volumes and windows) are one module."""
    desk = desk_patterns()
    p1 = [cc.compile(p) for n, p in desk.items() if n.startswith("P1_")]
    assert len(p1) == 4 and len({p.fingerprint for p in p1}) == 4
    assert len({stepgen.generate(p) for p in p1}) == 1
    other = cc.compile(cc.Pattern.begin("a").where(col("volume") > 800).next("b").where(col("price") > 1.0))
    assert stepgen.generate(other) != stepgen.generate(p1[0])
    assert "800" not in stepgen.generate(p1[0])


def test_a_program_is_generated_once_per_fingerprint(monkeypatch):
    """A stream's tasks make a Matcher per key and batch: the step's source, name and whether it
    is generated are worked out once per program (its fingerprint), the least recently used
    forgotten past ``MEMO_SIZE`` programs."""
    monkeypatch.setattr(stepgen, "_MEMO", type(stepgen._MEMO)())
    monkeypatch.setattr(stepgen, "MEMO_SIZE", 2)
    made = []
    real = stepgen.generate
    monkeypatch.setattr(stepgen, "generate", lambda prog: made.append(prog.fingerprint) or real(prog))
    desk = list(desk_patterns().values())
    a, a_again, b, c = cc.compile(desk[0]), cc.compile(desk[0]), cc.compile(desk[1]), cc.compile(desk[2])
    assert a is not a_again and a.fingerprint == a_again.fingerprint
    assert stepgen.name(a) == stepgen.name(a_again) and stepgen.unsupported(a_again) is None
    assert made == [a.fingerprint]
    stepgen.name(b), stepgen.name(c)  # (a's source, the oldest, forgotten)
    stepgen.name(a_again)
    assert made == [a.fingerprint, b.fingerprint, c.fingerprint, a.fingerprint]


def test_a_step_not_on_disk_is_looked_for_again_after_a_while(monkeypatch, tmp_path):
    """``cached``: a step found in the disk cache stays found; one not found is looked for again
    only after ``LOOK_AGAIN_SECONDS`` (a listing per Matcher would cost a stream's tasks)."""
    from colcep.engine import kernel_cache
    monkeypatch.setattr(codegen, "JIT", True)
    monkeypatch.setattr(kernel_cache, "cache_dir", lambda: str(tmp_path))
    monkeypatch.setattr(stepgen, "_ON_DISK", set())
    monkeypatch.setattr(stepgen, "_NOT_ON_DISK", {})
    now = [100.0]
    monkeypatch.setattr(stepgen.time, "monotonic", lambda: now[0])
    prog = cc.compile(benchmark_pattern("P1"))
    folder = tmp_path / "step" / "__pycache__"
    folder.mkdir(parents=True)
    assert not stepgen.cached(prog)
    (folder / f"{stepgen.name(prog)}.run_key-1.py311.nbi").write_bytes(b"")
    assert not stepgen.cached(prog)  # (not looked for again yet)
    now[0] += stepgen.LOOK_AGAIN_SECONDS
    assert stepgen.cached(prog)
    (folder / f"{stepgen.name(prog)}.run_key-1.py311.nbi").unlink()
    assert stepgen.cached(prog)  # (found once: stays found)


def test_a_state_moves_between_the_tiers_at_any_boundary(interpreted):
    """Generic for the first batches, then compiled, then generic again (through snapshots):
    the uninterrupted generic output."""
    ticks = make_ticks(4000, symbols=6)
    prog = cc.compile(benchmark_pattern("P1"))
    want = cc.match(ticks, prog, key="name", time="ts")
    m = cc.Matcher(prog, key="name", time="ts", tier="generic")
    parts = [m.process(ticks.slice(0, 1000))]
    for lo, tier in ((1000, "compiled"), (2500, "generic")):
        m = cc.Matcher.restore(prog, m.snapshot(), tier=tier)
        parts.append(m.process(ticks.slice(lo, 1500)))
        assert m.kernel_tier == tier
    parts.append(m.close())
    assert pa.concat_tables(parts).equals(want) and want.num_rows > 0


WAITS = (cc.Pattern.begin("a").where(col("volume") > 0)
         .followed_by("b").where(col("name") == "never"))  # waits on a mask: listed, never parked


def test_the_bound_on_partial_matches_holds_and_leaves_the_state(interpreted):
    ticks = make_ticks(600, symbols=2)
    prog = cc.compile(WAITS)
    assert stepgen.unsupported(prog) is None
    errors = []
    for tier in ("generic", "compiled"):
        m = cc.Matcher(prog, key="name", time="ts", tier=tier, timeouts=True, max_partial_matches=50)
        m.process(ticks.slice(0, 40))
        before = m.snapshot()
        with pytest.raises(CapacityError) as e:
            m.process(ticks.slice(40, 560))
        assert m.snapshot() == before
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_an_interrupt_stops_the_call_and_leaves_the_state(interpreted, monkeypatch):
    ticks = make_ticks(2000, symbols=3)
    m = cc.Matcher(WAITS, key="name", time="ts", tier="compiled", timeouts=True)
    m.process(ticks.slice(0, 500))
    before = m.snapshot()
    monkeypatch.setattr(interrupt, "new_stop_flag", lambda: np.ones(1, np.uint8))
    with pytest.raises(KeyboardInterrupt):
        m.process(ticks.slice(500, 1500))
    assert m.kernel_tier == "compiled" and m.snapshot() == before


def test_compiled_step_equals_generic_and_shares_its_compile():
    """The step and the driver compiled by Numba: the generic output; a second pattern of the
    shape runs the same compiled step (no other module, no other overload)."""
    ticks = make_ticks(20000, symbols=8)
    desk = desk_patterns()
    runs = []
    for name in ("P1_v700_w5s", "P1_v900_w20s"):
        m = cc.Matcher(desk[name], key="name", time="ts", tier="compiled")
        got = pa.concat_tables([m.process(ticks.slice(0, 7000)), m.process(ticks.slice(7000)), m.close()])
        assert m.kernel_tier == "compiled"
        assert got.equals(cc.match(ticks, desk[name], key="name", time="ts")) and got.num_rows > 0
        runs.append(m._tier._step.run_key)
    assert runs[0] is runs[1] and len(runs[0].overloads) == 1


def test_the_v_fields_read_are_those_the_aggregates_read():
    """``codegen.v_fields_read``: per group, what each aggregate of one group reads, every field
    of groups an aggregate spans, the valid count wherever ``v_update`` tests it."""
    from colcep.kernels import vm

    def agg(func, *groups):
        return [vm.OP_AGG, func, len(groups), *groups]

    code = np.array([vm.OP_COL, 0, *agg(vm.AGG_LAST, 0), vm.OP_CMP, vm.C_GT, vm.OP_TRUE, vm.OP_AND,
                     *agg(vm.AGG_COUNT, 1), *agg(vm.AGG_MIN, 2), vm.OP_ISIN, 2, 0, 1, vm.OP_NOT,
                     *agg(vm.AGG_AVG, 3), *agg(vm.AGG_FIRST, 4, 5)], np.int64)
    assert codegen.v_fields_read(code) == {
        0: (vm.V_VALID, vm.V_LAST), 1: (vm.V_N,), 2: (vm.V_VALID, vm.V_MIN), 3: (vm.V_VALID, vm.V_SUM),
        4: tuple(range(vm.VW)), 5: tuple(range(vm.VW))}
    assert codegen.v_fields_read(np.array([99], np.int64)) is None
    # P2: a's last price and b's; P3: a1's last price, the sum and count of ai, ai's last volume
    p2, p3 = (stepgen._lean(cc.compile(benchmark_pattern(n))) for n in ("P2", "P3"))
    assert sorted(p2.values()) == [(vm.V_VALID, vm.V_LAST)] * 2
    assert sorted(p3.values()) == sorted([(vm.V_VALID, vm.V_LAST)] * 2 + [(vm.V_SUM,), (vm.V_N,)])


@settings(max_examples=200, deadline=None)
@given(st_fields=st.sets(st.sampled_from(range(9))), xs=st.lists(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(float("nan"))), max_size=6))
def test_a_v_update_written_out_keeps_the_fields_read_as_v_update_does(st_fields, xs):
    """``codegen.v_update_lines`` for any set of fields (closed as ``v_fields_read`` closes
    them): after any events, those fields equal ``vm.v_update``'s, bit for bit."""
    from colcep.kernels import vm

    fields = set(st_fields)
    if fields & {vm.V_MIN, vm.V_MAX, vm.V_FIRST, vm.V_FIRST_POS}:
        fields.add(vm.V_VALID)
    fields = tuple(sorted(fields))
    body = "\n".join("    " + s for s in codegen.v_update_lines("v", "b", 1, fields, "x", "pos")) or "    pass"
    ns: dict = {}
    exec(f"def update(v, b, x, pos):\n{body}\n", ns)
    want, got = np.full(3 * vm.VW, np.nan), np.full(3 * vm.VW, 7.5)
    vm.v_init.py_func(want)
    for f in fields:
        got[vm.VW + f] = want[vm.VW + f]
    for pos, x in enumerate(xs):
        vm.v_update.py_func(want, vm.VW, x, float(pos))
        ns["update"](got, 0, x, float(pos))
    for f in fields:
        assert np.array_equal(got[vm.VW + f], want[vm.VW + f], equal_nan=True), (f, got, want)
    assert np.all(got[:vm.VW] == 7.5) and np.all(got[2 * vm.VW:] == 7.5)
