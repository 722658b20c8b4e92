"""Array helpers shared by the kernels: geometric growth and grouping rows by key."""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def grow(a, n):
    """``a`` if it holds ``n`` items, else a copy at least twice as long."""
    if a.shape[0] >= n:
        return a
    b = np.empty(max(2 * a.shape[0], n), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True, nogil=True, _nrt=False)
def copy_into(dst, at, src, frm, n):
    """``dst[at:at + n] = src[frm:frm + n]`` for 1-D arrays and ``at``, ``frm`` >= 0, with no
    slice made and no reference counted (a slice, or this function inlined by Numba, counts the
    arrays' references: atomic operations, per key in a loop over keys) and unsigned indices (no
    wrapping of negative ones), so that the loop compiles to a block copy."""
    a, f = np.uint64(at), np.uint64(frm)
    for i in range(np.uint64(n)):
        dst[a + i] = src[f + i]


@njit(cache=True, nogil=True)
def grow_rows(a, n):
    """``grow`` for a 2-D array, along its first axis."""
    if a.shape[0] >= n:
        return a
    b = np.empty((max(2 * a.shape[0], n), a.shape[1]), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True, nogil=True)
def group_by_key(codes, n_keys):
    """Stable counting sort by key code: ``(order, key_ptr)``; rows of a key keep input order."""
    n = codes.shape[0]
    key_ptr = np.zeros(n_keys + 1, np.int64)
    for i in range(n):
        key_ptr[codes[i] + 1] += 1
    for k in range(n_keys):
        key_ptr[k + 1] += key_ptr[k]
    pos = key_ptr[:n_keys].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        k = codes[i]
        order[pos[k]] = i
        pos[k] += 1
    return order, key_ptr


@njit(cache=True, nogil=True)
def shard_rows(codes, threads):
    """A batch's rows (key ``codes``) split into shards, key code ``c`` in shard ``c %
    threads``: ``(by_shard, shard_lo)``, shard ``s``'s rows ``by_shard[shard_lo[s]:shard_lo[s +
    1]]`` in arrival order. One shard: ``by_shard`` is empty, standing for every row in order."""
    n = codes.shape[0]
    shard_lo = np.zeros(threads + 1, np.int64)
    if threads == 1:  # (all of them, in arrival order: no array of 0, 1, 2 ... made and read)
        shard_lo[1] = n
        return np.empty(0, np.int64), shard_lo
    # each row's shard, by a mask for a power of two (a division costs ~10 ns a row: codes >= 0);
    # then the counting sort of group_by_key, written out: group_by_key over two values took 8.0
    # ms a 2^20-row batch against this loop's 2.4
    shard = np.empty(n, np.int32)
    mask = threads - 1
    if threads & mask == 0:
        for i in range(n):
            shard[i] = codes[i] & mask
    else:
        t = np.uint64(threads)
        for i in range(n):
            shard[i] = np.uint64(codes[i]) % t
    for i in range(n):
        shard_lo[shard[i] + 1] += 1
    for s in range(threads):
        shard_lo[s + 1] += shard_lo[s]
    by_shard = np.empty(n, np.int64)
    at = shard_lo[:threads].copy()
    for i in range(n):
        s = shard[i]
        by_shard[at[s]] = i
        at[s] += 1
    return by_shard, shard_lo


@njit(cache=True, nogil=True)
def layout_shard(codes, by_shard, lo, hi, n_local, threads, chunk, rows, dest):
    """Shard ``by_shard[lo:hi]``'s rows in the order its kernel calls read them, written to
    ``rows[lo:hi]``: calls of ``chunk`` consecutive rows (arrival order), each call's rows grouped
    by local key (code // ``threads``, ``n_local`` of them), a key's rows in arrival order; and
    where each went, ``dest[j]`` for row ``by_shard[j]`` (``scatter_rows``; an empty ``by_shard``:
    row ``j``).
    Returns ``(call_lo, key_ptr)``: call ``c`` takes ``rows[call_lo[c]:call_lo[c + 1]]``, its rows
    per local key ``key_ptr[c]`` (offsets within the call). Shards write disjoint parts of
    ``rows``: each may be laid out on its own thread."""
    n_calls = (hi - lo + chunk - 1) // chunk
    call_lo = np.empty(n_calls + 1, np.int64)
    key_ptr = np.zeros((n_calls, n_local + 1), np.int64)
    cursor = np.empty(max(n_local, 1), np.int64)
    # the local key code // threads by a shift for a power of two (codes >= 0): a division costs
    # ~10 ns, and it is taken twice a row
    shift = 0
    while (1 << shift) < threads:
        shift += 1
    by_shift = (1 << shift) == threads
    listed = by_shard.shape[0] > 0  # (else one shard: row j stands for by_shard[j])
    for c in range(n_calls):
        a = lo + c * chunk
        b = min(a + chunk, hi)
        p = key_ptr[c]
        for j in range(a, b):
            x = codes[by_shard[j] if listed else j]
            p[(x >> shift if by_shift else x // threads) + 1] += 1
        for k in range(n_local):
            p[k + 1] += p[k]
            cursor[k] = p[k]
        for j in range(a, b):
            r = by_shard[j] if listed else j
            x = codes[r]
            k = x >> shift if by_shift else x // threads
            rows[a + cursor[k]] = r
            dest[j] = a + cursor[k]
            cursor[k] += 1
        call_lo[c] = a
    call_lo[n_calls] = hi
    return call_lo, key_ptr


@njit(cache=True, nogil=True)
def scatter_rows(src, by_shard, dest, lo, hi, out):
    """Shard ``by_shard[lo:hi]``'s values of the batch column ``src`` in layout order
    (``layout_shard``), into ``out``: read in arrival order, written to their places. (Gathering
    them in layout order instead reads the column at random: a third slower on 10^6 rows of
    5,000 keys, the column not in the cache.)"""
    if by_shard.shape[0] == 0:  # (one shard: row j)
        for j in range(lo, hi):
            out[dest[j] - lo] = src[j]
        return
    for j in range(lo, hi):
        out[dest[j] - lo] = src[by_shard[j]]


@njit(cache=True, nogil=True)
def first_out_of_order(codes, ts, last_ts):
    """The first row whose time is earlier than its key's previous one (``last_ts`` holds each
    key's last time so far and is updated in place when every row is in order), or -1."""
    cur = last_ts.copy()
    for i in range(codes.shape[0]):
        k = codes[i]
        if ts[i] < cur[k]:
            return i
        cur[k] = ts[i]
    last_ts[:] = cur
    return -1


@njit(cache=True, nogil=True)
def first_seen(idx, n_values):
    """``(rank, seen)`` of dictionary indices ``idx`` (int64): ``rank[v]`` is the order in which
    value ``v`` first appears (-1: never), ``seen`` the values in that order."""
    rank = np.full(n_values, -1, np.int64)
    seen = np.empty(n_values, np.int64)
    m = 0
    for i in range(idx.shape[0]):
        v = idx[i]
        if rank[v] < 0:
            rank[v] = m
            seen[m] = v
            m += 1
    return rank, seen[:m]


@njit(cache=True, nogil=True)
def first_out_of_order_by(codes, ts, seq, last_ts, last_seq):
    """``first_out_of_order`` by (time, seq): the first row that comes before its key's previous
    row in that order, or -1 (then ``last_ts`` / ``last_seq`` hold each key's last row so far)."""
    cur_ts = last_ts.copy()
    cur_seq = last_seq.copy()
    for i in range(codes.shape[0]):
        k = codes[i]
        if ts[i] < cur_ts[k] or (ts[i] == cur_ts[k] and seq[i] < cur_seq[k]):
            return i
        cur_ts[k] = ts[i]
        cur_seq[k] = seq[i]
    last_ts[:] = cur_ts
    last_seq[:] = cur_seq
    return -1


@njit(cache=True, nogil=True)
def key_time_order(codes, ts, seq, n_keys):
    """``(order, moved)``: the rows grouped by key code (stable counting sort), each key's rows
    in (time, seq) order (a key already in that order costs one pass; another is merge-sorted,
    stable); ``moved`` is False when ``order`` is the identity."""
    order, key_ptr = group_by_key(codes, n_keys)
    for k in range(n_keys):
        lo = key_ptr[k]
        hi = key_ptr[k + 1]
        ordered = True
        for j in range(lo + 1, hi):
            a = order[j - 1]
            b = order[j]
            if ts[b] < ts[a] or (ts[b] == ts[a] and seq[b] < seq[a]):
                ordered = False
                break
        if not ordered:
            sub = order[lo:hi].copy()
            sub = sub[np.argsort(seq[sub], kind="mergesort")]
            order[lo:hi] = sub[np.argsort(ts[sub], kind="mergesort")]
    moved = False
    for i in range(order.shape[0]):
        if order[i] != i:
            moved = True
            break
    return order, moved


@njit(cache=True, nogil=True)
def matches_in_emission_order(m_row, m_key, m_off, e_row, e_stage, lo, hi, first_id):
    """Order the kernel's matches by emitting row (a stable counting sort over ``[lo, hi)``;
    rows past ``hi``, as at the end of input, come last) and flatten their events. Returns
    ``(order, rows, stages, ids, keys)``: per event its row, stage, match id (``first_id`` on,
    in the new order) and key code; ``order`` maps the new match order to the kernel's."""
    nm = m_row.shape[0]
    order = emission_order(m_row, lo, hi)
    total = m_off[nm] - m_off[0]
    rows = np.empty(total, np.int64)
    stages = np.empty(total, np.int32)
    ids = np.empty(total, np.int64)
    keys = np.empty(total, np.int64)
    w = 0
    for q in range(nm):
        i = order[q]
        for x in range(m_off[i], m_off[i + 1]):
            rows[w] = e_row[x]
            stages[w] = e_stage[x]
            ids[w] = first_id + q
            keys[w] = m_key[i]
            w += 1
    return order, rows, stages, ids, keys


@njit(cache=True, nogil=True)
def emission_order(m_row, lo, hi):
    """The matches' order by emitting row: a stable counting sort over ``[lo, hi)``, rows past
    ``hi`` (as at the end of input) last."""
    nm = m_row.shape[0]
    width = hi - lo + 1
    start = np.zeros(width + 1, np.int64)
    for i in range(nm):
        start[min(m_row[i] - lo, width - 1) + 1] += 1
    for b in range(width):
        start[b + 1] += start[b]
    order = np.empty(nm, np.int64)
    for i in range(nm):
        b = min(m_row[i] - lo, width - 1)
        order[start[b]] = i
        start[b] += 1
    return order


@njit(cache=True, nogil=True)
def merge_places(sort_key, n_events, ptr):
    """Merge the sorted runs ``sort_key[ptr[s]:ptr[s + 1]]`` (one per thread, no key in two):
    each match's place in the merged order and the place of its first event (``n_events``:
    events per match)."""
    n = sort_key.shape[0]
    t = ptr.shape[0] - 1
    head = ptr[:t].copy()
    place = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    ev = 0
    for q in range(n):
        best = -1
        for s in range(t):
            if head[s] < ptr[s + 1] and (best < 0 or sort_key[head[s]] < sort_key[head[best]]):
                best = s
        i = head[best]
        head[best] += 1
        place[i] = q
        first[i] = ev
        ev += n_events[i]
    return place, first


@njit(cache=True, nogil=True)
def place_events(dst_start, order, m_off, e_row, e_stage, match_a, match_b, out_rows, out_stages, out_a, out_b,
                 lo, hi):
    """Copy the events of match ``order[i]`` (``m_off``, ``e_row``, ``e_stage``: a kernel's
    output) to ``dst_start[i]`` on in ``out_rows`` / ``out_stages``, with ``match_a[i]`` and
    ``match_b[i]`` in ``out_a`` / ``out_b``, for ``i`` in ``[lo, hi)``: one thread's matches
    put into the merged output."""
    for i in range(lo, hi):
        m = order[i]
        d = dst_start[i]
        a = match_a[i]
        b = match_b[i]
        for x in range(m_off[m], m_off[m + 1]):
            out_rows[d] = e_row[x]
            out_stages[d] = e_stage[x]
            out_a[d] = a
            out_b[d] = b
            d += 1
