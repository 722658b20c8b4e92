"""Parked runs: a key's waiting runs indexed by what wakes them, kept across calls (issue 22).

A run in a waiting state (``graph.sleep_conditions``) whose condition compares one event
column with a value fixed by the match (``price > 1.05 * last("price", of="a")``; ``<``,
``<=``, ``>``, ``>=``), possibly and-ed with further conjuncts, is unchanged by every event
that does not cross its *threshold*. Instead of sitting in the start-ordered list of runs
that ``nfa.compute_next_states`` visits at every event, such a run is *parked*: its fields
go to a slot of a pool, and per key binary heaps index it,

- per parkable state, a min-heap on the threshold (its negation for ``<`` / ``<=``), so the
  runs an event wakes are the heap's top entries: an event that wakes nothing costs one
  comparison per parkable state, a wake O(log R);
- the start order (``spos``), for the window's time-outs, the skip strategies' pruning and
  the release of held matches, which act on the oldest runs first: a queue of the runs parked
  in start order (as a start run parks at its first event, they almost all are: a push appends,
  a pop advances the queue's offset), and a min-heap for the others (a run woken and parked
  again); the oldest run is the older of the two tops.

The park is part of the carried state (``colcep.engine.state.Park``): a run stays parked from
one call to the next, so a call costs what its events wake and time out, not the key's runs.
One pool serves all keys of a part; each key's heaps are segments of one heap arena
(``SEG[k]``: offset, entries, capacity per heap, the start queue's included), moved to the
arena's end when they fill and packed together when the arena grows. Entries are deleted
lazily: every park gets a sequence number, a heap entry whose slot no longer holds that number
is stale and is dropped when it reaches the top (or when a key's heap is compacted, once it holds more than twice the key's
live runs). A woken run leaves the pool and joins the step's list of runs at its place in
start order; the runs the step leaves in a parkable state are parked again.

Undo (a failed call leaves the state as it was, as the buffer's ``open_call`` does): while a
call is open (``open_call``), a slot live before the call that the call frees is quarantined,
its fields intact and its sequence number kept (as ``-2 - seq``), instead of joining the free
list; a parked run's fields never change in place. ``undo_call`` revives the quarantined slots,
frees the ones parked during the call and rebuilds every heap from the live slots (time: the
pool, on failure only); ``close_call`` frees the quarantine (time: what the call freed).

The park table (``park_table``) says, per state, whether its runs park, on which column,
operator and threshold program, and whether the rest of the condition must be checked at a
wake (``pk_full``: a conjunction). Storage is one tuple of arrays (``new_park``), its counts
in ``pm`` (``PM_*``); every function works in place, growth is ``grow_park``'s.
"""
import numpy as np
from numba import njit

from .arrays import grow
from .buffer import alloc, compare_paths, release
from .codes import BIG, COND_PROGRAM, FINAL, IGNORE, NORMAL, PROCEED, TAKE, TIME_MAX
from .runs import expired
from .vm import (C_GE, C_GT, C_LE, C_LT, OP_AGG, OP_AND, OP_ARITH, OP_CMP, OP_COL, OP_CONST, OP_ISIN, OP_ISNULL,
                 OP_MASK, OP_NOT, OP_OR, compare, eval_value, v_take)

# The park's arrays, in this order (``new_park``): the pool (a slot per parked run: state,
# node, start time and position, sequence number (-1: free; -2 - seq: quarantined), V, key,
# heap key (NaN: in no threshold heap)), the free list, the quarantine, the heap arena (key,
# slot, sequence number per entry), SEG (per key and heap: offset, entries, capacity; heap
# ``n_idx`` is the start heap, ``n_idx + 1`` the start queue), KL (live parked runs per key), the
# woken list (slot, sequence number) and ``pm``. P_IDX is a slot's threshold heap (-1: none), for ``undo_call``.
(P_STATE, P_NODE, P_STS, P_SPOS, P_SEQ, P_V, P_FREE_LIST, P_KEY, P_THR, P_IDX, P_QUAR, A_KEY, A_SLOT, A_SEQ, P_SEG,
 P_KL, K_SLOT, K_SEQ, P_PM) = range(19)
# pm: the park's counts: free slots, high water, next sequence number, woken runs, quarantined
# slots, the arena's high water and its dead entries, the sequence number when the open call
# began (-1: none open), live parked runs
PM_FREE, PM_HIGH, PM_SEQ, PM_NK, PM_QN, PM_AHIGH, PM_AGARB, PM_SEQ0, PM_LIVE = range(9)
N_PM = 9
# A slot's fields but V are one record (a row of 64 bytes: one cache line, where eight arrays
# cost a park, a wake or a time-out eight misses); P_STATE .. P_IDX are its columns, as views.
N_REC = 8


@njit(cache=True, nogil=True)
def _slot_views(rec):
    """The pool's per-slot arrays (state, node, start time, start position, sequence number,
    key, heap key, threshold heap) as columns of the records ``rec`` (at least 2 rows, so that
    every view is strided: one array type whatever the size)."""
    return (rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3], rec[:, 4], rec[:, 5], rec.view(np.float64)[:, 6],
            rec[:, 7])


@njit(cache=True, nogil=True)
def _new_slots(cap, old):
    """Records for ``cap`` slots (>= 2), as ``_slot_views``, the slots of the views ``old`` (state ..
    idx, ``P_STATE`` order) copied in, the others free."""
    rec = np.empty((max(cap, 2), N_REC), np.int64)
    state, node, sts, spos, seq, key, thr, idx = _slot_views(rec)
    n = old[0].shape[0]
    for i in range(n):  # (a record at a time: one pass over the memory)
        state[i] = old[0][i]
        node[i] = old[1][i]
        sts[i] = old[2][i]
        spos[i] = old[3][i]
        seq[i] = old[4][i]
        key[i] = old[5][i]
        thr[i] = old[6][i]
        idx[i] = old[7][i]
    for i in range(n, rec.shape[0]):
        seq[i] = -1
    return state, node, sts, spos, seq, key, thr, idx


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
def start_park(st_kind, tr_ptr, tr_act, tr_tgt, start_state, pk_idx):
    """The start state's TAKE edge when its runs can be parked as they are made (``park_start``,
    no listing): the start state has that one TAKE edge and no PROCEED edge, and its target is a
    parkable state with no PROCEED edge (a run there cannot complete at the event it is made);
    else -1."""
    take = -1
    for tr in range(tr_ptr[start_state], tr_ptr[start_state + 1]):
        if tr_act[tr] == PROCEED:
            return -1
        if tr_act[tr] == TAKE:
            if take >= 0:
                return -1
            take = tr
    if take < 0:
        return -1
    s1 = tr_tgt[take]
    if st_kind[s1] != NORMAL or pk_idx[s1] < 0:
        return -1
    for tr in range(tr_ptr[s1], tr_ptr[s1 + 1]):
        if tr_act[tr] == PROCEED:
            return -1
    return take


@njit(cache=True, nogil=True)
def wake_final(st_kind, tr_ptr, tr_act, tr_tgt, tr_cond, pk_idx, pk_full):
    """Whether every run a threshold wakes completes there and is gone (``emit_woken``): each
    parkable state's threshold is its whole condition (not ``pk_full``), its one TAKE edge leads
    to the final state and its IGNORE edges are conditional (never taken where the condition
    holds: skip-till-next, not skip-till-any)."""
    for s in range(pk_idx.shape[0]):
        if pk_idx[s] < 0:
            continue
        if pk_full[pk_idx[s]] != 0:
            return False
        takes = 0
        for tr in range(tr_ptr[s], tr_ptr[s + 1]):
            if tr_act[tr] == TAKE:
                takes += 1
                if st_kind[tr_tgt[tr]] != FINAL:
                    return False
            elif tr_act[tr] != IGNORE or tr_cond[tr] < 0:
                return False
        if takes != 1:
            return False
    return True


@njit(cache=True, nogil=True)
def new_park(n_idx, cap, vw, n_keys):
    """Empty park storage for ``cap`` runs, ``n_keys`` keys and ``n_idx`` threshold heaps a key."""
    pm = np.zeros(N_PM, np.int64)
    pm[PM_SEQ0] = -1
    cap = max(cap, 2)
    z = np.empty(0, np.int64)
    state, node, sts, spos, seq, key, thr, idx = _new_slots(cap, (z, z, z, z, z, z, np.empty(0, np.float64), z))
    return (state, node, sts, spos, seq, np.empty(cap * vw, np.float64), np.empty(cap, np.int64),
            key, thr, idx, np.empty(cap, np.int64),
            np.empty(0, np.float64), np.empty(0, np.int64), np.empty(0, np.int64),
            np.zeros((n_keys, 3 * (n_idx + 2)), np.int64), np.zeros(n_keys, np.int64),
            np.empty(cap, np.int64), np.empty(cap, np.int64), pm)


@njit(cache=True, nogil=True)
def fit_park(P, n_idx, vw, n_keys):
    """``P`` for a program with ``n_idx`` threshold heaps a key and V width ``vw``, over at least
    ``n_keys`` keys: the same arrays when they fit (the per-key ones grown), a new empty park
    when ``P`` was made for another shape (only ``state.Park.empty()`` is: a part's park is made
    for its program at its first call)."""
    SEG, KL = P[P_SEG], P[P_KL]
    if SEG.shape[1] != 3 * (n_idx + 2) or (P[P_STATE].shape[0] > 0 and P[P_V].shape[0] != P[P_STATE].shape[0] * vw):
        return new_park(n_idx, 16, vw, n_keys)
    if SEG.shape[0] >= n_keys:
        return P
    n2 = max(n_keys, 2 * SEG.shape[0])
    seg2 = np.zeros((n2, SEG.shape[1]), np.int64)
    seg2[:SEG.shape[0]] = SEG
    kl2 = np.zeros(n2, np.int64)
    kl2[:KL.shape[0]] = KL
    return P[:14] + (seg2, kl2) + P[16:]


@njit(cache=True, nogil=True, inline="always")
def pool_room(P):
    """Slots the pool can give without growing: never used, or free (not quarantined)."""
    pm = P[P_PM]
    return P[P_STATE].shape[0] - pm[PM_HIGH] + pm[PM_FREE]


@njit(cache=True, nogil=True, inline="always")
def park_fits(P, k, need):
    """Room to park ``need`` more runs of key ``k`` without moving anything."""
    SEG = P[P_SEG]
    if pool_room(P) < need:
        return False
    for c in range(0, SEG.shape[1], 3):
        if SEG[k, c + 2] - SEG[k, c + 1] < need:
            return False
    return True


@njit(cache=True, nogil=True, _nrt=False)
def park_room(P, k, need):
    """Whether ``need`` more runs of key ``k`` can be parked, after compacting its heaps that are
    mostly stale and moving the ones short of room to the arena's free end."""
    SEG = P[P_SEG]
    if pool_room(P) < need:
        return False
    for c in range(0, SEG.shape[1], 3):
        if SEG[k, c + 2] - SEG[k, c + 1] < need:
            compact_heap(P, k, c)
            if SEG[k, c + 2] - SEG[k, c + 1] < need and not _move_segment(P, k, c, need):
                return False
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _move_segment(P, k, c, need):
    """Move heap ``c // 3`` of key ``k`` to the arena's free end with room for ``need`` more
    entries; False when the arena has no such room."""
    AK, AS, AQ, SEG, pm = P[A_KEY], P[A_SLOT], P[A_SEQ], P[P_SEG], P[P_PM]
    off, n, cap = SEG[k, c], SEG[k, c + 1], SEG[k, c + 2]
    cap2 = max(16, 2 * cap, n + need)
    at = pm[PM_AHIGH]
    if at + cap2 > AK.shape[0]:
        return False
    for i in range(n):
        AK[at + i] = AK[off + i]
        AS[at + i] = AS[off + i]
        AQ[at + i] = AQ[off + i]
    SEG[k, c] = at
    SEG[k, c + 2] = cap2
    pm[PM_AHIGH] = at + cap2
    pm[PM_AGARB] += cap
    return True


@njit(cache=True, nogil=True)
def grow_park(P, k, need, vw):
    """``P`` with room to park ``need`` more runs of key ``k``: the pool grown (its slots keep
    their numbers), the heap arena packed into new arrays with room for every key's heaps."""
    if park_room(P, k, need):
        return P
    (P_state, P_node, P_sts, P_spos, P_seq, P_v, P_free, P_key, P_thr, P_idx, P_quar, AK, AS, AQ, SEG, KL, K_slot,
     K_seq, pm) = P
    cap = P_state.shape[0]
    if pool_room(P) < need:
        n2 = max(2 * cap, pm[PM_HIGH] + need + 16)
        P_state, P_node, P_sts, P_spos, P_seq, P_key, P_thr, P_idx = _new_slots(
            n2, (P_state, P_node, P_sts, P_spos, P_seq, P_key, P_thr, P_idx))
        P_v = grow(P_v, n2 * vw)
        P_free = grow(P_free, n2)
        P_quar = grow(P_quar, n2)
        K_slot = grow(K_slot, n2)
        K_seq = grow(K_seq, n2)
    # pack the arena: every heap keeps its capacity, key k's get room for ``need`` more
    used = 0
    for kk in range(SEG.shape[0]):
        for c in range(0, SEG.shape[1], 3):
            used += SEG[kk, c + 2]
            if kk == k and SEG[kk, c + 2] - SEG[kk, c + 1] < need:
                used += max(16, SEG[kk, c + 1] + need)
    a2 = max(2 * used, 64)
    AK2 = np.empty(a2, np.float64)
    AS2 = np.empty(a2, np.int64)
    AQ2 = np.empty(a2, np.int64)
    at = 0
    for kk in range(SEG.shape[0]):
        for c in range(0, SEG.shape[1], 3):
            off, n, hc = SEG[kk, c], SEG[kk, c + 1], SEG[kk, c + 2]
            if kk == k and hc - n < need:
                hc = max(16, 2 * hc, n + need)
            for i in range(n):
                AK2[at + i] = AK[off + i]
                AS2[at + i] = AS[off + i]
                AQ2[at + i] = AQ[off + i]
            SEG[kk, c] = at
            SEG[kk, c + 2] = hc
            at += hc
    pm[PM_AHIGH] = at
    pm[PM_AGARB] = 0
    return (P_state, P_node, P_sts, P_spos, P_seq, P_v, P_free, P_key, P_thr, P_idx, P_quar, AK2, AS2, AQ2, SEG, KL,
            K_slot, K_seq, pm)


# ----------------------------------------------------------------------------- heaps
# A heap is a segment ``[b, b + n)`` of the arena (key, slot, sequence number); the start heap's
# key is the start position (exact in a float64 below 2^53). The start queue is a segment sorted
# by (start position, sequence number), so a heap too; its pop advances its offset (the entry
# left behind is the arena's garbage until it is packed).
@njit(cache=True, nogil=True, inline="always")
def n_thresholds(SEG):
    """The threshold heaps a key has (its first segments; then the start heap and queue)."""
    return SEG.shape[1] // 3 - 2


@njit(cache=True, nogil=True, inline="always")
def _starts(SEG):
    """The columns of the start heap's and the start queue's segments in ``SEG``."""
    ch = 3 * n_thresholds(SEG)
    return ch, ch + 3


@njit(cache=True, nogil=True, inline="always")
def _less(K, Q, a, b):
    return K[a] < K[b] or (K[a] == K[b] and Q[a] < Q[b])


@njit(cache=True, nogil=True, inline="always")
def _swap(K, A, Q, a, b):
    K[a], K[b] = K[b], K[a]
    A[a], A[b] = A[b], A[a]
    Q[a], Q[b] = Q[b], Q[a]


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _h_down(K, A, Q, b, n, i):
    """Sift entry ``i`` of the heap at ``b`` (``n`` entries) down."""
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(K, Q, b + c + 1, b + c):
            c += 1
        if not _less(K, Q, b + c, b + i):
            break
        _swap(K, A, Q, b + i, b + c)
        i = c


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _h_push(K, A, Q, b, n, key, slot, seq):
    i = n
    K[b + i] = key
    A[b + i] = slot
    Q[b + i] = seq
    while i > 0:
        p = (i - 1) >> 1
        if not _less(K, Q, b + i, b + p):
            break
        _swap(K, A, Q, b + i, b + p)
        i = p


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _h_pop(K, A, Q, b, n):
    """Remove the top of the heap at ``b`` (``n`` > 0 entries)."""
    n -= 1
    K[b] = K[b + n]
    A[b] = A[b + n]
    Q[b] = Q[b + n]
    _h_down(K, A, Q, b, n, 0)


@njit(cache=True, nogil=True, _nrt=False)
def _heapify(K, A, Q, b, n):
    for r in range(n // 2 - 1, -1, -1):
        _h_down(K, A, Q, b, n, r)


@njit(cache=True, nogil=True, _nrt=False)
def compact_heap(P, k, c):
    """Drop the stale entries of key ``k``'s heap ``c // 3`` when they are more than half of it;
    re-heapify."""
    P_seq, AK, AS, AQ, SEG, KL = P[P_SEQ], P[A_KEY], P[A_SLOT], P[A_SEQ], P[P_SEG], P[P_KL]
    b, n = SEG[k, c], SEG[k, c + 1]
    if n <= 2 * KL[k] + 32:
        return
    w = 0
    for r in range(n):
        if P_seq[AS[b + r]] == AQ[b + r]:
            AK[b + w] = AK[b + r]
            AS[b + w] = AS[b + r]
            AQ[b + w] = AQ[b + r]
            w += 1
    SEG[k, c + 1] = w
    _heapify(AK, AS, AQ, b, w)


# ----------------------------------------------------------------------------- parking
@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _new_slot(P, k, state, node, sts, spos):
    """A pool slot for a run of key ``k`` (room must have been made), its fields set; returns
    (slot, sequence number)."""
    (P_state, P_node, P_sts, P_spos, P_seq) = P[:5]
    P_free, P_key, KL, pm = P[P_FREE_LIST], P[P_KEY], P[P_KL], P[P_PM]
    if pm[PM_FREE] > 0:
        pm[PM_FREE] -= 1
        slot = P_free[pm[PM_FREE]]
    else:
        slot = pm[PM_HIGH]
        pm[PM_HIGH] += 1
    seq = pm[PM_SEQ]
    pm[PM_SEQ] += 1
    pm[PM_LIVE] += 1
    KL[k] += 1
    P_state[slot] = state
    P_node[slot] = node
    P_sts[slot] = sts
    P_spos[slot] = spos
    P_seq[slot] = seq
    P_key[slot] = k
    return slot, seq


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _index_slot(P, k, slot, seq, spos, idx, pk_op, pk_t0, pk_t1, code, consts, masks, cols, vm_stack, vw):
    """Index a parked run (its V in place): its start in the key's start heap, its threshold (the
    program ``code[t0:t1]`` over its V) in the key's heap ``idx``, unless null (it never wakes)."""
    P_thr, P_idx, P_v = P[P_THR], P[P_IDX], P[P_V]
    AK, AS, AQ, SEG = P[A_KEY], P[A_SLOT], P[A_SEQ], P[P_SEG]
    ch, cq = _starts(SEG)  # the start queue, if the run comes last in start order, else the heap
    b, n = SEG[k, cq], SEG[k, cq + 1]
    if n == 0 or AK[b + n - 1] <= spos:  # (a later park has a greater sequence number)
        AK[b + n] = float(spos)
        AS[b + n] = slot
        AQ[b + n] = seq
        SEG[k, cq + 1] = n + 1
    else:
        _h_push(AK, AS, AQ, SEG[k, ch], SEG[k, ch + 1], float(spos), slot, seq)
        SEG[k, ch + 1] += 1
    key = threshold_key(idx, pk_op, pk_t0, pk_t1, code, consts, masks, cols, P_v, slot * vw, vm_stack)
    if key == key:
        P_thr[slot] = key
        P_idx[slot] = idx
        _h_push(AK, AS, AQ, SEG[k, 3 * idx], SEG[k, 3 * idx + 1], key, slot, seq)
        SEG[k, 3 * idx + 1] += 1
    else:
        P_thr[slot] = np.nan
        P_idx[slot] = -1


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def threshold_key(idx, pk_op, pk_t0, pk_t1, code, consts, masks, cols, v, voff, vm_stack):
    """The heap key of a run in a state of threshold heap ``idx`` whose V is at ``v[voff]``: its
    threshold, negated for ``<`` / ``<=`` (a smaller key wakes at every event a greater one
    does); NaN for a null threshold (never wakes)."""
    thr = eval_value(code, pk_t0[idx], pk_t1[idx], consts, -1, masks, cols, v, voff, vm_stack)
    op = pk_op[idx]
    return thr if (op == C_GT or op == C_GE) else -thr


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def crosses(op, x, key):
    """Whether the event value ``x`` crosses the threshold whose heap key is ``key``
    (``threshold_key``: a run with that key wakes)."""
    return compare(op, x, key if (op == C_GT or op == C_GE) else -key)


@njit(cache=True, nogil=True, _nrt=False)
def park(P, k, pk_col, pk_op, pk_t0, pk_t1, idx, state, node, sts, spos, v, voff, vw, code, consts, masks, cols,
         vm_stack):
    """Park a run of key ``k`` (room must have been made): its fields and V (at ``v[voff]``) go
    to a free slot, its threshold to the key's heap ``idx`` and its start to the start heap."""
    slot, seq = _new_slot(P, k, state, node, sts, spos)
    P_v = P[P_V]
    b = slot * vw
    for jj in range(vw):
        P_v[b + jj] = v[voff + jj]
    _index_slot(P, k, slot, seq, spos, idx, pk_op, pk_t0, pk_t1, code, consts, masks, cols, vm_stack, vw)


@njit(cache=True, nogil=True, _nrt=False)
def park_start(P, k, pk_op, pk_t0, pk_t1, idx, state, node, t, g, v, zero_off, vw, vg_stage, vg_col, stg, row,
               code, consts, masks, cols, vm_stack):
    """Park the run that key ``k``'s start run makes by taking event ``row`` (stream position
    ``g``, time ``t``, stage ``stg``) straight into parkable state ``state``, without listing it
    first: its V is the empty one (``v[zero_off]``) with the event accounted, written in its slot."""
    slot, seq = _new_slot(P, k, state, node, t, g)
    P_v = P[P_V]
    b = slot * vw
    for jj in range(vw):
        P_v[b + jj] = v[zero_off + jj]
    v_take(P_v, b, vg_stage, vg_col, stg, cols, row, g)
    _index_slot(P, k, slot, seq, g, idx, pk_op, pk_t0, pk_t1, code, consts, masks, cols, vm_stack, vw)


@njit(cache=True, nogil=True, inline="always")
def unpark(P, slot):
    """Free a parked run's slot (its heap entries become stale); a slot live before the open
    call is quarantined instead, its fields intact (``undo_call`` may revive it)."""
    P_seq, P_free, P_quar, KL, pm = P[P_SEQ], P[P_FREE_LIST], P[P_QUAR], P[P_KL], P[P_PM]
    seq = P_seq[slot]
    KL[P[P_KEY][slot]] -= 1
    pm[PM_LIVE] -= 1
    if 0 <= seq < pm[PM_SEQ0]:
        P_seq[slot] = -2 - seq
        P_quar[pm[PM_QN]] = slot
        pm[PM_QN] += 1
    else:
        P_seq[slot] = -1
        P_free[pm[PM_FREE]] = slot
        pm[PM_FREE] += 1


@njit(cache=True, nogil=True, _nrt=False)
def wake_parked(P, k, pk_col, pk_op, row, cols):
    """Move the parked runs of key ``k`` that event ``row`` wakes (its column crosses their
    threshold) from the threshold heaps to the woken list ``K`` (they stay parked until
    ``take_woken``). Returns the number of woken runs."""
    P_seq, AK, AS, AQ, SEG, K_slot, K_seq, pm = (P[P_SEQ], P[A_KEY], P[A_SLOT], P[A_SEQ], P[P_SEG], P[K_SLOT],
                                                 P[K_SEQ], P[P_PM])
    nk = pm[PM_NK]
    for i in range(n_thresholds(SEG)):
        b = SEG[k, 3 * i]
        n = SEG[k, 3 * i + 1]
        if n == 0:
            continue
        x = cols[pk_col[i], row]
        op = pk_op[i]
        up = op == C_GT or op == C_GE
        while n > 0:
            slot = AS[b]
            seq = AQ[b]
            if P_seq[slot] == seq:
                key = AK[b]
                if not crosses(op, x, key):
                    break
                K_slot[nk] = slot
                K_seq[nk] = seq
                nk += 1
            _h_pop(AK, AS, AQ, b, n)
            n -= 1
        SEG[k, 3 * i + 1] = n
    pm[PM_NK] = nk
    return nk


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _oldest(P, k):
    """(segment, arena index) of key ``k``'s oldest parked run's start entry, the start queue's
    or the start heap's top, after dropping their stale tops; (-1, -1): none."""
    P_seq, AK, AS, AQ, SEG, pm = P[P_SEQ], P[A_KEY], P[A_SLOT], P[A_SEQ], P[P_SEG], P[P_PM]
    ch, cq = _starts(SEG)
    b, n = SEG[k, cq], SEG[k, cq + 1]
    d = 0
    while d < n and P_seq[AS[b + d]] != AQ[b + d]:
        d += 1
    if d > 0:
        _q_pop(SEG, pm, k, cq, d)
    b, n = SEG[k, ch], SEG[k, ch + 1]
    while n > 0 and P_seq[AS[b]] != AQ[b]:
        _h_pop(AK, AS, AQ, b, n)
        n -= 1
    SEG[k, ch + 1] = n
    if SEG[k, cq + 1] == 0:
        return (ch, b) if n > 0 else (-1, -1)
    if n == 0 or _less(AK, AQ, SEG[k, cq], b):
        return cq, SEG[k, cq]
    return ch, b


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _q_pop(SEG, pm, k, cq, d):
    """Drop the first ``d`` entries of key ``k``'s start queue."""
    SEG[k, cq] += d
    SEG[k, cq + 1] -= d
    SEG[k, cq + 2] -= d
    pm[PM_AGARB] += d


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _pop_start(P, k, c):
    """Remove the top of key ``k``'s start segment ``c`` (``_oldest``'s)."""
    SEG = P[P_SEG]
    if c == _starts(SEG)[1]:
        _q_pop(SEG, P[P_PM], k, c, 1)
    else:
        _h_pop(P[A_KEY], P[A_SLOT], P[A_SEQ], SEG[k, c], SEG[k, c + 1])
        SEG[k, c + 1] -= 1


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def min_spos(P, k):
    """The start position of key ``k``'s oldest parked run (``BIG``: none); drops stale tops."""
    c, i = _oldest(P, k)
    return P[P_SPOS][P[A_SLOT][i]] if c >= 0 else BIG


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def any_expired(P, k, t, window):
    """Whether the window of one of key ``k``'s parked runs has passed at time ``t``."""
    if window <= 0:
        return False
    c, i = _oldest(P, k)
    return c >= 0 and expired(t, P[P_STS][P[A_SLOT][i]], window)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def first_look(AK, SEG, P_sts, P_seq, AS, AQ, k, n_pk, pk_col, pk_op, row, cols, t, window):
    """``look``'s first look at key ``k``'s heap tops, reading only them: 1 where event ``row``
    crosses a threshold heap's top (a stale top only makes it pessimistic), plus 2 where a top of
    its start queue or heap is stale or its window has passed at ``t``. (Inlined where it is
    called, with the few arrays it reads: the generated steps type it at less cost than ``look``,
    whose rare second half, ``then_look``, is compiled once.)"""
    out = 0
    for i in range(n_pk):
        if SEG[k, 3 * i + 1] > 0 and crosses(pk_op[i], cols[pk_col[i], row], AK[SEG[k, 3 * i]]):
            out = 1
            break
    if window > 0:
        for c in _starts(SEG):
            if SEG[k, c + 1] > 0:
                top = SEG[k, c]
                if P_seq[AS[top]] != AQ[top] or expired(t, P_sts[AS[top]], window):
                    return out | 2
    return out


@njit(cache=True, nogil=True, _nrt=False)
def then_look(P, first, k, pk_col, pk_op, row, cols, t, window):
    """What the first look (``first``, not 0) found: the parked runs event ``row`` crosses the
    threshold of are woken; returns whether some parked run's window has passed at ``t``."""
    if first & 1:
        wake_parked(P, k, pk_col, pk_op, row, cols)
    return first & 2 != 0 and any_expired(P, k, t, window)


@njit(cache=True, nogil=True, inline="always")
def look(P, k, n_pk, pk_col, pk_op, row, cols, t, window):
    """A key's parked runs at event ``row`` (time ``t``): those whose threshold it crosses are
    woken; returns whether some parked run's window has passed at ``t``."""
    first = first_look(P[A_KEY], P[P_SEG], P[P_STS], P[P_SEQ], P[A_SLOT], P[A_SEQ], k, n_pk, pk_col, pk_op, row,
                       cols, t, window)
    return first != 0 and then_look(P, first, k, pk_col, pk_op, row, cols, t, window)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def pop_oldest(P, k):
    """Unpark key ``k``'s oldest parked run and return its slot (its fields stay readable until
    the slot is reused); -1 when none."""
    c, i = _oldest(P, k)
    if c < 0:
        return -1
    slot = P[A_SLOT][i]
    _pop_start(P, k, c)
    unpark(P, slot)
    return slot


@njit(cache=True, nogil=True, _nrt=False)
def timeouts(P, k, t, window, final_tick, want_timeouts, g, pend_node, pend_g, pend_flag, pend_tts, npend, n_row,
             n_stage, n_parent, n_ref, meta):
    """Phase 1 for key ``k``'s parked runs: those whose window has passed at ``t`` time out (in
    start order). Returns (whether any did, ``npend``)."""
    P_node, P_sts = P[P_NODE], P[P_STS]
    any_ = False
    if window <= 0:
        return False, npend
    AS = P[A_SLOT]
    while True:
        c, i = _oldest(P, k)
        if c < 0:
            break
        slot = AS[i]
        sts = P_sts[slot]
        if not ((final_tick and t == TIME_MAX) or expired(t, sts, window)):
            break
        _pop_start(P, k, c)
        unpark(P, slot)
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


@njit(cache=True, nogil=True, _nrt=False)
def prune(P, k, pid, strict, n_row, n_stage, n_parent, n_ref, meta):
    """The skip strategy's pruning for key ``k``'s parked runs: those started before ``pid`` (or
    at it, unless ``strict``) are discarded."""
    P_node = P[P_NODE]
    while True:
        s = min_spos(P, k)
        if s == BIG or not (s < pid or (not strict and s == pid)):
            break
        slot = pop_oldest(P, k)
        release(n_row, n_stage, n_parent, n_ref, meta, P_node[slot])


@njit(cache=True, nogil=True, _nrt=False)
def _sort_woken(P, lo, hi):
    """Heap sort of the woken list ``K[lo:hi]`` by start position (then sequence)."""
    P_spos, K_slot, K_seq = P[P_SPOS], P[K_SLOT], P[K_SEQ]
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


@njit(cache=True, nogil=True, _nrt=False)
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


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _still_parked(P):
    """The woken list cut to the runs still parked (a time-out or pruning may have discarded
    some), sorted by start position; returns their number and empties the list's count."""
    P_seq, K_slot, K_seq, pm = P[P_SEQ], P[K_SLOT], P[K_SEQ], P[P_PM]
    nk = 0
    for q in range(pm[PM_NK]):
        if P_seq[K_slot[q]] == K_seq[q]:
            K_slot[nk] = K_slot[q]
            K_seq[nk] = K_seq[q]
            nk += 1
    pm[PM_NK] = 0
    _sort_woken(P, 0, nk)
    return nk


@njit(cache=True, nogil=True, _nrt=False)
def take_woken(P, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, vw, ao, na, dst, jc):
    """Merge the woken runs that are still parked (a time-out or pruning may have discarded
    some) into the list ``W[ao:ao+na]`` by start position, writing the merged list at ``dst``
    (room was made; the woken runs' V get new arena slots); they leave the pool. Returns the
    merged list's length; the woken list is emptied."""
    P_state, P_node, P_sts, P_spos, P_v = P[P_STATE], P[P_NODE], P[P_STS], P[P_SPOS], P[P_V]
    K_slot = P[K_SLOT]
    nk = _still_parked(P)
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
            W_wake[x] = -2 - jc  # woken at ``jc`` (its threshold holds there: nfa.compute_next_states)
            W_vs[x] = v_at[0]
            b = v_at[0] * vw
            v_at[0] += 1
            for jj in range(vw):
                W_v[b + jj] = P_v[slot * vw + jj]
            unpark(P, slot)
            q += 1
        x += 1
    return x - dst


@njit(cache=True, nogil=True, _nrt=False)
def emit_woken(P, g, st_stage, pend_node, pend_g, pend_flag, pend_tts, npend, n_row, n_stage, n_parent, n_ref,
               meta):
    """The woken runs that are still parked, when each completes at the event that woke it
    (``wake_final``) and nothing else of the key is listed or held: in start order, each leaves
    the pool and its match (the run's path and the event, at its state's stage) is emitted at
    stream position ``g``, as stepping them would (room was made), in the held-match queue's
    order: by start event, then (runs of one start, e.g. after an optional stage) by path.
    Returns ``npend``."""
    P_state, P_node, K_slot = P[P_STATE], P[P_NODE], P[K_SLOT]
    npend0 = npend
    for q in range(_still_parked(P)):
        slot = K_slot[q]
        node0 = P_node[slot]
        node1 = alloc(n_row, n_stage, n_parent, n_ref, meta, g, st_stage[P_state[slot]], node0)
        n_ref[node1] += 1  # the emitted match's reference
        release(n_row, n_stage, n_parent, n_ref, meta, node0)  # the run's
        unpark(P, slot)
        pend_node[npend] = node1
        pend_g[npend] = g
        pend_flag[npend] = 0
        pend_tts[npend] = 0
        npend += 1
    if npend - npend0 > 1:  # (in start order already: only runs of one start move)
        sort_by_path(pend_node, pend_g, pend_flag, pend_tts, npend0, npend, n_row, n_stage, n_parent)
    return npend


@njit(cache=True, nogil=True, _nrt=False)
def sort_by_path(pend_node, pend_g, pend_flag, pend_tts, lo, hi, n_row, n_stage, n_parent):
    """Put the partial matches that timed out at one event (``pend[lo:hi]``) in the order of
    their paths (``compare_paths``: by start event first), whichever of the list of runs or the
    park they came from: the order does not depend on where runs were kept. Insertion sort:
    the two sources are each in start order already. (``emit_woken`` puts the matches it emits
    at one event in this order too.)"""
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


@njit(cache=True, nogil=True, _nrt=False)
def park_pass(P, k, pk_idx, pk_col, pk_op, pk_t0, pk_t1, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, vw, bo,
              nb, first, code, consts, masks, cols, vm_stack):
    """Park the runs of the list ``W[bo+first:bo+nb]`` (key ``k``) that are in a parkable state
    (room was made); the others close up in order. Returns the list's new length."""
    w = first
    for q in range(first, nb):
        x = bo + q
        s = W_state[x]
        if pk_idx[s] >= 0:
            park(P, k, pk_col, pk_op, pk_t0, pk_t1, pk_idx[s], s, W_node[x], W_sts[x], W_spos[x], W_v,
                 W_vs[x] * vw, vw, code, consts, masks, cols, vm_stack)
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


# ----------------------------------------------------------------------------- calls, undo, export
@njit(cache=True, nogil=True, _nrt=False)
def open_call(pm):
    """Open a call that may be undone: the slots live now are kept until it ends."""
    if pm[PM_SEQ0] < 0:
        pm[PM_SEQ0] = pm[PM_SEQ]


@njit(cache=True, nogil=True, _nrt=False)
def close_call(P):
    """The call succeeded: its quarantined slots join the free list (time: what it freed)."""
    P_seq, P_free, P_quar, pm = P[P_SEQ], P[P_FREE_LIST], P[P_QUAR], P[P_PM]
    for q in range(pm[PM_QN]):
        s = P_quar[q]
        P_seq[s] = -1
        P_free[pm[PM_FREE]] = s
        pm[PM_FREE] += 1
    pm[PM_QN] = 0
    pm[PM_SEQ0] = -1


@njit(cache=True, nogil=True)
def undo_call(P):
    """The call failed: back to the runs parked when it opened (the quarantined slots live again,
    the ones parked since free), every heap rebuilt, in place. Works on the arrays the call began
    with as well as on the ones it grew: a slot live before the call is never changed, only
    marked. Returns ``P``. Time: the pool, on failure only."""
    P_state, P_seq, P_free, P_key, P_thr, P_idx, SEG, KL, pm = (P[P_STATE], P[P_SEQ], P[P_FREE_LIST], P[P_KEY],
                                                                P[P_THR], P[P_IDX], P[P_SEG], P[P_KL], P[P_PM])
    seq0 = pm[PM_SEQ0]
    if seq0 < 0:
        return P
    high = min(pm[PM_HIGH], P_state.shape[0])
    n_free = 0
    live = 0
    for s in range(high - 1, -1, -1):  # the lowest free slot is taken first
        q = P_seq[s]
        if q <= -2:
            q = -2 - q  # quarantined: live again
            P_seq[s] = q
        if q >= seq0 or q < 0 or P_key[s] >= SEG.shape[0]:
            P_seq[s] = -1
            P_free[n_free] = s
            n_free += 1
        else:
            live += 1
    pm[PM_HIGH] = high
    pm[PM_FREE] = n_free
    pm[PM_LIVE] = live
    pm[PM_QN] = 0
    pm[PM_NK] = 0
    pm[PM_SEQ0] = -1
    # the heaps: per key and heap, its live entries
    h_start = n_thresholds(SEG)  # (the start heap; the queue stays empty)
    SEG[:, :] = 0
    KL[:] = 0
    for s in range(high):
        if P_seq[s] >= 0:
            k = P_key[s]
            KL[k] += 1
            SEG[k, 3 * h_start + 1] += 1
            if P_idx[s] >= 0:
                SEG[k, 3 * P_idx[s] + 1] += 1
    # in the arena the call began with: it held these entries then, so they fit, with room to
    # grow where there is some
    AK, AS, AQ = P[A_KEY], P[A_SLOT], P[A_SEQ]
    entries = 0
    heaps = 0
    for k in range(SEG.shape[0]):
        for c in range(0, SEG.shape[1], 3):
            entries += SEG[k, c + 1]
            heaps += 1 if SEG[k, c + 1] > 0 else 0
    slack = 16 if entries + 16 * heaps <= AK.shape[0] else 0
    at = 0
    for k in range(SEG.shape[0]):
        for c in range(0, SEG.shape[1], 3):
            SEG[k, c] = at
            SEG[k, c + 2] = SEG[k, c + 1] + slack if SEG[k, c + 1] > 0 else 0
            at += SEG[k, c + 2]
            SEG[k, c + 1] = 0
    P_spos = P[P_SPOS]
    for s in range(high):
        if P_seq[s] >= 0:
            k = P_key[s]
            c = 3 * h_start
            i = SEG[k, c] + SEG[k, c + 1]
            AK[i] = float(P_spos[s])
            AS[i] = s
            AQ[i] = P_seq[s]
            SEG[k, c + 1] += 1
            if P_idx[s] >= 0:
                c = 3 * P_idx[s]
                i = SEG[k, c] + SEG[k, c + 1]
                AK[i] = P_thr[s]
                AS[i] = s
                AQ[i] = P_seq[s]
                SEG[k, c + 1] += 1
    for k in range(SEG.shape[0]):
        for c in range(0, SEG.shape[1], 3):
            _heapify(AK, AS, AQ, SEG[k, c], SEG[k, c + 1])
    pm[PM_AHIGH] = at
    pm[PM_AGARB] = 0
    return P


@njit(cache=True, nogil=True)
def copy_park(P):
    """A copy of ``P`` (the same array types: its slots' fields stay records)."""
    slots = _new_slots(P[P_STATE].shape[0], (P[P_STATE], P[P_NODE], P[P_STS], P[P_SPOS], P[P_SEQ], P[P_KEY], P[P_THR],
                                              P[P_IDX]))
    return (slots[0], slots[1], slots[2], slots[3], slots[4], P[P_V].copy(), P[P_FREE_LIST].copy(), slots[5],
            slots[6], slots[7], P[P_QUAR].copy(), P[A_KEY].copy(), P[A_SLOT].copy(), P[A_SEQ].copy(), P[P_SEG].copy(),
            P[P_KL].copy(), P[K_SLOT].copy(), P[K_SEQ].copy(), P[P_PM].copy())


@njit(cache=True, nogil=True)
def export_runs(P, n_keys, r_ptr, r_state, r_node, r_sts, r_spos, r_v):
    """Every run of every key, listed (``r_*``, CSR) or parked, as one CSR list in start order
    (on a tie the listed run first, parked ones by sequence number): the carried runs as a
    snapshot or another layout of threads holds them. ``P`` is not changed."""
    P_state, P_node, P_sts, P_spos, P_seq, P_v, P_key = P[:6] + (P[P_KEY],)
    vw = r_v.shape[1]
    high = P[P_PM][PM_HIGH]
    n_old = r_ptr.shape[0] - 1
    n_listed = r_ptr[n_old]
    live = np.empty(P[P_PM][PM_LIVE], np.int64)
    m = 0
    for s in range(high):
        if P_seq[s] >= 0:
            live[m] = s
            m += 1
    live = live[:m]
    # by key, then start position, then sequence number (stable sorts, least significant first)
    live = live[np.argsort(P_seq[live], kind="mergesort")]
    live = live[np.argsort(P_spos[live], kind="mergesort")]
    live = live[np.argsort(P_key[live], kind="mergesort")]
    n = n_listed + m
    ptr = np.zeros(n_keys + 1, np.int64)
    state = np.empty(n, np.int32)
    node = np.empty(n, np.int64)
    sts = np.empty(n, np.int64)
    spos = np.empty(n, np.int64)
    v = np.empty((n, vw), np.float64)
    x = 0
    q = 0
    for k in range(n_keys):
        a = r_ptr[k] if k < n_old else n_listed
        a_end = r_ptr[k + 1] if k < n_old else n_listed
        while a < a_end or (q < m and P_key[live[q]] == k):
            if q >= m or P_key[live[q]] != k or (a < a_end and r_spos[a] <= P_spos[live[q]]):
                state[x] = r_state[a]
                node[x] = r_node[a]
                sts[x] = r_sts[a]
                spos[x] = r_spos[a]
                for jj in range(vw):
                    v[x, jj] = r_v[a, jj]
                a += 1
            else:
                s = live[q]
                state[x] = P_state[s]
                node[x] = P_node[s]
                sts[x] = P_sts[s]
                spos[x] = P_spos[s]
                for jj in range(vw):
                    v[x, jj] = P_v[s * vw + jj]
                q += 1
            x += 1
        ptr[k + 1] = x
    return ptr, state, node, sts, spos, v
