"""Parked runs: a key's waiting runs indexed by what wakes them (issue 22).

A run in a waiting state (``graph.sleep_conditions``) whose condition compares one event
column with a value fixed by the match (``price > 1.05 * last("price", of="a")``; ``<``,
``<=``, ``>``, ``>=``), possibly and-ed with further conjuncts, is unchanged by every event
that does not cross its *threshold*. Instead of sitting in the start-ordered list of runs
that ``nfa.compute_next_states`` visits at every event, such a run is *parked*: its fields
go to a slot of a pool, and two binary heaps index it,

- per parkable state, a min-heap on the threshold (its negation for ``<`` / ``<=``), so the
  runs an event wakes are the heap's top entries: an event that wakes nothing costs one
  comparison per parkable state, a wake O(log R);
- one min-heap on the start position (``spos``), for the window's time-outs, the skip
  strategies' pruning and the release of held matches, which act on the oldest runs first.

Entries are deleted lazily: every park gets a sequence number, a heap entry whose slot no
longer holds that number is stale and is dropped when it reaches the top (or when a heap is
compacted, once it holds more than twice the live runs). A woken run leaves the pool and
joins the step's list of runs at its place in start order; the runs the step leaves in a
parkable state are parked again. No run that an event does not wake is touched or copied.

The park table (``park_table``) says, per state, whether its runs park, on which column,
operator and threshold program, and whether the rest of the condition must be checked at a
wake (``pk_full``: a conjunction). Storage is one tuple of arrays (``new_park``), its counts
in ``pm`` (``PM_*``); every function works in place, growth is ``grow_park``'s.
"""
import numpy as np
from numba import njit

from .arrays import grow
from .buffer import compare_paths, release
from .codes import BIG, COND_PROGRAM, NORMAL, TIME_MAX
from .runs import expired
from .vm import (C_GE, C_GT, C_LE, C_LT, OP_AGG, OP_AND, OP_ARITH, OP_CMP, OP_COL, OP_CONST, OP_ISIN, OP_ISNULL,
                 OP_MASK, OP_NOT, OP_OR, compare, eval_value)

# pm: the park's counts
PM_FREE, PM_HIGH, PM_LIVE, PM_SEQ, PM_SN, PM_NK = range(6)
N_PM = 6


@njit(cache=True, nogil=True)
def _stack_effect(code, pc):
    """(stack effect, length) of the instruction at ``code[pc]``."""
    op = code[pc]
    if op == OP_COL or op == OP_CONST or op == OP_MASK:
        return 1, 2
    if op == OP_AGG:
        return 1, 3 + code[pc + 2]
    if op == OP_ARITH or op == OP_CMP:
        return -1, 2
    if op == OP_AND or op == OP_OR:
        return -1, 1
    if op == OP_NOT or op == OP_ISNULL:
        return 0, 1
    if op == OP_ISIN:
        return 0, 2 + code[pc + 1]
    return 1, 1  # OP_TRUE


@njit(cache=True, nogil=True)
def _reads_event(code, lo, hi):
    pc = lo
    while pc < hi:
        op = code[pc]
        if op == OP_COL or op == OP_MASK:
            return True
        pc += _stack_effect(code, pc)[1]
    return False


@njit(cache=True, nogil=True)
def _split(code, lo, hi):
    """A program ``code[lo:hi]`` whose last instruction (at ``last``) is binary: its first
    operand is ``code[lo:mid]``, its second ``code[mid:last]``. Returns ``(mid, last)``, or
    ``(-1, -1)``. The second operand starts at the last instruction boundary where the stack
    holds one value (inside it, the stack never holds fewer than two)."""
    depth = 0
    pc = lo
    mid = -1
    last = -1
    while pc < hi:
        eff, ln = _stack_effect(code, pc)
        if pc + ln >= hi:
            last = pc
            break
        depth += eff
        pc += ln
        if depth == 1:
            mid = pc
    if last < 0 or depth != 2 or mid < 0 or mid >= last:
        return -1, -1
    return mid, last


@njit(cache=True, nogil=True)
def _threshold_part(code, lo, hi):
    """``(column, op, t0, t1)`` when ``code[lo:hi]`` is ``COL x; <match-only program>; CMP op``
    with op in <, <=, >, >= (or the mirror image), else column -1."""
    mid, last = _split(code, lo, hi)
    if mid < 0 or code[last] != OP_CMP:
        return -1, 0, 0, 0
    op = code[last + 1]
    if op != C_LT and op != C_LE and op != C_GT and op != C_GE:
        return -1, 0, 0, 0
    if code[lo] == OP_COL and mid == lo + 2 and not _reads_event(code, mid, last):
        return code[lo + 1], op, mid, last
    if code[mid] == OP_COL and last == mid + 2 and not _reads_event(code, lo, mid):
        flip = C_LT if op == C_GT else C_LE if op == C_GE else C_GT if op == C_LT else C_GE
        return code[mid + 1], flip, lo, mid
    return -1, 0, 0, 0


@njit(cache=True, nogil=True)
def park_table(st_kind, sleep_cond, cond_kind, cond_a, cond_b, cond_thr, code, st_merge, merging):
    """Per state, where its waiting runs park: ``pk_idx`` (-1: they do not; else the index of
    its threshold heap, one per parkable state), and per index the event column, operator,
    threshold program ``code[t0:t1]`` and ``pk_full`` (1: the condition is a conjunction whose
    other conjuncts are checked when the threshold wakes the run). A state parks when its
    condition (not negated) is a program comparing a column with a match-only value, or the
    ``and`` of such a comparison with anything; not in a state where runs merge."""
    n = st_kind.shape[0]
    pk_idx = np.full(n, -1, np.int64)
    pk_col = np.zeros(n, np.int64)
    pk_op = np.zeros(n, np.int64)
    pk_t0 = np.zeros(n, np.int64)
    pk_t1 = np.zeros(n, np.int64)
    pk_full = np.zeros(n, np.int64)
    m = 0
    for s in range(n):
        c = sleep_cond[s]
        if c < 0 or st_kind[s] != NORMAL or (merging and st_merge[s]):
            continue
        if cond_kind[c] != COND_PROGRAM:  # a mask, or a negation
            continue
        x = cond_thr[c, 0]
        op = cond_thr[c, 1]
        full = 0
        if x >= 0:
            t0 = cond_thr[c, 2]
            t1 = cond_thr[c, 3]
            if op != C_LT and op != C_LE and op != C_GT and op != C_GE:
                continue
        else:
            lo = cond_a[c]
            hi = cond_b[c]
            if hi - lo < 2 or code[hi - 1] != OP_AND:
                continue
            mid, last = _split(code, lo, hi)
            if mid < 0:
                continue
            x, op, t0, t1 = _threshold_part(code, lo, mid)
            if x < 0:
                x, op, t0, t1 = _threshold_part(code, mid, last)
            if x < 0:
                continue
            full = 1
        pk_idx[s] = m
        pk_col[m] = x
        pk_op[m] = op
        pk_t0[m] = t0
        pk_t1[m] = t1
        pk_full[m] = full
        m += 1
    return pk_idx, pk_col[:max(m, 1)], pk_op[:max(m, 1)], pk_t0[:max(m, 1)], pk_t1[:max(m, 1)], pk_full[:max(m, 1)]


@njit(cache=True, nogil=True)
def new_park(n_idx, cap, vw):
    """Empty park storage for ``cap`` runs and ``n_idx`` threshold heaps."""
    return (np.empty(cap, np.int32), np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64),
            np.full(cap, -1, np.int64), np.empty(cap * vw, np.float64), np.empty(cap, np.int64),
            np.empty((n_idx, cap), np.float64), np.empty((n_idx, cap), np.int64), np.empty((n_idx, cap), np.int64),
            np.zeros(n_idx, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64),
            np.empty(cap, np.int64), np.empty(cap, np.int64), np.zeros(N_PM, np.int64))


@njit(cache=True, nogil=True)
def grow_park(P, need, vw):
    """``P`` with room for ``need`` more parked runs and heap entries (every array holds
    ``cap`` runs: the pool, the heaps, the woken list), compacting first."""
    (P_state, P_node, P_sts, P_spos, P_seq, P_v, P_free, H_key, H_slot, H_seq, H_n, S_spos, S_seq, S_slot,
     K_slot, K_seq, pm) = P
    if park_room(P, need):
        return P
    cap = P_state.shape[0]
    want = max(pm[PM_HIGH] - pm[PM_FREE], pm[PM_SN])
    for i in range(H_n.shape[0]):
        want = max(want, H_n[i])
    n2 = max(2 * cap, want + need + 16)
    P_state = grow(P_state, n2)
    P_node = grow(P_node, n2)
    P_sts = grow(P_sts, n2)
    P_spos = grow(P_spos, n2)
    s2 = np.full(n2, -1, np.int64)
    s2[:cap] = P_seq
    P_seq = s2
    P_v = grow(P_v, n2 * vw)
    P_free = grow(P_free, n2)
    K_slot = grow(K_slot, n2)
    K_seq = grow(K_seq, n2)
    S_spos = grow(S_spos, n2)
    S_seq = grow(S_seq, n2)
    S_slot = grow(S_slot, n2)
    k2 = np.empty((H_key.shape[0], n2), np.float64)
    a2 = np.empty((H_key.shape[0], n2), np.int64)
    q2 = np.empty((H_key.shape[0], n2), np.int64)
    for i in range(H_key.shape[0]):
        for j in range(H_n[i]):
            k2[i, j] = H_key[i, j]
            a2[i, j] = H_slot[i, j]
            q2[i, j] = H_seq[i, j]
    return (P_state, P_node, P_sts, P_spos, P_seq, P_v, P_free, k2, a2, q2, H_n, S_spos, S_seq, S_slot,
            K_slot, K_seq, pm)


@njit(cache=True, nogil=True)
def park_room(P, need):
    """Whether ``need`` more runs can be parked (compacting heaps full of stale entries)."""
    P_state, H_key, H_n, S_spos, pm = P[0], P[7], P[10], P[11], P[16]
    if P_state.shape[0] - pm[PM_HIGH] + pm[PM_FREE] < need:
        return False
    if pm[PM_SN] + need > S_spos.shape[0]:
        compact_spos(P)
        if pm[PM_SN] + need > S_spos.shape[0]:
            return False
    for i in range(H_n.shape[0]):
        if H_n[i] + need > H_key.shape[1]:
            compact_heap(P, i)
            if H_n[i] + need > H_key.shape[1]:
                return False
    return True


# ----------------------------------------------------------------------------- heaps
@njit(cache=True, nogil=True, inline="always")
def _key_less(ka, qa, kb, qb):
    return ka < kb or (ka == kb and qa < qb)


@njit(cache=True, nogil=True)
def _h_down(K, A, Q, i0, n, i):
    """Sift entry ``i`` of heap row ``i0`` (``n`` entries) down."""
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _key_less(K[i0, c + 1], Q[i0, c + 1], K[i0, c], Q[i0, c]):
            c += 1
        if not _key_less(K[i0, c], Q[i0, c], K[i0, i], Q[i0, i]):
            break
        K[i0, i], K[i0, c] = K[i0, c], K[i0, i]
        A[i0, i], A[i0, c] = A[i0, c], A[i0, i]
        Q[i0, i], Q[i0, c] = Q[i0, c], Q[i0, i]
        i = c


@njit(cache=True, nogil=True)
def _h_push(K, A, Q, i0, n, key, slot, seq):
    i = n
    K[i0, i] = key
    A[i0, i] = slot
    Q[i0, i] = seq
    while i > 0:
        p = (i - 1) >> 1
        if not _key_less(K[i0, i], Q[i0, i], K[i0, p], Q[i0, p]):
            break
        K[i0, i], K[i0, p] = K[i0, p], K[i0, i]
        A[i0, i], A[i0, p] = A[i0, p], A[i0, i]
        Q[i0, i], Q[i0, p] = Q[i0, p], Q[i0, i]
        i = p


@njit(cache=True, nogil=True)
def _h_pop(K, A, Q, i0, n):
    """Remove the top of heap row ``i0`` (``n`` > 0 entries)."""
    n -= 1
    K[i0, 0] = K[i0, n]
    A[i0, 0] = A[i0, n]
    Q[i0, 0] = Q[i0, n]
    _h_down(K, A, Q, i0, n, 0)


@njit(cache=True, nogil=True, inline="always")
def _s_less(S_spos, S_seq, a, b):
    return S_spos[a] < S_spos[b] or (S_spos[a] == S_spos[b] and S_seq[a] < S_seq[b])


@njit(cache=True, nogil=True)
def _s_swap(S_spos, S_seq, S_slot, a, b):
    S_spos[a], S_spos[b] = S_spos[b], S_spos[a]
    S_seq[a], S_seq[b] = S_seq[b], S_seq[a]
    S_slot[a], S_slot[b] = S_slot[b], S_slot[a]


@njit(cache=True, nogil=True)
def _s_down(S_spos, S_seq, S_slot, n, i):
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _s_less(S_spos, S_seq, c + 1, c):
            c += 1
        if not _s_less(S_spos, S_seq, c, i):
            break
        _s_swap(S_spos, S_seq, S_slot, i, c)
        i = c


@njit(cache=True, nogil=True)
def _s_push(S_spos, S_seq, S_slot, n, spos, seq, slot):
    i = n
    S_spos[i] = spos
    S_seq[i] = seq
    S_slot[i] = slot
    while i > 0:
        p = (i - 1) >> 1
        if not _s_less(S_spos, S_seq, i, p):
            break
        _s_swap(S_spos, S_seq, S_slot, i, p)
        i = p


@njit(cache=True, nogil=True)
def _s_pop(S_spos, S_seq, S_slot, n):
    n -= 1
    S_spos[0] = S_spos[n]
    S_seq[0] = S_seq[n]
    S_slot[0] = S_slot[n]
    _s_down(S_spos, S_seq, S_slot, n, 0)


@njit(cache=True, nogil=True)
def compact_heap(P, i0):
    """Drop heap ``i0``'s stale entries when they are more than half of it; re-heapify."""
    P_seq, H_key, H_slot, H_seq, H_n, pm = P[4], P[7], P[8], P[9], P[10], P[16]
    n = H_n[i0]
    if n <= 2 * pm[PM_LIVE] + 32:
        return
    w = 0
    for r in range(n):
        if P_seq[H_slot[i0, r]] == H_seq[i0, r]:
            H_key[i0, w] = H_key[i0, r]
            H_slot[i0, w] = H_slot[i0, r]
            H_seq[i0, w] = H_seq[i0, r]
            w += 1
    H_n[i0] = w
    for r in range(w // 2 - 1, -1, -1):
        _h_down(H_key, H_slot, H_seq, i0, w, r)


@njit(cache=True, nogil=True)
def compact_spos(P):
    P_seq, S_spos, S_seq, S_slot, pm = P[4], P[11], P[12], P[13], P[16]
    n = pm[PM_SN]
    if n <= 2 * pm[PM_LIVE] + 32:
        return
    w = 0
    for r in range(n):
        if P_seq[S_slot[r]] == S_seq[r]:
            S_spos[w] = S_spos[r]
            S_seq[w] = S_seq[r]
            S_slot[w] = S_slot[r]
            w += 1
    pm[PM_SN] = w
    for r in range(w // 2 - 1, -1, -1):
        _s_down(S_spos, S_seq, S_slot, w, r)


# ----------------------------------------------------------------------------- parking
@njit(cache=True, nogil=True)
def park(P, pk_col, pk_op, pk_t0, pk_t1, idx, state, node, sts, spos, v, voff, vw, code, consts, masks, cols,
         vm_stack):
    """Park a run (room must have been made): its fields and V (at ``v[voff]``) go to a free
    slot, its threshold (the program ``code[t0:t1]`` over its V) to heap ``idx`` (not when it
    is null: such a run never wakes) and its start to the start heap."""
    (P_state, P_node, P_sts, P_spos, P_seq, P_v, P_free, H_key, H_slot, H_seq, H_n, S_spos, S_seq, S_slot) = P[:14]
    pm = P[16]
    if pm[PM_FREE] > 0:
        pm[PM_FREE] -= 1
        slot = P_free[pm[PM_FREE]]
    else:
        slot = pm[PM_HIGH]
        pm[PM_HIGH] += 1
    seq = pm[PM_SEQ]
    pm[PM_SEQ] += 1
    pm[PM_LIVE] += 1
    P_state[slot] = state
    P_node[slot] = node
    P_sts[slot] = sts
    P_spos[slot] = spos
    P_seq[slot] = seq
    b = slot * vw
    for jj in range(vw):
        P_v[b + jj] = v[voff + jj]
    _s_push(S_spos, S_seq, S_slot, pm[PM_SN], spos, seq, slot)
    pm[PM_SN] += 1
    thr = eval_value(code, pk_t0[idx], pk_t1[idx], consts, -1, masks, cols, P_v, b, vm_stack)
    if thr == thr:
        op = pk_op[idx]
        key = thr if (op == C_GT or op == C_GE) else -thr
        _h_push(H_key, H_slot, H_seq, idx, H_n[idx], key, slot, seq)
        H_n[idx] += 1


@njit(cache=True, nogil=True, inline="always")
def unpark(P, slot):
    """Free a parked run's slot (its heap entries become stale)."""
    P_seq, P_free, pm = P[4], P[6], P[16]
    P_seq[slot] = -1
    P_free[pm[PM_FREE]] = slot
    pm[PM_FREE] += 1
    pm[PM_LIVE] -= 1


@njit(cache=True, nogil=True)
def wake_parked(P, pk_col, pk_op, row, cols):
    """Move the parked runs that event ``row`` wakes (its column crosses their threshold) from
    the threshold heaps to the woken list ``K`` (they stay parked until ``take_woken``).
    Returns the number of woken runs."""
    P_seq, H_key, H_slot, H_seq, H_n, K_slot, K_seq, pm = P[4], P[7], P[8], P[9], P[10], P[14], P[15], P[16]
    nk = pm[PM_NK]
    for i in range(H_n.shape[0]):
        n = H_n[i]
        if n == 0:
            continue
        x = cols[pk_col[i], row]
        op = pk_op[i]
        up = op == C_GT or op == C_GE
        while n > 0:
            slot = H_slot[i, 0]
            seq = H_seq[i, 0]
            if P_seq[slot] == seq:
                key = H_key[i, 0]
                if not compare(op, x, key if up else -key):
                    break
                K_slot[nk] = slot
                K_seq[nk] = seq
                nk += 1
            _h_pop(H_key, H_slot, H_seq, i, n)
            n -= 1
        H_n[i] = n
    pm[PM_NK] = nk
    return nk


@njit(cache=True, nogil=True)
def min_spos(P):
    """The start position of the oldest parked run (``BIG``: none); drops stale tops."""
    P_seq, S_spos, S_seq, S_slot, pm = P[4], P[11], P[12], P[13], P[16]
    n = pm[PM_SN]
    while n > 0 and P_seq[S_slot[0]] != S_seq[0]:
        _s_pop(S_spos, S_seq, S_slot, n)
        n -= 1
    pm[PM_SN] = n
    return S_spos[0] if n > 0 else BIG


@njit(cache=True, nogil=True)
def any_expired(P, t, window):
    """Whether a parked run's window has passed at time ``t``."""
    if window <= 0 or min_spos(P) == BIG:
        return False
    return expired(t, P[2][P[13][0]], window)


@njit(cache=True, nogil=True)
def pop_oldest(P):
    """Unpark the oldest parked run and return its slot (its fields stay readable until the
    slot is reused); -1 when none."""
    if min_spos(P) == BIG:
        return -1
    S_spos, S_seq, S_slot, pm = P[11], P[12], P[13], P[16]
    slot = S_slot[0]
    _s_pop(S_spos, S_seq, S_slot, pm[PM_SN])
    pm[PM_SN] -= 1
    unpark(P, slot)
    return slot


@njit(cache=True, nogil=True)
def timeouts(P, t, window, final_tick, want_timeouts, g, pend_node, pend_g, pend_flag, pend_tts, npend, n_row,
             n_stage, n_parent, n_ref, meta):
    """Phase 1 for the parked runs: those whose window has passed at ``t`` time out (in
    start order). Returns (whether any did, ``npend``)."""
    P_node, P_sts, S_slot = P[1], P[2], P[13]
    any_ = False
    if window <= 0:
        return False, npend
    while min_spos(P) != BIG:
        slot = S_slot[0]
        sts = P_sts[slot]
        if not ((final_tick and t == TIME_MAX) or expired(t, sts, window)):
            break
        pop_oldest(P)
        any_ = True
        node = P_node[slot]
        if want_timeouts:
            n_ref[node] += 1
            pend_node[npend] = node
            pend_g[npend] = g
            pend_flag[npend] = 1
            pend_tts[npend] = sts + window if sts <= TIME_MAX - window else TIME_MAX
            npend += 1
        release(n_row, n_stage, n_parent, n_ref, meta, node)
    return any_, npend


@njit(cache=True, nogil=True)
def prune(P, pid, strict, n_row, n_stage, n_parent, n_ref, meta):
    """The skip strategy's pruning for the parked runs: those started before ``pid`` (or at
    it, unless ``strict``) are discarded."""
    P_node = P[1]
    while True:
        s = min_spos(P)
        if s == BIG or not (s < pid or (not strict and s == pid)):
            break
        slot = pop_oldest(P)
        release(n_row, n_stage, n_parent, n_ref, meta, P_node[slot])


@njit(cache=True, nogil=True)
def _sort_woken(P, lo, hi):
    """Heap sort of the woken list ``K[lo:hi]`` by start position (then sequence)."""
    P_spos, K_slot, K_seq = P[3], P[14], P[15]
    n = hi - lo
    for start in range(n // 2 - 1, -1, -1):
        _k_down(P_spos, K_slot, K_seq, lo, n, start)
    for end in range(n - 1, 0, -1):
        K_slot[lo], K_slot[lo + end] = K_slot[lo + end], K_slot[lo]
        K_seq[lo], K_seq[lo + end] = K_seq[lo + end], K_seq[lo]
        _k_down(P_spos, K_slot, K_seq, lo, end, 0)


@njit(cache=True, nogil=True, inline="always")
def _k_less(P_spos, K_slot, K_seq, a, b):
    sa = P_spos[K_slot[a]]
    sb = P_spos[K_slot[b]]
    return sa < sb or (sa == sb and K_seq[a] < K_seq[b])


@njit(cache=True, nogil=True)
def _k_down(P_spos, K_slot, K_seq, lo, n, i):
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _k_less(P_spos, K_slot, K_seq, lo + c, lo + c + 1):
            c += 1
        if not _k_less(P_spos, K_slot, K_seq, lo + i, lo + c):
            break
        K_slot[lo + i], K_slot[lo + c] = K_slot[lo + c], K_slot[lo + i]
        K_seq[lo + i], K_seq[lo + c] = K_seq[lo + c], K_seq[lo + i]
        i = c


@njit(cache=True, nogil=True)
def take_woken(P, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, vw, ao, na, dst, jc):
    """Merge the woken runs that are still parked (a time-out or pruning may have discarded
    some) into the list ``W[ao:ao+na]`` by start position, writing the merged list at ``dst``
    (room was made; the woken runs' V get new arena slots); they leave the pool. Returns the
    merged list's length; the woken list is emptied."""
    P_state, P_node, P_sts, P_spos, P_seq, P_v, K_slot, K_seq, pm = (P[0], P[1], P[2], P[3], P[4], P[5], P[14],
                                                                    P[15], P[16])
    nk = pm[PM_NK]
    w = 0
    for q in range(nk):  # the ones still parked
        if P_seq[K_slot[q]] == K_seq[q]:
            K_slot[w] = K_slot[q]
            K_seq[w] = K_seq[q]
            w += 1
    nk = w
    pm[PM_NK] = 0
    _sort_woken(P, 0, nk)
    a = 0
    q = 0
    x = dst
    while a < na or q < nk:
        if q >= nk or (a < na and W_spos[ao + a] <= P_spos[K_slot[q]]):
            W_state[x] = W_state[ao + a]
            W_node[x] = W_node[ao + a]
            W_sts[x] = W_sts[ao + a]
            W_spos[x] = W_spos[ao + a]
            W_wake[x] = W_wake[ao + a]
            W_vs[x] = W_vs[ao + a]
            a += 1
        else:
            slot = K_slot[q]
            W_state[x] = P_state[slot]
            W_node[x] = P_node[slot]
            W_sts[x] = P_sts[slot]
            W_spos[x] = P_spos[slot]
            W_wake[x] = jc
            W_vs[x] = v_at[0]
            b = v_at[0] * vw
            v_at[0] += 1
            for jj in range(vw):
                W_v[b + jj] = P_v[slot * vw + jj]
            unpark(P, slot)
            q += 1
        x += 1
    return x - dst


@njit(cache=True, nogil=True)
def sort_timeouts(pend_node, pend_g, pend_flag, pend_tts, lo, hi, n_row, n_stage, n_parent):
    """Put the partial matches that timed out at one event (``pend[lo:hi]``) in the order of
    their paths (``compare_paths``: by start event first), whichever of the list of runs or the
    park they came from: the order does not depend on where runs were kept. Insertion sort:
    the two sources are each in start order already."""
    for i in range(lo + 1, hi):
        nd = pend_node[i]
        gg = pend_g[i]
        fl = pend_flag[i]
        tt = pend_tts[i]
        q = i - 1
        while q >= lo and compare_paths(n_row, n_stage, n_parent, nd, pend_node[q]) < 0:
            pend_node[q + 1] = pend_node[q]
            pend_g[q + 1] = pend_g[q]
            pend_flag[q + 1] = pend_flag[q]
            pend_tts[q + 1] = pend_tts[q]
            q -= 1
        pend_node[q + 1] = nd
        pend_g[q + 1] = gg
        pend_flag[q + 1] = fl
        pend_tts[q + 1] = tt


@njit(cache=True, nogil=True)
def park_pass(P, pk_idx, pk_col, pk_op, pk_t0, pk_t1, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, vw, bo,
              nb, first, code, consts, masks, cols, vm_stack):
    """Park the runs of the list ``W[bo+first:bo+nb]`` that are in a parkable state (room was
    made); the others close up in order. Returns the list's new length."""
    w = first
    for q in range(first, nb):
        x = bo + q
        s = W_state[x]
        if pk_idx[s] >= 0:
            park(P, pk_col, pk_op, pk_t0, pk_t1, pk_idx[s], s, W_node[x], W_sts[x], W_spos[x], W_v, W_vs[x] * vw,
                 vw, code, consts, masks, cols, vm_stack)
        else:
            if w != q:
                y = bo + w
                W_state[y] = W_state[x]
                W_node[y] = W_node[x]
                W_sts[y] = W_sts[x]
                W_spos[y] = W_spos[x]
                W_wake[y] = W_wake[x]
                W_vs[y] = W_vs[x]
            w += 1
    return w
