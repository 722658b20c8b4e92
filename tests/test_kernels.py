"""Kernel unit tests against plain-Python models: the shared buffer (allocation, release,
reuse, extraction), the condition bytecode VM, and the reference's Dewey numbers."""
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep.conditions import lower
from colcep.kernels import buffer as kb
from colcep.kernels import nfa as knfa
from colcep.kernels import vm
from reference import dewey_add_stage, dewey_compatible, dewey_increase, eval_expr


# ----------------------------------------------------------------------------- shared buffer
def test_alloc_extract_and_release_chain():
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(4)
    n_row, n_stage, n_parent, n_ref = kb.reserve(n_row, n_stage, n_parent, n_ref, meta, 3)
    a = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 10, 0, -1)
    b = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 12, 1, a)
    c = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 15, 1, b)
    n_ref[c] += 1  # a run points at c
    rows, stages = np.empty(3, np.int64), np.empty(3, np.int32)
    assert kb.extract(n_row, n_stage, n_parent, c, rows, stages) == 3
    assert rows.tolist() == [10, 12, 15] and stages.tolist() == [0, 1, 1]
    assert kb.live_nodes(n_ref, meta[0]) == 3
    kb.release(n_parent, n_ref, meta, c)  # the run dies: the whole chain goes
    assert kb.live_nodes(n_ref, meta[0]) == 0
    assert meta[2] == 3  # three slots on the free list


def test_shared_prefix_survives_until_last_reference():
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(8)
    a = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 1, 0, -1)
    b1 = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 2, 1, a)
    b2 = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 3, 1, a)
    n_ref[b1] += 1
    n_ref[b2] += 1
    kb.release(n_parent, n_ref, meta, b1)
    assert kb.live_nodes(n_ref, meta[0]) == 2 and n_ref[a] == 1
    assert kb.min_live_row(n_row, n_ref, meta[0]) == 1
    kb.release(n_parent, n_ref, meta, b2)
    assert kb.live_nodes(n_ref, meta[0]) == 0
    assert kb.min_live_row(n_row, n_ref, meta[0]) == -1


def test_released_slots_are_reused_before_growing():
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(4)
    nodes = [kb.alloc(n_row, n_stage, n_parent, n_ref, meta, i, 0, -1) for i in range(4)]
    for x in nodes:
        n_ref[x] += 1
        kb.release(n_parent, n_ref, meta, x)
    grown = kb.reserve(n_row, n_stage, n_parent, n_ref, meta, 4)
    assert grown[0] is n_row  # no growth: four free slots
    again = {kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 9, 0, -1) for _ in range(4)}
    assert again == set(nodes) and meta[0] == 4


def test_reserve_grows_geometrically_and_keeps_content():
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(2)
    a = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 7, 3, -1)
    n_row, n_stage, n_parent, n_ref = kb.reserve(n_row, n_stage, n_parent, n_ref, meta, 10)
    assert n_row.shape[0] >= 11 and n_row[a] == 7 and n_stage[a] == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 30), st.booleans()), min_size=1, max_size=60))
def test_buffer_matches_a_python_model(ops):
    """Random allocations (parent = an earlier live node) and run deaths, checked against a
    dict model: live set, paths and free-list accounting."""
    buf = list(kb.new_buffer(2))
    model_parent, model_ref, handles = {}, {}, []
    for parent_pick, kill in ops:
        buf[:4] = kb.reserve(*buf, 1)
        live = [h for h in handles if h in model_ref]
        parent = live[parent_pick % len(live)] if live and parent_pick >= 0 else -1
        x = kb.alloc(*buf, parent_pick + 100, 0, parent)
        model_parent[x] = parent
        model_ref[x] = 1
        if parent >= 0:
            model_ref[parent] += 1
        buf[3][x] += 1  # a run holds it
        handles.append(x)
        if kill and live:
            victim = live[0]
            kb.release(buf[2], buf[3], buf[4], victim)
            node = victim
            while node >= 0:
                model_ref[node] -= 1
                if model_ref[node] > 0:
                    break
                del model_ref[node]
                node = model_parent[node]
            handles.remove(victim)
        assert kb.live_nodes(buf[3], buf[4][0]) == len(model_ref)
        for h in model_ref:
            path, node = [], h
            while node >= 0:
                path.append(node)
                node = model_parent[node]
            assert kb.path_length(buf[2], h) == len(path)


# ----------------------------------------------------------------------------- bytecode VM
FIELDS = ["price", "volume"]


@st.composite
def num_exprs(draw, depth=0):
    kind = draw(st.sampled_from(["col", "lit", "agg", "arith"] if depth < 3 else ["col", "lit", "agg"]))
    if kind == "col":
        return cc.col(draw(st.sampled_from(FIELDS)))
    if kind == "lit":
        return cc.lit(float(draw(st.integers(-3, 9))))
    if kind == "agg":
        fn = draw(st.sampled_from(["first", "last", "sum", "avg", "min", "max"]))
        of = draw(st.sampled_from([["a"], ["b"], ["a", "b"]]))
        if draw(st.booleans()):
            return cc.count(of=of)
        return getattr(cc, fn)(draw(st.sampled_from(FIELDS)), of=of)
    a, b = draw(num_exprs(depth + 1)), draw(num_exprs(depth + 1))
    return [a + b, a - b, a * b, a / b][draw(st.integers(0, 3))]


@st.composite
def bool_exprs(draw, depth=0):
    kind = draw(st.sampled_from(["cmp", "and", "or", "not", "isin", "isnull"] if depth < 2 else ["cmp"]))
    if kind == "cmp":
        a, b = draw(num_exprs()), draw(num_exprs())
        return [a == b, a != b, a < b, a <= b, a > b, a >= b][draw(st.integers(0, 5))]
    if kind in ("and", "or"):
        x, y = draw(bool_exprs(depth + 1)), draw(bool_exprs(depth + 1))
        return x & y if kind == "and" else x | y
    if kind == "not":
        return ~draw(bool_exprs(depth + 1))
    if kind == "isin":
        return draw(num_exprs()).is_in([1.0, 2.0, 5.0])
    return draw(num_exprs()).is_null()


@settings(max_examples=300, deadline=None)
@given(bool_exprs(), st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 9), st.integers(0, 9)),
                              max_size=5), st.integers(0, 9), st.integers(0, 9))
def test_vm_matches_python_evaluation(expr, taken, price, volume):
    """The kernel's bytecode + V gives the value the reference gets from the event lists."""
    strings: dict = {}
    low = lower([expr], ["a", "b"], strings)
    event = {"price": float(price), "volume": float(volume)}
    match = {}
    for pos, (stage, p, v) in enumerate(taken):
        match.setdefault(stage, []).append({"price": float(p), "volume": float(v), "__pos": pos})
    # V as the kernel builds it
    v = np.empty(max(1, low.v_width))
    vm.v_init(v)
    cols = np.array([[_value(e, event)] for e in low.col_exprs] or [[0.0]], np.float64)
    masks = np.array([[bool(eval_expr(e, event, None))] for e in low.mask_exprs] or [[0]], np.uint8)
    for pos, (stage, p, vol) in enumerate(taken):
        for g in range(len(low.vg_stage)):
            if low.vg_stage[g] == ["a", "b"].index(stage):
                c = low.vg_col[g]
                x = _value(low.col_exprs[c], {"price": float(p), "volume": float(vol)}) if c >= 0 else 0.0
                vm.v_update(v, g * vm.VW, x, float(pos))
    # the kernel's entry point for a condition (mask, program or negation), V at an offset
    v_at = np.concatenate([np.full(7, np.nan), v])
    n = len(low.cond_kind)
    got = knfa._cond(0, low.cond_kind, low.cond_a, low.cond_b, low.code, low.consts, 0, masks, cols, v_at, 7,
                     np.empty(vm.STACK), np.zeros(n, np.uint8), np.full(n, -1, np.int64), 1)
    assert got == bool(eval_expr(expr, event, match))


def _value(e, event):
    x = eval_expr(e, event, None)
    return math.nan if x is None else float(x)


# ----------------------------------------------------------------------------- Dewey numbers
def test_dewey_rules():
    """Flink's DeweyNumber (used by the reference): increase, addStage, compatibility."""
    v = (1,)
    assert dewey_increase(v) == (2,) and dewey_increase(v, 3) == (4,)
    assert dewey_add_stage((1, 2)) == (1, 2, 0)
    assert dewey_compatible((1, 0), (1,))              # longer, with the other as prefix
    assert not dewey_compatible((2, 0), (1,))          # prefix differs
    assert dewey_compatible((1, 3), (1, 2))            # same length: last digit >= and same prefix
    assert not dewey_compatible((1, 1), (1, 2))
    assert not dewey_compatible((2, 2), (1, 2))
    assert not dewey_compatible((1,), (1, 0))          # shorter never
