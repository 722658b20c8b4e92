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
def group_by_key_in_order(codes, n_keys, ts, last_ts):
    """``group_by_key`` that also checks that ``ts`` never decreases within a key, given each
    key's last time so far (``last_ts``, updated in place when the check passes). Returns
    ``(order, key_ptr, bad)``: ``bad`` is the first row out of order, -1 if none."""
    cur = last_ts.copy()
    for i in range(codes.shape[0]):
        k = codes[i]
        if ts[i] < cur[k]:
            return np.empty(0, np.int64), np.zeros(n_keys + 1, np.int64), i
        cur[k] = ts[i]
    last_ts[:] = cur
    order, key_ptr = group_by_key(codes, n_keys)
    return order, key_ptr, -1
