"""Completed matches: the queue order of matches held back by a skip strategy, the skip
strategy's pruning point, and writing emitted matches (one record per buffer path, events
in stage order) into the output arrays."""
import numpy as np
from numba import njit

from .arrays import grow
from .buffer import compare_completed, compare_paths, release, walk_paths
from .codes import FINAL, NO_SKIP, SKIP_PAST_LAST_EVENT, SKIP_TO_LAST, SKIP_TO_NEXT, TAKE
from .runs import lower_bound, move_run


@njit(cache=True, nogil=True, _nrt=False)
def pruning_point(skip_code, skip_stage, node, n_row, n_stage, n_parent):
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


@njit(cache=True, nogil=True, _nrt=False)
def held_before(a_spos, a_epos, a_node, b_spos, b_epos, b_node, n_row, n_stage, n_parent):
    """Order of the waiting-match queue: start event, then completing event, then the
    events' positions and stages (colcep's tie rule; Flink's heap order is arbitrary there)."""
    if a_spos != b_spos:
        return a_spos < b_spos
    if a_epos != b_epos:
        return a_epos < b_epos
    return compare_paths(n_row, n_stage, n_parent, a_node, b_node) <= 0


@njit(cache=True, nogil=True)
def first_threshold_states(st_kind, tr_ptr, tr_act, tr_tgt, sleep_cond, pk_idx, pk_full, dominate):
    """Per state, 1 where a run's one future is to complete at the first event that crosses a
    threshold: it waits (``sleep_cond``) on a plain threshold (``park.park_table``'s, not a
    conjunction) and its TAKE edge leads to the final state. With one match per start
    (``dominate``), of two such runs of one start in one state, the one whose threshold every
    event crossing the other's crosses too, and that wins their tie (``buffer.compare_completed``),
    completes first or together with the other and is kept: the other can never be emitted
    (``dominated``). All 0 without ``dominate``."""
    out = np.zeros(st_kind.shape[0], np.uint8)
    if not dominate:
        return out
    for s in range(st_kind.shape[0]):
        if sleep_cond[s] < 0 or pk_idx[s] < 0 or pk_full[pk_idx[s]] != 0:
            continue
        for tr in range(tr_ptr[s], tr_ptr[s + 1]):
            if tr_act[tr] == TAKE and st_kind[tr_tgt[tr]] == FINAL:
                out[s] = 1
    return out


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def dominated(key_a, key_x, node_a, node_x, n_row, n_stage, n_parent):
    """Whether run ``x`` can never be emitted beside run ``a`` of the same start and state (one of
    ``first_threshold_states``), given their threshold keys (``park.threshold_key``; a smaller key
    is crossed at every event a greater one is, NaN never): ``a`` completes whenever ``x`` would,
    and first or, at the same event, ahead of it in ``one_per_start``'s order."""
    if node_a < 0 or node_x < 0:
        return False
    if key_x == key_x and not key_a <= key_x:
        return False
    return compare_completed(n_row, n_stage, n_parent, node_a, node_x) <= 0


@njit(cache=True, nogil=True, _nrt=False)
def one_per_start(npot, p_node, p_sts, p_spos, bo, nb, W_state, W_node, W_sts, W_spos, W_wake, W_vs, kill,
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
        held = lower_bound(hq_spos, 0, nh, s)
        keep_best = not (held < nh and hq_spos[held] == s)
        for x in range(q, r):
            if x != best or not keep_best:
                release(n_row, n_stage, n_parent, n_ref, meta, p_node[x])
        if keep_best:
            p_node[kept] = p_node[best]
            p_sts[kept] = p_sts[best]
            p_spos[kept] = s
            kept += 1
        lo = lower_bound(W_spos, bo, bo + nb, s)
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
                move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, bo + i, bo + w)
            w += 1
    return kept, w


@njit(cache=True, nogil=True, _nrt=False)
def flush_pending(npend, pend_node, pend_g, pend_flag, pend_tts, k, n_row, n_stage, n_parent, n_ref, meta, walk,
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


@njit(cache=True, nogil=True, _nrt=False)
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


@njit(cache=True, nogil=True, _nrt=False)
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


@njit(cache=True, nogil=True, _nrt=False)
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
def grow_out(m_key, m_row, m_flag, m_tts, m_off, e_row, e_stage, n_matches, n_events):
    return (grow(m_key, n_matches), grow(m_row, n_matches), grow(m_flag, n_matches), grow(m_tts, n_matches),
            grow(m_off, n_matches + 1), grow(e_row, n_events), grow(e_stage, n_events))
