"""The NFA^b step kernel: all keys of one batch in one call.

Rows arrive in input order; ``order`` lists them grouped by key (``key_ptr``, CSR), in time
order within a key. For every key the kernel carries its runs (Flink's computation states)
from the previous batch, pushes each of the key's rows through them and writes the surviving
runs back, so that a key's partial matches span batch boundaries. Per event it follows Flink
CEP's operator, one function a phase (``_run_key`` calls them in turn):

1. ``advance_time`` (Flink's ``advanceTime``): runs whose window has passed (``ts - start_ts
   >= window``, exact for any int64) time out; runs are kept sorted by start event, so they
   are a prefix. A trailing ``not_followed_by`` run (PENDING state) completes instead. After
   a key's rows, a ``tick_ts`` (a watermark) advances its time once more with no event;
   ``TIME_MAX`` is the end of input, where every windowed run times out.
2. ``compute_next_states`` (``computeNextStates``) for every run in start order, then for the
   start run: a DFS over PROCEED edges whose conditions hold collects the TAKE / IGNORE
   edges; TAKE appends a node to the shared buffer and updates the run's aggregate vector V;
   a run reaching the final state (directly or through PROCEED edges) is a completed match; a
   STOP state discards every branch the run produced at this event.
3. ``process_matches`` (``processMatchesAccordingToSkipStrategy``): completed matches wait in
   a queue ordered by start event; one is released once no live run started before it
   (immediately with no skip), and the skip strategy then discards runs and waiting matches
   that start before its pruning point (a prefix, again, of the start-ordered lists).

A key with no live run and no waiting match skips straight to its next row whose
``start_mask`` is set. Matches are written as (key, emitting row, timed-out flag, timeout
time, offset) records plus their events (row, stage) in pattern-stage order.

Waiting runs: in a state whose edges are TAKE(c) and IGNORE(not c | true) back to itself
(``sleep_conditions``) a run is unchanged by every event where ``c`` is false, so its next
event (``wake``) is found by a scan (``_next_event``: a float column against the run's
threshold, a mask, or the VM) and the run is copied past the events before it; an event at
which every run waits, none times out and the start run takes nothing is skipped; when only
the start run acts, its children are appended in place.

Merging (SASE+ 4.2.2, ``_merge_runs``): with no skip strategy and no timed-out output, a run
made at this event that equals another run in state and relevant V (``st_rel``) is folded into
it through a JOIN node of the shared buffer: a run of the same start under a window, a run of
any start without one (found through a hash table, so merging is linear in the runs); a
completed merged run is written as one match per path (``buffer.walk_paths``), in queue order.

Interrupts and bounds: the caller sets ``stop[0]`` to end the call at the next event
(ERR_INTERRUPTED); ``max_runs`` bounds a key's runs (ERR_CAPACITY), ``max_nodes`` the
buffer's live nodes and ``buffer.reserve``'s ``meta`` its growth (ERR_NODES), ``opts[7]`` the
call's output events (ERR_OUTPUT), ``opts[8]`` the runs of all keys (ERR_CAPACITY, a negative
figure). After any of these the returned state is partial: the caller keeps the runs it passed
in and undoes the buffer (``buffer.undo_call``; the buffer's changes are undoable, see there).

Arguments come in groups (tuples): the program's tables, the options, the batch, the carried
runs and held matches, the buffer, the output; inside, the work arrays (runs ``W``, this
event's completed matches, per-run scratch, the held-match queue, emitted matches, scratch)
and one key's scalars, kept in a cursor array (``cur[AO]``, ``cur[NA]``, ...) between calls
of ``_run_key``. The phases take and return their scalars (registers) and are inlined into
``_run_key``, so neither the groups nor the phases cost anything per event.

Layout, for speed: the runs of the current event and of the next one share one set of
flat arrays, each list a slice of its own half (``W_*``; V vectors ``vw`` floats a run, the
empty V in the last row), so moving to the next event swaps two offsets and dropping a
prefix of runs moves one. Nothing in the per-event loop creates an array view or rebinds an
array except to grow it (rarely): Numba then emits no reference counting in the hot path.
A condition's result is computed once per run and event (an IGNORE edge's ``not(take)``
reuses it).
"""
import numpy as np
from numba import njit

from .arrays import copy_into, grow, grow_rows
from .buffer import alloc, release, reserve
from .codes import (BIG, ERR_CAPACITY, ERR_INTERRUPTED, ERR_NODES, FINAL, IGNORE, NO_SKIP, NO_TICK, OK,  # noqa: F401
                    PENDING, PROCEED, SKIP_PAST_LAST_EVENT, SKIP_TO_FIRST, SKIP_TO_LAST, SKIP_TO_NEXT, STOP, TAKE,
                    TIME_MAX)
from .codes import ERR_OUTPUT
from .conds import cond, next_event
from .matches import dominated, first_threshold_states, flush_pending, grow_out, held_before, one_per_start, pruning_point
from .merge import merge_runs
from .park import (PM_LIVE, PM_NK, crosses, emit_woken, fit_park, grow_park, look, min_spos, n_thresholds, park,
                   park_fits, park_pass, park_room, park_start, park_table, pool_room, prune, sort_by_path, start_park,
                   take_woken, threshold_key, timeouts, wake_final)
from .runs import (deadline, expired, grow_runs, last_taken, last_time, move_run, set_last_taken, short_of_room,
                   turn_v_arena)
from .vm import STACK, VW, v_take

# the cursor ``cur`` (int64): one key's scalars between run_batch and _run_key calls
J, AO, HALF, NA, NH, NPEND, NM, NE, ROOM, DEAD, STAMP, KEY, ROW_LO, N_ROWS, N_EVENTS, PARKS = range(16)
N_CURSOR = 16
# what _run_key asks of its caller
DONE, NEED_ROOM, NEED_OUT, OVER_CAPACITY, INTERRUPTED = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True, inline="always")
def advance_time(prog, opts, W, done, E, buf, ao, na, npend, t, g, final_tick):
    """Phase 1, Flink's ``advanceTime``: the runs whose window has passed at time ``t`` (a
    prefix: runs are sorted by start) time out; a PENDING run (trailing ``not_followed_by``)
    completes instead. Returns (whether any run timed out: when none does nothing changes and
    held matches stay held; the survivors' list ``bo``, ``nb``; completed ``npot``; ``npend``)."""
    st_kind = prog[0]
    window, want_timeouts = opts[0], opts[3]
    W_state, W_node, W_sts, W_spos = W[0], W[1], W[2], W[3]
    gap = prog[20]
    if gap.shape[0] > 0:  # windows between consecutive events: any run may expire, not a prefix
        return _advance_gaps(prog, opts, W, done, E, buf, ao, na, npend, t, g, final_tick)
    cut = 0
    while window > 0 and cut < na and ((final_tick and t == TIME_MAX) or expired(t, W_sts[ao + cut], window)):
        cut += 1
    if cut == 0:
        return False, ao, na, 0, npend
    npot = 0
    for i in range(ao, ao + cut):
        npot, npend = _expire(st_kind[W_state[i]] == PENDING, W_node[i], W_sts[i], W_spos[i],
                              deadline(W_sts[i], window), done, E, buf, npot, npend, g, want_timeouts)
    return True, ao + cut, na - cut, npot, npend  # the survivors stay where they are


@njit(cache=True, nogil=True, inline="always")
def _expire(pending, node, sts, spos, tts, done, E, buf, npot, npend, g, want_timeouts):
    """A run whose window has passed: a PENDING one (trailing ``not_followed_by``) completes,
    listed in ``done``; any other times out at ``tts`` (listed in ``E`` when timed-out partial
    matches are wanted) and lets go of its node. Returns ``npot``, ``npend``."""
    p_node, p_sts, p_spos = done
    pend_node, pend_g, pend_flag, pend_tts = E
    n_row, n_stage, n_parent, n_ref, meta = buf
    if pending:
        p_node[npot] = node
        p_sts[npot] = sts
        p_spos[npot] = spos
        return npot + 1, npend
    if want_timeouts:
        n_ref[node] += 1
        pend_node[npend] = node
        pend_g[npend] = g
        pend_flag[npend] = 1
        pend_tts[npend] = tts
        npend += 1
    release(n_row, n_stage, n_parent, n_ref, meta, node)
    return npot, npend


@njit(cache=True, nogil=True)
def _advance_gaps(prog, opts, W, done, E, buf, ao, na, npend, t, g, final_tick):
    """``advance_time`` of a program with windows between consecutive events (Flink's
    PREVIOUS_AND_CURRENT and ``times(n, window)``): a run expires when its state's window
    has passed since its last taken event (``t - last >= gap``) or the pattern's since its
    start; the survivors are compacted in place, in start order."""
    st_kind, gap = prog[0], prog[20]
    window, want_timeouts = opts[0], opts[3]
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v = W[0], W[1], W[2], W[3], W[4], W[5], W[6]
    vw = prog[12].shape[0] * VW
    base = vw - VW
    end = final_tick and t == TIME_MAX
    npot = 0
    w = ao
    for i in range(ao, ao + na):
        s = W_state[i]
        by_window = window > 0 and (end or expired(t, W_sts[i], window))
        gi = gap[s]
        last = last_taken(W_v, W_vs[i] * vw, base) if gi > 0 else 0
        by_gap = gi > 0 and (end or expired(t, last, gi))
        if not (by_window or by_gap):
            if w != i:
                move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, i, w)
            w += 1
        else:
            npot, npend = _expire(st_kind[s] == PENDING, W_node[i], W_sts[i], W_spos[i],
                                  deadline(last, gi) if by_gap else deadline(W_sts[i], window), done, E, buf, npot,
                                  npend, g, want_timeouts)
    if w == ao + na:
        return False, ao, na, 0, npend
    return True, ao, w - ao, npot, npend


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def compute_next_states(prog, opts, mode, batch, W, done, aux, S, buf, ao, na, a_half, dead, stamp, min_wake,
                        row_lo, n_rows, jc, row, t, g, PK, parking, stop, P, k):
    """Phase 2, Flink's ``computeNextStates`` for every run in start order, then for the start
    run: a DFS over PROCEED edges whose conditions hold collects the TAKE / IGNORE edges; TAKE
    appends a node to the buffer and updates the run's V; a run reaching the final state is a
    completed match (``done``); a STOP state discards what the run produced at this event.
    Returns the next list (``bo``, ``nb``; over ``max_runs`` runs: the caller stops), the
    completed matches ``npot``, whether the list grew in place (``fast``), and the new ``dead``,
    ``stamp``, ``min_wake``; ``nb`` is -1 when ``stop[0]`` was set meanwhile (checked every 1,024
    runs, so that an event with millions of runs does not hold up an interrupt: the caller
    undoes the call). When the key parks and the start run's one TAKE edge leads to a parkable
    state (``PK[6]``: ``park.start_park``), the run it makes is parked at once
    (``park.park_start``) instead of being listed and parked after the step."""
    (st_kind, st_stage, start_state, tr_ptr, tr_act, tr_tgt, tr_cond, cond_kind, cond_a, cond_b, code, consts,
     vg_stage, vg_col, cond_thr, sleep_cond, st_rel, st_merge) = prog[:18]
    window = opts[0]
    timed_gaps = prog[20].shape[0] > 0  # (a run's last taken time in its V's last group: _advance_gaps)
    per_run, merging, vw = mode[0], mode[2], mode[3]
    order, ts, masks, cols, start_mask = batch[1], batch[3], batch[4], batch[5], batch[6]
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at = W
    p_node, p_sts, p_spos = done
    run_flag, m_aux, ht_run, ht_gen = aux
    stack, e_act, e_src, e_tgt, vm_stack, c_val, c_stamp = S[0], S[1], S[2], S[3], S[4], S[5], S[6]
    n_row, n_stage, n_parent, n_ref, meta = buf
    pk_idx, pk_full, start_tr, first_thr = PK[0], PK[5], PK[6][0], PK[8]
    cap = W_state.shape[0] // 2
    key_at, key_a = -1, 0.0  # the last listed run whose threshold key is known, and that key
    zero_off = 4 * cap * vw  # the empty V, after the two halves of the V arena
    npot = 0
    # When every run waits past this event only the start run can act: its children (the
    # latest start) are appended in place; otherwise the next list is built in the other half.
    fast = min_wake > jc and ao - a_half * cap + na + per_run <= cap
    if fast:
        bo = ao
        nb = na
        first = na
    else:
        bo = (1 - a_half) * cap
        nb = 0
        first = 0
        min_wake = BIG
    for i in range(first, na + (0 if dead else 1)):
        if (i & 1023) == 1023 and stop[0] != 0:
            return bo, -1, npot, fast, dead, stamp, min_wake
        is_start = i == na
        wake = 0
        if is_start:
            if start_mask[row] == 0:
                continue  # the start run takes nothing here
            if start_tr >= 0 and parking:  # its run goes straight to the park
                stamp += 1
                if cond(tr_cond[start_tr], cond_kind, cond_a, cond_b, code, consts, row, masks, cols, W_v, zero_off,
                        vm_stack, c_val, c_stamp, stamp):
                    stg = st_stage[start_state]
                    node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, stg, -1)
                    n_ref[node1] += 1
                    s1 = tr_tgt[start_tr]
                    park_start(P, k, PK[2], PK[3], PK[4], pk_idx[s1], s1, node1, t, g, W_v, zero_off, vw, vg_stage,
                               vg_col, stg, row, code, consts, masks, cols, vm_stack)
                continue
        else:
            wake = W_wake[ao + i]
            s0 = W_state[ao + i]
            x = bo + nb
            # Of two runs of one start waiting in one state for a threshold that completes the match,
            # one may never be emitted (``matches.dominated``): a run is tested against the one listed
            # just before it, before its scan
            if (first_thr[s0] != 0 and wake >= -1 and nb > 0 and W_state[x - 1] == s0
                    and W_spos[x - 1] == W_spos[ao + i]):
                drop, key_at, key_a = _dominated_by_last(x, ao + i, wake > jc, row, key_at, key_a, pk_idx[s0], PK,
                                                         code, consts, masks, cols, W_v, W_vs, W_node, vw, vm_stack,
                                                         buf)
                if drop:
                    release(n_row, n_stage, n_parent, n_ref, meta, W_node[ao + i])
                    continue
            parks = parking and pk_idx[s0] >= 0  # parked again: this event only is checked
            check = wake <= jc and sleep_cond[s0] >= 0
            if wake < -1:  # woken from the park at this event: its threshold holds here
                wake = jc
                check = pk_full[pk_idx[s0]] != 0  # a conjunction: the rest is checked
            if check:
                wake = next_event(sleep_cond[s0], cond_kind, cond_a, cond_b, cond_thr, code, consts,
                                  masks, cols, W_v, W_vs[ao + i] * vw, vm_stack, order, row_lo, jc,
                                  jc + 1 if parks else n_rows, ts, last_time(W_sts[ao + i], window))
            if wake > jc:  # waiting: the event leaves the run as it is (its V stays put)
                move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, ao + i, x)
                W_wake[x] = wake
                run_flag[nb] = 0  # not new: never merged into an earlier run
                nb += 1
                if wake < min_wake and not parks:
                    min_wake = wake
                continue
        stamp += 1
        woke = not is_start and wake == jc and sleep_cond[W_state[ao + i]] >= 0
        if is_start:
            s0 = start_state
            node0 = -1
            sts0 = -1
            spos0 = -1
            voff = zero_off
        else:
            s0 = W_state[ao + i]
            node0 = W_node[ao + i]
            sts0 = W_sts[ao + i]
            spos0 = W_spos[ao + i]
            voff = W_vs[ao + i] * vw
        # decision graph: DFS over PROCEED edges, collecting TAKE / IGNORE edges; a waiting
        # run whose scan found its condition true here takes its TAKE edge, and its IGNORE
        # edge when that one is unconditional
        n_edges = 0
        sp = 0
        if woke:
            for tr in range(tr_ptr[s0], tr_ptr[s0 + 1]):
                if tr_act[tr] == TAKE or tr_cond[tr] < 0:
                    e_act[n_edges] = tr_act[tr]
                    e_src[n_edges] = s0
                    e_tgt[n_edges] = tr_tgt[tr]
                    n_edges += 1
        else:
            stack[sp] = s0
            sp += 1
        while sp > 0:
            sp -= 1
            s = stack[sp]
            for tr in range(tr_ptr[s], tr_ptr[s + 1]):
                if cond(tr_cond[tr], cond_kind, cond_a, cond_b, code, consts, row, masks, cols, W_v, voff, vm_stack,
                        c_val, c_stamp, stamp):
                    act = tr_act[tr]
                    if act == PROCEED:
                        stack[sp] = tr_tgt[tr]
                        sp += 1
                    else:
                        e_act[n_edges] = act
                        e_src[n_edges] = s
                        e_tgt[n_edges] = tr_tgt[tr]
                        n_edges += 1
        first_child = nb  # a STOP discards these (completed matches stay, as in Flink)
        discard = False
        for q in range(n_edges):
            act = e_act[q]
            tgt = e_tgt[q]
            if act == IGNORE:
                if is_start:
                    continue
                node1 = node0
                sts1 = sts0
                spos1 = spos0
                stg = -1
            else:
                stg = st_stage[e_src[q]]
                node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, stg, node0)
                if is_start:
                    sts1 = t
                    spos1 = g
                else:
                    sts1 = sts0
                    spos1 = spos0
            # the run reaching ``tgt`` (and, after a TAKE, the final state if PROCEED edges
            # lead there from ``tgt``)
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
                            if tr_act[tr] == PROCEED and cond(tr_cond[tr], cond_kind, cond_a, cond_b, code, consts,
                                                              row, masks, cols, W_v, voff, vm_stack, c_val, c_stamp,
                                                              stamp):
                                if st_kind[tr_tgt[tr]] == FINAL:
                                    s1 = tr_tgt[tr]
                                    break
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
                        release(n_row, n_stage, n_parent, n_ref, meta, node1)
                else:
                    x = bo + nb
                    W_state[x] = s1
                    W_node[x] = node1
                    W_sts[x] = sts1
                    W_spos[x] = spos1
                    xo = v_at[0] * vw  # a new V slot
                    W_vs[x] = v_at[0]
                    v_at[0] += 1
                    for jj in range(vw):
                        W_v[xo + jj] = W_v[voff + jj]
                    if stg >= 0:
                        v_take(W_v, xo, vg_stage, vg_col, stg, cols, row, g)
                        if timed_gaps:  # the time of its last taken event
                            set_last_taken(W_v, xo + vw - VW, t)
                    wake = jc + 1  # the next event this run must see
                    if parking and pk_idx[s1] >= 0:
                        wake = BIG  # parked after this step: the park wakes it
                    elif first_thr[s1]:
                        pass  # scanned at the next event, unless a later run of its start drops it first
                    elif sleep_cond[s1] >= 0:
                        wake = next_event(sleep_cond[s1], cond_kind, cond_a, cond_b, cond_thr, code, consts, masks,
                                          cols, W_v, xo, vm_stack, order, row_lo, jc + 1, n_rows, ts,
                                          last_time(sts1, window))
                    W_wake[x] = wake
                    if wake < min_wake:
                        min_wake = wake
                    run_flag[x - bo] = 1  # made at this event
                    nb += 1
            if act == TAKE and n_ref[node1] == 0:
                release(n_row, n_stage, n_parent, n_ref, meta, node1)  # nobody kept the new node
        if discard:
            for q in range(first_child, nb):
                if W_node[bo + q] >= 0:
                    release(n_row, n_stage, n_parent, n_ref, meta, W_node[bo + q])
            nb = first_child
            if is_start:
                dead = True  # Flink discards the start state with the path
        if not is_start and node0 >= 0:
            release(n_row, n_stage, n_parent, n_ref, meta, node0)
    if merging and not fast:
        nb = merge_runs(bo, nb, run_flag, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, vw, st_rel, st_merge,
                        n_row, n_stage, n_parent, n_ref, meta, window <= 0, m_aux, ht_run, ht_gen, stamp)
        stamp += 1
    return bo, nb, npot, fast, dead, stamp, min_wake


@njit(cache=True, nogil=True, inline="always")
def _dominated_by_last(x, r, waits, row, key_at, key_a, idx, PK, code, consts, masks, cols, W_v, W_vs, W_node, vw,
                       vm_stack, buf):
    """Whether run ``r`` can be dropped beside the run at ``x - 1`` of its start and state: it can
    never be emitted (``matches.dominated``) and does not complete at this event ``row`` (it
    ``waits``, or the other's threshold, crossed whenever its own is, is not crossed here).
    Returns it with the threshold key known (``key_at``, ``key_a``)."""
    if key_at != x - 1:
        key_a = threshold_key(idx, PK[2], PK[3], PK[4], code, consts, masks, cols, W_v, W_vs[x - 1] * vw, vm_stack)
        key_at = x - 1
    key_x = threshold_key(idx, PK[2], PK[3], PK[4], code, consts, masks, cols, W_v, W_vs[r] * vw, vm_stack)
    drop = (dominated(key_a, key_x, W_node[x - 1], W_node[r], buf[0], buf[1], buf[2])
            and (waits or not crosses(PK[2][idx], cols[PK[1][idx], row], key_a)))
    return drop, key_at, key_a


@njit(cache=True, nogil=True, inline="always")
def process_matches(opts, mode, W, done, aux, Q, E, buf, P, k, bo, nb, npot, nh, npend, g):
    """Phase 3, Flink's ``processMatchesAccordingToSkipStrategy``: this event's completed
    matches join the queue of held matches (ordered by start event); a held match is released
    once no live run of the next list started before it (at once with no skip), and the skip
    strategy then discards the runs and held matches that start before its pruning point (a
    prefix, again, of the start-ordered lists). Released matches go to ``E``, to be written.
    Returns the new ``bo``, ``nb``, ``nh``, ``npend``."""
    skip_code, skip_stage = opts[1], opts[2]
    dominate = mode[1]
    W_state, W_node, W_sts, W_spos, W_wake, W_vs = W[0], W[1], W[2], W[3], W[4], W[5]
    p_node, p_sts, p_spos = done
    run_flag = aux[0]
    hq_sts, hq_spos, hq_epos, hq_node = Q
    pend_node, pend_g, pend_flag, pend_tts = E
    n_row, n_stage, n_parent, n_ref, meta = buf
    strict_prune = skip_code == SKIP_TO_FIRST or skip_code == SKIP_TO_LAST
    if npot > 0 and dominate:
        npot, nb = one_per_start(npot, p_node, p_sts, p_spos, bo, nb, W_state, W_node, W_sts, W_spos, W_wake, W_vs,
                                 run_flag, nh, hq_spos, n_row, n_stage, n_parent, n_ref, meta)
    for q in range(npot):
        pos = nh
        while pos > 0 and not held_before(hq_spos[pos - 1], hq_epos[pos - 1], hq_node[pos - 1], p_spos[q], g,
                                          p_node[q], n_row, n_stage, n_parent):
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
    head = 0
    while head < nh:
        if skip_code != NO_SKIP:
            oldest = W_spos[bo] if nb > 0 else BIG  # the oldest live run, listed or parked
            if P[15][k] > 0:
                oldest = min(oldest, min_spos(P, k))
            if hq_spos[head] > oldest:
                break
        node = hq_node[head]
        pid = pruning_point(skip_code, skip_stage, node, n_row, n_stage, n_parent)
        head += 1
        if pid >= 0:
            while nb > 0 and (W_spos[bo] < pid or (not strict_prune and W_spos[bo] == pid)):
                release(n_row, n_stage, n_parent, n_ref, meta, W_node[bo])
                bo += 1
                nb -= 1
            if P[15][k] > 0:
                prune(P, k, pid, strict_prune, n_row, n_stage, n_parent, n_ref, meta)
            while head < nh and (hq_spos[head] < pid or (not strict_prune and hq_spos[head] == pid)):
                release(n_row, n_stage, n_parent, n_ref, meta, hq_node[head])
                head += 1
        pend_node[npend] = node  # the queue's reference moves to the emitted match
        pend_g[npend] = g
        pend_flag[npend] = 0
        pend_tts[npend] = 0
        npend += 1
    if head > 0:
        for x in range(nh - head):
            hq_sts[x] = hq_sts[x + head]
            hq_spos[x] = hq_spos[x + head]
            hq_epos[x] = hq_epos[x + head]
            hq_node[x] = hq_node[x + head]
        nh -= head
    return bo, nb, nh, npend


@njit(cache=True, nogil=True, _nrt=False)
def settle_matches(opts, mode, W, done, aux, Q, E, buf, P, k, bo, nb, npot, nh, npend, g):
    """``process_matches`` as a function of its own: generated steps call it (compiled once,
    linked into each) where they have completed or held matches."""
    return process_matches(opts, mode, W, done, aux, Q, E, buf, P, k, bo, nb, npot, nh, npend, g)


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
def _run_key(prog, opts, mode, batch, stop, W, done, aux, Q, E, S, buf, out, cur, P, PK):
    """Step key ``cur[KEY]`` from its event ``cur[J]`` on through the three phases, with the
    arrays it is given (it never grows one, so its loops do no reference counting). Stops at
    an event boundary when an array is too small (NEED_ROOM) or the matches of the last event
    do not fit the outputs (NEED_OUT, ``cur[ROOM]`` events needed; they wait in ``E``); the
    caller grows it and calls again."""
    window, tick_ts, want_timeouts = opts[0], opts[6], opts[3]
    per_run = mode[0]
    vw = mode[3]
    order, row0, ts, masks, cols, start_mask, rows = batch[1], batch[2], batch[3], batch[4], batch[5], batch[6], batch[7]
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at = W
    code, consts = prog[10], prog[11]
    vm_stack = S[4]
    pk_idx, pk_col, pk_op, pk_t0, pk_t1 = PK[0], PK[1], PK[2], PK[3], PK[4]
    SEG, KL, pm = P[14], P[15], P[18]
    n_pk = n_thresholds(SEG)
    park_min = cur[PARKS]  # the live runs from which the key parks (0: the pattern parks nothing)
    pend_node, pend_g, pend_flag, pend_tts = E
    n_row, n_stage, n_parent, n_ref, meta = buf
    m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage = out
    walk = S[7]
    k, row_lo, n_rows, n_events = cur[KEY], cur[ROW_LO], cur[N_ROWS], cur[N_EVENTS]
    cap = W_state.shape[0] // 2
    max_runs = opts[4]
    # the cursor's fields live in locals (registers) while the key is stepped
    j, ao, a_half, na, nh, npend, nm, ne = cur[J], cur[AO], cur[HALF], cur[NA], cur[NH], cur[NPEND], cur[NM], cur[NE]
    stamp, min_wake = cur[STAMP], -1  # min_wake unknown: the carried or moved runs are visited first
    dead = cur[DEAD] != 0
    code_ = DONE
    while True:
        if npend > 0:
            r1, r2 = flush_pending(npend, pend_node, pend_g, pend_flag, pend_tts, k, n_row, n_stage, n_parent, n_ref,
                                   meta, walk, m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne)
            if r1 < 0:
                cur[ROOM] = r2
                code_ = NEED_OUT
                break
            nm = r1
            ne = r2
            npend = 0
        if j >= n_events:
            break
        if stop[0] != 0:
            code_ = INTERRUPTED
            break
        final_tick = j == n_rows  # time advances to ``tick_ts`` with no event
        if final_tick:
            row = -1
            t = tick_ts
            g = BIG
            parked_expire = True
        else:
            row = order[row_lo + j]
            if na == 0 and nh == 0 and KL[k] == 0 and (dead or start_mask[row] == 0):
                # nothing alive for this key: jump to its next row that can start a match
                if dead:
                    j = n_rows
                    continue
                j += 1
                while j < n_rows and start_mask[order[row_lo + j]] == 0:
                    j += 1
                continue
            t = ts[row]
            parked_expire = False
            if KL[k] > 0:  # the parked runs this event wakes join the step (phase 2)
                parked_expire = look(P, k, n_pk, pk_col, pk_op, row, cols, t, window)
            if (min_wake > j and pm[PM_NK] == 0 and (dead or start_mask[row] == 0)
                    and (na == 0 or not expired(t, W_sts[ao], window)) and not parked_expire):
                # every run waits past this event, none times out and nothing starts: the
                # event changes nothing (no run, held match or start)
                j += 1
                continue
            g = row0 + rows[row]
        # room for this event: nodes, runs, completed, held and emitted matches
        nk = pm[PM_NK]
        need = (na + nk + 1) * per_run
        n_all = na + KL[k]
        parking = park_min > 0 and n_all >= park_min  # a key with few runs steps them all (parking costs more)
        if (short_of_room(need, n_all, nh, cap, buf, done, Q, E, opts[5], per_run)
                or parking and not park_fits(P, k, need) and not park_room(P, k, need)):
            code_ = NEED_ROOM
            break
        turn_v_arena(W_v, W_vs, v_at, ao, na, need + nk, cap, vw)
        j += 1
        for phase in range(2):
            fast = False
            if phase == 0:  # 1. advanceTime (when no run times out nothing changes)
                npend0 = npend
                timed_out, bo, nb, npot, npend = advance_time(prog, opts, W, done, E, buf, ao, na, npend, t, g,
                                                              final_tick)
                if KL[k] > 0 and parked_expire:
                    parked_out, npend = timeouts(P, k, t, window, final_tick, want_timeouts, g, pend_node, pend_g,
                                                 pend_flag, pend_tts, npend, n_row, n_stage, n_parent, n_ref, meta)
                    timed_out = timed_out or parked_out
                if not timed_out:
                    continue
                if npend - npend0 > 1:  # in path order, wherever the runs were kept
                    sort_by_path(pend_node, pend_g, pend_flag, pend_tts, npend0, npend, n_row, n_stage, n_parent)
            else:  # 2. computeNextStates
                if final_tick:
                    break
                if pm[PM_NK] > 0 and PK[7][0] and na == 0 and nh == 0:
                    # each woken run completes here (park.wake_final, no skip) and no listed run or
                    # held match of the key can come before its match: emitted straight from the park
                    npend = emit_woken(P, g, prog[1], pend_node, pend_g, pend_flag, pend_tts, npend, n_row, n_stage,
                                       n_parent, n_ref, meta)
                elif pm[PM_NK] > 0:  # the woken parked runs join the list, in start order (the other half)
                    dst = (1 - a_half) * cap
                    na = take_woken(P, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, vw, ao, na, dst,
                                    j - 1)
                    ao = dst
                    a_half = 1 - a_half
                    min_wake = -1  # a full step
                na0 = na
                bo, nb, npot, fast, dead, stamp, min_wake = compute_next_states(
                    prog, opts, mode, batch, W, done, aux, S, buf, ao, na, a_half, dead, stamp, min_wake, row_lo,
                    n_rows, j - 1, row, t, g, PK, parking, stop, P, k)
                if nb < 0:
                    code_ = INTERRUPTED
                    break
                if parking and nb > (na0 if fast else 0):
                    nb = park_pass(P, k, pk_idx, pk_col, pk_op, pk_t0, pk_t1, W_state, W_node, W_sts, W_spos, W_wake,
                                   W_vs, W_v, vw, bo, nb, na0 if fast else 0, code, consts, masks, cols, vm_stack)
                if nb + KL[k] > max_runs:
                    cur[ROOM] = nb + KL[k]
                    code_ = OVER_CAPACITY
                    break
            # 3. processMatchesAccordingToSkipStrategy, after each of them
            bo, nb, nh, npend = process_matches(opts, mode, W, done, aux, Q, E, buf, P, k, bo, nb, npot, nh, npend, g)
            if phase == 1 and not fast:  # the next list becomes the current one
                a_half = 1 - a_half
            ao = bo
            na = nb
        if code_ == OVER_CAPACITY or code_ == INTERRUPTED:
            break
    cur[J], cur[AO], cur[HALF], cur[NA], cur[NH], cur[NPEND], cur[NM], cur[NE] = j, ao, a_half, na, nh, npend, nm, ne
    cur[STAMP] = stamp
    cur[DEAD] = 1 if dead else 0
    return code_


@njit(cache=True, nogil=True)
def _room_runs(state, node, sts, spos, v, n, limit):
    """The new carried runs' arrays with room for ``n`` runs (doubled; ``limit`` > 0: at most that)."""
    if n <= state.shape[0]:
        return state, node, sts, spos, v
    n2 = max(2 * state.shape[0], n)
    if limit > 0:
        n2 = max(n, min(n2, limit))
    return grow(state, n2), grow(node, n2), grow(sts, n2), grow(spos, n2), grow_rows(v, n2)


@njit(cache=True, nogil=True)
def _room_held(sts, spos, epos, node, n):
    """The new held matches' arrays with room for ``n`` (doubled)."""
    if n <= sts.shape[0]:
        return sts, spos, epos, node
    n2 = max(2 * sts.shape[0], n)
    return grow(sts, n2), grow(spos, n2), grow(epos, n2), grow(node, n2)


@njit(cache=True, nogil=True, error_model="numpy")
def work_groups(prog, opts, batch, runs, buf, park_):
    """The groups ``_run_key`` (or a generated per-key step) takes besides the program, the
    options, the batch, the stop flag, the buffer and the output, as ``run_batch`` makes them
    for a call: ``(mode, cap, W, done, aux, Q, E, S, cur, PK, P)``. (Their Numba types make a
    per-key step's signature: ``colcep.engine.stepgen``.)"""
    n_keys = batch[0].shape[0] - 1
    n_row = buf[0]
    max_push, max_edges, st_merge = prog[18], prog[19], prog[17]
    skip_code, want_timeouts = opts[1], opts[3]
    vw = runs[5].shape[1]
    per_run = 2 * max_edges + 1
    # Merging equivalent runs (SASE+ 4.2.2): with no skip strategy and no timed-out output a
    # completed merged run stands for its runs' matches, all emitted at once
    merging = skip_code == NO_SKIP and want_timeouts == 0 and st_merge.any()
    if merging:
        per_run *= 2  # a JOIN node per merged child
    # Under skip-past-last-event / skip-to-next, the first completed match of a start prunes
    # every other run and match of that start when it is released, and is pruned together with
    # them otherwise: they can never be emitted, so they are dropped at once (not when timed-out
    # partial matches are wanted, since those runs could still time out first).
    dominate = (skip_code == SKIP_PAST_LAST_EVENT or skip_code == SKIP_TO_NEXT) and want_timeouts == 0
    mode = (per_run, dominate, merging, vw)
    # work arrays (see _run_key), grown between its calls: the runs ``W`` (two halves of
    # ``cap``), this event's completed matches, per-run scratch, held matches, emitted matches
    cap = 64
    v_at = np.zeros(2, np.int64)  # the V arena: next free slot, half in use
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v = grow_runs(
        np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
        np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64), v_at, 0, 0, cap, vw)
    # the groups _run_key takes, made again only when an array in them grows (a tuple made per key
    # costs an atomic reference count change per array, twice)
    Wt = (W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at)
    done = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64))
    # per run of the next list: kill marks or "made at this event"; merging: its target or new
    # place, and a hash table (a power of two) for merging across starts
    aux = (np.empty(cap, np.uint8), np.empty(cap, np.int64), np.empty(2 * cap, np.int64),
           np.full(2 * cap, -1, np.int64))
    Q = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64))
    E = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int32), np.empty(cap, np.int64))
    walk = np.empty(2 * n_row.shape[0] + 16 if merging else 16, np.int64)  # scratch: paths through JOINs
    S = (np.empty(max_push, np.int64), np.empty(max_edges, np.int32), np.empty(max_edges, np.int32),
         np.empty(max_edges, np.int32), np.empty(STACK, np.float64), np.zeros(prog[7].shape[0] + 1, np.uint8),
         np.full(prog[7].shape[0] + 1, -1, np.int64), walk)
    cur = np.zeros(N_CURSOR, np.int64)
    # parked runs (kernels/park.py): per state whether its waiting runs park, and the park
    PK = park_table(prog[0], prog[15], prog[7], prog[8], prog[9], prog[14], prog[10], st_merge, merging)
    pk_idx = PK[0]
    PK = PK + (np.array([start_park(prog[0], prog[3], prog[4], prog[5], prog[2], pk_idx)], np.int64),
               np.array([skip_code == NO_SKIP and wake_final(prog[0], prog[3], prog[4], prog[5], prog[6], pk_idx,
                                                             PK[5])], np.int64),
               first_threshold_states(prog[0], prog[3], prog[4], prog[5], prog[15], pk_idx, PK[5], dominate))
    P = fit_park(park_, PK[1].shape[0], vw, n_keys)
    P[18][PM_NK] = 0
    return mode, cap, Wt, done, aux, Q, E, S, cur, PK, P


@njit(cache=True, nogil=True, error_model="numpy")
def run_batch(run_key, prog, opts, stop, batch, runs, held, start_dead, buf, park_, out, nm, ne):
    """Process one batch (see the module docstring), ``run_key`` stepping each key: the
    interpreter ``_run_key`` (the generic tier) or a pattern's generated step
    (``colcep.engine.stepgen``), passed as a first-class function of their one signature, so
    that this driver is compiled once for every step, and apart from it (``colcep.engine.steps``).
    Every other argument but the counts is a group:

    - ``prog``: the program's tables (``CompiledPattern.tables()``); ``opts``: int64s
      (window, skip code, skip stage, want timeouts, max runs per key, max buffer nodes,
      tick time, max output events, max runs of all keys, the live runs from which a key parks
      its waiting runs: ``colcep.engine.program.PARK_MIN``); ``stop``: the caller sets ``stop[0]``
      to interrupt the call;
    - ``batch``: (key_ptr, order, row0, ts, masks, cols, start_mask, rows): the rows grouped
      by key (CSR ``key_ptr``) through ``order`` (the identity when the columns are gathered in
      key order, ``colcep.engine.state.key_batch``); ``rows[i]`` is the position of row ``i`` in
      the batch as given, ``row0`` the stream position of the batch's first row;
    - ``runs`` (ptr, state, node, start ts, start pos, V) and ``held`` (ptr, start ts, start
      pos, end pos, node): the carried listed runs and held matches per key (CSR over keys);
      ``park_``: the carried parked runs (``kernels.park``, changed in place: an open call's
      changes are undoable); ``start_dead[k]`` is set (in place) when a STOP state discarded key
      k's start run, which Flink never recreates; ``buf``: the shared buffer (row, stage,
      parent, ref, meta);
    - ``out``: the output arrays, appended to after ``nm`` matches and ``ne`` events.

    A key without events in the call keeps its runs as they are (its listed runs and held
    matches are copied, its parked runs not touched). Returns the new ``runs``, ``held``, ``buf``
    and park (possibly grown) and ``out``, the numbers of matches and events written in all,
    and a status (code, key, figure). After an error the returned state is partial."""
    key_ptr = batch[0]
    n_keys = key_ptr.shape[0] - 1
    r_state, r_v, h_sts = runs[1], runs[5], held[1]
    n_row, n_stage, n_parent, n_ref, meta = buf
    max_nodes = opts[5]
    vw = r_v.shape[1]
    mode, cap, Wt, done, aux, Q, E, S, cur, PK, P = work_groups(prog, opts, batch, runs, buf, park_)
    per_run, merging = mode[0], mode[2]
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at = Wt
    pm = P[18]
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
    m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage = out
    outT = (m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage)
    bufT = (n_row, n_stage, n_parent, n_ref, meta)
    new_runs = (nr_state, nr_node, nr_sts, nr_spos, nr_v)
    new_held = (nh_sts, nh_spos, nh_epos, nh_node)
    m_off[nm] = ne
    status = np.zeros(3, np.int64)
    kc = np.zeros(KC_N, np.int64)  # where _keys stopped, and what it needs
    kc[KC_NM] = nm
    kc[KC_NE] = ne
    # _keys steps the keys until one needs an array to grow (or the call ends); the arrays grow
    # here, between its calls, so that no array variable changes inside its loop (Numba would
    # count the references of every array such a loop carries, at every key)
    while True:
        why = _keys(run_key, prog, opts, mode, batch, stop, Wt, done, aux, Q, E, S, bufT, outT, cur, P, PK, runs, held,
                    start_dead, new_runs, new_held, nr_ptr, nh_ptr, kc, status, cap)
        if why == KW_DONE or why == KW_FAILED:
            break
        k, need = kc[KC_KEY], kc[KC_NEED]
        if why == KW_RUNS:  # the new carried runs, to ``need`` (the state's bound: ``opts[8]``)
            new_runs = _room_runs(new_runs[0], new_runs[1], new_runs[2], new_runs[3], new_runs[4], need,
                                  kc[KC_LIMIT])
        elif why == KW_HELD:
            new_held = _room_held(new_held[0], new_held[1], new_held[2], new_held[3], need)
        elif why == KW_LOAD:  # room to load the key's ``need`` carried runs (and ``kc[KC_HELD_N]`` held)
            if need > cap:
                cap = 2 * need
                W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v = grow_runs(
                    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, 0, 0, cap, vw)
                Wt = (W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at)
            if kc[KC_PARK] != 0 and not park_fits(P, k, need):
                P = grow_park(P, k, need, vw)
                pm = P[18]
            nh = kc[KC_HELD_N]
            if nh > Q[0].shape[0]:
                Q = (grow(Q[0], nh), grow(Q[1], nh), grow(Q[2], nh), grow(Q[3], nh))
        elif why == KW_OUT:  # NEED_OUT: the output (the bound checked in _keys)
            ne, nm = kc[KC_NE], kc[KC_NM]
            m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage = grow_out(
                m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage, nm + cur[ROOM] + 2, ne + cur[ROOM])
            outT = (m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage)
        else:  # NEED_ROOM: the work arrays, the buffer or the park, for the key's next event
            ao, na, nh = cur[AO], cur[NA], cur[NH]
            need = (na + pm[PM_NK] + 1) * per_run
            n_all = na + P[15][k]
            if not park_room(P, k, need):
                if opts[8] > 0 and pool_room(P) < need and \
                        kc[KC_RUNS] + na + pm[PM_LIVE] + need > opts[8]:  # the runs of all keys (the state's bytes)
                    status[0] = ERR_CAPACITY
                    status[1] = k
                    status[2] = -(kc[KC_RUNS] + na + pm[PM_LIVE])  # negative: all keys' runs
                    break
                P = grow_park(P, k, need, vw)
                pm = P[18]
                if (n_row.shape[0] - meta[0] + meta[2] >= need and need <= cap and need <= done[0].shape[0]
                        and nh + n_all + need <= Q[0].shape[0] and nh + 2 * n_all + need <= E[0].shape[0]):
                    continue  # only the park was short of room: no other array grows (nor is the bound checked)
            if meta[0] - meta[2] + (n_all + 1) * per_run > max_nodes:
                status[0] = ERR_NODES
                status[1] = k
                status[2] = meta[0] - meta[2]  # the live nodes
                break
            if n_row.shape[0] - meta[0] + meta[2] < need:
                n_row, n_stage, n_parent, n_ref = reserve(n_row, n_stage, n_parent, n_ref, meta, need)
                bufT = (n_row, n_stage, n_parent, n_ref, meta)
                if n_row.shape[0] - meta[0] + meta[2] < need:  # the bytes bound allows no more (buffer.reserve)
                    status[0] = ERR_NODES
                    status[1] = k
                    status[2] = meta[0] - meta[2]
                    break
                if merging and S[7].shape[0] < 2 * n_row.shape[0]:
                    S = S[:7] + (np.empty(0, np.int64),)  # (the old scratch goes before the new one comes)
                    S = S[:7] + (np.empty(2 * n_row.shape[0] + 16, np.int64),)
            if need > cap or need > done[0].shape[0]:
                cap = max(cap, 2 * need)
                W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v = grow_runs(
                    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, ao, na, cap, vw)
                Wt = (W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at)
                cur[AO] = 0
                cur[HALF] = 0
                done = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64))
                ht_size = 2 * aux[2].shape[0]
                while ht_size < 2 * cap:
                    ht_size *= 2
                aux = (np.empty(cap, np.uint8), np.empty(cap, np.int64), np.empty(ht_size, np.int64),
                       np.full(ht_size, -1, np.int64))
            room = 2 * (nh + 2 * (na + P[15][k]) + need)
            if room > Q[0].shape[0]:
                Q = (grow(Q[0], room), grow(Q[1], room), grow(Q[2], room), grow(Q[3], room))
            if room > E[0].shape[0]:
                E = (grow(E[0], room), grow(E[1], room), grow(E[2], room), grow(E[3], room))
    if status[0] != OK and kc[KC_PHASE] == KP_STEP:
        start_dead[kc[KC_KEY]] = cur[DEAD]  # (as after every call of the step)
    out_runs, out_held = kc[KC_RUNS], kc[KC_HELD]
    nr_state, nr_node, nr_sts, nr_spos, nr_v = new_runs
    nh_sts, nh_spos, nh_epos, nh_node = new_held
    return ((nr_ptr, nr_state[:out_runs], nr_node[:out_runs], nr_sts[:out_runs], nr_spos[:out_runs], nr_v[:out_runs]),
            (nh_ptr, nh_sts[:out_held], nh_spos[:out_held], nh_epos[:out_held], nh_node[:out_held]),
            (n_row, n_stage, n_parent, n_ref, meta), P, (m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage),
            kc[KC_NM], kc[KC_NE], status)


# where ``_keys`` stopped (``kc``): the key, its phase, the new carried runs and held matches so far,
# the matches and events written, and what it needs (room for ``need``: runs, held matches, the
# key's carried runs; the state's bound on all runs; the key's held matches; whether it parks)
KC_KEY, KC_PHASE, KC_RUNS, KC_HELD, KC_NM, KC_NE, KC_NEED, KC_LIMIT, KC_HELD_N, KC_PARK, KC_N = range(11)
KP_START, KP_STEP, KP_STORE = 0, 1, 2  # a key's phases: load (or copy) its state, step it, store it
# why ``_keys`` returned: done, failed (``status``), or which arrays need room
KW_DONE, KW_FAILED, KW_RUNS, KW_HELD, KW_LOAD, KW_OUT, KW_ROOM = range(7)


@njit(cache=True, nogil=True, error_model="numpy")
def _keys(run_key, prog, opts, mode, batch, stop, Wt, done, aux, Q, E, S, bufT, outT, cur, P, PK, runs, held,
          start_dead, new_runs, new_held, nr_ptr, nh_ptr, kc, status, cap):
    """``run_batch``'s keys from ``kc[KC_KEY]`` (in phase ``kc[KC_PHASE]``) on: each key's carried
    runs and held matches loaded, its events stepped (``run_key``), its runs and held matches
    stored. Returns ``KW_DONE`` after the last key, ``KW_FAILED`` with ``status`` set, or what
    must grow first (``KW_*``, with ``kc``), the key and its phase kept in ``kc`` to resume there.
    No array variable is reassigned here: the loop carries no reference counts."""
    key_ptr = batch[0]
    n_keys = key_ptr.shape[0] - 1
    tick_ts = opts[6]
    r_ptr, r_state, r_node, r_sts, r_spos, r_v = runs
    h_ptr, h_sts, h_spos, h_epos, h_node = held
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at = Wt
    Q0, Q1, Q2, Q3 = Q
    nr_state, nr_node, nr_sts, nr_spos, nr_v = new_runs
    nh_sts, nh_spos, nh_epos, nh_node = new_held
    KL, pm = P[15], P[18]
    pk_idx, pk_1, pk_2, pk_3, pk_4 = PK[0], PK[1], PK[2], PK[3], PK[4]
    code, consts, masks, cols, vm_stack = prog[10], prog[11], batch[4], batch[5], S[4]
    vw = r_v.shape[1]
    r_vf, nr_vf = r_v.reshape(r_v.shape[0] * vw), nr_v.reshape(nr_v.shape[0] * vw)  # (V rows, flat)
    any_park = pk_idx.shape[0] > 0 and pk_idx.max() >= 0
    park_min = opts[9]
    n_old_keys = r_ptr.shape[0] - 1
    out_runs, out_held, nm, ne = kc[KC_RUNS], kc[KC_HELD], kc[KC_NM], kc[KC_NE]
    why = KW_DONE
    for k in range(kc[KC_KEY], n_keys):
        phase = kc[KC_PHASE] if k == kc[KC_KEY] else KP_START
        n_rows = key_ptr[k + 1] - key_ptr[k]
        n_events = n_rows + 1 if tick_ts != NO_TICK else n_rows
        lo = r_ptr[k] if k < n_old_keys else 0
        n_carried = r_ptr[k + 1] - lo if k < n_old_keys else 0
        hl = h_ptr[k] if k < n_old_keys else 0
        n_held = h_ptr[k + 1] - hl if k < n_old_keys else 0
        if phase == KP_START and n_events == 0:  # ---- a key without events keeps its state: copied
            if out_runs + n_carried > nr_state.shape[0]:
                why, kc[KC_NEED], kc[KC_LIMIT] = KW_RUNS, out_runs + n_carried, 0
                break
            if out_held + n_held > nh_sts.shape[0]:
                why, kc[KC_NEED] = KW_HELD, out_held + n_held
                break
            copy_into(nr_state, out_runs, r_state, lo, n_carried)
            copy_into(nr_node, out_runs, r_node, lo, n_carried)
            copy_into(nr_sts, out_runs, r_sts, lo, n_carried)
            copy_into(nr_spos, out_runs, r_spos, lo, n_carried)
            copy_into(nr_vf, out_runs * vw, r_vf, lo * vw, n_carried * vw)
            out_runs += n_carried
            nr_ptr[k + 1] = out_runs
            copy_into(nh_sts, out_held, h_sts, hl, n_held)
            copy_into(nh_spos, out_held, h_spos, hl, n_held)
            copy_into(nh_epos, out_held, h_epos, hl, n_held)
            copy_into(nh_node, out_held, h_node, hl, n_held)
            out_held += n_held
            nh_ptr[k + 1] = out_held
            continue
        if phase == KP_START:  # ---- load the key's carried runs and held matches (parked runs stay parked)
            parking = any_park and n_carried + KL[k] >= park_min
            if n_carried > cap or (parking and not park_fits(P, k, n_carried)) or n_held > Q0.shape[0]:
                why, kc[KC_NEED], kc[KC_HELD_N], kc[KC_PARK] = KW_LOAD, n_carried, n_held, 1 if parking else 0
                break
            na = 0
            if not parking:  # every carried run is listed, in order: block copies
                copy_into(W_state, 0, r_state, lo, n_carried)
                copy_into(W_node, 0, r_node, lo, n_carried)
                copy_into(W_sts, 0, r_sts, lo, n_carried)
                copy_into(W_spos, 0, r_spos, lo, n_carried)
                copy_into(W_v, 0, r_vf, lo * vw, n_carried * vw)
                for i in range(n_carried):
                    W_wake[i] = -1
                    W_vs[i] = i
                na = n_carried
            else:  # runs in a parkable state park, the others are listed
                for i in range(n_carried):
                    W_state[na] = r_state[lo + i]
                    W_node[na] = r_node[lo + i]
                    W_sts[na] = r_sts[lo + i]
                    W_spos[na] = r_spos[lo + i]
                    W_wake[na] = -1
                    W_vs[na] = na
                    for jj in range(vw):
                        W_v[na * vw + jj] = r_v[lo + i, jj]
                    s = r_state[lo + i]
                    if pk_idx[s] >= 0:
                        park(P, k, pk_1, pk_2, pk_3, pk_4, pk_idx[s], s, W_node[na], W_sts[na], W_spos[na], W_v,
                             na * vw, vw, code, consts, masks, cols, vm_stack)
                    else:
                        na += 1
            copy_into(Q0, 0, h_sts, hl, n_held)
            copy_into(Q1, 0, h_spos, hl, n_held)
            copy_into(Q2, 0, h_epos, hl, n_held)
            copy_into(Q3, 0, h_node, hl, n_held)
            v_at[0] = na  # the carried runs' V are the arena's first slots
            v_at[1] = 0
            stamp = cur[STAMP]  # condition results are cached under stamps unique in the call
            cur[:] = 0
            cur[STAMP] = stamp
            cur[NA] = na
            cur[NH] = n_held
            cur[DEAD] = start_dead[k]
            cur[KEY] = k
            cur[ROW_LO] = key_ptr[k]
            cur[N_ROWS] = n_rows
            cur[N_EVENTS] = n_events
            cur[PARKS] = park_min if any_park else 0
            phase = KP_STEP
        if phase == KP_STEP:  # ---- step its events (resumed where it stopped for room)
            cur[NM] = nm
            cur[NE] = ne
            code_ = run_key(prog, opts, mode, batch, stop, Wt, done, aux, Q, E, S, bufT, outT, cur, P, PK)
            nm = cur[NM]
            ne = cur[NE]
            if code_ == OVER_CAPACITY or code_ == INTERRUPTED:
                status[0] = ERR_CAPACITY if code_ == OVER_CAPACITY else ERR_INTERRUPTED
                status[1] = k
                status[2] = cur[ROOM]  # the number of runs
                why = KW_FAILED
                break
            if code_ == NEED_OUT:
                if opts[7] > 0 and ne + cur[ROOM] > opts[7]:  # the output's bound (the state's bytes)
                    status[0] = ERR_OUTPUT
                    status[1] = k
                    status[2] = ne + cur[ROOM]
                    why = KW_FAILED
                    break
                why = KW_OUT
                break
            if code_ != DONE:  # NEED_ROOM
                why = KW_ROOM
                break
            start_dead[k] = cur[DEAD]
            phase = KP_STORE
        # ---- store the key's listed runs and held matches (its parked runs stay in the park)
        ao, na, nh = cur[AO], cur[NA], cur[NH]
        if out_runs + na > nr_state.shape[0]:
            if opts[8] > 0 and out_runs + na + pm[PM_LIVE] > opts[8]:  # the runs of all keys (the state's bytes)
                status[0] = ERR_CAPACITY
                status[1] = k
                status[2] = -(out_runs + na + pm[PM_LIVE])  # negative: all keys' runs
                why = KW_FAILED
                break
            why, kc[KC_NEED], kc[KC_LIMIT] = KW_RUNS, out_runs + na, opts[8]  # (to the bound at most)
            break
        if out_held + nh > nh_sts.shape[0]:
            why, kc[KC_NEED] = KW_HELD, out_held + nh
            break
        copy_into(nr_state, out_runs, W_state, ao, na)
        copy_into(nr_node, out_runs, W_node, ao, na)
        copy_into(nr_sts, out_runs, W_sts, ao, na)
        copy_into(nr_spos, out_runs, W_spos, ao, na)
        for i in range(na):
            copy_into(nr_vf, (out_runs + i) * vw, W_v, W_vs[ao + i] * vw, vw)
        out_runs += na
        nr_ptr[k + 1] = out_runs
        copy_into(nh_sts, out_held, Q0, 0, nh)
        copy_into(nh_spos, out_held, Q1, 0, nh)
        copy_into(nh_epos, out_held, Q2, 0, nh)
        copy_into(nh_node, out_held, Q3, 0, nh)
        out_held += nh
        nh_ptr[k + 1] = out_held
    kc[KC_RUNS], kc[KC_HELD], kc[KC_NM], kc[KC_NE] = out_runs, out_held, nm, ne
    if why != KW_DONE:
        kc[KC_KEY] = k
        kc[KC_PHASE] = phase
    return why
