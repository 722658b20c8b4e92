"""Compaction of the shared buffer to what a set of runs and held matches still reach: the
live part of a state, renumbered densely (snapshots, per-key export)."""
import numpy as np
from numba import njit

from .buffer import JOIN


@njit(cache=True, nogil=True)
def compact_buffer(n_row, n_stage, n_parent, high, roots):
    """The nodes reachable from ``roots`` (node ids, -1 ignored) through parents and JOIN
    sides, in their old order: ``(row, stage, parent, ref, new_roots)``. ``ref`` is recounted
    (one per root pointing at a node, one per node pointing at it)."""
    keep = np.zeros(high, np.uint8)
    stack = np.empty(high + roots.shape[0] + 1, np.int64)
    sp = 0
    for r in roots:
        if r >= 0 and keep[r] == 0:
            keep[r] = 1
            stack[sp] = r
            sp += 1
    while sp > 0:
        sp -= 1
        x = stack[sp]
        p = n_parent[x]
        if p >= 0 and keep[p] == 0:
            keep[p] = 1
            stack[sp] = p
            sp += 1
        if n_stage[x] == JOIN:
            b = n_row[x]
            if keep[b] == 0:
                keep[b] = 1
                stack[sp] = b
                sp += 1
    new_id = np.full(high, -1, np.int64)
    n = 0
    for i in range(high):
        if keep[i]:
            new_id[i] = n
            n += 1
    row = np.empty(n, np.int64)
    stage = np.empty(n, np.int32)
    parent = np.full(n, -1, np.int64)
    ref = np.zeros(n, np.int32)
    for i in range(high):
        if keep[i]:
            y = new_id[i]
            stage[y] = n_stage[i]
            row[y] = n_row[i]
            if n_parent[i] >= 0:
                parent[y] = new_id[n_parent[i]]
                ref[parent[y]] += 1
            if n_stage[i] == JOIN:
                row[y] = new_id[n_row[i]]
                ref[row[y]] += 1
    new_roots = np.full(roots.shape[0], -1, np.int64)
    for i in range(roots.shape[0]):
        if roots[i] >= 0:
            new_roots[i] = new_id[roots[i]]
            ref[new_roots[i]] += 1
    return row, stage, parent, ref, new_roots
