"""The NFA^b step kernel: all keys of one batch in one call.

Rows arrive grouped by key (``key_ptr``, CSR) and in time order within a key. For every
key the kernel carries its runs (Flink's computation states) from the previous batch,
pushes each of the key's rows through them and writes the surviving runs back, so that a
key's partial matches span batch boundaries. Per event it follows Flink CEP's operator:

1. ``advanceTime``: runs whose window has passed (``ts - start_ts >= window``) time out;
   runs are kept sorted by start event, so they are a prefix. A trailing
   ``not_followed_by`` run (PENDING state) completes instead.
2. ``computeNextStates`` for every run in start order, then for the start run: a DFS over
   PROCEED edges whose conditions hold collects the TAKE / IGNORE edges; TAKE appends a
   node to the shared buffer and updates the run's aggregate vector V; a run reaching the
   final state (directly or through PROCEED edges) is a completed match; a STOP state
   discards every branch the run produced at this event.
3. ``processMatchesAccordingToSkipStrategy``: completed matches wait in a queue ordered by
   start event; one is released once no live run started before it (immediately with no
   skip), and the skip strategy then discards runs and waiting matches that start before
   its pruning point (a prefix, again, of the start-ordered lists).

A key with no live run and no waiting match skips straight to its next row whose
``start_mask`` is set. Matches are written as (key, emitting row, timed-out flag, timeout
time, offset) records plus their events (row, stage) in pattern-stage order.
"""
import numpy as np
from numba import njit

from .arrays import grow, grow_rows
from .buffer import alloc, compare_paths, extract, path_length, release, reserve
from .vm import STACK, VW, eval_program, v_init, v_update

TAKE, IGNORE, PROCEED = 0, 1, 2
NORMAL, FINAL, STOP, PENDING = 0, 1, 2, 3
NO_SKIP, SKIP_TO_NEXT, SKIP_PAST_LAST_EVENT, SKIP_TO_FIRST, SKIP_TO_LAST = 0, 1, 2, 3, 4
BIG = np.int64(2**62)

# status codes
OK, ERR_CAPACITY = 0, 1


@njit(cache=True, nogil=True)
def _cond(c, cond_kind, cond_a, cond_b, code, consts, row, masks, cols, v, vm_stack):
    if c < 0:
        return True
    if cond_kind[c] == 0:
        return masks[cond_a[c], row] != 0
    return eval_program(code, cond_a[c], cond_b[c], consts, row, masks, cols, v, vm_stack)


@njit(cache=True, nogil=True)
def _emit(node, key, emit_row, timed_out, tts, n_row, n_stage, n_parent,
          m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne):
    """Append the match ending at ``node``: its record and its events in stage order."""
    L = path_length(n_parent, node)
    m_key = grow(m_key, nm + 1)
    m_row = grow(m_row, nm + 1)
    m_flag = grow(m_flag, nm + 1)
    m_tts = grow(m_tts, nm + 1)
    m_off = grow(m_off, nm + 2)
    e_row = grow(e_row, ne + L)
    e_stage = grow(e_stage, ne + L)
    extract(n_row, n_stage, n_parent, node, e_row[ne:ne + L], e_stage[ne:ne + L])
    # stage order, events in arrival order within a stage (paths usually are in stage order)
    for i in range(ne + 1, ne + L):
        if e_stage[i] < e_stage[i - 1]:
            order = np.argsort(e_stage[ne:ne + L], kind="mergesort")
            rows = e_row[ne:ne + L][order]
            stages = e_stage[ne:ne + L][order]
            e_row[ne:ne + L] = rows
            e_stage[ne:ne + L] = stages
            break
    m_key[nm] = key
    m_row[nm] = emit_row
    m_flag[nm] = timed_out
    m_tts[nm] = tts
    m_off[nm] = ne
    m_off[nm + 1] = ne + L
    return m_key, m_row, m_flag, m_tts, m_off, nm + 1, e_row, e_stage, ne + L


@njit(cache=True, nogil=True)
def _pruning_point(skip_code, skip_stage, node, n_row, n_stage, n_parent):
    """Flink's ``AfterMatchSkipStrategy.getPruningId`` for the match ending at ``node``
    (-1: nothing to prune)."""
    if skip_code == NO_SKIP:
        return -1
    pid = -1
    x = node
    while x >= 0:
        r = n_row[x]
        if skip_code == SKIP_TO_NEXT:
            pid = r  # the walk ends at the first event
        elif skip_code == SKIP_PAST_LAST_EVENT:
            if r > pid:
                pid = r
        elif n_stage[x] == skip_stage:
            if skip_code == SKIP_TO_LAST:
                if r > pid:
                    pid = r
            else:
                pid = r
        x = n_parent[x]
    return pid


@njit(cache=True, nogil=True)
def _held_before(a_spos, a_epos, a_node, b_spos, b_epos, b_node, n_row, n_stage, n_parent):
    """Order of the waiting-match queue: start event, then completing event, then the
    events' positions and stages (colcep's tie rule; Flink's heap order is arbitrary there)."""
    if a_spos != b_spos:
        return a_spos < b_spos
    if a_epos != b_epos:
        return a_epos < b_epos
    return compare_paths(n_row, n_stage, n_parent, a_node, b_node) <= 0


@njit(cache=True, nogil=True)
def _one_per_start(npot, p_node, p_sts, p_spos, nb, b_state, b_node, b_sts, b_spos, b_v, nh, hq_spos,
                   n_row, n_stage, n_parent, n_ref, meta):
    """Keep one completed match per start event (the first in queue order) and drop the
    start's other completed matches and live runs. ``p_*`` (this event's completed matches),
    ``b_*`` (live runs) and ``hq_spos`` (waiting matches) are sorted by start event."""
    kept = 0
    q = 0
    kill = np.zeros(nb, np.bool_)
    while q < npot:
        s = p_spos[q]
        best = q
        r = q + 1
        while r < npot and p_spos[r] == s:
            if compare_paths(n_row, n_stage, n_parent, p_node[r], p_node[best]) < 0:
                best = r
            r += 1
        held = np.searchsorted(hq_spos[:nh], s)
        keep_best = not (held < nh and hq_spos[held] == s)
        for x in range(q, r):
            if x != best or not keep_best:
                release(n_parent, n_ref, meta, p_node[x])
        if keep_best:
            p_node[kept] = p_node[best]
            p_sts[kept] = p_sts[best]
            p_spos[kept] = s
            kept += 1
        lo = np.searchsorted(b_spos[:nb], s)
        while lo < nb and b_spos[lo] == s:
            kill[lo] = True
            lo += 1
        q = r
    w = 0
    for i in range(nb):
        if kill[i]:
            release(n_parent, n_ref, meta, b_node[i])
        else:
            if w != i:
                b_state[w] = b_state[i]
                b_node[w] = b_node[i]
                b_sts[w] = b_sts[i]
                b_spos[w] = b_spos[i]
                b_v[w] = b_v[i]
            w += 1
    return kept, w


@njit(cache=True, nogil=True, error_model="numpy")
def run_batch(
        # the program
        st_kind, st_stage, start_state, tr_ptr, tr_act, tr_tgt, tr_cond,
        cond_kind, cond_a, cond_b, code, consts, vg_stage, vg_col,
        window, skip_code, skip_stage, want_timeouts, max_runs, flush,
        # the batch (rows grouped by key)
        n_keys, key_ptr, ts, gpos, masks, cols, start_mask,
        # carried state: runs and waiting matches per key (CSR over keys); start_dead[k] is set
    # (in place) when a STOP state discarded key k's start run, which Flink never recreates
        r_ptr, r_state, r_node, r_sts, r_spos, r_v,
        h_ptr, h_sts, h_spos, h_epos, h_node, start_dead,
        # the shared buffer
        n_row, n_stage, n_parent, n_ref, meta):
    """Process one batch; see the module docstring. Returns the new carried state, the
    (possibly grown) buffer, the emitted matches and a status (code, key, count)."""
    n_trans = tr_act.shape[0]
    vw = r_v.shape[1]
    per_run = 2 * n_trans + 1
    # new carried state
    nr_ptr = np.zeros(n_keys + 1, np.int64)
    nr_state = np.empty(max(16, r_state.shape[0]), np.int32)
    nr_node = np.empty(nr_state.shape[0], np.int64)
    nr_sts = np.empty(nr_state.shape[0], np.int64)
    nr_spos = np.empty(nr_state.shape[0], np.int64)
    nr_v = np.empty((nr_state.shape[0], vw), np.float64)
    nh_ptr = np.zeros(n_keys + 1, np.int64)
    nh_sts = np.empty(max(16, h_sts.shape[0]), np.int64)
    nh_spos = np.empty(nh_sts.shape[0], np.int64)
    nh_epos = np.empty(nh_sts.shape[0], np.int64)
    nh_node = np.empty(nh_sts.shape[0], np.int64)
    # outputs
    m_key = np.empty(64, np.int64)
    m_row = np.empty(64, np.int64)
    m_flag = np.empty(64, np.int32)
    m_tts = np.empty(64, np.int64)
    m_off = np.zeros(65, np.int64)
    e_row = np.empty(256, np.int64)
    e_stage = np.empty(256, np.int32)
    nm = 0
    ne = 0
    status = np.zeros(3, np.int64)
    # work lists: current runs (a), next runs (b), waiting matches (h), completed this event (p)
    cap = 64
    a_state = np.empty(cap, np.int32)
    a_node = np.empty(cap, np.int64)
    a_sts = np.empty(cap, np.int64)
    a_spos = np.empty(cap, np.int64)
    a_v = np.empty((cap, vw), np.float64)
    b_state = np.empty(cap, np.int32)
    b_node = np.empty(cap, np.int64)
    b_sts = np.empty(cap, np.int64)
    b_spos = np.empty(cap, np.int64)
    b_v = np.empty((cap, vw), np.float64)
    hq_sts = np.empty(cap, np.int64)
    hq_spos = np.empty(cap, np.int64)
    hq_epos = np.empty(cap, np.int64)
    hq_node = np.empty(cap, np.int64)
    p_node = np.empty(cap, np.int64)
    p_sts = np.empty(cap, np.int64)
    p_spos = np.empty(cap, np.int64)
    zero_v = np.empty(vw, np.float64)
    v_init(zero_v)
    tmp_v = np.empty(vw, np.float64)
    stack = np.empty(max(16, 4 * st_kind.shape[0]), np.int64)
    vm_stack = np.empty(STACK, np.float64)
    e_act = np.empty(n_trans + 1, np.int32)
    e_src = np.empty(n_trans + 1, np.int32)
    e_tgt = np.empty(n_trans + 1, np.int32)
    n_old_keys = r_ptr.shape[0] - 1
    # Under skip-past-last-event / skip-to-next, the first completed match of a start prunes
    # every other run and match of that start when it is released, and is pruned together with
    # them otherwise: they can never be emitted, so they are dropped at once (not when timed-out
    # partial matches are wanted, since those runs could still time out first).
    dominate = (skip_code == SKIP_PAST_LAST_EVENT or skip_code == SKIP_TO_NEXT) and not want_timeouts
    out_runs = 0
    out_held = 0

    for k in range(n_keys):
        # ---- load the key's carried runs and waiting matches
        na = 0
        nh = 0
        if k < n_old_keys:
            lo = r_ptr[k]
            hi = r_ptr[k + 1]
            na = hi - lo
            if na > a_state.shape[0]:
                cap2 = 2 * na
                a_state = np.empty(cap2, np.int32)
                a_node = np.empty(cap2, np.int64)
                a_sts = np.empty(cap2, np.int64)
                a_spos = np.empty(cap2, np.int64)
                a_v = np.empty((cap2, vw), np.float64)
            for i in range(na):
                a_state[i] = r_state[lo + i]
                a_node[i] = r_node[lo + i]
                a_sts[i] = r_sts[lo + i]
                a_spos[i] = r_spos[lo + i]
                a_v[i] = r_v[lo + i]
            lo = h_ptr[k]
            hi = h_ptr[k + 1]
            nh = hi - lo
            hq_sts = grow(hq_sts, nh)
            hq_spos = grow(hq_spos, nh)
            hq_epos = grow(hq_epos, nh)
            hq_node = grow(hq_node, nh)
            for i in range(nh):
                hq_sts[i] = h_sts[lo + i]
                hq_spos[i] = h_spos[lo + i]
                hq_epos[i] = h_epos[lo + i]
                hq_node[i] = h_node[lo + i]

        row_lo = key_ptr[k]
        row_hi = key_ptr[k + 1]
        n_events = row_hi - row_lo + (1 if flush else 0)
        j = 0
        while j < n_events:
            final_tick = j == row_hi - row_lo
            if final_tick:
                row = -1
                t = BIG
                g = BIG
            else:
                row = row_lo + j
                if na == 0 and nh == 0 and (start_mask[row] == 0 or start_dead[k]):
                    # nothing alive for this key: jump to its next row that can start a match
                    j += 1
                    while j < row_hi - row_lo and (start_mask[row_lo + j] == 0 or start_dead[k]):
                        j += 1
                    continue
                t = ts[row]
                g = gpos[row]
            j += 1
            # capacity for this event: nodes, runs, completed matches
            need = (na + 1) * per_run
            n_row, n_stage, n_parent, n_ref = reserve(n_row, n_stage, n_parent, n_ref, meta, need)
            if b_state.shape[0] < need:
                cap2 = 2 * need
                b_state = np.empty(cap2, np.int32)
                b_node = np.empty(cap2, np.int64)
                b_sts = np.empty(cap2, np.int64)
                b_spos = np.empty(cap2, np.int64)
                b_v = np.empty((cap2, vw), np.float64)
                p_node = np.empty(cap2, np.int64)
                p_sts = np.empty(cap2, np.int64)
                p_spos = np.empty(cap2, np.int64)
            hq_sts = grow(hq_sts, nh + need)
            hq_spos = grow(hq_spos, nh + need)
            hq_epos = grow(hq_epos, nh + need)
            hq_node = grow(hq_node, nh + need)

            for phase in range(2):  # 0: advanceTime, 1: process the event
                npot = 0
                if phase == 0:
                    # ---- advanceTime: the timed-out runs are a prefix (sorted by start); when
                    # none times out nothing can change (waiting matches stay held)
                    cut = 0
                    while window > 0 and cut < na and t - a_sts[cut] >= window:
                        cut += 1
                    if cut == 0:
                        continue
                    for i in range(cut):
                        if st_kind[a_state[i]] == PENDING:
                            p_node[npot] = a_node[i]
                            p_sts[npot] = a_sts[i]
                            p_spos[npot] = a_spos[i]
                            npot += 1
                        else:
                            if want_timeouts:
                                m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne = _emit(
                                    a_node[i], k, g, 1, a_sts[i] + window, n_row, n_stage, n_parent,
                                    m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne)
                            release(n_parent, n_ref, meta, a_node[i])
                    nb = na - cut
                    for i in range(nb):
                        b_state[i] = a_state[cut + i]
                        b_node[i] = a_node[cut + i]
                        b_sts[i] = a_sts[cut + i]
                        b_spos[i] = a_spos[cut + i]
                        b_v[i] = a_v[cut + i]
                else:
                    if final_tick:
                        break
                    # ---- computeNextStates for every run, the start run last
                    nb = 0
                    for i in range(na + (0 if start_dead[k] else 1)):
                        is_start = i == na
                        if is_start:
                            s0 = start_state
                            node0 = -1
                            sts0 = -1
                            spos0 = -1
                            v0 = zero_v
                        else:
                            s0 = a_state[i]
                            node0 = a_node[i]
                            sts0 = a_sts[i]
                            spos0 = a_spos[i]
                            v0 = a_v[i]
                        # decision graph: DFS over PROCEED edges, collecting TAKE / IGNORE edges
                        ne_ = 0
                        sp = 0
                        stack[sp] = s0
                        sp += 1
                        while sp > 0:
                            sp -= 1
                            s = stack[sp]
                            for tr in range(tr_ptr[s], tr_ptr[s + 1]):
                                if _cond(tr_cond[tr], cond_kind, cond_a, cond_b, code, consts, row, masks,
                                         cols, v0, vm_stack):
                                    act = tr_act[tr]
                                    if act == PROCEED:
                                        if sp == stack.shape[0]:
                                            stack = grow(stack, 2 * sp)
                                        stack[sp] = tr_tgt[tr]
                                        sp += 1
                                    else:
                                        if ne_ == e_act.shape[0]:
                                            e_act = grow(e_act, 2 * ne_)
                                            e_src = grow(e_src, 2 * ne_)
                                            e_tgt = grow(e_tgt, 2 * ne_)
                                        e_act[ne_] = act
                                        e_src[ne_] = s
                                        e_tgt[ne_] = tr_tgt[tr]
                                        ne_ += 1
                        first_child = nb  # a STOP discards these (completed matches stay, as in Flink)
                        discard = False
                        for q in range(ne_):
                            act = e_act[q]
                            tgt = e_tgt[q]
                            if act == IGNORE:
                                if is_start:
                                    continue
                                node1 = node0
                                sts1 = sts0
                                spos1 = spos0
                                tmp_v[:] = v0
                            else:
                                stg = st_stage[e_src[q]]
                                node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, stg, node0)
                                if is_start:
                                    sts1 = t
                                    spos1 = g
                                else:
                                    sts1 = sts0
                                    spos1 = spos0
                                tmp_v[:] = v0
                                for vg in range(vg_stage.shape[0]):
                                    if vg_stage[vg] == stg:
                                        c = vg_col[vg]
                                        v_update(tmp_v, vg * VW, cols[c, row] if c >= 0 else 0.0, g)
                            # the run reaching ``tgt`` (and, after a TAKE, the final state if
                            # PROCEED edges lead there from ``tgt``)
                            for variant in range(2):
                                if variant == 0:
                                    s1 = tgt
                                else:
                                    if act != TAKE:
                                        break
                                    s1 = -1
                                    sp = 0
                                    stack[sp] = tgt
                                    sp += 1
                                    while sp > 0 and s1 < 0:
                                        sp -= 1
                                        s = stack[sp]
                                        for tr in range(tr_ptr[s], tr_ptr[s + 1]):
                                            if tr_act[tr] == PROCEED and _cond(
                                                    tr_cond[tr], cond_kind, cond_a, cond_b, code, consts,
                                                    row, masks, cols, v0, vm_stack):
                                                if st_kind[tr_tgt[tr]] == FINAL:
                                                    s1 = tr_tgt[tr]
                                                    break
                                                if sp == stack.shape[0]:
                                                    stack = grow(stack, 2 * sp)
                                                stack[sp] = tr_tgt[tr]
                                                sp += 1
                                    if s1 < 0:
                                        break
                                if node1 >= 0:
                                    n_ref[node1] += 1
                                kind = st_kind[s1]
                                if kind == FINAL:
                                    p_node[npot] = node1
                                    p_sts[npot] = sts1
                                    p_spos[npot] = spos1
                                    npot += 1
                                elif kind == STOP:
                                    discard = True
                                    if node1 >= 0:
                                        release(n_parent, n_ref, meta, node1)
                                else:
                                    b_state[nb] = s1
                                    b_node[nb] = node1
                                    b_sts[nb] = sts1
                                    b_spos[nb] = spos1
                                    b_v[nb] = tmp_v
                                    nb += 1
                            if act == TAKE and n_ref[node1] == 0:
                                release(n_parent, n_ref, meta, node1)  # nobody kept the new node
                        if discard:
                            for q in range(first_child, nb):
                                if b_node[q] >= 0:
                                    release(n_parent, n_ref, meta, b_node[q])
                            nb = first_child
                            if is_start:
                                start_dead[k] = 1  # Flink discards the start state with the path
                        if not is_start and node0 >= 0:
                            release(n_parent, n_ref, meta, node0)
                    if nb > max_runs:
                        status[0] = ERR_CAPACITY
                        status[1] = k
                        status[2] = nb
                        return (nr_ptr, nr_state, nr_node, nr_sts, nr_spos, nr_v, nh_ptr, nh_sts, nh_spos,
                                nh_epos, nh_node, n_row, n_stage, n_parent, n_ref, m_key, m_row, m_flag, m_tts,
                                m_off, nm, e_row, e_stage, ne, status)

                # ---- processMatchesAccordingToSkipStrategy: queue the completed matches ...
                if npot > 0 and dominate:
                    npot, nb = _one_per_start(npot, p_node, p_sts, p_spos, nb, b_state, b_node, b_sts,
                                              b_spos, b_v, nh, hq_spos, n_row, n_stage, n_parent, n_ref, meta)
                for q in range(npot):
                    pos = nh
                    while pos > 0 and not _held_before(hq_spos[pos - 1], hq_epos[pos - 1], hq_node[pos - 1],
                                                       p_spos[q], g, p_node[q], n_row, n_stage,
                                                       n_parent):
                        pos -= 1
                    for x in range(nh, pos, -1):
                        hq_sts[x] = hq_sts[x - 1]
                        hq_spos[x] = hq_spos[x - 1]
                        hq_epos[x] = hq_epos[x - 1]
                        hq_node[x] = hq_node[x - 1]
                    hq_sts[pos] = p_sts[q]
                    hq_spos[pos] = p_spos[q]
                    hq_epos[pos] = g
                    hq_node[pos] = p_node[q]
                    nh += 1
                # ... and release those no earlier live run holds back
                while nh > 0:
                    if skip_code != NO_SKIP and nb > 0 and hq_spos[0] > b_spos[0]:
                        break
                    node = hq_node[0]
                    pid = _pruning_point(skip_code, skip_stage, node, n_row, n_stage, n_parent)
                    for x in range(nh - 1):
                        hq_sts[x] = hq_sts[x + 1]
                        hq_spos[x] = hq_spos[x + 1]
                        hq_epos[x] = hq_epos[x + 1]
                        hq_node[x] = hq_node[x + 1]
                    nh -= 1
                    if pid >= 0:
                        strict = skip_code == SKIP_TO_FIRST or skip_code == SKIP_TO_LAST
                        cut = 0
                        while cut < nb and (b_spos[cut] < pid or (not strict and b_spos[cut] == pid)):
                            release(n_parent, n_ref, meta, b_node[cut])
                            cut += 1
                        if cut > 0:
                            for x in range(nb - cut):
                                b_state[x] = b_state[x + cut]
                                b_node[x] = b_node[x + cut]
                                b_sts[x] = b_sts[x + cut]
                                b_spos[x] = b_spos[x + cut]
                                b_v[x] = b_v[x + cut]
                            nb -= cut
                        cut = 0
                        while cut < nh and (hq_spos[cut] < pid or (not strict and hq_spos[cut] == pid)):
                            release(n_parent, n_ref, meta, hq_node[cut])
                            cut += 1
                        if cut > 0:
                            for x in range(nh - cut):
                                hq_sts[x] = hq_sts[x + cut]
                                hq_spos[x] = hq_spos[x + cut]
                                hq_epos[x] = hq_epos[x + cut]
                                hq_node[x] = hq_node[x + cut]
                            nh -= cut
                    m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne = _emit(
                        node, k, g, 0, 0, n_row, n_stage, n_parent,
                        m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne)
                    release(n_parent, n_ref, meta, node)
                # the next list becomes the current one
                a_state, b_state = b_state, a_state
                a_node, b_node = b_node, a_node
                a_sts, b_sts = b_sts, a_sts
                a_spos, b_spos = b_spos, a_spos
                a_v, b_v = b_v, a_v
                na = nb

        # ---- store the key's runs and waiting matches
        if out_runs + na > nr_state.shape[0]:
            n2 = max(2 * nr_state.shape[0], out_runs + na)
            nr_state = grow(nr_state, n2)
            nr_node = grow(nr_node, n2)
            nr_sts = grow(nr_sts, n2)
            nr_spos = grow(nr_spos, n2)
            nr_v = grow_rows(nr_v, n2)
        for i in range(na):
            nr_state[out_runs + i] = a_state[i]
            nr_node[out_runs + i] = a_node[i]
            nr_sts[out_runs + i] = a_sts[i]
            nr_spos[out_runs + i] = a_spos[i]
            nr_v[out_runs + i] = a_v[i]
        out_runs += na
        nr_ptr[k + 1] = out_runs
        if out_held + nh > nh_sts.shape[0]:
            n2 = max(2 * nh_sts.shape[0], out_held + nh)
            nh_sts = grow(nh_sts, n2)
            nh_spos = grow(nh_spos, n2)
            nh_epos = grow(nh_epos, n2)
            nh_node = grow(nh_node, n2)
        for i in range(nh):
            nh_sts[out_held + i] = hq_sts[i]
            nh_spos[out_held + i] = hq_spos[i]
            nh_epos[out_held + i] = hq_epos[i]
            nh_node[out_held + i] = hq_node[i]
        out_held += nh
        nh_ptr[k + 1] = out_held

    return (nr_ptr, nr_state[:out_runs], nr_node[:out_runs], nr_sts[:out_runs], nr_spos[:out_runs],
            nr_v[:out_runs], nh_ptr, nh_sts[:out_held], nh_spos[:out_held], nh_epos[:out_held],
            nh_node[:out_held], n_row, n_stage, n_parent, n_ref, m_key, m_row, m_flag, m_tts, m_off, nm,
            e_row, e_stage, ne, status)
