"""The shared match buffer as integer arrays.

A node is one event taken into one stage: ``row`` (the event's global position), ``stage``
and ``parent`` (the node taken before it, -1 at the start of a match). Runs that split
share their common prefix, so the buffer is a forest whose paths are partial matches; a
run points at its last node and its match is the walk back to the root (Flink's
``extractPatterns`` over a single compatible path). ``ref`` counts the runs, held matches
and child nodes pointing at a node; a node whose count drops to zero is released, with its
parent, onto a free list and its slot is reused by the next allocation (the paper's object
pool). ``meta`` holds ``[high_water, free_head, free_count]``.
"""
import numpy as np
from numba import njit

META_HIGH, META_FREE, META_NFREE = 0, 1, 2


def new_buffer(capacity: int = 1024):
    """Empty node arrays: (row, stage, parent, ref, meta)."""
    return (np.zeros(capacity, np.int64), np.zeros(capacity, np.int32), np.full(capacity, -1, np.int64),
            np.zeros(capacity, np.int32), np.array([0, -1, 0], np.int64))


@njit(cache=True, nogil=True)
def reserve(n_row, n_stage, n_parent, n_ref, meta, needed):
    """Grow the node arrays (doubling) so that ``needed`` more nodes can be allocated."""
    cap = n_row.shape[0]
    avail = cap - meta[META_HIGH] + meta[META_NFREE]
    if avail >= needed:
        return n_row, n_stage, n_parent, n_ref
    new_cap = max(2 * cap, cap + needed + 16)
    r = np.zeros(new_cap, np.int64)
    s = np.zeros(new_cap, np.int32)
    p = np.full(new_cap, -1, np.int64)
    f = np.zeros(new_cap, np.int32)
    r[:cap] = n_row
    s[:cap] = n_stage
    p[:cap] = n_parent
    f[:cap] = n_ref
    return r, s, p, f


@njit(cache=True, nogil=True)
def alloc(n_row, n_stage, n_parent, n_ref, meta, row, stage, parent):
    """A new node (capacity must have been reserved); the parent gains a reference."""
    if meta[META_FREE] >= 0:
        i = meta[META_FREE]
        meta[META_FREE] = n_parent[i]
        meta[META_NFREE] -= 1
    else:
        i = meta[META_HIGH]
        meta[META_HIGH] += 1
    n_row[i] = row
    n_stage[i] = stage
    n_parent[i] = parent
    n_ref[i] = 0
    if parent >= 0:
        n_ref[parent] += 1
    return i


@njit(cache=True, nogil=True)
def release(n_parent, n_ref, meta, node):
    """Drop one reference to ``node``; free it, and then its ancestors, when unreferenced."""
    while node >= 0:
        n_ref[node] -= 1
        if n_ref[node] > 0:
            return
        parent = n_parent[node]
        n_parent[node] = meta[META_FREE]
        n_ref[node] = -1  # marks a free slot
        meta[META_FREE] = node
        meta[META_NFREE] += 1
        node = parent


@njit(cache=True, nogil=True)
def path_length(n_parent, node):
    n = 0
    while node >= 0:
        n += 1
        node = n_parent[node]
    return n


@njit(cache=True, nogil=True)
def extract(n_row, n_stage, n_parent, node, rows, stages):
    """Write the match ending at ``node`` into ``rows`` / ``stages`` in arrival order;
    returns its length (the arrays must be long enough: see ``path_length``)."""
    n = path_length(n_parent, node)
    i = n - 1
    while node >= 0:
        rows[i] = n_row[node]
        stages[i] = n_stage[node]
        node = n_parent[node]
        i -= 1
    return n


@njit(cache=True, nogil=True)
def compare_paths(n_row, n_stage, n_parent, a, b):
    """Compare two matches by their events' positions in arrival order, lexicographically,
    then by the stages the events were taken into (-1, 0 or 1). Walks both paths once from
    the leaves, without allocating; a shared prefix (the same node) ends the walk."""
    la = path_length(n_parent, a)
    lb = path_length(n_parent, b)
    x = a
    for _ in range(la - min(la, lb)):
        x = n_parent[x]
    y = b
    for _ in range(lb - min(la, lb)):
        y = n_parent[y]
    row_cmp = 0
    stage_cmp = 0
    while x != y:  # equal depths; the last difference seen is the first from the root
        if n_row[x] != n_row[y]:
            row_cmp = -1 if n_row[x] < n_row[y] else 1
        if n_stage[x] != n_stage[y]:
            stage_cmp = -1 if n_stage[x] < n_stage[y] else 1
        x = n_parent[x]
        y = n_parent[y]
    if row_cmp != 0:
        return row_cmp
    if la != lb:
        return -1 if la < lb else 1
    return stage_cmp


@njit(cache=True, nogil=True)
def live_nodes(n_ref, high):
    """Number of allocated, unreleased nodes."""
    n = 0
    for i in range(high):
        if n_ref[i] >= 0:
            n += 1
    return n


@njit(cache=True, nogil=True)
def min_live_row(n_row, n_ref, high):
    """The oldest event position any live node refers to (-1 when the buffer is empty)."""
    m = -1
    for i in range(high):
        if n_ref[i] >= 0 and (m < 0 or n_row[i] < m):
            m = n_row[i]
    return m
