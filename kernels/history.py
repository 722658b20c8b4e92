"""History columns per key: ``prev`` and rolling aggregates over the key's preceding rows,
carried across batches (``colcep.engine.history`` holds the carried rows and calls this).

Plain arrays in and out. Per key the kernel sees the carried rows (the key's last rows of
earlier batches: times ``c_ts``, source values ``c_vals``, CSR by ``c_ptr``) followed by the
batch's rows of that key (``order`` / ``key_ptr`` from ``arrays.group_by_key``), computes every
spec for the batch's rows and returns the rows to carry on: per key the shortest suffix any
spec can still reach from a later row (times never decrease within a key).

Windows are aggregated through blocks of ``BLOCK`` rows aligned on the key's row count (row
``i`` of a key, counted from its first row ever, is in block ``i // BLOCK``): the rows of the
window's first block one by one, then the whole blocks' precomputed sums, then the last block's
rows one by one, all into one accumulator in that order. A value thus depends only on the
window's rows and their positions in the key, never on where batches were cut, and costs
``O(BLOCK + window / BLOCK)``.
"""
import numpy as np
from numba import njit

PREV, ROLL = 0, 1
F_SUM, F_MEAN, F_MIN, F_MAX, F_COUNT = range(5)
BLOCK = 32


@njit(cache=True, nogil=True)
def _within(t_now, t_then, win):
    """``t_now - t_then < win`` for ``t_then <= t_now``, exact over the whole int64 range."""
    return np.uint64(t_now) - np.uint64(t_then) < np.uint64(win)


@njit(cache=True, nogil=True)
def history_batch(c_ptr, c_count, c_ts, c_vals, order, key_ptr, ts, vals, sp_kind, sp_src, sp_func, sp_rows,
                  sp_win, sp_cur):
    """Spec ``s`` (``sp_*[s]``): kind PREV (``sp_rows`` = k) or ROLL (``sp_func``; ``sp_rows`` rows,
    0: unbounded; ``sp_win`` time units, 0: unbounded; ``sp_cur`` 1: the current row included)
    over source ``sp_src``. ``c_count[k]``: rows key ``k`` had before this batch. Returns
    ``(out, n_ptr, n_count, n_ts, n_vals)``: ``out[s, i]`` the value at batch row ``i`` (NaN:
    null), and the new carried rows and counts."""
    n = ts.shape[0]
    n_keys = key_ptr.shape[0] - 1
    n_old = c_ptr.shape[0] - 1
    n_src = vals.shape[0]
    n_sp = sp_kind.shape[0]
    out = np.full((n_sp, n), np.nan)
    seg = np.zeros(n_keys + 1, np.int64)
    n_carry = np.zeros(n_keys, np.int64)
    for k in range(n_keys):
        if k < n_old:
            n_carry[k] = c_ptr[k + 1] - c_ptr[k]
        seg[k + 1] = seg[k] + n_carry[k] + key_ptr[k + 1] - key_ptr[k]
    total = seg[n_keys]
    T = np.empty(total, np.int64)
    V = np.empty((n_src, total), np.float64)
    ROW = np.full(total, -1, np.int64)
    for k in range(n_keys):
        p = seg[k]
        if n_carry[k] > 0:
            for j in range(c_ptr[k], c_ptr[k + 1]):
                T[p] = c_ts[j]
                for s in range(n_src):
                    V[s, p] = c_vals[s, j]
                p += 1
        for q in range(key_ptr[k], key_ptr[k + 1]):
            i = order[q]
            T[p] = ts[i]
            ROW[p] = i
            for s in range(n_src):
                V[s, p] = vals[s, i]
            p += 1
    # per key: its rows' count before the segment's first row, and the segment's whole blocks
    base = np.zeros(n_keys, np.int64)
    blk0 = np.zeros(n_keys + 1, np.int64)          # the key's first block slot in the block arrays
    for k in range(n_keys):
        if k < n_old:
            base[k] = c_count[k] - n_carry[k]
        blk0[k + 1] = blk0[k] + (seg[k + 1] - seg[k]) // BLOCK + 2
    n_blk = blk0[n_keys]
    b_sum = np.zeros((n_src, n_blk), np.float64)
    b_cnt = np.zeros((n_src, n_blk), np.int64)
    b_min = np.full((n_src, n_blk), np.nan)
    b_max = np.full((n_src, n_blk), np.nan)
    for k in range(n_keys):
        a = seg[k]
        b = seg[k + 1]
        if b == a:
            continue
        first_blk = base[k] // BLOCK
        for p in range(a, b):
            slot = blk0[k] + (base[k] + p - a) // BLOCK - first_blk
            for s in range(n_src):
                x = V[s, p]
                if x == x:
                    if b_cnt[s, slot] == 0:
                        b_min[s, slot] = x
                        b_max[s, slot] = x
                    else:
                        if x < b_min[s, slot]:
                            b_min[s, slot] = x
                        if x > b_max[s, slot]:
                            b_max[s, slot] = x
                    b_sum[s, slot] += x
                    b_cnt[s, slot] += 1
    keep = np.empty(n_keys, np.int64)
    for k in range(n_keys):
        a = seg[k]
        b = seg[k + 1]
        first_new = a + n_carry[k]
        first_blk = base[k] // BLOCK
        for sp in range(n_sp):
            src = sp_src[sp]
            rows = sp_rows[sp]
            if sp_kind[sp] == PREV:
                for p in range(first_new, b):
                    j = p - rows
                    if j >= a:
                        out[sp, ROW[p]] = V[src, j]
                continue
            win = sp_win[sp]
            func = sp_func[sp]
            wlo = a
            for p in range(first_new, b):
                hi = p if sp_cur[sp] == 1 else p - 1
                lo = a
                if rows > 0 and hi - rows + 1 > lo:
                    lo = hi - rows + 1
                if win > 0:
                    while wlo <= hi and not _within(T[p], T[wlo], win):
                        wlo += 1
                    if wlo > lo:
                        lo = wlo
                s_ = 0.0
                c_ = 0
                mn = np.nan
                mx = np.nan
                j = lo
                while j <= hi:
                    # a whole block, not the window's first or last: its precomputed aggregates
                    off = (base[k] + j - a) % BLOCK
                    if off == 0 and j != lo and j + BLOCK - 1 < hi:
                        slot = blk0[k] + (base[k] + j - a) // BLOCK - first_blk
                        if b_cnt[src, slot] > 0:
                            if c_ == 0:
                                mn = b_min[src, slot]
                                mx = b_max[src, slot]
                            else:
                                if b_min[src, slot] < mn:
                                    mn = b_min[src, slot]
                                if b_max[src, slot] > mx:
                                    mx = b_max[src, slot]
                            s_ += b_sum[src, slot]
                            c_ += b_cnt[src, slot]
                        j += BLOCK
                        continue
                    x = V[src, j]
                    if x == x:
                        if c_ == 0:
                            mn = x
                            mx = x
                        else:
                            if x < mn:
                                mn = x
                            if x > mx:
                                mx = x
                        s_ += x
                        c_ += 1
                    j += 1
                if func == F_SUM:
                    r = s_
                elif func == F_MEAN:
                    r = s_ / c_ if c_ > 0 else np.nan
                elif func == F_MIN:
                    r = mn
                elif func == F_MAX:
                    r = mx
                else:
                    r = float(c_)
                out[sp, ROW[p]] = r
        # the rows a later row of this key can still reach
        ks = b
        if b > a:
            t_last = T[b - 1]
            for sp in range(n_sp):
                rows = sp_rows[sp]
                if sp_kind[sp] == PREV:
                    need = b - rows
                else:
                    need = a
                    if rows > 0:
                        r_need = rows if sp_cur[sp] == 0 else rows - 1
                        if b - r_need > need:
                            need = b - r_need
                    win = sp_win[sp]
                    if win > 0:
                        j = need
                        while j < b and not _within(t_last, T[j], win):
                            j += 1
                        need = j
                if need < a:
                    need = a
                if need < ks:
                    ks = need
        keep[k] = ks
    n_ptr = np.zeros(n_keys + 1, np.int64)
    n_count = np.zeros(n_keys, np.int64)
    for k in range(n_keys):
        n_ptr[k + 1] = n_ptr[k] + seg[k + 1] - keep[k]
        n_count[k] = base[k] + seg[k + 1] - seg[k]
    m = n_ptr[n_keys]
    n_ts = np.empty(m, np.int64)
    n_vals = np.empty((n_src, m), np.float64)
    for k in range(n_keys):
        w = n_ptr[k]
        for p in range(keep[k], seg[k + 1]):
            n_ts[w] = T[p]
            for s in range(n_src):
                n_vals[s, w] = V[s, p]
            w += 1
    return out, n_ptr, n_count, n_ts, n_vals
