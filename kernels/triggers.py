"""Window firings: Flink's ``WindowOperator`` / ``EvictingWindowOperator`` with triggers and
evictors, stepped over int64 / float64 arrays.

One call takes a batch of rows in arrival order, each with the watermark current when it is
processed (``wm_before``), and the watermark after the batch (``wm_end``). Keys are independent
(a key's windows, trigger state and timers are its own; only the watermark is shared), so rows
are stepped key by key; before each row, the key's timers up to its watermark fire first, in
timestamp order, as ``InternalTimerServiceImpl.advanceWatermark`` fires them when the watermark
moves (a timer registered at or behind the current watermark waits for the next advance).

Transcribed (flink-runtime / flink-streaming-java 2.3): ``WindowOperator.processElement`` /
``onEventTime`` / ``isWindowLate`` / ``isElementLate`` / ``registerCleanupTimer`` /
``clearAllState``; ``EvictingWindowOperator.emitWindowContents``; ``MergingWindowSet.addWindow``
with ``TimeWindow.mergeWindows`` (the merged window's state is the one of the first merged window
in ``HashSet`` iteration order; the others' elements follow it, in that order); the triggers
``EventTimeTrigger``, ``CountTrigger``, ``ContinuousEventTimeTrigger``, ``DeltaTrigger``,
``PurgingTrigger`` and an OR of triggers (every sub-trigger sees every call); the evictors
``CountEvictor``, ``TimeEvictor``, ``DeltaEvictor`` (before or after the evaluation).

State (arrays the caller keeps between calls, grown geometrically, slots and list nodes pooled):
    sl      int64 [slots, S_COLS]  a window per slot: key, start, end, maxTs, contents list, seq
    tm      int64 [slots, T_CAP]   the window's registered event-time timers (a set)
    ls, lf  int64 / float64 [slots, leaves]  each trigger leaf's state in that window
    nd      int64 [nodes, 2]       contents lists: (row id, next); free nodes chained
    kh, kw  int64 [keys]           each key's first window slot, and the watermark it last saw
    kn      int64 [keys]           a bound on each key's earliest timer (at or below it)
    rts, rv int64 / float64 [rows] time and delta value of every row id still referenced
    sc      int64 [6]              free slot, slots made, free node, nodes made, free slots, free nodes
Firings come out as ``fi`` (int64 [n, F_COLS]: key, start, end, seq, kind, lo, hi) over ``log``
(the row ids each firing evaluated, in the order Flink's window function receives them).
"""
import numpy as np
from numba import njit

from .arrays import group_by_key, grow, grow_rows

I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max

# assigners (prog[P_ASSIGNER])
SLIDING, SESSION, GLOBAL = 0, 1, 2
# trigger nodes
T_EVENT_TIME, T_COUNT, T_CONTINUOUS, T_DELTA, T_PURGING, T_ANY = 0, 1, 2, 3, 4, 5
# evictors
E_NONE, E_COUNT, E_TIME, E_DELTA = 0, 1, 2, 3
# firing kinds
EARLY, ON_TIME, LATE = 0, 1, 2
# prog layout
P_ASSIGNER, P_SIZE, P_SLIDE, P_OFFSET, P_GAP, P_LATENESS, P_EV_KIND, P_EV_N, P_EV_AFTER, P_LEN = range(10)
# slot columns
S_KEY, S_START, S_END, S_MAXTS, S_HEAD, S_TAIL, S_SIZE, S_SEQ, S_NEXT, S_NT, S_COLS = range(11)
F_COLS = 7
# scalars
C_FREE_SLOT, C_SLOTS, C_FREE_NODE, C_NODES, C_N_FREE_SLOTS, C_N_FREE_NODES = 0, 1, 2, 3, 4, 5
NULL = I64_MIN  # a ContinuousEventTimeTrigger's fire time not set


def t_cap(n_nodes):
    """Timers a window can hold at once: its end, its cleanup and one per continuous trigger."""
    return 2 + n_nodes


@njit(cache=True, nogil=True)
def new_state(n_keys, n_leaves, tcap):
    sl = np.zeros((16, S_COLS), np.int64)
    tm = np.zeros((16, tcap), np.int64)
    ls = np.zeros((16, max(1, n_leaves)), np.int64)
    lf = np.zeros((16, max(1, n_leaves)), np.float64)
    nd = np.zeros((64, 2), np.int64)
    kh = np.full(max(1, n_keys), -1, np.int64)
    kw = np.full(max(1, n_keys), I64_MIN, np.int64)
    kn = np.full(max(1, n_keys), I64_MAX, np.int64)
    sc = np.array([-1, 0, -1, 0, 0, 0], np.int64)
    return sl, tm, ls, lf, nd, kh, kw, kn, sc


# ------------------------------------------------------------------ small helpers
@njit(cache=True, nogil=True, inline="always")
def java_rem(a, b):
    """Java's ``a % b`` on longs (the sign of ``a``)."""
    r = a % b
    if r != 0 and a < 0:
        r -= b
    return r


@njit(cache=True, nogil=True, inline="always")
def _register(tm, sl, kn, s, t):
    """``registerEventTimeTimer``: a set per window; the key's earliest-timer bound follows."""
    n = sl[s, S_NT]
    for j in range(n):
        if tm[s, j] == t:
            return
    tm[s, n] = t
    sl[s, S_NT] = n + 1
    k = sl[s, S_KEY]
    if t < kn[k]:
        kn[k] = t


@njit(cache=True, nogil=True)
def _pop_timer(tm, sl, s, wm):
    """Remove the earliest timer of slot ``s`` at or before ``wm``: ``(found, time)``."""
    n = sl[s, S_NT]
    best = -1
    for j in range(n):
        if tm[s, j] <= wm and (best < 0 or tm[s, j] < tm[s, best]):
            best = j
    if best < 0:
        return False, I64_MIN
    t = tm[s, best]
    tm[s, best] = tm[s, n - 1]
    sl[s, S_NT] = n - 1
    return True, t


@njit(cache=True, nogil=True, inline="always")
def _cleanup_time(maxts, lateness):
    """``WindowOperator.cleanupTime``: ``maxTs + lateness``, Long.MAX_VALUE on overflow."""
    c = maxts + lateness
    return I64_MAX if c < maxts else c


@njit(cache=True, nogil=True)
def _free_list(nd, sc, head):
    """Return the nodes of a contents list to the pool."""
    n = head
    while n >= 0:
        nx = nd[n, 1]
        nd[n, 1] = sc[C_FREE_NODE]
        sc[C_FREE_NODE] = n
        sc[C_N_FREE_NODES] += 1
        n = nx


@njit(cache=True, nogil=True)
def _clear_contents(sl, nd, sc, s):
    _free_list(nd, sc, sl[s, S_HEAD])
    sl[s, S_HEAD] = -1
    sl[s, S_TAIL] = -1
    sl[s, S_SIZE] = 0


@njit(cache=True, nogil=True, inline="always")
def _append(sl, nd, sc, s, row):
    n = sc[C_FREE_NODE]
    sc[C_FREE_NODE] = nd[n, 1]
    sc[C_N_FREE_NODES] -= 1
    nd[n, 0] = row
    nd[n, 1] = -1
    if sl[s, S_TAIL] >= 0:
        nd[sl[s, S_TAIL], 1] = n
    else:
        sl[s, S_HEAD] = n
    sl[s, S_TAIL] = n
    sl[s, S_SIZE] += 1


@njit(cache=True, nogil=True)
def _new_slot(sl, tm, ls, lf, kh, sc, key, start, end, maxts, leaf_kind):
    s = sc[C_FREE_SLOT]
    sc[C_FREE_SLOT] = sl[s, S_NEXT]
    sc[C_N_FREE_SLOTS] -= 1
    sl[s, S_KEY] = key
    sl[s, S_START] = start
    sl[s, S_END] = end
    sl[s, S_MAXTS] = maxts
    sl[s, S_HEAD] = -1
    sl[s, S_TAIL] = -1
    sl[s, S_SIZE] = 0
    sl[s, S_SEQ] = 0
    sl[s, S_NT] = 0
    for j in range(leaf_kind.shape[0]):
        ls[s, j] = NULL if leaf_kind[j] == T_CONTINUOUS else 0
        lf[s, j] = 0.0
    sl[s, S_NEXT] = kh[key]
    kh[key] = s
    return s


@njit(cache=True, nogil=True)
def _retire(sl, nd, kh, sc, s):
    """``clearAllState`` + ``retireWindow``: contents, trigger state, timers and the slot go."""
    _clear_contents(sl, nd, sc, s)
    k = sl[s, S_KEY]
    if kh[k] == s:
        kh[k] = sl[s, S_NEXT]
    else:
        p = kh[k]
        while sl[p, S_NEXT] != s:
            p = sl[p, S_NEXT]
        sl[p, S_NEXT] = sl[s, S_NEXT]
    sl[s, S_NT] = 0
    sl[s, S_NEXT] = sc[C_FREE_SLOT]
    sc[C_FREE_SLOT] = s
    sc[C_N_FREE_SLOTS] += 1
    sl[s, S_KEY] = -1


# ------------------------------------------------------------------ triggers
@njit(cache=True, nogil=True, inline="always")
def _combine(nk, nparent, leaf_of, res_f, res_p, acc_f, acc_p):
    """Results of the composite nodes from their children's (post-order), returns the root's
    ``(fire, purge)``."""
    m = nk.shape[0]
    for i in range(m):
        acc_f[i] = False
        acc_p[i] = False
    for i in range(m):
        if leaf_of[i] < 0:
            f = acc_f[i]
            p = acc_p[i] or (nk[i] == T_PURGING and acc_f[i])
            res_f[i] = f
            res_p[i] = p
        if nparent[i] >= 0:
            acc_f[nparent[i]] = acc_f[nparent[i]] or res_f[i]
            acc_p[nparent[i]] = acc_p[nparent[i]] or res_p[i]
    return res_f[m - 1], res_p[m - 1]


@njit(cache=True, nogil=True, inline="always")
def _on_element(nk, ni, nf, nparent, leaf_of, sl, tm, kn, ls, lf, s, ts, v, wm, res_f, res_p, acc_f, acc_p):
    maxts = sl[s, S_MAXTS]
    for i in range(nk.shape[0]):
        j = leaf_of[i]
        if j < 0:
            continue
        f = False
        kind = nk[i]
        if kind == T_EVENT_TIME:
            if maxts <= wm:
                f = True
            else:
                _register(tm, sl, kn, s, maxts)
        elif kind == T_COUNT:
            ls[s, j] += 1
            if ls[s, j] >= ni[i]:
                ls[s, j] = 0
                f = True
        elif kind == T_CONTINUOUS:
            if maxts <= wm:
                f = True
            else:
                _register(tm, sl, kn, s, maxts)
                if ls[s, j] == NULL:
                    nxt = min(ts - java_rem(ts, ni[i]) + ni[i], maxts)
                    ls[s, j] = nxt
                    _register(tm, sl, kn, s, nxt)
        elif kind == T_DELTA:
            if ls[s, j] == 0:
                ls[s, j] = 1
                lf[s, j] = v
            elif abs(lf[s, j] - v) > nf[i]:
                lf[s, j] = v
                f = True
        res_f[i] = f
        res_p[i] = False
    return _combine(nk, nparent, leaf_of, res_f, res_p, acc_f, acc_p)


@njit(cache=True, nogil=True)
def _on_event_time(nk, ni, nparent, leaf_of, sl, tm, kn, ls, s, t, wm, res_f, res_p, acc_f, acc_p):
    maxts = sl[s, S_MAXTS]
    for i in range(nk.shape[0]):
        j = leaf_of[i]
        if j < 0:
            continue
        f = False
        kind = nk[i]
        if kind == T_EVENT_TIME:
            f = t == maxts
        elif kind == T_CONTINUOUS:
            if t == maxts:
                f = True
            elif ls[s, j] != NULL and ls[s, j] == t:
                f = True
                if maxts == I64_MAX and wm == I64_MAX:
                    # the end of input on a window without an end (Global): fire once and stop, where
                    # Flink fires once per interval up to Long.MAX_VALUE (and on, as the time wraps)
                    ls[s, j] = NULL
                else:
                    nxt = t + ni[i]
                    nxt = maxts if nxt < t else min(nxt, maxts)  # (no wrap past Long.MAX_VALUE)
                    ls[s, j] = nxt
                    _register(tm, sl, kn, s, nxt)
        res_f[i] = f
        res_p[i] = False
    return _combine(nk, nparent, leaf_of, res_f, res_p, acc_f, acc_p)


# ------------------------------------------------------------------ evictors and emission
@njit(cache=True, nogil=True)
def _evict(prog, ev_th, sl, nd, sc, rts, rv, s):
    kind = prog[P_EV_KIND]
    size = sl[s, S_SIZE]
    if size == 0:
        return
    cutoff = I64_MIN
    last_v = 0.0
    if kind == E_COUNT:
        if size <= prog[P_EV_N]:
            return
        drop = size - prog[P_EV_N]
    elif kind == E_TIME:
        mx = I64_MIN
        n = sl[s, S_HEAD]
        while n >= 0:
            mx = max(mx, rts[nd[n, 0]])
            n = nd[n, 1]
        cutoff = mx - prog[P_EV_N]
    else:
        last_v = rv[nd[sl[s, S_TAIL], 0]]
    prev = -1
    n = sl[s, S_HEAD]
    i = 0
    while n >= 0:
        nx = nd[n, 1]
        r = nd[n, 0]
        if kind == E_COUNT:
            gone = i < drop
        elif kind == E_TIME:
            gone = rts[r] <= cutoff
        else:
            gone = abs(rv[r] - last_v) >= ev_th  # DeltaEvictor: delta >= threshold (NaN stays)
        if gone:
            if prev >= 0:
                nd[prev, 1] = nx
            else:
                sl[s, S_HEAD] = nx
            nd[n, 1] = sc[C_FREE_NODE]
            sc[C_FREE_NODE] = n
            sc[C_N_FREE_NODES] += 1
            sl[s, S_SIZE] -= 1
        else:
            prev = n
        n = nx
        i += 1
    sl[s, S_TAIL] = prev


@njit(cache=True, nogil=True)
def _emit(prog, ev_th, sl, nd, sc, rts, rv, s, kind, fi, log, nfi, nlog):
    """``emitWindowContents``: evict before, hand the contents to the function (a firing), evict
    after. Returns the grown ``fi``, ``log`` and their lengths."""
    if prog[P_EV_KIND] != E_NONE and prog[P_EV_AFTER] == 0:
        _evict(prog, ev_th, sl, nd, sc, rts, rv, s)
    size = sl[s, S_SIZE]
    if nfi + 1 > fi.shape[0]:
        fi = grow_rows(fi, nfi + 1)
    if nlog + size > log.shape[0]:
        log = grow(log, nlog + size)
    fi[nfi, 0] = sl[s, S_KEY]
    fi[nfi, 1] = sl[s, S_START]
    fi[nfi, 2] = sl[s, S_END]
    fi[nfi, 3] = sl[s, S_SEQ]
    fi[nfi, 4] = kind
    fi[nfi, 5] = nlog
    n = sl[s, S_HEAD]
    while n >= 0:
        log[nlog] = nd[n, 0]
        nlog += 1
        n = nd[n, 1]
    fi[nfi, 6] = nlog
    sl[s, S_SEQ] += 1
    if prog[P_EV_KIND] != E_NONE and prog[P_EV_AFTER] != 0:
        _evict(prog, ev_th, sl, nd, sc, rts, rv, s)
    return fi, log, nfi + 1, nlog


@njit(cache=True, nogil=True)
def _advance(prog, ev_th, nk, ni, nparent, leaf_of, sl, tm, ls, nd, kh, kn, sc, rts, rv, k, wm,
             fi, log, nfi, nlog, res_f, res_p, acc_f, acc_p):
    """The watermark of key ``k`` moves to ``wm``: its windows' timers up to it fire, each window's
    in timestamp order (``WindowOperator.onEventTime``), cleanup included."""
    event_time = prog[P_ASSIGNER] != GLOBAL
    s = kh[k]
    while s >= 0:
        nxt_slot = sl[s, S_NEXT]
        while True:
            found, t = _pop_timer(tm, sl, s, wm)
            if not found:
                break
            fire, purge = _on_event_time(nk, ni, nparent, leaf_of, sl, tm, kn, ls, s, t, wm, res_f, res_p, acc_f,
                                         acc_p)
            if fire and sl[s, S_SIZE] > 0:
                maxts = sl[s, S_MAXTS]
                kind = EARLY if t < maxts else (ON_TIME if t == maxts else LATE)
                fi, log, nfi, nlog = _emit(prog, ev_th, sl, nd, sc, rts, rv, s, kind, fi, log, nfi, nlog)
            if purge:
                _clear_contents(sl, nd, sc, s)
            if event_time and t == _cleanup_time(sl[s, S_MAXTS], prog[P_LATENESS]):
                _retire(sl, nd, kh, sc, s)
                break
        s = nxt_slot
    nxt = I64_MAX  # the key's earliest timer now
    s = kh[k]
    while s >= 0:
        for j in range(sl[s, S_NT]):
            nxt = min(nxt, tm[s, j])
        s = sl[s, S_NEXT]
    kn[k] = nxt
    return fi, log, nfi, nlog


# ------------------------------------------------------------------ sessions (merging)
@njit(cache=True, nogil=True)
def _hash_bucket(start, end, cap):
    """``HashSet`` bucket of a ``TimeWindow``: ``MathUtils.longToIntWithBitMixing(start + end)``,
    spread as ``HashMap.hash`` (``h ^ h >>> 16``), masked by the table size."""
    u = np.uint64(start + end)  # SplitMix64's finalizer
    u = (u ^ (u >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    u = (u ^ (u >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    u = u ^ (u >> np.uint64(31))
    h = u & np.uint64(0xFFFFFFFF)
    h = h ^ (h >> np.uint64(16))
    return np.int64(h & np.uint64(cap - 1))


@njit(cache=True, nogil=True)
def _hash_order(starts, ends):
    """Iteration order of a ``HashSet`` the windows were added to in the given order."""
    n = starts.shape[0]
    cap = 16
    while n > cap * 3 // 4:
        cap *= 2
    b = np.empty(n, np.int64)
    for i in range(n):
        b[i] = _hash_bucket(starts[i], ends[i], cap)
    return np.argsort(b, kind="mergesort")


@njit(cache=True, nogil=True)
def _session_window(prog, nk, ni, nparent, leaf_of, leaf_kind, sl, tm, ls, lf, nd, kh, kn, sc, k, ts, gap, wm):
    """``MergingWindowSet.addWindow`` for the new window ``[ts, ts + gap)``: the slot of the
    window the row goes to (an existing one, a new one, or the merge of the ones it bridges)."""
    start = ts
    end = ts + gap
    # the in-flight windows of the key that the new one's merge group takes (TimeWindow.mergeWindows:
    # sorted by start, folded while current.intersects(candidate))
    m = 0
    s = kh[k]
    while s >= 0:
        m += 1
        s = sl[s, S_NEXT]
    cand = np.empty(m + 1, np.int64)
    cs = np.empty(m + 1, np.int64)
    m = 0
    s = kh[k]
    while s >= 0:
        cand[m] = s
        cs[m] = sl[s, S_START]
        m += 1
        s = sl[s, S_NEXT]
    cand[m] = -1  # the new window, after the existing ones on equal starts
    cs[m] = start
    order = np.argsort(cs, kind="mergesort")
    g_lo = 0
    g_hi = m + 1
    g_s = I64_MIN
    g_e = I64_MIN
    has_new = False
    for idx in range(m + 1):
        c = cand[order[idx]]
        c_s = start if c < 0 else sl[c, S_START]
        c_e = end if c < 0 else sl[c, S_END]
        if idx > 0 and g_s <= c_e and g_e >= c_s:  # current.intersects(candidate): cover
            g_s = min(g_s, c_s)
            g_e = max(g_e, c_e)
        else:
            if has_new:
                g_hi = idx
                break
            g_lo = idx
            g_s = c_s
            g_e = c_e
        if c < 0:
            has_new = True
    n_g = g_hi - g_lo
    if n_g == 1:  # no merge: a window of its own
        maxts = end - 1
        return _new_slot(sl, tm, ls, lf, kh, sc, k, start, end, maxts, leaf_kind)
    gs = np.empty(n_g, np.int64)
    ge = np.empty(n_g, np.int64)
    gw = np.empty(n_g, np.int64)
    for i in range(n_g):
        c = cand[order[g_lo + i]]
        gw[i] = c
        gs[i] = start if c < 0 else sl[c, S_START]
        ge[i] = end if c < 0 else sl[c, S_END]
    ho = _hash_order(gs, ge)
    merged = np.empty(n_g - 1, np.int64)  # existing windows in HashSet order (the new one removed)
    j = 0
    for i in range(n_g):
        if gw[ho[i]] >= 0:
            merged[j] = gw[ho[i]]
            j += 1
    target = merged[0]
    if n_g - 1 == 1 and sl[target, S_START] == g_s and sl[target, S_END] == g_e:
        return target  # the new window lies inside an existing one: nothing merges
    # onMerge on the result: counts add up, the earliest continuous fire time, the end timer
    new_maxts = g_e - 1
    for i in range(nk.shape[0]):
        j = leaf_of[i]
        if j < 0:
            continue
        if nk[i] == T_COUNT:
            tot = 0
            for x in range(merged.shape[0]):
                tot += ls[merged[x], j]
            ls[target, j] = tot
        elif nk[i] == T_CONTINUOUS:
            mn = NULL
            for x in range(merged.shape[0]):
                v = ls[merged[x], j]
                if v != NULL and (mn == NULL or v < mn):
                    mn = v
            ls[target, j] = mn
    # the merged windows' timers go (EventTimeTrigger.clear, deleteCleanupTimer; a continuous
    # trigger's old timers would find no window), then onMerge registers the result's
    sl[target, S_NT] = 0
    for i in range(nk.shape[0]):
        j = leaf_of[i]
        if j < 0:
            continue
        if nk[i] == T_EVENT_TIME and new_maxts > wm:
            _register(tm, sl, kn, target, new_maxts)
        elif nk[i] == T_CONTINUOUS and ls[target, j] != NULL:
            _register(tm, sl, kn, target, ls[target, j])
    # contents: the target's, then the others' in HashSet order (HeapListState merge)
    for x in range(1, merged.shape[0]):
        o = merged[x]
        if sl[o, S_HEAD] >= 0:
            if sl[target, S_TAIL] >= 0:
                nd[sl[target, S_TAIL], 1] = sl[o, S_HEAD]
            else:
                sl[target, S_HEAD] = sl[o, S_HEAD]
            sl[target, S_TAIL] = sl[o, S_TAIL]
            sl[target, S_SIZE] += sl[o, S_SIZE]
        sl[o, S_HEAD] = -1
        sl[o, S_TAIL] = -1
        sl[o, S_SIZE] = 0
        _retire(sl, nd, kh, sc, o)
    sl[target, S_START] = g_s
    sl[target, S_END] = g_e
    sl[target, S_MAXTS] = new_maxts
    sl[target, S_SEQ] = 0  # a window of its own: its firings are numbered from 0
    return target


# ------------------------------------------------------------------ the step
@njit(cache=True, nogil=True, inline="always")
def _find_slot(sl, kh, k, start):
    s = kh[k]
    while s >= 0:
        if sl[s, S_START] == start:
            return s
        s = sl[s, S_NEXT]
    return -1


@njit(cache=True, nogil=True)
def _ensure(sl, tm, ls, lf, nd, sc, slots_needed, nodes_needed):
    """At least ``slots_needed`` free window slots and ``nodes_needed`` free list nodes: the
    arrays grow geometrically (doubling) and the new entries join the free lists."""
    if sc[C_N_FREE_SLOTS] < slots_needed:
        sl = grow_rows(sl, sc[C_SLOTS] + slots_needed - sc[C_N_FREE_SLOTS])
        tm = grow_rows(tm, sl.shape[0])
        ls = grow_rows(ls, sl.shape[0])
        lf = grow_rows(lf, sl.shape[0])
    while sc[C_SLOTS] < sl.shape[0]:  # unused slots join the free list
        s = sc[C_SLOTS]
        sl[s, S_KEY] = -1
        sl[s, S_NEXT] = sc[C_FREE_SLOT]
        sc[C_FREE_SLOT] = s
        sc[C_SLOTS] += 1
        sc[C_N_FREE_SLOTS] += 1
    if sc[C_N_FREE_NODES] < nodes_needed:
        nd = grow_rows(nd, sc[C_NODES] + nodes_needed - sc[C_N_FREE_NODES])
    while sc[C_NODES] < nd.shape[0]:
        n = sc[C_NODES]
        nd[n, 1] = sc[C_FREE_NODE]
        sc[C_FREE_NODE] = n
        sc[C_NODES] += 1
        sc[C_N_FREE_NODES] += 1
    return sl, tm, ls, lf, nd


@njit(cache=True, nogil=True)
def step(prog, ev_th, nk, ni, nf, nparent, leaf_of, leaf_kind,
         sl, tm, ls, lf, nd, kh, kw, kn, sc, rts, rv,
         codes, rows, ts, vals, wm_before, wm_end, n_keys, gaps):
    """Step a batch: ``codes`` / ``rows`` (row ids) / ``ts`` / ``vals`` (delta column, float64) /
    ``wm_before`` per row in arrival order; then every key's watermark goes to ``wm_end``.
    ``gaps``: the session gap per row (one entry: fixed). Returns the state (grown), the
    firings ``fi`` and ``log``, and ``late`` (uint8 per row: to the late side output)."""
    n = codes.shape[0]
    if kh.shape[0] < n_keys:
        old = kh.shape[0]
        kh = grow(kh, n_keys)
        kw = grow(kw, n_keys)
        kn = grow(kn, n_keys)
        for k in range(old, kh.shape[0]):
            kh[k] = -1
            kw[k] = I64_MIN
            kn[k] = I64_MAX
    assigner = prog[P_ASSIGNER]
    size, slide, offset, lateness = prog[P_SIZE], prog[P_SLIDE], prog[P_OFFSET], prog[P_LATENESS]
    per_row = 1 if assigner != SLIDING else (size + slide - 1) // slide
    m = nk.shape[0]
    res_f = np.zeros(m, np.bool_)
    res_p = np.zeros(m, np.bool_)
    acc_f = np.zeros(m, np.bool_)
    acc_p = np.zeros(m, np.bool_)
    fi = np.empty((max(16, n // 4), F_COLS), np.int64)
    log = np.empty(max(16, n), np.int64)
    nfi = 0
    nlog = 0
    late = np.zeros(n, np.uint8)
    event_time = assigner != GLOBAL
    order, key_ptr = group_by_key(codes, n_keys)  # rows grouped by key, arrival order kept
    # the rows' columns in key order: a key's rows are stepped one after the other, so they are read
    # from consecutive memory, not a key's share of the batch apart (one gather instead of a cache
    # miss per column and row)
    ts_k = np.empty(n, np.int64)
    wm_k = np.empty(n, np.int64)
    v_k = np.empty(n, np.float64)
    r_k = np.empty(n, np.int64)
    per_row_gaps = gaps.shape[0] == n and n != 1
    g_k = np.empty(n if per_row_gaps else 0, np.int64)
    for p in range(n):
        i = order[p]
        ts_k[p] = ts[i]
        wm_k[p] = wm_before[i]
        v_k[p] = vals[i]
        r_k[p] = rows[i]
        if per_row_gaps:
            g_k[p] = gaps[i]
    starts = np.empty(per_row, np.int64)
    for k in range(n_keys):
        for p in range(key_ptr[k], key_ptr[k + 1]):
            if sc[C_N_FREE_SLOTS] <= per_row or sc[C_N_FREE_NODES] <= per_row:
                sl, tm, ls, lf, nd = _ensure(sl, tm, ls, lf, nd, sc, per_row + 1, per_row + 1)
            wm = wm_k[p]
            if wm > kw[k]:  # the watermark moved: the key's timers up to it fire (if it has any)
                if kn[k] <= wm:
                    fi, log, nfi, nlog = _advance(prog, ev_th, nk, ni, nparent, leaf_of, sl, tm, ls, nd, kh, kn, sc,
                                                  rts, rv, k, wm, fi, log, nfi, nlog, res_f, res_p, acc_f, acc_p)
                kw[k] = wm
            t = ts_k[p]
            r = r_k[p]
            skipped = True
            if assigner == SLIDING:
                last = t - (t - offset) % slide
                c = 0
                st = last
                while st > t - size:  # SlidingEventTimeWindows.assignWindows: lastStart down
                    starts[c] = st
                    c += 1
                    st -= slide
            else:
                c = 1
            for w in range(c):
                if assigner == SLIDING:
                    st = starts[w]
                    maxts = st + size - 1
                    if event_time and _cleanup_time(maxts, lateness) <= wm:  # isWindowLate
                        continue
                    s = _find_slot(sl, kh, k, st)
                    if s < 0:
                        s = _new_slot(sl, tm, ls, lf, kh, sc, k, st, st + size, maxts, leaf_kind)
                elif assigner == SESSION:
                    g = g_k[p] if per_row_gaps else gaps[0]
                    s = _session_window(prog, nk, ni, nparent, leaf_of, leaf_kind, sl, tm, ls, lf, nd, kh, kn, sc,
                                        k, t, g, wm)
                    if _cleanup_time(sl[s, S_MAXTS], lateness) <= wm:
                        _retire(sl, nd, kh, sc, s)
                        continue
                else:
                    s = kh[k]
                    if s < 0:
                        s = _new_slot(sl, tm, ls, lf, kh, sc, k, I64_MIN, I64_MIN, I64_MAX, leaf_kind)
                skipped = False
                _append(sl, nd, sc, s, r)
                fire, purge = _on_element(nk, ni, nf, nparent, leaf_of, sl, tm, kn, ls, lf, s, t, v_k[p], wm,
                                          res_f, res_p, acc_f, acc_p)
                if fire and sl[s, S_SIZE] > 0:
                    kind = EARLY if wm < sl[s, S_MAXTS] else LATE
                    fi, log, nfi, nlog = _emit(prog, ev_th, sl, nd, sc, rts, rv, s, kind, fi, log, nfi, nlog)
                if purge:
                    _clear_contents(sl, nd, sc, s)
                if event_time:  # registerCleanupTimer
                    ct = _cleanup_time(sl[s, S_MAXTS], lateness)
                    if ct != I64_MAX:
                        _register(tm, sl, kn, s, ct)
            if skipped and event_time and t + lateness <= wm:  # isElementLate
                late[order[p]] = 1
    for k in range(n_keys):
        if wm_end > kw[k]:
            if kn[k] <= wm_end:
                fi, log, nfi, nlog = _advance(prog, ev_th, nk, ni, nparent, leaf_of, sl, tm, ls, nd, kh, kn, sc, rts,
                                              rv, k, wm_end, fi, log, nfi, nlog, res_f, res_p, acc_f, acc_p)
            kw[k] = wm_end
    return sl, tm, ls, lf, nd, kh, kw, kn, fi[:nfi], log[:nlog], late


@njit(cache=True, nogil=True)
def next_timer(sl, tm, sc):
    """The earliest timer of any live window (I64_MAX: none)."""
    best = I64_MAX
    for s in range(sc[C_SLOTS]):
        if sl[s, S_KEY] < 0:
            continue
        for j in range(sl[s, S_NT]):
            best = min(best, tm[s, j])
    return best


@njit(cache=True, nogil=True)
def live_rows(sl, nd, sc, n_rows):
    """uint8 per row id: still in some window's contents."""
    live = np.zeros(n_rows, np.uint8)
    for s in range(sc[C_SLOTS]):
        if sl[s, S_KEY] < 0:
            continue
        n = sl[s, S_HEAD]
        while n >= 0:
            live[nd[n, 0]] = 1
            n = nd[n, 1]
    return live


@njit(cache=True, nogil=True)
def renumber_rows(sl, nd, sc, new_id):
    """Row ids in every contents list mapped through ``new_id`` (after dropping dead rows)."""
    for s in range(sc[C_SLOTS]):
        if sl[s, S_KEY] < 0:
            continue
        n = sl[s, S_HEAD]
        while n >= 0:
            nd[n, 0] = new_id[nd[n, 0]]
            n = nd[n, 1]


@njit(cache=True, nogil=True)
def time_sorted_segments(log_ts, lo, hi):
    """A permutation putting each segment ``[lo[f], hi[f])`` in time order, stable (ties keep the
    order the window function received them); a segment already in order costs one pass."""
    perm = np.arange(log_ts.shape[0])
    for f in range(lo.shape[0]):
        a, b = lo[f], hi[f]
        for i in range(a + 1, b):
            if log_ts[i] < log_ts[i - 1]:
                perm[a:b] = a + np.argsort(log_ts[a:b], kind="mergesort")
                break
    return perm
