"""The NFA^b step kernel: all keys of one batch in one call.

Rows arrive in input order; ``order`` lists them grouped by key (``key_ptr``, CSR), in time
order within a key. For every
key the kernel carries its runs (Flink's computation states) from the previous batch,
pushes each of the key's rows through them and writes the surviving runs back, so that a
key's partial matches span batch boundaries. Per event it follows Flink CEP's operator:

1. ``advanceTime``: runs whose window has passed (``ts - start_ts >= window``, exact for any
   int64) time out; runs are kept sorted by start event, so they are a prefix. A trailing
   ``not_followed_by`` run (PENDING state) completes instead. After a key's rows, a
   ``tick_ts`` (a watermark) advances its time once more with no event; ``TIME_MAX`` is the
   end of input, where every windowed run times out.
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
(ERR_INTERRUPTED); ``max_runs`` bounds a key's runs (ERR_CAPACITY) and ``max_nodes`` the
buffer's live nodes (ERR_NODES). After any of these the returned state is partial: the caller
discards it and keeps its copy from before the call.

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

from .arrays import grow, grow_rows
from .buffer import alloc, compare_paths, join, release, reserve, walk_paths
from .vm import STACK, VW, compare, eval_program, eval_value, v_init, v_update

from .codes import (COND_MASK, COND_NOT, COND_PROGRAM, ERR_CAPACITY, ERR_INTERRUPTED, ERR_NODES, FINAL, IGNORE, NO_SKIP,  # noqa: F401
                    NORMAL, OK, PENDING, PROCEED, SKIP_PAST_LAST_EVENT, SKIP_TO_FIRST, SKIP_TO_LAST, SKIP_TO_NEXT,
                    STOP, TAKE, NO_TICK, TIME_MAX)

BIG = np.int64(2**62)  # "no such event" (an index past every key's events)
SCAN_AHEAD = 64  # events a waiting run's condition is scanned ahead at a time


@njit(cache=True, nogil=True, inline="always")
def _strip_not(c, cond_kind, cond_a):
    """Condition ``c`` without its negations: ``(inner condition, negated)``."""
    neg = False
    while cond_kind[c] == COND_NOT:
        neg = not neg
        c = cond_a[c]
    return c, neg


@njit(cache=True, nogil=True, _nrt=False)
def _cond(c, cond_kind, cond_a, cond_b, code, consts, row, masks, cols, v, voff, vm_stack, c_val, c_stamp, stamp):
    """Condition ``c`` (-1: true) for event ``row`` and the run whose V is at ``v[voff]``;
    program results are cached under ``stamp`` (one stamp per run and event)."""
    if c < 0:
        return True
    c, neg = _strip_not(c, cond_kind, cond_a)
    if cond_kind[c] == COND_MASK:
        r = masks[cond_a[c], row] != 0
    elif c_stamp[c] == stamp:
        r = c_val[c] != 0
    else:
        r = eval_program(code, cond_a[c], cond_b[c], consts, row, masks, cols, v, voff, vm_stack)
        c_val[c] = 1 if r else 0
        c_stamp[c] = stamp
    return r != neg


@njit(cache=True, nogil=True, inline="always")
def _expired(t, sts, window):
    """Has the window of a run started at ``sts`` passed at time ``t >= sts``? Exact for every
    int64 (``t - sts >= window`` without overflow)."""
    return window > 0 and sts <= TIME_MAX - window and t >= sts + window


@njit(cache=True, nogil=True, inline="always")
def _last_time(sts, window):
    """The last time inside the window of a run started at ``sts`` (saturating)."""
    if window <= 0 or sts > TIME_MAX - window + 1:
        return TIME_MAX
    return sts + window - 1


@njit(cache=True, nogil=True, inline="always")
def _deadline(sts, window):
    """When the window of a run started at ``sts`` passes: its timed-out time (saturating)."""
    if sts > TIME_MAX - window:
        return TIME_MAX
    return sts + window


@njit(cache=True, nogil=True)
def sleep_conditions(st_kind, tr_ptr, tr_act, tr_tgt, tr_cond, cond_kind, cond_a):
    """Per state, the condition a run there waits for (-1: none, the run is stepped at every
    event). A state waits when its edges are one TAKE with condition ``c`` and one IGNORE back
    to itself under ``not c`` or ``true``, and no PROCEED: at an event where ``c`` is false
    its run continues unchanged (same state, buffer node and V), so the kernel skips the run
    until the next event where ``c`` holds (SASE+'s skip till next / any match)."""
    out = np.full(st_kind.shape[0], -1, np.int64)
    for s in range(st_kind.shape[0]):
        if st_kind[s] != NORMAL and st_kind[s] != PENDING:
            continue
        take = -1
        n_take = 0
        n_ignore = 0
        ignore_ok = False
        for tr in range(tr_ptr[s], tr_ptr[s + 1]):
            if tr_act[tr] == TAKE:
                n_take += 1
                take = tr_cond[tr]
            elif tr_act[tr] == IGNORE:
                n_ignore += 1
                ignore_ok = tr_tgt[tr] == s
            else:
                n_take = 2  # a PROCEED edge: never waits
        if n_take != 1 or n_ignore != 1 or not ignore_ok or take < 0:
            continue
        for tr in range(tr_ptr[s], tr_ptr[s + 1]):
            if tr_act[tr] == IGNORE:
                c = tr_cond[tr]
                if c < 0 or (cond_kind[c] == COND_NOT and cond_a[c] == take):
                    out[s] = take
    return out


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
def _next_event(c, cond_kind, cond_a, cond_b, cond_thr, code, consts, masks, cols, v, voff, vm_stack,
                order, row_lo, j, n_rows, ts, last_t):
    """The first of the key's events ``j..n_rows-1`` at which condition ``c`` holds for the
    run whose V is at ``v[voff]``; ``BIG`` when there is none before time ``last_t`` (the
    run's window); the event to look again from after ``SCAN_AHEAD`` events or at
    ``n_rows`` (a run that something else ends early does not pay for its whole window)."""
    if n_rows > j + SCAN_AHEAD:
        n_rows = j + SCAN_AHEAD
    c, neg = _strip_not(c, cond_kind, cond_a)
    if cond_kind[c] == COND_MASK:
        m = cond_a[c]
        while j < n_rows:
            row = order[row_lo + j]
            if ts[row] > last_t:
                return BIG
            if (masks[m, row] != 0) != neg:
                return j
            j += 1
        return n_rows
    x = cond_thr[c, 0]
    if x >= 0:  # column <op> threshold
        op = cond_thr[c, 1]
        thr = eval_value(code, cond_thr[c, 2], cond_thr[c, 3], consts, -1, masks, cols, v, voff, vm_stack)
        if thr != thr and not neg:
            return BIG
        while j < n_rows:
            row = order[row_lo + j]
            if ts[row] > last_t:
                return BIG
            if compare(op, cols[x, row], thr) != neg:
                return j
            j += 1
        return n_rows
    while j < n_rows:
        row = order[row_lo + j]
        if ts[row] > last_t:
            return BIG
        if eval_program(code, cond_a[c], cond_b[c], consts, row, masks, cols, v, voff, vm_stack) != neg:
            return j
        j += 1
    return n_rows


@njit(cache=True, nogil=True)
def _stage_order(e_row, e_stage, lo, hi):
    """Put the events ``lo..hi`` of a match (arrival order) in stage order, arrival order
    within a stage (a stable insertion sort: usually sorted already)."""
    for i in range(lo + 1, hi):
        r = e_row[i]
        s = e_stage[i]
        j = i - 1
        while j >= lo and e_stage[j] > s:
            e_row[j + 1] = e_row[j]
            e_stage[j + 1] = e_stage[j]
            j -= 1
        e_row[j + 1] = r
        e_stage[j + 1] = s


@njit(cache=True, nogil=True)
def _record_before(e_row, e_stage, a0, a1, b0, b1):
    """Queue order of two matches written in arrival order (``compare_paths`` on records):
    events' positions lexicographically, then the shorter, then the stages."""
    m = min(a1 - a0, b1 - b0)
    for i in range(m):
        if e_row[a0 + i] != e_row[b0 + i]:
            return e_row[a0 + i] < e_row[b0 + i]
    if a1 - a0 != b1 - b0:
        return a1 - a0 < b1 - b0
    for i in range(m):
        if e_stage[a0 + i] != e_stage[b0 + i]:
            return e_stage[a0 + i] < e_stage[b0 + i]
    return False


@njit(cache=True, nogil=True)
def _sort_records(m_off, m_tts, lo, hi, e_row, e_stage, scratch):
    """Order the matches ``lo..hi`` (same key and emitting event, no timeouts) by the queue's
    order; ``e_*[scratch:]`` has room for their events, ``m_tts[lo:hi]`` is borrowed (zero)."""
    for r in range(lo, hi):  # insertion sort of record numbers, kept in m_tts
        x = r
        q = r - 1
        while q >= lo and _record_before(e_row, e_stage, m_off[x], m_off[x + 1], m_off[m_tts[q]],
                                         m_off[m_tts[q] + 1]):
            m_tts[q + 1] = m_tts[q]
            q -= 1
        m_tts[q + 1] = x
    w = scratch
    for q in range(lo, hi):
        r = m_tts[q]
        for x in range(m_off[r], m_off[r + 1]):
            e_row[w] = e_row[x]
            e_stage[w] = e_stage[x]
            w += 1
    base = m_off[lo]
    w = base
    for q in range(lo, hi):
        r = m_tts[q]
        n = m_off[r + 1] - m_off[r]
        m_tts[q] = n
    for q in range(lo, hi):
        n = m_tts[q]
        m_off[q] = w
        w += n
        m_tts[q] = 0
    m_off[hi] = w
    for x in range(base, w):
        e_row[x] = e_row[scratch + x - base]
        e_stage[x] = e_stage[scratch + x - base]


@njit(cache=True, nogil=True)
def _grow_out(m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage, n_matches, n_events):
    return (grow(m_key, n_matches), grow(m_row, n_matches), grow(m_flag, n_matches), grow(m_tts, n_matches),
            grow(m_off, n_matches + 1), grow(e_row, n_events), grow(e_stage, n_events))


@njit(cache=True, nogil=True)
def _grow_runs(W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, ao, na, cap, vw):
    """Work arrays for ``cap`` runs a half, the current list (``ao``, ``na``) moved to offset 0
    and its V vectors to the first slots of the V arena (two halves of ``2 * cap`` slots, then
    the empty V)."""
    state = np.empty(2 * cap, np.int32)
    node = np.empty(2 * cap, np.int64)
    sts = np.empty(2 * cap, np.int64)
    spos = np.empty(2 * cap, np.int64)
    wake = np.empty(2 * cap, np.int64)
    vs = np.empty(2 * cap, np.int64)
    v = np.empty((4 * cap + 1) * vw, np.float64)
    for i in range(na):
        state[i] = W_state[ao + i]
        node[i] = W_node[ao + i]
        sts[i] = W_sts[ao + i]
        spos[i] = W_spos[ao + i]
        wake[i] = W_wake[ao + i]
        vs[i] = i
        for j in range(vw):
            v[i * vw + j] = W_v[W_vs[ao + i] * vw + j]
    v_init(v[4 * cap * vw:])
    v_at[0] = na
    v_at[1] = 0
    return state, node, sts, spos, wake, vs, v


@njit(cache=True, nogil=True, inline="always")
def _move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, src, dst):
    W_state[dst] = W_state[src]
    W_node[dst] = W_node[src]
    W_sts[dst] = W_sts[src]
    W_spos[dst] = W_spos[src]
    W_wake[dst] = W_wake[src]
    W_vs[dst] = W_vs[src]


@njit(cache=True, nogil=True)
def _lower_bound(a, lo, hi, x):
    """First index in ``a[lo:hi]`` (sorted) whose value is >= ``x``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


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
def _one_per_start(npot, p_node, p_sts, p_spos, bo, nb, W_state, W_node, W_sts, W_spos, W_wake, W_vs, kill,
                   nh, hq_spos, n_row, n_stage, n_parent, n_ref, meta):
    """Keep one completed match per start event (the first in queue order) and drop the
    start's other completed matches and live runs. ``p_*`` (this event's completed matches),
    the runs ``W_*[bo:bo+nb]`` and ``hq_spos`` (waiting matches) are sorted by start event.
    Returns the numbers of completed matches and runs kept."""
    kept = 0
    q = 0
    for i in range(nb):
        kill[i] = 0
    while q < npot:
        s = p_spos[q]
        best = q
        r = q + 1
        while r < npot and p_spos[r] == s:
            if compare_paths(n_row, n_stage, n_parent, p_node[r], p_node[best]) < 0:
                best = r
            r += 1
        held = _lower_bound(hq_spos, 0, nh, s)
        keep_best = not (held < nh and hq_spos[held] == s)
        for x in range(q, r):
            if x != best or not keep_best:
                release(n_row, n_stage, n_parent, n_ref, meta, p_node[x])
        if keep_best:
            p_node[kept] = p_node[best]
            p_sts[kept] = p_sts[best]
            p_spos[kept] = s
            kept += 1
        lo = _lower_bound(W_spos, bo, bo + nb, s)
        while lo < bo + nb and W_spos[lo] == s:
            kill[lo - bo] = 1
            lo += 1
        q = r
    w = 0
    for i in range(nb):
        if kill[i]:
            release(n_row, n_stage, n_parent, n_ref, meta, W_node[bo + i])
        else:
            if w != i:
                _move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, bo + i, bo + w)
            w += 1
    return kept, w


@njit(cache=True, nogil=True)
def dfs_bounds(tr_ptr, tr_act, tr_tgt, n_states):
    """Upper bounds, over all start states, of the pushes and of the TAKE / IGNORE edges of
    one decision-graph DFS (every condition taken as true; PROCEED edges form a DAG)."""
    pushes = np.ones(n_states, np.int64)
    edges = np.zeros(n_states, np.int64)
    for _ in range(n_states + 1):  # longest PROCEED chain < n_states: a fixpoint by then
        for s in range(n_states):
            p = 1
            e = 0
            for tr in range(tr_ptr[s], tr_ptr[s + 1]):
                if tr_act[tr] == PROCEED:
                    p += pushes[tr_tgt[tr]]
                    e += edges[tr_tgt[tr]]
                else:
                    e += 1
            pushes[s] = min(p, 1 << 20)
            edges[s] = min(e, 1 << 20)
    return max(16, pushes.max() + 1), max(1, edges.max())


@njit(cache=True, nogil=True)
def _flush_pending(npend, pend_node, pend_g, pend_flag, pend_tts, k, n_row, n_stage, n_parent, n_ref, meta, walk,
                   m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne):
    """Write the matches emitted during the last event and release their nodes: one match per
    path, so a merged run's completion gives each of its runs' matches, put in the queue's
    order. Returns (matches, events) written, or (-1, events of room needed)."""
    records = 0
    total = 0
    for i in range(npend):
        c, e = walk_paths(n_row, n_stage, n_parent, pend_node[i], walk, False, m_off, 0, e_row, e_stage, 0)
        records += c
        total += e
    room = total if records == npend else 2 * total  # merged paths are sorted through scratch
    if nm + records + 1 >= m_off.shape[0] or nm + records >= m_key.shape[0] or ne + room > e_row.shape[0]:
        return -1, room
    first = nm
    m_off[nm] = ne
    for i in range(npend):
        r0 = nm
        nm, ne = walk_paths(n_row, n_stage, n_parent, pend_node[i], walk, True, m_off, nm, e_row, e_stage, ne)
        for r in range(r0, nm):
            m_key[r] = k
            m_row[r] = pend_g[i]
            m_flag[r] = pend_flag[i]
            m_tts[r] = pend_tts[i]
        release(n_row, n_stage, n_parent, n_ref, meta, pend_node[i])
    if records > npend:
        _sort_records(m_off, m_tts, first, nm, e_row, e_stage, ne)
    for r in range(first, nm):
        _stage_order(e_row, e_stage, m_off[r], m_off[r + 1])
    return nm, ne


@njit(cache=True, nogil=True)
def _merge_runs(bo, nb, new, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, vw, st_rel, st_merge,
                n_row, n_stage, n_parent, n_ref, meta, cross, aux, ht_run, ht_gen, gen):
    """SASE+'s merging of equivalent runs: a run made at this event (``new``) in the same
    state as a run kept before it or an older run after it, with the same relevant part of V
    (``st_rel``), continues identically, so it becomes that run: a JOIN node keeps both paths.
    Without ``cross`` only runs of the same start merge (a window acts on each start); with it
    (no window) runs of any start do, so the live runs of a Kleene closure stay a few per state
    instead of a few per start. Targets come from one pass over a hash table on (state,
    relevant V, and the start without ``cross``) (``ht_*``, stamped ``gen``; ``_merge_targets``);
    ``aux``: scratch, one slot per run. Returns the number of runs left (kept in order at ``bo``)."""
    _merge_targets(bo, nb, new, W_state, W_spos, W_vs, W_v, vw, st_rel, st_merge, cross, aux, ht_run, ht_gen, gen)
    w = 0
    for q in range(nb):
        x = bo + q
        y = -1
        t = aux[q]
        if t >= 0:  # its target: kept before it (already moved) or an older run after it
            y = bo + (-2 - aux[t] if t < q else t)
        if y >= 0:
            W_node[y] = join(n_row, n_stage, n_parent, n_ref, meta, W_node[y], W_node[x])
            if W_wake[x] < W_wake[y]:
                W_wake[y] = W_wake[x]
        else:
            if w != q:
                _move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, x, bo + w)
            aux[q] = -2 - w  # where the kept run now is
            w += 1
    return w


@njit(cache=True, nogil=True)
def _merge_targets(bo, nb, new, W_state, W_spos, W_vs, W_v, vw, st_rel, st_merge, cross, aux, ht_run, ht_gen, gen):
    """For every run ``q``, the run it merges into (``aux[q]``, an index into the list) or -1:
    a new run merges into an older run anywhere in the list or a new run kept before it, of
    the same start unless ``cross``. One pass over a hash table: linear in the runs."""
    mask = ht_run.shape[0] - 1
    for phase in range(2):  # 0: the older runs enter the table; 1: the new runs look up
        for q in range(nb):
            x = bo + q
            s = W_state[x]
            if phase == 0:
                aux[q] = -1
            if not st_merge[s] or (phase == 0) == (new[q] != 0):
                continue
            h = _run_hash(s, W_v, W_vs[x] * vw, st_rel)
            if not cross:
                h = (h ^ W_spos[x]) * np.int64(0x9E3779B97F4A7C15)
            i = (h ^ (h >> np.int64(31))) & mask
            while ht_gen[i] == gen:
                y = ht_run[i]
                if (W_state[bo + y] == s and (cross or W_spos[bo + y] == W_spos[x])
                        and _same_relevant(W_v, W_vs[bo + y] * vw, W_vs[x] * vw, st_rel, s)):
                    break
                i = (i + 1) & mask
            if ht_gen[i] == gen:
                if phase == 1:
                    aux[q] = ht_run[i]
            else:
                ht_gen[i] = gen
                ht_run[i] = q


@njit(cache=True, nogil=True, inline="always")
def _run_hash(s, v, a, st_rel):
    """A hash of a run's state and relevant V (equal runs hash alike; NaN as one value)."""
    h = np.int64(s) * np.int64(0x9E3779B1) + np.int64(0x632BE5AB)
    for g in range(st_rel.shape[1]):
        if st_rel[s, g]:
            for f in range(VW):
                x = v[a + g * VW + f]
                if x != x:
                    k = np.int64(0x7FF8)
                elif abs(x) < 4e18:
                    k = np.int64(x) * np.int64(0x2545F491) + np.int64((x - np.floor(x)) * 1073741824.0)
                else:
                    k = np.int64(1) if x > 0 else np.int64(-1)
                h = (h ^ k) * np.int64(0x100000001B3)
    return h ^ (h >> np.int64(29))


@njit(cache=True, nogil=True)
def _same_relevant(v, a, b, st_rel, s):
    """The V groups state ``s`` reads are equal (bit for bit: nulls equal) at ``a`` and ``b``."""
    for g in range(st_rel.shape[1]):
        if st_rel[s, g]:
            for f in range(VW):
                x = v[a + g * VW + f]
                y = v[b + g * VW + f]
                if x != y and not (x != x and y != y):
                    return False
    return True


# what _run_key asks of its caller
DONE, NEED_ROOM, NEED_OUT, OVER_CAPACITY, INTERRUPTED = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
def _run_key(
        st_kind, st_stage, start_state, tr_ptr, tr_act, tr_tgt, tr_cond,
        cond_kind, cond_a, cond_b, code, consts, vg_stage, vg_col, cond_thr, sleep_cond, st_rel, st_merge,
        window, skip_code, skip_stage, want_timeouts, max_runs, stop, tick_ts, dominate, merging, per_run, vw,
        k, row_lo, n_rows, n_events, order, row0, ts, masks, cols, start_mask,
        W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, p_node, p_sts, p_spos, run_flag,
        m_aux, ht_run, ht_gen,
        hq_sts, hq_spos, hq_epos, hq_node, pend_node, pend_g, pend_flag, pend_tts,
        stack, e_act, e_src, e_tgt, vm_stack, c_val, c_stamp,
        n_row, n_stage, n_parent, n_ref, meta, walk,
        m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage,
        j, ao, a_half, na, nh, npend, nm, ne, dead, stamp):
    """Run key ``k`` from its event ``j`` on, with the arrays it is given (it never grows
    one, so its loops do no reference counting). Stops at an event boundary when an array is
    too small (NEED_ROOM) or the matches of the last event do not fit the outputs (NEED_OUT,
    ``npend`` of them waiting in ``pend_*``); the caller grows it and calls again."""
    cap = W_state.shape[0] // 2
    zero_off = 4 * cap * vw  # the empty V, after the two halves of the V arena
    strict_prune = skip_code == SKIP_TO_FIRST or skip_code == SKIP_TO_LAST
    min_wake = -1  # no run waits past this event (unknown: carried runs are visited first)
    fast = False
    while True:
        if npend > 0:
            r1, r2 = _flush_pending(npend, pend_node, pend_g, pend_flag, pend_tts, k, n_row, n_stage, n_parent,
                                    n_ref, meta, walk, m_key, m_row, m_flag, m_tts, m_off, nm, e_row, e_stage, ne)
            if r1 < 0:
                return NEED_OUT, j, ao, a_half, na, nh, npend, nm, r2, dead, stamp
            nm = r1
            ne = r2
            npend = 0
        if j >= n_events:
            return DONE, j, ao, a_half, na, nh, npend, nm, ne, dead, stamp
        if stop[0] != 0:
            return INTERRUPTED, j, ao, a_half, na, nh, npend, nm, ne, dead, stamp
        final_tick = j == n_rows  # time advances to ``tick_ts`` with no event
        if final_tick:
            row = -1
            t = tick_ts
            g = BIG
        else:
            row = order[row_lo + j]
            if na == 0 and nh == 0 and (dead or start_mask[row] == 0):
                # nothing alive for this key: jump to its next row that can start a match
                if dead:
                    j = n_rows
                    continue
                j += 1
                while j < n_rows and start_mask[order[row_lo + j]] == 0:
                    j += 1
                continue
            t = ts[row]
            if min_wake > j and (dead or start_mask[row] == 0) and (na == 0 or not _expired(t, W_sts[ao], window)):
                # every run waits past this event, none times out and nothing starts: the
                # event changes nothing (no run, held match or start)
                j += 1
                continue
            g = row0 + row
        # room for this event: nodes, runs, completed, waiting and emitted matches
        need = (na + 1) * per_run
        if (n_row.shape[0] - meta[0] + meta[2] < need or need > cap or nh + na + need > hq_sts.shape[0]
                or nh + 2 * na + need > pend_node.shape[0] or need > p_node.shape[0]):
            return NEED_ROOM, j, ao, a_half, na, nh, npend, nm, ne, dead, stamp
        if v_at[0] + need > (v_at[1] + 1) * 2 * cap:
            # the V arena's half is used up: the live runs' V move to the other half's start
            w = (1 - v_at[1]) * 2 * cap
            for i in range(ao, ao + na):
                for jj in range(vw):
                    W_v[w * vw + jj] = W_v[W_vs[i] * vw + jj]
                W_vs[i] = w
                w += 1
            v_at[1] = 1 - v_at[1]
            v_at[0] = w
        j += 1

        for phase in range(2):  # 0: advanceTime, 1: process the event
            npot = 0
            if phase == 0:
                # ---- advanceTime: the timed-out runs are a prefix (sorted by start); when
                # none times out nothing can change (waiting matches stay held)
                cut = 0
                while window > 0 and cut < na and ((final_tick and t == TIME_MAX) or _expired(t, W_sts[ao + cut],
                                                                                               window)):
                    cut += 1
                if cut == 0:
                    continue
                for i in range(ao, ao + cut):
                    if st_kind[W_state[i]] == PENDING:
                        p_node[npot] = W_node[i]
                        p_sts[npot] = W_sts[i]
                        p_spos[npot] = W_spos[i]
                        npot += 1
                    else:
                        if want_timeouts:
                            n_ref[W_node[i]] += 1
                            pend_node[npend] = W_node[i]
                            pend_g[npend] = g
                            pend_flag[npend] = 1
                            pend_tts[npend] = _deadline(W_sts[i], window)
                            npend += 1
                        release(n_row, n_stage, n_parent, n_ref, meta, W_node[i])
                # the survivors stay where they are: the list now starts after the cut
                bo = ao + cut
                nb = na - cut
            else:
                if final_tick:
                    break
                # ---- computeNextStates for every run, the start run last. When every run
                # waits past this event only the start run can act: its children (the latest
                # start) are appended in place; otherwise the next list is built in the other half.
                jc = j - 1
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
                    is_start = i == na
                    if is_start:
                        if start_mask[row] == 0:
                            continue  # the start run takes nothing here
                    else:
                        wake = W_wake[ao + i]
                        if wake <= jc and sleep_cond[W_state[ao + i]] >= 0:
                            last_t = _last_time(W_sts[ao + i], window)
                            wake = _next_event(sleep_cond[W_state[ao + i]], cond_kind, cond_a, cond_b, cond_thr, code,
                                               consts, masks, cols, W_v, W_vs[ao + i] * vw, vm_stack, order, row_lo, jc,
                                               n_rows, ts, last_t)
                        if wake > jc:  # waiting: the event leaves the run as it is (its V stays put)
                            x = bo + nb
                            _move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, ao + i, x)
                            W_wake[x] = wake
                            run_flag[nb] = 0  # not new: never merged into an earlier run
                            nb += 1
                            if wake < min_wake:
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
                    # decision graph: DFS over PROCEED edges, collecting TAKE / IGNORE edges; a
                    # waiting run whose scan found its condition true here takes its TAKE edge,
                    # and its IGNORE edge when that one is unconditional
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
                            if _cond(tr_cond[tr], cond_kind, cond_a, cond_b, code, consts, row, masks, cols,
                                     W_v, voff, vm_stack, c_val, c_stamp, stamp):
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
                                                tr_cond[tr], cond_kind, cond_a, cond_b, code, consts, row,
                                                masks, cols, W_v, voff, vm_stack, c_val, c_stamp, stamp):
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
                                    for vg in range(vg_stage.shape[0]):
                                        if vg_stage[vg] == stg:
                                            c = vg_col[vg]
                                            v_update(W_v, xo + vg * VW, cols[c, row] if c >= 0 else 0.0, g)
                                wake = jc + 1  # the next event this run must see
                                if sleep_cond[s1] >= 0:
                                    wake = _next_event(sleep_cond[s1], cond_kind, cond_a, cond_b, cond_thr, code,
                                                       consts, masks, cols, W_v, xo, vm_stack, order, row_lo,
                                                       jc + 1, n_rows, ts, _last_time(sts1, window))
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
                    nb = _merge_runs(bo, nb, run_flag, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, vw, st_rel,
                                     st_merge, n_row, n_stage, n_parent, n_ref, meta, window <= 0, m_aux, ht_run,
                                     ht_gen, stamp)
                    stamp += 1
                if nb > max_runs:
                    return OVER_CAPACITY, j, ao, a_half, na, nh, npend, nm, nb, dead, stamp

            # ---- processMatchesAccordingToSkipStrategy: queue the completed matches ...
            if npot > 0 and dominate:
                npot, nb = _one_per_start(npot, p_node, p_sts, p_spos, bo, nb, W_state, W_node, W_sts, W_spos, W_wake,
                                          W_vs, run_flag, nh, hq_spos, n_row, n_stage, n_parent, n_ref, meta)
            for q in range(npot):
                pos = nh
                while pos > 0 and not _held_before(hq_spos[pos - 1], hq_epos[pos - 1], hq_node[pos - 1],
                                                   p_spos[q], g, p_node[q], n_row, n_stage, n_parent):
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
            head = 0
            while head < nh:
                if skip_code != NO_SKIP and nb > 0 and hq_spos[head] > W_spos[bo]:
                    break
                node = hq_node[head]
                pid = _pruning_point(skip_code, skip_stage, node, n_row, n_stage, n_parent)
                head += 1
                if pid >= 0:
                    while nb > 0 and (W_spos[bo] < pid or (not strict_prune and W_spos[bo] == pid)):
                        release(n_row, n_stage, n_parent, n_ref, meta, W_node[bo])
                        bo += 1
                        nb -= 1
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
            # the next list becomes the current one
            if phase == 1 and not fast:
                a_half = 1 - a_half
            ao = bo
            na = nb


@njit(cache=True, nogil=True, error_model="numpy")
def run_batch(
        # the program
        st_kind, st_stage, start_state, tr_ptr, tr_act, tr_tgt, tr_cond,
        cond_kind, cond_a, cond_b, code, consts, vg_stage, vg_col, cond_thr, sleep_cond, st_rel, st_merge,
        max_push, max_edges,
        # the options: ``max_runs`` bounds a key's live runs, ``max_nodes`` the buffer's live
        # nodes; the caller sets ``stop[0]`` to interrupt the call (the state is then partial)
        window, skip_code, skip_stage, want_timeouts, max_runs, max_nodes, tick_ts, stop,
        # the batch: rows in input order, ``order`` lists them grouped by key (``key_ptr``);
        # ``row0`` is the stream position of the batch's first row
        n_keys, key_ptr, order, row0, ts, masks, cols, start_mask,
        # carried state: runs and waiting matches per key (CSR over keys); start_dead[k] is set
        # (in place) when a STOP state discarded key k's start run, which Flink never recreates
        r_ptr, r_state, r_node, r_sts, r_spos, r_v,
        h_ptr, h_sts, h_spos, h_epos, h_node, start_dead,
        # the shared buffer
        n_row, n_stage, n_parent, n_ref, meta,
        # the output, appended to: ``nm`` matches and ``ne`` events already written
        m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage, nm, ne):
    """Process one batch; see the module docstring. Returns the new carried state, the
    (possibly grown) buffer and outputs, the numbers of matches and events written in all
    and a status (code, key, count)."""
    vw = r_v.shape[1]
    per_run = 2 * max_edges + 1
    # Merging equivalent runs (SASE+ 4.2.2): with no skip strategy and no timed-out output a
    # completed merged run stands for its runs' matches, all emitted at once
    merging = skip_code == NO_SKIP and not want_timeouts and st_merge.any()
    if merging:
        per_run *= 2  # a JOIN node per merged child
    walk = np.empty(4 * n_row.shape[0] + 16 if merging else 16, np.int64)  # scratch: paths through JOINs
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
    m_off[nm] = ne
    status = np.zeros(3, np.int64)
    # work arrays (see _run_key); grown between its calls
    cap = 64
    v_at = np.zeros(2, np.int64)  # the V arena: next free slot, half in use
    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v = _grow_runs(
        np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
        np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64), v_at, 0, 0, cap, vw)
    p_node = np.empty(cap, np.int64)
    p_sts = np.empty(cap, np.int64)
    p_spos = np.empty(cap, np.int64)
    run_flag = np.empty(cap, np.uint8)  # per run of the next list: kill marks, or "made at this event"
    m_aux = np.empty(cap, np.int64)  # merging: per run, its target or new place
    ht_run = np.empty(2 * cap, np.int64)  # merging across starts: hash table (a power of two)
    ht_gen = np.full(2 * cap, -1, np.int64)
    hq_sts = np.empty(cap, np.int64)
    hq_spos = np.empty(cap, np.int64)
    hq_epos = np.empty(cap, np.int64)
    hq_node = np.empty(cap, np.int64)
    pend_node = np.empty(cap, np.int64)
    pend_g = np.empty(cap, np.int64)
    pend_flag = np.empty(cap, np.int32)
    pend_tts = np.empty(cap, np.int64)
    stack = np.empty(max_push, np.int64)
    e_act = np.empty(max_edges, np.int32)
    e_src = np.empty(max_edges, np.int32)
    e_tgt = np.empty(max_edges, np.int32)
    vm_stack = np.empty(STACK, np.float64)
    c_val = np.zeros(cond_kind.shape[0] + 1, np.uint8)
    c_stamp = np.full(cond_kind.shape[0] + 1, -1, np.int64)
    stamp = 0
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
            na = r_ptr[k + 1] - lo
            if na > cap:
                cap = 2 * na
                W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v = _grow_runs(
                    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, 0, 0, cap, vw)
            for i in range(na):
                W_state[i] = r_state[lo + i]
                W_node[i] = r_node[lo + i]
                W_sts[i] = r_sts[lo + i]
                W_spos[i] = r_spos[lo + i]
                W_wake[i] = -1
                W_vs[i] = i
                for jj in range(vw):
                    W_v[i * vw + jj] = r_v[lo + i, jj]
            lo = h_ptr[k]
            nh = h_ptr[k + 1] - lo
            if nh > hq_sts.shape[0]:
                hq_sts = grow(hq_sts, nh)
                hq_spos = grow(hq_spos, nh)
                hq_epos = grow(hq_epos, nh)
                hq_node = grow(hq_node, nh)
            for i in range(nh):
                hq_sts[i] = h_sts[lo + i]
                hq_spos[i] = h_spos[lo + i]
                hq_epos[i] = h_epos[lo + i]
                hq_node[i] = h_node[lo + i]
        ao = 0
        a_half = 0
        v_at[0] = na  # the carried runs' V are the arena's first slots
        v_at[1] = 0
        npend = 0
        j = 0
        dead = start_dead[k] != 0
        n_rows = key_ptr[k + 1] - key_ptr[k]
        n_events = n_rows + 1 if tick_ts != NO_TICK else n_rows
        row_lo = key_ptr[k]
        while n_events > 0:  # (a key without events here keeps its state as it is)
            code_, j, ao, a_half, na, nh, npend, nm, ne, dead, stamp = _run_key(
                st_kind, st_stage, start_state, tr_ptr, tr_act, tr_tgt, tr_cond,
                cond_kind, cond_a, cond_b, code, consts, vg_stage, vg_col, cond_thr, sleep_cond, st_rel, st_merge,
                window, skip_code, skip_stage, want_timeouts, max_runs, stop, tick_ts, dominate, merging, per_run,
                vw, k, row_lo, n_rows, n_events, order, row0, ts, masks, cols, start_mask,
                W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, p_node, p_sts, p_spos, run_flag,
                m_aux, ht_run, ht_gen, hq_sts, hq_spos, hq_epos, hq_node, pend_node, pend_g, pend_flag, pend_tts,
                stack, e_act, e_src, e_tgt, vm_stack, c_val, c_stamp,
                n_row, n_stage, n_parent, n_ref, meta, walk,
                m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage,
                j, ao, a_half, na, nh, npend, nm, ne, dead, stamp)
            if code_ == DONE:
                break
            if code_ == OVER_CAPACITY or code_ == INTERRUPTED:
                start_dead[k] = 1 if dead else 0
                status[0] = ERR_CAPACITY if code_ == OVER_CAPACITY else ERR_INTERRUPTED
                status[1] = k
                status[2] = ne  # the number of runs
                return (nr_ptr, nr_state, nr_node, nr_sts, nr_spos, nr_v, nh_ptr, nh_sts, nh_spos,
                        nh_epos, nh_node, n_row, n_stage, n_parent, n_ref, m_key, m_row, m_flag, m_tts,
                        m_off, nm, e_row, e_stage, 0, status)
            if code_ == NEED_OUT:  # ``ne`` holds the events the waiting matches need
                ne_now = m_off[nm]
                m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage = _grow_out(
                    m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage, nm + ne + 2, ne_now + ne)
                ne = ne_now
                continue
            # NEED_ROOM
            need = (na + 1) * per_run
            if meta[0] - meta[2] + need > max_nodes:
                status[0] = ERR_NODES
                status[1] = k
                status[2] = meta[0] - meta[2]  # the live nodes
                return (nr_ptr, nr_state, nr_node, nr_sts, nr_spos, nr_v, nh_ptr, nh_sts, nh_spos,
                        nh_epos, nh_node, n_row, n_stage, n_parent, n_ref, m_key, m_row, m_flag, m_tts,
                        m_off, nm, e_row, e_stage, 0, status)
            if n_row.shape[0] - meta[0] + meta[2] < need:
                n_row, n_stage, n_parent, n_ref = reserve(n_row, n_stage, n_parent, n_ref, meta, need)
                if merging and walk.shape[0] < 4 * n_row.shape[0]:
                    walk = np.empty(4 * n_row.shape[0] + 16, np.int64)
            if need > cap or need > p_node.shape[0]:
                cap = max(cap, 2 * need)
                W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v = _grow_runs(
                    W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, ao, na, cap, vw)
                ao = 0
                a_half = 0
                p_node = np.empty(cap, np.int64)
                p_sts = np.empty(cap, np.int64)
                p_spos = np.empty(cap, np.int64)
                run_flag = np.empty(cap, np.uint8)
                m_aux = np.empty(cap, np.int64)
                ht_size = 2 * ht_run.shape[0]
                while ht_size < 2 * cap:
                    ht_size *= 2
                ht_run = np.empty(ht_size, np.int64)
                ht_gen = np.full(ht_size, -1, np.int64)
            room = 2 * (nh + 2 * na + need)
            if room > hq_sts.shape[0]:
                hq_sts = grow(hq_sts, room)
                hq_spos = grow(hq_spos, room)
                hq_epos = grow(hq_epos, room)
                hq_node = grow(hq_node, room)
            if room > pend_node.shape[0]:
                pend_node = grow(pend_node, room)
                pend_g = grow(pend_g, room)
                pend_flag = grow(pend_flag, room)
                pend_tts = grow(pend_tts, room)
        start_dead[k] = 1 if dead else 0

        # ---- store the key's runs and waiting matches
        if out_runs + na > nr_state.shape[0]:
            n2 = max(2 * nr_state.shape[0], out_runs + na)
            nr_state = grow(nr_state, n2)
            nr_node = grow(nr_node, n2)
            nr_sts = grow(nr_sts, n2)
            nr_spos = grow(nr_spos, n2)
            nr_v = grow_rows(nr_v, n2)
        for i in range(na):
            nr_state[out_runs + i] = W_state[ao + i]
            nr_node[out_runs + i] = W_node[ao + i]
            nr_sts[out_runs + i] = W_sts[ao + i]
            nr_spos[out_runs + i] = W_spos[ao + i]
            for jj in range(vw):
                nr_v[out_runs + i, jj] = W_v[W_vs[ao + i] * vw + jj]
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
