"""Window kernels: Flink's window assigners and per-window aggregation over int64 arrays.

Conventions: times are int64 in the time column's unit; rows arrive grouped by key
(``key_ptr``, CSR: key ``k`` owns positions ``key_ptr[k]:key_ptr[k + 1]``) and, for time
windows, in time order within a key. Every window of a key is then a contiguous range of
positions ``[lo, hi)``, so one range-aggregation kernel serves every assigner. Window lists
are emitted per key in start order and grown geometrically.

Flink sources transcribed (flink-streaming-java, ``org.apache.flink.streaming.api.windowing``):
``TimeWindow.getWindowStartWithOffset``, ``SlidingEventTimeWindows.assignWindows``,
``TimeWindow.mergeWindows`` / ``intersects`` / ``cover``, ``KeyedStream.countWindow``
(``GlobalWindows`` + ``CountTrigger`` [+ ``PurgingTrigger`` | ``CountEvictor``]).
"""
import numpy as np
from numba import njit

from .arrays import grow

_MIN = np.iinfo(np.int64).min
_BLOCK = 4096


@njit(cache=True, nogil=True)
def window_start(ts, offset, size):
    """``TimeWindow.getWindowStartWithOffset``: ``remainder = (ts - offset) % size`` (Java),
    ``start = ts - remainder``, or ``ts - (remainder + size)`` when the remainder is negative.
    That is ``ts - floormod(ts - offset, size)``, Numba's ``%`` on ints; it equals the older
    ``ts - (ts - offset + size) % size`` wherever ``ts - offset + size >= 0``."""
    return ts - (ts - offset) % size


@njit(cache=True, nogil=True)
def _grow4(a, b, c, d, n):
    return grow(a, n), grow(b, n), grow(c, n), grow(d, n)


@njit(cache=True, nogil=True)
def first_unsorted(ts, key_ptr):
    """Position of the first row earlier than its predecessor of the same key (-1: sorted)."""
    for k in range(key_ptr.shape[0] - 1):
        for i in range(key_ptr[k] + 1, key_ptr[k + 1]):
            if ts[i] < ts[i - 1]:
                return i
    return -1


@njit(cache=True, nogil=True)
def tumbling_assign(ts, size, offset):
    """``TumblingEventTimeWindows``: one window per row, ``start = window_start(ts, offset, size)``."""
    out = np.empty(ts.shape[0], np.int64)
    for i in range(ts.shape[0]):
        out[i] = window_start(ts[i], offset, size)
    return out


@njit(cache=True, nogil=True)
def n_windows(ts, size, slide, offset):
    """How many windows ``SlidingEventTimeWindows`` gives a row: the ``start = lastStart - j *
    slide > ts - size``, ``j >= 0``; ``floor`` or ``ceil(size / slide)``, 0 in a gap."""
    last = window_start(ts, offset, slide)
    if last <= ts - size:
        return 0
    return (last - (ts - size) - 1) // slide + 1


@njit(cache=True, nogil=True)
def sliding_assign(ts, size, slide, offset):
    """``SlidingEventTimeWindows.assignWindows`` per row, in input order: ``lastStart =
    window_start(ts, offset, slide)``, then every ``start`` from ``lastStart`` down by ``slide``
    while ``start > ts - size``; returned in ascending start order per row as ``(row, start)``.
    A row falling in a gap (``slide > size``) gets no window, as in Flink. Output grows
    geometrically, sized per block of rows before the block's inner loop runs."""
    n = ts.shape[0]
    rows = np.empty(max(16, n), np.int64)
    starts = np.empty(max(16, n), np.int64)
    m = 0
    for b0 in range(0, n, _BLOCK):
        b1 = min(n, b0 + _BLOCK)
        need = m
        for i in range(b0, b1):
            need += n_windows(ts[i], size, slide, offset)
        if need > rows.shape[0]:
            rows = grow(rows, need)
            starts = grow(starts, need)
        m = _sliding_fill(ts, size, slide, offset, b0, b1, rows, starts, m)
    return rows[:m], starts[:m]


@njit(cache=True, nogil=True)
def _sliding_fill(ts, size, slide, offset, b0, b1, rows, starts, m):
    for i in range(b0, b1):
        t = ts[i]
        last = window_start(t, offset, slide)
        c = 0
        s = last
        while s > t - size:  # Flink's loop, counted, then written in ascending order
            c += 1
            s -= slide
        for j in range(c):
            rows[m + j] = i
            starts[m + j] = last - (c - 1 - j) * slide
        m += c
    return m


@njit(cache=True, nogil=True)
def time_windows(ts, key_ptr, size, slide, offset):
    """The non-empty sliding windows (tumbling: ``slide == size``) of every key, over rows in
    time order within a key: ``(w_key, w_start, w_lo, w_hi)`` in key, then start order.

    Row ``i`` belongs to the starts ``lastStart(ts_i) - j * slide > ts_i - size`` (Flink's
    rule); starts already emitted for an earlier row are skipped, so the walk down stops at
    the last emitted start and the work is O(rows + windows). A new start ``s`` first seen
    at row ``i`` has its rows at ``[i, hi)``, ``hi`` the first row with ``ts >= s + size``."""
    cap = max(16, ts.shape[0] // 8)
    w_key = np.empty(cap, np.int64)
    w_start = np.empty(cap, np.int64)
    w_lo = np.empty(cap, np.int64)
    w_hi = np.empty(cap, np.int64)
    per_row = (size + slide - 1) // slide
    m = 0
    for k in range(key_ptr.shape[0] - 1):
        lo, hi = key_ptr[k], key_ptr[k + 1]
        if lo == hi:
            continue
        span = (window_start(ts[hi - 1], offset, slide) - window_start(ts[lo], offset, slide)) // slide
        need = m + min((hi - lo) * per_row, span + per_row)
        if need > w_key.shape[0]:
            w_key, w_start, w_lo, w_hi = _grow4(w_key, w_start, w_lo, w_hi, need)
        m = _time_windows_key(ts, k, lo, hi, size, slide, offset, w_key, w_start, w_lo, w_hi, m)
    return w_key[:m], w_start[:m], w_lo[:m], w_hi[:m]


@njit(cache=True, nogil=True)
def _time_windows_key(ts, k, lo, end_k, size, slide, offset, w_key, w_start, w_lo, w_hi, m):
    prev = _MIN
    h = lo
    for i in range(lo, end_k):
        t = ts[i]
        last = window_start(t, offset, slide)
        c = 0
        s = last
        while s > t - size and s > prev:
            c += 1
            s -= slide
        if c == 0:
            continue
        if h < i:
            h = i
        for j in range(c):
            s = last - (c - 1 - j) * slide
            while h < end_k and ts[h] < s + size:
                h += 1
            w_key[m] = k
            w_start[m] = s
            w_lo[m] = i
            w_hi[m] = h
            m += 1
        prev = last
    return m


@njit(cache=True, nogil=True)
def session_windows(ts, gap, key_ptr):
    """``EventTimeSessionWindows`` / ``DynamicEventTimeSessionWindows`` + ``TimeWindow.mergeWindows``.

    Each row opens ``[ts, ts + gap)`` (``gap`` has one entry, or one per row). Windows sorted
    by start are folded left to right: while ``current.intersects(candidate)`` (``start <=
    other.end && end >= other.start``: touching windows merge) the current window becomes
    ``current.cover(candidate)`` (``min`` of starts, ``max`` of ends); otherwise a new session
    starts. Returns ``(w_key, w_start, w_end, w_lo, w_hi)``."""
    n = ts.shape[0]
    per_row = gap.shape[0] == n and n != 1
    cap = max(16, n // 8)
    w_key = np.empty(cap, np.int64)
    w_start = np.empty(cap, np.int64)
    w_end = np.empty(cap, np.int64)
    w_lo = np.empty(cap, np.int64)
    w_hi = np.empty(cap, np.int64)
    m = 0
    for k in range(key_ptr.shape[0] - 1):
        lo, hi = key_ptr[k], key_ptr[k + 1]
        if lo == hi:
            continue
        if m + hi - lo > w_key.shape[0]:  # at most one session per row
            w_key, w_start, w_lo, w_hi = _grow4(w_key, w_start, w_lo, w_hi, m + hi - lo)
            w_end = grow(w_end, m + hi - lo)
        m = _sessions_key(ts, gap, per_row, k, lo, hi, w_key, w_start, w_end, w_lo, w_hi, m)
    return w_key[:m], w_start[:m], w_end[:m], w_lo[:m], w_hi[:m]


@njit(cache=True, nogil=True)
def _sessions_key(ts, gap, per_row, k, lo, hi, w_key, w_start, w_end, w_lo, w_hi, m):
    cs = ts[lo]
    ce = cs + (gap[lo] if per_row else gap[0])
    for i in range(lo + 1, hi):
        s = ts[i]
        e = s + (gap[i] if per_row else gap[0])
        if cs <= e and ce >= s:  # current.intersects(candidate)
            cs = min(cs, s)      # current = current.cover(candidate)
            ce = max(ce, e)
        else:
            w_key[m] = k
            w_start[m] = cs
            w_end[m] = ce
            w_lo[m] = lo
            w_hi[m] = i
            m += 1
            lo, cs, ce = i, s, e
    w_key[m] = k
    w_start[m] = cs
    w_end[m] = ce
    w_lo[m] = lo
    w_hi[m] = hi
    return m + 1


@njit(cache=True, nogil=True)
def count_windows(key_ptr, size, slide, purging, partial, base, fired):
    """``KeyedStream.countWindow``: per key, ``CountTrigger.of(slide)`` fires at the key's
    ``c``-th row for ``c = slide, 2 * slide, ...``. Tumbling (``purging``, ``slide == size``,
    ``PurgingTrigger``) evaluates rows ``[c - size, c)``; sliding (``CountEvictor.of(size)``)
    keeps the last ``size`` rows, ``[max(0, c - size), c)``. Rows after the last firing are
    never evaluated in Flink; ``partial`` also evaluates what the window holds at the end.

    ``base[k]`` is the key's count of rows before its first position here and ``fired[k]``
    the count at its last firing (streaming; zeros for one batch). Returns ``(w_key, w_id,
    w_lo, w_hi)``, ``w_id`` numbering firings per key from 0."""
    n_keys = key_ptr.shape[0] - 1
    cap = 16
    w_key = np.empty(cap, np.int64)
    w_id = np.empty(cap, np.int64)
    w_lo = np.empty(cap, np.int64)
    w_hi = np.empty(cap, np.int64)
    m = 0
    for k in range(n_keys):
        p0 = key_ptr[k] - base[k]  # position of the key's absolute row 0
        total = base[k] + key_ptr[k + 1] - key_ptr[k]
        need = m + (total - fired[k]) // slide + 1
        if need > w_key.shape[0]:
            w_key, w_id, w_lo, w_hi = _grow4(w_key, w_id, w_lo, w_hi, need)
        c = fired[k] + slide
        while c <= total:
            w_key[m] = k
            w_id[m] = c // slide - 1
            w_lo[m] = p0 + max(0, c - size)
            w_hi[m] = p0 + c
            m += 1
            c += slide
        last = c - slide
        if partial and total > last:
            a = max(0, last if purging else total - size)
            w_key[m] = k
            w_id[m] = c // slide - 1
            w_lo[m] = p0 + a
            w_hi[m] = p0 + total
            m += 1
    return w_key[:m], w_id[:m], w_lo[:m], w_hi[:m]


@njit(cache=True, nogil=True)
def explode_ranges(w_lo, w_hi, total):
    """``(pos, win)`` for every position of every window, windows in order (``total`` pairs)."""
    pos = np.empty(total, np.int64)
    win = np.empty(total, np.int64)
    m = 0
    for w in range(w_lo.shape[0]):
        for p in range(w_lo[w], w_hi[w]):
            pos[m] = p
            win[m] = w
            m += 1
    return pos, win


@njit(cache=True, nogil=True)
def range_count_first_last(valid, w_lo, w_hi):
    """Per window: non-null count and the positions of the first and last non-null row (-1:
    none). ``valid`` is a uint8 mask, or empty when every row is valid."""
    nw = w_lo.shape[0]
    all_valid = valid.shape[0] == 0
    cnt = np.zeros(nw, np.int64)
    first = np.full(nw, -1, np.int64)
    last = np.full(nw, -1, np.int64)
    for w in range(nw):
        if all_valid:
            if w_hi[w] > w_lo[w]:
                cnt[w] = w_hi[w] - w_lo[w]
                first[w] = w_lo[w]
                last[w] = w_hi[w] - 1
            continue
        for p in range(w_lo[w], w_hi[w]):
            if valid[p]:
                if first[w] < 0:
                    first[w] = p
                last[w] = p
                cnt[w] += 1
    return cnt, first, last


@njit(cache=True, nogil=True)
def range_sum_min_max(vals, valid, w_lo, w_hi):
    """Per window over non-null rows: the sum (in ``vals``' dtype) and the positions of the
    minimum and maximum (-1: none; the first one on ties). NaN never beats a number, so a
    NaN is the minimum or maximum only of an all-NaN window."""
    nw = w_lo.shape[0]
    all_valid = valid.shape[0] == 0
    sums = np.zeros(nw, vals.dtype)
    amin = np.full(nw, -1, np.int64)
    amax = np.full(nw, -1, np.int64)
    for w in range(nw):
        acc = sums[w]
        lo_p = -1
        hi_p = -1
        for p in range(w_lo[w], w_hi[w]):
            if not all_valid and not valid[p]:
                continue
            v = vals[p]
            acc += v
            if lo_p < 0:
                lo_p = p
                hi_p = p
                continue
            cur_lo = vals[lo_p]
            cur_hi = vals[hi_p]
            if v < cur_lo or (cur_lo != cur_lo and v == v):
                lo_p = p
            if v > cur_hi or (cur_hi != cur_hi and v == v):
                hi_p = p
        sums[w] = acc
        amin[w] = lo_p
        amax[w] = hi_p
    return sums, amin, amax
