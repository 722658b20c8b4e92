"""Kernel unit tests against plain-Python models: the shared buffer (allocation, release,
reuse, extraction), the condition bytecode VM, waiting runs (which states wait, the scan for
a run's next event), threshold lowering, and the reference's Dewey numbers."""
import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep.tools import examples as ex
from colcep.engine.compiler import compile_pattern
from colcep.engine.conditions import lower
from colcep.kernels import buffer as kb
from colcep.kernels import codes as kcodes
from colcep.kernels import conds as kconds
from colcep.kernels import graph as kgraph
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
    kb.release(n_row, n_stage, n_parent, n_ref, meta, c)  # the run dies: the whole chain goes
    assert kb.live_nodes(n_ref, meta[0]) == 0
    assert meta[2] == 3  # three slots on the free list


@pytest.mark.parametrize("seed", range(10))
def test_buffer_calls_against_a_model(seed):
    """Random allocations, shares and releases in calls that succeed (``close_call``) or fail
    (``undo_call``), against a plain-Python model: a new node never takes a slot live or kept for
    an undo; after each call the live slots, their row, stage and parent are the model's, every
    other slot below the high water is free (``META_NFREE``), and an undone call leaves the
    nodes it found. Slots a call frees are reused by later calls (two free lists)."""
    rng = np.random.default_rng(seed)
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(4)
    nodes: dict = {}  # live slot -> [row, stage, parent, references]
    held: list = []  # the holders' references (a run's or a held match's node)

    def drop(x: int) -> None:
        while x >= 0:
            nodes[x][3] -= 1
            if nodes[x][3] > 0:
                return
            parent = nodes.pop(x)[2]
            x = parent

    reused = 0
    row = 0
    for call in range(40):
        saved = ({k: list(v) for k, v in nodes.items()}, list(held))
        kb.open_call(meta)
        kept = set(nodes)  # slots live when the call opened
        for _ in range(int(rng.integers(1, 30))):
            op = rng.integers(0, 4) if held else 0
            if op <= 1:  # a new node: a start, or a holder's node extended
                parent = -1 if op == 0 else held[int(rng.integers(0, len(held)))]
                n_row, n_stage, n_parent, n_ref = kb.reserve(n_row, n_stage, n_parent, n_ref, meta, 1)
                high = meta[kb.META_HIGH]
                row += 1
                i = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, row, int(rng.integers(0, 3)), parent)
                assert i not in nodes and i not in kept, (call, i)
                reused += i < high and call > 0
                n_ref[i] += 1
                nodes[i] = [row, int(n_stage[i]), parent, 1]
                if parent >= 0:
                    nodes[parent][3] += 1
                held.append(i)
            elif op == 2:  # a holder's node shared by another
                x = held[int(rng.integers(0, len(held)))]
                n_ref[x] += 1
                nodes[x][3] += 1
                held.append(x)
            else:  # a holder lets go
                x = held.pop(int(rng.integers(0, len(held))))
                kb.release(n_row, n_stage, n_parent, n_ref, meta, x)
                drop(x)
        if rng.random() < 0.3:
            kb.undo_call(n_row, n_stage, n_parent, n_ref, meta, np.array(saved[1], np.int64))
            nodes, held = saved
        else:
            kb.close_call(n_parent, n_ref, meta)
        high = int(meta[kb.META_HIGH])
        live = {i for i in range(high) if n_ref[i] >= 0}
        assert live == set(nodes), call
        for i, (r, st_, par, refs) in nodes.items():
            assert (n_row[i], n_stage[i], n_parent[i], n_ref[i]) == (r, st_, par, refs), (call, i)
        assert meta[kb.META_NFREE] == high - len(live) and meta[kb.META_QCOUNT] == 0
        free = []  # the two free lists walked: every slot not live, each once
        x = meta[kb.META_FREE]
        while x >= 0:
            free.append(x)
            x = n_parent[x]
        x = meta[kb.META_FREED]
        while x >= 0:
            free.append(x)
            x = -2 - n_ref[x]
        assert sorted(free) == sorted(set(range(high)) - live), call
    assert reused > 20  # (slots freed by earlier calls were taken again)


def test_shared_prefix_survives_until_last_reference():
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(8)
    a = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 1, 0, -1)
    b1 = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 2, 1, a)
    b2 = kb.alloc(n_row, n_stage, n_parent, n_ref, meta, 3, 1, a)
    n_ref[b1] += 1
    n_ref[b2] += 1
    kb.release(n_row, n_stage, n_parent, n_ref, meta, b1)
    assert kb.live_nodes(n_ref, meta[0]) == 2 and n_ref[a] == 1
    assert kb.min_live_row(n_row, n_stage, n_ref, meta[0]) == 1
    kb.release(n_row, n_stage, n_parent, n_ref, meta, b2)
    assert kb.live_nodes(n_ref, meta[0]) == 0
    assert kb.min_live_row(n_row, n_stage, n_ref, meta[0]) == -1


def test_released_slots_are_reused_before_growing():
    n_row, n_stage, n_parent, n_ref, meta = kb.new_buffer(4)
    nodes = [kb.alloc(n_row, n_stage, n_parent, n_ref, meta, i, 0, -1) for i in range(4)]
    for x in nodes:
        n_ref[x] += 1
        kb.release(n_row, n_stage, n_parent, n_ref, meta, x)
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
            kb.release(*buf, victim)
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


def _walk(buf, node, walk, write=False, m_off=None, nm=0, e_row=None, e_stage=None, ne=0):
    if m_off is None:
        m_off, e_row, e_stage = np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    return kb.walk_paths(buf[0], buf[1], buf[2], node, walk, write, m_off, nm, e_row, e_stage, ne)


def _records(m_off, e_row, e_stage, lo, hi):
    return [list(zip(e_row[m_off[k]:m_off[k + 1]].tolist(), e_stage[m_off[k]:m_off[k + 1]].tolist()))
            for k in range(lo, hi)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 63), st.integers(0, 63), st.integers(0, 3)),
                min_size=1, max_size=40))
def test_buffer_with_joins_matches_a_python_model(ops):
    """Random allocations (parent = any live node, JOINs included, or none), extra references,
    JOINs of two held references (possibly to the same node) and releases, against a dict
    model: live slots and reference counts, every held node's paths (counted and written),
    min_live_row; then releasing everything empties the buffer onto the free list."""
    buf = list(kb.new_buffer(2))
    walk = np.empty(4 * 2 + 16, np.int64)
    node, ref, handles = {}, {}, []  # node: ('n', row, stage, parent) or ('j', first, second)

    def grow():
        nonlocal walk
        buf[:4] = kb.reserve(*buf, 1)
        walk = np.empty(4 * buf[0].shape[0] + 16, np.int64)

    def model_release(x):
        todo = [x]
        while todo:
            y = todo.pop()
            ref[y] -= 1
            if ref[y] == 0:
                del ref[y]
                k = node.pop(y)
                todo += [k[1], k[2]] if k[0] == 'j' else [k[3]] if k[3] >= 0 else []

    def paths(x):  # root first; a JOIN's first side first
        if x < 0:
            return [[]]
        k = node[x]
        if k[0] == 'j':
            return paths(k[1]) + paths(k[2])
        return [p + [(k[1], k[2])] for p in paths(k[3])]

    def counts(x, memo):  # (paths, events) without enumerating
        if x < 0:
            return 1, 0
        if x not in memo:
            k = node[x]
            if k[0] == 'j':
                (p1, e1), (p2, e2) = counts(k[1], memo), counts(k[2], memo)
                memo[x] = p1 + p2, e1 + e2
            else:
                p, e = counts(k[3], memo)
                memo[x] = p, e + p
        return memo[x]

    for kind, i, j, stage in ops:
        live = sorted(ref)
        if kind == 0:  # a new node held by the caller
            grow()
            pick = i % (len(live) + 1)
            parent = live[pick] if pick < len(live) else -1
            x = kb.alloc(*buf, j, stage, parent)
            assert x not in ref
            node[x], ref[x] = ('n', j, stage, parent), 1
            if parent >= 0:
                ref[parent] += 1
            buf[3][x] += 1
            handles.append(x)
        elif kind == 1 and live:  # another reference to a live node
            x = live[i % len(live)]
            buf[3][x] += 1
            ref[x] += 1
            handles.append(x)
        elif kind == 2 and len(handles) >= 2:  # merge two held references
            ia = i % len(handles)
            ib = (ia + 1 + j % (len(handles) - 1)) % len(handles)
            a, b = handles[ia], handles[ib]
            for k in sorted((ia, ib), reverse=True):
                del handles[k]
            grow()
            x = kb.join(*buf, a, b)
            assert x not in ref
            node[x], ref[x] = ('j', a, b), 1
            handles.append(x)
        elif kind == 3 and handles:
            x = handles.pop(i % len(handles))
            kb.release(*buf, x)
            model_release(x)

        high = buf[4][0]
        n_ref = buf[3]
        assert kb.live_nodes(n_ref, high) == len(ref)
        assert {x: int(n_ref[x]) for x in np.flatnonzero(n_ref[:high] >= 0).tolist()} == ref
        rows = [k[1] for k in node.values() if k[0] == 'n']
        assert kb.min_live_row(buf[0], buf[1], n_ref, high) == (min(rows) if rows else -1)
        memo = {}
        for h in set(handles):
            np_, ne_ = counts(h, memo)
            assert _walk(buf, h, walk) == (np_, ne_)
            if np_ > 300:
                continue
            m_off = np.full(np_ + 2, -9, np.int64)
            e_row, e_stage = np.full(ne_ + 2, -9, np.int64), np.full(ne_ + 2, -9, np.int32)
            assert _walk(buf, h, walk, True, m_off, 0, e_row, e_stage, 0) == (np_, ne_)
            assert m_off[0] == 0 and m_off[np_ + 1] == -9 and (e_row[ne_:] == -9).all()
            assert _records(m_off, e_row, e_stage, 0, np_) == paths(h)

    for x in handles:
        kb.release(*buf, x)
    high, free = buf[4][0], []
    assert kb.live_nodes(buf[3], high) == 0 and buf[4][2] == high
    x = buf[4][1]
    while x >= 0 and len(free) <= high:  # the free list links every used slot once
        free.append(x)
        x = buf[2][x]
    assert sorted(free) == list(range(high))


def test_walk_paths_and_release_on_a_deep_chain_with_joins():
    """~2,000 chained nodes, a JOIN with a fresh root every fifth node and, three times, a
    JOIN of a node with its own child followed by a JOIN of that JOIN with its child. Path
    and event counts are tracked during construction; releasing the tip frees everything."""
    buf = list(kb.new_buffer(16))
    cnt, ev = {-1: 1}, {-1: 0}  # paths and events ending at a node, by construction
    row = 0

    def new(parent):  # a new node held by the caller
        nonlocal row
        buf[:4] = kb.reserve(*buf, 1)
        x = kb.alloc(*buf, row, row % 3, parent)
        row += 1
        buf[3][x] += 1
        cnt[x], ev[x] = cnt[parent], ev[parent] + cnt[parent]
        return x

    def joined(a, b):
        buf[:4] = kb.reserve(*buf, 1)
        x = kb.join(*buf, a, b)
        cnt[x], ev[x] = cnt[a] + cnt[b], ev[a] + ev[b]
        return x

    def check(x):
        walk = np.empty(4 * buf[0].shape[0] + 16, np.int64)
        assert _walk(buf, x, walk) == (cnt[x], ev[x])

    tip = new(-1)
    for i in range(1, 2000):
        y = new(tip)
        kb.release(*buf, tip)  # the child keeps it
        tip = y
        if i % 5 == 0:
            tip = joined(tip, new(-1))
        if i % 600 == 0:  # sides sharing a prefix, nested
            tip = joined(tip, new(tip))
            tip = joined(tip, new(tip))
        if i % 250 == 0:
            check(tip)
    check(tip)
    assert cnt[tip] == (((1 + 120) * 4 + 120) * 4 + 120) * 4 + 39  # +1 per fresh root, x4 per pair
    kb.release(*buf, tip)
    assert kb.live_nodes(buf[3], buf[4][0]) == 0 and buf[4][2] == buf[4][0]


def test_walk_paths_write_appends_after_existing_records():
    buf = list(kb.new_buffer(8))
    a = kb.alloc(*buf, 1, 0, -1)
    b = kb.alloc(*buf, 2, 1, a)
    c = kb.alloc(*buf, 3, 0, -1)
    buf[3][b] += 2  # one reference for the JOIN, one kept
    buf[3][c] += 1
    j = kb.join(*buf, b, c)
    d = kb.alloc(*buf, 4, 2, j)
    walk = np.empty(4 * 8 + 16, np.int64)
    m_off = np.full(8, -9, np.int64)
    e_row, e_stage = np.full(12, -9, np.int64), np.full(12, -9, np.int32)
    out = (m_off, 0, e_row, e_stage, 0)
    for x, expect in [(b, (1, 2)), (d, (3, 7)), (a, (4, 8)), (j, (6, 11))]:  # join-free and merged
        nm, ne = _walk(buf, x, walk, True, m_off, out[1], e_row, e_stage, out[4])
        assert (nm, ne) == expect
        out = (m_off, nm, e_row, e_stage, ne)
    assert m_off.tolist() == [0, 2, 5, 7, 8, 10, 11, -9]
    assert _records(m_off, e_row, e_stage, 0, 6) == [
        [(1, 0), (2, 1)], [(1, 0), (2, 1), (4, 2)], [(3, 0), (4, 2)], [(1, 0)], [(1, 0), (2, 1)], [(3, 0)]]
    assert e_row[11] == -9 and e_stage[11] == -9


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
    return [a + b, a - b, a * b, a / b, a.quot(b)][draw(st.integers(0, 4))]


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
    v, match = _v_and_match(low, [(s, float(p), float(vol)) for s, p, vol in taken])
    masks, cols = _event_rows(low, [event])
    # the kernel's entry point for a condition (mask, program or negation), V at an offset
    v_at = np.concatenate([np.full(7, np.nan), v])
    n = len(low.cond_kind)
    got = kconds.cond(0, low.cond_kind, low.cond_a, low.cond_b, low.code, low.consts, 0, masks, cols, v_at, 7,
                     np.empty(vm.STACK), np.zeros(n, np.uint8), np.full(n, -1, np.int64), 1)
    assert got == bool(eval_expr(expr, event, match))


def _value(e, event):
    x = eval_expr(e, event, None)
    return math.nan if x is None else float(x)


def _v_and_match(low, taken, stages=("a", "b")):
    """A run's V as the kernel builds it from the events it took ((stage, price, volume),
    None = null), and the same partial match as the reference sees it."""
    v = np.empty(max(1, low.v_width))
    vm.v_init(v)
    match = {}
    for pos, (stage, p, vol) in enumerate(taken):
        ev = {"price": p, "volume": vol, "__pos": pos}
        match.setdefault(stage, []).append(ev)
        for g in range(len(low.vg_stage)):
            if low.vg_stage[g] == stages.index(stage):
                c = low.vg_col[g]
                vm.v_update(v, g * vm.VW, _value(low.col_exprs[c], ev) if c >= 0 else 0.0, float(pos))
    return v, match


def _event_rows(low, events):
    """The masks and float rows the matcher precomputes for ``events``."""
    masks = np.zeros((max(1, len(low.mask_exprs)), len(events)), np.uint8)
    cols = np.zeros((max(1, len(low.col_exprs)), len(events)), np.float64)
    for r, ev in enumerate(events):
        for i, e in enumerate(low.mask_exprs):
            masks[i, r] = bool(eval_expr(e, ev, None))
        for i, e in enumerate(low.col_exprs):
            cols[i, r] = _value(e, ev)
    return masks, cols


# ----------------------------------------------------------------------------- waiting runs
def _sleep_model(p, low):
    """sleep_conditions' rule, transcribed: NORMAL / PENDING, one TAKE(c >= 0), one IGNORE to
    itself under true or not(c), no PROCEED."""
    out = []
    for s in range(p.n_states):
        edges = [(p.trans_action[t], p.trans_target[t], p.trans_cond[t])
                 for t in range(p.trans_ptr[s], p.trans_ptr[s + 1])]
        take = [c for a, _, c in edges if a == kcodes.TAKE]
        ign = [(t, c) for a, t, c in edges if a == kcodes.IGNORE]
        ok = (p.state_kind[s] in (kcodes.NORMAL, kcodes.PENDING) and len(take) == 1 and take[0] >= 0 and len(ign) == 1
              and ign[0][0] == s and not any(a == kcodes.PROCEED for a, _, _ in edges)
              and (ign[0][1] < 0 or (low.cond_kind[ign[0][1]] == kcodes.COND_NOT and low.cond_a[ign[0][1]] == take[0])))
        out.append(take[0] if ok else -1)
    return out


def _sleeping(pattern):
    p = compile_pattern(pattern)
    low = lower(p.conditions, p.stage_names, {})
    got = kgraph.sleep_conditions(p.state_kind, p.trans_ptr, p.trans_action, p.trans_target, p.trans_cond,
                                low.cond_kind, low.cond_a).tolist()
    assert got == _sleep_model(p, low)
    return p, {name: (None if c < 0 else p.conditions[c].key()) for name, c in zip(p.state_names, got)}


def test_sleep_conditions_on_compiled_patterns():
    p, w = _sleeping(ex.P2)  # followed_by: IGNORE under not(take)
    b_cond = ex.P2.stages[1].condition.key()
    assert w == {"$endState$": None, "a": None, "b": None,  # b has a PROCEED edge to c
                 "b:0": b_cond, "b:1": b_cond, "c": ex.P2.stages[2].condition.key()}
    p, w = _sleeping(ex.P4)  # followed_by_any: IGNORE true
    assert w == {"$endState$": None, "a": None, "b": ex.P4.stages[1].condition.key(),
                 "c": ex.P4.stages[2].condition.key()}
    assert all(p.trans_cond[t] == -1 for t in range(len(p.trans_action)) if p.trans_action[t] == kcodes.IGNORE)
    assert set(_sleeping(ex.P1)[1].values()) == {None}  # strict next: no IGNORE edge
    assert set(_sleeping(ex.THREE_RISING)[1].values()) == {None}
    assert _sleeping(ex.SPIKE_NO_RECOVERY)[1]["recovery"] is None  # PENDING with a PROCEED edge
    # c: TAKE and IGNORE(not take) to itself, but also a PROCEED edge into the STOP state of x
    nfb = (cc.Pattern.begin("a").where(cc.col("volume") > 5.0).not_followed_by("x").where(cc.col("price") > 1.0)
           .followed_by("c").where(cc.col("price") < cc.last("price", of="a")))
    p, w = _sleeping(nfb)
    s = p.state_names.index("c")
    assert w["c"] is None and kcodes.PROCEED in p.trans_action[p.trans_ptr[s]:p.trans_ptr[s + 1]]
    for pat in (ex.P3, ex.PAPER_QUERY3, ex.ANY_TRIPLE):
        _sleeping(pat)
    # an event-only followed_by condition: its IGNORE is lowered as the TAKE mask's negation
    ev = cc.Pattern.begin("a").where(cc.col("volume") > 5.0).followed_by("b").where(cc.col("price") > 3.0)
    p, w = _sleeping(ev)
    assert w["b"] == ev.stages[1].condition.key()


def test_sleep_conditions_rule_on_hand_built_tables():
    T, I, P = kcodes.TAKE, kcodes.IGNORE, kcodes.PROCEED
    edges = [[],                                       # 0 final
             [(T, 0, 0), (I, 2, 1)],                   # IGNORE(not c0) to another state
             [(T, 0, 0), (I, 2, 2)],                   # IGNORE(not c3): not the take condition
             [(T, 0, 0), (I, 3, -1)],                  # PENDING, IGNORE true: waits on c0
             [(T, 4, 0), (I, 4, -1)],                  # STOP
             [(T, 0, -1), (I, 5, -1)],                 # TAKE true: nothing to wait for
             [(T, 0, 0), (I, 6, -1), (I, 6, 1)],       # two IGNORE edges
             [(T, 0, 0), (T, 1, 0), (I, 7, 1)],        # two TAKE edges
             [(I, 8, 1), (T, 0, 0)],                   # IGNORE(not c0) first: waits on c0
             [(T, 0, 3), (P, 0, -1), (I, 9, 2)]]       # a PROCEED edge
    kinds = [kcodes.FINAL, 0, 0, kcodes.PENDING, kcodes.STOP, 0, 0, 0, 0, 0]
    flat = [e for es in edges for e in es]
    ptr = np.cumsum([0] + [len(es) for es in edges]).astype(np.int32)
    act, tgt, cnd = (np.array([e[i] for e in flat], np.int32) for i in range(3))
    got = kgraph.sleep_conditions(np.array(kinds, np.int8), ptr, act.astype(np.int8), tgt, cnd,
                                np.array([kcodes.COND_PROGRAM, kcodes.COND_NOT, kcodes.COND_NOT, kcodes.COND_PROGRAM], np.int8),
                                np.array([0, 0, 3, 0], np.int32))
    assert got.tolist() == [-1, -1, -1, 0, -1, -1, -1, -1, 0, -1]


E_SIDES = [cc.col("price"), cc.col("volume"), cc.col("price") + 1.0]
M_SIDES = [cc.last("price", of="a"), cc.last("price", of="b") * 0.999, cc.avg("price", of=["a", "b"]),
           cc.max("volume", of="a") - 2.0, cc.count(of="b"), cc.sum("price", of="b") / cc.count(of="b", field="price"),
           cc.first("price", of=["a", "b"]) + (cc.lit(1.0) + cc.lit(1.0))]
OPS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]
MASKS = [cc.col("volume") > 5.0, cc.col("price").is_null(), (cc.col("price") > 6.0) | (cc.col("volume") < 2.0)]
GENERIC = [cc.col("price") > cc.last("price", of="a") + cc.col("volume"),
           (cc.col("price") > cc.last("price", of="a")) & (cc.col("volume") < 5.0),
           cc.last("price", of="a").is_null() | (cc.col("price") >= 7.0)]


@st.composite
def wait_conds(draw):
    """(condition, its match-only side when it compares an event-only number with one)."""
    kind = draw(st.sampled_from(["thr", "thr", "mask", "generic"]))
    m = None
    if kind == "thr":
        e, m, op = draw(st.sampled_from(E_SIDES)), draw(st.sampled_from(M_SIDES)), draw(st.sampled_from(OPS))
        expr = op(e, m) if draw(st.booleans()) else op(m, e)
    else:
        expr = draw(st.sampled_from(MASKS if kind == "mask" else GENERIC))
    return (~expr if draw(st.booleans()) else expr), m


NUMS = st.sampled_from([None] + [float(i) for i in range(10)])  # None: null
TAKEN = st.lists(st.tuples(st.sampled_from(["a", "b"]), NUMS, NUMS), max_size=4)


def _chain(low, c):
    neg = False
    while low.cond_kind[c] == kcodes.COND_NOT:
        neg, c = not neg, low.cond_a[c]
    return c, neg


@settings(max_examples=200, deadline=None)
@given(wait_conds(), TAKEN, st.integers(0, 2**32 - 1),
       st.one_of(st.integers(1, 160), st.integers(80, 160)), st.sampled_from([0.0, 0.0, 0.02, 0.3, 1.0]),
       st.booleans(), st.data())
def test_next_event_matches_a_python_scan(cond, taken, seed, n, hot, outer_not, data):
    """The first event (key order, from ``j``, at most SCAN_AHEAD of them) where the condition
    holds for the run, BIG at an event past ``last_t``; checked against the reference's
    evaluation event by event."""
    expr, m = cond
    low = lower([expr], ["a", "b"], {})
    if outer_not:  # a negation over the whole condition (also over a mask: the kernel allows it)
        for name, x in (("cond_kind", kcodes.COND_NOT), ("cond_a", 0), ("cond_b", 0)):
            setattr(low, name, np.append(getattr(low, name), getattr(low, name).dtype.type(x)))
        low.cond_thr = np.vstack([low.cond_thr, np.array([[-1, 0, 0, 0]], np.int32)])
    c = len(low.cond_kind) - 1 if outer_not else 0
    base, neg = _chain(low, c)
    assert (low.cond_thr[base, 0] >= 0) == (m is not None)
    rng = np.random.default_rng(seed)
    n_all = n + int(rng.integers(0, 20))  # other keys' rows around the key's
    order = rng.permutation(n_all).astype(np.int64)
    row_lo = int(rng.integers(0, n_all - n + 1))
    price = np.where(rng.random(n_all) < hot, rng.integers(5, 10, n_all), rng.integers(0, 5, n_all)).astype(float)
    price[rng.random(n_all) < 0.1] = np.nan
    volume = rng.integers(0, 10, n_all).astype(float)
    events = [{"price": None if math.isnan(p) else p, "volume": vol} for p, vol in zip(price, volume)]
    ts = np.zeros(n_all, np.int64)
    ts[order[row_lo:row_lo + n]] = np.cumsum(rng.integers(0, 3, n))
    j = data.draw(st.one_of(st.integers(0, min(n, 3)), st.integers(0, n)), label="j")
    last_t = data.draw(st.one_of(st.just(int(ts.max())), st.integers(-1, int(ts.max()))), label="last_t")
    v, match = _v_and_match(low, taken)
    masks, cols = _event_rows(low, events)
    got = kconds.next_event(c, low.cond_kind, low.cond_a, low.cond_b, low.cond_thr, low.code, low.consts, masks,
                           cols, np.concatenate([np.full(5, np.nan), v]), 5, np.empty(vm.STACK), order, row_lo,
                           j, n, ts, last_t)
    thr = None if m is None else eval_expr(m, {}, match)
    if m is not None and not neg and (thr is None or thr != thr):
        want = kconds.BIG  # a null threshold: the condition never holds
    else:
        want = min(n, j + kconds.SCAN_AHEAD)
        for jj in range(j, want):
            row = order[row_lo + jj]
            if ts[row] > last_t:
                want = kconds.BIG
                break
            if bool(eval_expr(expr, events[row], match)) != outer_not:
                want = jj
                break
    assert got == want


def test_next_event_scan_cap_and_window():
    low = lower([cc.col("price") > cc.last("price", of="a")], ["a", "b"], {})
    v, _ = _v_and_match(low, [("a", 5.0, 1.0)])
    masks, cols = _event_rows(low, [{"price": 1.0, "volume": 1.0}] * 200)
    order, ts = np.arange(200, dtype=np.int64), np.arange(200, dtype=np.int64)

    def scan(j, last_t):
        return kconds.next_event(0, low.cond_kind, low.cond_a, low.cond_b, low.cond_thr, low.code, low.consts, masks,
                                cols, v, 0, np.empty(vm.STACK), order, 0, j, 200, ts, last_t)
    assert scan(10, 1000) == 10 + kconds.SCAN_AHEAD  # nothing within SCAN_AHEAD: look again from there
    assert scan(150, 1000) == 200
    assert scan(10, 30) == kconds.BIG  # the window ends first
    cols[0, 40] = 6.0
    assert scan(10, 1000) == 40 and scan(10, 39) == kconds.BIG and scan(41, 1000) == 41 + kconds.SCAN_AHEAD


# ----------------------------------------------------------------------------- threshold lowering
def _thr(e):
    low = lower([e], ["a", "b"], {})
    x, op, _, _ = low.cond_thr[0].tolist()
    return (None if x < 0 else low.col_exprs[x].key()), op


def test_threshold_lowering():
    price, last_a = cc.col("price"), cc.last("price", of="a")
    assert _thr(price > last_a) == (price.key(), vm.C_GT)
    assert _thr(last_a * 0.999 > price) == (price.key(), vm.C_LT)  # flipped
    assert _thr(last_a <= price) == (price.key(), vm.C_GE)
    assert _thr((price + 1) >= cc.avg("price", of=["a", "b"])) == ((price + 1).key(), vm.C_GE)
    assert _thr(cc.count(of="b") == cc.col("volume")) == (cc.col("volume").key(), vm.C_EQ)
    for e in (price > last_a + cc.col("volume"),          # the event on both sides
              (price > last_a) & (cc.col("volume") < 5),  # a boolean combination
              price > 3.0,                                # event-only: a mask
              last_a > cc.first("price", of="a"),         # no event at all
              (price > 3.0) == (last_a > 2.0)):           # booleans, not a float row
        assert _thr(e)[0] is None, e
    low = lower([~(price > last_a)], ["a", "b"], {})  # the negation has none, its inner condition has
    assert low.cond_kind.tolist() == [kcodes.COND_NOT, kcodes.COND_PROGRAM]
    assert low.cond_thr[0, 0] == -1 and low.cond_thr[1, 0] >= 0


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(E_SIDES), st.sampled_from(M_SIDES), st.sampled_from(OPS), st.booleans(), TAKEN, NUMS, NUMS)
def test_threshold_program_agrees_with_the_condition(e, m, op, event_left, taken, price, volume):
    """column <op> eval_value(threshold) == the whole condition's program == the reference."""
    expr = op(e, m) if event_left else op(m, e)
    low = lower([expr], ["a", "b"], {})
    x, k, start, end = low.cond_thr[0].tolist()
    assert x >= 0 and low.col_exprs[x].key() == e.key()
    v, match = _v_and_match(low, taken)
    event = {"price": price, "volume": volume}
    masks, cols = _event_rows(low, [event, {"price": 0.0, "volume": 0.0}])
    stack = np.empty(vm.STACK)
    thr = vm.eval_value(low.code, start, end, low.consts, -1, masks, cols, v, 0, stack)
    whole = vm.eval_program(low.code, low.cond_a[0], low.cond_b[0], low.consts, 0, masks, cols, v, 0, stack)
    assert vm.compare(k, cols[x, 0], thr) == whole == bool(eval_expr(expr, event, match))


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


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=80), st.integers(1, 4), st.lists(st.integers(1, 30), min_size=4, max_size=4),
       st.booleans())
def test_layout_groups_each_call_s_rows_by_key(keys, threads, chunk, with_tick):
    """``layout.build`` (``kernels.arrays.shard_rows``, ``layout_shard``, ``scatter_rows``) against a
    plain-Python layout: per shard (key code % threads) its rows in arrival order, cut into calls
    of ``chunk[s]`` rows, each call's rows grouped by local key (code // threads) in arrival order;
    ``key_ptr`` their offsets within the call; an empty call for a shard without rows when a tick
    is due; a column's values in that order."""
    from colcep.engine import layout
    codes = np.array(keys, np.int64)
    n_keys = int(codes.max(initial=-1)) + 1 + (len(keys) % 3)  # keys seen earlier, not in this batch
    lay = layout.build(codes, n_keys, threads, chunk[:threads], with_tick)
    assert lay.rows.shape == (len(keys),)
    at = 0
    for s in range(threads):
        mine = [i for i, k in enumerate(keys) if k % threads == s]
        n_local = len(range(s, n_keys, threads))
        parts = [mine[a:a + chunk[s]] for a in range(0, len(mine), chunk[s])] or ([[]] if with_tick else [])
        assert lay.shard_lo[s] == at and len(lay.calls(s)) == len(parts)
        for j, (call, part) in enumerate(zip(lay.calls(s), parts)):
            want = [i for k in range(n_local) for i in part if keys[i] // threads == k]
            assert (call.lo, call.hi, call.last) == (at, at + len(part), j == len(parts) - 1)
            assert lay.rows[call.lo:call.hi].tolist() == want
            assert call.key_ptr.tolist() == [sum(1 for i in part if keys[i] // threads < k) for k in range(n_local + 1)]
            at += len(part)
        assert lay.shard_lo[s + 1] == at
    assert lay.order.tolist() == list(range(max((c.hi - c.lo for s in range(threads) for c in lay.calls(s)),
                                                default=0)))
    ts = np.arange(len(keys), dtype=np.int64) * 3
    ts.setflags(write=False)  # (as Arrow's columns come)
    price = (np.arange(len(keys) * 2, dtype=np.float64) / 2)[::2]  # (not contiguous)
    flags = np.array([i % 2 == 0 for i in range(len(keys))])  # (not 8 bytes a value)
    for s in range(threads):
        mine = lay.shard(lay.rows, s).tolist()
        assert lay.gather_shard(ts, s).tolist() == [3 * i for i in mine]
        assert lay.gather_shard(price, s).tolist() == [float(i) for i in mine]
        assert lay.gather_shard(flags, s).tolist() == [i % 2 == 0 for i in mine]
    nan = np.array([np.nan, -0.0, np.inf] * (len(keys) // 3 + 1))[:len(keys)]
    nan[::5] = np.frombuffer(np.int64(0x7FF0000000000001).tobytes(), np.float64)[0]  # (a signalling NaN)
    got = np.concatenate([lay.gather_shard(nan, s) for s in range(threads)])
    assert got.tobytes() == nan[lay.rows].tobytes()  # (every value's bits)
