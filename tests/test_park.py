"""Parked runs (kernels/park.py, issue 22): the park table, the park's heaps against a
plain-Python model, and threshold-waiting patterns (the P5 shape and the shapes beside it)
giving the same matches whole, in 1-row batches, through snapshots and against the reference."""
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep.engine.conditions import lower
from colcep.kernels import buffer as kb
from colcep.kernels import codes as kcodes
from colcep.kernels import park as kp
from colcep.kernels import vm
from colcep.kernels.runs import expired
from colcep.skip import NoSkip, SkipPastLastEvent, SkipToFirst, SkipToLast, SkipToNext
from conformance import engine_colcep, engine_reference

price, volume = cc.col("price"), cc.col("volume")
last_a = cc.last("price", of="a")


# ----------------------------------------------------------------------------- the park table
def _table(pattern, merging=False):
    prog = cc.compile(pattern)
    t = prog.tables()
    pk = kp.park_table(t[0], t[15], t[7], t[8], t[9], t[14], t[10], t[17], merging)
    names = prog.nfa.state_names
    return prog, {names[s]: (None if pk[0][s] < 0 else (int(pk[2][pk[0][s]]), bool(pk[5][pk[0][s]])))
                  for s in range(len(names))}


def _b(cond):
    return cc.Pattern.begin("a").where(volume > 500.0).followed_by("b").where(cond).within("1h")


def test_park_table():
    assert _table(_b(price > 1.05 * last_a))[1]["b"] == (vm.C_GT, False)
    assert _table(_b(price < last_a * 0.97))[1]["b"] == (vm.C_LT, False)
    assert _table(_b(last_a * 1.04 + 0.01 <= price))[1]["b"] == (vm.C_GE, False)  # mirrored
    assert _table(_b((price > 1.04 * last_a) & (volume > 3.0)))[1]["b"] == (vm.C_GT, True)
    assert _table(_b((volume > 3.0) & (price <= 1.04 * last_a)))[1]["b"] == (vm.C_LE, True)
    assert _table(_b((price + volume > last_a) & (volume > 3.0)))[1]["b"] == (vm.C_GT, True)  # one float row
    assert _table(_b((price > last_a * volume) & (volume > 3.0)))[1]["b"] is None  # the event on both sides
    assert _table(_b(price == last_a))[1]["b"] is None  # == waits in the list (scanned)
    assert _table(_b(~(price > last_a)))[1]["b"] is None  # negated
    assert _table(_b(price > 3.0))[1]["b"] is None  # a mask: scanned
    assert _table(_b((price > last_a) | (volume > 3.0)))[1]["b"] is None
    any_ = cc.Pattern.begin("a").where(volume > 5.0).followed_by_any("b").where(price > last_a)
    assert _table(any_)[1]["b"] == (vm.C_GT, False)
    assert set(_table(any_)[1].values()) - {None} == {(vm.C_GT, False)}


# ----------------------------------------------------------------------------- the heaps, against a model
OPS = st.sampled_from([vm.C_GT, vm.C_GE, vm.C_LT, vm.C_LE])


def _tables(op):
    e = {vm.C_GT: price > last_a, vm.C_GE: price >= last_a, vm.C_LT: price < last_a, vm.C_LE: price <= last_a}[op]
    low = lower([e], ["a", "b"], {})
    x, op2, t0, t1 = low.cond_thr[0].tolist()
    assert op2 == op
    one = np.zeros(1, np.int64)
    return low, x, one + x, one + op, one + t0, one + t1


KEYS = 3


# a committed call, then one that wakes, takes, times out, prunes, parks and grows before it is
# undone (the runs it removed come back, the ones it parked go), then one that is committed
UNDONE = [("park", 5, 0), ("park", 6, 3), ("park", 7, 1), ("park", 2, 4), ("park", 3, 0), ("call", 0, 0),
          ("wake", 9, 0), ("take", 0, 0), ("timeout", 40, 1), ("prune", 9, 4), ("park", 1, 0), ("grow", 30, 3),
          ("park", 4, 3), ("call", 1, 0), ("wake", 9, 3), ("take", 0, 0), ("call", 0, 0)]


@settings(max_examples=150, deadline=None)
@example(vm.C_GT, UNDONE, False)
@example(vm.C_LE, UNDONE, True)
@given(OPS, st.lists(st.tuples(st.sampled_from(["park", "wake", "take", "timeout", "prune", "grow", "call"]),
                               st.integers(0, 9), st.integers(0, 40)), max_size=60), st.booleans())
def test_park_matches_a_python_model(op, ops, strict):
    """Random operations on keys 0-2 of one park, against a dict per key; "call" ends the open
    call: committed (its freed slots reusable) or undone (back to the runs parked when it opened,
    whatever was parked, woken, timed out or pruned since, and whatever grew)."""
    low, x, pk_col, pk_op, pk_t0, pk_t1 = _tables(op)
    vw = max(1, low.v_width)
    P = kp.new_park(1, 4, vw, KEYS)
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(256)
    cols = np.zeros((max(1, x + 1), 1))
    masks = np.zeros((1, 1), np.uint8)
    stack = np.empty(vm.STACK)
    model = {}  # seq -> [spos, sts, thr, node, woken, key]
    seq = 0
    spos_next = 0
    window = 10
    W = [np.zeros(512, np.int32), np.zeros(512, np.int64), np.zeros(512, np.int64), np.zeros(512, np.int64),
         np.zeros(512, np.int64), np.zeros(512, np.int64), np.zeros(512 * vw), np.zeros(2, np.int64)]
    kp.open_call(P[kp.P_PM])
    kb.open_call(meta)
    at_open = {s: list(r) for s, r in model.items()}
    for kind, a, b in ops:
        k = b % KEYS
        if kind == "park":
            if not kp.park_room(P, k, 1):
                P = kp.grow_park(P, k, 1, vw)
            v = np.empty(vw)
            vm.v_init(v)
            thr = float(a) if b % 7 else np.nan
            vm.v_update(v, 0, thr, 0.0)
            node = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, spos_next, 0, -1)
            n_ref[node] += 1
            spos = spos_next - (b % 3)  # mostly in start order, not always
            kp.park(P, k, pk_col, pk_op, pk_t0, pk_t1, 0, 1, node, spos // 2, spos, v, 0, vw, low.code, low.consts,
                    masks, cols, stack)
            model[seq] = [spos, spos // 2, thr, node, False, k]
            seq += 1
            spos_next += 3
        elif kind == "grow":
            P = kp.grow_park(P, k, a + 1, vw)
        elif kind == "wake":
            cols[x, 0] = float(a)
            before = P[kp.P_PM][kp.PM_NK]
            kp.wake_parked(P, k, pk_col, pk_op, 0, cols)
            got = sorted(int(s) for s in P[kp.K_SEQ][before:P[kp.P_PM][kp.PM_NK]])
            want = []
            for s, r in model.items():
                if r[5] == k and not r[4] and r[2] == r[2] and vm.compare(op, float(a), r[2]):
                    r[4] = True
                    want.append(s)
            assert got == sorted(want)
        elif kind == "take":
            n = kp.take_woken(P, *W[:7], W[7], vw, 0, 0, 0, 99)
            woken = sorted((r[0], s) for s, r in model.items() if r[4])
            assert n == len(woken)
            assert W[3][:n].tolist() == [sp for sp, _ in woken]
            assert W[1][:n].tolist() == [model[s][3] for _, s in woken]
            for _, s in woken:
                kb.release(n_row, n_stage, n_parent, n_ref, meta, model.pop(s)[3])
            W[7][0] = 0
        elif kind == "timeout":
            t = a + b // 4
            pend = [np.zeros(256, np.int64), np.zeros(256, np.int64), np.zeros(256, np.int32), np.zeros(256, np.int64)]
            any_, npend = kp.timeouts(P, k, t, window, False, True, 7, *pend, 0, n_row, n_stage, n_parent, n_ref,
                                      meta)
            out = sorted((r[0], s) for s, r in model.items() if r[5] == k and expired(t, r[1], window))
            assert any_ == bool(out) and npend == len(out)
            assert pend[0][:npend].tolist() == [model[s][3] for _, s in out]
            assert pend[3][:npend].tolist() == [model[s][1] + window for _, s in out]
            for i in range(npend):
                kb.release(n_row, n_stage, n_parent, n_ref, meta, pend[0][i])
            for _, s in out:
                del model[s]
        elif kind == "prune":
            pid = a * 3
            kp.prune(P, k, pid, strict, n_row, n_stage, n_parent, n_ref, meta)
            for s in [s for s, r in model.items() if r[5] == k and (r[0] < pid or (not strict and r[0] == pid))]:
                del model[s]
        else:  # the call ends: undone when a is odd, committed otherwise; the next one opens
            if P[kp.P_PM][kp.PM_NK]:
                continue  # (a call never ends between a wake and its take)
            if a % 2:
                P = kp.undo_call(P)
                high = P[kp.P_PM][kp.PM_HIGH]
                roots = P[kp.P_NODE][:high][P[kp.P_SEQ][:high] >= 0]
                kb.undo_call(n_row, n_stage, n_parent, n_ref, meta, roots.astype(np.int64))
                model = {s: list(r) for s, r in at_open.items()}
            else:
                kp.close_call(P)
                kb.close_call(n_parent, n_ref, meta)
            kp.open_call(P[kp.P_PM])
            kb.open_call(meta)
            at_open = {s: list(r) for s, r in model.items()}
        pm = P[kp.P_PM]
        assert pm[kp.PM_LIVE] == len(model)
        for kk in range(KEYS):
            mine = [r for r in model.values() if r[5] == kk]
            assert P[kp.P_KL][kk] == len(mine)
            assert kp.min_spos(P, kk) == min((r[0] for r in mine), default=kcodes.BIG)
    kp.close_call(P)
    kb.close_call(n_parent, n_ref, meta)
    assert kb.live_nodes(n_ref, meta[0]) == len(model)
    # every parked run, per key in start order (then park order), as a snapshot holds them
    empty = (np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64),
             np.zeros(0, np.int64), np.zeros((0, vw)))
    ptr, _, node, _, spos, _ = kp.export_runs(P, KEYS, *empty)
    want = sorted((r[5], r[0], s) for s, r in model.items())
    assert ptr.tolist() == [0] + np.cumsum([sum(r[5] == kk for r in model.values()) for kk in range(KEYS)]).tolist()
    assert spos.tolist() == [sp for _, sp, _ in want] and node.tolist() == [model[s][3] for _, _, s in want]


def test_runs_parked_in_start_order_queue_and_the_others_heap():
    """The start order: runs parked in start order go to the key's start queue (a push appends,
    a pop advances its offset), a run parked out of order to the start heap; time-outs and
    ``pop_oldest`` take the older of the two tops, and the slots' fields are records (views)."""
    low, x, pk_col, pk_op, pk_t0, pk_t1 = _tables(vm.C_GT)
    vw = max(1, low.v_width)
    P = kp.new_park(1, 4, vw, 1)
    assert all(not P[i].flags.c_contiguous and P[i].strides == (8 * kp.N_REC,)
               for i in (kp.P_STATE, kp.P_NODE, kp.P_STS, kp.P_SPOS, kp.P_SEQ, kp.P_KEY, kp.P_THR, kp.P_IDX))
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(64)
    cols = np.zeros((x + 1, 1))
    stack = np.empty(vm.STACK)
    v = np.zeros(vw)
    SEG = lambda: P[kp.P_SEG]  # noqa: E731 (grow_park replaces the arrays)
    cq = 3 * 2  # one threshold heap, then the start heap, then the start queue
    for spos in (10, 20, 30, 25, 40, 5):
        if not kp.park_room(P, 0, 1):
            P = kp.grow_park(P, 0, 1, vw)
        node = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, spos, 0, -1)
        n_ref[node] += 1
        kp.park(P, 0, pk_col, pk_op, pk_t0, pk_t1, 0, 1, node, spos, spos, v, 0, vw, low.code, low.consts,
                np.zeros((1, 1), np.uint8), cols, stack)
    assert SEG()[0, cq + 1] == 4 and SEG()[0, cq - 2] == 2  # 10 20 30 40 queued; 25 and 5 in the heap
    assert kp.min_spos(P, 0) == 5
    got = []
    while (slot := kp.pop_oldest(P, 0)) >= 0:
        got.append(int(P[kp.P_SPOS][slot]))
    assert got == [5, 10, 20, 25, 30, 40]
    assert SEG()[0, cq + 1] == 0 and SEG()[0, cq - 2] == 0 and P[kp.P_PM][kp.PM_LIVE] == 0


def test_sort_by_path_orders_timeouts_by_path():
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(16)
    a = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 5, 0, -1)
    b1 = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 9, 1, a)
    b0 = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 7, 1, a)
    c = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 2, 0, -1)
    node = np.array([b1, a, c, b0], np.int64)
    g = np.array([1, 2, 3, 4], np.int64)
    flag = np.ones(4, np.int32)
    tts = np.array([10, 20, 30, 40], np.int64)
    kp.sort_by_path(node, g, flag, tts, 0, 4, n_row, n_stage, n_parent)
    assert node.tolist() == [c, a, b0, b1] and tts.tolist() == [30, 20, 40, 10]


# ----------------------------------------------------------------------------- whole scans
def shapes(a_vol=500.0):
    """The P5 shape and the shapes beside it; ``a_vol``: how selective the start is."""
    def b(cond):
        return cc.Pattern.begin("a").where(volume > a_vol).followed_by("b").where(cond).within("1h")
    return {
        "P5": b(price > 1.003 * last_a),
        "drop": b(price < 0.997 * last_a),
        "level_ge": b(price >= last_a * 1.001 + 0.01),
        "conjunct": b((price > 1.001 * last_a) & (volume > 300.0)),
        "two_levels": (cc.Pattern.begin("a").where(volume > a_vol).followed_by("b").where(price > 1.002 * last_a)
                       .followed_by("c").where(price > 1.002 * cc.last("price", of="b")).within("1h")),
        "any": (cc.Pattern.begin("a").where(volume > a_vol + 200.0).followed_by_any("b").where(price > 1.001 * last_a)
                .within("2s")),
        "no_window": cc.Pattern.begin("a").where(volume > a_vol + 300.0).followed_by("b").where(price > 1.003 * last_a),
    }


SHAPES = shapes()
SKIPS = {"none": NoSkip(), "next": SkipToNext(), "past": SkipPastLastEvent(), "first": SkipToFirst("a"),
         "last": SkipToLast("a")}


def _ticks(n, keys, seed):
    from colcep.tools.ticks import make_ticks
    return make_ticks(n, keys, seed)


def _run(p, tbl, timeouts, batch=None, snapshot=False):
    m = cc.Matcher(p, key="name", time="ts", timeouts=timeouts, columns=None)
    if batch is None:
        return pa.concat_tables([m.process(tbl), m.close()])
    parts = []
    for i in range(0, tbl.num_rows, batch):
        parts.append(m.process(tbl.slice(i, batch)))
        if snapshot:
            m = cc.Matcher.restore(cc.compile(p), m.snapshot())
    parts.append(m.close())
    return pa.concat_tables(parts)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("skip", list(SKIPS))
def test_shapes_in_batches_equal_the_whole_run(shape, skip):
    p = SHAPES[shape].skip(SKIPS[skip])
    # ~190 and ~150 starts a key: more than colcep.engine.program.PARK_MIN live runs, so they park
    tbl, one_key = _ticks(1500, 2, 11), _ticks(600, 1, 11)
    for timeouts in (False, True):
        whole = _run(p, tbl, timeouts)
        assert whole.num_rows > 0
        assert _run(p, tbl, timeouts, batch=97, snapshot=True).equals(whole)
        assert _run(p, one_key, timeouts, batch=1).equals(_run(p, one_key, timeouts))


def _case(p, tbl, within_ms):
    from colcep.lang.json_format import to_dict
    d = tbl.to_pydict()
    events = [{"id": i, "name": d["name"][i], "ts": d["ts"][i], "price": d["price"][i], "volume": d["volume"][i]}
              for i in range(tbl.num_rows)]
    pattern = dict(to_dict(p, key="name"), within_ms=within_ms)  # the reference reads within_ms
    del pattern["within"]
    return {"id": "park", "pattern": pattern, "events": events}


def _key(m):
    return tuple(sorted((k, tuple(v)) for k, v in m.items()))


@pytest.mark.parametrize("shape", ["P5", "drop", "conjunct", "two_levels", "any"])
@pytest.mark.parametrize("skip", ["none", "past", "first"])
def test_shapes_equal_the_reference(shape, skip):
    ms = 2000 if shape == "any" else 400  # runs time out inside the data; ~100 live a key, so they park
    p = shapes(5.0)[shape].skip(SKIPS[skip]).within(ms)
    case = _case(p, _ticks(400, 2, 3), ms)
    for timeouts in (False, True):
        got, got_to = engine_colcep(case, timeouts)
        ref, ref_to = engine_reference(case, timeouts)
        assert sorted(map(_key, got)) == sorted(map(_key, ref))
        assert sorted((_key(m), t) for m, t in got_to) == sorted((_key(m), t) for m, t in ref_to)


# runs of one start reach the parked stage by two paths (with and without z): their matches at
# one event are ordered by path, not by when they were parked
OPTIONAL_FIRST = (cc.Pattern.begin("z").where(volume > 800.0).optional().followed_by("a").where(volume > 500.0)
                  .followed_by("b").where(price > 1.003 * last_a).within("1h"))


@pytest.mark.parametrize("shape", list(SHAPES) + ["optional_first"])
@pytest.mark.parametrize("skip", list(SKIPS))
def test_parked_runs_give_what_stepping_them_gives(shape, skip, monkeypatch):
    """The park's shortcuts (a start parked as it is made, a woken run that completes emitted from
    the park, ``kernels.park.park_start`` / ``emit_woken``) give the rows, order and match ids of
    stepping every run on every event (no key parks)."""
    from colcep.engine import program as cprog
    p = (OPTIONAL_FIRST if shape == "optional_first" else SHAPES[shape]).skip(SKIPS[skip])
    tbl, park_min = _ticks(1500, 2, 11), cprog.PARK_MIN
    for timeouts in (False, True):
        parked = _run(p, tbl, timeouts)
        monkeypatch.setattr(cprog, "PARK_MIN", 1 << 62)
        stepped = _run(p, tbl, timeouts)
        monkeypatch.setattr(cprog, "PARK_MIN", park_min)
        assert stepped.num_rows > 0 and parked.equals(stepped)
